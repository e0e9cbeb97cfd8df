//! Grading a class: a folder with one submission per student (`cargo grade --class DIR`), each
//! through the judged stages of [`crate::grading`], `jobs` students at a time, each in a slot and
//! sandbox of its own. Reports go to `<reports>/students/<student>.json` and `.xml`; the class
//! summary (`summary.csv`, `summary.json`) is written once, atomically, after every student's
//! run has ended: no student process can outlive its sandbox to touch it, and no student folder
//! name can collide with it.
//!
//! ```
//! let row = grader::class::SummaryRow {
//!     student: "alice".into(),
//!     points: [("01-1".to_string(), 5)].into(),
//!     total: 5,
//!     max_points: 5,
//!     ignored_files: vec![],
//!     refused_files: vec![],
//!     error: None,
//!     report: "students/alice.json".into(),
//! };
//! assert_eq!(row.total, 5);
//! ```

use crate::error::{GradeError, Result};
use crate::grading::Grading;
use crate::progress::Progress;
use crate::report::write_atomically;
use crate::submission;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Instant;

/// A class folder to grade.
pub struct ClassJob<'a, 'b> {
    /// The prepared judged run.
    pub grading: &'a Grading<'b>,
    /// One folder per student, each a clone of the workbook.
    pub class_dir: &'a Path,
    /// Students graded at the same time.
    pub jobs: usize,
    /// Where the reports go.
    pub reports: &'a Path,
}

/// One line of the class summary.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct SummaryRow {
    /// The student (their folder's name, made safe).
    pub student: String,
    /// Points per exercise id.
    pub points: BTreeMap<String, u32>,
    /// Points in all.
    pub total: u32,
    /// Points available.
    pub max_points: u32,
    /// Changes outside the `edit` files, ignored.
    pub ignored_files: Vec<String>,
    /// Edit files that were refused (links, special files, too big): the stub was graded.
    #[serde(default)]
    pub refused_files: Vec<String>,
    /// Why the submission could not be graded at all (then every exercise has 0).
    pub error: Option<String>,
    /// The student's JSON report, relative to the reports folder.
    pub report: String,
}

/// `summary.json`.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Summary {
    /// Who gave the verdicts (the sandboxed judge, or a warning).
    pub judged_by: String,
    /// Exercise ids with their maximum points, in catalogue order.
    pub exercises: BTreeMap<String, u32>,
    /// One row per student, by name.
    pub students: Vec<SummaryRow>,
}

impl Summary {
    /// `student,01-1,...,total,max_points,ignored_files,refused_files,error`: one row per student.
    pub fn to_csv(&self) -> std::result::Result<String, csv::Error> {
        let mut out = csv::Writer::from_writer(Vec::new());
        let mut header = vec!["student".to_string()];
        header.extend(self.exercises.keys().cloned());
        header.extend(
            [
                "total",
                "max_points",
                "ignored_files",
                "refused_files",
                "error",
            ]
            .map(String::from),
        );
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
            record.push(row.refused_files.join("; "));
            record.push(row.error.clone().unwrap_or_default());
            out.write_record(&record)?;
        }
        let bytes = out.into_inner().map_err(|e| e.into_error())?;
        Ok(String::from_utf8_lossy(&bytes).into_owned())
    }
}

/// The students of a class folder: every sub-folder (not a link) holding a workbook
/// (`exercises/` and a `Cargo.toml`), by name made safe ([`submission::safe_name`]; a clash gets
/// a number).
pub fn students(class_dir: &Path) -> Result<Vec<(String, PathBuf)>> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir(class_dir).map_err(|e| GradeError::io(class_dir, e))? {
        let entry = entry.map_err(|e| GradeError::io(class_dir, e))?;
        let path = entry.path();
        let real_dir = entry.file_type().is_ok_and(|t| t.is_dir());
        if real_dir && path.join("exercises").is_dir() && path.join("Cargo.toml").is_file() {
            found.push((entry.file_name().to_string_lossy().into_owned(), path));
        }
    }
    found.sort();
    let mut taken = BTreeSet::new();
    Ok(found
        .into_iter()
        .map(|(raw, path)| {
            let base = submission::safe_name(&raw);
            let mut name = base.clone();
            let mut n = 2;
            while !taken.insert(name.clone()) {
                name = format!("{base}-{n}");
                n += 1;
            }
            (name, path)
        })
        .collect())
}

/// Grades every student of `job.class_dir`, `job.jobs` at a time, and writes the reports and the
/// summary. Exit status: 0 when every submission could be graded, 2 when one could not.
pub fn grade_class(job: &ClassJob) -> anyhow::Result<i32> {
    let students = students(job.class_dir)?;
    if students.is_empty() {
        anyhow::bail!(
            "no student clones in {}: it should hold one folder per student, each with exercises/ and Cargo.toml",
            job.class_dir.display()
        );
    }
    let started = Instant::now();
    let grading = job.grading;
    eprintln!(
        "grading {} students from {}, {} at a time; reports in {}",
        students.len(),
        job.class_dir.display(),
        job.jobs,
        job.reports.display()
    );
    let queue = Mutex::new(students.iter().cloned().collect::<VecDeque<_>>());
    let rows = Mutex::new(Vec::new());
    std::thread::scope(|scope| {
        for slot in 0..job.jobs.min(students.len()) {
            let (queue, rows) = (&queue, &rows);
            scope.spawn(move || loop {
                let next = queue.lock().unwrap_or_else(|p| p.into_inner()).pop_front();
                let Some((name, path)) = next else { break };
                let begun = Instant::now();
                let row = grade_one(job, slot, &name, &path);
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
    // Every student's sandbox has ended here (the scope joined every thread, and each run kills
    // its whole PID namespace), so nothing of theirs can touch the summary.
    let mut rows = rows.into_inner().unwrap_or_else(|p| p.into_inner());
    rows.sort_by(|a, b| a.student.cmp(&b.student));
    let summary = Summary {
        judged_by: grading.judged_by(),
        exercises: grading
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
        "{} students in {:.0} s; summary: {} and {}; one report per student in {}",
        summary.students.len(),
        started.elapsed().as_secs_f64(),
        csv_path.display(),
        json_path.display(),
        job.reports.join("students").display()
    );
    if !grading.settings.confinement.is_sandboxed() {
        eprintln!("warning: {}", grading.judged_by());
    }
    Ok(if summary.students.iter().any(|s| s.error.is_some()) {
        2
    } else {
        0
    })
}

fn grade_one(job: &ClassJob, slot: usize, name: &str, path: &Path) -> SummaryRow {
    let grading = job.grading;
    let rel_json = format!("students/{name}.json");
    let json = job.reports.join(&rel_json);
    let junit = job.reports.join(format!("students/{name}.xml"));
    let submission = submission::read(name, path, grading.catalog, Some(&grading.catalog.root));
    let result = (|| -> anyhow::Result<crate::Report> {
        let report = grading.grade(&submission, slot, &Progress::Quiet)?;
        write_atomically(&json, report.to_json().as_bytes())?;
        write_atomically(&junit, report.to_junit()?.as_bytes())?;
        Ok(report)
    })();
    let max_points = grading.selected.iter().map(|e| e.max_points()).sum();
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
            ignored_files: submission.ignored,
            refused_files: submission.refused,
            error: None,
            report: rel_json,
        },
        Err(e) => SummaryRow {
            student: name.to_string(),
            points: BTreeMap::new(),
            total: 0,
            max_points,
            ignored_files: submission.ignored,
            refused_files: submission.refused,
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
    header.extend(["total".into(), "not graded (ignored or refused)".into()]);
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
            None => row
                .refused_files
                .iter()
                .chain(&row.ignored_files)
                .cloned()
                .collect::<Vec<_>>()
                .join("\n"),
        });
        table.add_row(cells);
    }
    table.to_string()
}
