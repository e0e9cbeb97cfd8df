//! Exercise 06-3: unwrap a data-parallel model and export it for serving (book chapter 6).
//!
//! Edit only `src/serving_export.rs`, at the `TODO:` markers; grade with `cargo grade 06-3`.

pub mod serving_export;

// The graded tests. The path is written from the repository root so that the reference solution
// (solutions/…/src/lib.rs, this same file) compiles the very same tests: written once, no copy.
#[cfg(test)]
#[path = "../../../../exercises/06-many-devices/3-unwrap-and-export/tests/grade.rs"]
mod grade;
