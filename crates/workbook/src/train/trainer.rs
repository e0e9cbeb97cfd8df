//! The full-batch training loop for node classification.
//!
//! Each epoch: a training-mode forward pass (dropout on), cross-entropy on the training nodes,
//! back-propagation, one Adam step; then an evaluation pass for train/validation/test accuracy.
//! The recipes in [`TrainConfig::gcn`] and [`TrainConfig::gatv2`] are PyG's example settings.
//!
//! The model is created where the graph is, once; per epoch only four numbers come back to the
//! host (the loss and three accuracies, in one transfer), which the
//! [transfer ledger](crate::ledger) shows. A [`Trainer`] can be moved to another device between
//! epochs (model, cached buffers and optimiser state together) and continues exactly.
//!
//! ```
//! use workbook::{datasets, ModelConfig, train::{train, TrainConfig}};
//! let g = datasets::karate(&workbook::candle_core::Device::Cpu).unwrap();
//! let config = ModelConfig::gcn(g.num_features(), 16, g.num_classes());
//! let report = train(config, &g, &TrainConfig { epochs: 5, ..TrainConfig::gcn() }, |_| {}).unwrap();
//! assert_eq!(report.history.len(), 5);
//! ```

use super::adam::Adam;
use super::dropout::Dropout;
use crate::error::{Result, WorkbookError};
use crate::graph::Graph;
use crate::model::{Model, ModelConfig};
use crate::placement::Placement;
use candle_core::{DType, Tensor, D};
use serde::Serialize;
use std::time::Instant;

/// Optimisation settings.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct TrainConfig {
    pub epochs: usize,
    pub lr: f64,
    pub weight_decay: f64,
    /// Decay only the first layer's parameters (Kipf & Welling's GCN recipe).
    pub decay_first_layer_only: bool,
    /// Seeds initialisation and dropout.
    pub seed: u64,
}

impl TrainConfig {
    /// GCN: lr 0.01, weight decay 5e-4 on the first layer, 200 epochs.
    pub fn gcn() -> Self {
        Self {
            epochs: 200,
            lr: 0.01,
            weight_decay: 5e-4,
            decay_first_layer_only: true,
            seed: 0,
        }
    }

    /// The recipe's optimiser over `model`: Adam with `lr`, and `weight_decay` on every
    /// parameter, or only on the first layer's with `decay_first_layer_only`.
    pub fn optimizer(&self, model: &Model) -> Result<Adam> {
        let first_prefix = model.config().prefix(0);
        Adam::for_model(model, self.lr, |name| {
            if !self.decay_first_layer_only || name.starts_with(&first_prefix) {
                self.weight_decay
            } else {
                0.0
            }
        })
    }

    /// The recipe's dropout masks, seeded from `seed` (initialisation uses `seed` itself).
    pub fn dropout(&self, device: &candle_core::Device) -> Dropout {
        Dropout::new(self.seed.wrapping_add(1), device)
    }

    /// GATv2: lr 0.005, weight decay 5e-4 on everything, 200 epochs.
    pub fn gatv2() -> Self {
        Self {
            epochs: 200,
            lr: 0.005,
            weight_decay: 5e-4,
            decay_first_layer_only: false,
            seed: 0,
        }
    }
}

/// What one epoch measured.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct EpochStats {
    pub epoch: usize,
    pub loss: f32,
    pub train_accuracy: f32,
    pub val_accuracy: f32,
    pub test_accuracy: f32,
    /// Wall time of the training step (forward, backward, optimiser), in milliseconds.
    pub step_ms: f64,
}

/// The outcome of a training run.
pub struct TrainReport {
    pub model: Model,
    pub history: Vec<EpochStats>,
}

impl TrainReport {
    /// The last epoch's statistics, or `None` for a report of no epochs
    /// ([`Trainer::into_report`] before any [`Trainer::epoch`]; [`train`] always runs one).
    pub fn last(&self) -> Option<&EpochStats> {
        self.history.last()
    }

    /// Mean training-step time over the epochs after the first (which pays one-off costs).
    pub fn epoch_ms(&self) -> f64 {
        let steps: Vec<f64> = self.history.iter().skip(1).map(|s| s.step_ms).collect();
        if steps.is_empty() {
            return self.history.first().map_or(0.0, |s| s.step_ms);
        }
        steps.iter().sum::<f64>() / steps.len() as f64
    }
}

/// Correct predictions on the train, validation and test nodes, as an `f32 [3]` tensor on the
/// graph's device (nothing is read back).
pub(crate) fn correct_counts(
    logits: &Tensor,
    y: &Tensor,
    split: &crate::graph::Split,
) -> Result<Tensor> {
    let pred = logits.argmax(D::Minus1)?;
    let counts = [&split.train, &split.val, &split.test]
        .into_iter()
        .map(|ids| -> Result<Tensor> {
            Ok(pred
                .index_select(ids, 0)?
                .eq(&y.index_select(ids, 0)?)?
                .to_dtype(DType::F32)?
                .sum_all()?)
        })
        .collect::<Result<Vec<_>>>()?;
    Ok(Tensor::stack(&counts, 0)?)
}

/// Turns correct counts into accuracies (NaN for an empty set).
pub(crate) fn to_accuracy(counts: &[f32], split: &crate::graph::Split) -> Result<[f32; 3]> {
    let mut out = [0f32; 3];
    for ((slot, &c), ids) in out
        .iter_mut()
        .zip(counts)
        .zip([&split.train, &split.val, &split.test])
    {
        let n = ids.dim(0)?;
        *slot = if n == 0 { f32::NAN } else { c / n as f32 };
    }
    Ok(out)
}

/// Accuracy of `logits` on the train, validation and test nodes of `graph` (one read-back,
/// recorded in the graph's ledger as `accuracies`).
pub fn accuracies(logits: &Tensor, graph: &Graph) -> Result<[f32; 3]> {
    let (y, split) = labelled(graph)?;
    let counts = correct_counts(logits, y, split)?;
    let counts = graph.placement().fetch_vec1::<f32>(&counts, "accuracies")?;
    to_accuracy(&counts, split)
}

pub(crate) fn labelled(graph: &Graph) -> Result<(&Tensor, &crate::graph::Split)> {
    match (graph.y(), graph.split()) {
        (Some(y), Some(s)) => Ok((y, s)),
        _ => Err(WorkbookError::InvalidGraph(format!(
            "graph '{}' has no labels or split; training needs y and train/val/test masks",
            graph.name
        ))),
    }
}

/// A training run in progress: model, optimiser and dropout state, one epoch at a time.
///
/// ```
/// use workbook::{datasets, placement::Placement, ModelConfig, train::{Trainer, TrainConfig}};
/// let g = datasets::karate(&Placement::cpu()).unwrap();
/// let config = ModelConfig::gcn(g.num_features(), 8, g.num_classes());
/// let mut t = Trainer::new(config, &g, &TrainConfig::gcn()).unwrap();
/// t.epoch(&g).unwrap();
/// // Move everything to a simulated device and go on; the graph must follow.
/// let sim = Placement::sim(1);
/// t.to_device(&sim).unwrap();
/// assert!(t.epoch(&g).is_err()); // the graph is still on the cpu: a named mismatch
/// let g = g.to_device(&sim).unwrap();
/// t.epoch(&g).unwrap();
/// ```
pub struct Trainer {
    model: Model,
    opt: Adam,
    dropout: Dropout,
    history: Vec<EpochStats>,
}

impl Trainer {
    /// A fresh model (seeded) on the graph's placement, with the recipe's optimiser.
    pub fn new(config: ModelConfig, graph: &Graph, train_config: &TrainConfig) -> Result<Self> {
        if let Some(l) = graph.placement().ledger() {
            l.set_phase("init");
        }
        // a lazy layer's size is known from the graph's width before its first forward pass
        let sized = match config.is_lazy() {
            true => config.with_input_width(graph.num_features())?,
            false => config.clone(),
        };
        crate::limits::check_training_fits("training", &sized, graph)?;
        let (mut model, _) = Model::init(config, train_config.seed, graph.placement())?;
        if !model.is_materialized() {
            // Lazy layers (in_channels = -1): their first forward pass, before the optimiser is
            // built, so that it sees every parameter (PyTorch's advice: a dry run first).
            model.materialize(graph)?;
        }
        Self::from_model(model, train_config)
    }

    /// Trains an existing model (e.g. loaded from a checkpoint) with the recipe's optimiser.
    pub fn from_model(model: Model, train_config: &TrainConfig) -> Result<Self> {
        let opt = train_config.optimizer(&model)?;
        let dropout = train_config.dropout(model.placement().device());
        Ok(Self {
            model,
            opt,
            dropout,
            history: Vec::new(),
        })
    }

    /// The model being trained.
    pub fn model(&self) -> &Model {
        &self.model
    }

    /// The optimiser.
    pub fn optimizer(&self) -> &Adam {
        &self.opt
    }

    /// The statistics of every epoch so far.
    pub fn history(&self) -> &[EpochStats] {
        &self.history
    }

    /// Moves the model (parameters and cached buffers) and the optimiser state to `to`. The
    /// graph is the caller's and must be moved too. Dropout keeps its random stream, so on
    /// host-backed devices (`cpu`, `sim:N`) the run continues bit for bit.
    pub fn to_device(&mut self, to: impl Into<Placement>) -> Result<()> {
        let to = to.into();
        let model = self.model.to_device(&to)?;
        self.opt = self.opt.to_model(&model)?;
        self.model = model;
        Ok(())
    }

    /// Replaces the model with `model` (a moved copy) and rebinds the optimiser **without**
    /// moving its state: the "optimizer state left behind" mistake, for lessons and tests.
    pub fn rebind_model_only(&mut self, model: Model) -> Result<()> {
        self.opt = self.opt.rebind(&model)?;
        self.model = model;
        Ok(())
    }

    /// One epoch on `graph`: checks placement (naming any culprit), takes a training step and
    /// evaluates. The ledger phase is `epoch N`. A loss that is NaN or infinite stops the run
    /// with [`WorkbookError::NonFiniteLoss`] (the epoch and the likely cause).
    pub fn epoch(&mut self, graph: &Graph) -> Result<EpochStats> {
        let epoch = self.history.len() + 1;
        let at = self.model.placement().clone();
        if let Some(l) = at.ledger() {
            l.set_phase(format!("epoch {epoch}"));
        }
        self.model.check_graph(graph)?;
        self.opt.check_placement()?;
        let (y, split) = labelled(graph)?;
        if split.train.dim(0)? == 0 {
            return Err(WorkbookError::InvalidGraph(format!(
                "graph '{}' has no training nodes",
                graph.name
            )));
        }
        let start = Instant::now();
        let (model, opt, dropout) = (&self.model, &mut self.opt, &mut self.dropout);
        let (loss, step_ms, counts) = crate::ops::on_cpu_pool(at.device(), || -> Result<_> {
            let out = model.forward_t(
                graph.x(),
                graph.edge_index(),
                graph.edge_weight(),
                Some(dropout),
            )?;
            let y_train = y.index_select(&split.train, 0)?;
            let logits = out.logits.index_select(&split.train, 0)?;
            let loss = candle_nn::loss::cross_entropy(&logits, &y_train)?;
            opt.backward_step(&loss)?;
            // GPU work is queued asynchronously; wait so the time covers the whole step.
            at.device().synchronize()?;
            let step_ms = start.elapsed().as_secs_f64() * 1e3;
            let eval = model.forward(graph.x(), graph.edge_index(), graph.edge_weight())?;
            Ok((loss, step_ms, correct_counts(&eval.logits, y, split)?))
        })?;
        let metrics = Tensor::cat(&[&loss.to_dtype(DType::F32)?.reshape(1)?, &counts], 0)?;
        let metrics = at.fetch_vec1::<f32>(&metrics, "metrics (loss, 3 accuracies)")?;
        let [train_accuracy, val_accuracy, test_accuracy] = to_accuracy(&metrics[1..], split)?;
        let stats = EpochStats {
            epoch,
            loss: metrics[0],
            train_accuracy,
            val_accuracy,
            test_accuracy,
            step_ms,
        };
        stop_if_not_finite(
            &stats,
            &self.model,
            Some(graph.x()),
            graph.edge_weight(),
            self.opt.lr(),
        )?;
        self.history.push(stats.clone());
        Ok(stats)
    }

    /// The trained model and the history.
    pub fn into_report(self) -> TrainReport {
        TrainReport {
            model: self.model,
            history: self.history,
        }
    }
}

/// [`WorkbookError::NonFiniteLoss`] if the epoch's loss is NaN or infinite: going on would
/// only spread NaN through every weight.
pub(crate) fn stop_if_not_finite(
    stats: &EpochStats,
    model: &Model,
    features: Option<&Tensor>,
    edge_weight: Option<&Tensor>,
    lr: f64,
) -> Result<()> {
    if stats.loss.is_finite() {
        return Ok(());
    }
    Err(WorkbookError::NonFiniteLoss {
        epoch: stats.epoch,
        loss: stats.loss,
        cause: crate::non_finite::loss_cause(&model.named_parameters(), features, edge_weight, lr),
    })
}

/// Trains a fresh model (seeded) on `graph`, calling `on_epoch` after every epoch.
pub fn train(
    config: ModelConfig,
    graph: &Graph,
    train_config: &TrainConfig,
    mut on_epoch: impl FnMut(&EpochStats),
) -> Result<TrainReport> {
    crate::limits::check_count("epochs", train_config.epochs, 1)?;
    labelled(graph)?;
    graph.check_on("the features (x)", graph.placement())?;
    let mut trainer = Trainer::new(config, graph, train_config)?;
    for _ in 0..train_config.epochs {
        let stats = trainer.epoch(graph)?;
        on_epoch(&stats);
    }
    Ok(trainer.into_report())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_learning_rate_far_too_high_stops_training_and_is_named() {
        let g = crate::datasets::karate(crate::placement::Placement::cpu()).unwrap();
        let config = crate::ModelConfig::gcn(g.num_features(), 16, g.num_classes());
        let recipe = TrainConfig {
            epochs: 50,
            lr: 1e30,
            ..TrainConfig::gcn()
        };
        let mut seen = 0;
        let err = train(config, &g, &recipe, |_| seen += 1)
            .err()
            .expect("a learning rate of 1e30 cannot train");
        let msg = err.to_string();
        assert!(
            matches!(err, WorkbookError::NonFiniteLoss { epoch, .. } if epoch == seen + 1),
            "{msg}"
        );
        assert!(
            msg.contains(&format!("training stopped at epoch {}", seen + 1)),
            "{msg}"
        );
        assert!(
            msg.contains("the learning rate (1e30) is likely too high"),
            "{msg}"
        );
    }
}
