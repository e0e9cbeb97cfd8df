//! The command's integration tests in one binary (issue 46: each of the 9 former binaries linked
//! candle through the workbook library). Every test here runs the `workbook` binary in a child
//! process, so no test shares process state with another. Each file of `tests/` stays where the
//! docs name it and is a module here: `cargo test -p workbook-cli --test it cli::` runs
//! `tests/cli.rs`.
//!
//! `autotests = false` (Cargo.toml), so a new file in `tests/` runs only once it is listed here
//! or as a `[[test]]`: [`every_test_file_runs`] fails for a file that is neither.

#[path = "bad_input.rs"]
mod bad_input;
#[path = "book_cli.rs"]
mod book_cli;
#[path = "cli.rs"]
mod cli;
#[path = "data_parallel.rs"]
mod data_parallel;
#[path = "distributed.rs"]
mod distributed;
#[path = "limits.rs"]
mod limits;
#[path = "pyg_matrix.rs"]
mod pyg_matrix;
#[path = "roofline.rs"]
mod roofline;
#[path = "save_batches.rs"]
mod save_batches;

#[path = "../../workbook/tests/test_files.rs"]
mod test_files;

#[test]
fn every_test_file_runs() {
    test_files::every_test_file_runs(
        &std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests"),
        include_str!("../Cargo.toml"),
        include_str!("it.rs"),
    );
}
