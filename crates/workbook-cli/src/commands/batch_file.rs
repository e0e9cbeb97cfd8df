//! `workbook bench --batch-size N --save-batches FILE`: the sampled batches, for PyG to replay.
//!
//! PyG 2.8's `NeighborLoader` samples only with `pyg-lib` or `torch-sparse`; where neither is
//! installed, PyG cannot sample at all. To still compare mini-batch *training* with PyG, the
//! bench writes every batch its trainer used (warm-up and timed epochs, in order) and
//! `scripts/pyg_bench.py --batches FILE` times PyG's training step on exactly those subgraphs.
//! The loader is deterministic in (seed, epoch, batch), so walking the trainer's own loader
//! again yields the batches it trained on.
//!
//! One safetensors file, written atomically. Per batch `b` of epoch `e` (both from 1 and 0):
//! `epoch{e}.batch{b}.n_id` (`i64 [N]`, global node ids; the first `batch_size` are the seeds),
//! `epoch{e}.batch{b}.edge_index` (`i64 [2, E]`, positions in `n_id`, row 0 the source) and
//! `epoch{e}.batch{b}.batch_size` (`i64 [1]`). Metadata (strings): `format`
//! (`workbook-batches/1`), `epochs`, `warmup`, `num_nodes` (of the whole graph), `graph`,
//! `num_neighbors` (JSON). Features and labels are not repeated: they are the graph file's
//! rows `x[n_id]` and `y[n_id]`, which the reader gathers, as a loader does, outside the timed
//! step.

use anyhow::{Context, Result};
use std::collections::HashMap;
use std::path::Path;
use workbook::candle_core::{DType, Device, Tensor};
use workbook::loader::NeighborLoader;

/// The file's `format` metadata, checked by the reader.
pub const FORMAT: &str = "workbook-batches/1";

/// Writes the batches of epochs `1..=epochs` of `loader` (the first `warmup` untimed) to
/// `path`; returns the number of batches written.
pub fn save(
    path: &Path,
    loader: &NeighborLoader,
    graph_name: &str,
    num_nodes: usize,
    epochs: usize,
    warmup: usize,
) -> Result<usize> {
    let cpu = Device::Cpu;
    let mut tensors = Vec::new();
    for e in 1..=epochs {
        for (b, batch) in loader.batches(e as u64).enumerate() {
            let batch = batch.with_context(|| format!("sampling batch {b} of epoch {e}"))?;
            let name = |part: &str| format!("epoch{e}.batch{b}.{part}");
            tensors.push((name("n_id"), batch.n_id().to_dtype(DType::I64)?));
            tensors.push((name("edge_index"), batch.edge_index().to_tensor(&cpu)?));
            tensors.push((
                name("batch_size"),
                Tensor::new(&[batch.batch_size() as i64], &cpu)?,
            ));
        }
    }
    let written = tensors.len() / 3;
    let metadata = HashMap::from([
        ("format".to_string(), FORMAT.to_string()),
        ("epochs".to_string(), epochs.to_string()),
        ("warmup".to_string(), warmup.to_string()),
        ("num_nodes".to_string(), num_nodes.to_string()),
        ("graph".to_string(), graph_name.to_string()),
        (
            "num_neighbors".to_string(),
            serde_json::to_string(&loader.config().num_neighbors)?,
        ),
    ]);
    workbook::tensor_file::write(path, &tensors, Some(metadata))
        .with_context(|| format!("writing the batches to {}", path.display()))?;
    Ok(written)
}
