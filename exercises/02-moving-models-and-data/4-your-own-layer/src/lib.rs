//! Exercise 02-4: your own layer, GraphSAGE, on the layer trait (book chapter 2, section "Your
//! own layer: intermediates made inside forward"; notebook
//! `notebooks/02-moving-models-and-data.ipynb`).
//!
//! Edit only `src/my_sage.rs`, at the `TODO:` markers; grade with `cargo grade 02-4`.

pub mod my_sage;
pub mod my_sage_spec;

// The graded tests. The path is written from the repository root so that the reference solution
// (solutions/…/src/lib.rs, this same file) compiles the very same tests: written once, no copy.
#[cfg(test)]
#[path = "../../../../exercises/02-moving-models-and-data/4-your-own-layer/tests/grade.rs"]
mod grade;
