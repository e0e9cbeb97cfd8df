//! `torch.save(model.state_dict(), path)` records each tensor's device, and `torch.load` puts it
//! back there unless `map_location` says otherwise: a checkpoint written on a GPU fails to load on
//! a laptop. And `torch.save` writes in place, so a crash or a full disk half-way through leaves
//! neither the old checkpoint nor the new one.
//!
//! The checkpoint here is portable and safe to overwrite:
//! - a safetensors file with PyG's parameter names (`conv1.lin.weight`, ...), so PyG's
//!   `load_state_dict` accepts it, and every tensor copied to the host before it is written;
//! - the model's config (JSON) and the device it was saved from in the file's metadata, so it
//!   loads without a separate config file, and the device is information, never a destination;
//! - loaded onto the device named at load time (`map_location`), checking every tensor;
//! - written atomically: a temporary file in the same folder, renamed over the old checkpoint
//!   only once it is complete.

use std::collections::HashMap;
use std::fs::File;
use std::io::Write;
use std::path::Path;
use workbook::{Model, Placement, Result, WorkbookError};

/// Metadata key holding the model's config as JSON (the key `workbook::checkpoint` uses too, so
/// `workbook inspect --checkpoint` reads these files).
pub const CONFIG_KEY: &str = "workbook.model_config";
/// Metadata key holding the device the model was saved from (`cuda:0`, `sim:1`, `cpu`).
pub const SAVED_FROM_KEY: &str = "workbook.saved_from";

/// A checkpoint, loaded.
#[derive(Debug)]
pub struct Loaded {
    /// The model, on the device asked for.
    pub model: Model,
    /// The device it was saved from (the metadata's `SAVED_FROM_KEY`): information only.
    pub saved_from: String,
}

/// Saves `model` to `path` (see [`save_with`]).
pub fn save(model: &Model, path: &Path) -> Result<()> {
    save_with(model, path, |file, bytes| file.write_all(bytes))
}

/// Saves `model`'s parameters (PyG names) to `path`, with the config and the device it is on in
/// the metadata, replacing any existing file atomically. `write` puts the serialised bytes into
/// the open file ([`save`] passes `write_all`; the tests pass one that fails half-way, like a
/// full disk).
pub fn save_with(
    model: &Model,
    path: &Path,
    write: impl FnOnce(&mut File, &[u8]) -> std::io::Result<()>,
) -> Result<()> {
    // TODO: copy each parameter to the host with `Placement::cpu().move_tensor(&t, model.placement(), &name)`, so every copy is explicit and in the ledger.
    let tensors = model.named_parameters();
    let config = serde_json::to_string(model.config()).map_err(|e| WorkbookError::File {
        path: path.into(),
        message: format!("cannot serialise the config: {e}"),
    })?;
    // TODO: also record the device the model is on (`model.placement().to_string()`) under SAVED_FROM_KEY.
    let metadata = HashMap::from([(CONFIG_KEY.to_string(), config)]);
    let bytes = safetensors::serialize(
        tensors.iter().map(|(name, t)| (name.as_str(), t)),
        Some(metadata),
    )
    .map_err(|e| WorkbookError::File {
        path: path.into(),
        message: format!("cannot serialise: {e}"),
    })?;
    // TODO: write into a temporary file in the same folder (`tempfile::NamedTempFile::new_in`), sync it, then rename it over `path` (`persist`), so a failed write leaves the old checkpoint untouched.
    let io = |e| WorkbookError::Io {
        path: path.into(),
        source: e,
    };
    let mut file = File::create(path).map_err(io)?;
    write(&mut file, &bytes).map_err(io)?;
    Ok(())
}

/// Loads a checkpoint written by [`save`] onto `map_location` (PyTorch's `map_location`),
/// whatever device it was saved from. Errors name the file and everything wrong with it: every
/// missing or mismatched tensor, a missing config, a file that is not safetensors.
pub fn load(path: &Path, map_location: &Placement) -> Result<Loaded> {
    // TODO: read the file (e.g. `workbook::tensor_file::read(path, &Device::Cpu)`), parse the config from the metadata (`ModelConfig::from_json`), copy each tensor onto `map_location` (`move_tensor`), build the model with `Model::from_tensors`, and name `path` in every error.
    let _ = (path, map_location);
    todo!("load the checkpoint onto map_location")
}
