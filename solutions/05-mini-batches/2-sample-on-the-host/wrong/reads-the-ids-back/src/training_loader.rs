//! The training loader of a mini-batch run.
//!
//! "Put everything on the GPU first" is good advice for full-batch training and wrong for a
//! sampler: PyG's `NeighborLoader` samples on the CPU, and `input_nodes` on the GPU kills the
//! kernel (PyG issue 7691). The workbook's loader refuses device-side inputs with
//! `WorkbookError::SamplerInputOnDevice`. The graph stays on the host; only the batches move.

use workbook::loader::{InputNodes, LoaderConfig, NeighborLoader};
use workbook::{Graph, Placement, Result};

/// The loader for training on `device`: PyG's `NeighborLoader(graph, num_neighbors=[10, 10],
/// batch_size=32, input_nodes=<the training nodes>, shuffle=True)`, seeded with `seed`.
/// `graph` is on the host.
pub fn training_loader(graph: &Graph, device: &Placement, seed: u64) -> Result<NeighborLoader> {
    // The ids went to the device first, then are read back: it works, at the cost of two copies.
    let on_device = graph.to_device(device)?;
    let train = on_device
        .split()
        .expect("the graph has a split")
        .train
        .clone();
    let ids = device.fetch_vec1::<u32>(&train, "train ids")?;
    let config = LoaderConfig {
        input_nodes: InputNodes::Ids(ids),
        shuffle: true,
        seed,
        ..LoaderConfig::new(&[10, 10], 32)
    };
    NeighborLoader::new(graph, config)
}
