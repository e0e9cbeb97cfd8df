//! Accuracy of a model trained by mini-batches: by batches over each split's nodes, or one
//! full-graph pass on a copy of the graph moved to the device once.
//!
//! Shared by [`MiniBatchTrainer`](super::minibatch::MiniBatchTrainer) and the data-parallel
//! trainer ([`crate::parallel::DataParallelTrainer`]), which evaluates its first replica.
//!
//! ```
//! use workbook::{datasets, placement::Placement, Model, ModelConfig};
//! use workbook::train::evaluation::{Eval, Evaluator};
//! let g = datasets::karate(&Placement::cpu()).unwrap();
//! let sim = Placement::sim(1);
//! let (model, _) = Model::init(ModelConfig::gcn(g.num_features(), 8, g.num_classes()), 0, &sim).unwrap();
//! let mut eval = Evaluator::new(&g, &Eval::FullGraph, 2, 0, &sim).unwrap();
//! let (counts, totals) = eval.correct_counts(&model).unwrap();
//! assert_eq!(counts.dims(), &[3]);
//! assert_eq!(totals[0], g.split().unwrap().train.dim(0).unwrap());
//! ```

use crate::error::{Result, WorkbookError};
use crate::graph::Graph;
use crate::loader::{Batch, InputNodes, LoaderConfig, NeighborLoader};
use crate::model::Model;
use crate::placement::Placement;
use crate::train::EpochStats;
use candle_core::{DType, Tensor, D};

/// How accuracy is measured after each epoch.
#[derive(Clone, Debug, PartialEq)]
pub enum Eval {
    /// Batches over the train, validation and test nodes, sampled with these `num_neighbors`
    /// (`-1` per hop: every neighbour) and `batch_size`. Memory is bounded by the batch.
    Batches {
        num_neighbors: Vec<i64>,
        batch_size: usize,
    },
    /// One forward pass over the whole graph, moved to the device once (phase `eval graph`).
    /// Exact, like full-batch training; only for graphs that fit on the device.
    FullGraph,
    /// No evaluation: the accuracies are NaN and nothing runs between epochs. For timing the
    /// training pass alone (`workbook bench`), as a replay of the same batches in PyG does.
    Skip,
}

/// Counts correct predictions on the train, validation and test nodes (see the module docs).
pub struct Evaluator {
    skip: bool,
    device: Placement,
    loaders: Option<[NeighborLoader; 3]>,
    graph: Graph,
    on_device: Option<Graph>,
}

impl Evaluator {
    /// An evaluator for a model of `layers` layers on `device`; `graph` stays on the host.
    pub fn new(
        graph: &Graph,
        eval: &Eval,
        layers: usize,
        seed: u64,
        device: &Placement,
    ) -> Result<Self> {
        if graph.y().is_none() || graph.split().is_none() {
            return Err(WorkbookError::InvalidGraph(format!(
                "graph '{}' has no labels or split; evaluation needs y and train/val/test masks",
                graph.name
            )));
        }
        let loaders = match eval {
            Eval::Batches {
                num_neighbors,
                batch_size,
            } => {
                if num_neighbors.len() != layers {
                    return Err(WorkbookError::InvalidConfig(format!(
                        "evaluation num_neighbors has {} hop(s) but the model has {layers} layer(s)",
                        num_neighbors.len()
                    )));
                }
                let make = |input_nodes| {
                    NeighborLoader::new(
                        graph,
                        LoaderConfig {
                            input_nodes,
                            seed,
                            ..LoaderConfig::new(num_neighbors, *batch_size)
                        },
                    )
                };
                Some([
                    make(InputNodes::Train)?,
                    make(InputNodes::Val)?,
                    make(InputNodes::Test)?,
                ])
            }
            Eval::FullGraph | Eval::Skip => None,
        };
        Ok(Self {
            skip: *eval == Eval::Skip,
            device: device.clone(),
            loaders,
            graph: graph.clone(),
            on_device: None,
        })
    }

    /// Correct predictions of `model` (on the evaluator's device) on train, validation and
    /// test (an `f32 [3]` tensor on the device, nothing read back) and the number of nodes in
    /// each (all 0 with [`Eval::Skip`], which evaluates nothing).
    pub fn correct_counts(&mut self, model: &Model) -> Result<(Tensor, [usize; 3])> {
        if self.skip {
            return Ok((Tensor::zeros(3, DType::F32, self.device.device())?, [0; 3]));
        }
        match &self.loaders {
            Some(loaders) => {
                let mut counts = Vec::with_capacity(3);
                let mut totals = [0usize; 3];
                for (k, loader) in loaders.iter().enumerate() {
                    totals[k] = loader.seeds().len();
                    let mut sum = Tensor::zeros((), DType::F32, self.device.device())?;
                    for batch in loader.batches(0) {
                        let batch = batch?.to_device(&self.device)?;
                        sum = (sum + batch_correct(model, &batch)?)?;
                    }
                    counts.push(sum);
                }
                Ok((Tensor::stack(&counts, 0)?, totals))
            }
            None => {
                if self.on_device.is_none() {
                    let phase = self.device.ledger().map(|l| l.phase());
                    if let Some(l) = self.device.ledger() {
                        l.set_phase("eval graph");
                    }
                    self.on_device = Some(self.graph.to_device(&self.device)?);
                    if let (Some(l), Some(p)) = (self.device.ledger(), phase) {
                        l.set_phase(p);
                    }
                }
                let g = self.on_device.as_ref().expect("just set");
                let logits = model.forward_graph(g)?.logits;
                let pred = logits.argmax(D::Minus1)?;
                let y = g.y().expect("checked in new");
                let split = g.split().expect("checked in new");
                let mut counts = Vec::with_capacity(3);
                let mut totals = [0usize; 3];
                for (k, ids) in [&split.train, &split.val, &split.test]
                    .into_iter()
                    .enumerate()
                {
                    totals[k] = ids.dim(0)?;
                    counts.push(
                        pred.index_select(ids, 0)?
                            .eq(&y.index_select(ids, 0)?)?
                            .to_dtype(DType::F32)?
                            .sum_all()?,
                    );
                }
                Ok((Tensor::stack(&counts, 0)?, totals))
            }
        }
    }

    /// An epoch's statistics: `mean_loss` (a one-element tensor on the evaluator's device) and
    /// the accuracies of `model`, read back together in one transfer (`metrics`); an accuracy
    /// over no nodes (or with [`Eval::Skip`]) is NaN.
    pub fn epoch_stats(
        &mut self,
        model: &Model,
        mean_loss: &Tensor,
        epoch: usize,
        step_ms: f64,
    ) -> Result<EpochStats> {
        let (counts, totals) = self.correct_counts(model)?;
        let metrics = Tensor::cat(&[mean_loss, &counts], 0)?;
        let metrics = self
            .device
            .fetch_vec1::<f32>(&metrics, "metrics (loss, 3 accuracies)")?;
        let acc = |k: usize| {
            if totals[k] == 0 {
                f32::NAN
            } else {
                metrics[1 + k] / totals[k] as f32
            }
        };
        Ok(EpochStats {
            epoch,
            loss: metrics[0],
            train_accuracy: acc(0),
            val_accuracy: acc(1),
            test_accuracy: acc(2),
            step_ms,
        })
    }
}

/// Correct predictions of `model` among `batch`'s seeds (a scalar on the device).
pub fn batch_correct(model: &Model, batch: &Batch) -> Result<Tensor> {
    batch.check_on("model parameters", model.placement())?;
    let bs = batch.batch_size();
    let y = batch
        .y()
        .ok_or_else(|| WorkbookError::InvalidGraph("the batch has no labels (batch.y)".into()))?;
    let out = model.forward(batch.x(), batch.edge_index(), batch.edge_weight())?;
    let pred = out.logits.narrow(0, 0, bs)?.argmax(D::Minus1)?;
    Ok(pred
        .eq(&y.narrow(0, 0, bs)?)?
        .to_dtype(DType::F32)?
        .sum_all()?)
}
