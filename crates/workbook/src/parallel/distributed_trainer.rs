//! Mini-batch epochs with one process per device: each rank's shard of the training seeds
//! ([`DistributedSampler`]), its batches sampled and moved to its device, one
//! [`DistributedDataParallel`] step per batch, and evaluation on rank 0 only.
//!
//! `batch_size` is per rank, as in PyTorch (each process's `DataLoader(batch_size=...)`): a step
//! over `N` ranks covers up to `N × batch_size` seeds, and an epoch has `1/N` of one process's
//! steps. Every rank makes the same number of steps (the largest shard's); a rank whose shard
//! has run out joins the last step with no batch. Batch `t` of rank `r` is sampled with the
//! loader's stream for batch `t·N + r` of the epoch, so a run is the same whatever the number
//! of processes it is spread over, given the shards.
//!
//! Per epoch, every rank's time in the training loop (from a barrier at its start) is gathered
//! to every rank ([`DistributedEpoch::rank_ms`]): the slowest rank sets the pace, since every
//! all-reduce waits for it.
//!
//! ```
//! use std::sync::Arc;
//! use workbook::{datasets, placement::Placement, ModelConfig};
//! use workbook::parallel::{DistributedTrainer, ThreadGroup, World};
//! use workbook::train::{TrainConfig, minibatch::MiniBatchConfig};
//! let g = datasets::karate(&Placement::cpu()).unwrap();
//! let config = ModelConfig::gcn(g.num_features(), 8, g.num_classes());
//! let epochs = ThreadGroup::run(2, |group| {
//!     let world = Arc::new(World::new(Arc::new(group)));
//!     let at = Placement::sim(world.rank() + 1);
//!     let mut t = DistributedTrainer::new(config.clone(), &g, &TrainConfig::gcn(), MiniBatchConfig::new(&[5, 5], 1), world, &at)?;
//!     t.epoch()
//! });
//! let e0 = epochs[0].as_ref().unwrap();
//! assert_eq!(e0.steps, 2);              // karate's 4 training nodes: 2 per rank, 1 per step
//! assert!(e0.stats.is_some() && epochs[1].as_ref().unwrap().stats.is_none()); // rank 0 evaluates
//! assert!(e0.in_sync);
//! ```

use super::ddp::DistributedDataParallel;
use super::distributed_sampler::DistributedSampler;
use super::world::{fingerprint, World};
use crate::error::{Result, WorkbookError};
use crate::graph::Graph;
use crate::loader::NeighborLoader;
use crate::model::{Model, ModelConfig};
use crate::placement::Placement;
use crate::train::evaluation::Evaluator;
use crate::train::minibatch::{training_loader, MiniBatchConfig};
use crate::train::{EpochStats, TrainConfig};
use candle_core::{Device, Tensor};
use serde::Serialize;
use std::sync::Arc;
use std::time::Instant;

/// What one distributed epoch measured, on one rank.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct DistributedEpoch {
    /// The epoch, from 1.
    pub epoch: usize,
    /// Mean loss over every rank's training seeds (the same on every rank).
    pub loss: f32,
    /// Rank 0's evaluation (accuracies, loss, the training loop's time); `None` on the others.
    pub stats: Option<EpochStats>,
    /// Optimiser steps (the same on every rank).
    pub steps: usize,
    /// This rank's batches (fewer than `steps` when its shard ran out first).
    pub batches: usize,
    /// This rank's training seeds this epoch.
    pub seeds: usize,
    /// Every rank's time in the training loop, milliseconds, by rank.
    pub rank_ms: Vec<f64>,
    /// Whether every rank's parameters equalled rank 0's, bit for bit, after the last step.
    pub in_sync: bool,
}

/// Distributed mini-batch training on one rank (see the module docs).
pub struct DistributedTrainer {
    ddp: DistributedDataParallel,
    loader: NeighborLoader,
    sampler: DistributedSampler,
    evaluator: Option<Evaluator>,
    config: MiniBatchConfig,
    history: Vec<DistributedEpoch>,
}

impl DistributedTrainer {
    /// This rank's trainer: the model initialised as one process would (seeded, on the host),
    /// moved to `at`, rank 0's parameters broadcast; `config.batch_size` seeds per rank and step.
    /// Every rank must pass the same graph and configs (checked: a fingerprint of each).
    pub fn new(
        model_config: ModelConfig,
        graph: &Graph,
        train_config: &TrainConfig,
        config: MiniBatchConfig,
        world: Arc<World>,
        at: &Placement,
    ) -> Result<Self> {
        world.agree(
            "the graph (name, nodes, edges, training nodes)",
            fingerprint(&format!(
                "{} {} {} {:?}",
                graph.name,
                graph.num_nodes(),
                graph.num_edges(),
                graph.split().map(|s| s.train.elem_count())
            )),
        )?;
        world.agree(
            "the mini-batch settings (neighbours per hop, batch size)",
            fingerprint(&format!("{:?} {}", config.num_neighbors, config.batch_size)),
        )?;
        let loader = training_loader(
            graph,
            &model_config,
            train_config,
            &config,
            config.batch_size,
        )?;
        crate::train::minibatch::check_minibatch_fits(&model_config, graph, &config, 1)?;
        let layers = model_config.layers.len();
        let evaluator = if world.is_main() {
            Some(Evaluator::new(
                graph,
                &config.eval,
                layers,
                train_config.seed,
                at,
            )?)
        } else {
            None
        };
        let sampler = DistributedSampler::new(world.world_size(), world.rank(), train_config.seed)?;
        let (model, _) = Model::init(model_config, train_config.seed, Placement::cpu())?;
        let ddp = DistributedDataParallel::new(&model, world, at, train_config)?;
        Ok(Self {
            ddp,
            loader,
            sampler,
            evaluator,
            config,
            history: Vec::new(),
        })
    }

    /// The distributed model.
    pub fn ddp(&self) -> &DistributedDataParallel {
        &self.ddp
    }

    /// Unwraps: the trained model.
    pub fn into_module(self) -> Model {
        self.ddp.into_module()
    }

    /// This rank's sampler.
    pub fn sampler(&self) -> &DistributedSampler {
        &self.sampler
    }

    /// The loader over every training seed (each rank samples its shard's batches from it).
    pub fn loader(&self) -> &NeighborLoader {
        &self.loader
    }

    /// Every epoch so far, as this rank saw it.
    pub fn history(&self) -> &[DistributedEpoch] {
        &self.history
    }

    /// One epoch on every rank: the training steps over this rank's shard, the parameters'
    /// check across ranks, every rank's loop time gathered, and rank 0's evaluation.
    pub fn epoch(&mut self) -> Result<DistributedEpoch> {
        let epoch = self.history.len() + 1;
        let world = self.ddp.world().clone();
        let at = self.ddp.placement().clone();
        let ledger = at.ledger().cloned();
        if let Some(l) = &ledger {
            l.set_phase(format!("epoch {epoch}"));
        }
        let (w, r) = (world.world_size(), world.rank());
        let all = self.loader.seeds();
        let shard = self.sampler.shard(all, epoch as u64);
        let bs = self.config.batch_size;
        let steps = self.sampler.steps(all.len(), bs);
        // Rank 0 evaluated the last epoch while the others went on: without this barrier their
        // loop times would include that wait in their first all-reduce.
        world.barrier("epoch start")?;
        let t0 = Instant::now();
        let (mut loss_sum, mut seeds, mut batches) = (0f64, 0usize, 0usize);
        for t in 0..steps {
            let chunk = shard.get(t * bs..((t + 1) * bs).min(shard.len()));
            let batch = match chunk {
                Some(c) if !c.is_empty() => {
                    batches += 1;
                    Some(
                        self.loader
                            .batch_of(epoch as u64, t * w + r, c)?
                            .to_device(&at)?,
                    )
                }
                _ => None,
            };
            let step = self.ddp.step(batch.as_ref())?;
            loss_sum += step.loss as f64 * step.seeds as f64;
            seeds += step.seeds;
        }
        at.device().synchronize()?;
        let mine_ms = t0.elapsed().as_secs_f64() * 1e3;
        let mut times = vec![0f32; w];
        times[r] = mine_ms as f32;
        world.all_reduce_sum(&mut times, "loop times")?;
        let sync = self.ddp.check_in_sync()?;
        let loss = (loss_sum / seeds.max(1) as f64) as f32;
        let stats = match &mut self.evaluator {
            Some(ev) => {
                let mean = Tensor::new(&[loss], &Device::Cpu)?;
                let mean = at.move_tensor(&mean, &Placement::cpu(), "epoch loss")?;
                let stats = ev.epoch_stats(self.ddp.module(), &mean, epoch, mine_ms)?;
                crate::train::trainer::stop_if_not_finite(
                    &stats,
                    self.ddp.module(),
                    Some(self.loader.features()),
                    self.loader.edge_weight(),
                    self.ddp.optimizer().lr(),
                )?;
                Some(stats)
            }
            None => None,
        };
        if !loss.is_finite() {
            return Err(WorkbookError::Mismatched(format!(
                "epoch {epoch}: the loss over every rank is {loss}; rank 0 says why"
            )));
        }
        let out = DistributedEpoch {
            epoch,
            loss,
            stats,
            steps,
            batches,
            seeds: shard.len(),
            rank_ms: times.iter().map(|&t| t as f64).collect(),
            in_sync: sync.in_sync,
        };
        self.history.push(out.clone());
        Ok(out)
    }
}
