//! The model a PyG `state_dict` describes, read from its names and shapes alone.
//!
//! A `state_dict` holds no config, but PyG's parameter names say which layer each tensor
//! belongs to and its shape says the widths: `conv1.lin.weight [16, 1433]` and
//! `conv1.bias [16]` are a `GCNConv(1433, 16)`; `conv1.att [1, 8, 8]` with
//! `conv1.lin_l.weight [64, 1433]` a `GATv2Conv(1433, 8, heads=8)`; `lin_l`/`lin_r` without
//! `att` a `SAGEConv`. What a state_dict cannot say (activation, dropout, self-loops,
//! normalisation, GATv2's negative slope) takes PyG's defaults and the examples' choices, as
//! [`ModelConfig::gcn`], [`ModelConfig::gatv2`] and [`ModelConfig::sage`] do; each such choice is
//! listed in the notes, so the reader knows what to check, and a config given instead of
//! inferring wins. Names this cannot read (another model's, `lin_edge` for edge features) are a
//! clear error that asks for the config.
//!
//! ```
//! use workbook::model::infer::infer_config;
//! let shapes = vec![
//!     ("conv1.lin.weight".to_string(), vec![16, 1433]),
//!     ("conv1.bias".to_string(), vec![16]),
//!     ("conv2.lin.weight".to_string(), vec![7, 16]),
//!     ("conv2.bias".to_string(), vec![7]),
//! ];
//! let (config, notes) = infer_config(&shapes).unwrap();
//! assert_eq!(config.parameter_shapes(), shapes);
//! assert!(notes.iter().any(|n| n.contains("ReLU")));
//! ```

use crate::error::{Result, WorkbookError};
use crate::layers::{GatV2Config, GcnConfig, LayerConfig, SageConfig};
use crate::model::{Activation, ModelConfig};
use std::collections::BTreeMap;

/// The model config `shapes` (a state_dict's names and shapes) describe, with notes on every
/// choice the names could not make.
pub fn infer_config(shapes: &[(String, Vec<usize>)]) -> Result<(ModelConfig, Vec<String>)> {
    let ask = |why: String| {
        WorkbookError::InvalidConfig(format!(
            "cannot tell the model from the state_dict's names: {why}. Give the model's config (--config config.json; in Rust checkpoint::load_pt with Some(config)), e.g. {{\"layers\": [{{\"layer\": \"GCNConv\", \"in_channels\": 1433, \"out_channels\": 16}}, {{\"layer\": \"GCNConv\", \"in_channels\": 16, \"out_channels\": 7}}]}}"
        ))
    };
    // layer number -> parameter name within the layer -> shape
    let mut layers: BTreeMap<usize, BTreeMap<&str, &[usize]>> = BTreeMap::new();
    for (name, shape) in shapes {
        let parsed = name
            .strip_prefix("conv")
            .and_then(|rest| rest.split_once('.'))
            .and_then(|(k, p)| k.parse::<usize>().ok().map(|k| (k, p)));
        let Some((k, param)) = parsed else {
            return Err(ask(format!(
                "'{name}' is not a PyG layer parameter named conv<k>.<name> (the naming of PyG's GCN, GAT and GraphSAGE examples)"
            )));
        };
        layers.entry(k).or_default().insert(param, shape.as_slice());
    }
    if layers.is_empty() {
        return Err(ask("it holds no tensors".into()));
    }
    let numbers: Vec<usize> = layers.keys().copied().collect();
    if numbers != (1..=numbers.len()).collect::<Vec<_>>() {
        return Err(ask(format!(
            "its layers are numbered {numbers:?}, not conv1, conv2, ... in order"
        )));
    }
    let mut configs = Vec::new();
    let mut kinds = Vec::new();
    for (k, params) in &layers {
        let (config, kind) = infer_layer(*k, params, *k == layers.len()).map_err(ask)?;
        configs.push(config);
        kinds.push(kind);
    }
    let mut notes = Vec::new();
    let mut config = if kinds.iter().all(|&k| k == "GATv2Conv") {
        notes.push("between layers: ELU, input dropout 0.6 and attention dropout 0.6 in training (PyG's GATv2 example); a state_dict does not record them".into());
        ModelConfig::new(configs)
            .activation(Activation::Elu)
            .dropout(0.6)
    } else {
        notes.push("between layers: ReLU, input dropout 0.5 in training (PyG's GCN and GraphSAGE examples); a state_dict does not record them".into());
        ModelConfig::new(configs)
            .activation(Activation::Relu)
            .dropout(0.5)
    };
    for (k, layer) in config.layers.iter_mut().enumerate() {
        match layer {
            LayerConfig::Gcn(_) => notes.push(format!("conv{}: GCNConv with PyG's defaults (self-loops added, symmetric normalisation, improved=False)", k + 1)),
            LayerConfig::GatV2(c) => {
                c.dropout = 0.6;
                notes.push(format!("conv{}: GATv2Conv with PyG's defaults (negative_slope 0.2, self-loops added)", k + 1));
            }
            LayerConfig::Sage(_) => notes.push(format!("conv{}: SAGEConv with mean aggregation and normalize=False (PyG's defaults)", k + 1)),
            LayerConfig::Custom(_) => {}
        }
    }
    config.validate()?;
    Ok((config, notes))
}

/// One layer's config from its parameters' names and shapes.
fn infer_layer(
    k: usize,
    params: &BTreeMap<&str, &[usize]>,
    last: bool,
) -> std::result::Result<(LayerConfig, &'static str), String> {
    let names: Vec<&str> = params.keys().copied().collect();
    let matrix = |name: &str| -> std::result::Result<Option<(usize, usize)>, String> {
        match params.get(name) {
            None => Ok(None),
            Some([out, inp]) => Ok(Some((*out, *inp))),
            Some(s) => Err(format!("conv{k}.{name} has shape {s:?}, not [out, in]")),
        }
    };
    let vector = |name: &str| -> std::result::Result<Option<usize>, String> {
        match params.get(name) {
            None => Ok(None),
            Some([n]) => Ok(Some(*n)),
            Some(s) => Err(format!("conv{k}.{name} has shape {s:?}, not [n]")),
        }
    };
    let only = |allowed: &[&str]| -> std::result::Result<(), String> {
        match names.iter().find(|n| !allowed.contains(n)) {
            Some(extra) => Err(format!(
                "conv{k}.{extra} is not a parameter of the layer the other names describe ({})",
                names.join(", ")
            )),
            None => Ok(()),
        }
    };
    let bias_width = |out: usize| -> std::result::Result<bool, String> {
        match vector("bias")? {
            None => Ok(false),
            Some(n) if n == out => Ok(true),
            Some(n) => Err(format!("conv{k}.bias has {n} entries for {out} outputs")),
        }
    };
    if let Some((out, inp)) = matrix("lin.weight")? {
        only(&["lin.weight", "bias"])?;
        let mut c = GcnConfig::new(inp, out);
        c.bias = bias_width(out)?;
        return Ok((LayerConfig::Gcn(c), "GCNConv"));
    }
    if let Some(att) = params.get("att") {
        only(&[
            "att",
            "lin_l.weight",
            "lin_l.bias",
            "lin_r.weight",
            "lin_r.bias",
            "bias",
        ])?;
        let &[1, heads, channels] = *att else {
            return Err(format!(
                "conv{k}.att has shape {att:?}, not [1, heads, channels]"
            ));
        };
        let (rows, inp) = matrix("lin_l.weight")?
            .ok_or_else(|| format!("conv{k}.att without conv{k}.lin_l.weight"))?;
        if rows != heads * channels {
            return Err(format!(
                "conv{k}.lin_l.weight has {rows} rows for {heads} heads of {channels} channels"
            ));
        }
        let mut c = GatV2Config::new(inp, channels).heads(heads);
        c.share_weights = !params.contains_key("lin_r.weight");
        c.concat = match vector("bias")? {
            Some(n) if n == heads * channels => true,
            Some(n) if n == channels => false,
            Some(n) => {
                return Err(format!(
                    "conv{k}.bias has {n} entries, neither heads x channels ({}) nor channels ({channels})",
                    heads * channels
                ))
            }
            // Without a bias the width of the output is not recorded: PyG's example averages
            // the heads of the last layer only.
            None => !last,
        };
        if heads == 1 {
            // One head: averaging and concatenating are the same; say it as PyG's example does.
            c.concat = !last;
        }
        c.bias = params.contains_key("bias");
        return Ok((LayerConfig::GatV2(c), "GATv2Conv"));
    }
    if let Some((out, inp)) = matrix("lin_l.weight")? {
        only(&["lin_l.weight", "lin_l.bias", "lin_r.weight"])?;
        let mut c = SageConfig::new(inp, out);
        c.root_weight = params.contains_key("lin_r.weight");
        c.bias = params.contains_key("lin_l.bias");
        return Ok((LayerConfig::Sage(c), "SAGEConv"));
    }
    Err(format!(
        "conv{k} has parameters {} , which are not those of PyG's GCNConv (lin.weight, bias), GATv2Conv (att, lin_l, lin_r, bias) or SAGEConv (lin_l, lin_r)",
        names.join(", ")
    ))
}
