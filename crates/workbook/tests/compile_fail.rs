//! What the compiler refuses, one trybuild run for the whole crate: each case must fail to
//! compile with the error checked in beside it (`.stderr`), which the book quotes.
//!
//! - `tests/derive_fail/`: what `#[derive(Module)]` refuses: a field that is neither a tensor
//!   nor opted out with `#[module(skip)]` (so no field is left out of `to_device` by accident),
//!   and a layer without a `#[module(placement)]`.
//! - `tests/branded_fail/`: chapter 1, "Refused by the compiler": classic device mistakes written
//!   with brands (`workbook::branded`); the right programs run in `tests/branded_compile_fail.rs`.
//! - `tests/wrapper_fail/`: chapter 6: a `DataParallel` wrapper is not a `Model`, so saving it
//!   (PyTorch's `torch.save(dp.state_dict(), ..)` with its `module.` names) does not compile.
//!
//! One `TestCases` for every folder, so that trybuild builds its project (workbook and every
//! dependency, checked in `target/tests/trybuild/`) once per run and checks every case in one
//! cargo invocation (issue 46: each of the former test binaries ran its own). A new folder of
//! cases is one more `compile_fail` line below.
//!
//! Regenerate the expected output after a toolchain change with
//! `TRYBUILD=overwrite cargo test -p workbook --test compile_fail`, then read the diff.

#[test]
fn the_compiler_refuses_what_the_types_forbid() {
    let cases = trybuild::TestCases::new();
    cases.compile_fail("tests/derive_fail/*.rs");
    cases.compile_fail("tests/wrapper_fail/*.rs");
    cases.compile_fail("tests/branded_fail/*.rs");
}
