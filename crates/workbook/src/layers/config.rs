//! One layer of a model config ([`LayerConfig`]) and the kinds a config or a checkpoint may
//! name ([`LayerRegistry`]).
//!
//! [`LayerRegistry::builtin`] registers PyG's layers the way a reader registers a layer of
//! their own crate ([`LayerRegistry::with`]). A checkpoint stores each layer's kind
//! (`"layer": "GCNConv"`) and arguments; loading looks the kind up in the registry.
//!
//! ```
//! use workbook::layers::{LayerConfig, LayerRegistry};
//! use workbook::{GcnConfig, ModelConfig};
//! let layer = LayerConfig::new(GcnConfig::new(34, 4));
//! assert!(matches!(layer, LayerConfig::Gcn(_))); // a built-in keeps its variant
//! let json = serde_json::to_string(&layer).unwrap();
//! assert_eq!(json, r#"{"layer":"GCNConv","in_channels":34,"out_channels":4,"improved":false,"cached":false,"add_self_loops":true,"normalize":true,"bias":true}"#);
//! let registry = LayerRegistry::builtin();
//! assert_eq!(registry.kinds(), ["GATv2Conv", "GCNConv", "SAGEConv"]);
//! assert_eq!(registry.parse(&serde_json::from_str(&json).unwrap()).unwrap(), layer);
//! let err = ModelConfig::from_json(r#"{"layer": "MeanConv", "in_channels": 3, "out_channels": 2}"#).unwrap_err();
//! assert!(err.to_string().contains("unknown layer 'MeanConv'"), "{err}");
//! ```

use super::lazy::{LazyConfig, MakeSpec};
use super::spec::LayerSpec;
use super::{GatV2Config, GcnConfig, Layer, SageConfig};
use crate::error::{Result, WorkbookError};
use crate::placement::Placement;
use candle_nn::VarBuilder;
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use std::any::Any;
use std::collections::BTreeMap;
use std::fmt::Debug;
use std::sync::Arc;

/// One layer of a model config: a built-in one in its own variant (so `LayerConfig::Gcn(c)`
/// reaches its fields), or any other [`LayerSpec`]. In JSON, PyG's constructor call:
/// `{"layer": "GCNConv", ...arguments}`. Everything generic goes through [`LayerConfig::spec`].
#[derive(Clone, Debug)]
pub enum LayerConfig {
    Gcn(GcnConfig),
    GatV2(GatV2Config),
    Sage(SageConfig),
    /// A layer of your own (see [`LayerSpec`]).
    Custom(Arc<dyn LayerSpec>),
}

impl LayerConfig {
    /// The config of one layer: a built-in config lands in its own variant, any other in
    /// [`LayerConfig::Custom`].
    pub fn new<C: LayerSpec + Clone + PartialEq + Serialize>(config: C) -> Self {
        let any: &dyn Any = &config;
        if let Some(c) = any.downcast_ref::<GcnConfig>() {
            LayerConfig::Gcn(c.clone())
        } else if let Some(c) = any.downcast_ref::<GatV2Config>() {
            LayerConfig::GatV2(c.clone())
        } else if let Some(c) = any.downcast_ref::<SageConfig>() {
            LayerConfig::Sage(c.clone())
        } else {
            LayerConfig::Custom(Arc::new(config))
        }
    }

    /// A layer whose input width is found by its first forward pass (`in_channels = -1`, see
    /// [`crate::layers::lazy`]): `make` is its config given that width.
    ///
    /// ```
    /// use workbook::{GcnConfig, LayerConfig};
    /// let lazy = LayerConfig::lazy(|i| GcnConfig::new(i, 16)); // GCNConv(-1, 16)
    /// assert!(lazy.is_lazy());
    /// assert_eq!(lazy.output_width(), 16);
    /// let json = serde_json::to_string(&lazy).unwrap();
    /// assert!(json.starts_with(r#"{"layer":"GCNConv","in_channels":-1,"out_channels":16"#), "{json}");
    /// ```
    pub fn lazy<C, F>(make: F) -> Self
    where
        C: LayerSpec + Clone + PartialEq + Serialize,
        F: Fn(usize) -> C + Send + Sync + 'static,
    {
        LayerConfig::Custom(Arc::new(LazyConfig::of(make)))
    }

    /// The lazy config, if this layer's input width is found by its first forward pass.
    pub fn as_lazy(&self) -> Option<&LazyConfig> {
        self.spec().as_any().downcast_ref::<LazyConfig>()
    }

    /// Whether this layer's input width is found by its first forward pass (`in_channels = -1`).
    pub fn is_lazy(&self) -> bool {
        self.as_lazy().is_some()
    }

    /// The config behind `spec`, a built-in one in its own variant (what a lazy config becomes
    /// once its width is known).
    pub fn from_spec(spec: Arc<dyn LayerSpec>) -> Self {
        let any = spec.as_any();
        if let Some(c) = any.downcast_ref::<GcnConfig>() {
            LayerConfig::Gcn(c.clone())
        } else if let Some(c) = any.downcast_ref::<GatV2Config>() {
            LayerConfig::GatV2(c.clone())
        } else if let Some(c) = any.downcast_ref::<SageConfig>() {
            LayerConfig::Sage(c.clone())
        } else {
            LayerConfig::Custom(spec)
        }
    }

    /// The same config behind a shared pointer.
    fn into_spec(self) -> Arc<dyn LayerSpec> {
        match self {
            LayerConfig::Gcn(c) => Arc::new(c),
            LayerConfig::GatV2(c) => Arc::new(c),
            LayerConfig::Sage(c) => Arc::new(c),
            LayerConfig::Custom(c) => c,
        }
    }

    /// The layer's constructor arguments behind the one trait every layer config implements
    /// (the only place that tells the variants apart).
    pub fn spec(&self) -> &dyn LayerSpec {
        match self {
            LayerConfig::Gcn(c) => c,
            LayerConfig::GatV2(c) => c,
            LayerConfig::Sage(c) => c,
            LayerConfig::Custom(c) => c.as_ref(),
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

    /// Builds the layer from `vb` on the placement of `vb`'s device, through
    /// [`LayerSpec::build`]; built-in layers keep their own variant, so `Layer::GatV2(conv)`
    /// matches.
    pub fn build(&self, vb: VarBuilder) -> Result<Layer> {
        self.spec().validate()?;
        let at = Placement::of(vb.device());
        Ok(Layer::from_boxed(self.spec().build(vb, &at)?))
    }
}

impl PartialEq for LayerConfig {
    fn eq(&self, other: &Self) -> bool {
        self.spec().eq_spec(other.spec().as_any())
    }
}

impl Serialize for LayerConfig {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        #[derive(Serialize)]
        struct Tagged<'a> {
            layer: &'static str,
            #[serde(flatten)]
            arguments: &'a dyn erased_serde::Serialize,
        }
        let spec = self.spec();
        Tagged {
            layer: spec.layer_type(),
            arguments: spec.arguments(),
        }
        .serialize(s)
    }
}

/// Reads a layer of the built-in kinds ([`LayerRegistry::builtin`]); for layers of your own,
/// use [`LayerRegistry::parse`] (or [`ModelConfig::from_json_with`](crate::ModelConfig::from_json_with)).
impl<'de> Deserialize<'de> for LayerConfig {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        let value = serde_json::Value::deserialize(d)?;
        LayerRegistry::builtin()
            .parse(&value)
            .map_err(serde::de::Error::custom)
    }
}

type Parse = fn(serde_json::Value) -> Result<LayerConfig>;

/// The layer kinds a config or a checkpoint may name, each with how to read its arguments.
///
/// ```
/// use workbook::layers::LayerRegistry;
/// use workbook::SageConfig;
/// // a registry is a value: pass it where configs are read (checkpoint::load_with, ...)
/// let registry = LayerRegistry::new().with::<SageConfig>("SAGEConv");
/// assert_eq!(registry.kinds(), ["SAGEConv"]);
/// ```
#[derive(Clone, Default)]
pub struct LayerRegistry {
    kinds: BTreeMap<String, Parse>,
}

impl Debug for LayerRegistry {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_set().entries(self.kinds.keys()).finish()
    }
}

impl LayerRegistry {
    /// A registry of no kinds.
    pub fn new() -> Self {
        Self::default()
    }

    /// PyG's layers this crate implements: `GCNConv`, `GATv2Conv`, `SAGEConv`.
    pub fn builtin() -> Self {
        Self::new()
            .with::<GcnConfig>("GCNConv")
            .with::<GatV2Config>("GATv2Conv")
            .with::<SageConfig>("SAGEConv")
    }

    /// The same registry, reading `"layer": kind` as a `C` (its other fields are `C`'s
    /// arguments). `kind` must be what `C::layer_type` returns; a config that says otherwise
    /// is refused when it is read.
    pub fn with<C>(mut self, kind: &str) -> Self
    where
        C: LayerSpec + Clone + PartialEq + Serialize + DeserializeOwned,
    {
        fn parse<C>(arguments: serde_json::Value) -> Result<LayerConfig>
        where
            C: LayerSpec + Clone + PartialEq + Serialize + DeserializeOwned,
        {
            let config: C = serde_json::from_value(arguments).map_err(|e| {
                WorkbookError::InvalidConfig(format!(
                    "{e} (layer configs take PyG's constructor arguments; see the docs of GcnConfig / GatV2Config / SageConfig)"
                ))
            })?;
            Ok(LayerConfig::new(config))
        }
        self.kinds.insert(kind.to_string(), parse::<C>);
        self
    }

    /// The kinds this registry reads, sorted.
    pub fn kinds(&self) -> Vec<&str> {
        self.kinds.keys().map(String::as_str).collect()
    }

    /// Reads one layer's config, `{"layer": kind, ...arguments}`.
    pub fn parse(&self, value: &serde_json::Value) -> Result<LayerConfig> {
        let Some(object) = value.as_object() else {
            return Err(WorkbookError::InvalidConfig(format!(
                "a layer config is a JSON object like {{\"layer\": \"GCNConv\", \"in_channels\": 34, \"out_channels\": 4}}, not {value}"
            )));
        };
        let Some(kind) = object.get("layer").and_then(|k| k.as_str()) else {
            return Err(WorkbookError::InvalidConfig(
                "a layer config needs \"layer\": its kind (\"GCNConv\", \"GATv2Conv\", \"SAGEConv\", or one you registered)".into(),
            ));
        };
        let Some(parse) = self.kinds.get(kind) else {
            return Err(WorkbookError::UnknownLayer {
                kind: kind.to_string(),
                known: self.kinds.keys().cloned().collect(),
            });
        };
        let mut arguments = object.clone();
        arguments.remove("layer");
        let width = arguments.get("in_channels").and_then(|v| v.as_i64());
        if let Some(n) = width.filter(|&n| n < -1) {
            return Err(WorkbookError::InvalidConfig(format!(
                "{kind}: in_channels must be a width of at least 1, or -1 (PyG's lazy width: found by the first forward pass), not {n}"
            )));
        }
        if width == Some(-1) {
            // PyG's lazy width: the concrete config is read again, with the width found by the
            // first forward pass in place of -1.
            let parse = *parse;
            let make: Arc<MakeSpec> = Arc::new(move |width| {
                let mut arguments = arguments.clone();
                arguments.insert("in_channels".into(), serde_json::Value::from(width));
                Ok(parse(serde_json::Value::Object(arguments))?.into_spec())
            });
            let config = LayerConfig::Custom(Arc::new(LazyConfig::try_new(make)?));
            return match config.spec().layer_type() {
                said if said == kind => Ok(config),
                said => Err(WorkbookError::InvalidConfig(format!(
                    "the registry reads \"layer\": \"{kind}\" as a config whose layer_type() is \"{said}\"; register it under \"{said}\""
                ))),
            };
        }
        let config = parse(serde_json::Value::Object(arguments))?;
        let said = config.spec().layer_type();
        if said != kind {
            return Err(WorkbookError::InvalidConfig(format!(
                "the registry reads \"layer\": \"{kind}\" as a config whose layer_type() is \"{said}\"; register it under \"{said}\""
            )));
        }
        Ok(config)
    }
}
