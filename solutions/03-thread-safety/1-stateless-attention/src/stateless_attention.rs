//! PyTorch Geometric's `GATv2Conv` before 2.5 kept the attention of the running forward pass in
//! the module: message passing wrote `self._alpha`, and `forward` read it back afterwards to
//! return it (`return_attention_weights=True`). With one module serving several threads, thread
//! A writes its attention, thread B writes its own over it, and A reads B's (PyG issue 8741).
//! Nothing fails; A silently gets the attention of another graph.
//!
//! [`SharedGatV2`] is that layer, made stateless: the attention goes from the computation
//! straight into the return value, so there is nothing for another thread to overwrite.

use workbook::candle_core::Tensor;
use workbook::{EdgeIndex, GatV2Conv, GatV2Output, Result};

/// A GATv2 layer built once and shared by every serving thread (`Arc<SharedGatV2>`, or `&` with
/// scoped threads).
#[derive(Debug)]
pub struct SharedGatV2 {
    /// Parameters only: nothing in the layer changes after it is built.
    conv: GatV2Conv,
}

impl SharedGatV2 {
    /// Wraps `conv`, which does the maths.
    pub fn new(conv: GatV2Conv) -> Self {
        Self { conv }
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
        // The attention stays in this call's local value (PyG >= 2.5 returns it the same way):
        // whatever other threads do during `pause`, they cannot reach it.
        let output = self.conv.forward(x, edge_index)?;
        pause();
        Ok(output)
    }
}
