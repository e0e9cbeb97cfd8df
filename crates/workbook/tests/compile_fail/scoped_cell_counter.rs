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
        s.spawn(|| layer.forward(&x, &edge_index));
        s.spawn(|| layer.forward(&x, &edge_index));
    });
    println!("{} calls", layer.calls.get());
    Ok(())
}
