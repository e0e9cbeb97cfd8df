//! What Rust refuses: layers that keep per-call state in `RefCell` / `Cell` cannot be shared
//! between threads. Each case in `tests/compile_fail/` must fail to compile with exactly the
//! error checked in beside it (`.stderr`), which the book quotes.
//!
//! Regenerate the expected output after a toolchain change with
//! `TRYBUILD=overwrite cargo test -p workbook-lessons --test compile_fail`, then read the diff.

#[test]
fn rust_refuses_to_share_cell_state_across_threads() {
    let cases = trybuild::TestCases::new();
    cases.compile_fail("tests/compile_fail/*.rs");
}
