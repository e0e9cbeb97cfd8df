//! One built layer of a model: [`Layer`], the built-in layers in their own variants (so
//! `Layer::GatV2(conv)` reaches `GatV2Conv`'s inherent API) and any other [`GraphLayer`] boxed.
//!
//! Every layer is built the same way, through its config's
//! [`LayerSpec::build`](super::LayerSpec::build), which returns a `Box<dyn GraphLayer>`;
//! [`Layer::from_boxed`] then gives a built-in one back its variant. Everything generic goes
//! through [`Layer::as_graph_layer`].
//!
//! ```
//! use workbook::layers::{Layer, LayerSpec};
//! use workbook::{GatV2Config, Placement};
//! let boxed = GatV2Config::new(4, 2).init(0, &Placement::cpu()).unwrap();
//! let layer = Layer::from_boxed(boxed);
//! assert!(matches!(layer, Layer::GatV2(_)));
//! assert_eq!(layer.as_graph_layer().layer_type(), "GATv2Conv");
//! ```

use super::graph_layer::GraphLayer;
use super::{GatV2Conv, GcnConv};
use crate::error::Result;
use crate::module::TensorMap;

/// One layer of a model (see the module docs).
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
    /// A layer built by its config: a built-in one gets its own variant back, any other is
    /// [`Layer::Custom`].
    pub fn from_boxed(layer: Box<dyn GraphLayer>) -> Self {
        let any = layer.as_any();
        if let Some(c) = any.downcast_ref::<GcnConv>() {
            Layer::Gcn(c.clone())
        } else if let Some(c) = any.downcast_ref::<GatV2Conv>() {
            Layer::GatV2(c.clone())
        } else {
            Layer::Custom(layer)
        }
    }

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

    /// [`Module::map_tensors`](crate::module::Module::map_tensors), keeping the variant.
    pub fn map_tensors(&self, m: &mut dyn TensorMap) -> Result<Self> {
        use crate::module::Module;
        Ok(match self {
            Layer::Gcn(c) => Layer::Gcn(c.map_tensors(m)?),
            Layer::GatV2(c) => Layer::GatV2(c.map_tensors(m)?),
            Layer::Custom(c) => Layer::Custom(c.map_boxed(m)?),
        })
    }
}
