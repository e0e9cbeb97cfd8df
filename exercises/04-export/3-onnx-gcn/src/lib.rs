//! Exercise 04-3: ONNX export of a GCN with dynamic sizes, checked by onnxruntime (book chapter
//! 4, notebook `notebooks/04-export.ipynb`).
//!
//! Edit only `src/onnx_gcn.rs`, at the `TODO:` markers; grade with `cargo grade 04-3` (one test
//! runs onnxruntime: see README.md).

pub mod onnx_gcn;

// The graded tests. The path is written from the repository root so that the reference solution
// (solutions/…/src/lib.rs, this same file) compiles the very same tests: written once, no copy.
#[cfg(test)]
#[path = "../../../../exercises/04-export/3-onnx-gcn/tests/grade.rs"]
mod grade;
