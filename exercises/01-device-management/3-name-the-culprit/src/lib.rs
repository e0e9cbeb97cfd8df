//! Exercise 01-3: a device check that names the culprit (book chapter 1, notebook
//! `notebooks/01-device-management.ipynb`).
//!
//! Edit only `src/device_check.rs`, at the `TODO:` markers; grade with `cargo grade 01-3`.

pub mod device_check;

// The graded tests. The path is written from the repository root so that the reference solution
// (solutions/…/src/lib.rs, this same file) compiles the very same tests: written once, no copy.
#[cfg(test)]
#[path = "../../../../exercises/01-device-management/3-name-the-culprit/tests/grade.rs"]
mod grade;
