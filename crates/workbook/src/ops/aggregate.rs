//! Sum aggregation over in-edges: `out[i] = Σ_{e = (j → i)} w[e] · h[j]`, the message passing
//! of GCN (with normalised weights), of GraphSAGE's mean (without weights, then divided by the
//! in-degree) and of a degree (with `h` all ones).
//!
//! Where the fused kernels run ([`super::kernels_support`]: f32/f64 on the CPU, f32 on CUDA) it is
//! [`super::csr_spmm`] over the edge index's cached [`super::Csr`], which never forms the
//! `[E, F]` messages. Elsewhere it is candle's `index_select` + `index_add`, the same sums in the
//! same order. Prefer this to a hand-written `index_add` on a GPU: candle's CUDA `index_add`
//! gives one thread to each output column, so summing a 1-D tensor over 10⁷ edges runs on one
//! GPU thread.
//!
//! ```
//! use workbook::candle_core::{DType, Tensor};
//! use workbook::ops::aggregate_sum;
//! use workbook::{EdgeIndex, Placement};
//! let cpu = Placement::cpu();
//! // 0 → 2, 1 → 2, 2 → 0
//! let ei = EdgeIndex::new(&[0, 1, 2], &[2, 2, 0], 3, &cpu).unwrap();
//! let h = Tensor::new(&[[1f32], [10.], [100.]], cpu.device()).unwrap();
//! let out = aggregate_sum(&h, &ei, None).unwrap();
//! assert_eq!(out.to_vec2::<f32>().unwrap(), [[100.], [0.], [11.]]);
//! let w = Tensor::new(&[2f32, 3., 1.], cpu.device()).unwrap();
//! let out = aggregate_sum(&h, &ei, Some(&w)).unwrap();
//! assert_eq!(out.to_vec2::<f32>().unwrap(), [[100.], [0.], [32.]]);
//! ```

use crate::{EdgeIndex, Result};
use candle_core::{Tensor, D};

/// `Σ_{e = (j → i)} w[e] · h[j]` for every node `i` (0 without in-edges); `h` is `[N, F]`,
/// `weight` `[E]` (all ones when `None`). Differentiable in `h` and `weight`.
pub fn aggregate_sum(
    h: &Tensor,
    edge_index: &EdgeIndex,
    weight: Option<&Tensor>,
) -> Result<Tensor> {
    if super::kernels_support(h.dtype(), h.device()) {
        let (n, f) = h.dims2()?;
        let w = match weight {
            Some(w) => w.to_dtype(h.dtype())?,
            None => Tensor::ones(edge_index.num_edges(), h.dtype(), h.device())?,
        };
        let csr = edge_index.csr()?;
        if h.device().is_cpu() {
            // [N, F] as one head: no reshape nodes (their backward passes copy the gradient)
            return Ok(super::csr_spmm(h, &w.unsqueeze(1)?, csr)?);
        }
        let out = super::csr_spmm(&h.reshape((n, 1, f))?, &w.unsqueeze(1)?, csr)?;
        return Ok(out.reshape((n, f))?);
    }
    let messages = h.index_select(edge_index.sources(), 0)?;
    let messages = match weight {
        Some(w) => messages.broadcast_mul(&w.unsqueeze(D::Minus1)?)?,
        None => messages,
    };
    let out = Tensor::zeros((edge_index.num_nodes(), h.dim(1)?), h.dtype(), h.device())?;
    Ok(out.index_add(edge_index.targets(), &messages, 0)?)
}
