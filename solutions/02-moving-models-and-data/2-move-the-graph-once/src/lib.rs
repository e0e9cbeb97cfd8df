//! Exercise 02-2: move the graph once, read back only the metrics (book chapter 2, notebook
//! `notebooks/02-moving-models-and-data.ipynb`).
//!
//! Edit only `src/move_once.rs`, at the `TODO:` markers; grade with `cargo grade 02-2`.

pub mod move_once;

// The graded tests. The path is written from the repository root so that the reference solution
// (solutions/…/src/lib.rs, this same file) compiles the very same tests: written once, no copy.
#[cfg(test)]
#[path = "../../../../exercises/02-moving-models-and-data/2-move-the-graph-once/tests/grade.rs"]
mod grade;
