//! Shared by the integration tests of workbook-lessons.

use workbook::candle_core::Device;

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
