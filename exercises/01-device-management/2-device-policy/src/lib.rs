//! Exercise 01-2: one device policy (book chapter 1, notebook
//! `notebooks/01-device-management.ipynb`).
//!
//! Edit only `src/device_policy.rs`, at the `TODO:` markers; grade with `cargo grade 01-2`.

pub mod device_policy;

// The graded tests. The path is written from the repository root so that the reference solution
// (solutions/…/src/lib.rs, this same file) compiles the very same tests: written once, no copy.
#[cfg(test)]
#[path = "../../../../exercises/01-device-management/2-device-policy/tests/grade.rs"]
mod grade;
