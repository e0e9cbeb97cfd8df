//! The students' handout (`cargo grade --make-handout DIR`): the teacher's repository as students
//! should get it, in a new folder holding a fresh Git repository with a single commit, so that no
//! history can give back what was removed (`git rm solutions/` leaves every solution one
//! `git show HEAD~1:` away).
//!
//! Left out: `solutions/`, hidden tests (`tests/hidden.rs` and their `[[test]]` entries),
//! teacher-only files (a `teacher-only` marker in their first five lines, e.g. a comment in a
//! script), the teacher's CI (`.ci/`), and `target/`. Changed: the workspace's `members` lose
//! `solutions/*/*`; Markdown and notebooks lose their regions between `<!-- teacher-only -->`
//! and `<!-- /teacher-only -->` (in a notebook, within one line; translated READMEs such as
//! `README.zh-CN.md` too); the teachers' page of the book becomes a short note; translation
//! catalogues (`book/po/*.po`, `notebooks/po/*.po`) lose every message that comes only from
//! teacher-only text (the teachers' page, a teacher-only passage, found by its words in the
//! teacher's sources; a message with a passage marked inline keeps its public part) and their
//! obsolete messages; the grader's checksums are those of the handout's graded files; the lock
//! file is the workspace's without the solution packages; `.ci/run` runs the students' checks.
//! Then every text file is searched for leftovers: a mention of `solutions/` (a link students
//! would follow to nothing; Rust sources and manifests excepted, whose comments describe the
//! layout) or a teacher-only marker stops the handout with the places to mark.
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
/// The teachers' pages after the first (`book/src/teachers-1-....md`, ...): left out of the
/// handout, with their lines in the book's table of contents.
const TEACHERS_SUBPAGE: &str = "book/src/teachers-";
/// "Teaching this course" (the schedule, the plans, the presenter's checklist): for whoever
/// presents the course, left out of the handout like the teachers' sub-pages.
const TEACHING_PAGE: &str = "book/src/teaching.md";
const BOOK_SUMMARY: &str = "book/src/SUMMARY.md";
/// The book's page checks (crates/workbook/tests/book/pages.rs) know a page with this marker as
/// the handout's note: no learner's structure, any anchor into it accepted.
const TEACHERS_NOTE: &str = "# For teachers\n\n<!-- handout-note -->\n\nThis page (handing out the exercises, grading a class, the reports' formats) is in\nthe teacher's copy of the workbook. You grade yourself with `cargo grade`; see\n[exercises/README.md](../../exercises/README.md).\n";
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
    let mut sources = Sources::new(root);
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
        } else if is_teachers_subpage(&rel) {
            Some("the teachers' pages")
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
        let bytes = if rel.ends_with(".po") {
            // A catalogue holds the teacher-only text it translates, in both languages.
            let text = String::from_utf8_lossy(&bytes);
            let (kept, dropped) = strip_catalogue(&rel, &text, &mut sources);
            if dropped > 0 {
                left_out.insert(format!("{rel}: {dropped} teacher-only messages"));
            }
            kept.into_bytes()
        } else {
            transform(&rel, bytes, kind)
        };
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

/// A teachers' page after the first (`book/src/teachers-1-grading-a-class.md`), or the
/// presenters' page (`book/src/teaching.md`).
fn is_teachers_subpage(rel: &str) -> bool {
    rel == TEACHING_PAGE
        || (rel.starts_with(TEACHERS_SUBPAGE)
            && rel.ends_with(".md")
            && !rel[TEACHERS_SUBPAGE.len()..].contains('/'))
}

fn transform(rel: &str, bytes: Vec<u8>, kind: Kind) -> Vec<u8> {
    if rel == TEACHERS_PAGE {
        return TEACHERS_NOTE.as_bytes().to_vec();
    }
    let Ok(text) = String::from_utf8(bytes.clone()) else {
        return bytes;
    };
    if rel == BOOK_SUMMARY {
        // The teachers' sub-pages are left out; so are their entries (mdBook would make them).
        let mut kept: String = text
            .lines()
            .filter(|l| !l.contains("](teachers-") && !l.contains("](teaching.md)"))
            .map(|l| format!("{l}\n"))
            .collect();
        if !text.ends_with('\n') {
            kept.pop();
        }
        return kept.into_bytes();
    }
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

/// The words of `text`, lower-case, one space apart: what a translation catalogue's message and
/// its source have in common however the message was re-wrapped or its Markdown re-written.
fn words(text: &str) -> String {
    text.split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(str::to_lowercase)
        .collect::<Vec<_>>()
        .join(" ")
}

/// A source file's text as a catalogue's messages come from it: a notebook's cells' sources
/// joined, any other file as it is.
fn source_text(path: &Path) -> Option<String> {
    let text = std::fs::read_to_string(path).ok()?;
    if path.extension().is_some_and(|e| e == "ipynb") {
        let notebook: serde_json::Value = serde_json::from_str(&text).ok()?;
        let mut out = String::new();
        for cell in notebook["cells"].as_array()? {
            match &cell["source"] {
                serde_json::Value::String(s) => out.push_str(s),
                serde_json::Value::Array(lines) => lines
                    .iter()
                    .filter_map(|l| l.as_str())
                    .for_each(|l| out.push_str(l)),
                _ => {}
            }
            out.push('\n');
        }
        return Some(out);
    }
    Some(text)
}

/// Where a message of a catalogue comes from, as far as the handout is concerned.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Origin {
    /// Text students read.
    Public,
    /// The teachers' page, or a teacher-only passage.
    Teacher,
    /// Not found in the source (kept).
    Unknown,
}

/// The teacher's sources of the catalogues' messages, read once: per source file, its words
/// whole and without its teacher-only passages.
struct Sources {
    root: PathBuf,
    cache: std::collections::BTreeMap<PathBuf, Option<(String, String)>>,
}

impl Sources {
    fn new(root: &Path) -> Self {
        Self {
            root: root.to_path_buf(),
            cache: Default::default(),
        }
    }

    /// Where `msgid`, referenced as `reference` (`src/x.md`, `notebooks/x.ipynb:01-02`) by the
    /// catalogue `po` (relative to the repository), comes from.
    fn origin(&mut self, po: &str, reference: &str, msgid: &str) -> Origin {
        let file = reference.split(':').next().unwrap_or(reference);
        // mdbook's references are relative to the book, the notebooks' to the repository
        let book = Path::new(po)
            .parent()
            .and_then(Path::parent)
            .unwrap_or(Path::new(""));
        let candidates = [book.join(file), PathBuf::from(file)];
        let Some(rel) = candidates.iter().find(|p| self.root.join(p).is_file()) else {
            return Origin::Unknown;
        };
        if rel == Path::new(TEACHERS_PAGE) || is_teachers_subpage(&rel.to_string_lossy()) {
            return Origin::Teacher;
        }
        let path = self.root.join(rel);
        let entry = self.cache.entry(path.clone()).or_insert_with(|| {
            source_text(&path).map(|t| (words(&t), words(&strip_teacher_only(&t))))
        });
        let Some((whole, public)) = entry else {
            return Origin::Unknown;
        };
        let wanted = words(msgid);
        if wanted.is_empty() || public.contains(&wanted) {
            Origin::Public
        } else if whole.contains(&wanted) {
            Origin::Teacher
        } else {
            Origin::Unknown
        }
    }
}

/// A PO string's lines (`"..."` after `msgid` and on the lines below) unquoted and joined.
fn po_string(lines: &[&str], keyword: &str) -> Option<String> {
    let start = lines
        .iter()
        .position(|l| l.starts_with(keyword) && l[keyword.len()..].starts_with(' '))?;
    let mut out = String::new();
    let first = lines[start][keyword.len()..].trim();
    let rest = lines[start + 1..]
        .iter()
        .take_while(|l| l.starts_with('"'))
        .map(|l| l.trim());
    for quoted in std::iter::once(first).chain(rest) {
        let inner = quoted.trim_start_matches('"').trim_end_matches('"');
        out.push_str(
            &inner
                .replace("\\n", "\n")
                .replace("\\\"", "\"")
                .replace("\\\\", "\\"),
        );
    }
    Some(out)
}

/// `text` without its teacher-only passages, runs of spaces made one.
fn public_part(text: &str) -> String {
    let stripped = strip_teacher_only(text);
    let mut out = String::with_capacity(stripped.len());
    for c in stripped.chars() {
        if !(c == ' ' && out.ends_with(' ')) {
            out.push(c);
        }
    }
    out
}

/// A PO string literal.
fn po_quote(text: &str) -> String {
    format!(
        "\"{}\"",
        text.replace('\\', "\\\\")
            .replace('"', "\\\"")
            .replace('\n', "\\n")
    )
}

/// A translation catalogue (`rel`, relative to the repository) without the messages that come
/// only from teacher-only text (the teachers' page, teacher-only passages) and without obsolete
/// messages (`#~`, which may hold teacher-only text of an older version). Returns the catalogue
/// and how many messages it lost.
fn strip_catalogue(rel: &str, text: &str, sources: &mut Sources) -> (String, usize) {
    let mut out = String::with_capacity(text.len());
    let mut dropped = 0;
    for (i, block) in text.split("\n\n").enumerate() {
        let lines: Vec<&str> = block.lines().collect();
        let obsolete = lines.iter().any(|l| l.starts_with("#~"))
            && !lines.iter().any(|l| l.starts_with("msgid"));
        let references: Vec<&str> = lines
            .iter()
            .filter_map(|l| l.strip_prefix("#:"))
            .flat_map(str::split_whitespace)
            .collect();
        let teacher = match po_string(&lines, "msgid") {
            Some(msgid) if i > 0 && !msgid.is_empty() && !references.is_empty() => {
                // A passage marked inline is looked for by its public part (the teachers' page,
                // which shows the markers themselves, is teacher-only whatever it says).
                let probe = if msgid.contains(OPEN) {
                    public_part(&msgid)
                } else {
                    msgid
                };
                let origins: Vec<Origin> = references
                    .iter()
                    .map(|r| sources.origin(rel, r, &probe))
                    .collect();
                origins.contains(&Origin::Teacher) && !origins.contains(&Origin::Public)
            }
            _ => false,
        };
        if obsolete || teacher {
            dropped += 1;
            continue;
        }
        if !out.is_empty() {
            out.push_str("\n\n");
        }
        match (po_string(&lines, "msgid"), po_string(&lines, "msgstr")) {
            // A passage marked inline: the message keeps its public part, in both languages.
            (Some(id), Some(text)) if id.contains(OPEN) => {
                for comment in lines.iter().filter(|l| l.starts_with('#')) {
                    out.push_str(comment);
                    out.push('\n');
                }
                out.push_str(&format!(
                    "msgid {}\nmsgstr {}",
                    po_quote(&public_part(&id)),
                    po_quote(&public_part(&text))
                ));
                dropped += 1;
            }
            _ => out.push_str(block),
        }
    }
    if text.ends_with('\n') && !out.ends_with('\n') {
        out.push('\n');
    }
    (out, dropped)
}

/// What is left over in the handout's text files (every file that is UTF-8 text): a mention of
/// `solutions/` (except in Rust sources and manifests, whose comments say how the crates are
/// laid out: not links), and a teacher-only marker that no rule removed (except in the grader's
/// own code, which implements them), with the places to mark.
fn check_no_mentions(dest: &Path) -> Result<()> {
    let mut found = Vec::new();
    for rel in crate::submission::list_files(dest, &ignore::gitignore::Gitignore::empty()) {
        let Ok(text) = std::fs::read_to_string(dest.join(&rel)) else {
            continue;
        };
        let layout = [".rs", ".toml", ".lock"]
            .iter()
            .any(|ext| rel.ends_with(ext));
        let grader = rel.starts_with("crates/grader/");
        for (n, line) in text.lines().enumerate() {
            if !layout && line.contains("solutions/") {
                found.push(format!("{rel}:{} (solutions/)", n + 1));
            }
            if !grader && (line.contains(OPEN) || line.contains(CLOSE)) {
                found.push(format!("{rel}:{} (a teacher-only marker)", n + 1));
            }
        }
    }
    if found.is_empty() {
        Ok(())
    } else {
        Err(GradeError::Handout(format!(
            "the handout would still hold what only teachers see, in: {}. In your repository, put such passages between {OPEN} and {CLOSE} (within one line in a notebook), or mark a whole file teacher-only in its first lines",
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

    /// A repository with a book (a public page with a teacher-only passage, the teachers'
    /// page), a notebook with a teacher-only passage, and their catalogues.
    fn catalogued() -> tempfile::TempDir {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        let write = |rel: &str, text: &str| {
            let path = root.join(rel);
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(path, text).unwrap();
        };
        write(
            "book/src/intro.md",
            "# Intro\n\nEveryone reads this paragraph.\n\n<!-- teacher-only -->\nThe answer key is in\nthe solutions folder.\n<!-- /teacher-only -->\n\nInline <!-- teacher-only -->secret key<!-- /teacher-only --> text.\n",
        );
        write(
            "book/src/SUMMARY.md",
            "- [For teachers](teachers.md)\n    - [Teachers 1: grading](teachers-1-grading.md)\n",
        );
        write(
            "book/src/teachers.md",
            "# For teachers\n\nGrade with the judge.\n",
        );
        write(
            "book/src/teachers-1-grading.md",
            "# Teachers 1: grading\n\nRecord the expected values first.\n",
        );
        write(
            "notebooks/01.ipynb",
            r#"{"cells": [{"cell_type": "markdown", "source": ["Run this cell.\n", "<!-- teacher-only -->Mark it out of ten.<!-- /teacher-only -->\n"]}]}"#,
        );
        dir
    }

    const BOOK_PO: &str = "msgid \"\"\nmsgstr \"\"\n\"Language: zh_CN\\n\"\n\n#: src/intro.md\nmsgid \"Intro\"\nmsgstr \"简介\"\n\n#: src/intro.md\nmsgid \"Everyone reads this paragraph.\"\nmsgstr \"人人都读这一段。\"\n\n#: src/intro.md\nmsgid \"\"\n\"The answer key is in the \"\n\"solutions folder.\"\nmsgstr \"答案在 solutions 文件夹中。\"\n\n#: src/intro.md\nmsgid \"Inline <!-- teacher-only -->secret key<!-- /teacher-only --> text.\"\nmsgstr \"行内<!-- teacher-only -->密钥<!-- /teacher-only -->文字。\"\n\n#: src/SUMMARY.md src/teachers.md\nmsgid \"For teachers\"\nmsgstr \"写给教师\"\n\n#: src/teachers.md\nmsgid \"Grade with the judge.\"\nmsgstr \"用评判器评分。\"\n\n#: src/teachers-1-grading.md\nmsgid \"Record the expected values first.\"\nmsgstr \"先记录期望值。\"\n\n#: src/teachers.md\nmsgid \"Mark passages with `<!-- teacher-only -->` and `<!-- /teacher-only -->`; answers are in `solutions/`.\"\nmsgstr \"用标记标出段落；答案在 `solutions/` 中。\"\n\n#~ msgid \"An old teacher-only message\"\n#~ msgstr \"旧的\"\n";

    #[test]
    fn catalogues_lose_the_teacher_only_messages() {
        let repo = catalogued();
        let mut sources = Sources::new(repo.path());
        let (po, dropped) = strip_catalogue("book/po/zh-CN.po", BOOK_PO, &mut sources);
        // kept: the header, the public messages, the heading shared with SUMMARY.md
        for kept in ["Language: zh_CN", "简介", "人人都读这一段。", "写给教师"] {
            assert!(po.contains(kept), "{kept}: {po}");
        }
        // gone: the teacher-only passage, the teachers' page, an obsolete message; the inline
        // passage keeps its public words only
        for gone in [
            "answer key",
            "答案",
            "用评判器",
            "期望值",
            "旧的",
            "secret",
            "密钥",
            "teacher-only",
        ] {
            assert!(!po.contains(gone), "{gone}: {po}");
        }
        assert!(
            po.contains("msgid \"Inline text.\"\nmsgstr \"行内文字。\""),
            "{po}"
        );
        assert_eq!(dropped, 6, "{po}");
    }

    #[test]
    fn the_teachers_pages_become_one_note() {
        assert!(is_teachers_subpage("book/src/teachers-1-grading.md"));
        assert!(!is_teachers_subpage("book/src/teachers.md"));
        assert!(!is_teachers_subpage("book/src/teachers-1/x.md"));
        assert!(is_teachers_subpage("book/src/teaching.md"));
        assert!(!is_teachers_subpage("book/src/teaching-1.md"));
        let note = transform(
            "book/src/teachers.md",
            b"# For teachers\n\nsecret".to_vec(),
            Kind::Handout {
                classroom_workflow: false,
            },
        );
        let note = String::from_utf8(note).unwrap();
        assert!(
            note.contains("<!-- handout-note -->") && !note.contains("secret"),
            "{note}"
        );
        let summary = "- [Intro](intro.md)\n- [Teaching this course](teaching.md)\n- [For teachers](teachers.md)\n    - [Teachers 1: grading](teachers-1-grading.md)\n";
        let summary = transform(
            "book/src/SUMMARY.md",
            summary.as_bytes().to_vec(),
            Kind::Handout {
                classroom_workflow: false,
            },
        );
        assert_eq!(
            String::from_utf8(summary).unwrap(),
            "- [Intro](intro.md)\n- [For teachers](teachers.md)\n"
        );
    }

    #[test]
    fn notebook_catalogues_too() {
        let repo = catalogued();
        let mut sources = Sources::new(repo.path());
        let po = "msgid \"\"\nmsgstr \"\"\n\n#: notebooks/01.ipynb:01-01\nmsgid \"Run this cell.\"\nmsgstr \"运行这个单元格。\"\n\n#: notebooks/01.ipynb:01-02\nmsgid \"Mark it out of ten.\"\nmsgstr \"按十分制打分。\"\n";
        let (kept, dropped) = strip_catalogue("notebooks/po/zh-CN.po", po, &mut sources);
        assert!(kept.contains("运行这个单元格。"), "{kept}");
        assert!(
            !kept.contains("Mark it") && !kept.contains("十分制"),
            "{kept}"
        );
        assert_eq!(dropped, 1);
    }
}
