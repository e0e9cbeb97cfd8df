//! `NeighborLoader`: seed nodes in batches, each with its sampled multi-hop neighbourhood.
//!
//! PyG's names and semantics: `num_neighbors` per hop (`[10, 10]`; `-1` takes all), `batch_size`
//! seeds per batch, `input_nodes` (all nodes, a split, ids or a mask), `shuffle`. The loader is
//! seeded: batch `b` of epoch `e` is the same however it is produced (in the loop, or ahead of
//! time on the [prefetch](crate::loader::Prefetch) thread).
//!
//! The loader samples and gathers **on the host**: the graph it is built from must be on the
//! `cpu`, and each batch gathers its own rows of the features there (no copy of the graph is
//! made). A graph or `input_nodes` already on a device is refused with
//! [`WorkbookError::SamplerInputOnDevice`]. That is stricter than PyG: PyG 2.3 died on
//! `input_nodes` on the GPU (issue 7691), but since 2.4 (PR 7572) its sampler copies its inputs
//! to the CPU itself and a graph whose features live on the GPU is supported (the features are
//! then gathered there). This loader copies nothing behind your back, so that every copy in a
//! mini-batch loop is one the loop makes and the [ledger](crate::ledger) shows.
//!
//! ```
//! use workbook::{datasets, loader::{NeighborLoader, LoaderConfig, InputNodes}, placement::Placement};
//! let g = datasets::karate(&Placement::cpu()).unwrap();
//! let config = LoaderConfig { input_nodes: InputNodes::Train, shuffle: true, ..LoaderConfig::new(&[10, 10], 2) };
//! let loader = NeighborLoader::new(&g, config).unwrap();
//! assert_eq!(loader.len(), 2); // karate has 4 training nodes
//! for batch in loader.batches(0) {
//!     let batch = batch.unwrap();
//!     assert_eq!(batch.batch_size(), 2);
//!     assert!(batch.num_nodes() >= 2);
//! }
//! // Sampling needs host data: a graph moved to a device first is refused, with the fix.
//! let on_sim = g.to_device(&Placement::sim(1)).unwrap();
//! let err = NeighborLoader::new(&on_sim, LoaderConfig::new(&[10], 2)).unwrap_err();
//! assert!(err.to_string().contains("samples and gathers on the host"));
//! ```

use super::batch::{Batch, Prepared};
use super::sampler::{check_num_neighbors, NeighborSampler};
use crate::edge_index::EdgeIndex;
use crate::error::{Result, WorkbookError};
use crate::graph::Graph;
use crate::placement::Placement;
use candle_core::Tensor;
use rand::seq::SliceRandom;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use std::sync::Arc;
use std::time::Instant;

/// Which nodes are seeds (PyG's `input_nodes`).
#[derive(Clone, Debug, Default)]
pub enum InputNodes {
    /// Every node.
    #[default]
    All,
    /// The graph's training split (PyG: `input_nodes=data.train_mask`).
    Train,
    /// The validation split.
    Val,
    /// The test split.
    Test,
    /// These node ids.
    Ids(Vec<u32>),
    /// The nodes whose entry is `true` (length: the number of nodes).
    Mask(Vec<bool>),
    /// Ids in a tensor that lives on `at`: must be the host (`cpu`).
    Tensor { ids: Tensor, at: Placement },
}

/// The loader's settings, PyG's names.
#[derive(Clone, Debug)]
pub struct LoaderConfig {
    /// Neighbours sampled per node, one entry per hop (`-1`: all of them).
    pub num_neighbors: Vec<i64>,
    /// Seed nodes per batch.
    pub batch_size: usize,
    /// Which nodes are seeds.
    pub input_nodes: InputNodes,
    /// Shuffle the seeds every epoch (PyG's default is `false`; training wants `true`).
    pub shuffle: bool,
    /// Seeds the shuffle and the sampling.
    pub seed: u64,
}

impl LoaderConfig {
    /// All nodes as seeds, no shuffle, seed 0.
    pub fn new(num_neighbors: &[i64], batch_size: usize) -> Self {
        Self {
            num_neighbors: num_neighbors.to_vec(),
            batch_size,
            input_nodes: InputNodes::All,
            shuffle: false,
            seed: 0,
        }
    }
}

/// What the loader and its prefetch thread share.
#[derive(Debug)]
pub(crate) struct Shared {
    sampler: NeighborSampler,
    x: Tensor,
    y: Option<Tensor>,
    edge_weight: Option<Tensor>,
    seeds: Vec<u32>,
    config: LoaderConfig,
}

/// Mini-batches of seed nodes with their sampled neighbourhoods (see the module docs).
#[derive(Clone, Debug)]
pub struct NeighborLoader {
    shared: Arc<Shared>,
}

impl NeighborLoader {
    /// Builds the CSC of `graph` once and resolves the seeds. The graph must be on the host.
    pub fn new(graph: &Graph, config: LoaderConfig) -> Result<Self> {
        check_num_neighbors(&config.num_neighbors)?;
        if config.batch_size == 0 {
            return Err(WorkbookError::InvalidConfig(
                "batch_size is 0: give the number of seed nodes per batch, e.g. 128".into(),
            ));
        }
        if let Some((part, at)) = graph.placements().into_iter().find(|(_, at)| !at.is_cpu()) {
            return Err(WorkbookError::SamplerInputOnDevice {
                what: format!("the graph's {}", part.name()),
                found: at.to_string(),
            });
        }
        let n = graph.num_nodes();
        let seeds = resolve(&config.input_nodes, graph)?;
        let ei = graph.edge_index();
        let sampler = NeighborSampler::new(ei.sources_host(), ei.targets_host(), n)?;
        Ok(Self {
            shared: Arc::new(Shared {
                sampler,
                x: graph.x().clone(),
                y: graph.y().cloned(),
                edge_weight: graph.edge_weight().cloned(),
                seeds,
                config,
            }),
        })
    }

    /// The whole graph's node features (on the host), which batches gather from.
    pub fn features(&self) -> &Tensor {
        &self.shared.x
    }

    /// The whole graph's edge weights, if it has them.
    pub fn edge_weight(&self) -> Option<&Tensor> {
        self.shared.edge_weight.as_ref()
    }

    /// The settings.
    pub fn config(&self) -> &LoaderConfig {
        &self.shared.config
    }

    /// The seed nodes, in input order.
    pub fn seeds(&self) -> &[u32] {
        &self.shared.seeds
    }

    /// Batches per epoch (the last one may be smaller).
    pub fn len(&self) -> usize {
        self.shared
            .seeds
            .len()
            .div_ceil(self.shared.config.batch_size)
    }

    /// Whether there are no seeds at all.
    pub fn is_empty(&self) -> bool {
        self.shared.seeds.is_empty()
    }

    /// The sampler over the graph's CSC.
    pub fn sampler(&self) -> &NeighborSampler {
        &self.shared.sampler
    }

    /// The seeds of every batch of `epoch`, in order (shuffled when `shuffle` is on).
    pub fn epoch_seeds(&self, epoch: u64) -> Vec<Vec<u32>> {
        self.shared.epoch_seeds(epoch)
    }

    /// The batches of `epoch`, prepared one by one in the calling thread.
    pub fn batches(&self, epoch: u64) -> impl Iterator<Item = Result<Batch>> + '_ {
        let shared = &self.shared;
        shared
            .epoch_seeds(epoch)
            .into_iter()
            .enumerate()
            .map(move |(b, seeds)| shared.batch(epoch, b, &seeds, false))
    }

    /// Batch `b` of `epoch` alone.
    pub fn batch(&self, epoch: u64, b: usize) -> Result<Batch> {
        let all = self.shared.epoch_seeds(epoch);
        let seeds = all.get(b).ok_or_else(|| {
            WorkbookError::Mismatched(format!(
                "batch {b} does not exist: an epoch has {} batches",
                all.len()
            ))
        })?;
        self.shared.batch(epoch, b, seeds, false)
    }

    /// A batch around `seeds` of your choosing (a rank's shard, say), sampled with the stream
    /// of batch `b` of `epoch`: the same arguments give the same batch in any process. Every
    /// seed must be a node of the graph.
    pub fn batch_of(&self, epoch: u64, b: usize, seeds: &[u32]) -> Result<Batch> {
        let n = self.shared.sampler.num_nodes();
        if let Some(bad) = seeds.iter().find(|&&s| s as usize >= n) {
            return Err(WorkbookError::InvalidConfig(format!(
                "seed {bad} is not a node of the graph (it has {n} nodes)"
            )));
        }
        self.shared.batch(epoch, b, seeds, false)
    }

    pub(crate) fn shared(&self) -> Arc<Shared> {
        self.shared.clone()
    }
}

impl Shared {
    pub(crate) fn epoch_seeds_pub(&self, epoch: u64) -> Vec<Vec<u32>> {
        self.epoch_seeds(epoch)
    }

    fn epoch_seeds(&self, epoch: u64) -> Vec<Vec<u32>> {
        let mut order = self.seeds.clone();
        if self.config.shuffle {
            let mut rng = ChaCha8Rng::seed_from_u64(mix(&[self.config.seed, epoch, u64::MAX]));
            order.shuffle(&mut rng);
        }
        order
            .chunks(self.config.batch_size)
            .map(<[u32]>::to_vec)
            .collect()
    }

    /// Samples batch `b` of `epoch` around `seeds` and gathers its rows, on the host.
    pub(crate) fn batch(
        &self,
        epoch: u64,
        b: usize,
        seeds: &[u32],
        in_background: bool,
    ) -> Result<Batch> {
        let start = Instant::now();
        let mut rng = ChaCha8Rng::seed_from_u64(mix(&[self.config.seed, epoch, b as u64]));
        let s = self
            .sampler
            .sample(seeds, &self.config.num_neighbors, &mut rng)?;
        let cpu = Placement::cpu();
        let (n, e) = (s.n_id.len(), s.e_id.len());
        let n_id_t = Tensor::from_slice(&s.n_id, n, cpu.device())?;
        let e_id_t = Tensor::from_slice(&s.e_id, e, cpu.device())?;
        let x = self.x.index_select(&n_id_t, 0)?;
        let y = self
            .y
            .as_ref()
            .map(|y| y.index_select(&n_id_t, 0))
            .transpose()?;
        let w = self
            .edge_weight
            .as_ref()
            .map(|w| w.index_select(&e_id_t, 0))
            .transpose()?;
        let edge_index = EdgeIndex::from_u32(s.src, s.dst, n, &cpu)?;
        let end = Instant::now();
        Batch::on_host(
            seeds.len(),
            x,
            edge_index,
            w,
            y,
            (s.n_id, n_id_t),
            e_id_t,
            s.num_sampled_nodes,
            s.num_sampled_edges,
            Prepared {
                start,
                end,
                in_background,
            },
        )
    }
}

/// The seed ids `input_nodes` names, checked against the graph.
fn resolve(input: &InputNodes, graph: &Graph) -> Result<Vec<u32>> {
    let n = graph.num_nodes();
    let split = |which: &str| -> Result<Vec<u32>> {
        let s = graph.split().ok_or_else(|| {
            WorkbookError::InvalidConfig(format!(
                "input_nodes = {which} but graph '{}' has no split; give ids or a mask",
                graph.name
            ))
        })?;
        let t = match which {
            "train" => &s.train,
            "val" => &s.val,
            _ => &s.test,
        };
        Ok(t.to_vec1::<u32>()?)
    };
    let ids = match input {
        InputNodes::All => (0..n as u32).collect(),
        InputNodes::Train => split("train")?,
        InputNodes::Val => split("val")?,
        InputNodes::Test => split("test")?,
        InputNodes::Ids(ids) => ids.clone(),
        InputNodes::Mask(mask) => {
            if mask.len() != n {
                return Err(WorkbookError::InvalidConfig(format!(
                    "input_nodes mask has {} entries but the graph has {n} nodes",
                    mask.len()
                )));
            }
            (0..n as u32).filter(|&i| mask[i as usize]).collect()
        }
        InputNodes::Tensor { ids, at } => {
            if !at.is_cpu() || !ids.device().is_cpu() {
                return Err(WorkbookError::SamplerInputOnDevice {
                    what: "input_nodes".into(),
                    found: if at.is_cpu() {
                        Placement::of(ids.device()).to_string()
                    } else {
                        at.to_string()
                    },
                });
            }
            match ids.dtype() {
                candle_core::DType::U32 => ids.to_vec1::<u32>()?,
                candle_core::DType::I64 => ids
                    .to_vec1::<i64>()?
                    .into_iter()
                    .map(|v| u32::try_from(v).unwrap_or(u32::MAX))
                    .collect(),
                other => {
                    return Err(WorkbookError::InvalidConfig(format!(
                        "input_nodes must hold u32 or i64 node ids, got {other:?}"
                    )))
                }
            }
        }
    };
    let mut seen = vec![false; n];
    for &i in &ids {
        if i as usize >= n {
            return Err(WorkbookError::InvalidConfig(format!(
                "input_nodes names node {i} but the graph has {n} nodes"
            )));
        }
        if std::mem::replace(&mut seen[i as usize], true) {
            return Err(WorkbookError::InvalidConfig(format!(
                "input_nodes names node {i} twice; seeds must be distinct"
            )));
        }
    }
    Ok(ids)
}

/// A 64-bit seed from several numbers (SplitMix64 steps), so that every (seed, epoch, batch)
/// gets its own stream.
fn mix(parts: &[u64]) -> u64 {
    let mut h = 0x9E37_79B9_7F4A_7C15u64;
    for &p in parts {
        h ^= p;
        h = h.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = h;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        h = z ^ (z >> 31);
    }
    h
}
