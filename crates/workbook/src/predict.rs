//! Running a PyG model from files: config JSON + safetensors weights + graph → predictions.
//!
//! This is what the `predict` command does, as a library call. The weights are a PyG
//! `state_dict` saved with `safetensors.torch.save_file(model.state_dict(), "w.safetensors")`;
//! tensors the model does not use are reported, not rejected (a file may carry extras).
//!
//! Before anything large is read or allocated: the output must not be one of the inputs
//! ([`atomic_write::refuse_overwriting`]), every input is a regular file within its cap
//! ([`crate::input_file`]), and the forward pass must fit the memory limit
//! ([`limits::check_inference_fits`]). Weights and features with NaN or infinite values are
//! refused ([`crate::non_finite`]).
//!
//! ```no_run
//! use workbook::predict::{predict_files, PredictPaths};
//! use std::path::Path;
//! let summary = predict_files(&PredictPaths {
//!     config: Path::new("model.json"), weights: Path::new("w.safetensors"),
//!     graph: Path::new("g.safetensors"), out: Path::new("out.safetensors"),
//!     weights_prefix: "",
//! }, &workbook::candle_core::Device::Cpu).unwrap();
//! println!("{} nodes predicted", summary.num_nodes);
//! ```

use crate::atomic_write;
use crate::error::{Result, WorkbookError};
use crate::graph::Graph;
use crate::input_file::{self, Cap};
use crate::limits;
use crate::model::{Model, ModelConfig};
use crate::placement::Placement;
use crate::tensor_file;
use candle_core::{Device, Tensor};
use std::collections::HashMap;
use std::path::Path;

/// The files of one prediction.
pub struct PredictPaths<'a> {
    pub config: &'a Path,
    pub weights: &'a Path,
    pub graph: &'a Path,
    pub out: &'a Path,
    /// A prefix to strip from weight names (e.g. `params.` or `model.`).
    pub weights_prefix: &'a str,
}

/// What a prediction did.
#[derive(Debug)]
pub struct PredictSummary {
    pub num_nodes: usize,
    pub num_edges: usize,
    pub out_shape: Vec<usize>,
    /// Names of the tensors written to the output file.
    pub written: Vec<String>,
    /// Tensors in the weights file that the model does not use.
    pub ignored: Vec<String>,
    /// GCN layers whose `improved = true` had no effect because the graph has no edge weights
    /// (PyG ignores it then, and so does the workbook): `conv1`, ... or `GCNConv`.
    pub improved_ignored: Vec<String>,
}

/// The note `predict` prints when [`PredictSummary::improved_ignored`] is not empty.
pub const IMPROVED_NOTE: &str = "PyG ignores improved without edge weights; the workbook matches PyG; pass edge weights of 1.0 to get A + 2I";

/// Reads a model config file (a regular file of at most
/// [`MAX_CONFIG_BYTES`](input_file::MAX_CONFIG_BYTES)).
pub fn read_config(config: &Path) -> Result<ModelConfig> {
    let text = input_file::read_to_string(config, &Cap::config())?;
    ModelConfig::from_json(&text).map_err(|e| WorkbookError::file(config, e.to_string()))
}

/// Loads a model from a config file and a weights file onto `device`. Returns the model and the
/// names of unused tensors. Weights with NaN or infinite values are refused (unless
/// [`crate::non_finite::set_allowed`]).
pub fn load_model(
    config: &Path,
    weights: &Path,
    weights_prefix: &str,
    device: impl Into<Placement>,
) -> Result<(Model, Vec<String>)> {
    let config_value = read_config(config)?;
    load_weights(config, config_value, weights, weights_prefix, device)
}

fn load_weights(
    config: &Path,
    config_value: ModelConfig,
    weights: &Path,
    weights_prefix: &str,
    device: impl Into<Placement>,
) -> Result<(Model, Vec<String>)> {
    let file = tensor_file::read(weights, &Device::Cpu)?;
    let mut tensors = HashMap::new();
    let mut ignored = Vec::new();
    // a lazy layer's names too: loading gives it its width (as PyTorch's load_state_dict does)
    let expected = config_value.parameter_names();
    for (name, t) in file.tensors {
        match name.strip_prefix(weights_prefix) {
            Some(short) if expected.iter().any(|e| e == short) => {
                tensors.insert(short.to_string(), t);
            }
            _ => ignored.push(name),
        }
    }
    ignored.sort();
    let mut used: Vec<(&String, &Tensor)> = tensors.iter().collect();
    used.sort_by(|a, b| a.0.cmp(b.0));
    crate::non_finite::check(&weights.display().to_string(), used)?;
    let model = Model::from_tensors(config_value, &tensors, device).map_err(|e| match e {
        WorkbookError::WeightsMismatch(mut problems) => {
            problems.push(format!(
                "(weights file: {}; config: {})",
                weights.display(),
                config.display()
            ));
            WorkbookError::WeightsMismatch(problems)
        }
        other => other,
    })?;
    Ok((model, ignored))
}

/// Runs the model of `paths.config` + `paths.weights` on `paths.graph` and writes `out`
/// (`alpha` / `alpha_edge_index` too for GATv2: the last attention layer's, and each layer's
/// under `conv{k}.alpha` in multi-layer models).
pub fn predict_files(paths: &PredictPaths, device: impl Into<Placement>) -> Result<PredictSummary> {
    let at = device.into();
    atomic_write::refuse_overwriting(
        "the output",
        paths.out,
        &[
            ("config", paths.config),
            ("weights", paths.weights),
            ("graph", paths.graph),
        ],
    )?;
    let config = read_config(paths.config)?;
    let graph = Graph::load(paths.graph, &at)?;
    // Before the weights are read and anything grows with the model's widths.
    limits::check_inference_fits(
        &format!("predict on {}", paths.graph.display()),
        &config,
        graph.num_nodes(),
        graph.num_edges(),
    )?;
    let (model, ignored) = load_weights(
        paths.config,
        config,
        paths.weights,
        paths.weights_prefix,
        &at,
    )?;
    let improved_ignored = model
        .config()
        .improved_ignored_layers(graph.edge_weight().is_some());
    let out = model.forward_graph(&graph)?;
    let mut tensors: Vec<(String, Tensor)> = vec![("out".into(), out.logits.clone())];
    let cpu = Device::Cpu;
    let n_att = out.attention.len();
    for (k, (name, att)) in out.attention.iter().enumerate() {
        let ei = att.edge_index.to_tensor(&cpu)?;
        if !name.is_empty() && n_att > 1 {
            tensors.push((format!("{name}.alpha"), att.weights.clone()));
            tensors.push((format!("{name}.alpha_edge_index"), ei.clone()));
        }
        if k == n_att - 1 {
            tensors.push(("alpha".into(), att.weights.clone()));
            tensors.push(("alpha_edge_index".into(), ei));
        }
    }
    tensor_file::write(paths.out, &tensors, None)?;
    Ok(PredictSummary {
        num_nodes: graph.num_nodes(),
        num_edges: graph.num_edges(),
        out_shape: out.logits.dims().to_vec(),
        written: tensors.into_iter().map(|(n, _)| n).collect(),
        ignored,
        improved_ignored,
    })
}
