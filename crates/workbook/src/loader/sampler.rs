//! Multi-hop neighbour sampling on the host, PyG's way.
//!
//! PyG's `NeighborSampler` (through `pyg-lib`) works on the graph in CSC form: for every node
//! it keeps the edges *into* it, because with the default `flow="source_to_target"` a node `i`
//! receives messages from the sources `j` of its edges `j -> i`. Sampling `k` neighbours of `i`
//! therefore means picking `k` of its incoming edges. Hop by hop:
//!
//! 1. the seeds are the first nodes of the batch, in the order given;
//! 2. for each node added in the previous hop (the *frontier*), pick `num_neighbors[hop]` of its
//!    incoming edges without replacement (all of them when it has fewer, or when the count is
//!    `-1`); every edge picked joins the batch as `local(j) -> local(i)`, and a source `j` not
//!    yet in the batch is appended to it (it joins the next frontier);
//! 3. after the last hop, `n_id` lists the batch's nodes (global ids), `e_id` the global id of
//!    every edge, and the edge index is relabelled to positions in `n_id`.
//!
//! Only the picked edges are in the batch (not every edge between its nodes), as in PyG. The
//! work is linear in the size of the batch: the CSC is built once, and the global-to-local map
//! is a hash map holding only the batch's nodes.
//!
//! ```
//! use workbook::loader::NeighborSampler;
//! use rand::SeedableRng;
//! // 0 -> 2, 1 -> 2, 3 -> 0: node 2 receives from 0 and 1, node 0 from 3.
//! let s = NeighborSampler::new(&[0, 1, 3], &[2, 2, 0], 4).unwrap();
//! let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(0);
//! let sub = s.sample(&[2], &[-1, -1], &mut rng).unwrap();
//! assert_eq!(sub.n_id, vec![2, 0, 1, 3]);          // seed first, then hop 1, then hop 2
//! assert_eq!(sub.num_sampled_nodes, vec![1, 2, 1]);
//! assert_eq!((sub.src.len(), sub.e_id.len()), (3, 3));
//! ```

use crate::error::{Result, WorkbookError};
use rand::Rng;
use std::collections::HashMap;

/// The graph's incoming edges per node (CSC), built once.
#[derive(Clone, Debug)]
pub struct NeighborSampler {
    num_nodes: usize,
    /// `[N + 1]`: the edges into node `i` are positions `ptr[i]..ptr[i + 1]`.
    ptr: Vec<u32>,
    /// The source of the edge at each position.
    src: Vec<u32>,
    /// The global id of the edge at each position.
    edge: Vec<u32>,
}

/// One sampled subgraph (before any tensor is made).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Sampled {
    /// Global ids of the batch's nodes; the seeds come first, in their order.
    pub n_id: Vec<u32>,
    /// Local source and target of every sampled edge (positions in `n_id`).
    pub src: Vec<u32>,
    pub dst: Vec<u32>,
    /// Global id of every sampled edge.
    pub e_id: Vec<u32>,
    /// Nodes added per hop: `[seeds, hop 1, hop 2, ...]` (PyG's `num_sampled_nodes`).
    pub num_sampled_nodes: Vec<usize>,
    /// Edges added per hop: `[hop 1, hop 2, ...]` (PyG's `num_sampled_edges`).
    pub num_sampled_edges: Vec<usize>,
}

impl NeighborSampler {
    /// Groups the edges `src[e] -> dst[e]` by target (a stable counting sort: a node's
    /// incoming edges keep their order).
    pub fn new(src: &[u32], dst: &[u32], num_nodes: usize) -> Result<Self> {
        crate::edge_index::csr::check_edges("sampler", src, dst, num_nodes, u32::MAX as usize)?;
        // A node's incoming edges keep their order (the same stable grouping as the CSR).
        let by_dst = crate::edge_index::csr::group_by(dst, src, num_nodes);
        Ok(Self {
            num_nodes,
            ptr: by_dst.ptr,
            src: by_dst.other,
            edge: by_dst.edge,
        })
    }

    /// Number of nodes of the graph.
    pub fn num_nodes(&self) -> usize {
        self.num_nodes
    }

    /// Number of edges into `node`.
    pub fn in_degree(&self, node: u32) -> usize {
        let i = node as usize;
        (self.ptr[i + 1] - self.ptr[i]) as usize
    }

    /// Samples the subgraph around `seeds` with `num_neighbors[hop]` incoming edges per node
    /// and hop (`-1`: all of them). Seeds must be distinct node ids.
    pub fn sample<R: Rng + ?Sized>(
        &self,
        seeds: &[u32],
        num_neighbors: &[i64],
        rng: &mut R,
    ) -> Result<Sampled> {
        check_num_neighbors(num_neighbors)?;
        let mut local: HashMap<u32, u32> = HashMap::with_capacity(seeds.len() * 4);
        let mut n_id = Vec::with_capacity(seeds.len() * 4);
        for &s in seeds {
            if s as usize >= self.num_nodes {
                return Err(WorkbookError::InvalidConfig(format!(
                    "seed node {s} does not exist: the graph has {} nodes",
                    self.num_nodes
                )));
            }
            if local.insert(s, n_id.len() as u32).is_some() {
                return Err(WorkbookError::InvalidConfig(format!(
                    "seed node {s} is given twice; input_nodes must be distinct"
                )));
            }
            n_id.push(s);
        }
        let (mut src, mut dst, mut e_id) = (Vec::new(), Vec::new(), Vec::new());
        let mut num_sampled_nodes = vec![seeds.len()];
        let mut num_sampled_edges = Vec::with_capacity(num_neighbors.len());
        let mut frontier = 0..n_id.len();
        for &k in num_neighbors {
            let edges_before = e_id.len();
            for target_local in frontier.clone() {
                let target = n_id[target_local];
                let (lo, hi) = (
                    self.ptr[target as usize] as usize,
                    self.ptr[target as usize + 1] as usize,
                );
                let deg = hi - lo;
                let mut take = |pos: usize, n_id: &mut Vec<u32>| {
                    let j = self.src[pos];
                    let next = n_id.len() as u32;
                    let lj = *local.entry(j).or_insert_with(|| {
                        n_id.push(j);
                        next
                    });
                    src.push(lj);
                    dst.push(target_local as u32);
                    e_id.push(self.edge[pos]);
                };
                if k < 0 || k as usize >= deg {
                    for pos in lo..hi {
                        take(pos, &mut n_id);
                    }
                } else {
                    // Without replacement: `k` distinct positions (Floyd's algorithm or a
                    // partial shuffle, whichever rand picks for these sizes).
                    for i in rand::seq::index::sample(rng, deg, k as usize).into_iter() {
                        take(lo + i, &mut n_id);
                    }
                }
            }
            num_sampled_edges.push(e_id.len() - edges_before);
            num_sampled_nodes.push(n_id.len() - frontier.end);
            frontier = frontier.end..n_id.len();
        }
        Ok(Sampled {
            n_id,
            src,
            dst,
            e_id,
            num_sampled_nodes,
            num_sampled_edges,
        })
    }
}

/// `num_neighbors` must name at least one hop, each a count or `-1`.
pub(crate) fn check_num_neighbors(num_neighbors: &[i64]) -> Result<()> {
    if num_neighbors.is_empty() {
        return Err(WorkbookError::InvalidConfig(
            "num_neighbors is empty: give one count per hop (one per layer), e.g. [10, 10]".into(),
        ));
    }
    if let Some(bad) = num_neighbors.iter().find(|&&k| k < -1) {
        return Err(WorkbookError::InvalidConfig(format!(
            "num_neighbors has {bad}: each hop takes a count >= 0, or -1 for all neighbours"
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;

    #[test]
    fn takes_incoming_edges_and_respects_counts() {
        // Node 0 receives from 1, 2, 3, 4; node 1 receives from 5.
        let s = NeighborSampler::new(&[1, 2, 3, 4, 5], &[0, 0, 0, 0, 1], 6).unwrap();
        let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(3);
        let sub = s.sample(&[0], &[2], &mut rng).unwrap();
        assert_eq!(sub.num_sampled_edges, vec![2]);
        assert_eq!(sub.n_id.len(), 3);
        assert!(
            sub.dst.iter().all(|&d| d == 0),
            "every edge goes into the seed"
        );
        let mut picked = sub.n_id[1..].to_vec();
        picked.sort();
        picked.dedup();
        assert_eq!(picked.len(), 2, "without replacement");
        assert!(s.sample(&[0, 0], &[1], &mut rng).is_err());
        assert!(s.sample(&[9], &[1], &mut rng).is_err());
        assert!(s.sample(&[0], &[-2], &mut rng).is_err());
    }
}
