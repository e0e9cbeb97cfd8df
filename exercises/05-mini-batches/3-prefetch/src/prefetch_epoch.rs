//! A bounded prefetcher, written by hand, and one training epoch that uses it.
//!
//! Sampling and gathering a batch is host work; while the device computes step `b`, the host
//! can already prepare batch `b + 1`. PyG does this with `DataLoader(num_workers=...)` worker
//! processes. A [`Prefetcher`] does it with one background thread that calls `prepare(0)`,
//! `prepare(1)`, ... in order, ahead of the loop, and hands the items over in that order. Two
//! things make it right:
//!
//! * **overlap**: the thread prepares the next items while the loop is busy with this one (the
//!   loop never calls `prepare` itself);
//! * **a bound**: at most `depth` finished items wait to be taken, so memory stays bounded by
//!   `depth` batches, not the epoch (an unbounded queue prepares the whole epoch ahead).
//!
//! And it ends cleanly: when the loop stops early (drops the prefetcher), the thread stops
//! preparing; when `prepare` panics, the loop gets every item prepared before, then the panic,
//! never a silently shorter epoch.
//!
//! The copy to the device stays in the training loop: each batch crosses just before its step,
//! so the device holds one batch at a time.

// The imports of a finished file may differ: the design is yours.
#![allow(unused_imports)]

use std::num::NonZeroUsize;
use workbook::train::minibatch::MiniBatchTrainer;
use workbook::{Placement, Result};

/// The items `prepare(0)`, ..., `prepare(n - 1)`, made on a background thread ahead of the
/// consumer, at most `depth` finished items waiting; an iterator over them, in order.
pub struct Prefetcher<T> {
    // TODO: what the prefetcher needs to hand the items over, and to stop or join its thread.
    _items: std::marker::PhantomData<T>,
}

impl<T: Send + 'static> Prefetcher<T> {
    /// Starts the background thread, which calls `prepare(0)`, `prepare(1)`, ... up to
    /// `prepare(n - 1)`, in order, never more than `depth` finished items ahead of the consumer.
    pub fn new<F>(n: usize, depth: NonZeroUsize, prepare: F) -> Self
    where
        F: FnMut(usize) -> T + Send + 'static,
    {
        // TODO: start the thread that prepares the items in order, at most `depth` finished ones waiting, and stops when the prefetcher is dropped.
        let _ = &prepare;
        todo!("Prefetcher::new: {n} item(s), at most {depth} waiting")
    }
}

impl<T> Iterator for Prefetcher<T> {
    type Item = T;

    /// The next item, waiting for the thread if it is not ready; `None` after the last. When
    /// `prepare` panicked, the items prepared before it come first, then this panics with the
    /// same payload.
    fn next(&mut self) -> Option<T> {
        // TODO: hand over the next item; after the last, None; if the thread panicked, its panic (std::panic::resume_unwind).
        todo!("Prefetcher::next")
    }
}

/// Trains `trainer` for one epoch over the batches of `epoch` of its loader, prepared ahead by a
/// [`Prefetcher`] (at most `depth` waiting), each moved to `device` in the loop just before its
/// step. Returns the number of steps.
pub fn train_epoch_prefetched(
    trainer: &mut MiniBatchTrainer,
    device: &Placement,
    epoch: u64,
    depth: NonZeroUsize,
) -> Result<usize> {
    // TODO: the batches of `epoch` (`loader.batch(epoch, b)` for b in 0..loader.len(), with `loader` a clone of `trainer.loader()`) through your Prefetcher, each moved to `device` and stepped in the loop.
    todo!(
        "train_epoch_prefetched: epoch {epoch} of {} batch(es) on {device}, {depth} ahead",
        trainer.loader().len()
    )
}
