//! PyG's `GCNConv(in_channels=-1, out_channels=16)` does not know its input width, so its weight
//! does not exist until the first forward pass creates it from the width of `x`. In PyTorch the
//! usual script is
//!
//! ```python
//! model = Net().to('cuda')                       # lazy: nothing to copy yet
//! optimizer = torch.optim.Adam(model.parameters(), lr=0.01)
//! data = data.to('cuda')
//! for epoch in range(epochs):
//!     loss = F.cross_entropy(model(data.x, data.edge_index)[data.train_mask], data.y[data.train_mask])
//!     ...
//! ```
//!
//! and it works only because PyTorch materialises the *same* `Parameter` object in place during
//! the first forward pass, after the optimiser took it. Here the first forward pass is explicit
//! (`model.materialize(&graph)`, through `&mut self`), the weights are born on the placement the
//! model has *then*, and an optimiser sees only the parameters that exist when it is built.
//!
//! [`train_lazy`] puts those steps in the order that makes every one of them right: the weights
//! born on the device (no copy of them ever made on the host), every parameter trained, the graph
//! moved once.

use workbook::candle_core::Tensor;
use workbook::candle_nn;
use workbook::train::Adam;
use workbook::{Graph, Model, Placement, Result, WorkbookError};

/// A lazy model, trained on a device.
pub struct Trained {
    /// The model: every parameter created by its first forward pass on the device, then trained.
    pub model: Model,
    /// The optimiser that trained it (Adam, no weight decay), over every parameter of `model`.
    pub optimiser: Adam,
    /// The graph, on the device.
    pub graph: Graph,
    /// The training loss of each epoch, read back to the host once per epoch.
    pub losses: Vec<f32>,
}

/// The loss of one full-batch step: the cross-entropy of the training nodes' logits
/// (`F.cross_entropy(out[data.train_mask], data.y[data.train_mask])`), on the graph's device.
pub fn training_loss(model: &Model, graph: &Graph) -> Result<Tensor> {
    let (Some(y), Some(split)) = (graph.y(), graph.split()) else {
        return Err(WorkbookError::InvalidGraph(format!(
            "graph '{}' has no labels or split; training needs y and a train mask",
            graph.name
        )));
    };
    let logits = model.forward_graph(graph)?.logits;
    let logits = logits.index_select(&split.train, 0)?;
    let y = y.index_select(&split.train, 0)?;
    Ok(candle_nn::loss::cross_entropy(&logits, &y)?)
}

/// Trains `model`, whose layers are lazy (`in_channels = -1`) and have never run, built on the
/// host, for `epochs` full-batch steps of Adam (learning rate `lr`, no weight decay, no dropout)
/// on `host_graph`, on `device`.
///
/// The weights are born on `device` (one `… (first forward pass)` upload each in the ledger, no
/// other copy of them), the optimiser holds every parameter, and the graph crosses to `device`
/// once. Returns the trained model, its optimiser, the graph on `device` and each epoch's loss.
pub fn train_lazy(
    model: Model,
    host_graph: &Graph,
    device: &Placement,
    epochs: usize,
    lr: f64,
) -> Result<Trained> {
    // The data first, once: the first forward pass and every epoch use this copy.
    let graph = host_graph.to_device(device)?;
    // Moving a lazy model copies nothing: it decides where its weights will be born. Moved after
    // the first pass instead, the weights would be created on the host and then copied.
    let mut model = model.to_device(device)?;
    // The first forward pass (PyTorch's dry run): each weight is created from the width of its
    // input, on `device`, and the config now holds that width.
    model.materialize(&graph)?;
    // Only now do all the parameters exist: an optimiser built earlier would hold none of them.
    let mut optimiser = Adam::for_model(&model, lr, |_| 0.0)?;
    let mut losses = Vec::with_capacity(epochs);
    for _ in 0..epochs {
        let loss = training_loss(&model, &graph)?;
        optimiser.backward_step(&loss)?;
        losses.push(device.fetch_scalar::<f32>(&loss, "loss")?);
    }
    Ok(Trained {
        model,
        optimiser,
        graph,
        losses,
    })
}
