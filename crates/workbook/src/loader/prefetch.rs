//! Prefetch: the next batches are prepared on a background thread while the current one
//! computes.
//!
//! PyG gets this from `DataLoader(num_workers=..., pin_memory=True)`: worker processes sample
//! ahead, and pinned host memory lets `batch.to(device, non_blocking=True)` copy on a separate
//! CUDA stream while kernels run. Here one thread samples and gathers batch `b + 1`, `b + 2`, ...
//! while the training loop computes batch `b`; a bounded channel
//! ([`std::sync::mpsc::sync_channel`]) holds at most `depth` finished batches, so memory stays
//! bounded by the batch, not the epoch.
//!
//! **What candle 0.11 can and cannot do on CUDA.** A candle `CudaDevice` owns one stream
//! (`CudaDevice::cuda_stream`), and `Tensor::to_device` copies from ordinary (pageable) host
//! memory on that stream; candle has no pinned host tensors and no per-copy stream argument
//! (`CudaDevice::new_with_stream` opens a *different* device whose tensors candle will not mix
//! with the first). So the copy itself cannot overlap the kernels as PyG's `non_blocking=True`
//! does; what overlaps here is the host work (sampling, gathering rows), which the
//! bench (`workbook bench`) and the chapter measure. The copy stays in the training loop
//! (`batch.to_device`), so the ledger records it in the step that uses it.
//!
//! ```
//! use workbook::{datasets, loader::{NeighborLoader, LoaderConfig}, placement::Placement};
//! let g = datasets::karate(&Placement::cpu()).unwrap();
//! let loader = NeighborLoader::new(&g, LoaderConfig::new(&[5], 4)).unwrap();
//! let ahead: Vec<_> = loader.prefetch(0, 2).collect::<Result<_, _>>().unwrap();
//! let inline: Vec<_> = loader.batches(0).collect::<Result<_, _>>().unwrap();
//! assert_eq!(ahead.len(), inline.len());
//! assert_eq!(ahead[3].n_id_host(), inline[3].n_id_host()); // the same batches, made elsewhere
//! assert!(ahead[0].prepared().in_background);
//! ```

use super::batch::Batch;
use super::neighbor_loader::NeighborLoader;
use crate::error::{Result, WorkbookError};
use std::sync::mpsc::{sync_channel, Receiver};
use std::thread::JoinHandle;

/// Batches of one epoch, prepared ahead on a background thread (see the module docs).
pub struct Prefetch {
    rx: Option<Receiver<Result<Batch>>>,
    worker: Option<JoinHandle<()>>,
}

impl NeighborLoader {
    /// The batches of `epoch`, prepared on a background thread at most `depth` (>= 1) ahead.
    pub fn prefetch(&self, epoch: u64, depth: usize) -> Prefetch {
        let (tx, rx) = sync_channel(depth.max(1));
        let shared = self.shared();
        let worker = std::thread::spawn(move || {
            for (b, seeds) in shared.epoch_seeds_pub(epoch).into_iter().enumerate() {
                let batch = shared.batch(epoch, b, &seeds, true);
                let failed = batch.is_err();
                // The loop stopped listening (it broke early or failed): stop sampling.
                if tx.send(batch).is_err() || failed {
                    return;
                }
            }
        });
        Prefetch {
            rx: Some(rx),
            worker: Some(worker),
        }
    }
}

impl Iterator for Prefetch {
    type Item = Result<Batch>;

    fn next(&mut self) -> Option<Self::Item> {
        match self.rx.as_ref()?.recv() {
            Ok(batch) => Some(batch),
            Err(_) => {
                // The sender is gone: the epoch is done, or the worker panicked.
                self.rx = None;
                let worker = self.worker.take()?;
                match worker.join() {
                    Ok(()) => None,
                    Err(_) => Some(Err(WorkbookError::Thread(
                        "the prefetch thread panicked while sampling".into(),
                    ))),
                }
            }
        }
    }
}

impl Drop for Prefetch {
    fn drop(&mut self) {
        // Dropping the receiver first makes the worker's next send fail, so it stops.
        self.rx = None;
        if let Some(w) = self.worker.take() {
            let _ = w.join();
        }
    }
}
