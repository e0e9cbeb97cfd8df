//! PyG's `self._alpha`, ported with a `RefCell` (workbook's `CellGatV2`),
//! shared through `Arc` with a second thread. `RefCell` is not `Sync`, so
//! `Arc<CellGatV2>` is not `Send`: the compiler refuses the `thread::spawn`.

use std::sync::Arc;
use workbook::candle_core::{DType, Device, Tensor};
use workbook::candle_nn::{VarBuilder, VarMap};
use workbook_lessons::threads::CellGatV2;
use workbook::{EdgeIndex, GatV2Config, GatV2Conv};

/// `std::thread::spawn`'s own requirement, written out here: a closure that
/// runs on another thread must be `Send`. (Spelled out so that the compiler's
/// note points into this file rather than into the standard library's
/// sources, which rustc quotes only when `rust-src` is installed: the
/// expected error is then the same on every machine.)
fn spawn<F, T>(f: F) -> std::thread::JoinHandle<T>
where
    F: FnOnce() -> T + Send + 'static,
    T: Send + 'static,
{
    std::thread::spawn(f)
}

fn main() -> workbook::Result<()> {
    let dev = Device::Cpu;
    let varmap = VarMap::new();
    let vb = VarBuilder::from_varmap(&varmap, DType::F32, &dev);
    let conv = GatV2Conv::new(GatV2Config::new(4, 3), vb)?;
    let layer = Arc::new(CellGatV2::new(conv));
    let x = Tensor::ones((3, 4), DType::F32, &dev)?;
    let edge_index = EdgeIndex::new(&[0, 1], &[1, 2], 3, &dev)?;

    let shared = Arc::clone(&layer);
    let (x2, edge_index2) = (x.clone(), edge_index.clone());
    let other = spawn(move || {
        shared.forward(&x2, &edge_index2)?;
        Ok::<_, workbook::WorkbookError>(shared.last_attention())
    });
    layer.forward(&x, &edge_index)?;
    let _mine = layer.last_attention(); // whose attention is this?
    let _theirs = other.join();
    Ok(())
}
