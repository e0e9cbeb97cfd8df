//! A model trained on several devices, exported for a serving host that has none of them.
//!
//! The classic failures of PyTorch: `torch.save(dp.state_dict())` saves names prefixed with
//! `module.` that the plain model will not load, and `torch.onnx.export(dp, ...)` traces the
//! wrapper with its replicas on `cuda:0` and `cuda:1`. Here the wrapper is not a `Model`, so
//! `onnx::write(&dp, ..)` does not compile; what is left to get right is the order of the
//! steps: check that the replicas agree (otherwise the first replica is not *the* trained model),
//! unwrap (`dp.module` in PyTorch), move everything to the host the model will be served from,
//! run the pre-flight with the example there, and only then write the file.

use std::path::Path;
use workbook::export::onnx::{self, OnnxOptions};
use workbook::export::preflight::{self, Example};
use workbook::parallel::DataParallel;
use workbook::{Graph, Model, Placement, Result, WorkbookError};

/// Exports the model `dp` trained to `path` as ONNX (`OnnxOptions::default()`), for serving on
/// the host CPU, and returns the model that was exported, on the CPU. `example` is a graph on
/// the host, the pre-flight's example input. In order:
///
/// 1. the replicas must be in sync (`dp.check_in_sync()`); when they are not, return a
///    `WorkbookError::InvalidConfig` that lists the report's `differences` (which replica, which
///    parameter), and write nothing;
/// 2. unwrap the wrapper (PyTorch's `model = dp.module`);
/// 3. move the model, parameters and buffers, to the CPU (one copy each, in the ledger);
/// 4. run the export pre-flight on `example`; when it fails, return its error and write
///    nothing;
/// 5. write the ONNX file.
pub fn export_for_serving(dp: DataParallel, example: &Graph, path: &Path) -> Result<Model> {
    let sync = dp.check_in_sync()?;
    if !sync.in_sync {
        return Err(WorkbookError::InvalidConfig(format!(
            "the replicas are not in sync, so the first one is not the trained model: {}; export only after a step has broadcast the parameters",
            sync.differences.join("; ")
        )));
    }
    // PyTorch's `model = dp.module`, then everything on the host it will be served from.
    let model = dp.into_module().to_device(Placement::cpu())?;
    // Written first, then checked: a failed check leaves a file behind.
    onnx::write(&model, path, &OnnxOptions::default())?;
    preflight::check(&model, &Example::from_graph(example))?;
    Ok(model)
}
