//! The per-destination softmax of attention scores, computed as PyG's `utils.softmax` does.
//!
//! For every edge `e = (j → i)` and head `h`:
//! `alpha[e, h] = exp(s[e, h] - m[i, h]) / (sum_{e' → i} exp(s[e', h] - m[i, h]) + 1e-16)`,
//! where `m[i, h]` is node `i`'s own maximum score ([`crate::ops::segment_max()`]). The sums are
//! candle `index_add`s, so the gradient is ordinary autograd.
//!
//! ```
//! use workbook::candle_core::{Device, Tensor};
//! use workbook::ops::segment_softmax;
//! // two edges into node 0 with scores far apart: a global shift would underflow
//! let s = Tensor::new(&[[-1000f32], [-1001.]], &Device::Cpu).unwrap();
//! let target = Tensor::new(&[0u32, 0], &Device::Cpu).unwrap();
//! let a = segment_softmax(&s, &target, 1).unwrap().to_vec2::<f32>().unwrap();
//! assert!((a[0][0] - 0.7311).abs() < 1e-4 && (a[1][0] - 0.2689).abs() < 1e-4);
//! ```

use super::segment_max::{segment_max, CUDA_DTYPES};
use candle_core::{DType, Tensor};

/// Softmax of `scores` (`[E, H]`) over the edges that share a target in `index` (`u32 [E]`).
pub fn segment_softmax(
    scores: &Tensor,
    index: &Tensor,
    num_nodes: usize,
) -> candle_core::Result<Tensor> {
    let max = if scores.device().is_cuda() && !CUDA_DTYPES.contains(&scores.dtype()) {
        let max32 = segment_max(&scores.to_dtype(DType::F32)?, index, num_nodes)?;
        max32.to_dtype(scores.dtype())?
    } else {
        segment_max(scores, index, num_nodes)?
    };
    let shifted = scores.broadcast_sub(&max.index_select(index, 0)?)?.exp()?;
    let width = shifted.dim(1)?;
    let sums = Tensor::zeros((num_nodes, width), shifted.dtype(), shifted.device())?
        .index_add(index, &shifted, 0)?;
    // PyG adds 1e-16 so that a (theoretical) empty sum never divides by zero.
    let denom = (sums.index_select(index, 0)? + 1e-16)?;
    shifted.div(&denom)
}
