//! One replica of a model per device, for data parallelism.
//!
//! PyTorch's `nn.DataParallel` copies the module's parameters and registered buffers to every
//! device, but a tensor kept in a plain attribute is shared, not copied: PyG's
//! `GCNConv(cached=True)` keeps its normalised edges in `_cached_edge_index`, so the replica on
//! `cuda:1` reads them from `cuda:0` and fails with *"Expected all tensors to be on the same
//! device, but found at least two devices, cuda:0 and cuda:1!"*. A replica must own a copy of
//! every parameter **and** every buffer, on its own device.

use workbook::{Model, Placement, Result};

/// One replica of `model` per device of `devices`, in order: replica `k` holds its own copy of
/// every parameter (trainable) and every buffer (GCN's `_cached_edge_index`), all on
/// `devices[k]`, each copy recorded in the devices' ledger. Where the model already is, its
/// replica needs no copy.
pub fn replicate(model: &Model, devices: &[Placement]) -> Result<Vec<Model>> {
    // A copy of everything the model holds, per device; no copy where it already is.
    // One copy on the host, then from there to every device (PyTorch: model.cpu(), then .to(d)).
    let on_host = model.to_device(Placement::cpu())?;
    devices.iter().map(|d| on_host.to_device(d)).collect()
}
