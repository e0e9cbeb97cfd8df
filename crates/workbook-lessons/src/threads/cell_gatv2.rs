//! **Single-threaded only.** The same "last attention" layer as
//! [`StatefulGatV2`](crate::threads::StatefulGatV2), with the state in a `RefCell` instead of a
//! `Mutex` — which is how a port of PyG's `self._alpha` naturally starts in Rust.
//!
//! `RefCell` (like `Cell`) is `Send` but not `Sync`: it tracks borrows with a plain counter, so
//! two threads touching it at once would be a data race. A struct holding one is therefore not
//! `Sync`, and `Arc<CellGatV2>` is not `Send`: sharing it across threads is refused **at compile
//! time**. The compile-fail tests in `crates/workbook-lessons/tests/compile_fail/` check the exact error
//! (E0277, "`RefCell<Option<Attention>>` cannot be shared between threads safely"), and the book
//! quotes it.
//!
//! So the compiler catches the `RefCell` version, but not the [`Mutex`](std::sync::Mutex)
//! version, which is `Sync` and still mixes up attention between threads. The only design that
//! is right under concurrency is the one with no state: [`workbook::GatV2Conv::forward`] returns
//! the attention.
//!
//! ```
//! use workbook::candle_core::{DType, Device, Tensor};
//! use workbook::candle_nn::{VarBuilder, VarMap};
//! use workbook_lessons::threads::CellGatV2;
//! use workbook::{EdgeIndex, GatV2Config, GatV2Conv};
//! let dev = Device::Cpu;
//! let varmap = VarMap::new();
//! let conv = GatV2Conv::new(GatV2Config::new(4, 3), VarBuilder::from_varmap(&varmap, DType::F32, &dev)).unwrap();
//! let layer = CellGatV2::new(conv);                  // fine on one thread
//! let x = Tensor::ones((3, 4), DType::F32, &dev).unwrap();
//! let ei = EdgeIndex::new(&[0, 1], &[1, 2], 3, &dev).unwrap();
//! layer.forward(&x, &ei).unwrap();
//! assert_eq!(layer.last_attention().unwrap().weights.dims(), &[5, 1]);
//! ```
//!
//! Sharing it with another thread does not compile:
//!
//! ```compile_fail,E0277
//! # use workbook::candle_core::{DType, Device};
//! # use workbook::candle_nn::{VarBuilder, VarMap};
//! # use workbook::{GatV2Config, GatV2Conv};
//! # use workbook_lessons::threads::CellGatV2;
//! # let varmap = VarMap::new();
//! # let conv = GatV2Conv::new(GatV2Config::new(4, 3), VarBuilder::from_varmap(&varmap, DType::F32, &Device::Cpu)).unwrap();
//! let layer = std::sync::Arc::new(CellGatV2::new(conv));
//! let shared = layer.clone();
//! std::thread::spawn(move || shared.last_attention()); // error[E0277]: `RefCell<..>` cannot be shared between threads safely
//! ```

use candle_core::Tensor;
use std::cell::RefCell;
use workbook::edge_index::EdgeIndex;
use workbook::error::Result;
use workbook::layers::{Attention, GatV2Conv};

/// A [`GatV2Conv`] that remembers its last attention in a `RefCell`: `Send`, not `Sync`, so the
/// compiler refuses to share it between threads. Single-threaded use only.
#[derive(Debug)]
pub struct CellGatV2 {
    conv: GatV2Conv,
    last_attention: RefCell<Option<Attention>>,
}

impl CellGatV2 {
    /// Wraps a layer and adds the (thread-local) "last attention" slot.
    pub fn new(conv: GatV2Conv) -> Self {
        Self {
            conv,
            last_attention: RefCell::new(None),
        }
    }

    /// Runs the layer, remembers its attention and returns the node outputs.
    pub fn forward(&self, x: &Tensor, edge_index: &EdgeIndex) -> Result<Tensor> {
        let output = self.conv.forward(x, edge_index)?;
        self.last_attention.replace(Some(output.attention));
        Ok(output.out)
    }

    /// The attention of the last forward pass; `None` before the first call.
    pub fn last_attention(&self) -> Option<Attention> {
        self.last_attention.borrow().clone()
    }
}
