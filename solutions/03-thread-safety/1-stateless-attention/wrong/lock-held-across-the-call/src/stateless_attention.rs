//! PyTorch Geometric's `GATv2Conv` before 2.5 kept the attention of the running forward pass in
//! the module: message passing wrote `self._alpha`, and `forward` read it back afterwards to
//! return it (`return_attention_weights=True`). With one module serving several threads, thread
//! A writes its attention, thread B writes its own over it, and A reads B's (PyG issue 8741).
//! Nothing fails; A silently gets the attention of another graph.
//!
//! [`SharedGatV2`] is that layer, ported with a `Mutex`: it compiles, it is `Send + Sync`, every
//! access is locked, and it still hands out other threads' attention. Make it stateless.

use std::sync::{Mutex, MutexGuard, PoisonError};
use workbook::candle_core::Tensor;
use workbook::{Attention, EdgeIndex, GatV2Conv, GatV2Output, Result, WorkbookError};

/// A GATv2 layer built once and shared by every serving thread (`Arc<SharedGatV2>`, or `&` with
/// scoped threads).
#[derive(Debug)]
pub struct SharedGatV2 {
    conv: GatV2Conv,
    /// PyG's `self._alpha`: written by every forward pass, from every thread.
    last_attention: Mutex<Option<Attention>>,
}

impl SharedGatV2 {
    /// Wraps `conv`, which does the maths.
    pub fn new(conv: GatV2Conv) -> Self {
        Self {
            conv,
            last_attention: Mutex::new(None),
        }
    }

    /// The wrapped layer.
    pub fn conv(&self) -> &GatV2Conv {
        &self.conv
    }

    /// The node outputs and the attention of *this* call (PyG:
    /// `conv(x, edge_index, return_attention_weights=True)`).
    pub fn forward(&self, x: &Tensor, edge_index: &EdgeIndex) -> Result<GatV2Output> {
        self.forward_paused(x, edge_index, || {})
    }

    /// [`forward`](Self::forward), calling `pause` once the attention is computed and before
    /// returning: the window in which PyG's attention sat in `self._alpha`. The tests pause
    /// threads there to force the interleaving that loses; in production `pause` does nothing.
    pub fn forward_paused(
        &self,
        x: &Tensor,
        edge_index: &EdgeIndex,
        pause: impl FnOnce(),
    ) -> Result<GatV2Output> {
        // One lock held from computing to returning: correct, and one forward pass at a time.
        let mut slot = self.last_attention();
        let output = self.conv.forward(x, edge_index)?;
        *slot = Some(output.attention);
        pause();
        let attention = slot.clone().ok_or_else(|| {
            WorkbookError::Thread("no attention was stored by the forward pass".into())
        })?;
        drop(slot);
        Ok(GatV2Output {
            out: output.out,
            attention,
        })
    }

    fn last_attention(&self) -> MutexGuard<'_, Option<Attention>> {
        self.last_attention
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
    }
}
