//! Stage 2 of grading a submission: its tree. A *slot* is a folder of the judge's own, one per
//! student graded at the same time, holding `tree/` (the staged handout, hard-linked, with the
//! submission's edit files written in as regular files) and `out/` (what the compiler writes).
//! The sandbox sees `tree/` read-only and `out/` writable, nothing else of the slot; a slot is
//! emptied before each submission, so nothing of one student reaches the next.
//!
//! ```
//! let work = tempfile::tempdir().unwrap();
//! let handout = work.path().join("handout");
//! std::fs::create_dir_all(handout.join("exercises/a/src")).unwrap();
//! std::fs::write(handout.join("exercises/a/src/x.rs"), "stub").unwrap();
//! let mut files = std::collections::BTreeMap::new();
//! files.insert("exercises/a/src/x.rs".to_string(), b"solved".to_vec());
//! let slot = grader::slot::Slot::fill(&work.path().join("slot0"), &handout, &files).unwrap();
//! assert_eq!(std::fs::read(slot.tree.join("exercises/a/src/x.rs")).unwrap(), b"solved");
//! assert_eq!(std::fs::read(handout.join("exercises/a/src/x.rs")).unwrap(), b"stub");
//! ```

use crate::error::{GradeError, Result};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// A slot, filled with one submission.
#[derive(Clone, Debug)]
pub struct Slot {
    /// The handout with the submission's files.
    pub tree: PathBuf,
    /// The compiler's output folder.
    pub out: PathBuf,
    /// A digest of the submission's files laid over the handout.
    pub digest: String,
}

impl Slot {
    /// Empties `dir` and fills it with `handout` and `files` (paths from the tree's root).
    pub fn fill(dir: &Path, handout: &Path, files: &BTreeMap<String, Vec<u8>>) -> Result<Self> {
        if dir.exists() {
            std::fs::remove_dir_all(dir).map_err(|e| GradeError::io(dir, e))?;
        }
        private_dir(dir)?;
        let slot = Slot {
            tree: dir.join("tree"),
            out: dir.join("out"),
            digest: digest(files),
        };
        link_tree(handout, &slot.tree)?;
        std::fs::create_dir_all(&slot.out).map_err(|e| GradeError::io(&slot.out, e))?;
        for (rel, bytes) in files {
            let path = slot.tree.join(rel);
            if let Some(parent) = path.parent() {
                std::fs::create_dir_all(parent).map_err(|e| GradeError::io(parent, e))?;
            }
            // Replace the link, never write through it: the handout's file is shared.
            let _ = std::fs::remove_file(&path);
            std::fs::write(&path, bytes).map_err(|e| GradeError::io(&path, e))?;
        }
        Ok(slot)
    }
}

fn digest(files: &BTreeMap<String, Vec<u8>>) -> String {
    use sha2::{Digest, Sha256};
    let mut hash = Sha256::new();
    for (rel, bytes) in files {
        hash.update(rel.as_bytes());
        hash.update((bytes.len() as u64).to_le_bytes());
        hash.update(bytes);
    }
    format!("{:x}", hash.finalize())
}

/// Creates `dir` (and its parents) readable by this user only: a slot holds a student's code and
/// binaries, which other users of the machine have no business reading.
///
/// As root, "this user" is root and the sandboxes' users (their group), so that a sandbox run as
/// a user of its own can read what is mounted into it ([`crate::sandbox`]); no other user can.
pub fn private_dir(dir: &Path) -> Result<()> {
    let created: Vec<PathBuf> = dir
        .ancestors()
        .take_while(|a| !a.as_os_str().is_empty() && !a.exists())
        .map(Path::to_path_buf)
        .collect();
    let mut builder = std::fs::DirBuilder::new();
    builder.recursive(true);
    #[cfg(unix)]
    std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
    builder.create(dir).map_err(|e| GradeError::io(dir, e))?;
    #[cfg(unix)]
    for made in created.iter().map(PathBuf::as_path).chain([dir]) {
        crate::sandbox::judge_folder_permissions(made).map_err(|e| GradeError::io(made, e))?;
    }
    Ok(())
}

/// `to` as a tree of hard links to `from`'s files (copies where links are impossible).
fn link_tree(from: &Path, to: &Path) -> Result<()> {
    std::fs::create_dir_all(to).map_err(|e| GradeError::io(to, e))?;
    for entry in std::fs::read_dir(from).map_err(|e| GradeError::io(from, e))? {
        let entry = entry.map_err(|e| GradeError::io(from, e))?;
        let (src, dst) = (entry.path(), to.join(entry.file_name()));
        let kind = entry.file_type().map_err(|e| GradeError::io(&src, e))?;
        if kind.is_dir() {
            link_tree(&src, &dst)?;
        } else if kind.is_file() && std::fs::hard_link(&src, &dst).is_err() {
            std::fs::copy(&src, &dst).map_err(|e| GradeError::io(&dst, e))?;
        }
    }
    Ok(())
}
