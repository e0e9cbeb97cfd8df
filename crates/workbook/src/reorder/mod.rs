//! A locality-preserving node order: renumber a graph so that neighbours get nearby ids.
//!
//! A GNN's aggregation reads, for every edge, the feature row of the edge's source. When the
//! ids of neighbours are far apart, each of those reads is a cache miss (and, with 4 KiB pages, a
//! TLB miss): the kernel waits on memory latency, not bandwidth. Renumbering the nodes so that
//! neighbours sit close in the node table turns most of those misses into hits. The graph is the
//! same graph; only its numbering changes, so a model computes the same outputs, row for row,
//! once they are mapped back with the [`Permutation`] (up to the summation order of floats).
//!
//! The API follows DGL's `dgl.reorder_graph(g, node_permute_algo=...)`:
//! [`reorder_graph`]`(&graph, Order::ReverseCuthillMcKee)` is `node_permute_algo='rcmk'`,
//! [`Order::Rabbit`] a community order in place of `'metis'`, and [`permute_graph`] with a
//! permutation of your own is `'custom'`. Where DGL stores the old ids as `g.ndata[dgl.NID]`,
//! this returns the [`Permutation`] (`old_of_new` is DGL's `NID`), which maps ids and rows both
//! ways. Edges are renumbered and sorted by (new target, new source), DGL's
//! `edge_permute_algo='dst'`; each edge keeps its weight.
//!
//! - [`Order::ReverseCuthillMcKee`] ([`rcm`]): a breadth-first numbering from a peripheral
//!   node, reversed; it minimises the bandwidth `max |i - j|` over edges, roughly, and suits
//!   meshes, road networks and geometric graphs.
//! - [`Order::Rabbit`] ([`rabbit`]): Rabbit order (Arai et al., IPDPS 2016): merges each node
//!   into the neighbouring community with the best modularity gain, lowest degree first, then
//!   numbers the nodes of each community together, depth first through the merge tree, so
//!   communities and their sub-communities are contiguous ranges.
//!
//! Both are written here rather than taken from a crate: `sprs` has a reverse Cuthill-McKee,
//! but it would bring `ndarray`, `alga` and `num-complex` into the core for eighty lines, and
//! the `metis` crate binds METIS's C library through `bindgen` (libclang at build time); no
//! crate on crates.io implements Rabbit order. Both orders are deterministic: ties go to the
//! lower id.
//!
//! ```
//! use workbook::reorder::{reorder_graph, edge_locality, Order};
//! use workbook::datasets::{knn, KnnConfig};
//! let graph = knn(&KnnConfig::new(2_000), &workbook::candle_core::Device::Cpu).unwrap();
//! let before = edge_locality(graph.edge_index()).mean_gap;    // random ids: about n / 3
//! let (ordered, perm) = reorder_graph(&graph, Order::ReverseCuthillMcKee).unwrap();
//! let after = edge_locality(ordered.edge_index()).mean_gap;
//! assert!(after * 10.0 < before, "{before} -> {after}");
//! // Node 0 of the original graph is node perm.new_of_old()[0] of the reordered one.
//! let back = perm.to_old_rows(ordered.x()).unwrap();         // features back in the old order
//! assert_eq!(back.to_vec2::<f32>().unwrap(), graph.x().to_vec2::<f32>().unwrap());
//! ```

pub mod permutation;
pub mod rabbit;
pub mod rcm;

pub use permutation::Permutation;

use crate::edge_index::EdgeIndex;
use crate::error::{PermutationError, Result, WorkbookError};
use crate::graph::Graph;
use candle_core::Tensor;

/// A node order [`reorder_graph`] computes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Order {
    /// Reverse Cuthill-McKee ([`rcm`]): bandwidth reduction. DGL: `'rcmk'`.
    ReverseCuthillMcKee,
    /// Rabbit order ([`rabbit`]): communities numbered together. DGL's nearest: `'metis'`.
    Rabbit,
}

impl Order {
    /// Every order, for help texts and loops.
    pub const ALL: [Order; 2] = [Order::ReverseCuthillMcKee, Order::Rabbit];

    /// The short name the CLI and dataset specs use: `rcm`, `rabbit`.
    pub fn name(self) -> &'static str {
        match self {
            Order::ReverseCuthillMcKee => "rcm",
            Order::Rabbit => "rabbit",
        }
    }

    /// Reads a short name (`rcm`, `rabbit`; any case).
    pub fn parse(name: &str) -> Result<Self> {
        let lower = name.trim().to_ascii_lowercase();
        Order::ALL
            .into_iter()
            .find(|o| o.name() == lower)
            .ok_or_else(|| {
                WorkbookError::InvalidConfig(format!(
                    "unknown node order '{name}': use rcm (reverse Cuthill-McKee) or rabbit (Rabbit order, communities)"
                ))
            })
    }

    /// The order of `edges`' nodes: `old_of_new`, as a [`Permutation`].
    pub fn compute(self, edges: &EdgeIndex) -> Permutation {
        let adjacency = Adjacency::undirected(edges);
        let old_of_new = match self {
            Order::ReverseCuthillMcKee => rcm::order(&adjacency),
            Order::Rabbit => rabbit::order(&adjacency),
        };
        Permutation::from_old_of_new(old_of_new).expect("an ordering visits every node once")
    }
}

impl std::fmt::Display for Order {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// The graph renumbered by `order`, and the permutation that maps between the two numberings.
/// DGL: `dgl.reorder_graph(g, node_permute_algo='rcmk')`.
pub fn reorder_graph(graph: &Graph, order: Order) -> Result<(Graph, Permutation)> {
    let perm = order.compute(graph.edge_index());
    let reordered = permute_graph(graph, &perm)?;
    Ok((reordered, perm))
}

/// The graph renumbered by a permutation of its nodes (DGL's `node_permute_algo='custom'`):
/// new node `i` is old node `perm.old_of_new()[i]`. Features, labels and the split move with
/// their nodes, each edge with its weight; edges are sorted by (new target, new source), and
/// parallel edges keep their relative order. A permutation of another length is an error.
pub fn permute_graph(graph: &Graph, perm: &Permutation) -> Result<Graph> {
    let n = graph.num_nodes();
    if perm.len() != n {
        return Err(PermutationError::WrongLength {
            what: format!("the graph '{}'", graph.name),
            expected: perm.len(),
            found: n,
        }
        .into());
    }
    let edges = graph.edge_index();
    let map = perm.new_of_old();
    let src: Vec<u32> = edges
        .sources_host()
        .iter()
        .map(|&s| map[s as usize])
        .collect();
    let dst: Vec<u32> = edges
        .targets_host()
        .iter()
        .map(|&t| map[t as usize])
        .collect();
    // Edge `e` of the new graph is old edge `edge_order[e]`: a stable sort keeps parallel edges
    // (and so their weights) in the order they had.
    let mut edge_order: Vec<u32> = (0..src.len() as u32).collect();
    edge_order.sort_by_key(|&e| (dst[e as usize], src[e as usize]));
    let new_src: Vec<i64> = edge_order
        .iter()
        .map(|&e| i64::from(src[e as usize]))
        .collect();
    let new_dst: Vec<i64> = edge_order
        .iter()
        .map(|&e| i64::from(dst[e as usize]))
        .collect();
    let new_edges = EdgeIndex::new(&new_src, &new_dst, n, edges.placement().clone())?;
    let x = perm.to_new_rows(graph.x())?;
    graph
        .placement()
        .record_upload(4 * n as u64, "reorder: node order");
    let mut out = Graph::new(graph.name.clone(), x, new_edges)?;
    if let Some(w) = graph.edge_weight() {
        let index = Tensor::from_slice(&edge_order, edge_order.len(), w.device())?;
        out = out.with_edge_weight(w.index_select(&index, 0)?)?;
    }
    if let (Some(y), Some(split)) = (graph.labels_host()?, graph.split()) {
        let y_new: Vec<i64> = perm.old_of_new().iter().map(|&o| y[o as usize]).collect();
        out = out.with_labels(&y_new, perm.to_new_split(split)?)?;
    }
    Ok(out)
}

/// How far apart the ends of edges are in the numbering: what a node order improves.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct EdgeLocality {
    /// Mean `|source - target|` over edges (about `n / 3` for random ids).
    pub mean_gap: f64,
    /// The bandwidth: the largest `|source - target|`.
    pub max_gap: u32,
    /// Nodes of the graph.
    pub nodes: usize,
}

/// The mean and largest id gap of `edges` (0 for a graph without edges).
pub fn edge_locality(edges: &EdgeIndex) -> EdgeLocality {
    let gaps = edges
        .sources_host()
        .iter()
        .zip(edges.targets_host())
        .map(|(&s, &t)| s.abs_diff(t));
    let (sum, max) = gaps.fold((0u64, 0u32), |(sum, max), g| {
        (sum + u64::from(g), max.max(g))
    });
    EdgeLocality {
        mean_gap: sum as f64 / edges.num_edges().max(1) as f64,
        max_gap: max,
        nodes: edges.num_nodes(),
    }
}

/// The graph as undirected neighbour lists (each pair once a side, no self-loops), sorted by
/// id: what both orders walk.
pub struct Adjacency {
    offsets: Vec<usize>,
    neighbours: Vec<u32>,
}

impl Adjacency {
    /// `edges` symmetrised and deduplicated.
    pub fn undirected(edges: &EdgeIndex) -> Self {
        let n = edges.num_nodes();
        let mut degree = vec![0usize; n + 1];
        let pairs = || {
            edges
                .sources_host()
                .iter()
                .zip(edges.targets_host())
                .filter(|(s, t)| s != t)
        };
        for (&s, &t) in pairs() {
            degree[s as usize] += 1;
            degree[t as usize] += 1;
        }
        let mut offsets = vec![0usize; n + 1];
        for v in 0..n {
            offsets[v + 1] = offsets[v] + degree[v];
        }
        let mut fill = offsets.clone();
        let mut neighbours = vec![0u32; offsets[n]];
        for (&s, &t) in pairs() {
            neighbours[fill[s as usize]] = t;
            fill[s as usize] += 1;
            neighbours[fill[t as usize]] = s;
            fill[t as usize] += 1;
        }
        // Sort and deduplicate each list, compacting in place.
        let mut write = 0;
        let mut start = 0;
        for v in 0..n {
            let end = offsets[v + 1];
            let list = &mut neighbours[start..end];
            list.sort_unstable();
            let mut last = None;
            let begin = write;
            for k in start..end {
                let u = neighbours[k];
                if last != Some(u) {
                    neighbours[write] = u;
                    write += 1;
                    last = Some(u);
                }
            }
            offsets[v] = begin;
            start = end;
        }
        offsets[n] = write;
        neighbours.truncate(write);
        Self {
            offsets,
            neighbours,
        }
    }

    /// Number of nodes.
    pub fn num_nodes(&self) -> usize {
        self.offsets.len() - 1
    }

    /// The neighbours of `v`, sorted.
    pub fn neighbours(&self, v: usize) -> &[u32] {
        &self.neighbours[self.offsets[v]..self.offsets[v + 1]]
    }

    /// The number of distinct neighbours of `v`.
    pub fn degree(&self, v: usize) -> usize {
        self.offsets[v + 1] - self.offsets[v]
    }
}
