//! **ANTI-PATTERN — do not copy.** A GATv2 layer that passes its attention from one step of the
//! forward pass to the next through a field of the module, reproducing PyTorch Geometric's
//! `GATv2Conv` before 2.5 (checked against PyG 2.4.0's `torch_geometric/nn/conv/gatv2_conv.py`;
//! reported as PyG issue 8741, fixed by PR 8753, released in 2.5.0).
//!
//! In PyG 2.4, `forward()` calls `self.propagate(...)`, whose `message()` computes the attention
//! and **writes** it to `self._alpha`; back in `forward()`, the next lines **read** it
//! (`alpha = self._alpha`), **assert** it is not `None`, and **clear** it (`self._alpha = None`),
//! whether or not the caller asked for the attention. Two threads sharing one module can
//! interleave between the write and the read, and then both symptoms appear:
//!
//! - thread A reads the attention thread B wrote: silently wrong when A asked for it
//!   (`return_attention_weights=True`); A's node outputs are still right, because `message()`
//!   used its own local `alpha`;
//! - A also cleared the field, so B finds `None` and fails the assertion: PyG raised
//!   `AssertionError`, even for a caller who never asked for attention.
//!
//! [`StatefulGatV2`] does the same in Rust: [`StatefulGatV2::propagate`] is PyG's `message()`
//! writing `self._alpha` into a `Mutex<Option<Attention>>`, and [`StatefulGatV2::take_alpha`] is
//! the read-assert-clear, returning [`WorkbookError::SharedStateRace`] where PyG raised
//! `AssertionError` (an error value, not a panic). [`StatefulGatV2::forward`] runs both, like
//! PyG's `forward`. It compiles, it is `Send + Sync`, every access is locked, and it is still
//! wrong under concurrency: each *access* is atomic, but "my write, then my read" is two
//! accesses, and another thread's can land between them. Rust rules out data races, not logic
//! races. [`crate::threads::race_demo`] makes both interleavings happen on purpose, every time.
//!
//! A lock held across the whole write-then-read pair would make it correct (see
//! [`StatefulGatV2::forward_serialised`]), at the price of serialising inference: one forward
//! pass at a time. The fix is [`GatV2Conv::forward`]: it keeps nothing and *returns* the
//! attention with the output, so there is nothing to overwrite, nothing to clear and nothing to
//! wait for.
//!
//! ```
//! use workbook::candle_core::{DType, Device, Tensor};
//! use workbook::candle_nn::{VarBuilder, VarMap};
//! use workbook_lessons::threads::StatefulGatV2;
//! use workbook::{EdgeIndex, GatV2Config, GatV2Conv, WorkbookError};
//! let dev = Device::Cpu;
//! let varmap = VarMap::new();
//! let conv = GatV2Conv::new(GatV2Config::new(4, 3), VarBuilder::from_varmap(&varmap, DType::F32, &dev)).unwrap();
//! let layer = StatefulGatV2::new(conv);
//! let x = Tensor::ones((3, 4), DType::F32, &dev).unwrap();
//! let ei = EdgeIndex::new(&[0, 1], &[1, 2], 3, &dev).unwrap();
//! let out = layer.forward(&x, &ei).unwrap();        // PyG: conv(x, edge_index, return_attention_weights=True)
//! assert_eq!(out.out.dims(), &[3, 3]);
//! assert_eq!(out.attention.weights.dims(), &[2 + 3, 1]); // fine with one thread
//! // The two halves, as another thread can split them: the slot is empty after a read.
//! layer.propagate(&x, &ei).unwrap();                // message(): self._alpha = alpha
//! layer.take_alpha().unwrap();                      // forward(): read, assert, clear
//! let err = layer.take_alpha().unwrap_err();        // a second reader finds None
//! assert!(matches!(err, WorkbookError::SharedStateRace(_)));
//! ```

use candle_core::Tensor;
use std::sync::{Mutex, PoisonError};
use workbook::edge_index::EdgeIndex;
use workbook::error::{Result, WorkbookError};
use workbook::layers::{Attention, GatV2Conv, GatV2Output};

/// **ANTI-PATTERN** (PyG issue 8741): a [`GatV2Conv`] that hands its attention from
/// `message()` to `forward()` through shared interior state. `Send + Sync`, and racy: see the
/// module docs.
#[derive(Debug)]
pub struct StatefulGatV2 {
    conv: GatV2Conv,
    /// PyG's `self._alpha`: written by every `message()`, read and cleared by every `forward()`,
    /// from every thread.
    alpha: Mutex<Option<Attention>>,
    /// Held across a whole forward pass by [`StatefulGatV2::forward_serialised`] only.
    whole_pass: Mutex<()>,
}

impl StatefulGatV2 {
    /// Wraps a (stateless) layer and adds the shared `_alpha` slot, empty.
    pub fn new(conv: GatV2Conv) -> Self {
        Self {
            conv,
            alpha: Mutex::new(None),
            whole_pass: Mutex::new(()),
        }
    }

    /// The wrapped layer.
    pub fn conv(&self) -> &GatV2Conv {
        &self.conv
    }

    /// The first half of PyG's `forward`: `self.propagate(...)`, whose `message()` computes the
    /// attention and stores it in `self._alpha`, overwriting whatever another thread put there.
    /// Returns the node outputs, which are right whatever happens next (they were computed
    /// with this call's own attention).
    pub fn propagate(&self, x: &Tensor, edge_index: &EdgeIndex) -> Result<Tensor> {
        let output = self.conv.forward(x, edge_index)?;
        *self.slot() = Some(output.attention);
        Ok(output.out)
    }

    /// The second half of PyG's `forward`: `alpha = self._alpha; assert alpha is not None;
    /// self._alpha = None`. Returns whatever attention is in the slot, *whoever wrote it*, and
    /// empties the slot; an empty slot is [`WorkbookError::SharedStateRace`], where PyG raised
    /// `AssertionError`.
    pub fn take_alpha(&self) -> Result<Attention> {
        self.slot().take().ok_or_else(|| {
            WorkbookError::SharedStateRace(
                "assert alpha is not None failed: the layer's shared attention slot (PyG's \
                 self._alpha) was empty, because another thread's forward pass read and cleared \
                 it between this call's write and read; PyG before 2.5 raised AssertionError \
                 here. Use GatV2Conv, which returns the attention instead of storing it"
                    .into(),
            )
        })
    }

    /// PyG's whole `forward(x, edge_index, return_attention_weights=True)`: [`propagate`], then
    /// [`take_alpha`]. Right on one thread; on several, it can return another thread's
    /// attention or fail (see [`crate::threads::race_demo`]).
    ///
    /// [`propagate`]: StatefulGatV2::propagate
    /// [`take_alpha`]: StatefulGatV2::take_alpha
    pub fn forward(&self, x: &Tensor, edge_index: &EdgeIndex) -> Result<GatV2Output> {
        let out = self.propagate(x, edge_index)?;
        let attention = self.take_alpha()?;
        Ok(GatV2Output { out, attention })
    }

    /// [`StatefulGatV2::forward`] with one lock held across the write *and* the read: correct
    /// under any interleaving, because no other pass can run in between, and for the same reason
    /// only one forward pass runs at a time, however many threads share the layer. Removing the
    /// shared state ([`GatV2Conv::forward`]) is correct without serialising anything.
    pub fn forward_serialised(&self, x: &Tensor, edge_index: &EdgeIndex) -> Result<GatV2Output> {
        let _whole_pass = self
            .whole_pass
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        self.forward(x, edge_index)
    }

    fn slot(&self) -> std::sync::MutexGuard<'_, Option<Attention>> {
        // A thread that panicked while holding the lock left a valid Option behind: keep going.
        self.alpha.lock().unwrap_or_else(PoisonError::into_inner)
    }
}
