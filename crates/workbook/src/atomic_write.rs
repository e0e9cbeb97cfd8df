//! Writing files so that a crash or an error never leaves half a file, or half a set of files,
//! behind, and changes nothing the user did not ask to change.
//!
//! - One file ([`write()`]) or several that belong together ([`FileSet`]: weights and their
//!   config, a report's pages): every new file is written in full under a temporary name in
//!   its destination's folder and flushed; only then is each renamed over its destination.
//!   Until the whole set is in place, every replaced file is kept (a hard link to it, or a copy
//!   where the filesystem has no hard links); if a rename fails, the files already replaced get
//!   their old contents back and new ones are removed, so the old set is intact. Readers see the
//!   old file or the new one, never a mix.
//! - Permissions: a new file gets the mode the umask gives (`0o666 & !umask`, as `cp` and
//!   PyTorch's `torch.save` do); a file replaced keeps its permission bits.
//! - Symbolic links: a destination that is a symbolic link is refused (renaming over it would
//!   replace the link with a regular file), unless [`set_follow_symlinks`]`(true)` (the CLI's
//!   `--follow-symlinks`): then the link's target is replaced and the link stays.
//! - A destination that is one of the inputs (the same file, whatever the path says) is refused
//!   by [`refuse_overwriting`] before anything is written.
//!
//! ```
//! use workbook::atomic_write::{self, FileSet};
//! let dir = tempfile::tempdir().unwrap();
//! let path = dir.path().join("out.json");
//! atomic_write::write(&path, b"{}").unwrap();
//! assert_eq!(std::fs::read(&path).unwrap(), b"{}");
//! // A pair: if the second cannot be replaced, the first keeps its old contents.
//! std::fs::create_dir(dir.path().join("b.json")).unwrap();
//! std::fs::write(dir.path().join("b.json/keep"), b"").unwrap();
//! let mut set = FileSet::new();
//! set.add(&path, b"new").unwrap();
//! set.add(&dir.path().join("b.json"), b"new").unwrap();
//! assert!(set.commit().is_err());
//! assert_eq!(std::fs::read(&path).unwrap(), b"{}");
//! ```

use crate::error::{Result, WorkbookError};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};

static FOLLOW_SYMLINKS: AtomicBool = AtomicBool::new(false);

/// Whether a destination that is a symbolic link is written through (its target replaced) or
/// refused (the default). Process-wide, set once by the CLI from `--follow-symlinks`.
pub fn set_follow_symlinks(follow: bool) {
    FOLLOW_SYMLINKS.store(follow, Ordering::Relaxed);
}

/// See [`set_follow_symlinks`].
pub fn follow_symlinks() -> bool {
    FOLLOW_SYMLINKS.load(Ordering::Relaxed)
}

/// Atomically replaces `path` with `bytes`, creating parent folders as needed.
pub fn write(path: &Path, bytes: &[u8]) -> Result<()> {
    let mut set = FileSet::new();
    set.add(path, bytes)?;
    set.commit()
}

/// Whether `a` and `b` are the same file (the same inode, whichever path, link or hard link
/// names it). A path that does not exist is no file.
pub fn same_file(a: &Path, b: &Path) -> bool {
    let (Ok(ma), Ok(mb)) = (std::fs::metadata(a), std::fs::metadata(b)) else {
        return false;
    };
    #[cfg(unix)]
    {
        use std::os::unix::fs::MetadataExt;
        ma.dev() == mb.dev() && ma.ino() == mb.ino()
    }
    #[cfg(not(unix))]
    {
        let _ = (ma, mb);
        matches!((a.canonicalize(), b.canonicalize()), (Ok(x), Ok(y)) if x == y)
    }
}

/// Refuses to write `output` (named `output_name` in the message, e.g. `--out`) when it is the
/// same file as one of `inputs` (`(name, path)` pairs, e.g. `("--graph", path)`): writing it
/// would destroy the input.
pub fn refuse_overwriting(
    output_name: &str,
    output: &Path,
    inputs: &[(&str, &Path)],
) -> Result<()> {
    for (name, input) in inputs {
        if same_file(output, input) {
            return Err(WorkbookError::file(
                output,
                format!(
                    "is the same file as the input {name} ({}): writing {output_name} would destroy it; give {output_name} another path",
                    input.display()
                ),
            ));
        }
    }
    Ok(())
}

/// The path to write for `path`: itself, or, when it is a symbolic link and links are
/// followed, the file it points to (through every link of a chain).
fn destination(path: &Path) -> Result<PathBuf> {
    let mut current = path.to_path_buf();
    for _ in 0..40 {
        match std::fs::symlink_metadata(&current) {
            Ok(m) if m.file_type().is_symlink() => {
                let target =
                    std::fs::read_link(&current).map_err(|e| WorkbookError::io(&current, e))?;
                let target = match current.parent() {
                    Some(parent) if target.is_relative() => parent.join(target),
                    _ => target,
                };
                if !follow_symlinks() {
                    return Err(WorkbookError::file(
                        path,
                        format!(
                            "is a symbolic link (to {}); writing would replace the link with a regular file. Pass --follow-symlinks to write to {} through the link, or remove the link or choose another output path",
                            target.display(),
                            target.display()
                        ),
                    ));
                }
                current = target;
            }
            _ => return Ok(current),
        }
    }
    Err(WorkbookError::file(
        path,
        "is a chain of more than 40 symbolic links (a loop?)",
    ))
}

fn folder_of(path: &Path) -> &Path {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    }
}

/// One file of a set: written under a temporary name, waiting to be renamed.
struct Pending {
    dest: PathBuf,
    tmp: tempfile::NamedTempFile,
}

/// A file replaced by [`FileSet::commit`], and where its old contents are kept meanwhile.
struct Replaced {
    dest: PathBuf,
    backup: Option<PathBuf>,
}

/// Files written as a unit (see the module docs): [`add`](FileSet::add) each, then
/// [`commit`](FileSet::commit). Dropped without a commit, it removes its temporary files and
/// changes nothing.
#[derive(Default)]
pub struct FileSet {
    pending: Vec<Pending>,
}

impl FileSet {
    pub fn new() -> Self {
        Self::default()
    }

    /// Writes `bytes` under a temporary name beside `path` (creating the folder), with the
    /// permissions `path` will have.
    pub fn add(&mut self, path: &Path, bytes: &[u8]) -> Result<()> {
        let dest = destination(path)?;
        if self.pending.iter().any(|p| p.dest == dest) {
            return Err(WorkbookError::file(
                path,
                "is named twice among the files to write",
            ));
        }
        let dir = folder_of(&dest);
        std::fs::create_dir_all(dir).map_err(|e| WorkbookError::io(dir, e))?;
        let name = dest
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let prefix = format!(".{name}.");
        let mut builder = tempfile::Builder::new();
        builder.prefix(&prefix).suffix(".tmp");
        // Created 0o666 and the umask applied by the system, as any new file; tempfile's
        // default (0o600) would stay the file's mode after the rename.
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            builder.permissions(std::fs::Permissions::from_mode(0o666));
        }
        let mut tmp = builder
            .tempfile_in(dir)
            .map_err(|e| WorkbookError::io(dir, e))?;
        tmp.write_all(bytes)
            .map_err(|e| WorkbookError::io(&dest, e))?;
        // A file replaced keeps its permission bits.
        if let Ok(old) = std::fs::metadata(&dest) {
            if old.is_file() {
                tmp.as_file()
                    .set_permissions(old.permissions())
                    .map_err(|e| WorkbookError::io(&dest, e))?;
            }
        }
        tmp.as_file()
            .sync_all()
            .map_err(|e| WorkbookError::io(&dest, e))?;
        self.pending.push(Pending { dest, tmp });
        Ok(())
    }

    /// Renames every file into place, in the order added. If one fails, those already
    /// replaced get their old contents back, new ones are removed, and the error names the
    /// file that failed and what was restored.
    pub fn commit(self) -> Result<()> {
        let mut done: Vec<Replaced> = Vec::new();
        for Pending { dest, tmp } in self.pending {
            let backup = match keep_old(&dest) {
                Ok(b) => b,
                Err(e) => {
                    let restored = restore(done);
                    return Err(failed(
                        &dest,
                        &format!("cannot keep its old contents: {e}"),
                        &restored,
                    ));
                }
            };
            if let Err(e) = tmp.persist(&dest) {
                if let Some(b) = &backup {
                    let _ = std::fs::remove_file(b);
                }
                let restored = restore(done);
                return Err(failed(&dest, &e.error.to_string(), &restored));
            }
            done.push(Replaced { dest, backup });
        }
        let mut folders: Vec<&Path> = Vec::new();
        for r in &done {
            if let Some(b) = &r.backup {
                let _ = std::fs::remove_file(b);
            }
            let dir = folder_of(&r.dest);
            if !folders.contains(&dir) {
                folders.push(dir);
            }
        }
        // The renames themselves reach the disk with their folder (best effort: not every
        // system can sync a folder).
        for dir in folders {
            if let Ok(f) = std::fs::File::open(dir) {
                let _ = f.sync_all();
            }
        }
        Ok(())
    }
}

/// Keeps `dest`'s current contents under a new name in its folder (a hard link: the old
/// inode itself; a copy where hard links are not supported). `None` when there is no file.
fn keep_old(dest: &Path) -> std::io::Result<Option<PathBuf>> {
    match std::fs::symlink_metadata(dest) {
        Ok(m) if m.is_file() => {}
        // Nothing to keep: no file yet, or something the rename will refuse (a directory).
        _ => return Ok(None),
    }
    let name = dest
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let dir = folder_of(dest);
    for k in 0..1000u32 {
        let backup = dir.join(format!(".{name}.{}-{k}.old", std::process::id()));
        match std::fs::hard_link(dest, &backup) {
            Ok(()) => return Ok(Some(backup)),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(_) => {
                if backup.exists() {
                    continue;
                }
                std::fs::copy(dest, &backup)?;
                return Ok(Some(backup));
            }
        }
    }
    Err(std::io::Error::other("no free name for a backup"))
}

/// Puts back every replaced file, newest first; returns what it did, for the message.
fn restore(done: Vec<Replaced>) -> Vec<String> {
    let mut notes = Vec::new();
    for r in done.into_iter().rev() {
        let (result, what) = match &r.backup {
            Some(b) => (std::fs::rename(b, &r.dest), "restored"),
            None => (std::fs::remove_file(&r.dest), "removed (it was new)"),
        };
        notes.push(match result {
            Ok(()) => format!("{} {what}", r.dest.display()),
            Err(e) => format!("{} could not be {what}: {e}", r.dest.display()),
        });
    }
    notes
}

fn failed(dest: &Path, why: &str, restored: &[String]) -> WorkbookError {
    let tail = if restored.is_empty() {
        "nothing was changed".to_string()
    } else {
        format!("nothing was changed: {}", restored.join("; "))
    };
    let what = if std::fs::symlink_metadata(dest).is_ok_and(|m| m.is_dir()) {
        format!("it is a directory; {why}")
    } else {
        why.to_string()
    };
    WorkbookError::file(dest, format!("cannot be replaced ({what}); {tail}"))
}

#[cfg(all(test, unix))]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn mode(p: &Path) -> u32 {
        std::fs::metadata(p).unwrap().permissions().mode() & 0o7777
    }

    #[test]
    fn a_replaced_file_keeps_its_mode_and_a_failed_set_changes_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let a = dir.path().join("a.bin");
        std::fs::write(&a, b"old a").unwrap();
        std::fs::set_permissions(&a, std::fs::Permissions::from_mode(0o640)).unwrap();
        write(&a, b"new a").unwrap();
        assert_eq!(std::fs::read(&a).unwrap(), b"new a");
        assert_eq!(mode(&a), 0o640);

        // the second of three cannot be renamed: the first is restored, the third never written
        let b = dir.path().join("b.json");
        std::fs::create_dir(&b).unwrap();
        std::fs::write(b.join("inside"), b"x").unwrap();
        let c = dir.path().join("c.txt");
        let mut set = FileSet::new();
        set.add(&a, b"newer a").unwrap();
        set.add(&b, b"b").unwrap();
        set.add(&c, b"c").unwrap();
        let err = set.commit().unwrap_err().to_string();
        assert!(
            err.contains("b.json") && err.contains("it is a directory"),
            "{err}"
        );
        assert!(err.contains("a.bin restored"), "{err}");
        assert_eq!(std::fs::read(&a).unwrap(), b"new a");
        assert_eq!(mode(&a), 0o640);
        assert!(!c.exists());
        let left: Vec<_> = std::fs::read_dir(dir.path())
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        assert_eq!(left.len(), 2, "no temporary or backup file left: {left:?}");
    }

    #[test]
    fn a_new_set_is_removed_when_it_cannot_be_completed() {
        let dir = tempfile::tempdir().unwrap();
        let a = dir.path().join("new.safetensors");
        let b = dir.path().join("new.json");
        std::fs::create_dir(&b).unwrap();
        std::fs::write(b.join("x"), b"x").unwrap();
        let mut set = FileSet::new();
        set.add(&a, b"a").unwrap();
        set.add(&b, b"b").unwrap();
        let err = set.commit().unwrap_err().to_string();
        assert!(err.contains("removed (it was new)"), "{err}");
        assert!(!a.exists());
    }

    #[test]
    fn outputs_that_are_inputs_are_found_through_links() {
        let dir = tempfile::tempdir().unwrap();
        let input = dir.path().join("g.safetensors");
        std::fs::write(&input, b"g").unwrap();
        let hard = dir.path().join("hard");
        std::fs::hard_link(&input, &hard).unwrap();
        let soft = dir.path().join("soft");
        std::os::unix::fs::symlink(&input, &soft).unwrap();
        let dotted = dir.path().join(".").join("g.safetensors");
        for out in [&input, &hard, &soft, &dotted] {
            let err = refuse_overwriting("--out", out, &[("--graph", &input)])
                .unwrap_err()
                .to_string();
            assert!(err.contains("same file as the input --graph"), "{err}");
        }
        let other = dir.path().join("o.safetensors");
        assert!(refuse_overwriting("--out", &other, &[("--graph", &input)]).is_ok());
    }
}
