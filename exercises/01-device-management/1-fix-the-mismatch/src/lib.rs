//! Exercise 01-1: fix the classic GCN device mismatch (book chapter 1, notebook
//! `notebooks/01-device-management.ipynb`).
//!
//! Edit only `src/fix_the_mismatch.rs`, at the `TODO:` markers; grade with `cargo grade 01-1`.

pub mod fix_the_mismatch;

// The graded tests. The path is written from the repository root so that the reference solution
// (solutions/…/src/lib.rs, this same file) compiles the very same tests: written once, no copy.
#[cfg(test)]
#[path = "../../../../exercises/01-device-management/1-fix-the-mismatch/tests/grade.rs"]
mod grade;
