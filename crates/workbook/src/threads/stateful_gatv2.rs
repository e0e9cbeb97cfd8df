//! **ANTI-PATTERN — do not copy.** A GATv2 layer that keeps its last attention inside itself,
//! reproducing PyTorch Geometric's `GATv2Conv` before 2.5 (PyG issue 8741).
//!
//! PyG's layer wrote the attention into `self._alpha` during `forward()` and read it back a few
//! lines later to return it. Two threads running inference on one module could interleave: thread
//! A writes its attention, thread B overwrites it, thread A reads B's. Nothing crashes; A simply
//! gets attention weights for another graph.
//!
//! [`StatefulGatV2`] does the same thing in Rust: [`StatefulGatV2::forward`] stores the attention
//! in a `Mutex<Option<Attention>>`, and [`StatefulGatV2::last_attention`] reads it afterwards. It
//! compiles, it is `Send + Sync`, every access is locked, and it is still wrong under concurrency:
//! each *access* is atomic, but "my forward, then my read" is two accesses, and another thread's
//! forward can land between them. Rust rules out data races, not logic races.
//! [`crate::threads::race_demo`] makes that interleaving happen on purpose, every time.
//!
//! The fix is [`GatV2Conv::forward`]: it keeps nothing and *returns* the attention with the
//! output, so there is nothing to overwrite.
//!
//! ```
//! use workbook::candle_core::{DType, Device, Tensor};
//! use workbook::candle_nn::{VarBuilder, VarMap};
//! use workbook::threads::StatefulGatV2;
//! use workbook::{EdgeIndex, GatV2Config, GatV2Conv};
//! let dev = Device::Cpu;
//! let varmap = VarMap::new();
//! let conv = GatV2Conv::new(GatV2Config::new(4, 3), VarBuilder::from_varmap(&varmap, DType::F32, &dev)).unwrap();
//! let layer = StatefulGatV2::new(conv);
//! let x = Tensor::ones((3, 4), DType::F32, &dev).unwrap();
//! let ei = EdgeIndex::new(&[0, 1], &[1, 2], 3, &dev).unwrap();
//! let out = layer.forward(&x, &ei).unwrap();        // PyG: out = conv(x, edge_index)
//! let alpha = layer.last_attention().unwrap();      // PyG: alpha = conv._alpha  (racy!)
//! assert_eq!(out.dims(), &[3, 3]);
//! assert_eq!(alpha.weights.dims(), &[2 + 3, 1]);    // fine with one thread, wrong with two
//! ```

use crate::edge_index::EdgeIndex;
use crate::error::Result;
use crate::layers::{Attention, GatV2Conv};
use candle_core::Tensor;
use std::sync::{Mutex, PoisonError};

/// **ANTI-PATTERN** (PyG issue 8741): a [`GatV2Conv`] that remembers the attention of its last
/// forward pass in shared interior state. `Send + Sync`, and racy: see the module docs.
#[derive(Debug)]
pub struct StatefulGatV2 {
    conv: GatV2Conv,
    /// PyG's `self._alpha`: written by every forward pass, from every thread.
    last_attention: Mutex<Option<Attention>>,
}

impl StatefulGatV2 {
    /// Wraps a (stateless) layer and adds the shared "last attention" slot.
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

    /// Runs the layer, stores its attention in the shared slot (overwriting whatever another
    /// call put there) and returns only the node outputs, like PyG's `forward` without
    /// `return_attention_weights`.
    pub fn forward(&self, x: &Tensor, edge_index: &EdgeIndex) -> Result<Tensor> {
        let output = self.conv.forward(x, edge_index)?;
        *self
            .last_attention
            .lock()
            .unwrap_or_else(PoisonError::into_inner) = Some(output.attention);
        Ok(output.out)
    }

    /// The attention of the most recent forward pass *by any thread*, not necessarily yours.
    /// `None` before the first call.
    pub fn last_attention(&self) -> Option<Attention> {
        self.last_attention
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }
}
