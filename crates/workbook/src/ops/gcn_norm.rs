//! GCN's normalisation of a graph without edge weights, `1 / sqrt(deg(j) · deg(i))` for every
//! edge `j → i`, in one parallel pass over the edges.
//!
//! PyG's `gcn_norm` (and [`crate::layers::gcn_conv::gcn_norm`], which follows it) builds it from tensor
//! ops: a tensor of ones per edge, the in-degrees as a scatter-add of those ones, `deg^-1/2`, then
//! two gathers of it by source and by target and two products, each a new `[E]` tensor. A
//! `GCNConv` recomputes it on every forward pass unless `cached=true` (PyG's default too), and on
//! a graph of 10⁷ edges those passes cost more than the aggregation itself. Here the degrees are
//! the lengths of the destination-sorted rows the [`Csr`](super::Csr) already holds, and each
//! edge's weight is one product.
//!
//! The values are those of the composed ops bit for bit: the same `deg^-1/2` (`max(deg, the
//! smallest normal float)^-0.5`, 0 for a node without in-edges), and `dinv[j] · 1 · dinv[i]`,
//! whose multiplication by the unit weight changes nothing. (The degree here is the exact count,
//! where the composed sum of ones would stop growing past 2²⁴ in-edges of one node in `f32`.)
//!
//! ```
//! use workbook::candle_core::{DType, Device};
//! use workbook::ops::gcn_norm::unweighted_gcn_norm;
//! use workbook::EdgeIndex;
//! // 0 -> 1, 2 -> 1, 1 -> 0: node 1 has two in-edges, node 0 one, node 2 none
//! let ei = EdgeIndex::new(&[0, 2, 1], &[1, 1, 0], 3, &Device::Cpu).unwrap();
//! let w = unweighted_gcn_norm(&ei, DType::F32).unwrap().to_vec1::<f32>().unwrap();
//! assert_eq!(w[2], 1.0 / 2f32.sqrt()); // 1 -> 0: deg(1) = 2, deg(0) = 1
//! assert_eq!(w[1], 0.0); // from node 2, which has no in-edges: 1/sqrt(0) is taken as 0
//! ```

use super::kernel_support::Real;
use crate::edge_index::EdgeIndex;
use crate::error::{Result, WorkbookError};
use candle_core::{DType, Tensor};
use rayon::prelude::*;

/// The GCN weight of every edge of `edge_index` (in its edge order) for a graph without edge
/// weights, as `dtype` (`f32` or `f64`) on the CPU. Self-loops are whatever `edge_index` holds:
/// pass the graph with its loops added, as `gcn_norm` does.
pub fn unweighted_gcn_norm(edge_index: &EdgeIndex, dtype: DType) -> Result<Tensor> {
    if !edge_index.device().is_cpu() {
        return Err(WorkbookError::InvalidConfig(format!(
            "unweighted_gcn_norm runs on the CPU; this edge index is on {:?} (use layers::gcn_conv::gcn_norm there)",
            edge_index.device()
        )));
    }
    let ptr = edge_index.csr()?.by_dst().ptr();
    let (src, dst) = (edge_index.sources_host(), edge_index.targets_host());
    let e = src.len();
    let device = edge_index.device();
    Ok(match dtype {
        DType::F32 => Tensor::from_vec(norm(ptr, src, dst, f32::MIN_POSITIVE), e, device)?,
        DType::F64 => Tensor::from_vec(norm(ptr, src, dst, f32::MIN_POSITIVE as f64), e, device)?,
        other => {
            return Err(WorkbookError::InvalidConfig(format!(
                "unweighted_gcn_norm computes f32 or f64 weights, not {other:?}"
            )))
        }
    })
}

/// `dinv[j] · dinv[i]` per edge, with `dinv` from the row lengths of `ptr`; `floor` is the
/// smallest value the degree is raised to before `^-0.5`, as the composed op's `maximum`.
fn norm<T: Real>(ptr: &[u32], src: &[u32], dst: &[u32], floor: T) -> Vec<T> {
    let dinv = inv_sqrt_degrees(ptr, floor);
    src.par_iter()
        .zip(dst)
        .with_min_len(4096)
        .map(|(&j, &i)| dinv[j as usize] * T::one() * dinv[i as usize])
        .collect()
}

/// `deg^-1/2` of every node, 0 for a node without in-edges, from the row lengths of the
/// destination-sorted `ptr`: the values of PyG's composed `deg.pow(-0.5)` with `inf` masked.
/// Degrees below [`DEGREE_TABLE`] (nearly every node of a real graph) take their value from a
/// table of the same `powf` calls made once, instead of one `powf` per node: on 10⁶ nodes the
/// calls were a twentieth of GCN's forward pass.
pub(super) fn inv_sqrt_degrees<T: Real>(ptr: &[u32], floor: T) -> Vec<T> {
    let minus_half = T::from_f64(-0.5);
    let value = |deg: u32| {
        let deg = T::from_f64(f64::from(deg));
        // candle's maximum keeps the first value unless it is smaller
        let clamped = if deg < floor { floor } else { deg };
        let positive = if deg > T::zero() { T::one() } else { T::zero() };
        clamped.powf(minus_half) * positive
    };
    let table: Vec<T> = (0..DEGREE_TABLE as u32).map(value).collect();
    ptr.par_windows(2)
        .map(|w| {
            let deg = w[1] - w[0];
            table
                .get(deg as usize)
                .copied()
                .unwrap_or_else(|| value(deg))
        })
        .collect()
}

/// Degrees whose `deg^-1/2` [`inv_sqrt_degrees`] looks up.
const DEGREE_TABLE: usize = 1024;
