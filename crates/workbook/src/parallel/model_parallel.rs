//! Model parallelism in miniature: layer 1 on one device, layer 2 on another, and the explicit
//! move of the activations between them.
//!
//! When a model does not fit one device, its layers are spread over several and each layer's
//! output is copied to the device of the next. In PyTorch it is an ordinary module whose
//! layers sit on different devices, with the copy written into `forward`:
//!
//! ```python
//! class TwoDeviceGCN(torch.nn.Module):
//!     def __init__(self):
//!         super().__init__()
//!         self.conv1 = GCNConv(34, 16).to("cuda:0")
//!         self.conv2 = GCNConv(16, 4).to("cuda:1")
//!
//!     def forward(self, x, edge_index0, edge_index1):
//!         h = F.relu(self.conv1(F.dropout(x, 0.5, self.training), edge_index0))
//!         h = h.to("cuda:1")                    # the explicit move: forget it and
//!         h = F.dropout(h, 0.5, self.training)  # "found at least two devices, cuda:0 and cuda:1"
//!         return self.conv2(h, edge_index1)
//! ```
//!
//! A [`ModelParallel`] is that module for any [`Model`], with one [`Placement`] per layer:
//!
//! * [`ModelParallel::new`] copies each layer's parameters (and cached buffers) to its device;
//!   the ledger names each copy (`conv2.lin.weight cpu -> sim:2`).
//! * [`ModelParallel::place_graph`] moves the graph once: `x` to the first stage only (the other
//!   stages read activations, not features), `edge_index` and `edge_weight` to every stage's
//!   device (each layer aggregates over the graph), labels and masks to the last stage, where
//!   the loss is computed. A stage on a device an earlier stage uses shares that copy.
//! * [`ModelParallel::forward_t`] runs layer by layer as [`Model::forward_t`] does (dropout on
//!   each layer's input, the activation between layers, one [`Dropout`] stream in the same
//!   order, so the masks and the numbers are those of the model on one device) and moves the
//!   activations between stages, recorded as `activations conv1 -> conv2` (`N × hidden × 4`
//!   bytes for float32).
//! * [`ModelParallel::train_step`]: the loss on the last stage's device with the labels there,
//!   one backward pass through the moves (candle differentiates the copy: `Tensor::copy` between
//!   host-backed `sim:N` devices, `Tensor::to_device` between GPUs), then one [`Adam`] step per
//!   stage ([`ModelParallel::optimizers`]), so each stage's optimiser state lives with its
//!   parameters. The gradient of the activations travels back the way they came, the same
//!   bytes in the other direction; candle's backward pass makes that copy inside
//!   `loss.backward()` (on a GPU, `to_device`'s backward copies the gradient; on `sim:N` it
//!   flows through the host copy) where no ledger can see it, so this module records it
//!   itself, as `activation gradient conv2 -> conv1`, once the gradient has reached the earlier
//!   stage's parameters.
//!
//! Per training step the stages exchange exactly one activation and one gradient per
//! boundary; everything else stays where it was put (the loss, 4 bytes, comes back to the
//! host). The first forward pass also uploads each stage's graph structure (GCN's self-loops,
//! the CSR), built on the host once per device, as it does for a model on one device.
//!
//! **Exporting or checkpointing.** [`ModelParallel::model`] is the split model itself, as
//! PyTorch's model-parallel module is: an ordinary [`Model`] whose layers report their own
//! devices. Every tool sees the split and names it: its own forward pass names the first
//! parameter on another device, and the export pre-flight
//! ([`crate::export::preflight`]) and ONNX export refuse it, naming the tensor, both devices and
//! the fix, [`ModelParallel::into_model`] (the whole model gathered on one device). A checkpoint
//! ([`crate::checkpoint::save`]) of the split model is allowed: it copies every tensor to the
//! host and stores no devices, so it loads anywhere.
//!
//! ```
//! use workbook::parallel::model_parallel::ModelParallel;
//! use workbook::{datasets, ledger::Ledger, train::TrainConfig, Model, ModelConfig, Placement};
//! let ledger = Ledger::new();
//! let (d1, d2) = (Placement::sim(1).with_ledger(&ledger), Placement::sim(2).with_ledger(&ledger));
//! let graph = datasets::karate(Placement::cpu()).unwrap();
//! let (model, _) = Model::init(ModelConfig::gcn(34, 16, 4), 0, Placement::cpu()).unwrap();
//! let mp = ModelParallel::new(&model, &[d1, d2]).unwrap(); // conv1 on sim:1, conv2 on sim:2
//! let g = mp.place_graph(&graph).unwrap(); // x to sim:1, edges to both, labels to sim:2
//! let recipe = TrainConfig::gcn();
//! let mut optimizers = mp.optimizers(&recipe).unwrap(); // one Adam per stage
//! let mut dropout = recipe.dropout(mp.placements()[0].device());
//! ledger.set_phase("step 1");
//! let loss = mp.train_step(&g, &mut optimizers, &mut dropout).unwrap();
//! assert!(loss.is_finite());
//! let between: Vec<(String, String, u64)> = ledger
//!     .in_phase("step 1")
//!     .into_iter()
//!     .filter(|t| t.what.starts_with("activation"))
//!     .map(|t| (t.from, t.to, t.bytes))
//!     .collect();
//! let bytes = 34 * 16 * 4; // N × hidden × float32, each way
//! assert_eq!(between, [("sim:1".to_string(), "sim:2".to_string(), bytes), ("sim:2".to_string(), "sim:1".to_string(), bytes)]);
//! // the split model cannot be exported as it is; gathered on one device, it can
//! assert!(mp.model().is_split());
//! let whole = mp.into_model(Placement::cpu()).unwrap();
//! assert!(!whole.is_split());
//! ```

use crate::error::{Result, WorkbookError};
use crate::graph::{Graph, GraphPart};
use crate::model::{Layer, Model, ModelOutput};
use crate::module::Mover;
use crate::placement::{bytes_of, Mismatch, Placement, Role};
use crate::train::dropout::Dropout;
use crate::train::trainer::{correct_counts, labelled, to_accuracy};
use crate::train::{Adam, TrainConfig};
use candle_core::{DType, Var};

/// A model whose layer `k` lives on its own placement, with the activations moved explicitly
/// between them. Cloning shares the parameters (as cloning a [`Model`] does).
#[derive(Clone, Debug)]
pub struct ModelParallel {
    /// The split model: layer `k` on placement `k`.
    model: Model,
}

/// A graph placed for a [`ModelParallel`] by [`ModelParallel::place_graph`]: for each stage, the
/// parts that stage reads on its device.
#[derive(Clone, Debug)]
pub struct StagedGraph {
    /// Stage `k`'s view: edges (and for the first stage `x`, for the last labels and masks) on
    /// `placements[k]`; other parts are left where the source graph had them and never read.
    stages: Vec<Graph>,
    placements: Vec<Placement>,
}

impl StagedGraph {
    /// The placement of each stage the graph was placed for.
    pub fn placements(&self) -> &[Placement] {
        &self.placements
    }

    /// Number of nodes.
    pub fn num_nodes(&self) -> usize {
        self.stages[0].num_nodes()
    }
}

/// One activation moved between stages in a forward pass.
struct Moved {
    /// The stage it was moved to (it came from `stage - 1`).
    stage: usize,
    bytes: u64,
}

impl ModelParallel {
    /// Splits `model` over `placements`, one per layer: layer `k`'s parameters and cached
    /// buffers are copied to `placements[k]` (recorded in the ledger; a layer already there is
    /// shared, as PyTorch's `.to` keeps it). Errors if the number of placements is not the
    /// number of layers.
    pub fn new(model: &Model, placements: &[Placement]) -> Result<Self> {
        model.check_materialized("ModelParallel::new")?;
        let n = model.layers().len();
        if placements.len() != n {
            let layers: Vec<String> = (0..n).map(|k| model.layer_name(k)).collect();
            let given: Vec<String> = placements.iter().map(|p| p.to_string()).collect();
            return Err(WorkbookError::Mismatched(format!(
                "model parallelism needs one placement per layer: the model has {n} layer(s) ({}) but {} placement(s) were given ({}); list one device per layer, in order",
                layers.join(", "),
                placements.len(),
                if given.is_empty() { "none".to_string() } else { given.join(", ") }
            )));
        }
        let layers = model
            .layers()
            .iter()
            .zip(placements)
            .enumerate()
            .map(|(k, (layer, to))| {
                let from = layer.as_graph_layer().placement();
                let to = from.destination(to);
                layer.map_tensors(&mut Mover::new(from, &to, &model.config().prefix(k), true))
            })
            .collect::<Result<Vec<Layer>>>()?;
        Ok(Self {
            model: Model::from_parts(model.config().clone(), layers),
        })
    }

    /// Each stage's placement, in layer order.
    pub fn placements(&self) -> Vec<&Placement> {
        self.model
            .layers()
            .iter()
            .map(|l| l.as_graph_layer().placement())
            .collect()
    }

    /// The split model itself: layer `k` on placement `k`, sharing parameters with `self`. Its
    /// own forward pass, the export pre-flight and ONNX export refuse it and name the fix,
    /// [`ModelParallel::into_model`]; see the module documentation.
    pub fn model(&self) -> &Model {
        &self.model
    }

    /// The whole model gathered on `to` (every stage's parameters and buffers copied there,
    /// recorded in the ledger): for export, a checkpoint, or training on one device again.
    /// PyTorch: `model.to("cpu")` on the model-parallel module.
    pub fn into_model(self, to: impl Into<Placement>) -> Result<Model> {
        self.model.to_device(to)
    }

    /// `graph` (on any device) placed for the stages: `x` to the first stage's device,
    /// `edge_index` and `edge_weight` to every stage's, labels and masks to the last stage's.
    /// Each copy is recorded in the ledger once; do it once, before training.
    pub fn place_graph(&self, graph: &Graph) -> Result<StagedGraph> {
        let placements: Vec<Placement> = self.placements().into_iter().cloned().collect();
        let last = placements.len() - 1;
        let mut stages: Vec<Graph> = Vec::with_capacity(placements.len());
        for (k, at) in placements.iter().enumerate() {
            // A device an earlier stage uses already has the edges: start from that copy.
            let base = stages
                .iter()
                .zip(&placements)
                .find(|(_, p)| *p == at)
                .map_or(graph, |(g, _)| g);
            let mut parts = vec![GraphPart::EdgeIndex, GraphPart::EdgeWeight];
            if k == 0 {
                parts.push(GraphPart::X);
            }
            if k == last {
                parts.extend([GraphPart::Labels, GraphPart::Masks]);
            }
            let mut g = base.clone();
            for part in parts {
                g = g.move_part(part, at)?;
            }
            stages.push(g);
        }
        Ok(StagedGraph { stages, placements })
    }

    /// Evaluation-mode forward pass; the logits are on the last stage's device.
    pub fn forward(&self, graph: &StagedGraph) -> Result<ModelOutput> {
        self.forward_t(graph, None)
    }

    /// Forward pass; passing `dropout` selects training mode, as in [`Model::forward_t`].
    pub fn forward_t(
        &self,
        graph: &StagedGraph,
        dropout: Option<&mut Dropout>,
    ) -> Result<ModelOutput> {
        Ok(self.run(graph, dropout)?.0)
    }

    /// The stage names, `conv1`, `conv2`, ...
    fn name(&self, k: usize) -> String {
        self.model.layer_name(k)
    }

    /// Checks that `graph` was placed for these stages, naming the first stage that differs.
    fn check_staged(&self, graph: &StagedGraph) -> Result<()> {
        let mine = self.placements();
        if graph.placements.len() != mine.len() {
            let show = |ps: &[&Placement]| {
                ps.iter()
                    .map(|p| p.to_string())
                    .collect::<Vec<_>>()
                    .join(", ")
            };
            return Err(WorkbookError::Mismatched(format!(
                "the graph was placed for {} stage(s) ({}) but this model has {} ({}); place it for this model with model_parallel.place_graph(&graph)",
                graph.placements.len(),
                show(&graph.placements.iter().collect::<Vec<_>>()),
                mine.len(),
                show(&mine)
            )));
        }
        for (k, (theirs, mine)) in graph.placements.iter().zip(mine).enumerate() {
            if theirs != mine {
                return Err(WorkbookError::DeviceMismatch(Box::new(
                    Mismatch::new(
                        format!("{} parameters", self.name(k)),
                        mine.id(),
                        Role::Input,
                        format!("edge_index (placed for stage {})", self.name(k)),
                        theirs.id(),
                    )
                    .with_fix("Place the graph for this model: model_parallel.place_graph(&graph)"),
                )));
            }
        }
        Ok(())
    }

    /// The forward pass, and the activations it moved between stages.
    fn run(
        &self,
        graph: &StagedGraph,
        mut dropout: Option<&mut Dropout>,
    ) -> Result<(ModelOutput, Vec<Moved>)> {
        self.check_staged(graph)?;
        let layers = self.model.layers();
        let mut h = graph.stages[0].x().clone();
        let mut moves = Vec::new();
        let mut attention = Vec::new();
        for (k, layer) in layers.iter().enumerate() {
            let layer = layer.as_graph_layer();
            let at = layer.placement();
            if k > 0 {
                let prev = layers[k - 1].as_graph_layer().placement();
                if prev != at {
                    // The explicit move, PyTorch's `h = h.to("cuda:1")`; candle keeps it in
                    // the autograd graph, so the gradient flows back through it.
                    let what = format!("activations {} -> {}", self.name(k - 1), self.name(k));
                    h = at.move_tensor(&h, prev, &what)?;
                    moves.push(Moved {
                        stage: k,
                        bytes: bytes_of(&h),
                    });
                }
            }
            let g = &graph.stages[k];
            h = self.model.layer_step(
                k,
                &h,
                g.edge_index(),
                g.edge_weight(),
                dropout.as_deref_mut(),
                &mut attention,
            )?;
        }
        Ok((
            ModelOutput {
                logits: h,
                attention,
            },
            moves,
        ))
    }

    /// The recipe's optimisers, one [`Adam`] per stage over that stage's parameters, with its
    /// state on the stage's device (weight decay as [`TrainConfig::optimizer`] gives it).
    pub fn optimizers(&self, train_config: &TrainConfig) -> Result<Vec<Adam>> {
        let config = self.model.config();
        let first = config.prefix(0);
        self.model
            .layers()
            .iter()
            .enumerate()
            .map(|(k, layer)| {
                let layer = layer.as_graph_layer();
                let prefix = config.prefix(k);
                let params = layer
                    .named_parameters()
                    .into_iter()
                    .map(|(name, t)| {
                        let name = format!("{prefix}{name}");
                        if !t.is_variable() {
                            return Err(WorkbookError::NotTrainable(name));
                        }
                        let decay =
                            !train_config.decay_first_layer_only || name.starts_with(&first);
                        let wd = if decay {
                            train_config.weight_decay
                        } else {
                            0.0
                        };
                        Ok((name, Var::from_tensor(&t)?, wd))
                    })
                    .collect::<Result<Vec<_>>>()?;
                Adam::with_placement(params, train_config.lr, layer.placement())
            })
            .collect()
    }

    /// One training step on the training nodes: forward with dropout, cross-entropy on the last
    /// stage's device, one backward pass through the moves, one step of each stage's optimiser
    /// (from [`ModelParallel::optimizers`]). Records the activations' gradients going back in
    /// the ledger and reads the loss back to the host (4 bytes).
    pub fn train_step(
        &self,
        graph: &StagedGraph,
        optimizers: &mut [Adam],
        dropout: &mut Dropout,
    ) -> Result<f32> {
        let stages = self.model.layers().len();
        if optimizers.len() != stages {
            return Err(WorkbookError::Mismatched(format!(
                "one optimiser per stage: the model has {stages} stage(s) but {} optimiser(s) were given; build them with model_parallel.optimizers(&train_config)",
                optimizers.len()
            )));
        }
        for opt in optimizers.iter() {
            opt.check_placement()?;
        }
        self.check_staged(graph)?;
        let last_graph = &graph.stages[stages - 1];
        let (y, split) = labelled(last_graph)?;
        if split.train.dim(0)? == 0 {
            return Err(WorkbookError::InvalidGraph(format!(
                "graph '{}' has no training nodes",
                last_graph.name
            )));
        }
        let (out, moves) = self.run(graph, Some(dropout))?;
        let y_train = y.index_select(&split.train, 0)?;
        let loss =
            candle_nn::loss::cross_entropy(&out.logits.index_select(&split.train, 0)?, &y_train)?;
        let grads = loss.backward()?;
        let placements = self.placements();
        for m in moves.iter().rev() {
            // candle keeps no gradient of an intermediate tensor; that the earlier stage's
            // parameters got one shows the activation gradient crossed.
            let reached = self.model.layers()[m.stage - 1]
                .as_graph_layer()
                .named_parameters()
                .iter()
                .any(|(_, t)| grads.get(t).is_some());
            if reached {
                let (from, to) = (placements[m.stage], placements[m.stage - 1]);
                let what = format!(
                    "activation gradient {} -> {}",
                    self.name(m.stage),
                    self.name(m.stage - 1)
                );
                from.record(from, to, m.bytes, &what);
            }
        }
        for opt in optimizers.iter_mut() {
            opt.step(&grads)?;
        }
        placements[stages - 1].fetch_scalar::<f32>(&loss.to_dtype(DType::F32)?, "loss")
    }

    /// Accuracy on the train, validation and test nodes (evaluation mode), counted on the last
    /// stage's device; one read-back of three numbers, recorded as `accuracies`.
    pub fn accuracies(&self, graph: &StagedGraph) -> Result<[f32; 3]> {
        let out = self.forward(graph)?;
        let last_graph = &graph.stages[graph.stages.len() - 1];
        let (y, split) = labelled(last_graph)?;
        let counts = correct_counts(&out.logits, y, split)?;
        let at = self.placements()[self.placements().len() - 1].clone();
        let counts = at.fetch_vec1::<f32>(&counts, "accuracies")?;
        to_accuracy(&counts, split)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ModelConfig;

    #[test]
    fn wrong_number_of_placements_names_both_counts() {
        let (model, _) = Model::init(ModelConfig::gcn(4, 8, 2), 0, Placement::cpu()).unwrap();
        let err = ModelParallel::new(&model, &[Placement::sim(1)])
            .unwrap_err()
            .to_string();
        assert!(
            err.contains(
                "the model has 2 layer(s) (conv1, conv2) but 1 placement(s) were given (sim:1)"
            ),
            "{err}"
        );
        let err = ModelParallel::new(&model, &[]).unwrap_err().to_string();
        assert!(err.contains("0 placement(s) were given (none)"), "{err}");
    }
}
