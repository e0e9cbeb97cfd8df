// A field the derive cannot classify: not a tensor, and not opted out with #[module(skip)].
use workbook::candle_core::Tensor;
use workbook::Placement;

#[derive(Clone, Debug, workbook::Module)]
struct Scale {
    weight: Tensor,
    #[module(placement)]
    at: Placement,
    width: usize, // forgot #[module(skip)]
}

fn main() {}
