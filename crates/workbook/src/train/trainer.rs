//! The full-batch training loop for node classification.
//!
//! Each epoch: a training-mode forward pass (dropout on), cross-entropy on the training nodes,
//! back-propagation, one Adam step; then an evaluation pass for train/validation/test accuracy.
//! The recipes in [`TrainConfig::gcn`] and [`TrainConfig::gatv2`] are PyG's example settings.
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
use candle_core::{DType, Tensor, D};
use candle_nn::VarMap;
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
    pub vars: VarMap,
    pub history: Vec<EpochStats>,
}

impl TrainReport {
    /// The last epoch's statistics.
    pub fn last(&self) -> &EpochStats {
        self.history
            .last()
            .expect("training runs at least one epoch")
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

/// Accuracy of `logits` on the train, validation and test nodes of `graph`.
pub fn accuracies(logits: &Tensor, graph: &Graph) -> Result<[f32; 3]> {
    let (y, split) = labelled(graph)?;
    let pred = logits.argmax(D::Minus1)?;
    let mut out = [0f32; 3];
    for (slot, ids) in out.iter_mut().zip([&split.train, &split.val, &split.test]) {
        let n = ids.dim(0)?;
        if n == 0 {
            *slot = f32::NAN;
            continue;
        }
        let correct = pred
            .index_select(ids, 0)?
            .eq(&y.index_select(ids, 0)?)?
            .to_dtype(DType::F32)?
            .sum_all()?
            .to_scalar::<f32>()?;
        *slot = correct / n as f32;
    }
    Ok(out)
}

fn labelled(graph: &Graph) -> Result<(&Tensor, &crate::graph::Split)> {
    match (graph.y(), graph.split()) {
        (Some(y), Some(s)) => Ok((y, s)),
        _ => Err(WorkbookError::InvalidGraph(format!(
            "graph '{}' has no labels or split; training needs y and train/val/test masks",
            graph.name
        ))),
    }
}

/// Trains a fresh model (seeded) on `graph`, calling `on_epoch` after every epoch.
pub fn train(
    config: ModelConfig,
    graph: &Graph,
    train_config: &TrainConfig,
    mut on_epoch: impl FnMut(&EpochStats),
) -> Result<TrainReport> {
    if train_config.epochs == 0 {
        return Err(WorkbookError::InvalidConfig(
            "epochs must be at least 1".into(),
        ));
    }
    let (y, split) = labelled(graph)?;
    if split.train.dim(0)? == 0 {
        return Err(WorkbookError::InvalidGraph(format!(
            "graph '{}' has no training nodes",
            graph.name
        )));
    }
    let device = graph.device();
    let (model, vars) = Model::init(config, train_config.seed, device)?;
    let first_prefix = model.config().prefix(0);
    let mut named: Vec<(String, candle_core::Var)> = vars
        .data()
        .lock()
        .expect("VarMap lock")
        .iter()
        .map(|(n, v)| (n.clone(), v.clone()))
        .collect();
    named.sort_by(|a, b| a.0.cmp(&b.0));
    let params = named
        .into_iter()
        .map(|(name, var)| {
            let decays = !train_config.decay_first_layer_only || name.starts_with(&first_prefix);
            let wd = if decays {
                train_config.weight_decay
            } else {
                0.0
            };
            (name, var, wd)
        })
        .collect();
    let mut opt = Adam::new(params, train_config.lr)?;
    let mut dropout = Dropout::new(train_config.seed.wrapping_add(1), device);
    let y_train = y.index_select(&split.train, 0)?;
    let mut history = Vec::with_capacity(train_config.epochs);
    for epoch in 1..=train_config.epochs {
        let start = Instant::now();
        let out = model.forward_t(
            graph.x(),
            graph.edge_index(),
            graph.edge_weight(),
            Some(&mut dropout),
        )?;
        let loss =
            candle_nn::loss::cross_entropy(&out.logits.index_select(&split.train, 0)?, &y_train)?;
        opt.backward_step(&loss)?;
        let loss = loss.to_scalar::<f32>()?;
        let step_ms = start.elapsed().as_secs_f64() * 1e3;
        let eval = model.forward(graph.x(), graph.edge_index(), graph.edge_weight())?;
        let [train_accuracy, val_accuracy, test_accuracy] = accuracies(&eval.logits, graph)?;
        let stats = EpochStats {
            epoch,
            loss,
            train_accuracy,
            val_accuracy,
            test_accuracy,
            step_ms,
        };
        on_epoch(&stats);
        history.push(stats);
    }
    Ok(TrainReport {
        model,
        vars,
        history,
    })
}
