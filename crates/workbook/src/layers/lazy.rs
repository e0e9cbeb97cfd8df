//! Lazy input width: a layer written with `in_channels = -1` (PyG's spelling, in JSON and in
//! PyG's constructors) whose parameters are created by its first forward pass, from the width of
//! the features it is given, on the placement the layer has *then*. PyG's
//! `GCNConv(in_channels=-1, out_channels=16).to(device)` is
//! `LayerConfig::lazy(|i| GcnConfig::new(i, 16))` here, or `"in_channels": -1` in a config.
//!
//! [`LazyConfig`] is the config of such a layer (any registered kind that has an
//! `in_channels` argument: GCN, GATv2, SAGE, and a reader's own), and [`LazyLayer`] the layer
//! before its first forward pass: it has a placement (so `model.to_device(..)` before that pass
//! decides where the weights are born, as for PyTorch's lazy modules) and no parameters; the
//! `inspect` table lists them as `uninitialised`. An optimiser, a checkpoint, the pre-flight, an
//! export, `to_dtype` or data/model parallelism over a model that still has one fails with
//! [`crate::WorkbookError::Uninitialized`], which names the layer
//! and the fix (run one forward pass first), where PyTorch says "Attempted to use an
//! uninitialized parameter".
//!
//! ```
//! use workbook::{datasets, inspect, GcnConfig, LayerConfig, Model, ModelConfig, Placement};
//! let config = ModelConfig::new(vec![
//!     LayerConfig::lazy(|i| GcnConfig::new(i, 16)),   // GCNConv(-1, 16)
//!     LayerConfig::lazy(|i| GcnConfig::new(i, 4)),    // GCNConv(-1, 4)
//! ]);
//! let (model, _) = Model::init(config, 0, Placement::cpu()).unwrap();
//! let sim = Placement::sim(1);
//! let mut model = model.to_device(&sim).unwrap();      // before the first forward: no copy
//! assert!(inspect::model_table(&model).contains("uninitialised"));
//! let graph = datasets::karate(&sim).unwrap();
//! let out = model.materialize(&graph).unwrap();        // the first forward pass, &mut
//! assert_eq!(out.logits.dims(), &[34, 4]);
//! assert_eq!(model.named_parameters()[0].1.dims(), &[16, 34]); // born on sim:1, 34 wide
//! assert_eq!(model.parameter_placements()[0].1.to_string(), "sim:1");
//! ```
//!
//! ## Why the first forward pass takes `&mut self`
//!
//! PyG materialises in a forward pre-hook that writes the module (`self.weight.materialize(..)`)
//! from inside `forward`. The layers here take `&self` and keep nothing between calls, so that a
//! model can be shared across threads (chapter 3: PyG's `GATv2Conv` stored `self._alpha` in
//! `forward`, and two threads read each other's attention). Materialising inside a `&self`
//! forward would need interior mutability (a `OnceLock` per layer), and each consequence of it is
//! a failure this workbook teaches:
//!
//! - two threads' first calls race to create the weights; a `OnceLock` would make one of them win
//!   silently, but the *model's* variables (what an optimiser and a checkpoint read) would still
//!   have to be updated behind a shared reference;
//! - clones (data-parallel replicas, a moved copy) made before the first call would each create
//!   their own weights, on whatever device each one is first run: replicas that differ;
//! - an optimiser built before the first call holds the variables that existed then, none of the
//!   new ones. PyTorch avoids this one by materialising the *same* `Parameter` object in place
//!   (the optimiser built earlier does train it, see the book's chapter 2), which a candle `Var`
//!   cannot do: its shape is fixed when it is created.
//!
//! So the one mutation is explicit: [`Model::materialize`](crate::Model::materialize) is the first
//! forward pass, through `&mut self`, and the borrow checker sees it. It returns that pass's
//! output; later passes are the ordinary `&self` ones, and a `&self` forward pass of a model that
//! still has a lazy layer is the same clear error as an optimiser's. Training from a config
//! ([`crate::train::Trainer::new`], and [`crate::train::train`] through it) runs that first
//! pass itself, before it builds the optimiser: PyTorch's advice (a dry run before the
//! optimiser) made the default.
//!
//! Once materialised, the model's config holds the width that was found (`in_channels: 34`, not
//! -1; PyG's module keeps saying -1 while its weight is 34 wide), so a checkpoint saved afterwards
//! loads without any lazy machinery. The initial values are PyG's initialisation drawn from the
//! model's seed (one random stream per layer), not PyG's values.

use super::graph_layer::{GraphLayer, LayerInput, LayerOutput};
use super::spec::LayerSpec;
use crate::error::{Result, WorkbookError};
use crate::module::{Module, Named, Row, TensorMap};
use crate::ops::dropout::Dropout;
use crate::placement::Placement;
use candle_core::{Device, Tensor};
use candle_nn::VarBuilder;
use rand_chacha::ChaCha8Rng;
use serde::Serialize;
use std::fmt::Debug;
use std::sync::Arc;

/// How a lazy config makes the concrete one once the width is known.
pub type MakeSpec = dyn Fn(usize) -> Result<Arc<dyn LayerSpec>> + Send + Sync;

/// The config of a layer whose input width is found by its first forward pass
/// (`"in_channels": -1`). It is a [`LayerSpec`] whose [`LayerSpec::in_channels`] is 0 (not
/// known yet), with no parameters, that builds a [`LazyLayer`]; [`LazyConfig::with_in_channels`]
/// gives the concrete config.
#[derive(Clone)]
pub struct LazyConfig {
    /// The config at width 1: its kind, output width and other arguments, for validation,
    /// messages and serialisation (with `in_channels` written as -1).
    template: Arc<dyn LayerSpec>,
    make: Arc<MakeSpec>,
}

impl Debug for LazyConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LazyConfig")
            .field("in_channels", &-1)
            .field("template", &self.template)
            .finish_non_exhaustive()
    }
}

impl LazyConfig {
    /// A lazy config from `make`, the concrete config given an input width (what
    /// [`LayerConfig::lazy`](super::LayerConfig::lazy) calls). Its other arguments are checked
    /// with the model's config ([`LayerSpec::validate`], on the config `make` gives for width 1).
    pub fn of<C, F>(make: F) -> Self
    where
        C: LayerSpec + Clone + PartialEq + Serialize,
        F: Fn(usize) -> C + Send + Sync + 'static,
    {
        let template: Arc<dyn LayerSpec> = Arc::new(make(1));
        Self {
            template,
            make: Arc::new(move |width| Ok(Arc::new(make(width)) as Arc<dyn LayerSpec>)),
        }
    }

    /// A lazy config from a fallible `make` (a config read from JSON, read again with the width).
    pub fn try_new(make: Arc<MakeSpec>) -> Result<Self> {
        Ok(Self {
            template: make(1)?,
            make,
        })
    }

    /// The concrete config for input width `in_channels`, validated.
    pub fn with_in_channels(&self, in_channels: usize) -> Result<Arc<dyn LayerSpec>> {
        if in_channels == 0 {
            return Err(WorkbookError::InvalidConfig(format!(
                "{} (in_channels = -1): the first forward pass gave 0 features per node; a lazy layer takes its width from its input, which needs at least one column",
                self.template.layer_type()
            )));
        }
        let spec = (self.make)(in_channels)?;
        if spec.in_channels() != in_channels || spec.layer_type() != self.layer_type() {
            return Err(WorkbookError::InvalidConfig(format!(
                "a lazy {} asked for in_channels = {in_channels} made a {} with in_channels = {}",
                self.layer_type(),
                spec.layer_type(),
                spec.in_channels()
            )));
        }
        spec.validate()?;
        Ok(spec)
    }

    /// The names of the parameters the first forward pass will create, in `state_dict` order.
    pub fn parameter_names(&self) -> Vec<String> {
        self.template
            .parameter_shapes()
            .into_iter()
            .map(|(n, _)| n)
            .collect()
    }
}

impl PartialEq for LazyConfig {
    fn eq(&self, other: &Self) -> bool {
        self.template.eq_spec(other.template.as_any())
    }
}

/// The concrete config's arguments, in their order, with `"in_channels": -1`, as PyG writes the
/// constructor.
impl Serialize for LazyConfig {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        use serde::ser::{Error, SerializeMap};
        // serde_json's Value sorts keys (without its preserve_order feature, which would change
        // every JSON this workspace writes): read the arguments back as an ordered list instead.
        let text = serde_json::to_string(self.template.arguments()).map_err(S::Error::custom)?;
        let Ordered(fields) = serde_json::from_str(&text).map_err(|e| {
            S::Error::custom(format!(
                "a lazy {}'s arguments are not a JSON object: {e}",
                self.layer_type()
            ))
        })?;
        let mut map = s.serialize_map(Some(fields.len()))?;
        for (key, value) in &fields {
            if key == "in_channels" {
                map.serialize_entry(key, &-1)?;
            } else {
                map.serialize_entry(key, value)?;
            }
        }
        map.end()
    }
}

/// A JSON object's fields in the order they were written.
struct Ordered(Vec<(String, serde_json::Value)>);

impl<'de> serde::Deserialize<'de> for Ordered {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        struct Fields;
        impl<'de> serde::de::Visitor<'de> for Fields {
            type Value = Ordered;
            fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("a JSON object")
            }
            fn visit_map<A: serde::de::MapAccess<'de>>(
                self,
                mut map: A,
            ) -> std::result::Result<Ordered, A::Error> {
                let mut fields = Vec::new();
                while let Some(entry) = map.next_entry()? {
                    fields.push(entry);
                }
                Ok(Ordered(fields))
            }
        }
        d.deserialize_map(Fields)
    }
}

impl LayerSpec for LazyConfig {
    fn layer_type(&self) -> &'static str {
        self.template.layer_type()
    }
    /// 0: not known until the first forward pass.
    fn in_channels(&self) -> usize {
        0
    }
    fn out_channels(&self) -> usize {
        self.template.out_channels()
    }
    fn heads(&self) -> usize {
        self.template.heads()
    }
    fn output_width(&self) -> usize {
        self.template.output_width()
    }
    fn has_attention(&self) -> bool {
        self.template.has_attention()
    }
    /// None yet: they are created by the first forward pass.
    fn parameter_shapes(&self) -> Vec<(String, Vec<usize>)> {
        Vec::new()
    }
    fn init_parameters(&self, _: &mut ChaCha8Rng, _: &Device) -> Result<Vec<(String, Tensor)>> {
        Ok(Vec::new())
    }
    fn validate(&self) -> Result<()> {
        self.template.validate()
    }
    fn build(&self, _: VarBuilder, at: &Placement) -> Result<Box<dyn GraphLayer>> {
        Ok(Box::new(LazyLayer {
            config: self.clone(),
            at: at.clone(),
        }))
    }
}

/// A layer before its first forward pass: a placement, and parameters that do not exist yet
/// (PyTorch's `UninitializedParameter`). Moving it moves nothing (there is nothing to copy) and
/// changes where the parameters will be created.
#[derive(Clone, Debug)]
pub struct LazyLayer {
    config: LazyConfig,
    at: Placement,
}

impl LazyLayer {
    /// Its config.
    pub fn config(&self) -> &LazyConfig {
        &self.config
    }

    /// The error of anything that needs this layer's parameters: `action` needs them, `name` is
    /// the layer's name in its model (`conv1`).
    pub fn uninitialized(&self, action: &str, name: &str) -> WorkbookError {
        WorkbookError::Uninitialized {
            action: action.to_string(),
            layer: name.to_string(),
            kind: self.config.layer_type().to_string(),
            placement: self.at.id(),
        }
    }
}

/// Hand-written rather than derived: the layer has no tensor field, and its `inspect` rows are
/// the parameters it will have, marked `uninitialised`.
impl Module for LazyLayer {
    fn visit_tensors<'a>(&'a self, _: &mut dyn FnMut(Named<'a>)) {}

    fn map_tensors(&self, m: &mut dyn TensorMap) -> Result<Self> {
        Ok(Self {
            config: self.config.clone(),
            at: m.target().clone(),
        })
    }

    fn placement(&self) -> &Placement {
        &self.at
    }

    /// One row per parameter the first forward pass will create, on the placement it will be
    /// created on; PyTorch cannot say an uninitialised parameter's shape either.
    fn inspect_rows(&self, prefix: &str) -> Vec<Row> {
        self.config
            .parameter_names()
            .into_iter()
            .map(|name| Row {
                name: format!("{prefix}{name}"),
                kind: "uninitialised",
                device: self.at.to_string(),
                dtype: "f32".into(),
                shape: Vec::new(),
            })
            .collect()
    }
}

impl GraphLayer for LazyLayer {
    fn layer_type(&self) -> &'static str {
        self.config.layer_type()
    }

    /// Refused: the first forward pass is [`Model::materialize`](crate::Model::materialize)'s,
    /// through `&mut self` (see the module docs).
    fn forward_layer(&self, _: &LayerInput<'_>, _: Option<&mut Dropout>) -> Result<LayerOutput> {
        Err(self.uninitialized("a forward pass through &self", self.config.layer_type()))
    }

    fn shadow_check(&self) -> bool {
        false
    }
}
