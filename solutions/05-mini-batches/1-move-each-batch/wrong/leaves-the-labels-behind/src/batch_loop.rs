//! One epoch of mini-batch training, written by hand.
//!
//! The loader samples on the host and yields batches there; the model lives on the device. So
//! inside the loop every batch must cross, whole: its features, its edges, its labels and its
//! ids (PyG: `batch = batch.to(device)`). Moving only `batch.x` leaves the rest behind (a named
//! error), and moving the whole graph every step works but copies far more than the batch
//! (no error at all: only the ledger shows it).

use workbook::loader::BatchPart;
use workbook::train::minibatch::MiniBatchTrainer;
use workbook::{Graph, Placement, Result};

/// Runs one training epoch of `trainer` over the batches of `epoch` of its loader
/// (`trainer.loader().batches(epoch)`), one `trainer.step` per batch, on `device` (where the
/// trainer's model is). `graph` is the host graph the loader samples from. Returns the number
/// of steps taken.
pub fn train_epoch(
    trainer: &mut MiniBatchTrainer,
    _graph: &Graph,
    device: &Placement,
    epoch: u64,
) -> Result<usize> {
    let loader = trainer.loader().clone();
    let mut steps = 0;
    for batch in loader.batches(epoch) {
        // Features, edges and ids, but not the labels.
        let mut batch = batch?;
        for part in [
            BatchPart::X,
            BatchPart::EdgeIndex,
            BatchPart::NId,
            BatchPart::EId,
        ] {
            batch = batch.move_part(part, device)?;
        }
        trainer.step(&batch)?;
        steps += 1;
    }
    Ok(steps)
}
