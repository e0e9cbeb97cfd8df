//! The training loader of a mini-batch run.
//!
//! "Put everything on the GPU first" is good advice for full-batch training and wrong for a
//! sampler: PyG's `NeighborLoader` samples on the CPU. PyG 2.3 died of `input_nodes` on the GPU
//! (issue 7691); since 2.4 (PR 7572) the loader moves sampling inputs to the CPU itself. The
//! workbook's loader stays stricter and refuses device-side inputs with
//! `WorkbookError::SamplerInputOnDevice`, so that every copy to the device is one you wrote. The
//! graph stays on the host; only the batches move.

use workbook::loader::{InputNodes, LoaderConfig, NeighborLoader};
use workbook::{Graph, Placement, Result};

/// The loader for training on `device`: PyG's `NeighborLoader(graph, num_neighbors=[10, 10],
/// batch_size=32, input_nodes=<the training nodes>, shuffle=True)`, seeded with `seed`.
/// `graph` is on the host.
pub fn training_loader(graph: &Graph, device: &Placement, seed: u64) -> Result<NeighborLoader> {
    // TODO: the sampler works on the host: build it from the host graph with host-side input nodes (no copy to the device at all).
    let on_device = graph.to_device(device)?;
    let train = on_device
        .split()
        .expect("the graph has a split")
        .train
        .clone();
    let config = LoaderConfig {
        input_nodes: InputNodes::Tensor {
            ids: train,
            at: device.clone(),
        },
        shuffle: true,
        seed,
        ..LoaderConfig::new(&[10, 10], 32)
    };
    NeighborLoader::new(&on_device, config)
}
