//! Portable checkpoints: save a model from any device, load it onto any device named at load
//! time (PyTorch's `map_location`).
//!
//! A checkpoint is a safetensors file with PyG's parameter names (so `load_state_dict` in PyG
//! accepts it) and the model's config as JSON in the file's metadata (so it loads without a
//! separate config file). Tensors are copied to the host before writing, so a checkpoint
//! written from `cuda:0` or `sim:1` loads on a machine with a CPU only, and the write is atomic:
//! a crash leaves the old file or the new one, never half of one.
//!
//! PyTorch's `torch.load` restores tensors to the device they were saved from unless
//! `map_location` says otherwise, which fails on a machine without that GPU. Here the device is
//! always named at load time, and loading checks every name, shape and dtype and reports every
//! problem at once: missing and unexpected names (what PyTorch's `strict=True` adds), shapes
//! (which PyTorch checks whatever `strict` says) and dtypes (which PyTorch casts silently).
//!
//! ```
//! use workbook::{checkpoint, placement::Placement, Model, ModelConfig};
//! let dir = tempfile::tempdir().unwrap();
//! let path = dir.path().join("gcn.safetensors");
//! let (model, _) = Model::init(ModelConfig::gcn(4, 8, 2), 0, &Placement::sim(1)).unwrap();
//! checkpoint::save(&model, &path).unwrap();
//! let back = checkpoint::load(&path, &Placement::cpu()).unwrap(); // map_location="cpu"
//! assert_eq!(back.placement().to_string(), "cpu");
//! assert_eq!(back.named_parameters().len(), model.named_parameters().len());
//! ```

use crate::error::{Result, WorkbookError};
use crate::model::{Model, ModelConfig};
use crate::placement::Placement;
use crate::tensor_file;
use candle_core::{Device, Tensor};
use std::collections::HashMap;
use std::path::Path;

/// Metadata key holding the model config (JSON).
pub const CONFIG_KEY: &str = "workbook.model_config";
/// Metadata key holding the format version.
pub const FORMAT_KEY: &str = "workbook.format";
/// The format version written by [`save`].
pub const FORMAT: &str = "workbook-checkpoint-1";

/// Writes `model`'s parameters (PyG names) and config to `path`, atomically. Each parameter's
/// copy to the host is recorded in the model's ledger, if it has one.
pub fn save(model: &Model, path: &Path) -> Result<()> {
    let at = model.placement();
    let host = at.destination(&Placement::cpu());
    let tensors = model
        .named_parameters()
        .into_iter()
        .map(|(name, t)| Ok((name.clone(), host.move_tensor(&t, at, &name)?)))
        .collect::<Result<Vec<(String, Tensor)>>>()?;
    let config = serde_json::to_string(model.config())
        .map_err(|e| WorkbookError::file(path, format!("cannot serialise the config: {e}")))?;
    let metadata = HashMap::from([
        (CONFIG_KEY.to_string(), config),
        (FORMAT_KEY.to_string(), FORMAT.to_string()),
    ]);
    tensor_file::write(path, &tensors, Some(metadata))
}

/// Loads a checkpoint written by [`save`] onto `map_location` (a `&Device` or a [`Placement`]).
pub fn load(path: &Path, map_location: impl Into<Placement>) -> Result<Model> {
    let file = tensor_file::read(path, &Device::Cpu)?;
    let Some(text) = file.metadata.get(CONFIG_KEY) else {
        return Err(WorkbookError::file(
            path,
            format!("has no model config in its metadata ('{CONFIG_KEY}'); it was not written by checkpoint::save. For a PyG state_dict, use checkpoint::load_with_config with the model's config"),
        ));
    };
    let config = ModelConfig::from_json(text)
        .map_err(|e| WorkbookError::file(path, format!("its model config is invalid: {e}")))?;
    from_file(path, config, file.tensors, map_location.into())
}

/// Loads parameters saved under PyG names (a checkpoint, or a PyG `state_dict` written with
/// `safetensors.torch.save_file`) into a model built from `config`, onto `map_location`.
pub fn load_with_config(
    path: &Path,
    config: ModelConfig,
    map_location: impl Into<Placement>,
) -> Result<Model> {
    let file = tensor_file::read(path, &Device::Cpu)?;
    from_file(path, config, file.tensors, map_location.into())
}

fn from_file(
    path: &Path,
    config: ModelConfig,
    tensors: HashMap<String, Tensor>,
    at: Placement,
) -> Result<Model> {
    let expected: Vec<String> = config
        .parameter_shapes()
        .into_iter()
        .map(|(n, _)| n)
        .collect();
    let mut unexpected: Vec<String> = tensors
        .keys()
        .filter(|k| !expected.contains(k))
        .map(|k| format!("unexpected '{k}' (the config has no such parameter)"))
        .collect();
    unexpected.sort();
    let with_path = |mut problems: Vec<String>| {
        problems.push(format!("(checkpoint: {})", path.display()));
        WorkbookError::WeightsMismatch(problems)
    };
    // Read on the host; each parameter's copy onto `at` is one ledger entry.
    let host = Placement::cpu();
    let tensors = tensors
        .into_iter()
        .map(|(name, t)| {
            let moved = if expected.contains(&name) {
                at.move_tensor(&t, &host, &name)?
            } else {
                t
            };
            Ok((name, moved))
        })
        .collect::<Result<HashMap<_, _>>>()?;
    match Model::from_tensors(config, &tensors, &at) {
        Ok(model) if unexpected.is_empty() => Ok(model),
        Ok(_) => Err(with_path(unexpected)),
        Err(WorkbookError::WeightsMismatch(mut problems)) => {
            problems.extend(unexpected);
            Err(with_path(problems))
        }
        Err(other) => Err(other),
    }
}
