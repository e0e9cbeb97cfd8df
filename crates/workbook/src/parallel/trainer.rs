//! Data-parallel mini-batch training: the [`MiniBatchTrainer`](crate::train::minibatch::MiniBatchTrainer)'s
//! loop with one replica per device.
//!
//! The global batch (`batch_size` seeds per step, as with one device) is split evenly: the
//! loader yields batches of `batch_size / devices` seeds, and each step hands consecutive
//! batches to replicas 0, 1, ... so a step covers exactly the seeds one device's step would.
//! Each replica's batch is sampled on its own (its neighbourhoods are not shared with the
//! others'), so the sampled subgraphs differ from one device's; the equivalence with one device
//! holds for the same batches (see [`DataParallel`]). After every epoch the replicas are
//! compared bit for bit ([`DataParallel::check_in_sync`]); evaluation uses the first replica.
//!
//! ```
//! use workbook::{datasets, placement::Placement, ModelConfig};
//! use workbook::parallel::DataParallelTrainer;
//! use workbook::train::{TrainConfig, minibatch::MiniBatchConfig};
//! let g = datasets::karate(&Placement::cpu()).unwrap();
//! let config = ModelConfig::gcn(g.num_features(), 8, g.num_classes());
//! let devices = [Placement::sim(1), Placement::sim(2)];
//! let mut t = DataParallelTrainer::new(config, &g, &TrainConfig::gcn(), MiniBatchConfig::new(&[5, 5], 4), &devices).unwrap();
//! let e = t.epoch().unwrap();
//! assert_eq!(e.steps, 1);            // karate has 4 training nodes: 2 per device
//! assert!(e.replicas_in_sync);
//! ```

use super::data_parallel::DataParallel;
use crate::error::{Result, WorkbookError};
use crate::graph::Graph;
use crate::ledger::Ledger;
use crate::loader::{Batch, NeighborLoader};
use crate::model::{Model, ModelConfig};
use crate::placement::Placement;
use crate::train::evaluation::Evaluator;
use crate::train::minibatch::{training_loader, MiniBatchConfig};
use crate::train::{EpochStats, TrainConfig};
use candle_core::Tensor;
use serde::Serialize;
use std::time::Instant;

/// What one data-parallel epoch measured.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct DataParallelEpoch {
    /// Loss (mean over the training seeds) and the first replica's accuracies; `step_ms` is
    /// the whole training pass (sampling, copies, reduce and broadcast included).
    pub stats: EpochStats,
    /// Optimiser steps in the epoch.
    pub steps: usize,
    /// Batches in the epoch (up to one per device per step).
    pub batches: usize,
    /// Whether every replica's parameters equalled the first's, bit for bit, after the last
    /// step.
    pub replicas_in_sync: bool,
}

/// Bytes one optimiser step moves, by kind, averaged over the training phases (`epoch N`) of a
/// ledger attached to every device: gradient reduce (`reduce grad[...]`), parameter broadcast
/// (`broadcast ...`, both recorded by the [`Collective`](super::Collective)), and the batches
/// (everything else in those phases: `batch.x`, ..., and the index structures built for each
/// batch, `edge_index (CSR)`, `edge_index (self-loops)`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize)]
pub struct StepBytes {
    pub batch: f64,
    pub reduce: f64,
    pub broadcast: f64,
}

impl StepBytes {
    /// Totals over `ledger`'s `epoch N` phases, divided by `steps` (all those epochs' steps).
    pub fn from_ledger(ledger: &Ledger, steps: usize) -> Self {
        let mut sum = [0u64; 3];
        for t in ledger.transfers() {
            if !crate::ledger::is_epoch_phase(&t.phase) {
                continue;
            }
            let kind = if t.what.starts_with("reduce grad[") {
                1
            } else if t.what.starts_with("broadcast ") {
                2
            } else {
                0
            };
            sum[kind] += t.bytes;
        }
        let per = |b: u64| b as f64 / steps.max(1) as f64;
        Self {
            batch: per(sum[0]),
            reduce: per(sum[1]),
            broadcast: per(sum[2]),
        }
    }
}

/// A data-parallel training run in progress (see the module docs).
pub struct DataParallelTrainer {
    dp: DataParallel,
    loader: NeighborLoader,
    evaluator: Evaluator,
    config: MiniBatchConfig,
    history: Vec<DataParallelEpoch>,
}

impl DataParallelTrainer {
    /// A fresh model (seeded, as the single-device trainer makes it) replicated onto
    /// `devices`; `config.batch_size` is the global batch, split evenly over the devices.
    pub fn new(
        model_config: ModelConfig,
        graph: &Graph,
        train_config: &TrainConfig,
        config: MiniBatchConfig,
        devices: &[Placement],
    ) -> Result<Self> {
        let first = devices.first().ok_or_else(|| {
            WorkbookError::InvalidConfig(
                "data parallelism needs at least one device, e.g. --devices sim:1,sim:2".into(),
            )
        })?;
        let n = devices.len();
        if config.batch_size == 0 || !config.batch_size.is_multiple_of(n) {
            return Err(WorkbookError::InvalidConfig(format!(
                "batch size {} does not split evenly over {n} device(s): give a multiple of {n} (e.g. {}), the seeds per step over all devices",
                config.batch_size,
                (config.batch_size / n).max(1) * n
            )));
        }
        let layers = model_config.layers.len();
        if let Some(l) = first.ledger() {
            l.set_phase("init");
        }
        let loader = training_loader(
            graph,
            &model_config,
            train_config,
            &config,
            config.batch_size / n,
        )?;
        crate::train::minibatch::check_minibatch_fits(&model_config, graph, &config, n)?;
        let evaluator = Evaluator::new(graph, &config.eval, layers, train_config.seed, first)?;
        // Initialised on the host, as one device would be, then replicated.
        let (model, _) = Model::init(model_config, train_config.seed, Placement::cpu())?;
        let dp = DataParallel::new(&model, devices, train_config)?;
        Ok(Self {
            dp,
            loader,
            evaluator,
            config,
            history: Vec::new(),
        })
    }

    /// The data-parallel model.
    pub fn data_parallel(&self) -> &DataParallel {
        &self.dp
    }

    /// Unwraps: the trained model (the first replica).
    pub fn into_module(self) -> Model {
        self.dp.into_module()
    }

    /// The training loader (batches of `batch_size / devices` seeds).
    pub fn loader(&self) -> &NeighborLoader {
        &self.loader
    }

    /// Every epoch so far.
    pub fn history(&self) -> &[DataParallelEpoch] {
        &self.history
    }

    /// One epoch: the training steps (ledger phase `epoch N`), the replica check (`sync N`)
    /// and evaluation on the first replica (`eval N`, ending with one read-back).
    pub fn epoch(&mut self) -> Result<DataParallelEpoch> {
        let epoch = self.history.len() + 1;
        let devices = self.dp.devices().to_vec();
        let ledger = devices[0].ledger().cloned();
        let phase = |p: String| {
            if let Some(l) = &ledger {
                l.set_phase(p);
            }
        };
        phase(format!("epoch {epoch}"));
        let t0 = Instant::now();
        let loader = self.loader.clone();
        let mut batches: Box<dyn Iterator<Item = Result<Batch>>> = if self.config.prefetch > 0 {
            Box::new(loader.prefetch(epoch as u64, self.config.prefetch))
        } else {
            Box::new(loader.batches(epoch as u64))
        };
        let n = devices.len();
        // Per replica: the sum of (mean loss x seeds) over the epoch, on its device.
        let mut loss_sums: Vec<Option<Tensor>> = vec![None; n];
        let (mut seeds, mut steps, mut nbatches) = (0usize, 0usize, 0usize);
        loop {
            let group: Vec<Batch> = batches.by_ref().take(n).collect::<Result<_>>()?;
            if group.is_empty() {
                break;
            }
            let moved = self.dp.scatter(&group)?;
            let step = self.dp.step(&moved)?;
            for (k, (loss, bs)) in step.per_replica.iter().enumerate() {
                let weighted = (loss.to_dtype(candle_core::DType::F32)? * *bs as f64)?;
                loss_sums[k] = Some(match loss_sums[k].take() {
                    Some(s) => (s + weighted)?,
                    None => weighted,
                });
                seeds += bs;
            }
            steps += 1;
            nbatches += group.len();
        }
        drop(batches);
        for d in &devices {
            d.device().synchronize()?;
        }
        let step_ms = (Instant::now() - t0).as_secs_f64() * 1e3;
        phase(format!("sync {epoch}"));
        let sync = self.dp.check_in_sync()?;
        phase(format!("eval {epoch}"));
        let parts: Vec<(&Tensor, &Placement)> = loss_sums
            .iter()
            .zip(&devices)
            .filter_map(|(s, d)| s.as_ref().map(|s| (s, d)))
            .collect();
        let loss_sum = self
            .dp
            .collective()
            .reduce_sum(&parts, &devices[0], "epoch loss")?;
        let mean_loss = (loss_sum / seeds.max(1) as f64)?.reshape(1)?;
        let stats = self
            .evaluator
            .epoch_stats(self.dp.module(), &mean_loss, epoch, step_ms)?;
        crate::train::trainer::stop_if_not_finite(
            &stats,
            self.dp.module(),
            Some(self.loader.features()),
            self.loader.edge_weight(),
            self.dp.optimizer().lr(),
        )?;
        let out = DataParallelEpoch {
            stats,
            steps,
            batches: nbatches,
            replicas_in_sync: sync.in_sync,
        };
        self.history.push(out.clone());
        Ok(out)
    }
}

/// Trains a fresh model data-parallel over `devices` for `train_config.epochs` epochs,
/// calling `on_epoch` after each.
pub fn train_data_parallel(
    model_config: ModelConfig,
    graph: &Graph,
    train_config: &TrainConfig,
    config: MiniBatchConfig,
    devices: &[Placement],
    mut on_epoch: impl FnMut(&DataParallelEpoch),
) -> Result<DataParallelTrainer> {
    crate::limits::check_count("epochs", train_config.epochs, 1)?;
    let mut t = DataParallelTrainer::new(model_config, graph, train_config, config, devices)?;
    for _ in 0..train_config.epochs {
        let e = t.epoch()?;
        on_epoch(&e);
    }
    Ok(t)
}
