//! A training loop that moves the graph once and reads back only the metrics.
//!
//! The graph of a full-batch run never changes, yet PyTorch scripts often write
//! `data = data.to(device)` inside the loop, and compute accuracy with `out.cpu()` or
//! `.tolist()`. Both work, and both only cost time, so no error will say so; the
//! [transfer ledger](workbook::ledger) will. The rule: the graph crosses to the device once,
//! the parameters are created there, and per epoch only a handful of numbers come back.

use workbook::candle_core::Tensor;
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
    // TODO: move the graph to the device once, here, before the loop (and not in every epoch).

    phase("init".into());
    let model_config = ModelConfig::gcn(host_graph.num_features(), 16, host_graph.num_classes());
    let (model, _vars) = Model::init(model_config, config.seed, device)?;
    let mut optimizer = config.optimizer(&model)?;
    let mut dropout = config.dropout(device.device());

    let mut history = Vec::new();
    for epoch in 1..=config.epochs {
        phase(format!("epoch {epoch}"));
        let graph = host_graph.to_device(device)?;
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
    // TODO: compute the loss and the three correct counts on the device and read them back in one transfer (device.fetch_vec1 of 4 f32s), not the logits, labels and ids.
    let (_, split) = labelled(graph)?;
    let loss = device.fetch_scalar::<f32>(loss, "loss")?;
    let classes = logits.dim(1)?;
    let logits = device.fetch_vec1::<f32>(&logits.flatten_all()?, "logits")?;
    let labels = device.fetch_vec1::<u32>(graph.y().expect("labelled"), "y")?;
    let mut accuracies = Vec::new();
    for (name, ids) in [
        ("train", &split.train),
        ("val", &split.val),
        ("test", &split.test),
    ] {
        let ids = device.fetch_vec1::<u32>(ids, &format!("{name} ids"))?;
        let correct = ids
            .iter()
            .filter(|&&node| {
                let row = &logits[node as usize * classes..(node as usize + 1) * classes];
                let predicted =
                    (0..classes).fold(0, |best, c| if row[c] > row[best] { c } else { best });
                predicted as u32 == labels[node as usize]
            })
            .count();
        accuracies.push(if ids.is_empty() {
            f32::NAN
        } else {
            correct as f32 / ids.len() as f32
        });
    }
    Ok(EpochMetrics {
        epoch,
        loss,
        train_accuracy: accuracies[0],
        val_accuracy: accuracies[1],
        test_accuracy: accuracies[2],
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
