//! Exercise 02-1: move a whole training run to another device (book chapter 2, notebook
//! `notebooks/02-moving-models-and-data.ipynb`).
//!
//! Edit only `src/move_everything.rs`, at the `TODO:` markers; grade with `cargo grade 02-1`.

pub mod move_everything;

// The graded tests. The path is written from the repository root so that the reference solution
// (solutions/…/src/lib.rs, this same file) compiles the very same tests: written once, no copy.
#[cfg(test)]
#[path = "../../../../exercises/02-moving-models-and-data/1-move-everything/tests/grade.rs"]
mod grade;
