//! The results of a grading run: a table for people, JSON and JUnit XML for machines (GitHub
//! Classroom, GitLab, an LMS), written atomically so a report is never half there.
//!
//! ```
//! let report = grader::Report::new(grader::Variant::Exercises, std::path::Path::new("."), vec![]);
//! assert_eq!(report.max_points, 0);
//! assert!(report.to_junit().unwrap().contains("<testsuites"));
//! ```

use crate::catalog::Variant;
use crate::error::{GradeError, Result};
use crate::messages::{display_width, Messages};
use crate::runner::{ExerciseOutcome, Status};
use comfy_table::{presets, Cell, Color, ColumnConstraint, ContentArrangement, Table, Width};
use serde::{Deserialize, Serialize};
use std::io::Write;
use std::path::Path;
use std::time::Duration;

/// A grading run.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Report {
    /// `grade <version>`.
    pub grader: String,
    /// Which tree was graded.
    pub variant: Variant,
    /// The repository that was graded.
    pub root: String,
    /// Points earned.
    pub points: u32,
    /// Points available.
    pub max_points: u32,
    /// Graded tests that passed.
    pub passed_tests: usize,
    /// Graded tests.
    pub total_tests: usize,
    /// One entry per exercise, in catalogue order.
    pub exercises: Vec<ExerciseOutcome>,
    /// Files the student changed that are not graded (`--root` of a student's clone): they were
    /// not compiled; the student's `edit` files were graded in the teacher's pristine tree.
    #[serde(default)]
    pub ignored_files: Vec<String>,
    /// Edit files of the submission that were not read (a symbolic link, a special file, too
    /// big) and why: the stub was graded instead.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub refused_files: Vec<String>,
    /// Who gave the verdicts: the judge (a class run), or the tests' own assertions (a
    /// student's own run, `null`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub judged_by: Option<String>,
    /// (Class runs) the student, as the roster names them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub student: Option<crate::roster::Student>,
    /// (Class runs) what was found and which state of it was graded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub submission: Option<SubmissionState>,
}

/// What a class run found of a student's submission.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SubmissionState {
    /// Graded, or why not.
    pub status: SubmissionStatus,
    /// The folder the workbook was found in, relative to the student's folder, when it was one
    /// level down (an unpacked archive).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub found_in: Option<String>,
    /// The commit graded and its time, and whether there were commits after the deadline.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub snapshot: Option<crate::snapshot::Snapshot>,
}

/// Whether a student's submission was graded.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SubmissionStatus {
    /// Graded.
    Graded,
    /// No folder, or an empty one.
    NoSubmission,
    /// A folder without a workbook.
    NotAWorkbook,
    /// The grader could not grade it (see the summary's `error`).
    Error,
}

impl SubmissionState {
    /// One sentence for people.
    pub fn describe(&self) -> String {
        let mut text = match self.status {
            SubmissionStatus::Graded => "Graded".to_string(),
            SubmissionStatus::NoSubmission => "No submission was found".to_string(),
            SubmissionStatus::NotAWorkbook => {
                "The submission is not a copy of the workbook (no exercises/ and Cargo.toml, nor one folder down)".to_string()
            }
            SubmissionStatus::Error => "The submission could not be graded".to_string(),
        };
        if let Some(inner) = &self.found_in {
            text += &format!(" (found in {inner}/)");
        }
        if let Some(snap) = &self.snapshot {
            text += &format!(": {}", snap.note);
            if let (Some(commit), Some(at)) = (&snap.commit, &snap.committed_at) {
                text += &format!(", commit {} of {at}", &commit[..commit.len().min(12)]);
            }
            if snap.late == Some(true) {
                text += "; there are later commits, after the deadline, which were not graded";
            }
        }
        text + "."
    }
}

impl Report {
    /// Sums up `exercises`.
    pub fn new(variant: Variant, root: &Path, exercises: Vec<ExerciseOutcome>) -> Self {
        let tests = exercises.iter().flat_map(|e| &e.tests);
        Self {
            grader: format!("grade {}", env!("CARGO_PKG_VERSION")),
            variant,
            root: root.display().to_string(),
            points: exercises.iter().map(|e| e.points).sum(),
            max_points: exercises.iter().map(|e| e.max_points).sum(),
            passed_tests: tests.clone().filter(|t| t.status == Status::Passed).count(),
            total_tests: tests.count(),
            exercises,
            ignored_files: Vec::new(),
            refused_files: Vec::new(),
            judged_by: None,
            student: None,
            submission: None,
        }
    }

    /// Pretty-printed JSON.
    pub fn to_json(&self) -> String {
        serde_json::to_string_pretty(self).expect("a report always serialises") + "\n"
    }

    /// JUnit XML: a test suite per exercise, a test case per graded test (points as
    /// properties), and a failing `integrity` case for an exercise whose graded files changed.
    pub fn to_junit(&self) -> std::result::Result<String, quick_junit::SerializeError> {
        use quick_junit::{NonSuccessKind, Property, TestCase, TestCaseStatus, TestSuite};
        let mut junit = quick_junit::Report::new("workbook exercises");
        for ex in &self.exercises {
            let mut suite = TestSuite::new(format!("{} {}", ex.id, ex.path));
            suite.add_property(Property::new("points", ex.points.to_string()));
            suite.add_property(Property::new("max_points", ex.max_points.to_string()));
            for t in &ex.tests {
                let status = if t.status == Status::Passed {
                    TestCaseStatus::success()
                } else if t.status == Status::NotRun {
                    TestCaseStatus::skipped()
                } else {
                    let mut s = TestCaseStatus::non_success(match t.status {
                        Status::Failed | Status::TimedOut | Status::Missing => {
                            NonSuccessKind::Failure
                        }
                        _ => NonSuccessKind::Error,
                    });
                    s.set_message(first_line(&t.message));
                    s.set_type(t.status.label());
                    s.set_description(t.message.clone());
                    s
                };
                let mut case = TestCase::new(t.name.clone(), status);
                case.set_classname(ex.package.clone());
                case.set_time(Duration::from_millis(t.duration_ms));
                case.add_property(Property::new("points", t.points.to_string()));
                case.add_property(Property::new("max_points", t.max_points.to_string()));
                suite.add_test_case(case);
            }
            if !ex.modified_files.is_empty() {
                let mut s = TestCaseStatus::non_success(NonSuccessKind::Error);
                s.set_message("graded files were modified; points withheld");
                s.set_description(ex.modified_files.join("\n"));
                let mut case = TestCase::new("integrity", s);
                case.set_classname(ex.package.clone());
                suite.add_test_case(case);
            }
            junit.add_test_suite(suite);
        }
        junit.to_string()
    }

    /// The table: one row per test, with points and the failure's whole message (wrapped to
    /// the terminal, or to 140 columns in a file; test names are never split). Headings and
    /// statuses in `messages`' language; the lists of a teacher's grading (files not read or
    /// ignored, the judge) stay English.
    pub fn table(&self, color: bool, messages: Messages) -> String {
        let mut table = Table::new();
        if table.width().is_none() {
            table.set_width(140);
        }
        let longest = |names: &mut dyn Iterator<Item = usize>| names.max().unwrap_or(4).max(4);
        let name_width = longest(
            &mut self
                .exercises
                .iter()
                .flat_map(|e| e.tests.iter())
                .map(|t| t.name.chars().count()),
        );
        let status_width = longest(
            &mut self
                .exercises
                .iter()
                .flat_map(|e| e.tests.iter())
                .map(|t| display_width(messages.status(t.status))),
        );
        let widths = [(0, 8), (1, name_width), (2, 6), (3, status_width.max(8))];
        let headings = messages.headings();
        // On a narrow terminal the messages go below the table, whole, rather than into a
        // column a few characters wide.
        let fixed: usize = widths.iter().map(|(_, w)| w + 3).sum::<usize>() + 1;
        let room = usize::from(table.width().unwrap_or(140)).saturating_sub(fixed);
        let inline = room >= 30;
        let mut below = Vec::new();
        table
            .load_preset(presets::UTF8_BORDERS_ONLY)
            .set_content_arrangement(ContentArrangement::Dynamic)
            .set_header(if inline {
                headings.to_vec()
            } else {
                headings[..4].to_vec()
            });
        for (column, width) in widths {
            if let Some(c) = table.column_mut(column) {
                // The width includes the padding, one space each side.
                c.set_constraint(ColumnConstraint::Absolute(Width::Fixed(width as u16 + 2)));
            }
        }
        for ex in &self.exercises {
            let mut first = true;
            for t in &ex.tests {
                let label = if first { ex.id.clone() } else { String::new() };
                first = false;
                let mut status = Cell::new(messages.status(t.status));
                if color {
                    status = status.fg(if t.status == Status::Passed {
                        Color::Green
                    } else {
                        Color::Red
                    });
                }
                let mut row = vec![
                    Cell::new(label),
                    Cell::new(&t.name),
                    Cell::new(format!("{}/{}", t.points, t.max_points)),
                    status,
                ];
                if inline {
                    row.push(Cell::new(table_message(&t.message)));
                } else if !t.message.is_empty() {
                    below.push(format!(
                        "{} {}: {}",
                        ex.id,
                        t.name,
                        table_message(&t.message)
                    ));
                }
                table.add_row(row);
            }
            if !ex.modified_files.is_empty() {
                let message =
                    messages.points_withheld(&ex.modified_files.join(messages.list_separator()));
                let mut row = vec![
                    Cell::new(""),
                    Cell::new("integrity"),
                    Cell::new(format!("0/{}", ex.max_points)),
                    Cell::new(messages.modified()),
                ];
                if inline {
                    row.push(Cell::new(message));
                } else {
                    below.push(format!("{} integrity: {message}", ex.id));
                }
                table.add_row(row);
            }
        }
        let mut text = table.to_string();
        for line in below {
            text += &format!("\n{line}");
        }
        if !self.refused_files.is_empty() {
            text += &format!(
                "\nNot read (the stub was graded instead):\n{}",
                indent(&terminal_lines(&self.refused_files), "  ")
            );
        }
        if !self.ignored_files.is_empty() {
            text += &format!(
                "\nIgnored, not graded (changed outside the files the exercises ask you to edit; only those were graded, in the teacher's tree):\n{}",
                indent(&terminal_lines(&self.ignored_files), "  ")
            );
        }
        if let Some(judge) = &self.judged_by {
            text += &format!("\nJudged by {judge}.");
        }
        text
    }

    /// `12/40 points (30%) [######--------------]  3/13 exercises complete`.
    pub fn summary(&self, messages: Messages) -> String {
        let width = 20usize;
        let filled = (self.points as usize * width)
            .checked_div(self.max_points as usize)
            .unwrap_or(0);
        let complete = self.exercises.iter().filter(|e| e.complete()).count();
        messages.summary(
            self.points,
            self.max_points,
            (self.points * 100)
                .checked_div(self.max_points)
                .unwrap_or(0),
            &format!("[{}{}]", "#".repeat(filled), "-".repeat(width - filled)),
            complete,
            self.exercises.len(),
            self.passed_tests,
            self.total_tests,
        )
    }

    /// What to do next: the first unfinished exercise, its file, and how to get a hint.
    pub fn next_steps(&self, messages: Messages) -> String {
        let Some(ex) = self.exercises.iter().find(|e| !e.complete()) else {
            return messages.all_done();
        };
        let mut text = messages.next(&ex.id, ex.title_in(messages.lang), ex.points, ex.max_points);
        if !ex.modified_files.is_empty() {
            text += &messages.restore_graded_files();
        }
        if let Some(err) = &ex.compile_error {
            text += &messages.it_does_not_compile();
            text += &format!("{}\n", indent(&clip(err, 1500), "    "));
        }
        if self.variant == Variant::Solutions {
            text += &messages.reference_fails(&ex.path);
            return text;
        }
        // The task in the reader's language where it has been translated, else the English one.
        let folder = self.variant.folder();
        let translated = messages.lang.readme_file();
        let readme = if Path::new(&self.root)
            .join(folder)
            .join(&ex.path)
            .join(translated)
            .is_file()
        {
            translated
        } else {
            "README.md"
        };
        text += &messages.work_on(folder, &ex.path, &ex.id, readme);
        text
    }
}

/// Writes `bytes` to a temporary file beside `path`, then renames it over `path`. A new file gets
/// the mode the umask gives (as `cp` would), so reports can be shared as usual.
pub fn write_atomically(path: &Path, bytes: &[u8]) -> Result<()> {
    write_with_mode(path, bytes, 0o666)
}

/// [`write_atomically`] for a file only its owner may read (an answer key).
pub fn write_private(path: &Path, bytes: &[u8]) -> Result<()> {
    write_with_mode(path, bytes, 0o600)
}

fn write_with_mode(path: &Path, bytes: &[u8], mode: u32) -> Result<()> {
    let dir = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    std::fs::create_dir_all(dir).map_err(|e| GradeError::io(dir, e))?;
    let mut builder = tempfile::Builder::new();
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        // The kernel takes the umask off this mode when it creates the file.
        builder.permissions(std::fs::Permissions::from_mode(mode));
    }
    #[cfg(not(unix))]
    let _ = mode;
    let mut tmp = builder
        .tempfile_in(dir)
        .map_err(|e| GradeError::io(dir, e))?;
    tmp.write_all(bytes)
        .and_then(|_| tmp.as_file().sync_all())
        .map_err(|e| GradeError::io(path, e))?;
    tmp.persist(path)
        .map_err(|e| GradeError::io(path, e.error))?;
    Ok(())
}

fn first_line(text: &str) -> String {
    text.lines()
        .map(str::trim)
        .find(|l| !l.is_empty() && !l.starts_with("thread '"))
        .unwrap_or_default()
        .to_string()
}

/// A test's message for the table: the panic's text first, then where it happened; the
/// `thread '...' panicked at` boilerplate and blank lines dropped; nothing cut.
fn table_message(message: &str) -> String {
    let mut at = None;
    let mut lines = Vec::new();
    for line in message.lines().map(str::trim).filter(|l| !l.is_empty()) {
        match line.split_once(" panicked at ") {
            Some((head, place)) if head.starts_with("thread '") => {
                at = Some(place.trim_end_matches(':').to_string());
            }
            _ => lines.push(line.to_string()),
        }
    }
    let mut text = lines.join("\n");
    if let Some(place) = at {
        text += &format!(" (at {place})");
    }
    text
}

fn clip(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        text.to_string()
    } else {
        text.chars().take(max - 1).collect::<String>() + "…"
    }
}

fn indent(text: &str, by: &str) -> String {
    text.lines()
        .map(|l| format!("{by}{l}"))
        .collect::<Vec<_>>()
        .join("\n")
}

/// File names from a submission, one per line, each made safe for the terminal.
fn terminal_lines(names: &[String]) -> String {
    names
        .iter()
        .map(|n| crate::escape::terminal(n))
        .collect::<Vec<_>>()
        .join("\n")
}
