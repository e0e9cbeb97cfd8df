//! Mini-batch training: the model moves once, every batch moves every step.
//!
//! PyG's loop, step for step:
//!
//! ```text
//! model = model.to(device)                       # once
//! for batch in train_loader:                     # sampled on the host
//!     batch = batch.to(device)                   # every step, every part
//!     out = model(batch.x, batch.edge_index)
//!     loss = F.cross_entropy(out[:batch.batch_size], batch.y[:batch.batch_size])
//!     loss.backward(); optimizer.step()
//! ```
//!
//! A [`MiniBatchTrainer`] keeps the graph on the host and the model on `device`. Each epoch it
//! walks the [`NeighborLoader`] (optionally [prefetched](crate::loader::Prefetch)), moves each
//! batch whole with [`Batch::to_device`](crate::loader::Batch::to_device), checks it (a part
//! left behind is named: `batch.y`, `batch.n_id`), and steps. Evaluation is by batches over
//! the split's nodes ([`Eval::Batches`]) or one full-graph pass on a copy of the graph moved
//! to the device once ([`Eval::FullGraph`], for graphs that fit), or skipped for timing the
//! training pass alone ([`Eval::Skip`], accuracies NaN). Per epoch one read-back
//! (loss and counts) crosses to the host, as in full-batch training. Step timings (prepare,
//! wait, copy, compute) are kept for the timeline figure and the bench.
//!
//! ```
//! use workbook::{datasets, placement::Placement, ModelConfig};
//! use workbook::train::{TrainConfig, minibatch::{MiniBatchConfig, MiniBatchTrainer}};
//! let g = datasets::karate(&Placement::cpu()).unwrap();
//! let config = ModelConfig::gcn(g.num_features(), 8, g.num_classes());
//! let mb = MiniBatchConfig::new(&[5, 5], 2);
//! let mut t = MiniBatchTrainer::new(config, &g, &TrainConfig::gcn(), mb, &Placement::sim(1)).unwrap();
//! let e = t.epoch().unwrap();
//! assert_eq!(e.batches, 2);
//! assert!(e.stats.loss.is_finite());
//! ```

use super::adam::Adam;
use super::dropout::Dropout;
use super::evaluation::Evaluator;
use super::trainer::{EpochStats, TrainConfig};
use crate::error::{Result, WorkbookError};
use crate::graph::Graph;
use crate::loader::{Batch, InputNodes, LoaderConfig, NeighborLoader};
use crate::model::{LayerConfig, Model, ModelConfig};
use crate::placement::Placement;
use candle_core::{DType, Tensor};

/// The label of the ledger mark [`MiniBatchTrainer::step`] leaves where each step begins.
pub const STEP_MARK: &str = "mini-batch step";
use serde::Serialize;
use std::time::Instant;

pub use super::evaluation::Eval;

/// Mini-batch settings (PyG's names).
#[derive(Clone, Debug)]
pub struct MiniBatchConfig {
    /// Neighbours per hop, one entry per layer (`[10, 10]`; `-1`: all).
    pub num_neighbors: Vec<i64>,
    /// Seed (training) nodes per batch.
    pub batch_size: usize,
    /// Prepare up to this many batches ahead on a background thread (0: in the loop).
    pub prefetch: usize,
    /// How to evaluate.
    pub eval: Eval,
}

impl MiniBatchConfig {
    /// No prefetch; evaluation by batches with every neighbour (`-1` per hop), 1024 seeds each.
    pub fn new(num_neighbors: &[i64], batch_size: usize) -> Self {
        Self {
            num_neighbors: num_neighbors.to_vec(),
            batch_size,
            prefetch: 0,
            eval: Eval::Batches {
                num_neighbors: vec![-1; num_neighbors.len()],
                batch_size: 1024,
            },
        }
    }
}

/// Timings of one training step, in milliseconds since the epoch started.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct StepTiming {
    /// Sampling and gathering the batch's rows (on the prefetch thread or in the loop).
    pub prepare: (f64, f64),
    /// Whether `prepare` ran on the prefetch thread.
    pub prepared_in_background: bool,
    /// The loop waiting for the batch (receiving it, or preparing it inline).
    pub wait: (f64, f64),
    /// `batch.to_device`.
    pub copy: (f64, f64),
    /// Forward, backward and optimiser step (device synchronised at the end).
    pub compute: (f64, f64),
    /// Bytes the copy moved (0 on the `cpu`, where nothing moves).
    pub bytes: u64,
}

/// What one mini-batch epoch measured.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct MiniBatchEpoch {
    /// Loss (mean over the training seeds) and accuracies; `step_ms` is the whole training
    /// pass over the batches (sampling included).
    pub stats: EpochStats,
    /// Batches in the epoch.
    pub batches: usize,
    /// Per-step timings.
    pub steps: Vec<StepTiming>,
}

impl MiniBatchEpoch {
    /// Milliseconds spent preparing batches (summed over steps, wherever it ran).
    pub fn prepare_ms(&self) -> f64 {
        self.steps.iter().map(|s| s.prepare.1 - s.prepare.0).sum()
    }
    /// Milliseconds the loop spent waiting for batches.
    pub fn wait_ms(&self) -> f64 {
        self.steps.iter().map(|s| s.wait.1 - s.wait.0).sum()
    }
    /// Bytes moved to the device per step, on average.
    pub fn bytes_per_step(&self) -> f64 {
        let total: u64 = self.steps.iter().map(|s| s.bytes).sum();
        total as f64 / self.steps.len().max(1) as f64
    }
}

/// A mini-batch training run in progress (see the module docs).
pub struct MiniBatchTrainer {
    model: Model,
    opt: Adam,
    dropout: Dropout,
    device: Placement,
    loader: NeighborLoader,
    evaluator: Evaluator,
    config: MiniBatchConfig,
    history: Vec<MiniBatchEpoch>,
}

impl MiniBatchTrainer {
    /// A fresh model (seeded) on `device`, a training loader over the graph's training nodes
    /// (shuffled, seeded) and the evaluation loaders. The graph stays on the host.
    pub fn new(
        model_config: ModelConfig,
        graph: &Graph,
        train_config: &TrainConfig,
        config: MiniBatchConfig,
        device: &Placement,
    ) -> Result<Self> {
        if let Some(l) = device.ledger() {
            l.set_phase("init");
        }
        let layers = model_config.layers.len();
        let loader = training_loader(
            graph,
            &model_config,
            train_config,
            &config,
            config.batch_size,
        )?;
        check_minibatch_fits(&model_config, graph, &config, 1)?;
        let evaluator = Evaluator::new(graph, &config.eval, layers, train_config.seed, device)?;
        let (model, _) = Model::init(model_config, train_config.seed, device)?;
        let opt = train_config.optimizer(&model)?;
        let dropout = train_config.dropout(device.device());
        Ok(Self {
            model,
            opt,
            dropout,
            device: device.clone(),
            loader,
            evaluator,
            config,
            history: Vec::new(),
        })
    }

    /// The model being trained.
    pub fn model(&self) -> &Model {
        &self.model
    }

    /// The training loader.
    pub fn loader(&self) -> &NeighborLoader {
        &self.loader
    }

    /// Every epoch so far.
    pub fn history(&self) -> &[MiniBatchEpoch] {
        &self.history
    }

    /// One training step on `batch`, which must already be on the model's device. Returns the
    /// loss tensor (on the device, not read back). The device's ledger, if any, is marked
    /// [`STEP_MARK`] where the step begins, so that the copies of each batch can be told apart
    /// from those of the batches before it.
    pub fn step(&mut self, batch: &Batch) -> Result<Tensor> {
        batch.check_on("model parameters", self.model.placement())?;
        self.opt.check_placement()?;
        if let Some(l) = self.device.ledger() {
            l.mark(STEP_MARK);
        }
        let y = batch.y().ok_or_else(|| {
            WorkbookError::InvalidGraph("the batch has no labels (batch.y)".into())
        })?;
        let bs = batch.batch_size();
        let (model, opt, dropout) = (&self.model, &mut self.opt, &mut self.dropout);
        crate::ops::on_cpu_pool(self.device.device(), || {
            let out = model.forward_t(
                batch.x(),
                batch.edge_index(),
                batch.edge_weight(),
                Some(dropout),
            )?;
            let logits = out.logits.narrow(0, 0, bs)?;
            let loss = candle_nn::loss::cross_entropy(&logits, &y.narrow(0, 0, bs)?)?;
            opt.backward_step(&loss)?;
            Ok(loss)
        })
    }

    /// One epoch: a pass over the training batches (ledger phase `epoch N`), then evaluation
    /// (phase `eval N`, ending with the one read-back of loss and accuracies).
    pub fn epoch(&mut self) -> Result<MiniBatchEpoch> {
        let epoch = self.history.len() + 1;
        if let Some(l) = self.device.ledger() {
            l.set_phase(format!("epoch {epoch}"));
        }
        let t0 = Instant::now();
        let ms = |t: Instant| (t - t0).as_secs_f64() * 1e3;
        let loader = self.loader.clone();
        let mut batches: Box<dyn Iterator<Item = Result<Batch>>> = if self.config.prefetch > 0 {
            Box::new(loader.prefetch(epoch as u64, self.config.prefetch))
        } else {
            Box::new(loader.batches(epoch as u64))
        };
        let mut steps = Vec::with_capacity(loader.len());
        let mut loss_sum: Option<Tensor> = None;
        let mut seeds = 0usize;
        loop {
            let wait_start = Instant::now();
            let Some(batch) = batches.next() else { break };
            let batch = batch?;
            let wait_end = Instant::now();
            let moved = batch.to_device(&self.device)?;
            let copy_end = Instant::now();
            let loss = self.step(&moved)?;
            let bs = batch.batch_size();
            let weighted = (loss.detach().to_dtype(DType::F32)? * bs as f64)?;
            loss_sum = Some(match loss_sum {
                Some(s) => (s + weighted)?,
                None => weighted,
            });
            seeds += bs;
            // GPU work is queued asynchronously; wait so the step's time is the whole step.
            self.device.device().synchronize()?;
            let end = Instant::now();
            let p = batch.prepared();
            steps.push(StepTiming {
                prepare: (ms(p.start), ms(p.end)),
                prepared_in_background: p.in_background,
                wait: (ms(wait_start), ms(wait_end)),
                copy: (ms(wait_end), ms(copy_end)),
                compute: (ms(copy_end), ms(end)),
                // What to_device copied: nothing when the device is the cpu itself.
                bytes: if self.device.is_cpu() {
                    0
                } else {
                    batch.bytes()
                },
            });
        }
        drop(batches);
        let step_ms = ms(Instant::now());
        // Evaluation traffic apart from the training steps': phase `eval N`.
        if let Some(l) = self.device.ledger() {
            l.set_phase(format!("eval {epoch}"));
        }
        let loss_sum = loss_sum.expect("the loader has at least one batch");
        let mean_loss = (loss_sum / seeds as f64)?.reshape(1)?;
        let stats = self
            .evaluator
            .epoch_stats(&self.model, &mean_loss, epoch, step_ms)?;
        super::trainer::stop_if_not_finite(
            &stats,
            &self.model,
            Some(self.loader.features()),
            self.loader.edge_weight(),
            self.opt.lr(),
        )?;
        let out = MiniBatchEpoch {
            stats,
            batches: steps.len(),
            steps,
        };
        self.history.push(out.clone());
        Ok(out)
    }

    /// Correct predictions among `batch`'s seeds (a scalar on the device).
    pub fn batch_correct(&self, batch: &Batch) -> Result<Tensor> {
        super::evaluation::batch_correct(&self.model, batch)
    }
}

/// The shuffled, seeded loader over `graph`'s training nodes, `batch_size` seeds per batch,
/// after checking that `config.num_neighbors` has one count per layer of `model_config` and
/// that the graph has labels, a split and training nodes.
pub(crate) fn training_loader(
    graph: &Graph,
    model_config: &ModelConfig,
    train_config: &TrainConfig,
    config: &MiniBatchConfig,
    batch_size: usize,
) -> Result<NeighborLoader> {
    let layers = model_config.layers.len();
    if config.num_neighbors.len() != layers {
        return Err(WorkbookError::InvalidConfig(format!(
            "num_neighbors has {} hop(s) but the model has {layers} layer(s): give one count per layer, e.g. --num-neighbors {}",
            config.num_neighbors.len(),
            vec!["10"; layers].join(",")
        )));
    }
    // PyG's GCNConv(cached=True) is "only for transductive learning": it keeps the first
    // graph's normalisation, and every mini-batch is a new graph (same size, other edges: a
    // silently wrong step), so it is refused here rather than left to the layer.
    if let Some(k) = model_config
        .layers
        .iter()
        .position(|l| matches!(l, LayerConfig::Gcn(c) if c.cached))
    {
        return Err(WorkbookError::InvalidConfig(format!(
            "layer {} is a GCNConv with cached=true, which keeps the first graph's normalised edges; every mini-batch is a new graph, so build it with cached=false (PyG: cached=True is for one fixed graph, in transductive learning)",
            k + 1
        )));
    }
    if graph.y().is_none() || graph.split().is_none() {
        return Err(WorkbookError::InvalidGraph(format!(
            "graph '{}' has no labels or split; training needs y and train/val/test masks",
            graph.name
        )));
    }
    let loader = NeighborLoader::new(
        graph,
        LoaderConfig {
            input_nodes: InputNodes::Train,
            shuffle: true,
            seed: train_config.seed,
            ..LoaderConfig::new(&config.num_neighbors, batch_size)
        },
    )?;
    if loader.is_empty() {
        return Err(WorkbookError::InvalidGraph(format!(
            "graph '{}' has no training nodes",
            graph.name
        )));
    }
    Ok(loader)
}

/// Trains a fresh model by mini-batches for `train_config.epochs` epochs, calling `on_epoch`
/// after each.
pub fn train_minibatch(
    model_config: ModelConfig,
    graph: &Graph,
    train_config: &TrainConfig,
    config: MiniBatchConfig,
    device: &Placement,
    mut on_epoch: impl FnMut(&MiniBatchEpoch),
) -> Result<MiniBatchTrainer> {
    crate::limits::check_count("epochs", train_config.epochs, 1)?;
    let mut t = MiniBatchTrainer::new(model_config, graph, train_config, config, device)?;
    for _ in 0..train_config.epochs {
        let e = t.epoch()?;
        on_epoch(&e);
    }
    Ok(t)
}

/// Refuses mini-batch training of `config` on `graph` with `mb` over `devices` devices (the
/// global batch split between them) when [`crate::limits::minibatch_bytes`] and the evaluation (a full-graph
/// forward pass, or one on an evaluation batch) cannot fit; the error names the batch size and
/// the neighbours per hop.
pub fn check_minibatch_fits(
    config: &ModelConfig,
    graph: &Graph,
    mb: &MiniBatchConfig,
    devices: usize,
) -> Result<()> {
    let (n, e) = (graph.num_nodes(), graph.num_edges());
    let per_device = mb.batch_size / devices.max(1);
    let train = crate::limits::minibatch_bytes(
        config,
        n,
        e,
        per_device,
        &mb.num_neighbors,
        devices.max(1).saturating_add(mb.prefetch),
    );
    let eval = match &mb.eval {
        Eval::FullGraph => crate::limits::inference_bytes(config, n, e),
        Eval::Batches {
            num_neighbors,
            batch_size,
        } => {
            let (bn, be) = crate::limits::batch_bound(n, e, *batch_size, num_neighbors);
            crate::limits::inference_bytes(config, bn, be)
        }
        Eval::Skip => 0,
    };
    crate::limits::check_memory(
        &format!(
            "mini-batch training on {} ({n} nodes, {e} edges) in batches of {} seeds with num_neighbors {:?}",
            graph.name, mb.batch_size, mb.num_neighbors
        ),
        train.saturating_add(eval),
    )
}
