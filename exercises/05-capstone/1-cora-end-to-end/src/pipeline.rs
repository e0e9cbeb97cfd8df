//! The capstone: GATv2 on Cora, from training on the accelerator to serving on the CPU.
//!
//! Each step is one function, and each avoids one of the failures of the book's chapters:
//!
//! | step | the failure avoided | chapter |
//! |---|---|---|
//! | [`load_cora`] | the graph crossing the bus every epoch | 1, 2 |
//! | [`train_gatv2`] | a model created on another device than its data | 1, 2 |
//! | [`export`] | writing a file that the pre-flight would refuse | 4 |
//! | [`reload_for_serving`] | a checkpoint that only loads where it was written | 2 |
//! | [`serve`] | shared mutable state between serving threads | 3 |
//!
//! The tests run the steps on `workbook::device::accelerator()`: `cuda:0` with a GPU, the
//! simulated `sim:1` otherwise. Requests arrive on the host, so the trained model cannot serve
//! them where it is (*"Expected all tensors to be on the same device"*); the serving machine
//! reloads the checkpoint onto its own device instead.

// The imports are those of the finished file; until then some are unused.
#![allow(unused_imports)]

use std::path::Path;
use std::sync::Arc;
use std::thread::ThreadId;
use workbook::export::preflight::{self, Example, PreflightReport};
use workbook::threads::serving::{self, Request, Response};
use workbook::train::{train, TrainConfig, TrainReport};
use workbook::{checkpoint, datasets, Graph, Model, ModelConfig, Placement, Result, WorkbookError};

/// Attention heads of the first GATv2 layer (PyG's GAT example).
pub const HEADS: usize = 8;
/// Hidden channels per head.
pub const HIDDEN: usize = 8;
/// The capstone's learning rate: PyG's recipe uses 0.005 for 200 epochs; at 0.02 a few dozen
/// epochs reach about 80% test accuracy (book chapter 5).
pub const LR: f64 = 0.02;

/// Step 1 (chapters 1 and 2): Cora, loaded straight onto `device`, so that its 15.5 MB of
/// features cross to the device once, before training.
pub fn load_cora(device: &Placement) -> Result<Graph> {
    // TODO: load Cora straight onto `device` with `datasets::load` (it takes any placement), not onto the CPU.
    todo!("load_cora: Cora onto {device}")
}

/// Step 2: trains a 2-layer GATv2 (`HEADS` heads × `HIDDEN` channels, then one head for the
/// classes) on `graph`, where the graph is, for `epochs` epochs with PyG's GATv2 recipe
/// (`TrainConfig::gatv2()`: dropout 0.6, weight decay 5e-4) at learning rate [`LR`].
pub fn train_gatv2(graph: &Graph, epochs: usize) -> Result<TrainReport> {
    // TODO: build the GATv2 config (`ModelConfig::gatv2` with the graph's features and classes, HIDDEN and HEADS) and train it with `train` and `TrainConfig::gatv2()`, changed to `epochs` epochs at learning rate LR.
    todo!(
        "train_gatv2: {epochs} epochs on '{}' on {}",
        graph.name,
        graph.placement()
    )
}

/// Step 3 (chapter 4): the export pre-flight with `example` as the example graph, then the
/// checkpoint at `path` (PyG names, config included). Nothing is written when the pre-flight
/// fails; its error is returned. Returns the pre-flight's report.
pub fn export(model: &Model, example: &Graph, path: &Path) -> Result<PreflightReport> {
    // TODO: run the pre-flight (`preflight::check` with `Example::from_graph(example)`) and return its error before writing anything, then write the checkpoint with `checkpoint::save` and return the pre-flight's report.
    todo!(
        "export: pre-flight on '{}', then the checkpoint {} (the model is on {})",
        example.name,
        path.display(),
        model.placement()
    )
}

/// Step 4 (chapter 2): the serving machine loads the checkpoint onto its own device, the CPU
/// (PyTorch's `map_location="cpu"`), and wraps it in an `Arc` to share it between threads.
pub fn reload_for_serving(path: &Path) -> Result<Arc<Model>> {
    // TODO: load the checkpoint onto the CPU (`checkpoint::load` with `Placement::cpu()`, PyTorch's map_location) and wrap the model in an `Arc`.
    todo!("reload_for_serving: {} onto the cpu", path.display())
}

/// One answer and the thread that computed it.
#[derive(Clone, Debug)]
pub struct Answer {
    pub response: Response,
    pub thread: ThreadId,
}

/// Step 5 (chapter 3): answers `requests` with `threads` new threads sharing the one `model`:
/// each thread gets a clone of the `Arc` (a pointer, not a copy of the model), thread `t`
/// answers requests `t`, `t + threads`, `t + 2 * threads`, ... with `serving::answer`, and the
/// answers come back in request order, each with the id of the thread that computed it.
pub fn serve(model: Arc<Model>, requests: Arc<[Request]>, threads: usize) -> Result<Vec<Answer>> {
    // TODO: spawn `threads` threads, each with its own `Arc::clone` of the model and of the requests, where thread t answers requests t, t + threads, ... with `serving::answer` and tags each answer with `std::thread::current().id()`; join them and return the answers in request order.
    todo!(
        "serve: {} request(s) with {threads} thread(s) sharing one model on {}",
        requests.len(),
        model.placement()
    )
}
