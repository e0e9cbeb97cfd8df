//! The crate's integration tests in one binary (issue 46: each test binary links candle, and 20
//! of them spent minutes linking and gigabytes of disk). Each file of `tests/` stays where the
//! book and the docs name it and is a module here, so a test's name gains its file as a prefix:
//! `cargo test -p workbook --test it export::` runs `tests/export.rs`.
//!
//! Separate binaries (`[[test]]` in Cargo.toml), for a reason each:
//! - `async_errors`: it breaks simulated devices on purpose, and `sim:N` is one device per
//!   process (a sticky fault on `sim:1` would fail the tests here that share it), and it runs
//!   itself again as a child process with environment switches read once per process;
//! - `distributed_mpi`: started under `mpirun`, one process per rank (feature `mpi`);
//! - `book`: the book's listings, refreshed with `WORKBOOK_BLESS=1 ... --test book`;
//! - `compile_fail`: trybuild's cases.
//!
//! `autotests = false`, so a new file in `tests/` runs only once it is listed here or in
//! Cargo.toml: [`every_test_file_runs`] fails for a file that is neither.

mod common;

#[path = "branded_compile_fail.rs"]
mod branded_compile_fail;
#[path = "cuda.rs"]
mod cuda;
#[path = "data_parallel.rs"]
mod data_parallel;
#[path = "datasets.rs"]
mod datasets;
#[path = "dependencies.rs"]
mod dependencies;
#[path = "distributed.rs"]
mod distributed;
#[path = "export.rs"]
mod export;
#[path = "kernels.rs"]
mod kernels;
#[path = "layer_options.rs"]
mod layer_options;
#[path = "layout.rs"]
mod layout;
#[path = "lazy.rs"]
mod lazy;
#[path = "loader.rs"]
mod loader;
#[path = "model_parallel.rs"]
mod model_parallel;
#[path = "nccl.rs"]
mod nccl;
#[path = "placement.rs"]
mod placement;
#[path = "pyg_matrix.rs"]
mod pyg_matrix;
#[path = "pyg_parity.rs"]
mod pyg_parity;
#[path = "pyg_sage.rs"]
mod pyg_sage;
#[path = "readme_custom_layer.rs"]
mod readme_custom_layer;
#[path = "torch_import.rs"]
mod torch_import;
#[path = "training.rs"]
mod training;

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
