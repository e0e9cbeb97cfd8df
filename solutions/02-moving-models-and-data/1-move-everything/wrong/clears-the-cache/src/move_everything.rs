//! Moving a training run between epochs: the model, everything it caches, and the optimiser.
//!
//! In PyTorch, `model.to(device)` moves the registered parameters and buffers, but PyG's
//! `GCNConv(cached=True)` keeps its normalised graph in `_cached_edge_index`, a plain attribute
//! that stays behind; and Adam's `exp_avg` / `exp_avg_sq` live wherever they were created or
//! loaded. Moving a run means moving all three, and the run must then continue exactly as if it
//! had never moved.

use workbook::candle_nn::loss::cross_entropy;
use workbook::train::{Adam, Dropout, TrainConfig};
use workbook::{GcnConfig, Graph, LayerConfig, Model, ModelConfig, Placement, Result};

/// The two-layer GCN of the lesson with `cached=True` in both layers (PyG:
/// `GCNConv(in, out, cached=True)`): the normalised graph is computed once and kept.
pub fn cached_gcn(in_channels: usize, hidden: usize, classes: usize) -> ModelConfig {
    let conv = |i, o| {
        let mut c = GcnConfig::new(i, o);
        c.cached = true;
        LayerConfig::Gcn(c)
    };
    ModelConfig {
        layers: vec![conv(in_channels, hidden), conv(hidden, classes)],
        ..ModelConfig::gcn(in_channels, hidden, classes)
    }
}

/// A training run in progress: the model, its optimiser and the dropout stream.
pub struct Run {
    pub model: Model,
    pub optimizer: Adam,
    dropout: Dropout,
    /// The training loss of every epoch so far.
    pub losses: Vec<f32>,
}

impl Run {
    /// A fresh cached GCN (16 hidden) on the graph's placement, trained with the GCN recipe of
    /// `config` (its seed, learning rate and weight decay), exactly as
    /// [`workbook::train::Trainer`] would.
    pub fn new(graph: &Graph, config: &TrainConfig) -> Result<Self> {
        let model_config = cached_gcn(graph.num_features(), 16, graph.num_classes());
        let (model, _vars) = Model::init(model_config, config.seed, graph.placement())?;
        let optimizer = config.optimizer(&model)?;
        let dropout = config.dropout(model.placement().device());
        Ok(Self {
            model,
            optimizer,
            dropout,
            losses: Vec::new(),
        })
    }

    /// One training epoch on `graph` (which must be where the model is): a forward pass with
    /// dropout, cross-entropy on the training nodes, one Adam step. Returns the loss.
    pub fn epoch(&mut self, graph: &Graph) -> Result<f32> {
        let at = self.model.placement().clone();
        self.model.check_graph(graph)?;
        let (Some(y), Some(split)) = (graph.y(), graph.split()) else {
            return Err(workbook::WorkbookError::InvalidGraph(
                "training needs labels and a split".into(),
            ));
        };
        let out = self.model.forward_t(
            graph.x(),
            graph.edge_index(),
            graph.edge_weight(),
            Some(&mut self.dropout),
        )?;
        let loss = cross_entropy(
            &out.logits.index_select(&split.train, 0)?,
            &y.index_select(&split.train, 0)?,
        )?;
        self.optimizer.backward_step(&loss)?;
        let loss = at.fetch_scalar::<f32>(&loss, "loss")?;
        self.losses.push(loss);
        Ok(loss)
    }

    /// Moves the run to `to` between epochs: every parameter, every cached buffer and the
    /// optimiser's state, so the next epoch on a graph on `to` continues exactly where this one
    /// stopped. (The graph is the caller's to move.)
    pub fn to_device(&mut self, to: &Placement) -> Result<()> {
        // A copy with the parameters *and* the cached normalisation on `to`.
        // PyTorch's module.to, then the stale cache dropped: rebuilt on the next forward pass
        let mut model = self.model.parameters_to_device(to)?;
        model.clear_cache();
        // The same optimiser (step count, exp_avg, exp_avg_sq), bound to the moved parameters
        // and with its state copied to `to`.
        self.optimizer = self.optimizer.to_model(&model)?;
        self.model = model;
        Ok(())
    }
}
