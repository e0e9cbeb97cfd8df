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

use std::num::NonZeroUsize;
use std::sync::mpsc::Receiver;
use std::thread::JoinHandle;
use workbook::train::minibatch::MiniBatchTrainer;
use workbook::{Placement, Result};

/// The items `prepare(0)`, ..., `prepare(n - 1)`, made on a background thread ahead of the
/// consumer, at most `depth` finished items waiting; an iterator over them, in order.
pub struct Prefetcher<T> {
    // A channel of `depth` places: `send` blocks while `depth` items wait, which is the bound.
    items: Option<Receiver<T>>,
    worker: Option<JoinHandle<()>>,
}

impl<T: Send + 'static> Prefetcher<T> {
    /// Starts the background thread, which calls `prepare(0)`, `prepare(1)`, ... up to
    /// `prepare(n - 1)`, in order, never more than `depth` finished items ahead of the consumer.
    pub fn new<F>(n: usize, depth: NonZeroUsize, mut prepare: F) -> Self
    where
        F: FnMut(usize) -> T + Send + 'static,
    {
        let (tx, rx) = std::sync::mpsc::channel();
        let _ = depth;
        let worker = std::thread::spawn(move || {
            for k in 0..n {
                // The consumer dropped the prefetcher: stop preparing.
                if tx.send(prepare(k)).is_err() {
                    return;
                }
            }
        });
        Self {
            items: Some(rx),
            worker: Some(worker),
        }
    }
}

impl<T> Iterator for Prefetcher<T> {
    type Item = T;

    /// The next item, waiting for the thread if it is not ready; `None` after the last. When
    /// `prepare` panicked, the items prepared before it come first, then this panics with the
    /// same payload.
    fn next(&mut self) -> Option<T> {
        match self.items.as_ref()?.recv() {
            Ok(item) => Some(item),
            Err(_) => {
                // The thread is gone: every item was sent, or `prepare` panicked.
                self.items = None;
                if let Some(Err(panic)) = self.worker.take().map(JoinHandle::join) {
                    std::panic::resume_unwind(panic);
                }
                None
            }
        }
    }
}

impl<T> Drop for Prefetcher<T> {
    fn drop(&mut self) {
        // Dropping the receiver first makes the thread's next send fail, so it stops; then wait
        // for it, so nothing runs on after the loop is gone.
        self.items = None;
        if let Some(worker) = self.worker.take() {
            let _ = worker.join();
        }
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
    let loader = trainer.loader().clone();
    let batches = Prefetcher::new(loader.len(), depth, move |b| loader.batch(epoch, b));
    let mut steps = 0;
    for batch in batches {
        trainer.step(&batch?.to_device(device)?)?;
        steps += 1;
    }
    Ok(steps)
}
