//! Exercise 01-4: an error reported somewhere else, caught before any kernel (book chapter 1,
//! notebook `notebooks/01-device-management.ipynb`).
//!
//! Edit only `src/edge_check.rs`, at the `TODO:` markers; grade with `cargo grade 01-4`.

pub mod edge_check;

// The graded tests. The path is written from the repository root so that the reference solution
// (solutions/…/src/lib.rs, this same file) compiles the very same tests: written once, no copy.
#[cfg(test)]
#[path = "../../../../exercises/01-device-management/4-reported-somewhere-else/tests/grade.rs"]
mod grade;
