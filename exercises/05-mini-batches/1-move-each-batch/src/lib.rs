//! Exercise 05-1: move each batch, and only the batch, every step (book chapter 5).
//!
//! Edit only `src/batch_loop.rs`, at the `TODO:` markers; grade with `cargo grade 05-1`.

pub mod batch_loop;

// The graded tests. The path is written from the repository root so that the reference solution
// (solutions/…/src/lib.rs, this same file) compiles the very same tests: written once, no copy.
#[cfg(test)]
#[path = "../../../../exercises/05-mini-batches/1-move-each-batch/tests/grade.rs"]
mod grade;
