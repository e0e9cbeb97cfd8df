//! Exercise 03-1: return the attention, keep nothing (book chapter 3, notebook
//! `notebooks/03-thread-safety.ipynb`).
//!
//! Edit only `src/stateless_attention.rs`, at the `TODO:` markers; grade with `cargo grade 03-1`.

pub mod stateless_attention;

// The graded tests. The path is written from the repository root so that the reference solution
// (solutions/…/src/lib.rs, this same file) compiles the very same tests: written once, no copy.
#[cfg(test)]
#[path = "../../../../exercises/03-thread-safety/1-stateless-attention/tests/grade.rs"]
mod grade;
