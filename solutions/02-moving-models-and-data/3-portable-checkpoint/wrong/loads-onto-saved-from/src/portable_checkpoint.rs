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
use workbook::candle_core::{Device, Tensor};
use workbook::{tensor_file, Model, ModelConfig, Placement, Result, WorkbookError};

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
    let file_error = |message: String| WorkbookError::File {
        path: path.into(),
        message,
    };
    let io = |e| WorkbookError::Io {
        path: path.into(),
        source: e,
    };
    // Every copy to the host is explicit, so the ledger shows it (one entry per parameter).
    let at = model.placement();
    let host = Placement::cpu();
    let tensors = model
        .named_parameters()
        .into_iter()
        .map(|(name, t)| Ok((name.clone(), host.move_tensor(&t, at, &name)?)))
        .collect::<Result<Vec<(String, Tensor)>>>()?;
    let config = serde_json::to_string(model.config())
        .map_err(|e| file_error(format!("cannot serialise the config: {e}")))?;
    let metadata = HashMap::from([
        (CONFIG_KEY.to_string(), config),
        (SAVED_FROM_KEY.to_string(), at.to_string()),
    ]);
    let bytes = safetensors::serialize(
        tensors.iter().map(|(name, t)| (name.as_str(), t)),
        Some(metadata),
    )
    .map_err(|e| file_error(format!("cannot serialise: {e}")))?;

    // A temporary file in the checkpoint's own folder (a rename is only atomic within one file
    // system), written and flushed to disk, then renamed over the checkpoint. On any error the
    // temporary file is dropped, which deletes it, and the old checkpoint was never touched.
    let dir = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    };
    let mut tmp = tempfile::NamedTempFile::new_in(dir).map_err(io)?;
    write(tmp.as_file_mut(), &bytes).map_err(io)?;
    tmp.as_file().sync_all().map_err(io)?;
    tmp.persist(path).map_err(|e| io(e.error))?;
    Ok(())
}

/// Loads a checkpoint written by [`save`] onto `map_location` (PyTorch's `map_location`),
/// whatever device it was saved from. Errors name the file and everything wrong with it: every
/// missing or mismatched tensor, a missing config, a file that is not safetensors.
pub fn load(path: &Path, map_location: &Placement) -> Result<Loaded> {
    // Read on the host; errors for an unreadable or truncated file name the path.
    let file = tensor_file::read(path, &Device::Cpu)?;
    let metadata = |key: &str| {
        file.metadata.get(key).ok_or_else(|| WorkbookError::File {
            path: path.into(),
            message: format!("has no '{key}' in its metadata; was it written by save?"),
        })
    };
    let config =
        ModelConfig::from_json(metadata(CONFIG_KEY)?).map_err(|e| WorkbookError::File {
            path: path.into(),
            message: format!("its model config ('{CONFIG_KEY}') is invalid: {e}"),
        })?;
    let saved_from = metadata(SAVED_FROM_KEY)?.clone();
    // torch.load without map_location: back onto the device it was saved from, when it exists
    let _ = map_location;
    let spec: workbook::device::DeviceSpec = saved_from.parse()?;
    let back_home = workbook::device::open(spec, "recorded in the checkpoint")?.placement;
    let map_location = &back_home;
    let host = Placement::cpu();
    let tensors = file
        .tensors
        .iter()
        .map(|(name, t)| Ok((name.clone(), map_location.move_tensor(t, &host, name)?)))
        .collect::<Result<HashMap<String, Tensor>>>()?;
    // `from_tensors` checks every expected name, shape and dtype and lists every problem.
    let model = Model::from_tensors(config, &tensors, map_location).map_err(|e| match e {
        WorkbookError::WeightsMismatch(mut problems) => {
            problems.push(format!("(checkpoint: {})", path.display()));
            WorkbookError::WeightsMismatch(problems)
        }
        other => other,
    })?;
    Ok(Loaded { model, saved_from })
}
