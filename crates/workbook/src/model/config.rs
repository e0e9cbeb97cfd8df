//! A model's config: its layers' configs, the activation between them and input dropout,
//! read from and written as PyG-like JSON (see [`crate::model`]); checked once, at the
//! boundary ([`ModelConfig::validate`], which every constructor of a model calls).
//!
//! ```
//! use workbook::ModelConfig;
//! let err = ModelConfig::from_json(r#"{"layers": [{"layer": "GCNConv", "in_channels": 4, "out_channels": 8}, {"layer": "GCNConv", "in_channels": 16, "out_channels": 2}]}"#).unwrap_err();
//! assert!(err.to_string().contains("layer 1 outputs 8 channels but layer 2 takes in_channels = 16"));
//! ```

use crate::error::{Result, WorkbookError};
use crate::layers::{GatV2Config, GcnConfig, LayerConfig, LayerRegistry, SageConfig};
use crate::limits::{LayerSize, ModelSize};
use serde::{Deserialize, Serialize};

/// The largest layer width (`in_channels`, `heads × out_channels`) a config may ask for: far
/// beyond any real model, small enough that parameter sizes cannot overflow.
pub const MAX_WIDTH: usize = 1 << 24;

/// The non-linearity between layers.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Activation {
    #[default]
    Relu,
    Elu,
    None,
}

/// A model: layers, activation between them, and input dropout for training.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ModelConfig {
    pub layers: Vec<LayerConfig>,
    #[serde(default)]
    pub activation: Activation,
    /// Dropout on each layer's input, in training only.
    #[serde(default)]
    pub dropout: f64,
    /// Whether parameter names carry `conv{k}.` prefixes (false only for a bare single layer,
    /// which [`ModelConfig::validate`] checks).
    #[serde(default = "yes", skip_serializing_if = "Clone::clone")]
    pub prefixed: bool,
}

fn yes() -> bool {
    true
}

/// The fields of a model config other than its layers, read as serde reads them.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Rest {
    layers: Vec<serde_json::Value>,
    #[serde(default)]
    activation: Activation,
    #[serde(default)]
    dropout: f64,
    #[serde(default = "yes")]
    prefixed: bool,
}

impl ModelConfig {
    /// A model of `layers` (named `conv1.`, `conv2.`, ...), ReLU between them, no dropout;
    /// change those with [`ModelConfig::activation`] and [`ModelConfig::dropout`].
    ///
    /// ```
    /// use workbook::{Activation, GcnConfig, LayerConfig, ModelConfig};
    /// let c = ModelConfig::new(vec![LayerConfig::new(GcnConfig::new(4, 8)), LayerConfig::new(GcnConfig::new(8, 2))])
    ///     .activation(Activation::Elu)
    ///     .dropout(0.5);
    /// assert!(c.validate().is_ok());
    /// assert_eq!(c.parameter_shapes()[0].0, "conv1.lin.weight");
    /// ```
    pub fn new(layers: Vec<LayerConfig>) -> Self {
        Self {
            layers,
            activation: Activation::Relu,
            dropout: 0.0,
            prefixed: true,
        }
    }

    /// The same config with `activation` between layers.
    pub fn activation(mut self, activation: Activation) -> Self {
        self.activation = activation;
        self
    }

    /// The same config with input `dropout` in training.
    pub fn dropout(mut self, dropout: f64) -> Self {
        self.dropout = dropout;
        self
    }

    /// Reads a config: either one layer (`{"layer": ...}`) or a model (`{"layers": [...]}`),
    /// of the built-in layer kinds ([`LayerRegistry::builtin`]).
    pub fn from_json(text: &str) -> Result<Self> {
        Self::from_json_with(text, &LayerRegistry::builtin())
    }

    /// [`ModelConfig::from_json`] with the layer kinds of `registry` (yours among them).
    pub fn from_json_with(text: &str, registry: &LayerRegistry) -> Result<Self> {
        let value: serde_json::Value = serde_json::from_str(text)
            .map_err(|e| WorkbookError::InvalidConfig(format!("not valid JSON: {e}")))?;
        let config = if value.get("layer").is_some() {
            ModelConfig {
                layers: vec![registry.parse(&value)?],
                activation: Activation::None,
                dropout: 0.0,
                prefixed: false,
            }
        } else if value.get("layers").is_some() {
            let rest: Rest = serde_json::from_value(value)
                .map_err(|e| WorkbookError::InvalidConfig(format!("{e}")))?;
            ModelConfig {
                layers: rest
                    .layers
                    .iter()
                    .map(|l| registry.parse(l))
                    .collect::<Result<_>>()?,
                activation: rest.activation,
                dropout: rest.dropout,
                prefixed: rest.prefixed,
            }
        } else {
            return Err(WorkbookError::InvalidConfig(
                "a config needs \"layer\" (one PyG layer, e.g. {\"layer\": \"GCNConv\", \"in_channels\": 34, \"out_channels\": 4}) or \"layers\" (a list of them)".into(),
            ));
        };
        config.validate()?;
        Ok(config)
    }

    /// The classic two-layer GCN of Kipf & Welling: 16 hidden, ReLU, dropout 0.5.
    pub fn gcn(in_channels: usize, hidden: usize, classes: usize) -> Self {
        Self {
            layers: vec![
                LayerConfig::Gcn(GcnConfig::new(in_channels, hidden)),
                LayerConfig::Gcn(GcnConfig::new(hidden, classes)),
            ],
            activation: Activation::Relu,
            dropout: 0.5,
            prefixed: true,
        }
    }

    /// The two-layer GATv2 of PyG's example: 8 heads × 8 hidden, ELU, dropout 0.6 on inputs and
    /// attention, one averaged head on the output.
    pub fn gatv2(in_channels: usize, hidden: usize, heads: usize, classes: usize) -> Self {
        let mut first = GatV2Config::new(in_channels, hidden).heads(heads);
        first.dropout = 0.6;
        let mut second = GatV2Config::new(hidden * heads, classes);
        second.concat = false;
        second.dropout = 0.6;
        Self {
            layers: vec![LayerConfig::GatV2(first), LayerConfig::GatV2(second)],
            activation: Activation::Elu,
            dropout: 0.6,
            prefixed: true,
        }
    }

    /// Two-layer GraphSAGE (PyG's `SAGEConv`, mean aggregation): `hidden` channels, ReLU,
    /// dropout 0.5, as in PyG's GraphSAGE examples.
    pub fn sage(in_channels: usize, hidden: usize, classes: usize) -> Self {
        Self {
            layers: vec![
                LayerConfig::Sage(SageConfig::new(in_channels, hidden)),
                LayerConfig::Sage(SageConfig::new(hidden, classes)),
            ],
            activation: Activation::Relu,
            dropout: 0.5,
            prefixed: true,
        }
    }

    /// Checks that consecutive layers fit together.
    pub fn validate(&self) -> Result<()> {
        if self.layers.is_empty() {
            return Err(WorkbookError::InvalidConfig(
                "a model needs at least one layer".into(),
            ));
        }
        // Sizes first, before anything multiplies them: a width nobody can allocate, or one
        // whose products overflow, is an error here, not an abort later.
        for (k, layer) in self.layers.iter().enumerate() {
            let spec = layer.spec();
            let (name, i, o, heads) = (
                spec.layer_type(),
                spec.in_channels(),
                spec.out_channels(),
                spec.heads(),
            );
            // A lazy layer's in_channels (-1 in the config) is 0 until its first forward pass.
            if (i == 0 && !layer.is_lazy()) || o == 0 || heads == 0 {
                return Err(WorkbookError::InvalidConfig(format!(
                    "layer {} ({name}): in_channels, out_channels and heads must be at least 1 (got {i}, {o}, {heads})",
                    k + 1
                )));
            }
            let width = heads.saturating_mul(o);
            if i > MAX_WIDTH || width > MAX_WIDTH {
                return Err(WorkbookError::InvalidConfig(format!(
                    "layer {} ({name}): in_channels = {i}, heads × out_channels = {heads} × {o}: widths are limited to {MAX_WIDTH}",
                    k + 1
                )));
            }
        }
        for (k, pair) in self.layers.windows(2).enumerate() {
            if !pair[1].is_lazy() && pair[0].output_width() != pair[1].in_channels() {
                return Err(WorkbookError::InvalidConfig(format!(
                    "layer {} outputs {} channels but layer {} takes in_channels = {}",
                    k + 1,
                    pair[0].output_width(),
                    k + 2,
                    pair[1].in_channels()
                )));
            }
        }
        if !self.prefixed && self.layers.len() > 1 {
            return Err(WorkbookError::InvalidConfig(format!(
                "prefixed = false names the parameters of a single bare layer (PyG's lin.weight, not conv1.lin.weight), but this model has {} layers, whose names would collide; remove \"prefixed\" (or set it to true)",
                self.layers.len()
            )));
        }
        if !(0.0..1.0).contains(&self.dropout) {
            return Err(WorkbookError::InvalidConfig(format!(
                "dropout must be in [0, 1), got {}",
                self.dropout
            )));
        }
        for layer in &self.layers {
            layer.spec().validate()?;
        }
        Ok(())
    }

    /// The layers (named `conv1`, ... or `GCNConv` for a bare layer) whose `improved = true` has
    /// no effect because the graph has no edge weights: PyG ignores it then, and so does the
    /// workbook (see [`crate::layers::gcn_conv`]).
    pub fn improved_ignored_layers(&self, has_edge_weight: bool) -> Vec<String> {
        self.layers
            .iter()
            .enumerate()
            .filter_map(|(k, l)| match l {
                LayerConfig::Gcn(c) if c.improved_is_ignored(has_edge_weight) => {
                    let p = self.prefix(k);
                    Some(if p.is_empty() {
                        "GCNConv".to_string()
                    } else {
                        p.trim_end_matches('.').to_string()
                    })
                }
                _ => None,
            })
            .collect()
    }

    /// The name prefix of layer `k` (0-based): `conv{k+1}.`, or nothing for a bare layer.
    pub fn prefix(&self, k: usize) -> String {
        if self.prefixed {
            format!("conv{}.", k + 1)
        } else {
            String::new()
        }
    }

    /// Whether a layer's input width is found by its first forward pass (`in_channels = -1`; see
    /// [`crate::layers::lazy`]).
    pub fn is_lazy(&self) -> bool {
        self.layers.iter().any(LayerConfig::is_lazy)
    }

    /// The same config with every lazy layer's width filled in, for features `width` wide: what
    /// the first forward pass will make of it (for estimates made before that pass).
    pub fn with_input_width(&self, width: usize) -> Result<ModelConfig> {
        let mut config = self.clone();
        let mut width = width;
        for layer in &mut config.layers {
            if let Some(lazy) = layer.as_lazy() {
                *layer = LayerConfig::from_spec(lazy.with_in_channels(width)?);
            }
            width = layer.output_width();
        }
        config.validate()?;
        Ok(config)
    }

    /// Every parameter's full PyG name, a lazy layer's included (those that its first forward
    /// pass, or loaded weights, will create).
    pub fn parameter_names(&self) -> Vec<String> {
        self.layers
            .iter()
            .enumerate()
            .flat_map(|(k, l)| {
                let prefix = self.prefix(k);
                let names = match l.as_lazy() {
                    Some(lazy) => lazy.parameter_names(),
                    None => l.parameter_shapes().into_iter().map(|(n, _)| n).collect(),
                };
                names.into_iter().map(move |n| format!("{prefix}{n}"))
            })
            .collect()
    }

    /// Every parameter the model expects, with its full PyG name and shape (a lazy layer's are
    /// not known before its first forward pass, and not listed).
    pub fn parameter_shapes(&self) -> Vec<(String, Vec<usize>)> {
        self.layers
            .iter()
            .enumerate()
            .flat_map(|(k, l)| {
                let prefix = self.prefix(k);
                l.parameter_shapes()
                    .into_iter()
                    .map(move |(n, s)| (format!("{prefix}{n}"), s))
            })
            .collect()
    }
}

/// The sizes the memory estimates ([`crate::limits`]) read.
impl ModelSize for ModelConfig {
    fn layer_sizes(&self) -> Vec<LayerSize> {
        self.layers
            .iter()
            .map(|l| {
                let s = l.spec();
                LayerSize {
                    kind: s.layer_type(),
                    in_channels: s.in_channels(),
                    out_channels: s.out_channels(),
                    heads: s.heads(),
                    output_width: s.output_width(),
                    attention: s.has_attention(),
                }
            })
            .collect()
    }

    fn parameter_elements(&self) -> f64 {
        self.parameter_shapes()
            .iter()
            .map(|(_, s)| s.iter().map(|&d| d as f64).product::<f64>())
            .sum()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::limits::{
        batch_bound, inference_bytes, largest_layer, minibatch_bytes, serving_bytes, training_bytes,
    };

    #[test]
    fn the_widest_layer_drives_the_inference_estimate() {
        // The 16777216-wide layer of issue 34 on 100 000 nodes: terabytes, and named.
        let wide = ModelConfig::from_json(
            r#"{"layer": "GCNConv", "in_channels": 1, "out_channels": 16777216, "bias": false}"#,
        )
        .unwrap();
        let bytes = inference_bytes(&wide, 100_000, 10);
        assert!(bytes > 100_000 * 16_777_216 * 4 * 4, "{bytes}");
        assert!(
            largest_layer(&wide, 100_000, 10).contains("heads × out_channels 1 × 16777216"),
            "{}",
            largest_layer(&wide, 100_000, 10)
        );
        let gcn = ModelConfig::gcn(34, 16, 4);
        assert!(inference_bytes(&gcn, 34, 156) < 1 << 20);
        assert!(inference_bytes(&gcn, 34, 156) < training_bytes(&gcn, 34, 156) + (1 << 20));
        // serving keeps every response twice; mini-batches are bounded by the graph
        assert!(serving_bytes(&gcn, 34, 156, 1_000_000, 1) > serving_bytes(&gcn, 34, 156, 10, 1));
        let all = minibatch_bytes(&gcn, 1000, 10_000, 10, &[-1, -1], 1);
        let bounded = minibatch_bytes(&gcn, 1000, 10_000, 10, &[5, 5], 1);
        assert_eq!(batch_bound(1000, 10_000, 10, &[5, 5]), (310, 300));
        assert_eq!(batch_bound(1000, 10_000, 10, &[-1, -1]), (1000, 10_000));
        assert!(bounded < all, "{bounded} {all}");
        assert!(all <= 10_000 * 16 + 1000 * 8 + training_bytes(&gcn, 1000, 10_000));
    }

    #[test]
    fn unprefixed_names_are_for_one_layer_only() {
        let mut two = ModelConfig::gcn(4, 8, 2);
        two.prefixed = false;
        let err = two.validate().unwrap_err().to_string();
        assert!(err.contains("this model has 2 layers"), "{err}");
        let json = r#"{"layers": [{"layer": "GCNConv", "in_channels": 4, "out_channels": 8}, {"layer": "GCNConv", "in_channels": 8, "out_channels": 2}], "prefixed": false}"#;
        assert!(ModelConfig::from_json(json).is_err());
    }

    #[test]
    fn attention_layers_count_in_the_serving_estimate() {
        let gcn = ModelConfig::gcn(34, 16, 4);
        let gat = ModelConfig::gatv2(34, 4, 4, 4);
        assert!(gat.layer_sizes().iter().all(|l| l.attention));
        assert!(gcn.layer_sizes().iter().all(|l| !l.attention));
        assert_eq!(gat.layer_sizes()[0].output_width, 16);
    }
}
