//! The operations of a training step on branded values: each needs its operands on one device,
//! `'d`, and gives its result that brand. The runtime checks of the unbranded calls they wrap
//! still run (they cost nothing next to a forward pass), so a value a [`branded`](super::branded)
//! call let in is checked twice.
//!
//! ```
//! use workbook::branded::{train, with_placement};
//! use workbook::{datasets, ModelConfig, Placement};
//! let loss = with_placement(Placement::sim(1), |dev| -> workbook::Result<f32> {
//!     let graph = dev.put(&datasets::karate(&Placement::cpu())?)?;
//!     let model = dev.init(ModelConfig::gcn(34, 16, 4), 0)?;
//!     let mut opt = train::adam(&model, 0.01)?;
//!     let mut dropout = dev.dropout(0);
//!     let loss = train::step(&model, &mut opt, &graph, &mut dropout)?;
//!     train::scalar(&loss)
//! }).unwrap();
//! assert!(loss.is_finite());
//! ```

use super::on::{On, OnDevice};
use crate::error::{Result, WorkbookError};
use crate::graph::Graph;
use crate::model::Model;
use crate::ops::Dropout;
use crate::placed_tensor::PlacedTensor;
use crate::train::Adam;
use candle_core::Tensor;

fn wrap<'d>(name: &str, tensor: Tensor, like: &Graph) -> Result<On<'d, PlacedTensor>> {
    Ok(On::new(PlacedTensor::wrap(name, tensor, like.placement())?))
}

/// Evaluation-mode forward pass: the logits of every node. `model` and `graph` must have the
/// same brand.
pub fn forward<'d>(
    model: &impl OnDevice<'d, Model>,
    graph: &impl OnDevice<'d, Graph>,
) -> Result<On<'d, PlacedTensor>> {
    let graph = graph.value();
    let out = model.value().forward_graph(graph)?;
    wrap("logits", out.logits, graph)
}

/// Training-mode forward pass (dropout on): the logits of every node.
pub fn forward_train<'d>(
    model: &impl OnDevice<'d, Model>,
    graph: &impl OnDevice<'d, Graph>,
    dropout: &mut On<'d, Dropout>,
) -> Result<On<'d, PlacedTensor>> {
    let graph = graph.value();
    let out = model.value().forward_t(
        graph.x(),
        graph.edge_index(),
        graph.edge_weight(),
        Some(&mut dropout.value),
    )?;
    wrap("logits", out.logits, graph)
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

/// The graph's labels (`y`), with the graph's brand.
pub fn labels<'d>(graph: &impl OnDevice<'d, Graph>) -> Result<On<'d, PlacedTensor>> {
    let graph = graph.value();
    wrap("y", labelled(graph)?.0.clone(), graph)
}

/// The ids of the graph's training nodes, with the graph's brand.
pub fn train_nodes<'d>(graph: &impl OnDevice<'d, Graph>) -> Result<On<'d, PlacedTensor>> {
    let graph = graph.value();
    wrap("train ids", labelled(graph)?.1.train.clone(), graph)
}

/// The rows of `x` at `ids` (PyTorch: `x[ids]`), both on one device.
pub fn rows<'d>(
    x: &impl OnDevice<'d, PlacedTensor>,
    ids: &impl OnDevice<'d, PlacedTensor>,
) -> Result<On<'d, PlacedTensor>> {
    let (x, ids) = (x.value(), ids.value());
    let picked = x.tensor().index_select(ids.tensor(), 0)?;
    Ok(On::new(PlacedTensor::wrap(
        &format!("{}[{}]", x.name(), ids.name()),
        picked,
        x.placement(),
    )?))
}

/// Cross-entropy of `logits` against `labels` (PyTorch: `F.cross_entropy`), both on one
/// device: labels left on the host do not compile.
pub fn cross_entropy<'d>(
    logits: &impl OnDevice<'d, PlacedTensor>,
    labels: &impl OnDevice<'d, PlacedTensor>,
) -> Result<On<'d, PlacedTensor>> {
    let (logits, labels) = (logits.value(), labels.value());
    let loss = candle_nn::loss::cross_entropy(logits.tensor(), labels.tensor())?;
    Ok(On::new(PlacedTensor::wrap(
        "loss",
        loss,
        logits.placement(),
    )?))
}

/// Stacks the rows of several tensors on one device (PyTorch: `torch.cat(outputs)`): outputs of
/// other devices must be moved here first (`out.to(&dev)?`).
pub fn gather<'d>(parts: &[&On<'d, PlacedTensor>]) -> Result<On<'d, PlacedTensor>> {
    let first = parts
        .first()
        .ok_or_else(|| WorkbookError::InvalidConfig("gather needs at least one tensor".into()))?;
    let tensors: Vec<&Tensor> = parts.iter().map(|p| p.tensor()).collect();
    Ok(On::new(PlacedTensor::wrap(
        "gathered",
        Tensor::cat(&tensors, 0)?,
        first.placement(),
    )?))
}

/// PyTorch's Adam (`lr`, no weight decay) over `model`'s parameters, its state on the model's
/// device and with its brand.
pub fn adam<'d>(model: &impl OnDevice<'d, Model>, lr: f64) -> Result<On<'d, Adam>> {
    Ok(On::new(Adam::for_model(model.value(), lr, |_| 0.0)?))
}

impl<'d> On<'d, Adam> {
    /// Back-propagates `loss` and updates the parameters: `loss` must come from this device.
    pub fn step(&mut self, loss: &impl OnDevice<'d, PlacedTensor>) -> Result<()> {
        self.value.backward_step(loss.value().tensor())
    }

    /// The optimiser for `model`, a moved copy of the model this one was built for, its state
    /// moved with it ([`Adam::to_model`]): an optimiser built before the move is not left
    /// behind, because the old one keeps the old brand.
    pub fn follow<'e>(&self, model: &impl OnDevice<'e, Model>) -> Result<On<'e, Adam>> {
        Ok(On::new(self.value.to_model(model.value())?))
    }
}

/// One training step, as [`Trainer::epoch`](crate::train::Trainer::epoch) takes it: forward
/// with dropout, cross-entropy on the training nodes, backward and update. Returns the loss.
pub fn step<'d>(
    model: &On<'d, Model>,
    opt: &mut On<'d, Adam>,
    graph: &On<'d, Graph>,
    dropout: &mut On<'d, Dropout>,
) -> Result<On<'d, PlacedTensor>> {
    let logits = forward_train(model, graph, dropout)?;
    let ids = train_nodes(graph)?;
    let loss = cross_entropy(&rows(&logits, &ids)?, &rows(&labels(graph)?, &ids)?)?;
    opt.step(&loss)?;
    Ok(loss)
}

/// A scalar read back to the host (PyTorch: `.item()`), recorded in the ledger.
pub fn scalar(x: &On<'_, PlacedTensor>) -> Result<f32> {
    x.placement()
        .fetch_scalar::<f32>(&x.tensor().to_dtype(candle_core::DType::F32)?, x.name())
}
