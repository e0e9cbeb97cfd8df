//! Grades in the formats of the services teachers use: Gradescope's `results.json`, GitHub
//! Classroom's autograding reporter, and a CSV for a learning management system's gradebook
//! (Canvas, Moodle). Hidden tests ([`crate::catalog::TestSpec::hidden`]) keep their points but
//! lose their names and messages until the teacher releases them.
//!
//! ```
//! let report = grader::Report::new(grader::Variant::Exercises, std::path::Path::new("alice"), vec![]);
//! let json = grader::exports::gradescope(&report, &Default::default(), false);
//! assert_eq!(json["score"], 0.0);
//! assert!(json["tests"].as_array().unwrap().is_empty());
//! ```

use crate::class::Summary;
use crate::report::Report;
use crate::runner::Status;
use serde_json::{json, Value};
use std::collections::BTreeSet;

/// `(exercise id, test name)` of the hidden tests.
pub type Hidden = BTreeSet<(String, String)>;

/// A test's name as students see it: `01-1 name`, or `01-1 hidden test 2` until released.
pub fn shown_name(
    exercise: &str,
    test: &str,
    index: usize,
    hidden: &Hidden,
    released: bool,
) -> String {
    if hidden.contains(&(exercise.to_string(), test.to_string())) && !released {
        format!("{exercise} hidden test {}", index + 1)
    } else {
        format!("{exercise} {test}")
    }
}

/// A test's message as students see it.
pub fn shown_message(
    exercise: &str,
    test: &str,
    message: &str,
    hidden: &Hidden,
    released: bool,
) -> String {
    if hidden.contains(&(exercise.to_string(), test.to_string())) && !released {
        "a hidden test: its feedback comes when your teacher releases it".into()
    } else {
        message.to_string()
    }
}

/// Gradescope's `results.json` (tests with `score`, `max_score`, `name`, `output`,
/// `visibility`; the total `score`). Hidden tests are `after_published` until released.
pub fn gradescope(report: &Report, hidden: &Hidden, released: bool) -> Value {
    let mut tests = Vec::new();
    for ex in &report.exercises {
        for (i, t) in ex.tests.iter().enumerate() {
            let is_hidden = hidden.contains(&(ex.id.clone(), t.name.clone()));
            tests.push(json!({
                "name": shown_name(&ex.id, &t.name, i, hidden, released),
                "number": format!("{}.{}", ex.id, i + 1),
                "score": f64::from(t.points),
                "max_score": f64::from(t.max_points),
                "status": if t.status == Status::Passed { "passed" } else { "failed" },
                "output": shown_message(&ex.id, &t.name, &t.message, hidden, released),
                "visibility": if is_hidden && !released { "after_published" } else { "visible" },
            }));
        }
    }
    let mut output = String::new();
    if let Some(judge) = &report.judged_by {
        output += &format!("Judged by {judge}.\n");
    }
    for refused in &report.refused_files {
        output += &format!("Not read: {refused}\n");
    }
    json!({
        "score": f64::from(report.points),
        "output": output,
        "visibility": "visible",
        "stdout_visibility": "hidden",
        "tests": tests,
    })
}

/// GitHub Classroom's autograding reporter payload (`{version, status, max_score, tests}`), whose
/// base64 goes into a step output the reporter reads as `<RUNNER>_RESULTS`.
pub fn classroom(report: &Report, hidden: &Hidden, released: bool) -> Value {
    let mut tests = Vec::new();
    let mut any_failed = false;
    for ex in &report.exercises {
        for (i, t) in ex.tests.iter().enumerate() {
            let status = match t.status {
                Status::Passed => "pass",
                Status::CompileError => "error",
                _ => "fail",
            };
            any_failed |= t.status != Status::Passed;
            tests.push(json!({
                "name": shown_name(&ex.id, &t.name, i, hidden, released),
                "status": status,
                "score": t.points,
                "message": shown_message(&ex.id, &t.name, &t.message, hidden, released),
                "line_no": 0,
                "execution_time": format!("{}ms", t.duration_ms),
            }));
        }
    }
    json!({
        "version": 1,
        "status": if any_failed { "fail" } else { "pass" },
        "max_score": report.max_points,
        "tests": tests,
    })
}

/// Which roster column identifies a student in an LMS import.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Identity {
    /// The `id` column (the folder name).
    Id,
    /// The `email` column (Moodle's usual match).
    Email,
    /// Another roster column, by header (Canvas's `SIS User ID`).
    Column(String),
}

impl std::str::FromStr for Identity {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Ok(match s {
            "id" => Identity::Id,
            "email" => Identity::Email,
            "" => return Err("an empty identity column".into()),
            other => Identity::Column(other.to_string()),
        })
    }
}

/// The gradebook CSV: the identity column, the student's name, one column per exercise (points),
/// the total, and a short feedback column; one row per student of the summary.
pub fn lms_csv(summary: &Summary, identity: &Identity) -> Result<String, String> {
    let mut out = csv::Writer::from_writer(Vec::new());
    let label = match identity {
        Identity::Id => "id".to_string(),
        Identity::Email => "email".to_string(),
        Identity::Column(c) => c.clone(),
    };
    let mut header = vec![label.clone(), "name".into()];
    header.extend(
        summary
            .exercises
            .keys()
            .map(|id| format!("{id} (max {})", summary.exercises[id])),
    );
    header.extend(["total".to_string(), "feedback".to_string()]);
    out.write_record(&header).map_err(|e| e.to_string())?;
    for row in &summary.students {
        let who = match identity {
            Identity::Id => Some(row.student.id.clone()),
            Identity::Email => row.student.email.clone(),
            Identity::Column(c) => row
                .student
                .extra
                .iter()
                .find(|(h, _)| h == c)
                .map(|(_, v)| v.clone())
                .filter(|v| !v.is_empty()),
        }
        .ok_or_else(|| {
            format!(
                "{} has no `{label}` in the roster: every row of an LMS import needs it",
                row.student.id
            )
        })?;
        let mut record = vec![
            crate::escape::csv_cell(&who),
            crate::escape::csv_cell(row.student.name.as_deref().unwrap_or_default()),
        ];
        record.extend(
            summary
                .exercises
                .keys()
                .map(|id| row.points.get(id).copied().unwrap_or(0).to_string()),
        );
        record.push(row.total.to_string());
        record.push(row.feedback_line());
        out.write_record(&record).map_err(|e| e.to_string())?;
    }
    let bytes = out.into_inner().map_err(|e| e.to_string())?;
    Ok(String::from_utf8_lossy(&bytes).into_owned())
}
