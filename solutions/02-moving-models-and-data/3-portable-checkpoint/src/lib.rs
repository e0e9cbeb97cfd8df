//! Exercise 02-3: a checkpoint that loads on any device (book chapter 2, notebook
//! `notebooks/02-moving-models-and-data.ipynb`).
//!
//! Edit only `src/portable_checkpoint.rs`, at the `TODO:` markers; grade with `cargo grade 02-3`.

pub mod portable_checkpoint;

// The graded tests. The path is written from the repository root so that the reference solution
// (solutions/…/src/lib.rs, this same file) compiles the very same tests: written once, no copy.
#[cfg(test)]
#[path = "../../../../exercises/02-moving-models-and-data/3-portable-checkpoint/tests/grade.rs"]
mod grade;
