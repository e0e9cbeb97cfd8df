//! Shared helpers for the integration tests.

use std::path::PathBuf;

/// The directory holding the real Planetoid files, if it exists: `$PLANETOID_DATA_DIR` when set
/// (and only it), else `<workspace>/../shared/data/planetoid`, else `/work/shared/data/planetoid`.
pub fn data_dir() -> Option<PathBuf> {
    let candidates = match std::env::var_os("PLANETOID_DATA_DIR") {
        Some(d) => vec![PathBuf::from(d)],
        None => vec![
            PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/data/planetoid"),
            PathBuf::from("/work/shared/data/planetoid"),
        ],
    };
    candidates
        .into_iter()
        .find(|d| d.join("ind.cora.graph").is_file())
}

/// [`data_dir`], or a loud `SKIPPED` line on stderr and `None`.
pub fn data_dir_or_skip(test: &str) -> Option<PathBuf> {
    let d = data_dir();
    if d.is_none() {
        eprintln!(
            "SKIPPED: {test}: the real Planetoid files were not found (set PLANETOID_DATA_DIR \
             or put them in ../shared/data/planetoid)"
        );
    }
    d
}
