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

/// Every `tests/*.rs` and `tests/*/main.rs` is a module of this binary or a `[[test]]` target
/// of Cargo.toml: with `autotests = false`, cargo would otherwise skip a new one in silence.
#[test]
fn every_test_file_runs() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests");
    let manifest = include_str!("../Cargo.toml");
    let here = include_str!("it.rs");
    let mut missing = Vec::new();
    for entry in std::fs::read_dir(&dir).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        let file = if path.extension().is_some_and(|e| e == "rs") {
            name
        } else if path.join("main.rs").is_file() {
            format!("{name}/main.rs")
        } else {
            continue;
        };
        let target = format!("path = \"tests/{file}\"");
        let module = format!("#[path = \"{file}\"]");
        if !manifest.contains(&target) && !here.contains(&module) {
            missing.push(file);
        }
    }
    assert!(
        missing.is_empty(),
        "tests/{missing:?} would never run: add each to tests/it.rs (`#[path = ..] mod ..;`) or as a [[test]] to Cargo.toml"
    );
}
