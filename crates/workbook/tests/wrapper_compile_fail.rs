//! What the types refuse in chapter 6: a `DataParallel` wrapper is not a `Model`, so saving it
//! (PyTorch's `torch.save(dp.state_dict(), ..)` with its `module.` names) does not compile.
//! Each case in `tests/wrapper_fail/` must fail with the error checked in beside it
//! (`.stderr`), which the book quotes.
//!
//! Regenerate the expected output after a toolchain change with
//! `TRYBUILD=overwrite cargo test -p workbook --test wrapper_compile_fail`, then read the diff.

#[test]
fn a_data_parallel_wrapper_is_not_a_model() {
    let cases = trybuild::TestCases::new();
    cases.compile_fail("tests/wrapper_fail/*.rs");
}
