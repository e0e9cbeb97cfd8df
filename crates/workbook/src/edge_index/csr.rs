//! The edge index sorted twice: by destination (CSR) and by source (its transpose).
//!
//! Message passing sums over the edges *into* each node. candle's `index_add` does that by
//! scattering edge after edge into the output, one thread, random writes. Sorted by destination,
//! the edges into node `i` are one contiguous run `ptr[i]..ptr[i + 1]`, so each node's sum is
//! independent of every other: rows can be computed in parallel, without atomics, each written
//! once. The backward pass sums over the edges *out of* each node, hence the second sort.
//!
//! Both sorts are stable (counting sorts), so within a row the edges keep their original order and
//! a row's sum adds the same terms in the same order as `index_add` does: the kernels built on this
//! give bit-identical results to the composed candle ops.
//!
//! [`crate::EdgeIndex::csr`] builds it once per edge index and shares it with every clone.
//!
//! ```
//! use workbook::candle_core::Device;
//! use workbook::ops::Csr;
//! // edges 0: 2 -> 0, 1: 1 -> 2, 2: 0 -> 0
//! let csr = Csr::new(&[2, 1, 0], &[0, 2, 0], 3, &Device::Cpu).unwrap();
//! assert_eq!(csr.by_dst().ptr(), [0, 2, 2, 3]); // node 0 receives two edges, node 1 none
//! assert_eq!(csr.by_dst().edge(), [0, 2, 1]); // in their original order
//! assert_eq!(csr.by_dst().other(), [2, 0, 1]); // and their sources
//! assert_eq!(csr.by_src().ptr(), [0, 1, 2, 3]);
//! ```
//!
//! The arrays are read through accessors only: [`Csr::new`] checks every node id, and the
//! kernels index by them without further checks, so nothing outside may change them.
//!
//! ```compile_fail,E0616
//! # use workbook::candle_core::Device;
//! # use workbook::ops::Csr;
//! let mut csr = Csr::new(&[2, 1, 0], &[0, 2, 0], 3, &Device::Cpu).unwrap();
//! csr.by_dst.ptr[1] = 99; // error[E0616]: field `by_dst` of struct `Csr` is private
//! ```

use crate::error::{Result, WorkbookError};
use candle_core::{Device, Tensor};

/// Edges grouped by one endpoint. Built only by [`Csr::new`]; read-only.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Sorted {
    ptr: Vec<u32>,
    other: Vec<u32>,
    edge: Vec<u32>,
    pos: Vec<u32>,
}

impl Sorted {
    /// `[N + 1]`: the edges of node `i` are positions `ptr[i]..ptr[i + 1]`.
    pub fn ptr(&self) -> &[u32] {
        &self.ptr
    }

    /// `[E]`: the other endpoint of the edge at each position.
    pub fn other(&self) -> &[u32] {
        &self.other
    }

    /// `[E]`: the original id of the edge at each position.
    pub fn edge(&self) -> &[u32] {
        &self.edge
    }

    /// `[E]`: the position of each original edge (the inverse of `edge`).
    pub fn pos(&self) -> &[u32] {
        &self.pos
    }
}

/// [`Sorted`] uploaded to a GPU, for the CUDA kernels.
#[derive(Clone, Debug)]
pub struct SortedOnDevice {
    ptr: Tensor,
    other: Tensor,
    edge: Tensor,
}

impl SortedOnDevice {
    /// [`Sorted::ptr`] on the device.
    pub fn ptr(&self) -> &Tensor {
        &self.ptr
    }

    /// [`Sorted::other`] on the device.
    pub fn other(&self) -> &Tensor {
        &self.other
    }

    /// [`Sorted::edge`] on the device.
    pub fn edge(&self) -> &Tensor {
        &self.edge
    }
}

/// A [`Csr`]'s arrays on a GPU.
#[derive(Clone, Debug)]
pub struct CsrOnDevice {
    src: Tensor,
    dst: Tensor,
    by_dst: SortedOnDevice,
    by_src: SortedOnDevice,
}

impl CsrOnDevice {
    /// [`Csr::src`] on the device.
    pub fn src(&self) -> &Tensor {
        &self.src
    }

    /// [`Csr::dst`] on the device.
    pub fn dst(&self) -> &Tensor {
        &self.dst
    }

    /// [`Csr::by_dst`] on the device.
    pub fn by_dst(&self) -> &SortedOnDevice {
        &self.by_dst
    }

    /// [`Csr::by_src`] on the device.
    pub fn by_src(&self) -> &SortedOnDevice {
        &self.by_src
    }
}

/// An edge index sorted by destination and by source, with the original order kept.
///
/// Its fields are private: [`Csr::new`] validates every node id once, and the kernels rely on
/// that to index without checks, so the arrays are read-only from outside.
#[derive(Clone, Debug)]
pub struct Csr {
    num_nodes: usize,
    src: Vec<u32>,
    dst: Vec<u32>,
    by_dst: Sorted,
    by_src: Sorted,
    on_device: Option<CsrOnDevice>,
}

impl Csr {
    /// Sorts the edges `src[e] -> dst[e]` of a graph of `num_nodes` nodes; on a GPU `device`
    /// the arrays are uploaded once as well.
    pub fn new(src: &[u32], dst: &[u32], num_nodes: usize, device: &Device) -> Result<Self> {
        // Edge ids and positions are u32.
        check_edges("CSR", src, dst, num_nodes, u32::MAX as usize - 1)?;
        let by_dst = counting_sort(dst, src, num_nodes);
        let by_src = counting_sort(src, dst, num_nodes);
        let on_device = if device.is_cpu() {
            None
        } else {
            let up = |v: &[u32]| Tensor::from_slice(v, v.len(), device);
            let sorted = |s: &Sorted| -> candle_core::Result<SortedOnDevice> {
                Ok(SortedOnDevice {
                    ptr: up(&s.ptr)?,
                    other: up(&s.other)?,
                    edge: up(&s.edge)?,
                })
            };
            Some(CsrOnDevice {
                src: up(src)?,
                dst: up(dst)?,
                by_dst: sorted(&by_dst)?,
                by_src: sorted(&by_src)?,
            })
        };
        Ok(Self {
            num_nodes,
            src: src.to_vec(),
            dst: dst.to_vec(),
            by_dst,
            by_src,
            on_device,
        })
    }

    /// Number of nodes.
    pub fn num_nodes(&self) -> usize {
        self.num_nodes
    }

    /// Number of edges.
    pub fn num_edges(&self) -> usize {
        self.src.len()
    }

    /// `[E]`: the source of each edge, in the original order.
    pub fn src(&self) -> &[u32] {
        &self.src
    }

    /// `[E]`: the target of each edge, in the original order.
    pub fn dst(&self) -> &[u32] {
        &self.dst
    }

    /// Edges into each node.
    pub fn by_dst(&self) -> &Sorted {
        &self.by_dst
    }

    /// Edges out of each node.
    pub fn by_src(&self) -> &Sorted {
        &self.by_src
    }

    /// Device copies of the arrays, only when the CSR was built for a GPU.
    pub fn on_device(&self) -> Option<&CsrOnDevice> {
        self.on_device.as_ref()
    }
}

/// The checks every grouping needs first: as many sources as targets, at most `max_edges`
/// edges, every node id below `num_nodes`. `what` names the structure in the error.
pub(crate) fn check_edges(
    what: &str,
    src: &[u32],
    dst: &[u32],
    num_nodes: usize,
    max_edges: usize,
) -> Result<()> {
    if src.len() != dst.len() {
        return Err(WorkbookError::InvalidGraph(format!(
            "{what}: {} sources but {} targets",
            src.len(),
            dst.len()
        )));
    }
    if src.len() > max_edges {
        return Err(WorkbookError::InvalidGraph(format!(
            "{what}: {} edges is more than the {max_edges} this library indexes",
            src.len()
        )));
    }
    if let Some(bad) = src.iter().chain(dst).find(|&&v| v as usize >= num_nodes) {
        return Err(WorkbookError::InvalidGraph(format!(
            "{what}: node id {bad} is not below {num_nodes}"
        )));
    }
    Ok(())
}

/// Edges grouped by `key` with a stable counting sort: node `i`'s edges are positions
/// `ptr[i]..ptr[i + 1]`, in their original order, with the other endpoint and the edge id of
/// each. The one grouping both [`Csr`] and the neighbour sampler
/// ([`crate::loader::NeighborSampler`], which needs no inverse map) are built on.
pub(crate) struct Grouped {
    pub(crate) ptr: Vec<u32>,
    pub(crate) other: Vec<u32>,
    pub(crate) edge: Vec<u32>,
}

/// Groups the edges `key[e] - other[e]` by `key` (every key below `n`, checked by the caller).
pub(crate) fn group_by(key: &[u32], other: &[u32], n: usize) -> Grouped {
    let mut ptr = vec![0u32; n + 1];
    for &k in key {
        ptr[k as usize + 1] += 1;
    }
    for i in 0..n {
        ptr[i + 1] += ptr[i];
    }
    let mut next: Vec<u32> = ptr[..n].to_vec();
    let mut sorted_other = vec![0u32; key.len()];
    let mut edge = vec![0u32; key.len()];
    for (e, &k) in key.iter().enumerate() {
        let slot = &mut next[k as usize];
        sorted_other[*slot as usize] = other[e];
        edge[*slot as usize] = e as u32;
        *slot += 1;
    }
    Grouped {
        ptr,
        other: sorted_other,
        edge,
    }
}

/// [`group_by`] plus the inverse map `pos` (edge id to position) the kernels need.
fn counting_sort(key: &[u32], other: &[u32], n: usize) -> Sorted {
    let Grouped { ptr, other, edge } = group_by(key, other, n);
    let mut pos = vec![0u32; edge.len()];
    for (at, &e) in edge.iter().enumerate() {
        pos[e as usize] = at as u32;
    }
    Sorted {
        ptr,
        other,
        edge,
        pos,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sorts_stably_and_handles_empty_rows() {
        let csr = Csr::new(&[0, 1, 1, 0, 2], &[1, 1, 0, 1, 1], 4, &Device::Cpu).unwrap();
        assert_eq!(csr.by_dst.ptr, vec![0, 1, 5, 5, 5]);
        assert_eq!(csr.by_dst.edge, vec![2, 0, 1, 3, 4]);
        assert_eq!(csr.by_dst.other, vec![1, 0, 1, 0, 2]);
        assert_eq!(csr.by_dst.pos, vec![1, 2, 0, 3, 4]);
        assert_eq!(csr.by_src.ptr, vec![0, 2, 4, 5, 5]);
        assert_eq!(csr.by_src.edge, vec![0, 3, 1, 2, 4]);
        assert_eq!(csr.num_edges(), 5);
        assert!(Csr::new(&[0], &[4], 4, &Device::Cpu).is_err());
        assert!(Csr::new(&[0], &[], 4, &Device::Cpu).is_err());
    }
}
