//! The students' handout (`cargo grade --make-handout DIR`): the teacher's repository as students
//! should get it, in a new folder holding a fresh Git repository with a single commit, so that no
//! history can give back what was removed (`git rm solutions/` leaves every solution one
//! `git show HEAD~1:` away).
//!
//! Left out: `solutions/`, hidden tests (`tests/hidden.rs` and their `[[test]]` entries),
//! teacher-only files (a `teacher-only` marker in their first five lines, e.g. a comment in a
//! script), the teacher's CI (`.ci/`), and `target/`. Changed: the workspace's `members` lose
//! `solutions/*/*`; Markdown and notebooks lose their regions between `<!-- teacher-only -->`
//! and `<!-- /teacher-only -->` (in a notebook, within one line); the teachers' page of the book
//! becomes a short note; the grader's checksums are those of the handout's graded files; the
//! lock file is the workspace's without the solution packages; `.ci/run` runs the students'
//! checks. Then every Markdown file, notebook and script is searched for `solutions/`:
//! a mention left over (a link students would follow to nothing) stops the handout with the
//! places to mark.
//!
//! ```
//! use grader::handout_export::strip_teacher_only;
//! let text = "a <!-- teacher-only -->secret<!-- /teacher-only --> b\nc\n";
//! assert_eq!(strip_teacher_only(text), "a  b\nc\n");
//! ```

use crate::catalog::Catalog;
use crate::error::{GradeError, Result};
use crate::report::write_atomically;
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Opens a teacher-only region of Markdown or a notebook's text.
pub const OPEN: &str = "<!-- teacher-only -->";
/// Closes it.
pub const CLOSE: &str = "<!-- /teacher-only -->";

/// What `--make-handout` made.
#[derive(Debug)]
pub struct Made {
    /// The handout.
    pub dir: PathBuf,
    /// Files written.
    pub files: usize,
    /// Files of the teacher's left out, by reason.
    pub left_out: Vec<String>,
    /// Whether it is a Git repository with one commit.
    pub committed: bool,
    /// Whether the lock file lost the solution packages.
    pub lock_trimmed: bool,
}

impl std::fmt::Display for Made {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        writeln!(
            f,
            "handout: {} ({} files{}{})",
            self.dir.display(),
            self.files,
            if self.committed {
                ", one commit, no history"
            } else {
                ", NOT a Git repository (git is missing)"
            },
            if self.lock_trimmed {
                ""
            } else {
                "; no Cargo.lock"
            }
        )?;
        writeln!(f, "left out:")?;
        for item in &self.left_out {
            writeln!(f, "  {item}")?;
        }
        write!(
            f,
            "next: push it as the class's template repository (or hand out an archive of it), and keep grading from your own repository"
        )
    }
}

/// `text` without its teacher-only regions (an unclosed region runs to the end).
pub fn strip_teacher_only(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = rest.find(OPEN) {
        out.push_str(&rest[..start]);
        rest = &rest[start + OPEN.len()..];
        match rest.find(CLOSE) {
            Some(end) => rest = &rest[end + CLOSE.len()..],
            None => rest = "",
        }
    }
    out.push_str(rest);
    out
}

/// An `exercise.toml` without its hidden tests' `[[test]]` blocks (comments kept).
fn without_hidden(toml_text: &str) -> String {
    let mut parts = toml_text.split("[[test]]");
    let mut out = parts.next().unwrap_or_default().to_string();
    for block in parts {
        let hidden = block.lines().any(|l| {
            let l = l.trim();
            l.starts_with("hidden") && l.split('=').nth(1).is_some_and(|v| v.trim() == "true")
        });
        if !hidden {
            out.push_str("[[test]]");
            out.push_str(block);
        }
    }
    out
}

/// Whether a file says, in its first five lines, that it is for the teacher only.
pub(crate) fn teacher_only(bytes: &[u8]) -> bool {
    String::from_utf8_lossy(&bytes[..bytes.len().min(2000)])
        .lines()
        .take(5)
        .any(|l| l.contains("teacher-only") && !l.contains(OPEN))
}

/// The teacher's files worth handing out: what Git tracks or would track, else every file under
/// the `.gitignore` rules.
fn teacher_files(root: &Path) -> Result<BTreeSet<String>> {
    if root.join(".git").exists() {
        let out = Command::new("git")
            .arg("-C")
            .arg(root)
            .args([
                "ls-files",
                "-z",
                "--cached",
                "--others",
                "--exclude-standard",
            ])
            .output();
        if let Some(out) = out.ok().filter(|o| o.status.success()) {
            return Ok(out
                .stdout
                .split(|&b| b == 0)
                .filter(|p| !p.is_empty())
                .map(|p| String::from_utf8_lossy(p).into_owned())
                .filter(|p| root.join(p).is_file())
                .collect());
        }
    }
    let mut rules = ignore::gitignore::GitignoreBuilder::new(root);
    rules.add(root.join(".gitignore"));
    let rules = rules
        .build()
        .unwrap_or_else(|_| ignore::gitignore::Gitignore::empty());
    Ok(crate::submission::list_files(root, &rules))
}

const TEACHERS_PAGE: &str = "book/src/teachers.md";
const TEACHERS_NOTE: &str = "# For teachers\n\nThis page (handing out the exercises, grading a class, the reports' formats) is in\nthe teacher's copy of the workbook. You grade yourself with `cargo grade`; see\n[exercises/README.md](../../exercises/README.md).\n";
const STUDENT_CI: &str = "#!/usr/bin/env bash\n# CI of your copy of the workbook: the library's tests, then your grade (cargo grade exits\n# with 1 until every exercise has full marks; its report is target/grade/report.json).\nset -euo pipefail\ncd \"$(dirname \"$0\")/..\"\ncargo test\ncargo grade\n";

/// What to make.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// The students' handout, with GitHub Classroom's workflow if asked.
    Handout {
        /// Write `.github/workflows/classroom.yml`.
        classroom_workflow: bool,
    },
    /// The teacher's judge bundle for grading elsewhere (a private repository, Gradescope's
    /// autograder zip): the handout with the hidden tests kept, Gradescope's `setup.sh` and
    /// `run_autograder`; the caller records `expected.json` into it.
    Judge,
}

/// GitHub Classroom's workflow for the handout.
pub const CLASSROOM_WORKFLOW: &str = include_str!("../templates/classroom.yml");
/// Gradescope's set-up script, for the judge bundle.
pub const GRADESCOPE_SETUP: &str = include_str!("../templates/gradescope-setup.sh");
/// Gradescope's entry point, for the judge bundle.
pub const GRADESCOPE_RUN: &str = include_str!("../templates/gradescope-run_autograder");

/// Makes the handout (or the judge bundle) of `catalog`'s repository in `dest` (see the
/// module's documentation).
pub fn make(catalog: &Catalog, dest: &Path, kind: Kind) -> Result<Made> {
    if dest.exists()
        && std::fs::read_dir(dest)
            .map_err(|e| GradeError::io(dest, e))?
            .next()
            .is_some()
    {
        return Err(GradeError::Handout(format!(
            "{} is not empty: the handout goes into a new folder",
            dest.display()
        )));
    }
    let staging = staging_dir(dest)?;
    match fill(catalog, &staging, kind) {
        Ok(mut made) => {
            if dest.exists() {
                std::fs::remove_dir(dest).map_err(|e| GradeError::io(dest, e))?;
            }
            std::fs::rename(&staging, dest).map_err(|e| GradeError::io(dest, e))?;
            made.dir = dest.to_path_buf();
            Ok(made)
        }
        Err(e) => {
            let _ = std::fs::remove_dir_all(&staging);
            Err(e)
        }
    }
}

/// A new folder beside `dest`, so that the handout appears whole or not at all.
fn staging_dir(dest: &Path) -> Result<PathBuf> {
    let parent = match dest.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    std::fs::create_dir_all(&parent).map_err(|e| GradeError::io(&parent, e))?;
    let name = dest
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "handout".into());
    let staging = parent.join(format!(".{name}.partial-{}", std::process::id()));
    if staging.exists() {
        std::fs::remove_dir_all(&staging).map_err(|e| GradeError::io(&staging, e))?;
    }
    std::fs::create_dir(&staging).map_err(|e| GradeError::io(&staging, e))?;
    Ok(staging)
}

/// Writes the handout into `dest`, an empty folder.
fn fill(catalog: &Catalog, dest: &Path, kind: Kind) -> Result<Made> {
    let root = &catalog.root;
    let hidden_files: BTreeSet<String> = catalog
        .exercises
        .iter()
        .map(|e| format!("exercises/{}/tests/hidden.rs", e.path))
        .collect();
    let mut left_out = BTreeSet::new();
    let mut written = 0;
    for rel in teacher_files(root)? {
        let reason = if rel.starts_with("solutions/") {
            Some("the reference solutions")
        } else if rel.starts_with(".ci/") {
            Some("the teacher's CI (the handout has its own)")
        } else if rel.starts_with("target/") {
            Some("build output")
        } else if hidden_files.contains(&rel) && kind != Kind::Judge {
            Some("hidden tests")
        } else if rel == "crates/grader/checksums.txt" {
            Some("made anew for the handout")
        } else {
            None
        };
        if let Some(reason) = reason {
            left_out.insert(format!("{}: {reason}", top(&rel)));
            continue;
        }
        let path = root.join(&rel);
        let bytes = std::fs::read(&path).map_err(|e| GradeError::io(&path, e))?;
        if teacher_only(&bytes) {
            left_out.insert(format!("{rel}: marked teacher-only"));
            continue;
        }
        let bytes = transform(&rel, bytes, kind);
        write_atomically(&dest.join(&rel), &bytes)?;
        copy_mode(&path, &dest.join(&rel));
        written += 1;
    }
    write_atomically(&dest.join(".ci/run"), STUDENT_CI.as_bytes())?;
    set_executable(&dest.join(".ci/run"));
    let mut extra = 2;
    match kind {
        Kind::Handout {
            classroom_workflow: true,
        } => {
            write_atomically(
                &dest.join(".github/workflows/classroom.yml"),
                CLASSROOM_WORKFLOW.as_bytes(),
            )?;
            extra += 1;
        }
        Kind::Handout { .. } => {}
        Kind::Judge => {
            for (name, text) in [
                ("setup.sh", GRADESCOPE_SETUP),
                ("run_autograder", GRADESCOPE_RUN),
            ] {
                write_atomically(&dest.join(name), text.as_bytes())?;
                set_executable(&dest.join(name));
            }
            extra += 2;
        }
    }
    // The handout's graded files, with its own checksums (hidden tests gone from exercise.toml).
    let handout = Catalog::load(dest)?;
    let sums = crate::integrity::compute(&handout)?;
    write_atomically(
        &dest.join("crates/grader/checksums.txt"),
        crate::integrity::render(&sums).as_bytes(),
    )?;
    let lock_trimmed = trim_lock(catalog, &dest.join("Cargo.lock"))?;
    check_no_mentions(dest)?;
    let committed = commit(dest);
    Ok(Made {
        dir: dest.to_path_buf(),
        files: written + extra,
        left_out: left_out.into_iter().collect(),
        committed,
        lock_trimmed,
    })
}

/// Removes the solution packages from the handout's `Cargo.lock` (nothing depends on them, so
/// the rest is what Cargo would write: a student's first build leaves the file as it is).
fn trim_lock(catalog: &Catalog, lock: &Path) -> Result<bool> {
    let Ok(text) = std::fs::read_to_string(lock) else {
        return Ok(false);
    };
    let mut solutions = BTreeSet::new();
    for exercise in &catalog.exercises {
        let dir = exercise.dir(&catalog.root, crate::catalog::Variant::Solutions);
        if dir.join("Cargo.toml").is_file() {
            solutions.insert(exercise.package(&catalog.root, crate::catalog::Variant::Solutions)?);
        }
    }
    let mut out = String::with_capacity(text.len());
    for block in text.split_inclusive("\n\n") {
        let name = block
            .lines()
            .find_map(|l| l.strip_prefix("name = \""))
            .map(|n| n.trim_end_matches('"'));
        let is_package = block.trim_start().starts_with("[[package]]");
        if !(is_package && name.is_some_and(|n| solutions.contains(n))) {
            out.push_str(block);
        }
    }
    write_atomically(lock, out.as_bytes())?;
    Ok(true)
}

fn top(rel: &str) -> String {
    match rel.split_once('/') {
        Some((first, _)) if first == "solutions" || first == ".ci" || first == "target" => {
            format!("{first}/")
        }
        _ => rel.to_string(),
    }
}

fn transform(rel: &str, bytes: Vec<u8>, kind: Kind) -> Vec<u8> {
    if rel == TEACHERS_PAGE {
        return TEACHERS_NOTE.as_bytes().to_vec();
    }
    let Ok(text) = String::from_utf8(bytes.clone()) else {
        return bytes;
    };
    let text = if rel == "Cargo.toml" {
        text.lines()
            .filter(|l| {
                !l.trim()
                    .trim_end_matches(',')
                    .trim_matches('"')
                    .starts_with("solutions/")
            })
            .map(|l| l.replace(", \"solutions/*/*\"", "") + "\n")
            .collect()
    } else if rel.ends_with("exercise.toml") && kind != Kind::Judge {
        without_hidden(&text)
    } else if rel.ends_with(".md") || rel.ends_with(".ipynb") {
        strip_teacher_only(&text)
    } else {
        text
    };
    text.into_bytes()
}

/// Every mention of `solutions/` left in what students read or run: Markdown, notebooks, scripts
/// (comments in source files and manifests, about how the crates are laid out, are not links).
fn check_no_mentions(dest: &Path) -> Result<()> {
    let mut found = Vec::new();
    for rel in crate::submission::list_files(dest, &ignore::gitignore::Gitignore::empty()) {
        let read = [".md", ".ipynb", ".sh", ".py", ".yml"]
            .iter()
            .any(|ext| rel.ends_with(ext));
        if !read {
            continue;
        }
        let text = std::fs::read_to_string(dest.join(&rel)).unwrap_or_default();
        for (n, line) in text.lines().enumerate() {
            if line.contains("solutions/") {
                found.push(format!("{rel}:{}", n + 1));
            }
        }
    }
    if found.is_empty() {
        Ok(())
    } else {
        Err(GradeError::Handout(format!(
            "the handout would still point students at solutions/ in: {}. In your repository, put such passages between {OPEN} and {CLOSE} (within one line in a notebook), or mark a whole file teacher-only in its first lines",
            found.join(", ")
        )))
    }
}

#[cfg(unix)]
fn copy_mode(from: &Path, to: &Path) {
    if let Ok(meta) = std::fs::metadata(from) {
        let _ = std::fs::set_permissions(to, meta.permissions());
    }
}

#[cfg(not(unix))]
fn copy_mode(_: &Path, _: &Path) {}

#[cfg(unix)]
fn set_executable(path: &Path) {
    use std::os::unix::fs::PermissionsExt;
    let _ = std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o755));
}

#[cfg(not(unix))]
fn set_executable(_: &Path) {}

/// `git init` and one commit of everything, by "Workbook handout".
fn commit(dest: &Path) -> bool {
    let git = |args: &[&str]| {
        Command::new("git")
            .arg("-C")
            .arg(dest)
            .args([
                "-c",
                "user.name=Workbook handout",
                "-c",
                "user.email=handout@workbook.invalid",
                "-c",
                "commit.gpgsign=false",
            ])
            .args(args)
            .output()
            .is_ok_and(|o| o.status.success())
    };
    git(&["init", "-q", "-b", "main"])
        && git(&["add", "-A"])
        && git(&["commit", "-q", "-m", "Handout"])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hidden_tests_leave_exercise_toml_with_their_blocks_only() {
        let text = "# keep me\ntitle = \"x\"\n\n[[test]]\nname = \"a\"\npoints = 1\n\n[[test]]\nname = \"b\"\npoints = 2\nhidden = true\n\n[[test]]\nname = \"c\"\npoints = 1\n";
        let out = without_hidden(text);
        assert!(out.contains("# keep me") && out.contains("\"a\"") && out.contains("\"c\""));
        assert!(!out.contains("\"b\"") && !out.contains("hidden"));
        assert_eq!(out.matches("[[test]]").count(), 2);
    }

    #[test]
    fn teacher_only_regions_and_files() {
        assert_eq!(strip_teacher_only("x<!-- teacher-only -->y"), "x");
        assert!(teacher_only(
            b"#!/bin/sh\n# teacher-only: grades the class\n"
        ));
        assert!(!teacher_only(
            b"# a script\n\n\n\n\n\n# teacher-only further down\n"
        ));
        assert!(!teacher_only(
            b"<!-- teacher-only -->hidden<!-- /teacher-only -->"
        ));
    }
}
