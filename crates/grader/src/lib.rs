//! `cargo grade`: grades the workbook's exercises, for a student grading themselves and for a
//! teacher grading a class.
//!
//! Every exercise is a crate under `exercises/<chapter>/<exercise>/` with an `exercise.toml`
//! (title, objectives, the files a student edits, points per test) and graded tests in
//! `tests/grade.rs`, each a *scenario* (the `scenario` crate) that records what it observes.
//! The reference solution under `solutions/` compiles the very same test file.
//!
//! Two ways to a verdict:
//! - a student's own run ([`runner`]): Cargo builds the exercise, each graded test runs in its
//!   own process with a time limit, and the test's own assertions decide;
//! - a teacher's judged run ([`grading`]: `--class`, `--root`, `--wrong`, `--record-expected`):
//!   the submission's edit files only, on the teacher's tree without `solutions/`, compiled and
//!   run in a bubblewrap sandbox ([`sandbox`]), judged ([`judge`]) by comparing each scenario's
//!   observations with the reference solution's under a secret challenge ([`expected`]). The
//!   stages, one module each: [`handout`], [`submission`], [`slot`], [`compile`], [`execute`],
//!   [`judge`], [`report`].
//!
//! A test may also be the compiler's verdict alone: a program that must build (`build_only`), or
//! one that must be refused for a known mistake ([`refusal`], `compile_fail`).
//!
//! Either way the results become a table, a JSON report and a JUnit XML report.
//!
//! ```
//! use grader::catalog::Selection;
//! let selection = Selection::parse(&["01".to_string()]);
//! assert_eq!(selection, Selection::Patterns(vec!["01".into()]));
//! ```

pub mod cargo;
pub mod catalog;
pub mod cgroup;
pub mod class;
pub mod cli;
pub mod compile;
pub mod error;
pub mod escape;
pub mod execute;
pub mod expected;
pub mod exports;
pub mod feedback;
pub mod grading;
pub mod handout;
pub mod handout_export;
pub mod hints;
pub mod integrity;
pub mod judge;
pub mod lang;
pub mod messages;
pub mod own_changes;
pub mod progress;
pub mod python;
pub mod refusal;
pub mod report;
pub mod roster;
pub mod runner;
pub mod sandbox;
pub mod similarity;
pub mod slot;
pub mod slots_at_once;
pub mod snapshot;
pub mod stats;
pub mod submission;
pub mod watch;
pub mod wrong;

pub use catalog::{Catalog, Exercise, Variant};
pub use error::{GradeError, Result};
pub use report::Report;
pub use runner::{ExerciseOutcome, RunOptions, Status, TestOutcome};
