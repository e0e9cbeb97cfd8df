//! A layer's config as the crate sees it: its constructor arguments, how to initialise its
//! parameters and build the layer ([`LayerSpec`]).
//!
//! The built-in layers go through exactly this: `GcnConfig`, `GatV2Config` and `SageConfig`
//! implement [`LayerSpec`] in their own files, as a config of your own crate does. A model
//! config holds each layer as a [`LayerConfig`](super::LayerConfig), and a checkpoint stores its
//! kind and arguments; reading them back goes through a [`LayerRegistry`](super::LayerRegistry).
//!
//! ```
//! use workbook::layers::{GraphLayer, LayerSpec};
//! use workbook::{GcnConfig, Placement};
//! let spec: &dyn LayerSpec = &GcnConfig::new(34, 4);
//! assert_eq!(spec.parameter_shapes()[0], ("lin.weight".to_string(), vec![4, 34]));
//! let conv = spec.init(0, &Placement::sim(1)).unwrap(); // Burn's config.init(&device)
//! assert_eq!(conv.placement().to_string(), "sim:1");
//! ```

use super::graph_layer::GraphLayer;
use crate::error::Result;
use crate::placement::Placement;
use candle_core::{DType, Device, Tensor};
use candle_nn::{VarBuilder, VarMap};
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use serde::Serialize;
use std::any::Any;
use std::fmt::Debug;

/// A layer's constructor arguments (PyG's), as a model config holds them: sizes, parameter
/// names and shapes, PyG's initialisation, and how to build the layer.
///
/// Implement it for your layer's config (a struct that derives `Clone`, `Debug`, `PartialEq`,
/// `Serialize` and `Deserialize`), wrap the config with
/// [`LayerConfig::new`](super::LayerConfig::new) in a [`ModelConfig`](crate::ModelConfig), and
/// the model, trainer, checkpoints (with your kind registered,
/// [`LayerRegistry::with`](super::LayerRegistry::with)), the pre-flight and the ONNX export
/// take it.
pub trait LayerSpec: SpecObject + Debug + Send + Sync + 'static {
    /// The layer's kind in configs and checkpoints, and its name in messages: PyG's class name
    /// for PyG's layers (`"GCNConv"`).
    fn layer_type(&self) -> &'static str;
    fn in_channels(&self) -> usize;
    /// Channels per head.
    fn out_channels(&self) -> usize;
    /// Attention heads (1 for layers without attention).
    fn heads(&self) -> usize {
        1
    }
    /// Width of the layer's output.
    fn output_width(&self) -> usize {
        self.out_channels()
    }
    /// Whether the forward pass returns attention weights (kept with every served response).
    fn has_attention(&self) -> bool {
        false
    }
    /// Parameter names (without prefix) and shapes, in PyG's `state_dict` order.
    fn parameter_shapes(&self) -> Vec<(String, Vec<usize>)>;
    /// PyG's initial values, drawn from `rng` on the host and placed on `device`.
    fn init_parameters(
        &self,
        rng: &mut ChaCha8Rng,
        device: &Device,
    ) -> Result<Vec<(String, Tensor)>>;
    /// Checks values PyG would accept but that make no sense.
    fn validate(&self) -> Result<()> {
        Ok(())
    }
    /// Builds the layer on `at`, taking its parameters by name from `vb` (whose device is
    /// `at`'s). Called once the config is validated.
    fn build(&self, vb: VarBuilder, at: &Placement) -> Result<Box<dyn GraphLayer>>;

    /// A freshly initialised layer on `at` (PyG's initialisation, seeded, drawn on the host):
    /// Burn's `config.init(&device)`.
    fn init(&self, seed: u64, at: &Placement) -> Result<Box<dyn GraphLayer>> {
        self.validate()?;
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let host = Placement::cpu();
        let params = self.init_parameters(&mut rng, host.device())?;
        let vars = VarMap::new();
        {
            let mut data = vars.data().lock().expect("a fresh VarMap is not poisoned");
            for (name, t) in params {
                data.insert(name, candle_core::Var::from_tensor(&t)?);
            }
        }
        let layer = self.build(
            VarBuilder::from_varmap(&vars, DType::F32, host.device()),
            &host,
        )?;
        if at == &host {
            return Ok(layer);
        }
        layer.map_boxed(&mut crate::module::Mover::new(
            &host,
            &host.destination(at),
            "",
            true,
        ))
    }
}

/// The object-safe side of a [`LayerSpec`] behind `Arc<dyn LayerSpec>`: comparison, the
/// arguments as serde sees them, and the concrete config back. Implemented for every config
/// that is `Clone + PartialEq + Serialize`.
pub trait SpecObject {
    /// Whether `other` is the same config (same type, equal arguments).
    fn eq_spec(&self, other: &dyn Any) -> bool;
    /// The arguments, to be written after `"layer": kind` in a config.
    fn arguments(&self) -> &dyn erased_serde::Serialize;
    /// The config as [`Any`] (`spec.as_any().downcast_ref::<GcnConfig>()`).
    fn as_any(&self) -> &dyn Any;
}

impl<T: LayerSpec + Clone + PartialEq + Serialize> SpecObject for T {
    fn eq_spec(&self, other: &dyn Any) -> bool {
        other.downcast_ref::<T>() == Some(self)
    }
    fn arguments(&self) -> &dyn erased_serde::Serialize {
        self
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
}
