//! Helpers shared by the integration tests.
#![allow(dead_code)]

use std::path::PathBuf;
use workbook::candle_core::{Device, Tensor};

/// The PyG reference fixtures vendored with the tests (a copy of `../shared/fixtures/pyg`).
pub fn fixtures_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/pyg")
}

/// The Planetoid files beside the repository (`../shared/data/planetoid`), if present. When
/// `WORKBOOK_REQUIRE_SHARED=1` (CI), their absence is a failure; otherwise the caller skips
/// loudly.
pub fn shared_planetoid_dir(test: &str) -> Option<PathBuf> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../../shared/data/planetoid");
    if dir.join("ind.citeseer.graph").is_file() {
        return Some(dir);
    }
    if std::env::var("WORKBOOK_REQUIRE_SHARED").as_deref() == Ok("1") {
        panic!("{test}: ../shared/data/planetoid is missing but WORKBOOK_REQUIRE_SHARED=1");
    }
    eprintln!("SKIPPED {test}: ../shared/data/planetoid not found (CiteSeer is downloaded by users, not shipped)");
    None
}

/// Largest absolute difference between two tensors of the same shape.
pub fn max_abs_diff(a: &Tensor, b: &Tensor) -> f32 {
    assert_eq!(a.dims(), b.dims(), "shapes differ");
    max_abs(&(a - b).unwrap())
}

/// Largest absolute value of an f32 tensor.
pub fn max_abs(t: &Tensor) -> f32 {
    t.abs()
        .unwrap()
        .flatten_all()
        .unwrap()
        .max(0)
        .unwrap()
        .to_scalar::<f32>()
        .unwrap()
}

/// The GPU, or `None` after printing why the test is skipped: built without the `cuda` feature,
/// or no usable CUDA device.
pub fn gpu(test: &str) -> Option<Device> {
    if !cfg!(feature = "cuda") {
        eprintln!("SKIPPED {test}: built without the `cuda` feature (cargo test --features cuda)");
        return None;
    }
    match Device::new_cuda(0) {
        Ok(d) => Some(d),
        Err(e) => {
            eprintln!("SKIPPED {test}: no usable CUDA device ({e})");
            None
        }
    }
}
