//! Grading submissions: one student's clone (`cargo grade --root CLONE`, run inside the teacher's
//! repository) or a whole class folder (`cargo grade --class DIR`, one clone per student, graded
//! in parallel). Each student's `edit` files are graded in a pristine tree ([`crate::pristine`]);
//! every other change is listed as ignored. Besides one JSON and one JUnit report per student,
//! a class run writes `summary.csv` and `summary.json`: points per student and exercise.
//!
//! ```
//! let row = grader::class::SummaryRow {
//!     student: "alice".into(),
//!     points: [("01-1".to_string(), 5)].into(),
//!     total: 5,
//!     max_points: 5,
//!     ignored_files: vec![],
//!     error: None,
//!     report: "alice.json".into(),
//! };
//! assert_eq!(row.total, 5);
//! ```

use crate::catalog::{Catalog, Exercise, Variant};
use crate::error::{GradeError, Result};
use crate::progress::Progress;
use crate::report::write_atomically;
use crate::runner::{self, RunOptions};
use crate::{pristine, Report};
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Instant;

/// One student's clone to grade in a pristine tree.
pub struct StudentJob<'a> {
    /// The teacher's exercises (their `exercise.toml`s decide what is graded).
    pub catalog: &'a Catalog,
    /// The exercises to grade.
    pub selected: &'a [&'a Exercise],
    /// The student's clone.
    pub student: &'a Path,
    /// The pristine tree to use ([`pristine::slot_dir`]).
    pub slot: &'a Path,
    /// The teacher's target folder, whose artefacts are reused.
    pub target: &'a Path,
    /// How to grade (time limits, features, progress).
    pub options: &'a RunOptions,
    /// Shared by pristine trees that build into the same target folder at the same time.
    pub build_lock: Option<Arc<Mutex<()>>>,
}

/// Grades the `edit` files of a student's clone in a pristine copy of the teacher's tree.
pub fn grade_student(job: &StudentJob) -> Result<Report> {
    let teacher = &job.catalog.root;
    let graded = pristine::edit_files(job.catalog);
    let mut ignored = pristine::changed_files(teacher, job.student, &graded)?;
    pristine::sync(teacher, job.slot)?;
    let mut outcomes = Vec::new();
    for exercise in job.selected {
        let mut overlay = Vec::new();
        for file in &exercise.spec.edit {
            let rel = format!("exercises/{}/{file}", exercise.path);
            let theirs = job.student.join(&rel);
            let bytes = match std::fs::read(&theirs) {
                Ok(b) => b,
                Err(_) => {
                    ignored.push(format!("{rel}: missing, so the stub was graded"));
                    let ours = teacher.join(&rel);
                    std::fs::read(&ours).map_err(|e| GradeError::io(&ours, e))?
                }
            };
            overlay.push((job.slot.join(&rel), bytes));
        }
        let mut options = job.options.clone();
        options.variant = Variant::Exercises;
        options.target_dir = Some(job.target.to_path_buf());
        options.verify_integrity = false;
        options.binary_copy = Some(job.slot.join("bin").join(&exercise.id));
        options.overlay = overlay;
        options.build_lock = job.build_lock.clone();
        outcomes.push(runner::grade(job.slot, exercise, &options)?);
    }
    let mut report = Report::new(Variant::Exercises, job.student, outcomes);
    report.ignored_files = ignored;
    Ok(report)
}

/// A class folder to grade.
pub struct ClassJob<'a> {
    /// The teacher's exercises.
    pub catalog: &'a Catalog,
    /// The exercises to grade.
    pub selected: &'a [&'a Exercise],
    /// One folder per student, each a clone of the workbook.
    pub class_dir: &'a Path,
    /// The teacher's target folder.
    pub target: &'a Path,
    /// Students graded at the same time.
    pub jobs: usize,
    /// Where the reports go.
    pub reports: &'a Path,
    /// How to grade.
    pub options: &'a RunOptions,
}

/// One line of the class summary.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct SummaryRow {
    /// The student's folder name.
    pub student: String,
    /// Points per exercise id.
    pub points: BTreeMap<String, u32>,
    /// Points in all.
    pub total: u32,
    /// Points available.
    pub max_points: u32,
    /// Changes outside the `edit` files, ignored.
    pub ignored_files: Vec<String>,
    /// Why the clone could not be graded at all (then every exercise has 0).
    pub error: Option<String>,
    /// The student's JSON report.
    pub report: String,
}

/// `summary.json`.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Summary {
    /// Exercise ids with their maximum points, in catalogue order.
    pub exercises: BTreeMap<String, u32>,
    /// One row per student, by folder name.
    pub students: Vec<SummaryRow>,
}

impl Summary {
    /// `student,01-1,...,total,max_points,ignored_files,error`: one row per student.
    pub fn to_csv(&self) -> std::result::Result<String, csv::Error> {
        let mut out = csv::Writer::from_writer(Vec::new());
        let mut header = vec!["student".to_string()];
        header.extend(self.exercises.keys().cloned());
        header.extend(["total", "max_points", "ignored_files", "error"].map(String::from));
        out.write_record(&header)?;
        for row in &self.students {
            let mut record = vec![row.student.clone()];
            record.extend(
                self.exercises
                    .keys()
                    .map(|id| row.points.get(id).copied().unwrap_or(0).to_string()),
            );
            record.push(row.total.to_string());
            record.push(row.max_points.to_string());
            record.push(row.ignored_files.join("; "));
            record.push(row.error.clone().unwrap_or_default());
            out.write_record(&record)?;
        }
        let bytes = out.into_inner().map_err(|e| e.into_error())?;
        Ok(String::from_utf8_lossy(&bytes).into_owned())
    }
}

/// The students of a class folder: every sub-folder holding a workbook (`exercises/` and a
/// `Cargo.toml`), by name.
pub fn students(class_dir: &Path) -> Result<Vec<(String, PathBuf)>> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(class_dir).map_err(|e| GradeError::io(class_dir, e))? {
        let entry = entry.map_err(|e| GradeError::io(class_dir, e))?;
        let path = entry.path();
        if path.join("exercises").is_dir() && path.join("Cargo.toml").is_file() {
            found.push((entry.file_name().to_string_lossy().into_owned(), path));
        }
    }
    found.sort();
    Ok(found)
}

/// Grades every student of `job.class_dir`, `job.jobs` at a time, and writes the reports and the
/// summary. Exit status: 0 when every clone could be graded, 2 when one could not.
pub fn grade_class(job: &ClassJob) -> anyhow::Result<i32> {
    let students = students(job.class_dir)?;
    if students.is_empty() {
        anyhow::bail!(
            "no student clones in {}: it should hold one folder per student, each with exercises/ and Cargo.toml",
            job.class_dir.display()
        );
    }
    let started = Instant::now();
    eprintln!(
        "grading {} students from {}, {} at a time (builds take turns; reports in {})",
        students.len(),
        job.class_dir.display(),
        job.jobs,
        job.reports.display()
    );
    let queue = Mutex::new(students.iter().cloned().collect::<VecDeque<_>>());
    let rows = Mutex::new(Vec::new());
    let lock = Arc::new(Mutex::new(()));
    let mut options = job.options.clone();
    options.progress = Progress::Quiet;
    std::thread::scope(|scope| {
        for slot in 0..job.jobs.min(students.len()) {
            let (queue, rows, lock, options) = (&queue, &rows, lock.clone(), &options);
            scope.spawn(move || loop {
                let next = queue.lock().unwrap_or_else(|p| p.into_inner()).pop_front();
                let Some((name, path)) = next else { break };
                let begun = Instant::now();
                let row = grade_one(job, options, slot, &name, &path, lock.clone());
                let line = match &row.error {
                    Some(e) => format!("{name}: NOT GRADED: {e}"),
                    None => format!(
                        "{name}: {}/{} points{} ({:.0} s)",
                        row.total,
                        row.max_points,
                        if row.ignored_files.is_empty() {
                            String::new()
                        } else {
                            format!(", {} ignored changes", row.ignored_files.len())
                        },
                        begun.elapsed().as_secs_f64()
                    ),
                };
                eprintln!("{line}");
                rows.lock().unwrap_or_else(|p| p.into_inner()).push(row);
            });
        }
    });
    let mut rows = rows.into_inner().unwrap_or_else(|p| p.into_inner());
    rows.sort_by(|a, b| a.student.cmp(&b.student));
    let summary = Summary {
        exercises: job
            .selected
            .iter()
            .map(|e| (e.id.clone(), e.max_points()))
            .collect(),
        students: rows,
    };
    let csv_path = job.reports.join("summary.csv");
    let json_path = job.reports.join("summary.json");
    write_atomically(&csv_path, summary.to_csv()?.as_bytes())?;
    let json = serde_json::to_string_pretty(&summary)? + "\n";
    write_atomically(&json_path, json.as_bytes())?;
    println!("{}", summary_table(&summary));
    println!(
        "{} students in {:.0} s; summary: {} and {}; one report per student beside them",
        summary.students.len(),
        started.elapsed().as_secs_f64(),
        csv_path.display(),
        json_path.display()
    );
    Ok(if summary.students.iter().any(|s| s.error.is_some()) {
        2
    } else {
        0
    })
}

fn grade_one(
    job: &ClassJob,
    options: &RunOptions,
    slot: usize,
    name: &str,
    path: &Path,
    lock: Arc<Mutex<()>>,
) -> SummaryRow {
    let json = job.reports.join(format!("{name}.json"));
    let junit = job.reports.join(format!("{name}.xml"));
    let result = (|| -> anyhow::Result<Report> {
        let student = path.canonicalize()?;
        let report = grade_student(&StudentJob {
            catalog: job.catalog,
            selected: job.selected,
            student: &student,
            slot: &pristine::slot_dir(job.target, &slot.to_string()),
            target: job.target,
            options,
            build_lock: Some(lock),
        })?;
        write_atomically(&json, report.to_json().as_bytes())?;
        write_atomically(&junit, report.to_junit()?.as_bytes())?;
        Ok(report)
    })();
    let max_points = job.selected.iter().map(|e| e.max_points()).sum();
    match result {
        Ok(report) => SummaryRow {
            student: name.to_string(),
            points: report
                .exercises
                .iter()
                .map(|e| (e.id.clone(), e.points))
                .collect(),
            total: report.points,
            max_points,
            ignored_files: report.ignored_files.clone(),
            error: None,
            report: json.display().to_string(),
        },
        Err(e) => SummaryRow {
            student: name.to_string(),
            points: BTreeMap::new(),
            total: 0,
            max_points,
            ignored_files: Vec::new(),
            error: Some(format!("{e:#}")),
            report: String::new(),
        },
    }
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
    header.extend(["total".into(), "ignored (not graded)".into()]);
    table.set_header(header);
    for row in &summary.students {
        let mut cells = vec![row.student.clone()];
        cells.extend(
            summary
                .exercises
                .keys()
                .map(|id| row.points.get(id).map_or("-".into(), u32::to_string)),
        );
        cells.push(format!("{}/{}", row.total, row.max_points));
        cells.push(match &row.error {
            Some(e) => format!("NOT GRADED: {e}"),
            None => row.ignored_files.join("\n"),
        });
        table.add_row(cells);
    }
    table.to_string()
}
