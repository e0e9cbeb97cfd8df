//! Multi-layer models: a stack of `GCNConv` / `GATv2Conv` layers described by a JSON config.
//!
//! The config mirrors PyG constructors, so a PyG model is described by copying its arguments:
//!
//! ```json
//! {"layers": [{"layer": "GCNConv", "in_channels": 1433, "out_channels": 16},
//!             {"layer": "GCNConv", "in_channels": 16, "out_channels": 7}],
//!  "activation": "relu", "dropout": 0.5}
//! ```
//!
//! Layer `k` (from 1) owns the parameters prefixed `conv{k}.`, as in PyG's example models; a
//! single layer written as `{"layer": "GCNConv", ...}` has no prefix, like a bare PyG layer.
//! In training, `dropout` applies to each layer's input; the activation sits between layers.
//!
//! ```
//! use workbook::{ModelConfig, Model, EdgeIndex};
//! use workbook::candle_core::{DType, Device, Tensor};
//! let config = ModelConfig::from_json(r#"{"layer": "GATv2Conv", "in_channels": 3, "out_channels": 2, "heads": 2}"#).unwrap();
//! let (model, _vars) = Model::init(config, 0, &Device::Cpu).unwrap();
//! let x = Tensor::ones((2, 3), DType::F32, &Device::Cpu).unwrap();
//! let ei = EdgeIndex::new(&[0], &[1], 2, &Device::Cpu).unwrap();
//! let out = model.forward(&x, &ei, None).unwrap();
//! assert_eq!(out.logits.dims(), &[2, 4]);
//! assert_eq!(out.attention.len(), 1);
//! ```

use crate::edge_index::EdgeIndex;
use crate::error::{Result, WorkbookError};
use crate::graph::Graph;
use crate::layers::{
    Attention, GatV2Config, GatV2Conv, GcnConfig, GcnConv, GraphLayer, LayerInput, LayerSpec,
    SageConfig,
};
use crate::module::{Kind, Module, Named, TensorMap};
use crate::placement::{bytes_of, inherit, Placement};
use crate::train::dropout::Dropout;
use candle_core::{DType, Tensor, Var};
use candle_nn::{VarBuilder, VarMap};
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};
use std::collections::HashMap;

/// The largest layer width (`in_channels`, `heads × out_channels`) a config may ask for: far
/// beyond any real model, small enough that parameter sizes cannot overflow.
pub const MAX_WIDTH: usize = 1 << 24;

/// One layer's PyG constructor call: `{"layer": "GCNConv" | "GATv2Conv", ...arguments}`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "layer")]
pub enum LayerConfig {
    #[serde(rename = "GCNConv")]
    Gcn(GcnConfig),
    #[serde(rename = "GATv2Conv")]
    GatV2(GatV2Config),
    #[serde(rename = "SAGEConv")]
    Sage(SageConfig),
}

impl LayerConfig {
    /// The layer's constructor arguments behind the one trait every layer config implements
    /// (the only place that tells the variants apart).
    pub fn spec(&self) -> &dyn LayerSpec {
        match self {
            LayerConfig::Gcn(c) => c,
            LayerConfig::GatV2(c) => c,
            LayerConfig::Sage(c) => c,
        }
    }

    /// Input width.
    pub fn in_channels(&self) -> usize {
        self.spec().in_channels()
    }

    /// Output width (heads × channels for concatenating GATv2).
    pub fn output_width(&self) -> usize {
        self.spec().output_width()
    }

    /// Parameter names (without prefix) and shapes.
    pub fn parameter_shapes(&self) -> Vec<(String, Vec<usize>)> {
        self.spec().parameter_shapes()
    }

    /// Builds the layer from `vb` (built-in layers keep their own variant, so
    /// `Layer::GatV2(conv)` matches).
    pub fn build(&self, vb: VarBuilder) -> Result<Layer> {
        Ok(match self {
            LayerConfig::Gcn(c) => Layer::Gcn(GcnConv::new(c.clone(), vb)?),
            LayerConfig::GatV2(c) => Layer::GatV2(GatV2Conv::new(c.clone(), vb)?),
            other => Layer::Custom(other.spec().build(vb)?),
        })
    }
}

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
    /// Whether parameter names carry `conv{k}.` prefixes (false for a bare single layer).
    #[serde(default = "yes", skip_serializing_if = "Clone::clone")]
    pub prefixed: bool,
}

fn yes() -> bool {
    true
}

impl ModelConfig {
    /// Reads a config: either one layer (`{"layer": ...}`) or a model (`{"layers": [...]}`).
    pub fn from_json(text: &str) -> Result<Self> {
        let value: serde_json::Value = serde_json::from_str(text)
            .map_err(|e| WorkbookError::InvalidConfig(format!("not valid JSON: {e}")))?;
        let config = if value.get("layer").is_some() {
            let layer: LayerConfig = serde_json::from_value(value).map_err(|e| {
                WorkbookError::InvalidConfig(format!(
                    "{e} (layer configs take PyG's constructor arguments; see the docs of GcnConfig / GatV2Config / SageConfig)"
                ))
            })?;
            ModelConfig {
                layers: vec![layer],
                activation: Activation::None,
                dropout: 0.0,
                prefixed: false,
            }
        } else if value.get("layers").is_some() {
            serde_json::from_value(value)
                .map_err(|e| WorkbookError::InvalidConfig(format!("{e}")))?
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
            if i == 0 || o == 0 || heads == 0 {
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
            if pair[0].output_width() != pair[1].in_channels() {
                return Err(WorkbookError::InvalidConfig(format!(
                    "layer {} outputs {} channels but layer {} takes in_channels = {}",
                    k + 1,
                    pair[0].output_width(),
                    k + 2,
                    pair[1].in_channels()
                )));
            }
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

    /// Every parameter the model expects, with its full PyG name and shape.
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

/// One layer of a model: a built-in one (so `Layer::GatV2(conv)` reaches its inherent API), or
/// any other [`GraphLayer`]. Everything generic goes through [`Layer::as_graph_layer`].
#[derive(Debug)]
pub enum Layer {
    Gcn(GcnConv),
    GatV2(GatV2Conv),
    Custom(Box<dyn GraphLayer>),
}

impl Clone for Layer {
    fn clone(&self) -> Self {
        match self {
            Layer::Gcn(c) => Layer::Gcn(c.clone()),
            Layer::GatV2(c) => Layer::GatV2(c.clone()),
            Layer::Custom(c) => Layer::Custom(c.clone_boxed()),
        }
    }
}

impl Layer {
    /// The layer behind the one trait.
    pub fn as_graph_layer(&self) -> &dyn GraphLayer {
        match self {
            Layer::Gcn(c) => c,
            Layer::GatV2(c) => c,
            Layer::Custom(c) => c.as_ref(),
        }
    }

    /// The layer behind the one trait, mutably.
    pub fn as_graph_layer_mut(&mut self) -> &mut dyn GraphLayer {
        match self {
            Layer::Gcn(c) => c,
            Layer::GatV2(c) => c,
            Layer::Custom(c) => c.as_mut(),
        }
    }

    /// [`Module::map_tensors`], keeping the variant.
    pub fn map_tensors(&self, m: &mut dyn TensorMap) -> Result<Self> {
        Ok(match self {
            Layer::Gcn(c) => Layer::Gcn(c.map_tensors(m)?),
            Layer::GatV2(c) => Layer::GatV2(c.map_tensors(m)?),
            Layer::Custom(c) => Layer::Custom(c.map_boxed(m)?),
        })
    }
}

/// A [`TensorMap`] that prefixes names (`conv1.`) before passing them on, with the layer's own
/// placement as the `from` of tensors that do not name one: the layers of a split model
/// ([`crate::parallel::model_parallel`]) live on different devices, and a move must copy each
/// from where it really is.
struct Prefixed<'m> {
    inner: &'m mut dyn TensorMap,
    prefix: String,
    at: Placement,
}

impl TensorMap for Prefixed<'_> {
    fn target(&self) -> &Placement {
        self.inner.target()
    }
    fn tensor(
        &mut self,
        name: &str,
        kind: Kind,
        t: &Tensor,
        from: Option<&Placement>,
    ) -> Result<Tensor> {
        let from = from.or(Some(&self.at));
        self.inner
            .tensor(&format!("{}{name}", self.prefix), kind, t, from)
    }
    fn edge_index(&mut self, name: &str, e: &EdgeIndex) -> Result<Option<EdgeIndex>> {
        self.inner.edge_index(&format!("{}{name}", self.prefix), e)
    }
}

/// Names a placement without moving anything: for layers built from a `VarBuilder` on the
/// host that stands for a simulated device.
struct Relabel(Placement);

impl TensorMap for Relabel {
    fn target(&self) -> &Placement {
        &self.0
    }
    fn tensor(&mut self, _: &str, _: Kind, t: &Tensor, _: Option<&Placement>) -> Result<Tensor> {
        Ok(t.clone())
    }
    fn edge_index(&mut self, _: &str, e: &EdgeIndex) -> Result<Option<EdgeIndex>> {
        Ok(Some(e.clone()))
    }
}

/// A model is a module too: its layers' tensors under `conv{k}.` (PyTorch's nested names).
impl Module for Model {
    fn visit_tensors<'a>(&'a self, f: &mut dyn FnMut(Named<'a>)) {
        for (k, layer) in self.layers.iter().enumerate() {
            let prefix = self.config.prefix(k);
            let layer = layer.as_graph_layer();
            let at = layer.placement();
            layer.visit_tensors(&mut |n| {
                f(Named {
                    name: format!("{prefix}{}", n.name),
                    placement: Some(n.placement.unwrap_or(at)),
                    ..n
                })
            });
        }
    }

    fn map_tensors(&self, m: &mut dyn TensorMap) -> Result<Self> {
        let layers = self
            .layers
            .iter()
            .enumerate()
            .map(|(k, l)| {
                l.map_tensors(&mut Prefixed {
                    inner: &mut *m,
                    prefix: self.config.prefix(k),
                    at: l.as_graph_layer().placement().clone(),
                })
            })
            .collect::<Result<_>>()?;
        Ok(Self {
            config: self.config.clone(),
            layers,
        })
    }

    fn placement(&self) -> &Placement {
        self.layers[0].as_graph_layer().placement()
    }
}

/// The result of a model's forward pass.
#[derive(Clone, Debug)]
pub struct ModelOutput {
    /// The last layer's output, `[N, classes]`.
    pub logits: Tensor,
    /// Each GATv2 layer's attention, with the layer's name (`conv1`, ...).
    pub attention: Vec<(String, Attention)>,
}

/// A stack of graph layers.
#[derive(Clone, Debug)]
pub struct Model {
    config: ModelConfig,
    layers: Vec<Layer>,
}

impl Model {
    /// Builds the model, taking parameters by PyG name from `vb`.
    pub fn new(config: ModelConfig, vb: VarBuilder) -> Result<Self> {
        config.validate()?;
        let layers = config
            .layers
            .iter()
            .enumerate()
            .map(|(k, lc)| {
                let prefix = config.prefix(k);
                let vb = if prefix.is_empty() {
                    vb.clone()
                } else {
                    vb.pp(prefix.trim_end_matches('.'))
                };
                lc.build(vb)
            })
            .collect::<Result<_>>()?;
        Ok(Self { config, layers })
    }

    /// A freshly initialised, trainable model (PyG's initialisation, seeded) and its variables,
    /// created on `at` (a `&Device` or a [`Placement`]). The initial values are drawn on the
    /// host, so on a device each parameter is one upload in the ledger.
    pub fn init(
        config: ModelConfig,
        seed: u64,
        at: impl Into<Placement>,
    ) -> Result<(Self, VarMap)> {
        config.validate()?;
        // parameters, gradients and two Adam moments
        let elements: u64 = config
            .parameter_shapes()
            .iter()
            .map(|(_, s)| s.iter().map(|&d| d as u64).product::<u64>())
            .sum();
        crate::limits::check_memory(
            &format!("a model of {elements} parameters"),
            elements.saturating_mul(16),
        )?;
        let at = at.into();
        let device = at.device();
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let varmap = VarMap::new();
        {
            let mut vars = varmap
                .data()
                .lock()
                .expect("a fresh VarMap is not poisoned");
            for (k, layer) in config.layers.iter().enumerate() {
                let prefix = config.prefix(k);
                let params = layer.spec().init_parameters(&mut rng, device)?;
                for (name, t) in params {
                    at.record_upload(bytes_of(&t), &format!("{prefix}{name}"));
                    vars.insert(format!("{prefix}{name}"), Var::from_tensor(&t)?);
                }
            }
        }
        let vb = VarBuilder::from_varmap(&varmap, DType::F32, device);
        let model = Self::new(config, vb)?.placed(&at)?;
        Ok((model, varmap))
    }

    /// A model of already built layers (the stages of a split model put back together).
    pub(crate) fn from_layers(config: ModelConfig, layers: Vec<Layer>) -> Self {
        Self { config, layers }
    }

    /// The name of layer `k` (0-based) as ledger entries and errors say it: `conv{k+1}`, or the
    /// layer's class (`GCNConv`) for a bare single layer.
    pub fn layer_name(&self, k: usize) -> String {
        let prefix = self.config.prefix(k);
        match self.layers.get(k) {
            Some(l) if prefix.is_empty() => l.as_graph_layer().layer_type().to_string(),
            _ => prefix.trim_end_matches('.').to_string(),
        }
    }

    /// Each layer's name (`conv1`, ...) with its placement. A model built or moved as a whole
    /// has one placement throughout; the layers of a model-parallel model
    /// ([`crate::parallel::model_parallel`]) differ.
    pub fn layer_placements(&self) -> Vec<(String, &Placement)> {
        self.layers
            .iter()
            .enumerate()
            .map(|(k, l)| (self.layer_name(k), l.as_graph_layer().placement()))
            .collect()
    }

    /// Whether the layers sit on more than one device (a model-parallel model's layers).
    pub fn is_split(&self) -> bool {
        let home = Module::placement(self);
        self.layers
            .iter()
            .any(|l| l.as_graph_layer().placement() != home)
    }

    /// The same model, its placement named `at` without moving anything.
    fn placed(&self, at: &Placement) -> Result<Self> {
        self.map_tensors(&mut Relabel(at.clone()))
    }

    /// Builds the model from named tensors (e.g. a PyG `state_dict`), after checking that every
    /// expected parameter is present with the right shape; all problems are reported at once.
    /// Names saved from a wrapped model (`module.conv1.lin.weight`, PyTorch's `DataParallel`)
    /// are reported as [`WorkbookError::WrappedWeights`] with the fix
    /// ([`crate::checkpoint::strip_prefix`]).
    /// The parameters are copied into trainable variables on `at`, so training can resume.
    pub fn from_tensors(
        config: ModelConfig,
        tensors: &HashMap<String, Tensor>,
        at: impl Into<Placement>,
    ) -> Result<Self> {
        let at = at.into();
        let expected: Vec<String> = config
            .parameter_shapes()
            .into_iter()
            .map(|(n, _)| n)
            .collect();
        let names: Vec<&String> = tensors.keys().collect();
        if let Some(err) = crate::checkpoint::wrapped("state_dict", &expected, &names) {
            return Err(err);
        }
        let mut problems = Vec::new();
        for (name, shape) in config.parameter_shapes() {
            match tensors.get(&name) {
                None => problems.push(format!("missing '{name}' (expected shape {shape:?})")),
                Some(t) if t.dims() != shape.as_slice() => problems.push(format!(
                    "'{name}' has shape {:?} but the config needs {shape:?}",
                    t.dims()
                )),
                Some(t) if t.dtype() != DType::F32 => problems.push(format!(
                    "'{name}' is {:?}; weights must be f32 (convert with .float() in PyTorch)",
                    t.dtype()
                )),
                Some(_) => {}
            }
        }
        if !problems.is_empty() {
            return Err(WorkbookError::WeightsMismatch(problems));
        }
        let varmap = VarMap::new();
        {
            let mut vars = varmap
                .data()
                .lock()
                .expect("a fresh VarMap is not poisoned");
            for (name, _) in config.parameter_shapes() {
                let t = &tensors[&name];
                // A bare tensor on `at`'s candle device is taken to be there already (it cannot
                // say `sim`); callers that read from the host record that copy themselves, as
                // `checkpoint::load` does.
                let from = inherit(t, &at);
                vars.insert(name.clone(), at.move_parameter(t, &from, &name)?);
            }
        }
        let vb = VarBuilder::from_varmap(&varmap, DType::F32, at.device());
        Self::new(config, vb)?.placed(&at)
    }

    /// Where the parameters live (the first layer's placement; see [`Model::layer_placements`]
    /// for a model whose layers are split across devices).
    pub fn placement(&self) -> &Placement {
        Module::placement(self)
    }

    /// Every parameter's full PyG name with its placement.
    pub fn parameter_placements(&self) -> Vec<(String, &Placement)> {
        self.placements_of(Kind::Parameter)
    }

    /// Every buffer (GCN's `_cached_edge_index`) with its placement.
    pub fn buffer_placements(&self) -> Vec<(String, &Placement)> {
        self.placements_of(Kind::Buffer)
    }

    /// One entry per parameter or buffer; a buffer's parts (`_cached_edge_index.weight`, listed
    /// right after `_cached_edge_index` with the same placement) are not buffers of their own.
    fn placements_of(&self, kind: Kind) -> Vec<(String, &Placement)> {
        let home = Module::placement(self);
        let mut out: Vec<(String, &Placement)> = Vec::new();
        self.visit_tensors(&mut |n| {
            let at = n.placement.unwrap_or(home);
            let part = kind == Kind::Buffer
                && out.last().is_some_and(|(last, last_at)| {
                    n.name.starts_with(&format!("{last}.")) && *last_at == at
                });
            if n.kind == kind && !part {
                out.push((n.name, at))
            }
        });
        out
    }

    /// A copy of the model on `to`: every parameter (as fresh trainable variables, with their
    /// PyG names) and every cached buffer. Like `tensor.to` in PyTorch, this returns a copy;
    /// PyTorch's `module.to` mutates the module instead. Optimiser state does not follow by
    /// itself: see [`Adam::to_model`](crate::train::Adam::to_model).
    pub fn to_device(&self, to: impl Into<Placement>) -> Result<Self> {
        Module::to_device(self, to)
    }

    /// A copy of the model whose parameters are `dtype` (f16/bf16 for inference, f32 for
    /// training and export), on the same placement; the layers then compute in that dtype, so
    /// inputs must be converted too (`x.to_dtype(dtype)`). PyTorch's `model.half()` /
    /// `model.float()`. The copy's parameters are plain tensors (not trainable) and cached
    /// buffers are dropped (rebuilt in the new dtype on the next forward pass).
    pub fn to_dtype(&self, dtype: DType) -> Result<Self> {
        Module::to_dtype(self, dtype)
    }

    /// The dtype of the parameters (the first one's; [`Model::to_dtype`] keeps them equal).
    pub fn dtype(&self) -> DType {
        self.named_parameters()
            .first()
            .map(|(_, t)| t.dtype())
            .unwrap_or(DType::F32)
    }

    /// Moves the parameters only, leaving cached buffers where they were: what PyTorch's
    /// `module.to` does to PyG's `GCNConv._cached_edge_index`, which is a plain attribute and not
    /// a registered buffer. Kept to reproduce that failure; the next forward pass names the
    /// stale buffer.
    pub fn parameters_to_device(&self, to: impl Into<Placement>) -> Result<Self> {
        self.moved(&to.into(), "", false)
    }

    /// Forgets every cached buffer (they are rebuilt on the next forward pass).
    pub fn clear_cache(&mut self) {
        for layer in &mut self.layers {
            layer.as_graph_layer_mut().clear_cache();
        }
    }

    /// The parameters as trainable variables that share storage with the model, by name (for
    /// an optimiser).
    pub fn vars(&self) -> Result<Vec<(String, Var)>> {
        self.named_parameters()
            .into_iter()
            .map(|(name, t)| {
                if !t.is_variable() {
                    return Err(WorkbookError::InvalidConfig(format!(
                        "parameter '{name}' is not trainable (built from plain tensors); build the model with Model::init or Model::from_tensors"
                    )));
                }
                Ok((name, Var::from_tensor(&t)?))
            })
            .collect()
    }

    /// The pre-flight placement check: every parameter on the model's placement, and the inputs
    /// and cached buffers with them. The error names the first tensor that is elsewhere, its
    /// device, the expected one, and the fix.
    pub fn check_inputs(
        &self,
        x: &Tensor,
        edge_index: &EdgeIndex,
        edge_weight: Option<&Tensor>,
    ) -> Result<()> {
        Module::check_forward(self, "model parameters", x, edge_index, edge_weight)
    }

    /// [`Model::check_inputs`] for a whole graph, labels and masks included.
    pub fn check_graph(&self, graph: &Graph) -> Result<()> {
        graph.check_on("model parameters", self.placement())?;
        self.check_inputs(graph.x(), graph.edge_index(), graph.edge_weight())
    }

    /// Evaluation-mode forward pass over a whole graph, after [`Model::check_graph`] (whose
    /// parameter and buffer half `forward` runs itself).
    pub fn forward_graph(&self, graph: &Graph) -> Result<ModelOutput> {
        graph.check_on("model parameters", self.placement())?;
        self.forward(graph.x(), graph.edge_index(), graph.edge_weight())
    }

    /// The model's configuration.
    pub fn config(&self) -> &ModelConfig {
        &self.config
    }

    /// The layers.
    pub fn layers(&self) -> &[Layer] {
        &self.layers
    }

    /// Every parameter with its full PyG name.
    pub fn named_parameters(&self) -> Vec<(String, Tensor)> {
        Module::named_parameters(self)
    }

    /// Evaluation-mode forward pass.
    pub fn forward(
        &self,
        x: &Tensor,
        edge_index: &EdgeIndex,
        edge_weight: Option<&Tensor>,
    ) -> Result<ModelOutput> {
        self.forward_t(x, edge_index, edge_weight, None)
    }

    /// Forward pass; passing `dropout` selects training mode (input and attention dropout).
    pub fn forward_t(
        &self,
        x: &Tensor,
        edge_index: &EdgeIndex,
        edge_weight: Option<&Tensor>,
        mut dropout: Option<&mut Dropout>,
    ) -> Result<ModelOutput> {
        self.check_inputs(x, edge_index, edge_weight)?;
        let mut h = x.clone();
        let mut attention = Vec::new();
        for k in 0..self.layers.len() {
            h = self.layer_step(
                k,
                &h,
                edge_index,
                edge_weight,
                dropout.as_deref_mut(),
                &mut attention,
            )?;
        }
        Ok(ModelOutput {
            logits: h,
            attention,
        })
    }

    /// Layer `k` of the forward pass on `h`: input dropout (in training mode), the layer (its
    /// attention, if any, pushed to `attention` under the layer's name), and the activation
    /// unless it is the last layer. [`Model::forward_t`] is these steps in order; model
    /// parallelism runs them with a move between stages.
    pub(crate) fn layer_step(
        &self,
        k: usize,
        h: &Tensor,
        edge_index: &EdgeIndex,
        edge_weight: Option<&Tensor>,
        mut dropout: Option<&mut Dropout>,
        attention: &mut Vec<(String, Attention)>,
    ) -> Result<Tensor> {
        let mut h = h.clone();
        if let Some(d) = dropout.as_deref_mut() {
            // Same mask as `d.apply`; sparse input features stay sparse.
            h = crate::ops::sparse_features::dropout(d, &h, self.config.dropout)?;
        }
        let input = LayerInput {
            x: &h,
            edge_index,
            edge_weight,
        };
        let o = self.layers[k].as_graph_layer().apply(&input, dropout)?;
        if let Some(a) = o.attention {
            let name = self.config.prefix(k).trim_end_matches('.').to_string();
            attention.push((name, a));
        }
        let h = o.out;
        if k + 1 == self.layers.len() {
            return Ok(h);
        }
        Ok(match self.config.activation {
            Activation::Relu => h.relu()?,
            // candle's elu, with a one-pass gradient (ops::elu)
            Activation::Elu => crate::ops::elu::elu(&h, 1.0)?,
            Activation::None => h,
        })
    }
}
