//! Class statistics: per exercise the mean and median points, how many students have full marks,
//! none, or code that does not compile; per test, how many failed it and how (the lesson most of a
//! class missed is the one to go over again).
//!
//! ```
//! use grader::stats::median;
//! assert_eq!(median(&mut [3.0, 1.0, 2.0]), 2.0);
//! assert_eq!(median(&mut [4.0, 1.0, 2.0, 3.0]), 2.5);
//! assert!(median(&mut []).is_nan());
//! ```

use crate::report::Report;
use crate::runner::Status;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// One exercise's statistics over the graded students.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ExerciseStats {
    /// Points available.
    pub max_points: u32,
    /// Students graded (those with a submission).
    pub graded: usize,
    /// Mean points.
    pub mean: f64,
    /// Median points.
    pub median: f64,
    /// Students with full marks.
    pub full_marks: usize,
    /// Students with 0 points.
    pub zeros: usize,
    /// Students whose code does not compile.
    pub compile_errors: usize,
    /// Per test: how many students failed it, by status (`failed`, `timed_out`, ...).
    pub failed_tests: BTreeMap<String, BTreeMap<String, usize>>,
}

/// The class's statistics.
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct ClassStats {
    /// Students in the summary.
    pub students: usize,
    /// Students graded (a submission was found).
    pub graded: usize,
    /// Mean of the totals over the graded students.
    pub mean_total: f64,
    /// Per exercise id.
    pub exercises: BTreeMap<String, ExerciseStats>,
}

/// Per exercise while counting: max points, each student's points, compile errors, per test the
/// failures by status.
type Tally = (
    u32,
    Vec<f64>,
    usize,
    BTreeMap<String, BTreeMap<String, usize>>,
);

/// The median (NaN for no values).
pub fn median(values: &mut [f64]) -> f64 {
    if values.is_empty() {
        return f64::NAN;
    }
    values.sort_by(f64::total_cmp);
    let mid = values.len() / 2;
    if values.len() % 2 == 1 {
        values[mid]
    } else {
        (values[mid - 1] + values[mid]) / 2.0
    }
}

/// Statistics over the reports of graded students; `students` counts every row.
pub fn compute(students: usize, graded: &[&Report]) -> ClassStats {
    let mut by_exercise: BTreeMap<String, Tally> = BTreeMap::new();
    for report in graded {
        for ex in &report.exercises {
            let entry = by_exercise
                .entry(ex.id.clone())
                .or_insert_with(|| (ex.max_points, Vec::new(), 0, BTreeMap::new()));
            entry.1.push(f64::from(ex.points));
            if ex.compile_error.is_some() {
                entry.2 += 1;
            }
            for t in &ex.tests {
                let per = entry.3.entry(t.name.clone()).or_default();
                if t.status != Status::Passed {
                    let status = serde_json::to_value(t.status)
                        .ok()
                        .and_then(|v| v.as_str().map(str::to_string))
                        .unwrap_or_default();
                    *per.entry(status).or_default() += 1;
                }
            }
        }
    }
    let exercises = by_exercise
        .into_iter()
        .map(
            |(id, (max_points, mut points, compile_errors, failed_tests))| {
                let n = points.len();
                let mean = points.iter().sum::<f64>() / n.max(1) as f64;
                let full_marks = points
                    .iter()
                    .filter(|p| **p == f64::from(max_points))
                    .count();
                let zeros = points.iter().filter(|p| **p == 0.0).count();
                (
                    id,
                    ExerciseStats {
                        max_points,
                        graded: n,
                        mean,
                        median: median(&mut points),
                        full_marks,
                        zeros,
                        compile_errors,
                        failed_tests,
                    },
                )
            },
        )
        .collect();
    let totals: Vec<f64> = graded.iter().map(|r| f64::from(r.points)).collect();
    ClassStats {
        students,
        graded: graded.len(),
        mean_total: totals.iter().sum::<f64>() / totals.len().max(1) as f64,
        exercises,
    }
}

/// The statistics as a table for the terminal.
pub fn table(stats: &ClassStats) -> String {
    use comfy_table::{presets, ContentArrangement, Table};
    let mut table = Table::new();
    table
        .load_preset(presets::UTF8_BORDERS_ONLY)
        .set_content_arrangement(ContentArrangement::Dynamic)
        .set_header([
            "exercise",
            "mean",
            "median",
            "full marks",
            "zeros",
            "no build",
            "tests failed by most",
        ]);
    if table.width().is_none() {
        table.set_width(140);
    }
    for (id, e) in &stats.exercises {
        let mut failed: Vec<(usize, &String)> = e
            .failed_tests
            .iter()
            .map(|(name, by)| (by.values().sum(), name))
            .filter(|(n, _)| *n > 0)
            .collect();
        failed.sort_by(|a, b| b.0.cmp(&a.0).then(a.1.cmp(b.1)));
        let worst: Vec<String> = failed
            .iter()
            .take(3)
            .map(|(n, name)| format!("{name} ({n}/{})", e.graded))
            .collect();
        table.add_row(vec![
            id.clone(),
            format!("{:.1}/{}", e.mean, e.max_points),
            format!("{:.1}", e.median),
            format!("{}/{}", e.full_marks, e.graded),
            format!("{}/{}", e.zeros, e.graded),
            format!("{}/{}", e.compile_errors, e.graded),
            worst.join("\n"),
        ]);
    }
    format!(
        "{}\n{} of {} students graded; mean total {:.1}",
        table, stats.graded, stats.students, stats.mean_total
    )
}
