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
pub fn training_loader(graph: &Graph, _device: &Placement, seed: u64) -> Result<NeighborLoader> {
    // Host graph, host-side seeds: nothing crosses; each batch moves later, in the loop.
    let config = LoaderConfig {
        input_nodes: InputNodes::All, // PyG's default: input_nodes=None
        shuffle: true,
        seed,
        ..LoaderConfig::new(&[10, 10], 32)
    };
    NeighborLoader::new(graph, config)
}
