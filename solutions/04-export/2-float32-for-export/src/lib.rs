//! Exercise 04-2: half precision for serving, float32 for export (book chapter 4, notebook
//! `notebooks/04-export.ipynb`).
//!
//! Edit only `src/float32_for_export.rs`, at the `TODO:` markers; grade with `cargo grade 04-2`.

pub mod float32_for_export;

// The graded tests. The path is written from the repository root so that the reference solution
// (solutions/…/src/lib.rs, this same file) compiles the very same tests: written once, no copy.
#[cfg(test)]
#[path = "../../../../exercises/04-export/2-float32-for-export/tests/grade.rs"]
mod grade;
