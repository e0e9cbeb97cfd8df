//! One mini-batch: a relabelled subgraph that moves to the device every step.
//!
//! A [`Batch`] is what PyG's `NeighborLoader` yields: the sampled nodes' features `x`, their
//! labels `y`, the sampled edges relabelled to positions in the batch, `n_id` (the global id of
//! every node) and `e_id` (of every edge). The first [`Batch::batch_size`] nodes are the seeds;
//! the loss and the accuracy are taken on them only (`out[:batch_size]`).
//!
//! The loader builds batches on the host. [`Batch::to_device`] moves **every** part at once,
//! recording each in the [ledger](crate::ledger) as `batch.x`, `batch.edge_index`, ... so a
//! training loop's per-step traffic is visible and can be checked. Moving one part
//! ([`Batch::move_part`]) and forgetting the others is PyG's classic "labels left on the CPU";
//! [`Batch::check_on`] then names the part that stayed behind.
//!
//! ```
//! use workbook::{datasets, loader::{NeighborLoader, LoaderConfig}, placement::Placement};
//! let g = datasets::karate(&Placement::cpu()).unwrap();
//! let loader = NeighborLoader::new(&g, LoaderConfig::new(&[5, 5], 8)).unwrap();
//! let batch = loader.batches(0).next().unwrap().unwrap();
//! let sim = Placement::sim(1);
//! let on_sim = batch.to_device(&sim).unwrap();
//! assert!(on_sim.check_on("model parameters", &sim).is_ok());
//! let half = batch.move_part(workbook::loader::BatchPart::X, &sim).unwrap();
//! assert!(half.check_on("model parameters", &sim).unwrap_err().to_string().contains("batch.edge_index"));
//! ```

use crate::edge_index::EdgeIndex;
use crate::error::Result;
use crate::placement::{bytes_of, check_all, Placed, Placement, Role};
use candle_core::Tensor;
use std::sync::Arc;
use std::time::Instant;

/// The parts of a [`Batch`], named as PyG's batch attributes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BatchPart {
    X,
    EdgeIndex,
    EdgeWeight,
    Y,
    NId,
    EId,
}

impl BatchPart {
    /// Every part, in the order [`Batch::to_device`] moves them.
    pub const ALL: [BatchPart; 6] = [
        BatchPart::X,
        BatchPart::EdgeIndex,
        BatchPart::EdgeWeight,
        BatchPart::Y,
        BatchPart::NId,
        BatchPart::EId,
    ];

    /// The part's name in the ledger and in errors: `batch.x`, `batch.n_id`, ...
    pub fn name(self) -> &'static str {
        match self {
            BatchPart::X => "batch.x",
            BatchPart::EdgeIndex => "batch.edge_index",
            BatchPart::EdgeWeight => "batch.edge_weight",
            BatchPart::Y => "batch.y",
            BatchPart::NId => "batch.n_id",
            BatchPart::EId => "batch.e_id",
        }
    }
}

/// A tensor and where it lives.
#[derive(Clone, Debug)]
struct Part {
    tensor: Tensor,
    at: Placement,
}

impl Part {
    fn moved(&self, to: &Placement, what: &str) -> Result<Self> {
        Ok(Self {
            tensor: to.move_tensor(&self.tensor, &self.at, what)?,
            at: to.clone(),
        })
    }
}

/// A sampled, relabelled subgraph (see the module docs).
#[derive(Clone, Debug)]
pub struct Batch {
    batch_size: usize,
    x: Part,
    edge_index: EdgeIndex,
    edge_weight: Option<Part>,
    y: Option<Part>,
    n_id: Part,
    e_id: Part,
    n_id_host: Arc<[u32]>,
    num_sampled_nodes: Vec<usize>,
    num_sampled_edges: Vec<usize>,
    prepared: Prepared,
}

/// When a batch was prepared (sampled and its rows gathered) and on which thread.
#[derive(Clone, Copy, Debug)]
pub struct Prepared {
    pub start: Instant,
    pub end: Instant,
    /// Prepared by the prefetch thread rather than the training loop.
    pub in_background: bool,
}

impl Prepared {
    /// Milliseconds spent preparing.
    pub fn ms(&self) -> f64 {
        (self.end - self.start).as_secs_f64() * 1e3
    }
}

impl Batch {
    #[allow(clippy::too_many_arguments)]
    pub(crate) fn on_host(
        batch_size: usize,
        x: Tensor,
        edge_index: EdgeIndex,
        edge_weight: Option<Tensor>,
        y: Option<Tensor>,
        n_id: (Vec<u32>, Tensor),
        e_id_t: Tensor,
        num_sampled_nodes: Vec<usize>,
        num_sampled_edges: Vec<usize>,
        prepared: Prepared,
    ) -> Result<Self> {
        let cpu = Placement::cpu();
        let part = |tensor: Tensor| Part {
            tensor,
            at: cpu.clone(),
        };
        let (n_id, n_id_t) = n_id;
        Ok(Self {
            batch_size,
            x: part(x),
            edge_index,
            edge_weight: edge_weight.map(part),
            y: y.map(part),
            n_id: part(n_id_t),
            e_id: part(e_id_t),
            n_id_host: n_id.into(),
            num_sampled_nodes,
            num_sampled_edges,
            prepared,
        })
    }

    /// When and where this batch was sampled and gathered (for timelines and the bench).
    pub fn prepared(&self) -> &Prepared {
        &self.prepared
    }

    /// Number of seed nodes: the first `batch_size` nodes of the batch (the last batch of an
    /// epoch may have fewer than the loader's `batch_size`).
    pub fn batch_size(&self) -> usize {
        self.batch_size
    }
    /// Number of nodes in the batch (seeds and sampled neighbours).
    pub fn num_nodes(&self) -> usize {
        self.n_id_host.len()
    }
    /// Number of sampled edges.
    pub fn num_edges(&self) -> usize {
        self.edge_index.num_edges()
    }
    /// Features of the batch's nodes, `[num_nodes, F]`.
    pub fn x(&self) -> &Tensor {
        &self.x.tensor
    }
    /// The relabelled edges (`local source -> local target`).
    pub fn edge_index(&self) -> &EdgeIndex {
        &self.edge_index
    }
    /// Weights of the sampled edges, if the graph has weights.
    pub fn edge_weight(&self) -> Option<&Tensor> {
        self.edge_weight.as_ref().map(|p| &p.tensor)
    }
    /// Labels of the batch's nodes (`u32 [num_nodes]`), if the graph has labels.
    pub fn y(&self) -> Option<&Tensor> {
        self.y.as_ref().map(|p| &p.tensor)
    }
    /// Global ids of the batch's nodes (`u32 [num_nodes]`), seeds first.
    pub fn n_id(&self) -> &Tensor {
        &self.n_id.tensor
    }
    /// Global ids of the sampled edges (`u32 [num_edges]`).
    pub fn e_id(&self) -> &Tensor {
        &self.e_id.tensor
    }
    /// Global ids of the batch's nodes, host copy (kept when the batch moves, like an
    /// [`EdgeIndex`]'s host ids).
    pub fn n_id_host(&self) -> &[u32] {
        &self.n_id_host
    }
    /// Nodes added per hop, `[seeds, hop 1, ...]` (PyG's `num_sampled_nodes`).
    pub fn num_sampled_nodes(&self) -> &[usize] {
        &self.num_sampled_nodes
    }
    /// Edges added per hop (PyG's `num_sampled_edges`).
    pub fn num_sampled_edges(&self) -> &[usize] {
        &self.num_sampled_edges
    }

    /// Where the features live.
    pub fn placement(&self) -> &Placement {
        &self.x.at
    }

    /// Every part that is present, with its placement.
    pub fn placements(&self) -> Vec<(BatchPart, &Placement)> {
        let mut out = vec![
            (BatchPart::X, &self.x.at),
            (BatchPart::EdgeIndex, self.edge_index.placement()),
        ];
        if let Some(p) = &self.edge_weight {
            out.push((BatchPart::EdgeWeight, &p.at));
        }
        if let Some(p) = &self.y {
            out.push((BatchPart::Y, &p.at));
        }
        out.push((BatchPart::NId, &self.n_id.at));
        out.push((BatchPart::EId, &self.e_id.at));
        out
    }

    /// Bytes [`Batch::to_device`] copies: every part's payload.
    pub fn bytes(&self) -> u64 {
        let ei = 2 * 4 * self.num_edges() as u64;
        bytes_of(&self.x.tensor)
            + ei
            + self.edge_weight.as_ref().map_or(0, |p| bytes_of(&p.tensor))
            + self.y.as_ref().map_or(0, |p| bytes_of(&p.tensor))
            + bytes_of(&self.n_id.tensor)
            + bytes_of(&self.e_id.tensor)
    }

    /// Checks that every part is on `expected` (described as `expected_what`), naming the
    /// first part that is not: `batch.y`, `batch.n_id`, ...
    pub fn check_on(&self, expected_what: &str, expected: &Placement) -> Result<()> {
        let items: Vec<Placed> = self
            .placements()
            .into_iter()
            .map(|(part, at)| Placed::new(part.name(), Role::BatchPart, at))
            .collect();
        check_all(expected_what, expected, &items)
    }

    /// A copy of the whole batch on `to` (PyG: `batch = batch.to(device)`), every part recorded
    /// in the ledger under its name. Parts already there are not copied.
    pub fn to_device(&self, to: impl Into<Placement>) -> Result<Self> {
        let to = to.into();
        let mut b = self.clone();
        for part in BatchPart::ALL {
            b = b.move_part(part, &to)?;
        }
        Ok(b)
    }

    /// A copy with only `part` moved to `to` (PyG: `batch.x = batch.x.to(device)`): the way
    /// labels or `n_id` get left behind.
    pub fn move_part(&self, part: BatchPart, to: &Placement) -> Result<Self> {
        let mut b = self.clone();
        let to = self.x.at.destination(to);
        let what = part.name();
        match part {
            BatchPart::X => b.x = self.x.moved(&to, what)?,
            BatchPart::EdgeIndex => b.edge_index = self.edge_index.to_device_named(&to, what)?,
            BatchPart::EdgeWeight => {
                if let Some(p) = &self.edge_weight {
                    b.edge_weight = Some(p.moved(&to, what)?);
                }
            }
            BatchPart::Y => {
                if let Some(p) = &self.y {
                    b.y = Some(p.moved(&to, what)?);
                }
            }
            BatchPart::NId => b.n_id = self.n_id.moved(&to, what)?,
            BatchPart::EId => b.e_id = self.e_id.moved(&to, what)?,
        }
        Ok(b)
    }
}
