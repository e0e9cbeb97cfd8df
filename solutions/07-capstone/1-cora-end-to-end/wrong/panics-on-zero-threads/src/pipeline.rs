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

use std::path::Path;
use std::sync::Arc;
use std::thread::ThreadId;
use workbook::export::preflight::{self, Example, PreflightReport};
use workbook::train::{train, TrainConfig, TrainReport};
use workbook::{checkpoint, datasets, Graph, Model, ModelConfig, Placement, Result, WorkbookError};
use workbook_lessons::threads::serving::{self, Request, Response};

/// Attention heads of the first GATv2 layer (PyG's GAT example).
pub const HEADS: usize = 8;
/// Hidden channels per head.
pub const HIDDEN: usize = 8;
/// The capstone's learning rate: PyG's recipe uses 0.005 for 200 epochs; at 0.02 a few dozen
/// epochs reach about 80% test accuracy (book chapter 7).
pub const LR: f64 = 0.02;

/// Step 1 (chapters 1 and 2): Cora, loaded straight onto `device`, so that its 15.5 MB of
/// features cross to the device once, before training.
pub fn load_cora(device: &Placement) -> Result<Graph> {
    datasets::load("cora", None, device)
}

/// Step 2: trains a 2-layer GATv2 (`heads` heads × `hidden` channels each, then one head for
/// the classes; the chapter's model is [`HEADS`] × [`HIDDEN`]) on `graph`, where the graph is,
/// for `epochs` epochs with PyG's GATv2 recipe (dropout 0.6, weight decay 5e-4) at learning rate
/// [`LR`].
pub fn train_gatv2(
    graph: &Graph,
    heads: usize,
    hidden: usize,
    epochs: usize,
) -> Result<TrainReport> {
    let config = ModelConfig::gatv2(graph.num_features(), hidden, heads, graph.num_classes());
    let recipe = TrainConfig {
        epochs,
        lr: LR,
        ..TrainConfig::gatv2()
    };
    train(config, graph, &recipe, |_| {})
}

/// Step 3 (chapter 4): the export pre-flight with `example` as the example graph, then the
/// checkpoint at `path` (PyG names, config included). Nothing is written when the pre-flight
/// fails; its error is returned. Returns the pre-flight's report.
pub fn export(model: &Model, example: &Graph, path: &Path) -> Result<PreflightReport> {
    let report = preflight::check(model, &Example::from_graph(example))?;
    checkpoint::save(model, path)?;
    Ok(report)
}

/// Step 4 (chapter 2): the serving machine loads the checkpoint onto its own device, the CPU
/// (PyTorch's `map_location="cpu"`), and wraps it in an `Arc` to share it between threads.
pub fn reload_for_serving(path: &Path) -> Result<Arc<Model>> {
    Ok(Arc::new(checkpoint::load(path, Placement::cpu())?))
}

/// One answer and the thread that computed it.
#[derive(Clone, Debug)]
pub struct Answer {
    pub response: Response,
    pub thread: ThreadId,
}

/// Step 5 (chapter 3): answers `requests` with `threads` new threads sharing the one `model`:
/// each thread gets a clone of the `Arc` (a pointer, not a copy of the model), thread `t`
/// answers requests `t`, `t + threads`, `t + 2 * threads`, ... with
/// `workbook_lessons::threads::serving::answer`, and the answers come back in request order, each with
/// the id of the thread that computed it. Zero threads is an error, not a hang or a panic.
pub fn serve(model: Arc<Model>, requests: Arc<[Request]>, threads: usize) -> Result<Vec<Answer>> {
    // each thread answers about this many requests
    let per_thread = requests.len().div_ceil(threads);
    let handles: Vec<_> = (0..threads)
        .map(|t| {
            let model = Arc::clone(&model);
            let requests = Arc::clone(&requests);
            std::thread::spawn(move || -> Result<Vec<(usize, Answer)>> {
                let thread = std::thread::current().id();
                let mut mine = Vec::with_capacity(per_thread);
                for i in (t..requests.len()).step_by(threads) {
                    let response = serving::answer(&model, &requests[i])?;
                    mine.push((i, Answer { response, thread }));
                }
                Ok(mine)
            })
        })
        .collect();
    let mut answers: Vec<Option<Answer>> = vec![None; requests.len()];
    for handle in handles {
        let answered = handle
            .join()
            .map_err(|_| WorkbookError::Thread("a serving thread panicked".into()))??;
        for (i, answer) in answered {
            answers[i] = Some(answer);
        }
    }
    answers
        .into_iter()
        .enumerate()
        .map(|(i, a)| {
            a.ok_or_else(|| WorkbookError::Thread(format!("request {i} was not answered")))
        })
        .collect()
}
