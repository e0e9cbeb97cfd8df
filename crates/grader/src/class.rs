//! Grading a class (`cargo grade --class DIR`): every student of the roster (or every folder),
//! each submission through the judged stages of [`crate::grading`], `jobs` at a time, each in a
//! slot and sandbox of its own.
//!
//! Per student, in `<reports>/students/`: `<name>.json` and `.xml` (the teacher's record: every
//! test by name), `<name>.md` and `.html` (the feedback to hand back: no teacher's path, hidden
//! tests anonymous until released), and with `--format`, `<name>.gradescope.json` and
//! `<name>.classroom.json`. What was graded of each submission is kept in
//! `<reports>/submissions/<name>/` (the teacher's audit copy, and what the similarity hint reads).
//! The class's `summary.csv`, `summary.json` (rows, statistics), `similarity.json` and, with
//! `--format lms-csv`, `lms.csv` are assembled from the students' JSON reports after every run
//! has ended, so regrading one student (`--student NAME`) rebuilds them whole; no student process
//! can outlive its sandbox to touch them, and no student name can collide with them.
//!
//! ```
//! let row = grader::class::SummaryRow {
//!     student: grader::roster::Student { id: "alice".into(), name: None, email: None, extra: vec![] },
//!     name: "alice".into(),
//!     status: grader::report::SubmissionStatus::Graded,
//!     points: [("01-1".to_string(), 5)].into(),
//!     total: 5,
//!     max_points: 5,
//!     late: None,
//!     commit: None,
//!     ignored_files: vec![],
//!     refused_files: vec![],
//!     error: None,
//!     report: "students/alice.json".into(),
//! };
//! assert_eq!(row.feedback_line(), "5/5 points");
//! ```

use crate::error::{GradeError, Result};
use crate::escape;
use crate::exports::{self, Hidden, Identity};
use crate::grading::Grading;
use crate::progress::Progress;
use crate::report::{write_atomically, Report, SubmissionState, SubmissionStatus};
use crate::roster::{self, Entry, Found, Roster, Student};
use crate::similarity;
use crate::stats::{self, ClassStats};
use crate::submission;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Instant;

/// An export `--format` asks for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Format {
    /// Gradescope's `results.json`, per student.
    Gradescope,
    /// GitHub Classroom's reporter payload, per student.
    Classroom,
    /// A gradebook CSV for the class, with this identity column.
    LmsCsv(Identity),
}

/// A class folder to grade.
pub struct ClassJob<'a, 'b> {
    /// The prepared judged run.
    pub grading: &'a Grading<'b>,
    /// One folder per student.
    pub class_dir: &'a Path,
    /// Students graded at the same time.
    pub jobs: usize,
    /// Where the reports go.
    pub reports: &'a Path,
    /// The roster, if any.
    pub roster: Option<&'a Roster>,
    /// The deadline (seconds since 1970), if any.
    pub deadline: Option<i64>,
    /// Only this student (their id): the others' reports stay, the summary is rebuilt.
    pub only: Option<&'a str>,
    /// Exports.
    pub formats: &'a [Format],
    /// Whether hidden tests' names and messages go into the students' feedback.
    pub release_hidden: bool,
}

/// One line of the class summary.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct SummaryRow {
    /// The student, as the roster names them (or their folder).
    pub student: Student,
    /// Their name in reports (their id made safe for file names).
    pub name: String,
    /// Graded, or why not.
    pub status: SubmissionStatus,
    /// Points per exercise id.
    pub points: BTreeMap<String, u32>,
    /// Points in all.
    pub total: u32,
    /// Points available.
    pub max_points: u32,
    /// With a deadline: whether there were commits after it (not graded).
    pub late: Option<bool>,
    /// The commit graded (or the repository's `HEAD`).
    pub commit: Option<String>,
    /// Changes outside the `edit` files, ignored.
    pub ignored_files: Vec<String>,
    /// Edit files that were refused (links, special files, too big): the stub was graded.
    pub refused_files: Vec<String>,
    /// Why the submission could not be graded at all (then every exercise has 0).
    pub error: Option<String>,
    /// The student's JSON report, relative to the reports folder.
    pub report: String,
}

impl SummaryRow {
    /// A short line for a gradebook's feedback column.
    pub fn feedback_line(&self) -> String {
        let mut line = match self.status {
            SubmissionStatus::Graded => format!("{}/{} points", self.total, self.max_points),
            SubmissionStatus::NoSubmission => "no submission".into(),
            SubmissionStatus::NotAWorkbook => "the submission is not a copy of the workbook".into(),
            SubmissionStatus::Error => "could not be graded; see the teacher".into(),
        };
        if self.late == Some(true) {
            line += "; graded at the last commit before the deadline";
        }
        line
    }
}

/// `summary.json`.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Summary {
    /// Who gave the verdicts (the sandboxed judge, or a warning).
    pub judged_by: String,
    /// Exercise ids with their maximum points, in catalogue order.
    pub exercises: BTreeMap<String, u32>,
    /// One row per student.
    pub students: Vec<SummaryRow>,
    /// Folders of the class folder the roster does not name (not graded).
    #[serde(default)]
    pub unknown_folders: Vec<String>,
    /// The class's statistics.
    pub statistics: ClassStats,
}

impl Summary {
    /// One row per student: `student,name,email,status,<exercise>...,total,max_points,late,commit,ignored_files,refused_files,error`.
    pub fn to_csv(&self) -> std::result::Result<String, csv::Error> {
        let mut out = csv::Writer::from_writer(Vec::new());
        let mut header: Vec<String> = ["student", "name", "email", "status"]
            .map(String::from)
            .into();
        header.extend(self.exercises.keys().cloned());
        header.extend(
            [
                "total",
                "max_points",
                "late",
                "commit",
                "ignored_files",
                "refused_files",
                "error",
            ]
            .map(String::from),
        );
        out.write_record(&header)?;
        for row in &self.students {
            let status = serde_json::to_value(row.status)
                .ok()
                .and_then(|v| v.as_str().map(str::to_string))
                .unwrap_or_default();
            let cell = |s: Option<&str>| escape::csv_cell(s.unwrap_or_default());
            let mut record = vec![
                cell(Some(&row.student.id)),
                cell(row.student.name.as_deref()),
                cell(row.student.email.as_deref()),
                status,
            ];
            record.extend(
                self.exercises
                    .keys()
                    .map(|id| row.points.get(id).copied().unwrap_or(0).to_string()),
            );
            record.push(row.total.to_string());
            record.push(row.max_points.to_string());
            record.push(row.late.map(|l| l.to_string()).unwrap_or_default());
            record.push(cell(row.commit.as_deref()));
            record.push(cell(Some(&row.ignored_files.join("; "))));
            record.push(cell(Some(&row.refused_files.join("; "))));
            record.push(cell(row.error.as_deref()));
            out.write_record(&record)?;
        }
        let bytes = out.into_inner().map_err(|e| e.into_error())?;
        Ok(String::from_utf8_lossy(&bytes).into_owned())
    }
}

/// The hidden tests of the run's exercises.
pub fn hidden_tests(grading: &Grading) -> Hidden {
    grading
        .selected
        .iter()
        .flat_map(|e| {
            e.spec
                .tests
                .iter()
                .filter(|t| t.hidden)
                .map(move |t| (e.id.clone(), t.name.clone()))
        })
        .collect()
}

/// Grades the class and writes the reports and the summary. Exit status: 0 when every
/// submission found could be graded, 2 when one could not.
pub fn grade_class(job: &ClassJob) -> anyhow::Result<i32> {
    let (mut entries, unknown) = roster::entries(job.class_dir, job.roster)?;
    if entries.is_empty() {
        anyhow::bail!(
            "no students in {}: it should hold one folder per student (or pass --roster FILE)",
            job.class_dir.display()
        );
    }
    let everyone = entries.clone();
    if let Some(only) = job.only {
        entries.retain(|e| e.student.id == only || e.name == only);
        if entries.is_empty() {
            anyhow::bail!(
                "--student {only}: no such student in {}{}",
                job.class_dir.display(),
                if job.roster.is_some() {
                    " or the roster"
                } else {
                    ""
                }
            );
        }
    }
    let started = Instant::now();
    let grading = job.grading;
    eprintln!(
        "grading {} of {} students from {}, {} at a time; reports in {}",
        entries.len(),
        everyone.len(),
        job.class_dir.display(),
        job.jobs,
        job.reports.display()
    );
    if grading.settings.confinement.is_sandboxed() {
        let cgroups = crate::sandbox::cgroups();
        eprintln!(
            "{}sandboxes: {}{}",
            if cgroups.available() { "" } else { "warning: " },
            if crate::sandbox::as_root() {
                "a user of its own each; "
            } else {
                "all run as you (run as root for a user per sandbox); "
            },
            cgroups.describe()
        );
    }
    let hidden = hidden_tests(grading);
    let failures = Mutex::new(Vec::new());
    crate::slots_at_once::each(&entries, job.jobs, |entry, slot| {
        let begun = Instant::now();
        match grade_one(job, slot, entry, &hidden) {
            Ok(report) => eprintln!(
                "{}: {} ({:.0} s)",
                entry.name,
                line_for(&report),
                begun.elapsed().as_secs_f64()
            ),
            Err(e) => {
                eprintln!(
                    "{}: NOT GRADED: {}",
                    entry.name,
                    escape::terminal(&format!("{e:#}"))
                );
                failures
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .push((entry.clone(), format!("{e:#}")));
            }
        }
    });
    // Every student's sandbox has ended here (the scope joined every thread, and each run kills
    // its whole PID namespace), so nothing of theirs can touch what follows.
    let failures = failures.into_inner().unwrap_or_else(|p| p.into_inner());
    for (entry, error) in &failures {
        write_student(job, entry, &error_report(grading, entry, error), &hidden)?;
    }
    let summary = assemble(job, &everyone, unknown)?;
    write_summary(job, &summary)?;
    println!("{}", summary_table(&summary));
    println!("{}", stats::table(&summary.statistics));
    let pairs = similar(job, &everyone)?;
    if !pairs.is_empty() {
        println!(
            "similar work (a reason to look, not a verdict; {}):",
            job.reports.join("similarity.json").display()
        );
        for p in &pairs {
            println!(
                "  {} {} and {}: {:.0}% of their own lines in common ({} lines)",
                p.exercise,
                p.students.0,
                p.students.1,
                p.score * 100.0,
                p.lines
            );
        }
    }
    warn(&summary);
    println!(
        "{} students in {:.0} s; summary: {} and {}; per student: {}",
        summary.students.len(),
        started.elapsed().as_secs_f64(),
        job.reports.join("summary.csv").display(),
        job.reports.join("summary.json").display(),
        job.reports.join("students").display()
    );
    Ok(if summary.students.iter().any(|s| s.error.is_some()) {
        2
    } else {
        0
    })
}

fn line_for(report: &Report) -> String {
    match report.submission.as_ref().map(|s| s.status) {
        Some(SubmissionStatus::Graded) | None => {
            let mut line = format!("{}/{} points", report.points, report.max_points);
            if !report.ignored_files.is_empty() {
                line += &format!(", {} ignored changes", report.ignored_files.len());
            }
            if report
                .submission
                .as_ref()
                .and_then(|s| s.snapshot.as_ref())
                .is_some_and(|s| s.late == Some(true))
            {
                line += ", LATE commits not graded";
            }
            line
        }
        Some(SubmissionStatus::NoSubmission) => "no submission".into(),
        Some(SubmissionStatus::NotAWorkbook) => "NOT A WORKBOOK".into(),
        Some(SubmissionStatus::Error) => "NOT GRADED".into(),
    }
}

/// The loud part: everything that was not graded normally.
fn warn(summary: &Summary) {
    let by = |status: SubmissionStatus| -> Vec<String> {
        summary
            .students
            .iter()
            .filter(|s| s.status == status)
            .map(|s| escape::terminal(&s.student.id))
            .collect()
    };
    for (status, what) in [
        (SubmissionStatus::NoSubmission, "no submission"),
        (SubmissionStatus::NotAWorkbook, "not a workbook (0 points)"),
        (
            SubmissionStatus::Error,
            "NOT GRADED (see error in the summary)",
        ),
    ] {
        let who = by(status);
        if !who.is_empty() {
            eprintln!("warning: {what}: {}", who.join(", "));
        }
    }
    let late: Vec<String> = summary
        .students
        .iter()
        .filter(|s| s.late == Some(true))
        .map(|s| escape::terminal(&s.student.id))
        .collect();
    if !late.is_empty() {
        eprintln!(
            "warning: commits after the deadline (graded at the last one before it): {}",
            late.join(", ")
        );
    }
    if !summary.unknown_folders.is_empty() {
        eprintln!(
            "warning: folders the roster does not name, NOT GRADED: {}",
            summary
                .unknown_folders
                .iter()
                .map(|f| escape::terminal(f))
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
}

fn student_dir(job: &ClassJob) -> PathBuf {
    job.reports.join("students")
}

/// Grades one entry and writes its files.
fn grade_one(
    job: &ClassJob,
    slot: usize,
    entry: &Entry,
    hidden: &Hidden,
) -> anyhow::Result<Report> {
    let grading = job.grading;
    let state = |status, found_in, snapshot| SubmissionState {
        status,
        found_in,
        snapshot,
    };
    let report = match &entry.found {
        Found::NoSubmission | Found::NotAWorkbook => {
            let status = if entry.found == Found::NoSubmission {
                SubmissionStatus::NoSubmission
            } else {
                SubmissionStatus::NotAWorkbook
            };
            let mut report = empty_report(grading, entry);
            report.submission = Some(state(status, None, None));
            report
        }
        Found::Workbook(dir) => {
            let folder = job.class_dir.join(&entry.student.id);
            let found_in = dir
                .strip_prefix(&folder)
                .ok()
                .filter(|r| !r.as_os_str().is_empty())
                .map(|r| r.display().to_string());
            let checkout = grading.work.join("checkouts").join(slot.to_string());
            let (tree, snapshot) =
                crate::snapshot::take(&grading.settings.confinement, dir, job.deadline, &checkout)?;
            let submission = submission::read(
                &entry.name,
                &tree,
                grading.catalog,
                Some(&grading.catalog.root),
            );
            archive(job, &entry.name, &submission.files)?;
            let mut report = grading.grade(&submission, slot, &Progress::Quiet)?;
            report.student = Some(entry.student.clone());
            report.submission = Some(state(SubmissionStatus::Graded, found_in, Some(snapshot)));
            report
        }
    };
    write_student(job, entry, &report, hidden)?;
    Ok(report)
}

/// A report of no exercise, for a student without a gradable submission.
fn empty_report(grading: &Grading, entry: &Entry) -> Report {
    let mut report = Report::new(
        crate::Variant::Exercises,
        Path::new(&entry.name),
        Vec::new(),
    );
    report.root = entry.name.clone();
    report.max_points = grading.selected.iter().map(|e| e.max_points()).sum();
    report.judged_by = Some(grading.judged_by());
    report.student = Some(entry.student.clone());
    report
}

fn error_report(grading: &Grading, entry: &Entry, error: &str) -> Report {
    let mut report = empty_report(grading, entry);
    report.submission = Some(SubmissionState {
        status: SubmissionStatus::Error,
        found_in: None,
        snapshot: None,
    });
    report.refused_files = vec![format!("not graded: {error}")];
    report
}

/// Keeps the edit files that were graded, for the teacher.
fn archive(job: &ClassJob, name: &str, files: &BTreeMap<String, Vec<u8>>) -> Result<()> {
    let dir = job.reports.join("submissions").join(name);
    if dir.exists() {
        std::fs::remove_dir_all(&dir).map_err(|e| GradeError::io(&dir, e))?;
    }
    for (rel, bytes) in files {
        write_atomically(&dir.join(rel), bytes)?;
    }
    Ok(())
}

fn write_student(
    job: &ClassJob,
    entry: &Entry,
    report: &Report,
    hidden: &Hidden,
) -> anyhow::Result<()> {
    let dir = student_dir(job);
    let released = job.release_hidden;
    write_atomically(
        &dir.join(format!("{}.json", entry.name)),
        report.to_json().as_bytes(),
    )?;
    write_atomically(
        &dir.join(format!("{}.xml", entry.name)),
        report.to_junit()?.as_bytes(),
    )?;
    write_atomically(
        &dir.join(format!("{}.md", entry.name)),
        crate::feedback::markdown(&entry.name, report, hidden, released).as_bytes(),
    )?;
    write_atomically(
        &dir.join(format!("{}.html", entry.name)),
        crate::feedback::html(&entry.name, report, hidden, released).as_bytes(),
    )?;
    for format in job.formats {
        let (suffix, value) = match format {
            Format::Gradescope => ("gradescope", exports::gradescope(report, hidden, released)),
            Format::Classroom => ("classroom", exports::classroom(report, hidden, released)),
            Format::LmsCsv(_) => continue,
        };
        let json = serde_json::to_string_pretty(&value)? + "\n";
        write_atomically(
            &dir.join(format!("{}.{suffix}.json", entry.name)),
            json.as_bytes(),
        )?;
    }
    Ok(())
}

/// The summary, from every student's JSON report on disk (this run's, and earlier runs' for the
/// students not graded now).
fn assemble(job: &ClassJob, everyone: &[Entry], unknown: Vec<String>) -> anyhow::Result<Summary> {
    let grading = job.grading;
    let max_points: u32 = grading.selected.iter().map(|e| e.max_points()).sum();
    let mut rows = Vec::new();
    let mut reports = Vec::new();
    for entry in everyone {
        let rel = format!("students/{}.json", entry.name);
        let path = job.reports.join(&rel);
        let report: Option<Report> = std::fs::read_to_string(&path)
            .ok()
            .and_then(|t| serde_json::from_str(&t).ok());
        let Some(report) = report else {
            rows.push(SummaryRow {
                student: entry.student.clone(),
                name: entry.name.clone(),
                status: SubmissionStatus::Error,
                points: BTreeMap::new(),
                total: 0,
                max_points,
                late: None,
                commit: None,
                ignored_files: Vec::new(),
                refused_files: Vec::new(),
                error: Some(format!(
                    "no report at {}: grade this student (--student {})",
                    path.display(),
                    entry.student.id
                )),
                report: String::new(),
            });
            continue;
        };
        let state = report.submission.clone();
        let status = state
            .as_ref()
            .map_or(SubmissionStatus::Graded, |s| s.status);
        let snapshot = state.as_ref().and_then(|s| s.snapshot.clone());
        rows.push(SummaryRow {
            student: entry.student.clone(),
            name: entry.name.clone(),
            status,
            points: report
                .exercises
                .iter()
                .map(|e| (e.id.clone(), e.points))
                .collect(),
            total: report.points,
            max_points,
            late: snapshot.as_ref().and_then(|s| s.late),
            commit: snapshot.and_then(|s| s.commit),
            ignored_files: report.ignored_files.clone(),
            refused_files: report.refused_files.clone(),
            error: (status == SubmissionStatus::Error).then(|| report.refused_files.join("; ")),
            report: rel,
        });
        if status == SubmissionStatus::Graded {
            reports.push(report);
        }
    }
    let graded: Vec<&Report> = reports.iter().collect();
    let statistics = stats::compute(rows.len(), &graded);
    Ok(Summary {
        judged_by: grading.judged_by(),
        exercises: grading
            .selected
            .iter()
            .map(|e| (e.id.clone(), e.max_points()))
            .collect(),
        students: rows,
        unknown_folders: unknown,
        statistics,
    })
}

fn write_summary(job: &ClassJob, summary: &Summary) -> anyhow::Result<()> {
    write_atomically(
        &job.reports.join("summary.csv"),
        summary.to_csv()?.as_bytes(),
    )?;
    let json = serde_json::to_string_pretty(summary)? + "\n";
    write_atomically(&job.reports.join("summary.json"), json.as_bytes())?;
    for format in job.formats {
        if let Format::LmsCsv(identity) = format {
            let csv = exports::lms_csv(summary, identity).map_err(anyhow::Error::msg)?;
            write_atomically(&job.reports.join("lms.csv"), csv.as_bytes())?;
        }
    }
    Ok(())
}

/// The similarity hint, from the graded files kept in `submissions/`, written to
/// `similarity.json` (teacher only).
fn similar(job: &ClassJob, everyone: &[Entry]) -> anyhow::Result<Vec<similarity::Pair>> {
    let grading = job.grading;
    let mut work: BTreeMap<String, BTreeMap<String, String>> = BTreeMap::new();
    let mut stubs = BTreeMap::new();
    for exercise in &grading.selected {
        let mut stub = String::new();
        for file in &exercise.spec.edit {
            let path = exercise.spec_dir(&grading.catalog.root).join(file);
            stub += &std::fs::read_to_string(&path).unwrap_or_default();
        }
        stubs.insert(exercise.id.clone(), stub);
        for entry in everyone {
            let dir = job.reports.join("submissions").join(&entry.name);
            if !dir.is_dir() {
                continue;
            }
            let mut text = String::new();
            for file in &exercise.spec.edit {
                let rel = format!("exercises/{}/{file}", exercise.path);
                if let Ok(bytes) = submission::read_regular(&dir, &rel) {
                    text += &String::from_utf8_lossy(&bytes);
                }
            }
            work.entry(exercise.id.clone())
                .or_default()
                .insert(entry.name.clone(), text);
        }
    }
    let pairs = similarity::pairs(&work, &stubs);
    let json = serde_json::to_string_pretty(&pairs)? + "\n";
    write_atomically(&job.reports.join("similarity.json"), json.as_bytes())?;
    Ok(pairs)
}

/// Students × exercises, points, for the terminal.
fn summary_table(summary: &Summary) -> String {
    use comfy_table::{presets, ContentArrangement, Table};
    let mut table = Table::new();
    table
        .load_preset(presets::UTF8_BORDERS_ONLY)
        .set_content_arrangement(ContentArrangement::Dynamic);
    if table.width().is_none() {
        table.set_width(140);
    }
    let mut header = vec!["student".to_string()];
    header.extend(summary.exercises.keys().cloned());
    header.extend(["total".into(), "notes".into()]);
    table.set_header(header);
    for row in &summary.students {
        let mut cells = vec![row.name.clone()];
        cells.extend(
            summary
                .exercises
                .keys()
                .map(|id| row.points.get(id).map_or("-".into(), u32::to_string)),
        );
        cells.push(format!("{}/{}", row.total, row.max_points));
        let mut notes: Vec<String> = Vec::new();
        match row.status {
            SubmissionStatus::Graded => {}
            SubmissionStatus::NoSubmission => notes.push("no submission".into()),
            SubmissionStatus::NotAWorkbook => notes.push("NOT A WORKBOOK".into()),
            SubmissionStatus::Error => notes.push(format!(
                "NOT GRADED: {}",
                escape::terminal(row.error.as_deref().unwrap_or_default())
            )),
        }
        if row.late == Some(true) {
            notes.push("late commits not graded".into());
        }
        notes.extend(row.refused_files.iter().map(|f| escape::terminal(f)));
        notes.extend(
            row.ignored_files
                .iter()
                .map(|f| format!("ignored {}", escape::terminal(f))),
        );
        cells.push(notes.join("\n"));
        table.add_row(cells);
    }
    table.to_string()
}
