//! safetensors export for PyTorch Geometric users: the weights under PyG's names and a small
//! JSON config beside them.
//!
//! `model.safetensors` is a [`checkpoint`] (PyG `state_dict` names such as
//! `conv1.lin.weight`, float32, the config also in its metadata) and `model.json` is the config
//! alone (layer classes and their constructor arguments, activation, dropout), for a person
//! building the PyG model by hand. In Python:
//!
//! ```python
//! from safetensors.torch import load_file
//! model = GCN(1433, 16, 7)  # conv1 = GCNConv(1433, 16), conv2 = GCNConv(16, 7), as in model.json
//! model.load_state_dict(load_file("model.safetensors"))
//! ```
//!
//! ```
//! use workbook::{Model, ModelConfig, Placement};
//! use workbook::export::safetensors::{export, config_path};
//! let dir = tempfile::tempdir().unwrap();
//! let path = dir.path().join("gcn.safetensors");
//! let (model, _) = Model::init(ModelConfig::gcn(4, 8, 2), 0, &Placement::cpu()).unwrap();
//! export(&model, &path).unwrap();
//! assert!(config_path(&path).ends_with("gcn.json"));
//! let back = workbook::checkpoint::load(&path, &Placement::cpu()).unwrap();
//! assert_eq!(back.config(), model.config());
//! ```

use crate::atomic_write;
use crate::checkpoint;
use crate::error::{Result, WorkbookError};
use crate::model::Model;
use std::path::{Path, PathBuf};

/// The config side file of `weights`: same name with extension `.json`.
pub fn config_path(weights: &Path) -> PathBuf {
    weights.with_extension("json")
}

/// Writes the weights (PyG names, float32) to `path` and the config to
/// [`config_path`]`(path)` as one unit ([`atomic_write::FileSet`]): both new files are written
/// first, then renamed into place; if either cannot be, the old pair is left as it was.
/// Returns the config path.
pub fn export(model: &Model, path: &Path) -> Result<PathBuf> {
    model.check_materialized("safetensors export")?;
    model.require_float32("exports are")?;
    // The host copy of every weight, and the file's bytes.
    crate::limits::check_memory(
        &format!("the safetensors export of {}", path.display()),
        crate::limits::parameter_bytes(model.config()).saturating_mul(2),
    )?;
    let json = config_path(path);
    let text = serde_json::to_string_pretty(model.config())
        .map_err(|e| WorkbookError::file(&json, format!("cannot serialise the config: {e}")))?;
    let mut pair = atomic_write::FileSet::new();
    pair.add(path, &checkpoint::to_bytes(model, path)?)?;
    pair.add(&json, format!("{text}\n").as_bytes())?;
    pair.commit()?;
    Ok(json)
}
