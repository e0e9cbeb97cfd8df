//! Stage 1 of grading a submission: reading it, without trusting anything in it.
//!
//! Only the files each `exercise.toml` lists under `edit` are read from a student's folder, each
//! as a regular file no bigger than [`MAX_FILE_BYTES`], reached through real directories: a
//! symbolic link (to `solutions/`, to a classmate, to `/etc`), a FIFO or a device is refused and
//! the stub is graded instead, with the reason in the report. Nothing in the folder is executed:
//! Git is never run in it (a repository's own configuration can run commands, `core.fsmonitor`
//! for one), so what the student changed elsewhere is found by walking the folder and comparing
//! bytes with the handout.
//!
//! ```
//! let dir = tempfile::tempdir().unwrap();
//! std::fs::write(dir.path().join("a.rs"), "fn a() {}").unwrap();
//! std::os::unix::fs::symlink("/etc/hostname", dir.path().join("b.rs")).unwrap();
//! use grader::submission::{read_regular, Refused};
//! assert_eq!(read_regular(dir.path(), "a.rs").unwrap(), b"fn a() {}");
//! assert!(matches!(read_regular(dir.path(), "b.rs"), Err(Refused::Link)));
//! ```

use crate::catalog::Catalog;
use std::collections::{BTreeMap, BTreeSet};
use std::io::Read;
use std::path::{Component, Path, PathBuf};

/// The largest edit file read (the biggest stub is a few KiB).
pub const MAX_FILE_BYTES: u64 = 512 * 1024;
/// At most this many files are looked at when listing a folder's other changes.
pub const MAX_LISTED_FILES: usize = 20_000;

/// Why a file of a submission was not read.
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum Refused {
    /// Not there.
    #[error("missing")]
    Missing,
    /// A symbolic link (the file or a folder on its way).
    #[error("a symbolic link, refused (submit the file itself)")]
    Link,
    /// A FIFO, a socket, a device, a folder.
    #[error("not a regular file, refused")]
    Special,
    /// Over [`MAX_FILE_BYTES`].
    #[error("{0} bytes, over the limit of {MAX_FILE_BYTES}: refused")]
    TooBig(u64),
    /// A path that leaves the folder (`..`, absolute).
    #[error("a path outside the submission, refused")]
    Outside,
    /// Reading failed.
    #[error("unreadable ({0})")]
    Unreadable(String),
}

/// Reads `rel` (a `/`-separated path) under `dir` as a regular file, following no link.
pub fn read_regular(dir: &Path, rel: &str) -> Result<Vec<u8>, Refused> {
    let mut path = dir.to_path_buf();
    let parts: Vec<Component> = Path::new(rel).components().collect();
    for (i, part) in parts.iter().enumerate() {
        let Component::Normal(name) = part else {
            return Err(Refused::Outside);
        };
        path.push(name);
        let meta = match std::fs::symlink_metadata(&path) {
            Ok(m) => m,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Err(Refused::Missing),
            Err(e) => return Err(Refused::Unreadable(e.kind().to_string())),
        };
        let last = i + 1 == parts.len();
        if meta.file_type().is_symlink() {
            return Err(Refused::Link);
        }
        if !last && !meta.is_dir() {
            return Err(Refused::Missing);
        }
        if last && !meta.is_file() {
            return Err(Refused::Special);
        }
        if last && meta.len() > MAX_FILE_BYTES {
            return Err(Refused::TooBig(meta.len()));
        }
    }
    let mut file = open_no_follow(&path).map_err(|e| Refused::Unreadable(e.kind().to_string()))?;
    let mut bytes = Vec::new();
    // The size was checked above, but the file may have grown since: read one byte more than
    // the limit, and refuse if it is there.
    (&mut file)
        .take(MAX_FILE_BYTES + 1)
        .read_to_end(&mut bytes)
        .map_err(|e| Refused::Unreadable(e.kind().to_string()))?;
    if bytes.len() as u64 > MAX_FILE_BYTES {
        return Err(Refused::TooBig(bytes.len() as u64));
    }
    Ok(bytes)
}

#[cfg(unix)]
fn open_no_follow(path: &Path) -> std::io::Result<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt;
    // O_NOFOLLOW: a link swapped in after the check is refused by the kernel; O_NONBLOCK: a FIFO
    // swapped in does not block the grader.
    std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path)
}

#[cfg(not(unix))]
fn open_no_follow(path: &Path) -> std::io::Result<std::fs::File> {
    std::fs::File::open(path)
}

/// A submission, read.
#[derive(Clone, Debug, Default)]
pub struct Submission {
    /// The student (a folder name, made safe for file names and reports).
    pub name: String,
    /// Where it came from.
    pub dir: PathBuf,
    /// Edit files that were read, by path from the repository root
    /// (`exercises/<chapter>/<exercise>/src/x.rs`).
    pub files: BTreeMap<String, Vec<u8>>,
    /// Edit files that were not read, and why (the stub is graded instead).
    pub refused: Vec<String>,
    /// What the student changed outside the edit files (`path: modified|added|deleted`): never
    /// compiled, listed for the teacher.
    pub ignored: Vec<String>,
    /// The reference solution (trusted): its builds may be kept and reused across runs.
    pub reference: bool,
}

/// Reads the edit files of every exercise of `catalog` from `dir`, and lists what else differs
/// from the teacher's tree `teacher` (when given; see [`changed_files`]).
pub fn read(name: &str, dir: &Path, catalog: &Catalog, teacher: Option<&Path>) -> Submission {
    let mut submission = Submission {
        name: name.to_string(),
        dir: dir.to_path_buf(),
        ..Default::default()
    };
    let graded = edit_files(catalog);
    for rel in &graded {
        match read_regular(dir, rel) {
            Ok(bytes) => {
                submission.files.insert(rel.clone(), bytes);
            }
            Err(Refused::Missing) => submission
                .refused
                .push(format!("{rel}: missing, so the stub was graded")),
            Err(why) => submission
                .refused
                .push(format!("{rel}: {why}; the stub was graded")),
        }
    }
    if let Some(teacher) = teacher {
        submission.ignored = changed_files(teacher, dir, &graded);
    }
    submission
}

/// Reads a submission of loose files (as uploaded to Gradescope: only the edited files, flat or
/// in folders): each edit file is the one at its full path, else the only one whose path ends
/// with `<chapter>/<exercise>/<file>`, `<file>` (`src/x.rs`) or its name (`x.rs`). Files that
/// match nothing are graded as the stub; a name that matches several files is refused.
pub fn read_loose(name: &str, dir: &Path, catalog: &Catalog) -> Submission {
    let mut submission = Submission {
        name: name.to_string(),
        dir: dir.to_path_buf(),
        ..Default::default()
    };
    let present: Vec<String> = list_files(dir, &ignore::gitignore::Gitignore::empty())
        .into_iter()
        .collect();
    for exercise in &catalog.exercises {
        for file in &exercise.spec.edit {
            let rel = format!("exercises/{}/{file}", exercise.path);
            let base = file.rsplit('/').next().unwrap_or(file);
            let tries = [
                rel.clone(),
                format!("{}/{file}", exercise.path),
                file.clone(),
                base.to_string(),
            ];
            let mut chosen = None;
            for suffix in &tries {
                let hits: Vec<&String> = present
                    .iter()
                    .filter(|p| *p == suffix || p.ends_with(&format!("/{suffix}")))
                    .collect();
                match hits.as_slice() {
                    [] => continue,
                    [one] => {
                        chosen = Some(Ok((*one).clone()));
                        break;
                    }
                    many => {
                        chosen = Some(Err(format!(
                            "{rel}: {} files could be it ({}); submit it at its path",
                            many.len(),
                            many.iter()
                                .map(|m| m.as_str())
                                .collect::<Vec<_>>()
                                .join(", ")
                        )));
                        break;
                    }
                }
            }
            match chosen {
                None => submission
                    .refused
                    .push(format!("{rel}: missing, so the stub was graded")),
                Some(Err(why)) => submission.refused.push(why),
                Some(Ok(found)) => match read_regular(dir, &found) {
                    Ok(bytes) => {
                        submission.files.insert(rel, bytes);
                    }
                    Err(why) => submission
                        .refused
                        .push(format!("{rel} ({found}): {why}; the stub was graded")),
                },
            }
        }
    }
    submission
}

/// Every file an exercise asks students to edit, from the repository root.
pub fn edit_files(catalog: &Catalog) -> BTreeSet<String> {
    catalog
        .exercises
        .iter()
        .flat_map(|e| {
            e.spec
                .edit
                .iter()
                .map(move |f| format!("exercises/{}/{f}", e.path))
        })
        .collect()
}

/// Folders never compared: build output, version control, Python environments, editors.
const SKIPPED: [&str; 8] = [
    "target",
    ".git",
    ".venv",
    "venv",
    ".idea",
    ".vscode",
    "node_modules",
    "__pycache__",
];

/// The teacher's ignore rules (the `.gitignore` at the root of their tree), applied to students'
/// folders too: what Git would not commit is not a change.
fn ignore_rules(teacher: &Path) -> ignore::gitignore::Gitignore {
    let mut rules = ignore::gitignore::GitignoreBuilder::new(teacher);
    rules.add(teacher.join(".gitignore"));
    rules
        .build()
        .unwrap_or_else(|_| ignore::gitignore::Gitignore::empty())
}

/// The files under `dir` (`/`-separated, relative), links and special files included as
/// entries, build output, `.git`, Python environments and editor folders, and paths `rules` ignore left out, at most
/// [`MAX_LISTED_FILES`]. Nothing is executed: the folder may be a student's.
pub fn list_files(dir: &Path, rules: &ignore::gitignore::Gitignore) -> BTreeSet<String> {
    let mut files = BTreeSet::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for entry in entries.flatten() {
            if files.len() >= MAX_LISTED_FILES {
                return files;
            }
            let path = entry.path();
            let name = entry.file_name().to_string_lossy().into_owned();
            let Ok(kind) = entry.file_type() else {
                continue;
            };
            let Ok(rel) = path.strip_prefix(dir) else {
                continue;
            };
            if rules.matched(rel, kind.is_dir()).is_ignore() {
                continue;
            }
            if kind.is_dir() {
                if !SKIPPED.contains(&name.as_str()) {
                    stack.push(path);
                }
            } else {
                files.insert(rel.to_string_lossy().replace('\\', "/"));
            }
        }
    }
    files
}

/// What `student` changed outside `graded`, compared byte for byte with the teacher's tree:
/// `path: modified`, `path: added`, `path: deleted`. Files only the teacher has under
/// `solutions/` are not listed (a class's handout has none).
pub fn changed_files(teacher: &Path, student: &Path, graded: &BTreeSet<String>) -> Vec<String> {
    let rules = ignore_rules(teacher);
    let theirs = list_files(student, &rules);
    let ours = list_files(teacher, &rules);
    let mut changes = Vec::new();
    for file in theirs.union(&ours) {
        if graded.contains(file) {
            continue;
        }
        let what = match (theirs.contains(file), ours.contains(file)) {
            (true, true) => {
                (!same_contents(&student.join(file), &teacher.join(file))).then_some("modified")
            }
            (true, false) => Some("added"),
            (false, true) if !file.starts_with("solutions/") => Some("deleted"),
            _ => None,
        };
        if let Some(what) = what {
            changes.push(format!("{file}: {what}"));
        }
    }
    changes
}

/// Files compared for changes up to this size; a bigger one counts as changed.
const MAX_COMPARED_BYTES: u64 = 256 << 20;

/// Whether two regular files (not links) hold the same bytes, read in blocks.
fn same_contents(a: &Path, b: &Path) -> bool {
    let regular = |p: &Path| std::fs::symlink_metadata(p).ok().filter(|m| m.is_file());
    let (Some(ma), Some(mb)) = (regular(a), regular(b)) else {
        return false;
    };
    if ma.len() != mb.len() || ma.len() > MAX_COMPARED_BYTES {
        return false;
    }
    let (Ok(mut fa), Ok(mut fb)) = (open_no_follow(a), open_no_follow(b)) else {
        return false;
    };
    let (mut ba, mut bb) = (vec![0u8; 1 << 16], vec![0u8; 1 << 16]);
    loop {
        let (Ok(na), Ok(nb)) = (read_full(&mut fa, &mut ba), read_full(&mut fb, &mut bb)) else {
            return false;
        };
        if na != nb || ba[..na] != bb[..nb] {
            return false;
        }
        if na == 0 {
            return true;
        }
    }
}

/// Reads until `buf` is full or the file ends.
fn read_full(file: &mut std::fs::File, buf: &mut [u8]) -> std::io::Result<usize> {
    let mut filled = 0;
    while filled < buf.len() {
        match file.read(&mut buf[filled..])? {
            0 => break,
            n => filled += n,
        }
    }
    Ok(filled)
}

/// A folder name as a report file name and table row: letters, digits, `.`, `_`, `-` kept, any
/// other character replaced by `_`, never empty, never starting with `.`.
pub fn safe_name(raw: &str) -> String {
    let mut name: String = raw
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') {
                c
            } else {
                '_'
            }
        })
        .take(64)
        .collect();
    if name.is_empty() || name.starts_with('.') {
        name.insert(0, '_');
    }
    name
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn folders_on_the_way_may_not_be_links() {
        let dir = tempfile::tempdir().unwrap();
        let real = dir.path().join("real");
        std::fs::create_dir_all(real.join("src")).unwrap();
        std::fs::write(real.join("src/x.rs"), "secret").unwrap();
        let student = dir.path().join("student");
        std::fs::create_dir_all(&student).unwrap();
        std::os::unix::fs::symlink(&real, student.join("exercises")).unwrap();
        assert_eq!(
            read_regular(&student, "exercises/src/x.rs"),
            Err(Refused::Link)
        );
        assert_eq!(
            read_regular(&student, "../real/src/x.rs"),
            Err(Refused::Outside)
        );
    }

    #[test]
    fn fifos_and_big_files_are_refused_without_blocking() {
        let dir = tempfile::tempdir().unwrap();
        let fifo = dir.path().join("f.rs");
        let c = std::ffi::CString::new(fifo.to_string_lossy().as_bytes()).unwrap();
        // SAFETY: mkfifo(3) with a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        assert_eq!(read_regular(dir.path(), "f.rs"), Err(Refused::Special));
        std::fs::write(
            dir.path().join("big.rs"),
            vec![b' '; MAX_FILE_BYTES as usize + 1],
        )
        .unwrap();
        assert!(matches!(
            read_regular(dir.path(), "big.rs"),
            Err(Refused::TooBig(_))
        ));
    }

    #[test]
    fn safe_names_cannot_escape_or_hide() {
        assert_eq!(safe_name("alice"), "alice");
        assert_eq!(safe_name("../x"), "_.._x");
        assert_eq!(safe_name(".hidden"), "_.hidden");
        assert_eq!(safe_name("a\x1b[31mb\nc"), "a__31mb_c");
        assert_eq!(safe_name(""), "_");
    }
}
