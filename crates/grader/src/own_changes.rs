//! A student's own run (`cargo grade` in their clone): a courtesy warning about changes outside
//! the files the exercises ask them to edit, which a teacher's grading ignores. This runs Git in
//! the student's own repository, on their behalf; the teacher's grading never runs Git in a
//! submission ([`crate::submission`]).
//!
//! ```
//! let none = grader::own_changes::changed_since_upstream(
//!     std::path::Path::new("/nonexistent"),
//!     &Default::default(),
//! );
//! assert!(none.is_empty());
//! ```

use std::collections::BTreeSet;
use std::path::Path;
use std::process::Command;

/// For a student's own run: the files changed outside the exercises' `edit` lists, according to
/// Git, since the commit the student's branch started from (the merge base with its upstream,
/// else `HEAD`), committed or not, plus untracked files. Empty when `root` is not a Git work tree
/// or Git is missing: this is a courtesy warning; the teacher's grading (`--root`, `--class`)
/// is what enforces the rule.
pub fn changed_since_upstream(root: &Path, graded: &BTreeSet<String>) -> Vec<String> {
    let git = |args: &[&str]| -> Option<String> {
        let out = Command::new("git")
            .arg("-C")
            .arg(root)
            .args(args)
            .output()
            .ok()?;
        out.status
            .success()
            .then(|| String::from_utf8_lossy(&out.stdout).into_owned())
    };
    if !root.join(".git").exists() {
        return Vec::new();
    }
    let base = git(&["merge-base", "HEAD", "@{upstream}"])
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|| "HEAD".into());
    let mut files = BTreeSet::new();
    for listing in [
        git(&["diff", "--name-only", &base]),
        git(&["ls-files", "--others", "--exclude-standard"]),
    ]
    .into_iter()
    .flatten()
    {
        files.extend(listing.lines().map(str::to_string));
    }
    files
        .into_iter()
        .filter(|f| !f.is_empty() && !graded.contains(f))
        .collect()
}
