//! Exercise 03-3: serve from snapshots while training (book chapter 3, notebook
//! `notebooks/03-thread-safety.ipynb`).
//!
//! Edit only `src/serve_from_snapshots.rs`, at the `TODO:` markers; grade with `cargo grade 03-3`.

pub mod serve_from_snapshots;

// The graded tests. The path is written from the repository root so that the reference solution
// (solutions/…/src/lib.rs, this same file) compiles the very same tests: written once, no copy.
#[cfg(test)]
#[path = "../../../../exercises/03-thread-safety/3-serve-from-snapshots/tests/grade.rs"]
mod grade;
