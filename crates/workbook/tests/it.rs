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
#[path = "reorder.rs"]
mod reorder;
#[path = "torch_import.rs"]
mod torch_import;
#[path = "training.rs"]
mod training;

#[path = "test_files.rs"]
mod test_files;

#[test]
fn every_test_file_runs() {
    test_files::every_test_file_runs(
        &std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests"),
        include_str!("../Cargo.toml"),
        include_str!("it.rs"),
    );
}
