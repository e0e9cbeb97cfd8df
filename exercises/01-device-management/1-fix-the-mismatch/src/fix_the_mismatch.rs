//! The classic failure: the model was built on the accelerator, the graph was loaded on the CPU.
//!
//! In PyTorch Geometric, `model(data.x, data.edge_index)` then fails with *"Expected all tensors
//! to be on the same device, but found at least two devices, cuda:0 and cpu!"*. The workbook
//! reports the same mistake, naming the tensor, before any kernel runs.

use workbook::{Graph, Model, ModelOutput, Result};

/// Runs `model` on `graph`, wherever the graph was loaded.
///
/// The graph may be on any device; the model is where it is and must not move.
pub fn forward_anywhere(model: &Model, graph: &Graph) -> Result<ModelOutput> {
    // TODO: the model is where it is; bring the graph there (wherever that is) before the forward pass.
    model.forward_graph(graph)
}

/// Classifies every member of Zachary's karate club with a fresh 2-layer GCN on `device`,
/// initialised from `seed`.
///
/// Returns the predicted community of each of the 34 members (the arg-max of the logits).
pub fn karate_predictions(device: &workbook::Placement, seed: u64) -> Result<Vec<u32>> {
    let (model, _vars) =
        workbook::Model::init(workbook::ModelConfig::gcn(34, 16, 4), seed, device)?;
    let graph = workbook::datasets::karate(workbook::Placement::cpu())?;
    let out = forward_anywhere(&model, &graph)?;
    // TODO: bring back only the predictions, with a read-back that the transfer ledger records (see `workbook::Placement`), not by reading the device's tensor directly.
    let predictions = out.logits.argmax(1)?.to_vec1::<u32>()?;
    Ok(predictions)
}
