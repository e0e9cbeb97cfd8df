//! Exercise 07-1: Cora end to end, from training on the accelerator to concurrent serving (book
//! chapter 7, the capstone).
//!
//! Edit only `src/pipeline.rs`, at the `TODO:` markers; grade with `cargo grade 07-1`.

pub mod pipeline;

// The graded tests. The path is written from the repository root so that the reference solution
// (solutions/…/src/lib.rs, this same file) compiles the very same tests: written once, no copy.
#[cfg(test)]
#[path = "../../../../exercises/07-capstone/1-cora-end-to-end/tests/grade.rs"]
mod grade;
