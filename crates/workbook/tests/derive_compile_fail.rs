//! What `#[derive(Module)]` refuses: a field that is neither a tensor nor opted out with
//! `#[module(skip)]` (so no field is left out of `to_device` by accident), and a layer without
//! a `#[module(placement)]`. Each case in `tests/derive_fail/` must fail to compile with the
//! error checked in beside it (`.stderr`).
//!
//! Regenerate the expected output after a toolchain change with
//! `TRYBUILD=overwrite cargo test -p workbook --test derive_compile_fail`, then read the diff.

#[test]
fn the_derive_refuses_unclassified_fields() {
    let cases = trybuild::TestCases::new();
    cases.compile_fail("tests/derive_fail/*.rs");
}
