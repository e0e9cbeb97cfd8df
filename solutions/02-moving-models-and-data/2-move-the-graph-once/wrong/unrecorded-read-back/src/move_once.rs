//! A training loop that moves the graph once and reads back only the metrics.
//!
//! The graph of a full-batch run never changes, yet PyTorch scripts often write
//! `data = data.to(device)` inside the loop, and compute accuracy with `out.cpu()` or
//! `.tolist()`. Both work, and both only cost time, so no error will say so; the
//! [transfer ledger](workbook::ledger) will. The rule: the graph crosses to the device once,
//! the parameters are created there, and per epoch only a handful of numbers come back.

use workbook::candle_core::{DType, Tensor, D};
use workbook::candle_nn::loss::cross_entropy;
use workbook::train::TrainConfig;
use workbook::{Graph, Model, ModelConfig, Placement, Result, Split, WorkbookError};

/// What one epoch measured, read back to the host.
#[derive(Clone, Debug, PartialEq)]
pub struct EpochMetrics {
    pub epoch: usize,
    /// The training loss (cross-entropy on the training nodes).
    pub loss: f32,
    pub train_accuracy: f32,
    pub val_accuracy: f32,
    pub test_accuracy: f32,
}

/// Trains the classic two-layer GCN (16 hidden) on `host_graph`, which is on the host, with
/// the model and the work on `device`, for `config.epochs` epochs with `config`'s recipe and
/// seed (the same run as [`workbook::train::Trainer`] makes). Returns every epoch's metrics.
///
/// When `device` has a ledger, its phases are `load`, `init`, then `epoch 1`, `epoch 2`, ...
pub fn train_on(
    host_graph: &Graph,
    device: &Placement,
    config: &TrainConfig,
) -> Result<Vec<EpochMetrics>> {
    let phase = |name: String| {
        if let Some(ledger) = device.ledger() {
            ledger.set_phase(name);
        }
    };
    phase("load".into());
    // The graph never changes: it crosses to the device once, here.
    let graph = host_graph.to_device(device)?;

    phase("init".into());
    let model_config = ModelConfig::gcn(host_graph.num_features(), 16, host_graph.num_classes());
    let (model, _vars) = Model::init(model_config, config.seed, device)?;
    let mut optimizer = config.optimizer(&model)?;
    let mut dropout = config.dropout(device.device());

    let mut history = Vec::new();
    for epoch in 1..=config.epochs {
        phase(format!("epoch {epoch}"));
        let (y, split) = labelled(&graph)?;
        let out = model.forward_t(
            graph.x(),
            graph.edge_index(),
            graph.edge_weight(),
            Some(&mut dropout),
        )?;
        let loss = cross_entropy(
            &out.logits.index_select(&split.train, 0)?,
            &y.index_select(&split.train, 0)?,
        )?;
        optimizer.backward_step(&loss)?;
        let eval = model.forward_graph(&graph)?;
        history.push(read_metrics(epoch, &loss, &eval.logits, &graph, device)?);
    }
    Ok(history)
}

/// The epoch's metrics on the host, read back in **one** transfer of four `f32`s: the loss and
/// the number of correctly classified training, validation and test nodes, all computed on
/// `device` (the predictions are the arg-max of `logits`). Accuracy = correct / nodes in the
/// set (NaN for an empty set).
pub fn read_metrics(
    epoch: usize,
    loss: &Tensor,
    logits: &Tensor,
    graph: &Graph,
    device: &Placement,
) -> Result<EpochMetrics> {
    let (y, split) = labelled(graph)?;
    let predictions = logits.argmax(D::Minus1)?;
    let mut parts = vec![loss.to_dtype(DType::F32)?.reshape(1)?];
    for ids in [&split.train, &split.val, &split.test] {
        let correct = predictions
            .index_select(ids, 0)?
            .eq(&y.index_select(ids, 0)?)?
            .to_dtype(DType::F32)?
            .sum_all()?
            .reshape(1)?;
        parts.push(correct);
    }
    let metrics = Tensor::cat(&parts, 0)?;
    // one small read, but straight off the device: on a GPU a copy no ledger shows
    let host = metrics.to_vec1::<f32>()?;
    let accuracy = |correct: f32, ids: &Tensor| -> Result<f32> {
        let n = ids.dim(0)?;
        Ok(if n == 0 { f32::NAN } else { correct / n as f32 })
    };
    Ok(EpochMetrics {
        epoch,
        loss: host[0],
        train_accuracy: accuracy(host[1], &split.train)?,
        val_accuracy: accuracy(host[2], &split.val)?,
        test_accuracy: accuracy(host[3], &split.test)?,
    })
}

/// The labels and the split, which training needs.
fn labelled(graph: &Graph) -> Result<(&Tensor, &Split)> {
    match (graph.y(), graph.split()) {
        (Some(y), Some(split)) => Ok((y, split)),
        _ => Err(WorkbookError::InvalidGraph(format!(
            "graph '{}' has no labels or split; training needs both",
            graph.name
        ))),
    }
}
