//! Multi-layer models: a stack of graph layers (`GCNConv`, `GATv2Conv`, `SAGEConv`, or any
//! [`GraphLayer`] of your own) described by a JSON config ([`ModelConfig`], in [`config`]).
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
//!
//! A model owns its parameters: the `VarMap` it is built from holds them as trainable
//! variables, and its layers read them from there ([`Model::var_map`], [`Model::vars`]).
//! Every constructor checks the config once ([`ModelConfig::validate`]) and builds each layer
//! on the placement it is given ([`LayerSpec::build`](crate::layers::LayerSpec::build)).

pub mod config;
pub mod infer;
pub mod state_dict;

pub use crate::layers::{Layer, LayerConfig};
pub use config::{Activation, ModelConfig, MAX_WIDTH};

use crate::edge_index::EdgeIndex;
use crate::error::{Result, WorkbookError};
use crate::graph::Graph;
use crate::layers::{Attention, GraphLayer, LayerInput, LazyLayer};
use crate::module::{Kind, Module, Named, Row, TensorMap};
use crate::ops::dropout::Dropout;
use crate::placement::{bytes_of, inherit, Placement};
use candle_core::{DType, Tensor, Var};
use candle_nn::{VarBuilder, VarMap};
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use state_dict::wrapped;
use std::collections::HashMap;

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
        let mut moved = Self::from_parts(self.config.clone(), layers);
        moved.seed = self.seed;
        Ok(moved)
    }

    fn placement(&self) -> &Placement {
        self.layers[0].as_graph_layer().placement()
    }

    /// The default rows, and a lazy layer's parameters that do not exist yet, marked
    /// `uninitialised` ([`LazyLayer`]).
    fn inspect_rows(&self, prefix: &str) -> Vec<Row> {
        let mut rows = Vec::new();
        for (k, layer) in self.layers.iter().enumerate() {
            let layer = layer.as_graph_layer();
            let prefix = format!("{prefix}{}", self.config.prefix(k));
            if layer.as_any().is::<LazyLayer>() {
                rows.extend(layer.inspect_rows(&prefix));
                continue;
            }
            let at = layer.placement();
            layer.visit_tensors(&mut |n| {
                rows.push(Row {
                    name: format!("{prefix}{}", n.name),
                    kind: n.kind.as_str(),
                    device: n.placement.unwrap_or(at).to_string(),
                    dtype: format!("{:?}", n.tensor.dtype()).to_lowercase(),
                    shape: n.tensor.dims().to_vec(),
                })
            });
        }
        rows
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
#[derive(Clone)]
pub struct Model {
    config: ModelConfig,
    layers: Vec<Layer>,
    /// The owner of the parameters: every trainable one, by full name. The layers' tensors are
    /// its variables' tensors (the same storage).
    vars: VarMap,
    /// The seed of [`Model::init`], from which a lazy layer's first forward pass draws its
    /// initial values ([`Model::materialize`]).
    seed: u64,
}

impl std::fmt::Debug for Model {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Model")
            .field("config", &self.config)
            .field("layers", &self.layers)
            .finish_non_exhaustive()
    }
}

impl Model {
    /// Builds the model, taking parameters by PyG name from `vb`, on the placement of `vb`'s
    /// device.
    pub fn new(config: ModelConfig, vb: VarBuilder) -> Result<Self> {
        config.validate()?;
        let at = Placement::of(vb.device());
        Self::build(config, vb, &at)
    }

    /// Builds the layers of a validated `config` on `at` through their configs'
    /// [`LayerSpec::build`](crate::layers::LayerSpec::build), the one path every layer takes.
    fn build(config: ModelConfig, vb: VarBuilder, at: &Placement) -> Result<Self> {
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
                Ok(Layer::from_boxed(lc.spec().build(vb, at)?))
            })
            .collect::<Result<_>>()?;
        Ok(Self::from_parts(config, layers))
    }

    /// A model of layers built elsewhere, one per layer of `config`: each must be of the
    /// config's kind and hold exactly the parameters (names and shapes) its config declares.
    /// The public way to put layers of your own together by hand; [`Model::init`] and
    /// [`checkpoint::load_with`](crate::checkpoint::load_with) build them from the config.
    ///
    /// ```
    /// use workbook::layers::LayerSpec;
    /// use workbook::{GcnConfig, LayerConfig, Model, ModelConfig, Placement};
    /// let cpu = Placement::cpu();
    /// let specs = [GcnConfig::new(4, 8), GcnConfig::new(8, 2)];
    /// let layers = specs.iter().map(|s| s.init(0, &cpu)).collect::<Result<Vec<_>, _>>().unwrap();
    /// let config = ModelConfig::new(specs.into_iter().map(LayerConfig::new).collect());
    /// let model = Model::from_layers(config.clone(), layers).unwrap();
    /// assert_eq!(model.named_parameters()[0].0, "conv1.lin.weight");
    /// let wrong = vec![GcnConfig::new(4, 8).init(0, &cpu).unwrap()];
    /// assert!(Model::from_layers(config, wrong).is_err()); // two layers in the config
    /// ```
    pub fn from_layers(config: ModelConfig, layers: Vec<Box<dyn GraphLayer>>) -> Result<Self> {
        config.validate()?;
        if layers.len() != config.layers.len() {
            return Err(WorkbookError::Mismatched(format!(
                "the config has {} layer(s) but {} were given",
                config.layers.len(),
                layers.len()
            )));
        }
        for (k, (layer, lc)) in layers.iter().zip(&config.layers).enumerate() {
            let spec = lc.spec();
            if layer.layer_type() != spec.layer_type() {
                return Err(WorkbookError::Mismatched(format!(
                    "layer {} is a {} but the config says {}",
                    k + 1,
                    layer.layer_type(),
                    spec.layer_type()
                )));
            }
            let has: Vec<(String, Vec<usize>)> = layer
                .named_parameters()
                .into_iter()
                .map(|(n, t)| (n, t.dims().to_vec()))
                .collect();
            if has != spec.parameter_shapes() {
                return Err(WorkbookError::Mismatched(format!(
                    "layer {} ({}) holds the parameters {has:?} but its config declares {:?}",
                    k + 1,
                    spec.layer_type(),
                    spec.parameter_shapes()
                )));
            }
        }
        let layers = layers.into_iter().map(Layer::from_boxed).collect();
        Ok(Self::from_parts(config, layers))
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
        let mut model = Self::build(config, vb, &at)?;
        model.seed = seed;
        let vars = model.vars.clone();
        Ok((model, vars))
    }

    /// A model of already built layers (a moved copy, the stages of a split model put back
    /// together), its [`VarMap`] holding the layers' trainable parameters.
    pub(crate) fn from_parts(config: ModelConfig, layers: Vec<Layer>) -> Self {
        let mut model = Self {
            config,
            layers,
            vars: VarMap::new(),
            seed: 0,
        };
        let vars = VarMap::new();
        {
            let mut data = vars.data().lock().expect("a fresh VarMap is not poisoned");
            for (name, t) in model.named_parameters() {
                if t.is_variable() {
                    // a variable's tensor: the same storage, not a copy
                    if let Ok(var) = Var::from_tensor(&t) {
                        data.insert(name, var);
                    }
                }
            }
        }
        model.vars = vars;
        model
    }

    /// The first forward pass of a model with lazy layers (`in_channels = -1`, see
    /// [`crate::layers::lazy`]) over a whole graph: [`Model::materialize_input`] after the
    /// graph's placement check. On a model without lazy layers it is [`Model::forward_graph`].
    pub fn materialize(&mut self, graph: &Graph) -> Result<ModelOutput> {
        graph.check_on("model parameters", self.placement())?;
        self.materialize_input(graph.x(), graph.edge_index(), graph.edge_weight())
    }

    /// The first forward pass of a model with lazy layers, through `&mut self` (the module
    /// docs of [`crate::layers::lazy`] say why): each lazy layer's parameters are created from
    /// the width of its input (`x`'s columns for the first layer), with PyG's initialisation
    /// drawn from the model's seed, on the placement the layer has now; each upload is one
    /// ledger entry. The layer's config then holds that width. Returns the pass's output; on a
    /// model without lazy layers it is [`Model::forward`].
    pub fn materialize_input(
        &mut self,
        x: &Tensor,
        edge_index: &EdgeIndex,
        edge_weight: Option<&Tensor>,
    ) -> Result<ModelOutput> {
        if self.lazy_layers().next().is_some() {
            let dims = x.dims();
            if dims.len() != 2 {
                return Err(WorkbookError::InvalidGraph(format!(
                    "node features x must be [num_nodes, num_features] (the first forward pass of a lazy layer takes its in_channels from num_features), got {dims:?}"
                )));
            }
            // the placements first, so that nothing is created for inputs that cannot be used
            self.check_inputs(x, edge_index, edge_weight)?;
            let mut width = dims[1];
            for k in 0..self.layers.len() {
                self.materialize_layer(k, width)?;
                width = self.config.layers[k].output_width();
            }
        }
        self.forward(x, edge_index, edge_weight)
    }

    /// Creates lazy layer `k`'s parameters for input width `width` (nothing if it is not lazy).
    fn materialize_layer(&mut self, k: usize, width: usize) -> Result<()> {
        let Some(lazy) = self.layers[k]
            .as_graph_layer()
            .as_any()
            .downcast_ref::<LazyLayer>()
        else {
            return Ok(());
        };
        let at = lazy.placement().clone();
        let resolved = LayerConfig::from_spec(lazy.config().with_in_channels(width)?);
        let mut config = self.config.clone();
        config.layers[k] = resolved.clone();
        config.validate()?;
        let prefix = config.prefix(k);
        let elements: u64 = resolved
            .parameter_shapes()
            .iter()
            .map(|(_, s)| s.iter().map(|&d| d as u64).product::<u64>())
            .sum();
        crate::limits::check_memory(
            &format!(
                "{} ({}, in_channels = {width}): {elements} parameters",
                self.layer_name(k),
                resolved.spec().layer_type()
            ),
            elements.saturating_mul(16),
        )?;
        // One random stream per layer: materialising layer 2 does not depend on layer 1's
        // draws. Drawn on the host like Model::init's, and uploaded once each.
        let mut rng = ChaCha8Rng::seed_from_u64(self.seed);
        rng.set_stream(k as u64 + 1);
        let layer_vars = VarMap::new();
        {
            let mut data = layer_vars
                .data()
                .lock()
                .expect("a fresh VarMap is not poisoned");
            let mut model_vars = self
                .vars
                .data()
                .lock()
                .unwrap_or_else(|poisoned| poisoned.into_inner());
            for (name, t) in resolved.spec().init_parameters(&mut rng, at.device())? {
                at.record_upload(
                    bytes_of(&t),
                    &format!("{prefix}{name} (first forward pass)"),
                );
                let var = Var::from_tensor(&t)?;
                model_vars.insert(format!("{prefix}{name}"), var.clone());
                data.insert(name, var);
            }
        }
        let vb = VarBuilder::from_varmap(&layer_vars, DType::F32, at.device());
        let layer = resolved.spec().build(vb, &at)?;
        self.layers[k] = Layer::from_boxed(layer);
        self.config = config;
        Ok(())
    }

    /// The lazy layers that have had no forward pass yet, with their index.
    fn lazy_layers(&self) -> impl Iterator<Item = (usize, &LazyLayer)> {
        self.layers.iter().enumerate().filter_map(|(k, l)| {
            l.as_graph_layer()
                .as_any()
                .downcast_ref::<LazyLayer>()
                .map(|lazy| (k, lazy))
        })
    }

    /// Whether every parameter exists: no lazy layer waits for its first forward pass.
    pub fn is_materialized(&self) -> bool {
        self.lazy_layers().next().is_none()
    }

    /// [`WorkbookError::Uninitialized`] for the first lazy layer still waiting for its first
    /// forward pass, with `action` (what needed its parameters) in the message.
    ///
    /// ```
    /// use workbook::{GcnConfig, LayerConfig, Model, ModelConfig, Placement};
    /// let config = ModelConfig::new(vec![LayerConfig::lazy(|i| GcnConfig::new(i, 4))]);
    /// let (model, _) = Model::init(config, 0, Placement::sim(1)).unwrap();
    /// let err = model.check_materialized("checkpoint::save").unwrap_err().to_string();
    /// assert!(err.starts_with("checkpoint::save: layer conv1 (GCNConv) was built with in_channels = -1"), "{err}");
    /// assert!(err.contains("Run one forward pass first: model.materialize(&graph)"), "{err}");
    /// ```
    pub fn check_materialized(&self, action: &str) -> Result<()> {
        match self.lazy_layers().next() {
            Some((k, lazy)) => Err(lazy.uninitialized(action, &self.layer_name(k))),
            None => Ok(()),
        }
    }

    /// The trainable parameters, by full name: the model's own `VarMap` (what
    /// [`Model::init`] returns beside it), shared, not a copy.
    pub fn var_map(&self) -> &VarMap {
        &self.vars
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
        config.validate()?;
        Self::from_checked_tensors(config, tensors, at.into())
    }

    /// [`Model::from_tensors`] of a config already validated (read by
    /// [`ModelConfig::from_json`], which validates it).
    pub(crate) fn from_checked_tensors(
        config: ModelConfig,
        tensors: &HashMap<String, Tensor>,
        at: Placement,
    ) -> Result<Self> {
        let config = widths_from_tensors(config, tensors)?;
        let expected: Vec<String> = config
            .parameter_shapes()
            .into_iter()
            .map(|(n, _)| n)
            .collect();
        let names: Vec<&String> = tensors.keys().collect();
        if let Some(err) = wrapped("state_dict", &expected, &names) {
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
        Self::build(config, vb, &at)
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
    /// A lazy layer is refused: it would be born float32 whatever was asked (PyTorch's lazy
    /// parameter remembers the dtype; this one keeps only its placement).
    pub fn to_dtype(&self, dtype: DType) -> Result<Self> {
        self.check_materialized("model.to_dtype")?;
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

    /// The parameters as trainable variables, by name, in [`Model::named_parameters`] order
    /// (for an optimiser): the model's own, from its [`Model::var_map`].
    pub fn vars(&self) -> Result<Vec<(String, Var)>> {
        let data = self
            .vars
            .data()
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        self.named_parameters()
            .into_iter()
            .map(|(name, _)| match data.get(&name) {
                Some(var) => Ok((name, var.clone())),
                None => Err(WorkbookError::NotTrainable(name)),
            })
            .collect()
    }

    /// The float32 rule of every export (and of the reference side of
    /// [`precision::compare`](crate::export::precision::compare)): each parameter that is not
    /// float32, as [`WorkbookError::Float32`] with `needs` (`"exports are"`) in the message.
    pub fn float32_problems(&self, needs: &str) -> Vec<WorkbookError> {
        self.named_parameters()
            .into_iter()
            .filter(|(_, t)| t.dtype() != DType::F32)
            .map(|(tensor, t)| WorkbookError::Float32 {
                tensor,
                found: t.dtype(),
                needs: needs.to_string(),
            })
            .collect()
    }

    /// [`Model::float32_problems`], the first one as the error.
    pub fn require_float32(&self, needs: &str) -> Result<()> {
        match self.float32_problems(needs).into_iter().next() {
            Some(problem) => Err(problem),
            None => Ok(()),
        }
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
        self.check_materialized("model.forward (a forward pass through &self)")?;
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
            // candle's relu, with a one-pass gradient (ops::relu)
            Activation::Relu => crate::ops::relu::relu(&h)?,
            // candle's elu, with a one-pass gradient (ops::elu)
            Activation::Elu => crate::ops::elu::elu(&h, 1.0)?,
            Activation::None => h,
        })
    }
}

/// `config` with each lazy layer's width read from the weights about to be loaded, as PyTorch's
/// `load_state_dict` materialises a lazy module from the shapes it is given. The width is the
/// dimension of the first parameter that changes with `in_channels` (`lin.weight`'s second).
pub(crate) fn widths_from_tensors(
    mut config: ModelConfig,
    tensors: &HashMap<String, Tensor>,
) -> Result<ModelConfig> {
    for k in 0..config.layers.len() {
        let Some(lazy) = config.layers[k].as_lazy() else {
            continue;
        };
        let prefix = config.prefix(k);
        let (one, two) = (
            lazy.with_in_channels(1)?.parameter_shapes(),
            lazy.with_in_channels(2)?.parameter_shapes(),
        );
        let found = one.iter().zip(&two).find_map(|((name, a), (_, b))| {
            let dim = a.iter().zip(b).position(|(a, b)| a != b)?;
            Some((format!("{prefix}{name}"), dim))
        });
        let width = found
            .as_ref()
            .and_then(|(name, dim)| tensors.get(name).and_then(|t| t.dims().get(*dim).copied()));
        let Some(width) = width else {
            return Err(WorkbookError::InvalidConfig(format!(
                "layer {} ({}) has in_channels = -1 and the weights do not say its width ({} is missing); write the width in the config",
                k + 1,
                crate::layers::LayerSpec::layer_type(lazy),
                found.map_or_else(|| "no parameter depends on it".to_string(), |(n, _)| format!("'{n}'"))
            )));
        };
        config.layers[k] = LayerConfig::from_spec(lazy.with_in_channels(width)?);
    }
    config.validate()?;
    Ok(config)
}
