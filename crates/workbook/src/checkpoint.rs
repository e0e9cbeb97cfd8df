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
//! The file must be a regular file within the loading cap ([`crate::input_file`]), and
//! parameters holding NaN or infinite values are refused by name ([`crate::non_finite`]).
//!
//! Weights saved from a *wrapped* model, whose names all start with `module.` (PyTorch's
//! `DataParallel` and `DistributedDataParallel`), are named as such, with the fixes: save the
//! unwrapped model (`model.module.state_dict()`), or load with [`load_stripping_prefix`]
//! ([`strip_prefix`] on names already read).
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
use crate::layers::LayerRegistry;
use crate::model::infer::infer_config;
use crate::model::{Model, ModelConfig};
use crate::placement::Placement;
use crate::tensor_file;
use crate::torch_file::{MapLocation, TorchFile, TorchFormat};
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
///
/// A model whose layers sit on several devices (a model-parallel model's
/// [`model()`](crate::parallel::model_parallel::ModelParallel::model)) is saved as it is: each
/// parameter is copied from its own device, and the file stores no devices, so it loads
/// anywhere.
pub fn save(model: &Model, path: &Path) -> Result<()> {
    crate::atomic_write::write(path, &to_bytes(model, path)?)
}

/// The bytes [`save`] writes (for a set of files written together,
/// [`crate::atomic_write::FileSet`]); `path` names the destination in errors.
pub fn to_bytes(model: &Model, path: &Path) -> Result<Vec<u8>> {
    model.check_materialized("checkpoint::save")?;
    let at = model.placement();
    let host = at.destination(&Placement::cpu());
    let placements = model.parameter_placements();
    let tensors = model
        .named_parameters()
        .into_iter()
        .zip(placements)
        .map(|((name, t), (_, from))| Ok((name.clone(), host.move_tensor(&t, from, &name)?)))
        .collect::<Result<Vec<(String, Tensor)>>>()?;
    let config = serde_json::to_string(model.config())
        .map_err(|e| WorkbookError::file(path, format!("cannot serialise the config: {e}")))?;
    let metadata = HashMap::from([
        (CONFIG_KEY.to_string(), config),
        (FORMAT_KEY.to_string(), FORMAT.to_string()),
    ]);
    tensor_file::serialize(path, &tensors, Some(metadata))
}

/// Loads a checkpoint written by [`save`] onto `map_location` (a `&Device` or a [`Placement`]),
/// its layers of the built-in kinds ([`LayerRegistry::builtin`]).
pub fn load(path: &Path, map_location: impl Into<Placement>) -> Result<Model> {
    load_with(path, map_location, &LayerRegistry::builtin())
}

/// [`load`] of a checkpoint whose layers may be of your own kinds: `registry` names them
/// (`LayerRegistry::builtin().with::<MeanConfig>("MeanConv")`); the kind each layer was saved
/// under is looked up there, and its config rebuilds it.
pub fn load_with(
    path: &Path,
    map_location: impl Into<Placement>,
    registry: &LayerRegistry,
) -> Result<Model> {
    let file = tensor_file::read(path, &Device::Cpu)?;
    let Some(text) = file.metadata.get(CONFIG_KEY) else {
        return Err(WorkbookError::file(
            path,
            format!("has no model config in its metadata ('{CONFIG_KEY}'); it was not written by checkpoint::save. For a PyG state_dict, use checkpoint::load_with_config with the model's config"),
        ));
    };
    let config = ModelConfig::from_json_with(text, registry)
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
    config.validate()?;
    let file = tensor_file::read(path, &Device::Cpu)?;
    from_file(path, config, file.tensors, map_location.into())
}

/// [`load_with_config`] for weights saved from a wrapped model, whose names carry `prefix`
/// (`"module."` from PyTorch's `DataParallel` / `DistributedDataParallel`): the prefix is
/// removed first ([`strip_prefix`]), as PyTorch users do with
/// `{k.removeprefix("module."): v for k, v in state_dict.items()}`.
pub fn load_stripping_prefix(
    path: &Path,
    config: ModelConfig,
    map_location: impl Into<Placement>,
    prefix: &str,
) -> Result<Model> {
    config.validate()?;
    let file = tensor_file::read(path, &Device::Cpu)?;
    let tensors = strip_prefix(file.tensors, prefix)?;
    from_file(path, config, tensors, map_location.into())
}

/// What [`load_pt`] read from a PyTorch `.pt` file, and what it decided on the way.
#[derive(Debug)]
pub struct PtImport {
    /// The model, on the placement the map location chose.
    pub model: Model,
    /// The file's `torch.save` format.
    pub format: TorchFormat,
    /// The locations its storages were saved on (`cpu`, `cuda:0`).
    pub saved_on: Vec<String>,
    /// Whether the config was inferred from the names and shapes (no config given).
    pub inferred: bool,
    /// Every decision worth reading: a wrapper's prefix removed, a nested state_dict taken,
    /// each default an inferred config took.
    pub notes: Vec<String>,
}

/// Loads a PyTorch checkpoint, `torch.save(model.state_dict(), path)`, onto `map_location`
/// (PyTorch's `map_location`: [`MapLocation::AsSaved`] fails for a file saved on a GPU this
/// machine lacks, as `torch.load` does). The model is `config`, or when `None` the one the
/// state_dict's PyG names and shapes describe ([`infer_config`]). Keys saved from a wrapped
/// model (`module.` from `DataParallel`) have the prefix removed, with a note saying why it was
/// there. The same checks as [`load_with_config`] follow: every name, shape and dtype, and no
/// NaN. Nothing in the file is run: see [`crate::torch_file`].
///
/// ```
/// use workbook::checkpoint::load_pt;
/// use workbook::torch_file::MapLocation;
/// use workbook::Placement;
/// let dir = env!("CARGO_MANIFEST_DIR");
/// let path = format!("{dir}/tests/fixtures/pyg/pt/cora_gcn_dataparallel.pt");
/// let import = load_pt(path.as_ref(), &MapLocation::To(Placement::sim(1)), None).unwrap();
/// assert_eq!(import.model.placement().to_string(), "sim:1");
/// assert!(import.notes[0].contains("'module.'"), "{:?}", import.notes);
/// assert_eq!(import.model.config().layers[0].in_channels(), 1433);
/// ```
pub fn load_pt(
    path: &Path,
    map_location: &MapLocation,
    config: Option<ModelConfig>,
) -> Result<PtImport> {
    let file = TorchFile::read(path)?;
    let at = file.placement(map_location)?;
    let mut notes = file.notes.clone();
    let mut tensors = file.host_tensors()?;
    let names: Vec<&String> = tensors.keys().collect();
    if let Some(prefix) = ["module.", "_orig_mod."]
        .into_iter()
        .find(|p| !names.is_empty() && names.iter().all(|n| n.starts_with(p)))
    {
        let (wrapper, fix) = crate::error::wrapper_of(prefix);
        notes.insert(0, format!(
            "every key starts with '{prefix}': the state_dict of a model wrapped in {wrapper}, saved without unwrapping it ({fix}); the prefix was removed"
        ));
        tensors = strip_prefix(tensors, prefix)?;
    }
    let inferred = config.is_none();
    let config = match config {
        Some(c) => {
            c.validate()?;
            c
        }
        None => {
            let mut shapes: Vec<(String, Vec<usize>)> = tensors
                .iter()
                .map(|(n, t)| (n.clone(), t.dims().to_vec()))
                .collect();
            shapes.sort();
            let (c, more) = infer_config(&shapes)?;
            notes.extend(more);
            c
        }
    };
    let model = from_file(path, config, tensors, at)?;
    Ok(PtImport {
        model,
        format: file.format,
        saved_on: file.locations().into_iter().map(str::to_string).collect(),
        inferred,
        notes,
    })
}

/// The names with `prefix` removed where they start with it (others are kept as they are):
/// PyTorch's `{k.removeprefix(prefix): v for k, v in state_dict.items()}`. Two names that
/// become one (`module.conv1.lin.weight` beside `conv1.lin.weight`) are an error rather than
/// one silently replacing the other.
///
/// ```
/// use workbook::checkpoint::strip_prefix;
/// use workbook::candle_core::{Device, Tensor};
/// use std::collections::HashMap;
/// let t = Tensor::new(&[1f32], &Device::Cpu).unwrap();
/// let saved = HashMap::from([("module.conv1.bias".to_string(), t.clone()), ("epoch".to_string(), t)]);
/// let mut names: Vec<String> = strip_prefix(saved, "module.").unwrap().into_keys().collect();
/// names.sort();
/// assert_eq!(names, ["conv1.bias", "epoch"]);
/// ```
pub fn strip_prefix(
    tensors: HashMap<String, Tensor>,
    prefix: &str,
) -> Result<HashMap<String, Tensor>> {
    let mut names: Vec<String> = tensors.keys().cloned().collect();
    names.sort();
    let mut tensors = tensors;
    let mut out = HashMap::with_capacity(names.len());
    let mut clashes = Vec::new();
    for name in names {
        let Some(t) = tensors.remove(&name) else {
            continue;
        };
        let short = name.strip_prefix(prefix).unwrap_or(&name).to_string();
        if out.insert(short.clone(), t).is_some() {
            clashes.push(format!(
                "both '{prefix}{short}' and '{short}' are in the file; stripping '{prefix}' would make them one name (keep one of them)"
            ));
        }
    }
    if clashes.is_empty() {
        Ok(out)
    } else {
        Err(WorkbookError::WeightsMismatch(clashes))
    }
}

/// The wrapper that saves parameter names with `prefix`, and how to save without it (for
/// [`WorkbookError::WrappedWeights`]).
pub use crate::error::wrapper_of;

/// The model of `tensors` read from `path`, for a `config` the caller validated.
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
    // Named before anything is copied: a wrapped model's file is not a list of problems.
    let names: Vec<&String> = tensors.keys().collect();
    if let Some(err) =
        crate::model::state_dict::wrapped(&path.display().to_string(), &expected, &names)
    {
        return Err(err);
    }
    // A lazy layer (in_channels = -1) takes its width from the weights, as PyTorch's
    // load_state_dict materialises one.
    let config = crate::model::widths_from_tensors(config, &tensors)?;
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
    // Checked on the host, before anything moves: a NaN weight makes every prediction NaN.
    let mut used: Vec<(&String, &Tensor)> = tensors
        .iter()
        .filter(|(k, _)| expected.contains(k))
        .collect();
    used.sort_by(|a, b| a.0.cmp(b.0));
    crate::non_finite::check(&path.display().to_string(), used)?;
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
    match Model::from_checked_tensors(config, &tensors, at) {
        Ok(model) if unexpected.is_empty() => Ok(model),
        Ok(_) => Err(with_path(unexpected)),
        Err(WorkbookError::WeightsMismatch(mut problems)) => {
            problems.extend(unexpected);
            Err(with_path(problems))
        }
        Err(other) => Err(other),
    }
}
