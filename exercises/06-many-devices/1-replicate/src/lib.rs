//! Exercise 06-1: replicate a model onto every device, buffers included (book chapter 6).
//!
//! Edit only `src/replicate.rs`, at the `TODO:` markers; grade with `cargo grade 06-1`.

pub mod replicate;

// The graded tests. The path is written from the repository root so that the reference solution
// (solutions/…/src/lib.rs, this same file) compiles the very same tests: written once, no copy.
#[cfg(test)]
#[path = "../../../../exercises/06-many-devices/1-replicate/tests/grade.rs"]
mod grade;
