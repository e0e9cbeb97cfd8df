//! Exercise 01-5: branded placements, a device mismatch refused by the compiler (book chapter 1,
//! page "Refused by the compiler", notebook `notebooks/01-device-management.ipynb`).
//!
//! Edit only `src/branded.rs`, at the `TODO:` markers; grade with `cargo grade 01-5`.

/// Branded placements of your own: a closure receives a [`Device<'d>`](branded::Device) whose
/// brand `'d` no other device has, tensors made there carry it ([`Tensor<'d>`](branded::Tensor)),
/// and combining two tensors needs one brand for both, so a tensor of one device added to one of
/// another, or a gradient from another device, does not compile. `Tensor::to` is the one way
/// across. `workbook::branded` is the library's version of the same idea, for models and graphs.
///
/// (These docs live here because the graded programs compile `branded.rs` on its own with
/// `include!`, where a file cannot start with `//!` comments.)
pub mod branded;

// The graded tests. The path is written from the repository root so that the reference solution
// (solutions/…/src/lib.rs, this same file) compiles the very same tests: written once, no copy.
#[cfg(test)]
#[path = "../../../../exercises/01-device-management/5-branded-placements/tests/grade.rs"]
mod grade;
