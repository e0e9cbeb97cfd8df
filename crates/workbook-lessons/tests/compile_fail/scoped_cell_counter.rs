//! A real `GatV2Conv` plus a call counter in a `Cell`, borrowed by two scoped threads. Even
//! without `Arc`, sharing `&T` between threads requires `T: Sync`, and `Cell` is not.

use std::cell::Cell;
use workbook::candle_core::{DType, Device, Tensor};
use workbook::candle_nn::{VarBuilder, VarMap};
use workbook::{EdgeIndex, GatV2Config, GatV2Conv};

struct CountingGatV2 {
    conv: GatV2Conv,
    calls: Cell<usize>,
}

impl CountingGatV2 {
    fn forward(&self, x: &Tensor, edge_index: &EdgeIndex) -> workbook::Result<Tensor> {
        self.calls.set(self.calls.get() + 1);
        Ok(self.conv.forward(x, edge_index)?.out)
    }
}

/// `Scope::spawn`'s own requirement, written out here: a closure that runs on another thread must
/// be `Send`. (Spelled out so that the compiler's note points into this file rather than into the
/// standard library's sources, which rustc quotes only when `rust-src` is installed: the expected
/// error is then the same on every machine.)
fn spawn_scoped<'scope, F, T>(
    scope: &'scope std::thread::Scope<'scope, '_>,
    f: F,
) -> std::thread::ScopedJoinHandle<'scope, T>
where
    F: FnOnce() -> T + Send + 'scope,
    T: Send + 'scope,
{
    scope.spawn(f)
}

fn main() -> workbook::Result<()> {
    let dev = Device::Cpu;
    let varmap = VarMap::new();
    let vb = VarBuilder::from_varmap(&varmap, DType::F32, &dev);
    let layer = CountingGatV2 {
        conv: GatV2Conv::new(GatV2Config::new(4, 3), vb)?,
        calls: Cell::new(0),
    };
    let x = Tensor::ones((3, 4), DType::F32, &dev)?;
    let edge_index = EdgeIndex::new(&[0, 1], &[1, 2], 3, &dev)?;

    std::thread::scope(|s| {
        spawn_scoped(s, || layer.forward(&x, &edge_index));
        spawn_scoped(s, || layer.forward(&x, &edge_index));
    });
    println!("{} calls", layer.calls.get());
    Ok(())
}
