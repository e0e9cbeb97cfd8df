//! The student side of a graded scenario.
//!
//! A graded test (`exercises/*/*/tests/grade.rs`) is a *scenario*: it calls the student's code on
//! inputs chosen from a secret *challenge*, and records what it observed (tensors, devices,
//! ledger rows, error kinds, counts) with [`Scenario::observe`]. In a student's own run
//! (`cargo test`, `cargo grade`), the test's assertions decide and the observations go nowhere.
//! When a teacher grades a class (`cargo grade --class`), the student's test process runs in a
//! sandbox and cannot be trusted: it could print a fake `test result: ok`, exit with status 0,
//! or never reach its assertions. There the verdict is the judge's (`crates/grader`, which links
//! no student code): it reads the observations out of the sandbox and compares them with those
//! the reference solution recorded under the same challenge. A test passes only when every
//! value the reference observed is there and equal (numbers within a tolerance), and the
//! scenario ran to its end ([`Scenario`] records that when it is dropped without a panic).
//!
//! Because the inputs depend on the challenge ([`Scenario::seed`], [`Scenario::pick`]), the
//! values cannot be written down in advance: producing them is doing the exercise.
//!
//! ```
//! let s = scenario::start();
//! let nodes = s.pick("nodes", 10..20);
//! assert!((10..20).contains(&nodes));
//! s.observe("nodes squared", &(nodes * nodes));
//! s.observe_within("half", &(nodes as f64 / 2.0), scenario::Tolerance::abs(1e-9));
//! // dropped here: the scenario ran to its end
//! ```

pub mod observable;
pub mod protocol;
mod session;
pub mod source;

pub use observable::{Json, Observable, Shown};
pub use protocol::{Record, Tolerance};
pub use session::{start, Scenario, CHALLENGE_ENV, LOG_FD};
