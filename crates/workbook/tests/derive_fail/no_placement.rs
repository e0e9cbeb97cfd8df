// A layer must say where its tensors live.
use workbook::candle_core::Tensor;

#[derive(Clone, Debug, workbook::Module)]
struct Scale {
    weight: Tensor,
}

fn main() {}
