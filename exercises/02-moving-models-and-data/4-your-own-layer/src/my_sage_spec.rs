//! Your layer's configuration as a [`LayerSpec`]: what lets a `Model` be made of `MySageConv`,
//! so that `Trainer` trains it, `checkpoint` saves and loads it, and the ONNX exporter exports
//! it, exactly as it does the library's own layers. Given: nothing to do here.
//!
//! [`MySage`] wraps PyG's `SAGEConv` arguments and is saved under its own kind,
//! `"MySAGEConv"`; a checkpoint of it is read back with
//! `checkpoint::load_with(path, at, &LayerRegistry::builtin().with::<MySage>("MySAGEConv"))`.
//! The sizes, the parameter names and the initialisation are the library's `SAGEConv`'s, so a
//! model of your layers and one of the library's start from the same weights.

use crate::my_sage::MySageConv;
use serde::{Deserialize, Serialize};
use workbook::candle_core::{Device, Tensor};
use workbook::candle_nn::VarBuilder;
use workbook::layers::{GraphLayer, LayerSpec, SageConfig};
use workbook::rand_chacha::ChaCha8Rng;
use workbook::{Placement, Result};

/// `SAGEConv(in, out, aggr="mean")`'s arguments, building [`MySageConv`].
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct MySage(pub SageConfig);

impl LayerSpec for MySage {
    fn layer_type(&self) -> &'static str {
        "MySAGEConv"
    }
    fn in_channels(&self) -> usize {
        self.0.in_channels
    }
    fn out_channels(&self) -> usize {
        self.0.out_channels
    }
    fn parameter_shapes(&self) -> Vec<(String, Vec<usize>)> {
        self.0.parameter_shapes()
    }
    fn init_parameters(
        &self,
        rng: &mut ChaCha8Rng,
        device: &Device,
    ) -> Result<Vec<(String, Tensor)>> {
        self.0.init_parameters(rng, device)
    }
    fn validate(&self) -> Result<()> {
        self.0.validate()
    }
    fn build(&self, vb: VarBuilder, at: &Placement) -> Result<Box<dyn GraphLayer>> {
        Ok(Box::new(MySageConv::new(self.0.clone(), vb, at)?))
    }
}
