//! Which state of a submission is graded: with `--deadline`, the last commit of the student's
//! repository made before the deadline (never uncommitted files); without, the folder as it is.
//! Either way the report records the commit and its time when there is one.
//!
//! A student's repository is hostile like the rest of the submission: its `.git/config` and
//! `.git/info/attributes` can make Git run commands (`core.fsmonitor`, hooks) and rewrite what
//! it hands out (a smudge or textconv filter printing the working-tree file, so that an
//! uncommitted file passes for a committed one). So no Git program runs: the grader reads the
//! repository's objects itself (the `gix` crate, built without its filter and attribute code,
//! opened without any configuration of the machine's or the user's), walks `HEAD`'s first-parent
//! line for the commit, and writes that commit's blobs as committed, capped in size: regular
//! files only, no link, no submodule, no name that leaves the checkout. A repository that borrows
//! from elsewhere is refused before anything is read: `objects/info/alternates` (objects taken
//! from another folder: another student's clone, the teacher's repository), `commondir` (a
//! linked worktree's shared folder) or a symbolic link anywhere in `.git` (the grader, often
//! root, would follow it wherever it points).
//!
//! Commit times are written by the student's own Git: a student can date a commit as they like.
//! A deadline read from the repository is a convenience; only a clone made at the deadline (or a
//! forge's push log) is evidence.
//!
//! ```
//! let at = grader::snapshot::parse_deadline("2026-12-01T23:59:00+01:00").unwrap();
//! assert_eq!(at, 1_796_165_940);
//! assert!(grader::snapshot::parse_deadline("next friday").is_err());
//! ```

use crate::error::{GradeError, Result};
use crate::sandbox::Confinement;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// The largest checkout unpacked from a repository.
pub const MAX_CHECKOUT_BYTES: usize = 256 << 20;

/// What was graded of a submission, for the reports.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Snapshot {
    /// The commit graded (with `--deadline`) or the repository's `HEAD` (without).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub commit: Option<String>,
    /// That commit's time, RFC 3339.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub committed_at: Option<String>,
    /// With `--deadline`: whether the repository has commits after it (not graded).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub late: Option<bool>,
    /// How it was taken (`the working tree as found`, `the last commit before ...`).
    pub note: String,
}

/// `2026-12-01T23:59:00+01:00` (RFC 3339) or `@1764629940` (seconds since 1970) → seconds.
pub fn parse_deadline(text: &str) -> std::result::Result<i64, String> {
    let text = text.trim();
    if let Some(seconds) = text.strip_prefix('@') {
        return seconds
            .parse()
            .map_err(|_| format!("--deadline {text}: not a number of seconds after @"));
    }
    chrono::DateTime::parse_from_rfc3339(text)
        .map(|t| t.timestamp())
        .map_err(|e| {
            format!("--deadline {text}: {e}; write it as 2026-12-01T23:59:00+01:00 (RFC 3339, with its time zone) or @SECONDS")
        })
}

fn rfc3339(seconds: i64) -> String {
    chrono::DateTime::from_timestamp(seconds, 0)
        .map(|t| t.to_rfc3339())
        .unwrap_or_else(|| seconds.to_string())
}

/// How far back the first-parent line of `HEAD` is followed.
const MAX_COMMITS: usize = 100_000;
/// How deep a commit's tree may nest.
const MAX_DEPTH: usize = 64;

fn unreadable(what: impl std::fmt::Display) -> GradeError {
    GradeError::Submission(format!("the Git repository cannot be read: {what}"))
}

/// The most entries of a `.git` folder looked at for borrowed objects.
const MAX_GIT_ENTRIES: usize = 1_000_000;

/// Refuses a `.git` folder that takes anything from outside itself: alternates, a linked
/// worktree's `commondir`, or a symbolic link anywhere in it. Git writes none of these in a
/// plain clone (`git clone --shared` or `--reference` writes alternates: clone without them).
fn self_contained(git: &Path) -> Result<()> {
    let refuse = |what: String| {
        GradeError::Submission(format!(
            "the Git repository {what}: not graded. Hand in a plain clone (`git clone` without \
             --shared, --reference or a worktree; `git repack -a -d` and deleting \
             .git/objects/info/alternates also make it plain)"
        ))
    };
    for borrowed in ["objects/info/alternates", "commondir"] {
        if std::fs::symlink_metadata(git.join(borrowed)).is_ok() {
            return Err(refuse(format!(
                "borrows from another folder (it has .git/{borrowed})"
            )));
        }
    }
    let mut pending = vec![git.to_path_buf()];
    let mut seen = 0usize;
    while let Some(dir) = pending.pop() {
        let entries = std::fs::read_dir(&dir).map_err(|e| GradeError::io(&dir, e))?;
        for entry in entries {
            let entry = entry.map_err(|e| GradeError::io(&dir, e))?;
            seen += 1;
            if seen > MAX_GIT_ENTRIES {
                return Err(refuse(format!(
                    "has more than {MAX_GIT_ENTRIES} files in .git"
                )));
            }
            let kind = entry
                .file_type()
                .map_err(|e| GradeError::io(entry.path(), e))?;
            if kind.is_symlink() {
                let inside = entry.path();
                let inside = inside.strip_prefix(git).unwrap_or(&inside);
                return Err(refuse(format!(
                    "has a symbolic link in it (.git/{})",
                    inside.display()
                )));
            }
            if kind.is_dir() {
                pending.push(entry.path());
            }
        }
    }
    Ok(())
}

/// Opens the student's repository to read objects only: none of the machine's or the user's
/// configuration, nothing of the environment ([`gix::open::Options::isolated`]). Callers check
/// [`self_contained`] first.
fn open(repo: &Path) -> Result<gix::Repository> {
    gix::open_opts(repo, gix::open::Options::isolated()).map_err(unreadable)
}

/// The commits on `HEAD`'s first-parent line, newest first, with their committer times.
fn history(repo: &gix::Repository) -> Vec<(gix::ObjectId, i64)> {
    let mut commits = Vec::new();
    let Ok(mut commit) = repo.head_commit() else {
        return commits;
    };
    while commits.len() < MAX_COMMITS {
        let Ok(time) = commit.time() else { break };
        commits.push((commit.id, time.seconds));
        let Some(parent) = commit.parent_ids().next() else {
            break;
        };
        match parent.object().map(|o| o.try_into_commit()) {
            Ok(Ok(next)) => commit = next,
            _ => break,
        }
    }
    commits
}

/// Writes the blobs of `tree` under `to`, as committed: regular and executable files only (no
/// link, no submodule), names that are one plain path component, `budget` bytes in all.
fn write_tree(
    repo: &gix::Repository,
    tree: gix::ObjectId,
    to: &Path,
    depth: usize,
    budget: &mut usize,
) -> Result<()> {
    use std::os::unix::ffi::OsStrExt;
    if depth > MAX_DEPTH {
        return Err(unreadable(format!(
            "its tree nests deeper than {MAX_DEPTH}"
        )));
    }
    let tree = repo.find_tree(tree).map_err(unreadable)?;
    let entries: Vec<(gix::objs::tree::EntryMode, Vec<u8>, gix::ObjectId)> = tree
        .decode()
        .map_err(unreadable)?
        .entries
        .iter()
        .map(|e| (e.mode, e.filename.to_vec(), e.oid.to_owned()))
        .collect();
    for (mode, name, id) in entries {
        let plain = !name.is_empty()
            && name != b"."
            && name != b".."
            && !name.contains(&b'/')
            && !name.contains(&0);
        if !plain {
            continue;
        }
        let path = to.join(std::ffi::OsStr::from_bytes(&name));
        if mode.is_tree() {
            std::fs::create_dir_all(&path).map_err(|e| GradeError::io(&path, e))?;
            write_tree(repo, id, &path, depth + 1, budget)?;
        } else if mode.is_blob() {
            let blob = repo.find_blob(id).map_err(unreadable)?;
            *budget = budget.checked_sub(blob.data.len()).ok_or_else(|| {
                GradeError::Submission(format!(
                    "the commit is over {} MiB: not graded",
                    MAX_CHECKOUT_BYTES >> 20
                ))
            })?;
            std::fs::write(&path, &blob.data).map_err(|e| GradeError::io(&path, e))?;
        }
    }
    Ok(())
}

/// The state of `dir` to grade: with a deadline (seconds), the last commit before it, unpacked
/// into `checkout` (emptied first); else `dir` itself. Returns the folder to read and what it is.
///
/// No program runs: the repository's objects are read by the grader itself (`gix`), so nothing
/// of the student's (`core.fsmonitor`, hooks, filters in `.git/config` or
/// `.git/info/attributes`, textconv) is ever applied. `_confinement` is kept for the callers.
pub fn take(
    _confinement: &Confinement,
    dir: &Path,
    deadline: Option<i64>,
    checkout: &Path,
) -> Result<(PathBuf, Snapshot)> {
    let is_repo = std::fs::symlink_metadata(dir.join(".git")).is_ok_and(|m| m.is_dir());
    // A `.git` that borrows from elsewhere is refused under a deadline (its commits may not be
    // the student's) and not read at all without one (the folder is graded as found); one that
    // is not a readable repository has no history, as before (graded as found).
    let repo = if is_repo {
        match self_contained(&dir.join(".git")) {
            Ok(()) => open(dir).ok(),
            Err(e) if deadline.is_some() => return Err(e),
            Err(_) => None,
        }
    } else {
        None
    };
    let commits: Vec<(String, i64)> = repo
        .as_ref()
        .map(history)
        .unwrap_or_default()
        .into_iter()
        .map(|(id, t)| (id.to_string(), t))
        .collect();
    let Some(deadline) = deadline else {
        return Ok((
            dir.to_path_buf(),
            Snapshot {
                commit: commits.first().map(|c| c.0.clone()),
                committed_at: commits.first().map(|c| rfc3339(c.1)),
                late: None,
                note: "the folder as found (uncommitted changes included)".into(),
            },
        ));
    };
    if commits.is_empty() {
        return Ok((
            dir.to_path_buf(),
            Snapshot {
                note: "no Git history to take the deadline from: the folder as found".into(),
                ..Default::default()
            },
        ));
    }
    let late = commits.first().is_some_and(|c| c.1 > deadline);
    let Some((sha, time)) = commits.iter().find(|c| c.1 <= deadline).cloned() else {
        return Ok((
            empty(checkout)?,
            Snapshot {
                late: Some(late),
                note: format!(
                    "no commit before the deadline ({}): nothing graded",
                    rfc3339(deadline)
                ),
                ..Default::default()
            },
        ));
    };
    let repo = repo.ok_or_else(|| unreadable("it has no repository"))?;
    let commit = gix::ObjectId::from_hex(sha.as_bytes())
        .ok()
        .and_then(|id| repo.find_commit(id).ok())
        .ok_or_else(|| unreadable(format!("the commit {sha} is gone")))?;
    let tree = commit.tree_id().map_err(unreadable)?.detach();
    let mut budget = MAX_CHECKOUT_BYTES;
    write_tree(&repo, tree, &empty(checkout)?, 0, &mut budget)?;
    Ok((
        checkout.to_path_buf(),
        Snapshot {
            commit: Some(sha),
            committed_at: Some(rfc3339(time)),
            late: Some(late),
            note: format!(
                "the last commit before the deadline ({})",
                rfc3339(deadline)
            ),
        },
    ))
}

fn empty(dir: &Path) -> Result<PathBuf> {
    if dir.exists() {
        std::fs::remove_dir_all(dir).map_err(|e| GradeError::io(dir, e))?;
    }
    crate::slot::private_dir(dir)?;
    Ok(dir.to_path_buf())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn git(dir: &Path, args: &[&str]) {
        let out = std::process::Command::new("git")
            .current_dir(dir)
            .args([
                "-c",
                "user.name=s",
                "-c",
                "user.email=s@x",
                "-c",
                "commit.gpgsign=false",
            ])
            .args(args)
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .env("GIT_AUTHOR_DATE", "@1000 +0000")
            .env("GIT_COMMITTER_DATE", "@1000 +0000")
            .output()
            .unwrap();
        assert!(out.status.success(), "{out:?}");
    }

    #[test]
    fn committed_blobs_are_read_as_committed_whatever_the_repository_declares() {
        let dir = tempfile::tempdir().unwrap();
        let repo = dir.path().join("repo");
        std::fs::create_dir_all(repo.join("src")).unwrap();
        std::fs::write(repo.join("src/a.rs"), "committed").unwrap();
        std::os::unix::fs::symlink("/etc/passwd", repo.join("link.rs")).unwrap();
        git(&repo, &["init", "-q"]);
        git(&repo, &["add", "-A"]);
        git(&repo, &["commit", "-q", "-m", "one"]);
        // After the deadline, never committed; a filter that would print it in its place.
        std::fs::write(repo.join("src/a.rs"), "late").unwrap();
        let config = repo.join(".git/config");
        let mut text = std::fs::read_to_string(&config).unwrap();
        text += "[filter \"x\"]\n\tsmudge = cat src/a.rs\n\tclean = cat\n[diff \"x\"]\n\ttextconv = cat\n";
        std::fs::write(&config, text).unwrap();
        std::fs::create_dir_all(repo.join(".git/info")).unwrap();
        std::fs::write(repo.join(".git/info/attributes"), "* filter=x diff=x\n").unwrap();
        let checkout = dir.path().join("out");
        let (at, snapshot) = take(&Confinement::Unconfined, &repo, Some(2000), &checkout).unwrap();
        assert_eq!(at, checkout);
        assert_eq!(
            std::fs::read(checkout.join("src/a.rs")).unwrap(),
            b"committed"
        );
        assert!(!checkout.join("link.rs").exists(), "a link was written");
        assert_eq!(snapshot.late, Some(false));
        assert_eq!(
            snapshot.committed_at.as_deref(),
            Some("1970-01-01T00:16:40+00:00")
        );
        // Before the first commit: nothing.
        let (at, snapshot) = take(&Confinement::Unconfined, &repo, Some(10), &checkout).unwrap();
        assert_eq!(std::fs::read_dir(at).unwrap().count(), 0);
        assert_eq!(snapshot.late, Some(true));
    }

    #[test]
    fn a_repository_that_borrows_objects_from_elsewhere_is_refused_under_a_deadline() {
        let dir = tempfile::tempdir().unwrap();
        // Someone else's repository: the solution, committed where the student cannot read it.
        let other = dir.path().join("other");
        std::fs::create_dir_all(other.join("src")).unwrap();
        std::fs::write(other.join("src/a.rs"), "the teacher's solution").unwrap();
        git(&other, &["init", "-q"]);
        git(&other, &["add", "-A"]);
        git(&other, &["commit", "-q", "-m", "solution"]);
        // The student's: a clone sharing the other's objects (alternates), then the same as a
        // symbolic link to the other's objects, then as a linked worktree's commondir.
        let student = dir.path().join("student");
        git(
            dir.path(),
            &[
                "clone",
                "-q",
                "--shared",
                other.to_str().unwrap(),
                "student",
            ],
        );
        let checkout = dir.path().join("out");
        let alternates = student.join(".git/objects/info/alternates");
        assert!(
            alternates.exists(),
            "git clone --shared wrote no alternates"
        );
        let refused = |why: &str| {
            let e = take(&Confinement::Unconfined, &student, Some(2000), &checkout).unwrap_err();
            let text = e.to_string();
            assert!(text.contains(why) && text.contains("plain clone"), "{text}");
            assert!(
                !checkout.join("src/a.rs").exists(),
                "the other's file was written"
            );
            // Without a deadline the folder is graded as found, its history not read.
            let (at, snapshot) = take(&Confinement::Unconfined, &student, None, &checkout).unwrap();
            assert_eq!(at, student);
            assert_eq!(snapshot.commit, None);
        };
        refused(".git/objects/info/alternates");
        std::fs::remove_file(&alternates).unwrap();
        let objects = student.join(".git/objects");
        std::fs::rename(&objects, student.join(".git/objects-own")).unwrap();
        std::os::unix::fs::symlink(other.join(".git/objects"), &objects).unwrap();
        refused("symbolic link in it (.git/objects)");
        std::fs::remove_file(&objects).unwrap();
        std::fs::rename(student.join(".git/objects-own"), &objects).unwrap();
        std::fs::write(
            student.join(".git/commondir"),
            other.join(".git").to_str().unwrap(),
        )
        .unwrap();
        refused(".git/commondir");
    }

    #[test]
    fn deadlines_are_rfc3339_or_seconds() {
        assert_eq!(parse_deadline("@100").unwrap(), 100);
        assert_eq!(parse_deadline("1970-01-01T00:01:40Z").unwrap(), 100);
        assert!(parse_deadline("2026-12-01 23:59")
            .unwrap_err()
            .contains("RFC 3339"));
    }
}
