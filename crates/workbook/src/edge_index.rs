//! A validated edge index in PyTorch Geometric's layout.
//!
//! PyG stores a graph's edges as a `[2, E]` integer tensor: row 0 holds the source `j`, row 1
//! the target `i`, and messages flow source → target. PyG never checks it, so an out-of-range id
//! surfaces later as a CUDA "device-side assert" far from the cause. [`EdgeIndex`] is checked once,
//! when it is built ("parse, don't validate"): a layer that receives one knows every id is in
//! range, and only has to compare the node count with its features.
//!
//! The ids live on the device as `u32` (half the memory of `i64`, and what candle's gather and
//! scatter kernels take). A host copy is kept for the structural work (self-loops) that PyG also
//! does with boolean masks; the results of that work are cached, so a training loop uploads them
//! once.
//!
//! ```
//! use workbook::{EdgeIndex, candle_core::Device};
//! // 0 -> 1, 1 -> 2, 2 -> 2 (a self-loop)
//! let ei = EdgeIndex::new(&[0, 1, 2], &[1, 2, 2], 3, &Device::Cpu).unwrap();
//! assert_eq!(ei.num_edges(), 3);
//! // GATv2's handling: drop existing self-loops, then add one per node.
//! let looped = ei.with_self_loops().unwrap();
//! assert_eq!(looped.edge_index.sources_host(), &[0, 1, 0, 1, 2]);
//! assert!(EdgeIndex::new(&[0], &[3], 3, &Device::Cpu).is_err()); // node 3 does not exist
//! ```

pub mod csr;

use crate::error::{Result, WorkbookError};
use crate::placement::{bytes_of, Placement};
use candle_core::{DType, Device, Tensor};
use csr::Csr;
use std::sync::{Arc, OnceLock};

/// A `[2, E]` edge index whose ids are known to be in `0..num_nodes`.
#[derive(Clone, Debug)]
pub struct EdgeIndex {
    num_nodes: usize,
    src_host: Arc<[u32]>,
    dst_host: Arc<[u32]>,
    src: Tensor,
    dst: Tensor,
    at: Placement,
    self_loops: Arc<OnceLock<SelfLoops>>,
    remaining_self_loops: Arc<OnceLock<SelfLoops>>,
    // Sorted copies for the fast kernels (issue 9), built on first use and shared by clones.
    csr: Arc<OnceLock<Arc<Csr>>>,
}

/// The result of a self-loop rewrite: the new edges, and for each new edge where its
/// attribute comes from (see [`SelfLoops::gather`]).
#[derive(Clone, Debug)]
pub struct SelfLoops {
    /// The rewritten edge index.
    pub edge_index: EdgeIndex,
    /// `u32 [E']`: for every new edge, the index of the old edge whose attribute it keeps, or
    /// `E` (one past the end) for an added loop that takes the fill value. Append the fill value
    /// to an `[E]` attribute and `index_select` with this to get the new attribute.
    pub gather: Tensor,
}

impl EdgeIndex {
    /// Builds an edge index from source and target ids, checking that both lists have the same
    /// length and that every id is in `0..num_nodes`. The ids are placed on `at` (a `&Device`
    /// or a [`Placement`]) when they are created.
    pub fn new(
        src: &[i64],
        dst: &[i64],
        num_nodes: usize,
        at: impl Into<Placement>,
    ) -> Result<Self> {
        if src.len() != dst.len() {
            return Err(WorkbookError::InvalidGraph(format!(
                "edge_index rows differ in length: {} sources but {} targets",
                src.len(),
                dst.len()
            )));
        }
        if num_nodes > u32::MAX as usize {
            return Err(WorkbookError::InvalidGraph(format!(
                "{num_nodes} nodes is more than the {} this library indexes",
                u32::MAX
            )));
        }
        let check = |ids: &[i64], row: &str| -> Result<Vec<u32>> {
            ids.iter()
                .enumerate()
                .map(|(e, &id)| {
                    if id < 0 || id as u64 >= num_nodes as u64 {
                        Err(WorkbookError::InvalidGraph(format!(
                            "edge_index[{row}][{e}] = {id} is not a node id: the graph has {num_nodes} nodes, so ids must be in 0..{num_nodes}"
                        )))
                    } else {
                        Ok(id as u32)
                    }
                })
                .collect()
        };
        let src = check(src, "0")?;
        let dst = check(dst, "1")?;
        let at = at.into();
        let ei = Self::from_u32(src, dst, num_nodes, &at)?;
        at.record_upload(bytes_of(&ei.src) + bytes_of(&ei.dst), "edge_index");
        Ok(ei)
    }

    /// Builds an edge index from a `[2, E]` tensor of `i64`, `i32` or `u32` ids (PyG's layout).
    pub fn from_tensor(edge_index: &Tensor, num_nodes: usize) -> Result<Self> {
        let dims = edge_index.dims();
        if dims.len() != 2 || dims[0] != 2 {
            return Err(WorkbookError::InvalidGraph(format!(
                "edge_index must have shape [2, num_edges] (row 0 = sources, row 1 = targets), got {dims:?}; if you have [num_edges, 2], transpose it"
            )));
        }
        let ids: Vec<Vec<i64>> = match edge_index.dtype() {
            DType::I64 => edge_index.to_vec2::<i64>()?,
            DType::U32 => edge_index
                .to_vec2::<u32>()?
                .into_iter()
                .map(|r| r.into_iter().map(i64::from).collect())
                .collect(),
            DType::I32 => edge_index.to_dtype(DType::I64)?.to_vec2::<i64>()?,
            other => {
                return Err(WorkbookError::InvalidGraph(format!(
                    "edge_index must hold integers (i64, i32 or u32), got {other:?}"
                )))
            }
        };
        Self::new(&ids[0], &ids[1], num_nodes, edge_index.device())
    }

    /// Builds the tensors on `at` without recording the upload (the callers name it).
    pub(crate) fn from_u32(
        src: Vec<u32>,
        dst: Vec<u32>,
        num_nodes: usize,
        at: &Placement,
    ) -> Result<Self> {
        let e = src.len();
        let src_t = Tensor::from_slice(&src, e, at.device())?;
        let dst_t = Tensor::from_slice(&dst, e, at.device())?;
        Ok(Self {
            num_nodes,
            src_host: src.into(),
            dst_host: dst.into(),
            src: src_t,
            dst: dst_t,
            at: at.clone(),
            self_loops: Arc::default(),
            remaining_self_loops: Arc::default(),
            csr: Arc::default(),
        })
    }

    /// Number of nodes the ids refer to.
    pub fn num_nodes(&self) -> usize {
        self.num_nodes
    }

    /// Number of edges `E`.
    pub fn num_edges(&self) -> usize {
        self.src_host.len()
    }

    /// Source ids (row 0), `u32 [E]` on [`EdgeIndex::device`].
    pub fn sources(&self) -> &Tensor {
        &self.src
    }

    /// Target ids (row 1), `u32 [E]` on [`EdgeIndex::device`].
    pub fn targets(&self) -> &Tensor {
        &self.dst
    }

    /// Source ids on the host.
    pub fn sources_host(&self) -> &[u32] {
        &self.src_host
    }

    /// Target ids on the host.
    pub fn targets_host(&self) -> &[u32] {
        &self.dst_host
    }

    /// The candle device the id tensors live on.
    pub fn device(&self) -> &Device {
        self.at.device()
    }

    /// Where the id tensors live (`cpu`, `sim:1`, `cuda:0`).
    pub fn placement(&self) -> &Placement {
        &self.at
    }

    /// The edge index as PyG's `i64 [2, E]` tensor, on `device`.
    pub fn to_tensor(&self, device: &Device) -> Result<Tensor> {
        let ids: Vec<i64> = self
            .src_host
            .iter()
            .chain(self.dst_host.iter())
            .map(|&v| i64::from(v))
            .collect();
        Ok(Tensor::from_vec(ids, (2, self.num_edges()), device)?)
    }

    /// A copy whose tensors live on `to` (structure caches are rebuilt there on demand). The
    /// copy is recorded in the ledger as `edge_index`; already there, nothing is copied.
    pub fn to_device(&self, to: impl Into<Placement>) -> Result<Self> {
        self.to_device_named(to, "edge_index")
    }

    pub(crate) fn to_device_named(&self, to: impl Into<Placement>, what: &str) -> Result<Self> {
        let to = self.at.destination(&to.into());
        if to == self.at {
            return Ok(self.clone());
        }
        let mut moved = to.move_tensors(&[&self.src, &self.dst], &self.at, what)?;
        let dst = moved.pop().expect("two tensors moved");
        let src = moved.pop().expect("two tensors moved");
        Ok(Self {
            num_nodes: self.num_nodes,
            src_host: self.src_host.clone(),
            dst_host: self.dst_host.clone(),
            src,
            dst,
            at: to,
            self_loops: Arc::default(),
            remaining_self_loops: Arc::default(),
            csr: Arc::default(),
        })
    }

    /// GATv2's handling (PyG `remove_self_loops` then `add_self_loops`): existing self-loops are
    /// dropped and one loop per node is appended, in node order. Cached after the first call.
    pub fn with_self_loops(&self) -> Result<&SelfLoops> {
        if let Some(done) = self.self_loops.get() {
            return Ok(done);
        }
        let kept: Vec<usize> = (0..self.num_edges())
            .filter(|&e| self.src_host[e] != self.dst_host[e])
            .collect();
        let built = self.append_loops(&kept, |_| None)?;
        Ok(self.self_loops.get_or_init(|| built))
    }

    /// GCN's handling (PyG `add_remaining_self_loops`): non-loop edges are kept in order, then one
    /// loop per node is appended. A node that already had a loop keeps that loop's attribute (the
    /// last one, if it had several); the others take the fill value. Cached after the first call.
    pub fn with_remaining_self_loops(&self) -> Result<&SelfLoops> {
        if let Some(done) = self.remaining_self_loops.get() {
            return Ok(done);
        }
        let mut existing = vec![None; self.num_nodes];
        let mut kept = Vec::with_capacity(self.num_edges());
        for e in 0..self.num_edges() {
            if self.src_host[e] == self.dst_host[e] {
                existing[self.src_host[e] as usize] = Some(e);
            } else {
                kept.push(e);
            }
        }
        let built = self.append_loops(&kept, |node| existing[node])?;
        Ok(self.remaining_self_loops.get_or_init(|| built))
    }

    /// Checks that `w` can weigh these edges: a float tensor with one value per edge.
    pub fn check_weight(&self, w: &Tensor) -> Result<()> {
        if w.dims() != [self.num_edges()] || !w.dtype().is_float() {
            return Err(WorkbookError::InvalidGraph(format!(
                "edge_weight must be a float tensor of shape [{}] (one weight per edge), got {:?} {:?}",
                self.num_edges(),
                w.dtype(),
                w.dims()
            )));
        }
        Ok(())
    }

    /// The edges sorted by destination and by source ([`Csr`]), for the fast
    /// message-passing kernels. Built on the first call and shared by every clone.
    pub fn csr(&self) -> Result<&Arc<Csr>> {
        if let Some(done) = self.csr.get() {
            return Ok(done);
        }
        let built = Csr::new(
            &self.src_host,
            &self.dst_host,
            self.num_nodes,
            self.device(),
        )?;
        // Sorted on the host; a GPU receives src, dst and both sortings (ptr, other, edge) once.
        // Recorded on every device, simulated ones included, so ledgers agree across devices.
        let (e, n) = (self.num_edges() as u64, self.num_nodes as u64);
        Ok(self.csr.get_or_init(|| {
            self.at
                .record_upload(4 * (6 * e + 2 * (n + 1)), "edge_index (CSR)");
            Arc::new(built)
        }))
    }

    fn append_loops(
        &self,
        kept: &[usize],
        loop_source: impl Fn(usize) -> Option<usize>,
    ) -> Result<SelfLoops> {
        let n = self.num_nodes;
        let fill = self.num_edges();
        let mut src = Vec::with_capacity(kept.len() + n);
        let mut dst = Vec::with_capacity(kept.len() + n);
        let mut gather = Vec::with_capacity(kept.len() + n);
        for &e in kept {
            src.push(self.src_host[e]);
            dst.push(self.dst_host[e]);
            gather.push(e as u32);
        }
        for node in 0..n {
            src.push(node as u32);
            dst.push(node as u32);
            gather.push(loop_source(node).unwrap_or(fill) as u32);
        }
        let len = gather.len();
        let loops = SelfLoops {
            edge_index: Self::from_u32(src, dst, n, &self.at)?,
            gather: Tensor::from_vec(gather, len, self.device())?,
        };
        // Built once from the host copy, like PyG's mask-based rewrite; on a GPU that is one
        // upload, which the ledger shows.
        self.at.record_upload(
            bytes_of(&loops.edge_index.src) * 3,
            "edge_index (self-loops)",
        );
        Ok(loops)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rejects_bad_ids_and_shapes() {
        let cpu = Device::Cpu;
        let err = EdgeIndex::new(&[0, -1], &[1, 0], 2, &cpu).unwrap_err();
        assert!(err.to_string().contains("edge_index[0][1] = -1"), "{err}");
        let err = EdgeIndex::new(&[0], &[1, 0], 2, &cpu).unwrap_err();
        assert!(err.to_string().contains("differ in length"), "{err}");
        let t = Tensor::zeros((3, 2), DType::I64, &cpu).unwrap();
        let err = EdgeIndex::from_tensor(&t, 4).unwrap_err();
        assert!(err.to_string().contains("[2, num_edges]"), "{err}");
        let t = Tensor::zeros((2, 2), DType::F32, &cpu).unwrap();
        let err = EdgeIndex::from_tensor(&t, 4).unwrap_err();
        assert!(err.to_string().contains("integers"), "{err}");
    }

    #[test]
    fn remaining_self_loops_keep_existing_loop_attribute() {
        let ei = EdgeIndex::new(&[0, 1, 1, 2], &[1, 1, 2, 0], 3, &Device::Cpu).unwrap();
        let sl = ei.with_remaining_self_loops().unwrap();
        assert_eq!(sl.edge_index.sources_host(), &[0, 1, 2, 0, 1, 2]);
        assert_eq!(sl.edge_index.targets_host(), &[1, 2, 0, 0, 1, 2]);
        // node 1's loop keeps edge 1's attribute; nodes 0 and 2 take the fill slot (4).
        assert_eq!(sl.gather.to_vec1::<u32>().unwrap(), vec![0, 2, 3, 4, 1, 4]);
    }

    #[test]
    fn round_trips_through_pyg_tensor() {
        let ei = EdgeIndex::new(&[0, 2], &[1, 0], 3, &Device::Cpu).unwrap();
        let t = ei.to_tensor(&Device::Cpu).unwrap();
        let back = EdgeIndex::from_tensor(&t, 3).unwrap();
        assert_eq!(back.sources_host(), &[0, 2]);
        assert_eq!(back.targets_host(), &[1, 0]);
    }
}
