//! An `edge_index` id that is not a node, caught before any kernel can meet it.
//!
//! PyG's `Data(x=x, edge_index=edge_index)` checks nothing. On a GPU the first kernel that
//! gathers with an id that is not a node (ids counted from 1, a subgraph that kept the whole
//! graph's ids) trips a *device-side assert*; the launch has already returned, so the error is
//! reported later, by some other operation (`loss.item()`, a copy), and from then on every
//! operation on the device fails (book, chapter 1, "An error reported somewhere else"). A
//! `sim:N` device in its asynchronous mode does the same.
//!
//! The cure is a check of the raw index on the host, before the graph reaches the device:
//! [`check_edges`] names the first bad edge and counts the bad ids of each row, and
//! [`neighbour_sums`], a sum aggregation written the PyG way on the raw tensors, refuses a bad
//! graph with it before any kernel runs, so that the device stays usable.
//!
//! ```text
//! edge_index[1][2] = 4 is not a node id: the graph has 4 nodes, so ids must be in 0..4 (ids outside it: 1 in the source row, 1 in the target row; this is the first). Refused before any kernel ran: the device is still usable. Usual causes: ids counted from 1 (subtract 1), or a subgraph's edges kept with the whole graph's ids (relabel them; PyG: subgraph(subset, edge_index, relabel_nodes=True))
//! ```

use std::fmt;
use workbook::candle_core::{self, DType, Tensor};
use workbook::{Placement, UncheckedGraph, WorkbookError};

/// The first edge with an id that is not a node, and how many such ids each row holds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BadEdge {
    /// 0: the source row (`edge_index[0]`), 1: the target row (`edge_index[1]`).
    pub row: usize,
    /// The edge, i.e. the column of `edge_index`.
    pub edge: usize,
    /// Its id: negative, or `num_nodes` or more.
    pub id: i64,
    /// The graph's node count: the ids that are nodes are `0..num_nodes`.
    pub num_nodes: usize,
    /// How many ids of the source row are not nodes.
    pub bad_sources: usize,
    /// How many ids of the target row are not nodes.
    pub bad_targets: usize,
}

/// Why a graph was refused, or the library's own error.
#[derive(Debug)]
pub enum EdgeError {
    /// The edge index is not a `[2, num_edges]` tensor of `i64` or `u32` ids.
    Layout {
        /// Its shape.
        dims: Vec<usize>,
        /// Its element type.
        dtype: DType,
    },
    /// An id that is not a node.
    NotANode(BadEdge),
    /// An error of the library or of the device (a copy, a kernel, a read back).
    Workbook(WorkbookError),
}

impl fmt::Display for EdgeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            EdgeError::Layout { dims, dtype } => write!(
                f,
                "edge_index must be a [2, num_edges] tensor of i64 or u32 ids (row 0 = sources, row 1 = targets), got {dtype:?} {dims:?}; if you have [num_edges, 2], transpose it"
            ),
            EdgeError::NotANode(b) => write!(
                f,
                "edge_index[{}][{}] = {} is not a node id: the graph has {n} nodes, so ids must be in 0..{n} (ids outside it: {} in the source row, {} in the target row; this is the first). Refused before any kernel ran: the device is still usable. Usual causes: ids counted from 1 (subtract 1), or a subgraph's edges kept with the whole graph's ids (relabel them; PyG: subgraph(subset, edge_index, relabel_nodes=True))",
                b.row,
                b.edge,
                b.id,
                b.bad_sources,
                b.bad_targets,
                n = b.num_nodes
            ),
            EdgeError::Workbook(e) => write!(f, "{e}"),
        }
    }
}

impl std::error::Error for EdgeError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        match self {
            EdgeError::Workbook(e) => Some(e),
            _ => None,
        }
    }
}

impl From<WorkbookError> for EdgeError {
    fn from(e: WorkbookError) -> Self {
        EdgeError::Workbook(e)
    }
}

impl From<candle_core::Error> for EdgeError {
    fn from(e: candle_core::Error) -> Self {
        EdgeError::Workbook(e.into())
    }
}

/// Checks a raw edge index (PyG's layout: `[2, num_edges]`, row 0 the sources, row 1 the
/// targets, `i64` or `u32` ids) against `num_nodes`, on the host, running no kernel on any
/// device.
///
/// `Ok` when every id of both rows is a node (`0 <= id < num_nodes`). Otherwise
/// [`EdgeError::NotANode`] with the *first* bad id, in edge order and, within an edge, the source
/// before the target, and the count of bad ids in each row; [`EdgeError::Layout`] for a tensor
/// that is not `[2, num_edges]` of `i64` or `u32`.
pub fn check_edges(edge_index: &Tensor, num_nodes: usize) -> Result<(), EdgeError> {
    // TODO: write the whole check (README.md, "The task", step 1):
    // - the layout: `edge_index` must be [2, num_edges] of i64 or u32, else EdgeError::Layout;
    // - read the ids on the host (both types: widen them to i64 first);
    // - every id of BOTH rows must be a node: not negative, and below num_nodes;
    // - refuse with EdgeError::NotANode naming the FIRST bad id (edge order, the source before
    //   the target within an edge) and counting the bad ids of each row.
    let _ = (edge_index, num_nodes);
    todo!("check the edge index")
}

/// The sum of each node's incoming messages, PyG's `MessagePassing` with `aggr="sum"` and the
/// message `x_j`: row `t` of the result is the sum of `x[s]` over the edges `(s, t)` of `data`
/// (zeros for a node no edge reaches), computed on `device` with
/// [`gather_rows`](workbook::ops::raw_index::gather_rows) and
/// [`scatter_add_rows`](workbook::ops::raw_index::scatter_add_rows), and returned there (`[num_nodes, features]`).
///
/// `data` is on the host; the node count is the number of rows of its `x`. A graph with an id
/// that is not a node is refused with [`EdgeError::NotANode`] before any kernel runs, so that
/// `device` stays usable; a bad layout with [`EdgeError::Layout`].
pub fn neighbour_sums(data: &UncheckedGraph, device: &Placement) -> Result<Tensor, EdgeError> {
    // TODO: write the whole function (README.md, "The task", step 2): the node count is the
    // number of rows of `data.x()`; refuse a bad graph before any kernel can meet it, so that
    // `device` stays usable; then move the graph to `device`, gather the sources' features
    // (edge_index[0]) with gather_rows and sum them at the targets (edge_index[1]) with
    // scatter_add_rows.
    let _ = (data, device);
    todo!("the neighbour sums, the graph checked first")
}
