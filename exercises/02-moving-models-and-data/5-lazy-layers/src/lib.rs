//! Exercise 02-5: lazy layers, born on the device and all trained (book chapter 2, notebook
//! `notebooks/02-moving-models-and-data.ipynb`).
//!
//! Edit only `src/lazy_training.rs`, at the `TODO:` markers; grade with `cargo grade 02-5`.

pub mod lazy_training;

// The graded tests. The path is written from the repository root so that the reference solution
// (solutions/…/src/lib.rs, this same file) compiles the very same tests: written once, no copy.
#[cfg(test)]
#[path = "../../../../exercises/02-moving-models-and-data/5-lazy-layers/tests/grade.rs"]
mod grade;
