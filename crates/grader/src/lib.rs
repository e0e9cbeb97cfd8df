//! `cargo grade`: grades the workbook's exercises the way a teacher grades a class.
//!
//! Every exercise is a crate under `exercises/<chapter>/<exercise>/` with an `exercise.toml`
//! (title, objectives, the files a student edits, points per test) and graded tests in
//! `tests/grade.rs`. The reference solution under `solutions/` compiles the very same test file.
//! The grader compiles one exercise at a time, runs each graded test in its own process with a
//! time limit, and turns the results into a table, a JSON report and a JUnit XML report.
//!
//! ```
//! use grader::catalog::Selection;
//! let selection = Selection::parse(&["01".to_string()]);
//! assert_eq!(selection, Selection::Patterns(vec!["01".into()]));
//! ```

pub mod cargo;
pub mod catalog;
pub mod class;
pub mod cli;
pub mod compile;
pub mod error;
pub mod escape;
pub mod execute;
pub mod expected;
pub mod grading;
pub mod handout;
pub mod hints;
pub mod integrity;
pub mod judge;
pub mod own_changes;
pub mod progress;
pub mod python;
pub mod report;
pub mod runner;
pub mod sandbox;
pub mod slot;
pub mod submission;
pub mod watch;
pub mod wrong;

pub use catalog::{Catalog, Exercise, Variant};
pub use error::{GradeError, Result};
pub use report::Report;
pub use runner::{ExerciseOutcome, RunOptions, Status, TestOutcome};
