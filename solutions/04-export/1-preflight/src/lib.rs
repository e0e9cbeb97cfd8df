//! Exercise 04-1: an export pre-flight that reports every problem at once (book chapter 4,
//! notebook `notebooks/04-export.ipynb`).
//!
//! Edit only `src/preflight.rs`, at the `TODO:` markers; grade with `cargo grade 04-1`.

pub mod preflight;

// The graded tests. The path is written from the repository root so that the reference solution
// (solutions/…/src/lib.rs, this same file) compiles the very same tests: written once, no copy.
#[cfg(test)]
#[path = "../../../../exercises/04-export/1-preflight/tests/grade.rs"]
mod grade;
