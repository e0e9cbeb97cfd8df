//! GCN's aggregation on a graph without edge weights, `out[i] = Σ_{j → i} x[j] / sqrt(deg(j) ·
//! deg(i))`, in one gather that never reads a per-edge weight.
//!
//! With edge weights, GCN normalises them into an `[E]` tensor and [`super::csr_spmm`] reads
//! one weight per edge by its edge id. Without them every weight is `dinv[j] · dinv[i]`
//! (`dinv = deg^-1/2`), so this op keeps the `[N]` vector `dinv` and forms each weight from the
//! edge's two ends. That saves the pass that writes the `[E]` weights on every forward pass, and
//! the kernel's read of them: on a graph whose edges are stored in another order than by target
//! (a generator's pairs sorted by source, say) each such read is a cache miss, a second one per
//! edge beside the neighbour's row, while `dinv` (4 bytes a node) stays in the cache.
//!
//! The sums are [`super::csr_spmm`]'s with [`super::gcn_norm::unweighted_gcn_norm`]'s weights
//! bit for bit, forward and gradient: the same products, added in the same order.
//! [`crate::layers::gcn_conv::GcnConv`] uses it on the CPU whenever no edge weights are given.
//!
//! ```
//! use workbook::candle_core::{DType, Device, Tensor};
//! use workbook::ops::{aggregate_sum, gcn_norm::unweighted_gcn_norm, gcn_spmm};
//! use workbook::EdgeIndex;
//! // 0 -> 1, 2 -> 1, 1 -> 0, with a self-loop on every node
//! let ei = EdgeIndex::new(&[0, 2, 1, 0, 1, 2], &[1, 1, 0, 0, 1, 2], 3, &Device::Cpu).unwrap();
//! let x = Tensor::new(&[[1f32, 2.], [10., 20.], [100., 200.]], &Device::Cpu).unwrap();
//! let fused = gcn_spmm(&x, &ei).unwrap();
//! let w = unweighted_gcn_norm(&ei, DType::F32).unwrap();
//! let composed = aggregate_sum(&x, &ei, Some(&w)).unwrap();
//! assert_eq!(fused.to_vec2::<f32>().unwrap(), composed.to_vec2::<f32>().unwrap());
//! // node 1 has 3 in-edges (from 0, 2 and itself), node 0 has 2
//! let expected = 1.0 / (2f32.sqrt() * 3f32.sqrt()) + 10.0 / 3.0 + 100.0 / 3f32.sqrt();
//! assert!((fused.to_vec2::<f32>().unwrap()[1][0] - expected).abs() < 1e-4);
//! ```

use super::csr::Csr;
use super::gcn_norm::inv_sqrt_degrees;
use super::kernel_support::{host_slice, GatherSchedule};
use super::spmm::{schedule_for, spmm, spmm_f32, Symmetric};
use crate::edge_index::EdgeIndex;
use crate::error::{Result, WorkbookError};
use candle_core::backend::BackendStorage;
use candle_core::{CpuStorage, CustomOp1, DType, Layout, Shape, Tensor};
use std::sync::Arc;

/// `Σ_{j → i} x[j] / sqrt(deg(j) · deg(i))` for every node `i` of `edge_index` (see the module
/// docs); `x` is `[N, F]` in `f32` or `f64` on the CPU, the degrees count in-edges (pass the graph
/// with its self-loops added, as GCN does), and a node without in-edges gets zeros.
/// Differentiable in `x`.
pub fn gcn_spmm(x: &Tensor, edge_index: &EdgeIndex) -> Result<Tensor> {
    if !x.device().is_cpu() || !edge_index.device().is_cpu() {
        return Err(WorkbookError::InvalidConfig(format!(
            "gcn_spmm runs on the CPU; x is on {:?} and the edge index on {:?} (elsewhere use aggregate_sum with layers::gcn_conv::gcn_norm's weights)",
            x.device(),
            edge_index.device()
        )));
    }
    let n = edge_index.num_nodes();
    match *x.dims() {
        [rows, _] if rows == n => {}
        _ => {
            return Err(WorkbookError::InvalidGraph(format!(
                "gcn_spmm: x must be [{n}, F] for a graph of {n} nodes, got {:?}",
                x.dims()
            )))
        }
    }
    let csr = edge_index.csr()?;
    let ptr = csr.by_dst().ptr();
    let dinv = match x.dtype() {
        DType::F32 => Dinv::F32(inv_sqrt_degrees(ptr, f32::MIN_POSITIVE)),
        DType::F64 => Dinv::F64(inv_sqrt_degrees(ptr, f32::MIN_POSITIVE as f64)),
        other => {
            return Err(WorkbookError::InvalidConfig(format!(
                "gcn_spmm computes in f32 or f64, not {other:?}; convert x first"
            )))
        }
    };
    let op = GcnSpmm {
        csr: csr.clone(),
        dinv: Arc::new(dinv),
        transpose: false,
        schedule: schedule_for(x, csr),
    };
    Ok(x.contiguous()?.apply_op1(op)?)
}

/// `deg^-1/2` in the dtype of the features it scales.
enum Dinv {
    F32(Vec<f32>),
    F64(Vec<f64>),
}

/// The op; `transpose` sums over the edges out of each node instead (the gradient, which has
/// the same weights since each is symmetric in its two ends).
struct GcnSpmm {
    csr: Arc<Csr>,
    dinv: Arc<Dinv>,
    transpose: bool,
    schedule: GatherSchedule,
}

impl CustomOp1 for GcnSpmm {
    fn name(&self) -> &'static str {
        "gcn-spmm"
    }

    fn cpu_fwd(&self, s: &CpuStorage, l: &Layout) -> candle_core::Result<(CpuStorage, Shape)> {
        let (_, f) = l.shape().dims2()?;
        let sorted = if self.transpose {
            self.csr.by_src()
        } else {
            self.csr.by_dst()
        };
        let out = match (s, &*self.dinv) {
            (CpuStorage::F32(_), Dinv::F32(dinv)) => CpuStorage::F32(spmm_f32(
                host_slice(s, l, "gcn_spmm")?,
                Symmetric { dinv },
                sorted,
                1,
                f,
                self.schedule,
            )),
            (CpuStorage::F64(_), Dinv::F64(dinv)) => CpuStorage::F64(spmm(
                host_slice(s, l, "gcn_spmm")?,
                Symmetric { dinv },
                sorted,
                1,
                f,
                self.schedule,
            )),
            _ => candle_core::bail!(
                "gcn_spmm: the features are {:?} but deg^-1/2 was computed in another dtype",
                s.dtype()
            ),
        };
        Ok((out, l.shape().clone()))
    }

    fn bwd(
        &self,
        _x: &Tensor,
        _res: &Tensor,
        grad: &Tensor,
    ) -> candle_core::Result<Option<Tensor>> {
        let op = GcnSpmm {
            csr: self.csr.clone(),
            dinv: self.dinv.clone(),
            transpose: !self.transpose,
            schedule: self.schedule,
        };
        Ok(Some(grad.contiguous()?.apply_op1_no_bwd(&op)?))
    }
}
