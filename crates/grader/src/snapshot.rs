//! Which state of a submission is graded: with `--deadline`, the last commit of the student's
//! repository made before the deadline (never uncommitted files); without, the folder as it is.
//! Either way the report records the commit and its time when there is one.
//!
//! A student's repository is hostile like the rest of the submission: its `.git/config` can make
//! Git run commands (`core.fsmonitor`, filters, hooks). So Git runs in the sandbox
//! ([`crate::sandbox`]), on a read-only mount of the repository, with no network and none of
//! the teacher's configuration; `git archive` hands the chosen commit's files out as a tar
//! stream, capped in size, which the judge unpacks itself: regular files only, no link, nothing
//! outside the checkout.
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
use crate::sandbox::{Confinement, Ended, Jail, Limits};
use serde::{Deserialize, Serialize};
use std::path::{Component, Path, PathBuf};
use std::time::Duration;

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

/// Runs Git in the sandbox on the repository `repo` (read-only), returning its output.
fn git(
    confinement: &Confinement,
    repo: &Path,
    args: &[&str],
    cap: usize,
) -> Result<(Ended, Vec<u8>, u64)> {
    let mut limits = Limits::for_tests(Duration::from_secs(120));
    limits.output = cap;
    let mut jail = Jail::new(limits);
    let inside = if confinement.is_sandboxed() {
        PathBuf::from("/submission")
    } else {
        repo.to_path_buf()
    };
    jail.ro(repo, "/submission");
    jail.env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_TERMINAL_PROMPT", "0")
        .env("GIT_OPTIONAL_LOCKS", "0");
    let mut full = vec![
        "-c".to_string(),
        "safe.directory=*".into(),
        "-c".into(),
        "core.fsmonitor=".into(),
        "-c".into(),
        "core.hooksPath=/dev/null".into(),
        "-C".into(),
        inside.display().to_string(),
    ];
    full.extend(args.iter().map(|a| a.to_string()));
    let done = confinement.run(&jail, Path::new("/usr/bin/git"), &full)?;
    Ok((done.ended, done.stdout.bytes, done.stdout.dropped))
}

/// The commits on `HEAD`'s first-parent line, newest first, with their times.
fn history(confinement: &Confinement, repo: &Path) -> Result<Vec<(String, i64)>> {
    let (ended, out, _) = git(
        confinement,
        repo,
        &["log", "--first-parent", "--format=%H %ct", "HEAD"],
        4 << 20,
    )?;
    if ended != Ended::Exited(0) {
        return Ok(Vec::new());
    }
    Ok(String::from_utf8_lossy(&out)
        .lines()
        .filter_map(|l| {
            let (sha, t) = l.split_once(' ')?;
            let ok = sha.len() >= 40 && sha.bytes().all(|b| b.is_ascii_hexdigit());
            Some((sha.to_string(), t.trim().parse().ok()?)).filter(|_| ok)
        })
        .collect())
}

/// The state of `dir` to grade: with a deadline (seconds), the last commit before it, unpacked
/// into `checkout` (emptied first); else `dir` itself. Returns the folder to read and what it is.
pub fn take(
    confinement: &Confinement,
    dir: &Path,
    deadline: Option<i64>,
    checkout: &Path,
) -> Result<(PathBuf, Snapshot)> {
    let is_repo = std::fs::symlink_metadata(dir.join(".git")).is_ok_and(|m| m.is_dir());
    let commits = if is_repo {
        history(confinement, dir)?
    } else {
        Vec::new()
    };
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
    let (ended, tar, dropped) = git(
        confinement,
        dir,
        &["archive", "--format=tar", &sha],
        MAX_CHECKOUT_BYTES,
    )?;
    if ended != Ended::Exited(0) {
        return Err(GradeError::Submission(format!(
            "git archive of {sha} failed ({ended:?})"
        )));
    }
    if dropped > 0 {
        return Err(GradeError::Submission(format!(
            "the commit {sha} is over {} MiB: not graded",
            MAX_CHECKOUT_BYTES >> 20
        )));
    }
    unpack(&tar, &empty(checkout)?)?;
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

/// Unpacks the regular files of a tar stream into `to`: no links, no devices, no path that
/// leaves `to`.
fn unpack(tar: &[u8], to: &Path) -> Result<()> {
    let mut archive = tar::Archive::new(tar);
    let bad = |e: std::io::Error| GradeError::Submission(format!("an unreadable archive: {e}"));
    for entry in archive.entries().map_err(bad)? {
        let mut entry = entry.map_err(bad)?;
        if entry.header().entry_type() != tar::EntryType::Regular {
            continue;
        }
        let path = entry.path().map_err(bad)?.into_owned();
        if !path.components().all(|c| matches!(c, Component::Normal(_))) {
            continue;
        }
        let dest = to.join(&path);
        if let Some(parent) = dest.parent() {
            std::fs::create_dir_all(parent).map_err(|e| GradeError::io(parent, e))?;
        }
        let mut file = std::fs::File::create(&dest).map_err(|e| GradeError::io(&dest, e))?;
        std::io::copy(&mut entry, &mut file).map_err(|e| GradeError::io(&dest, e))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_regular_files_inside_the_checkout_are_unpacked() {
        let mut builder = tar::Builder::new(Vec::new());
        let mut add = |path: &str, kind: tar::EntryType, data: &[u8]| {
            let mut header = tar::Header::new_gnu();
            header.set_entry_type(kind);
            header.set_size(data.len() as u64);
            header.set_mode(0o644);
            // set_path refuses `..`; write the raw name as a hostile archive would
            let name = header.as_old_mut().name.as_mut();
            name[..path.len()].copy_from_slice(path.as_bytes());
            header.set_cksum();
            builder.append(&header, data).unwrap();
        };
        add("src/a.rs", tar::EntryType::Regular, b"fn a() {}");
        add("../escape.rs", tar::EntryType::Regular, b"bad");
        add("link.rs", tar::EntryType::Symlink, b"");
        let bytes = builder.into_inner().unwrap();
        let dir = tempfile::tempdir().unwrap();
        let to = dir.path().join("out");
        std::fs::create_dir_all(&to).unwrap();
        unpack(&bytes, &to).unwrap();
        assert_eq!(std::fs::read(to.join("src/a.rs")).unwrap(), b"fn a() {}");
        assert!(!dir.path().join("escape.rs").exists());
        assert!(!to.join("link.rs").exists());
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
