//! Graph convolution layers with PyTorch Geometric's semantics, parameter names and options,
//! all behind one trait: [`GraphLayer`] (the forward pass) on top of
//! [`Module`] (named parameters, buffers, placement).
//!
//! A model ([`crate::Model`]) and every generic tool (moving, dtype conversion, the placement
//! checks, `inspect`, checkpoints, the optimiser, ONNX export) see layers only through these
//! two traits, so adding a layer means implementing them; see [`sage_conv`] for one written
//! exactly as a reader would, with nothing but the public API.
//!
//! ```
//! use workbook::{GraphLayer, Model, ModelConfig, Module, Placement};
//! let (model, _) = Model::init(ModelConfig::sage(34, 8, 4), 0, Placement::cpu()).unwrap();
//! let first = model.layers()[0].as_graph_layer();
//! assert_eq!(first.layer_type(), "SAGEConv");
//! let names: Vec<_> = first.named_parameters().into_iter().map(|(n, _)| n).collect();
//! assert_eq!(names, ["lin_l.weight", "lin_l.bias", "lin_r.weight"]);
//! ```

pub mod gatv2_conv;
pub mod gcn_conv;
pub(crate) mod init;
pub mod sage_conv;

pub use gatv2_conv::{Attention, GatV2Config, GatV2Conv, GatV2Output};
pub use gcn_conv::{GcnConfig, GcnConv};
pub use sage_conv::{SageConfig, SageConv};

use crate::edge_index::EdgeIndex;
use crate::error::{Result, WorkbookError};
use crate::export::onnx::{Builder, OnnxLayerOut, Sizes};
use crate::module::{Caster, Module, TensorMap};
use crate::placement::{check_all, inherit, Placed, Role};
use crate::train::Dropout;
use candle_core::{DType, Tensor};
use std::fmt::Debug;

/// What a layer's forward pass reads: node features and the graph.
#[derive(Clone, Copy, Debug)]
pub struct LayerInput<'a> {
    /// `[N, in_channels]`.
    pub x: &'a Tensor,
    pub edge_index: &'a EdgeIndex,
    /// `[E]`, for layers that take edge weights.
    pub edge_weight: Option<&'a Tensor>,
}

/// What a layer's forward pass returns.
#[derive(Clone, Debug)]
pub struct LayerOutput {
    /// `[N, output_width]`.
    pub out: Tensor,
    /// The attention weights, for attention layers.
    pub attention: Option<Attention>,
}

impl LayerOutput {
    /// An output without attention.
    pub fn new(out: Tensor) -> Self {
        Self {
            out,
            attention: None,
        }
    }
}

/// A graph layer: [`Module`]'s bookkeeping plus a forward pass. Implement
/// [`GraphLayer::forward_layer`]; call [`GraphLayer::apply`], which checks placements before and
/// after it.
pub trait GraphLayer: Module + DynLayer + Debug + Send + Sync + 'static {
    /// PyG's class name (`"GCNConv"`), used in error messages.
    fn layer_type(&self) -> &'static str;

    /// The forward pass proper. Create intermediate tensors where the input lives
    /// (`Tensor::zeros(n, dtype, input.x.device())`, `x.zeros_like()`), never on a fixed
    /// device: [`GraphLayer::apply`] refuses an output that is not on the layer's placement.
    fn forward_layer(
        &self,
        input: &LayerInput<'_>,
        dropout: Option<&mut Dropout>,
    ) -> Result<LayerOutput>;

    /// Forgets cached buffers (they are rebuilt on the next forward pass).
    fn clear_cache(&mut self) {}

    /// Writes the layer's eval-mode forward pass into an ONNX graph, reading node features
    /// `h` and returning the output's name. Parameters are named `{prefix}{name}`.
    fn export_onnx(
        &self,
        b: &mut Builder,
        sizes: &Sizes,
        h: &str,
        prefix: &str,
    ) -> Result<OnnxLayerOut> {
        let _ = (b, sizes, h, prefix);
        Err(WorkbookError::InvalidConfig(format!(
            "{} has no ONNX export (implement GraphLayer::export_onnx)",
            self.layer_type()
        )))
    }

    /// Whether [`GraphLayer::apply`] runs the shadow pass on a simulated device (see there).
    /// The built-in layers opt out: their intermediates are checked by the library's own tests,
    /// and they would pay a second forward pass on every `sim:N` call.
    fn shadow_check(&self) -> bool {
        true
    }

    /// The checked forward pass: every parameter, buffer and input on the layer's placement
    /// first (the error names the culprit), then [`GraphLayer::forward_layer`], then its output
    /// checked against the placement, naming the layer.
    ///
    /// **Intermediates on `sim:N`.** A tensor made inside `forward_layer` on a fixed device
    /// (`Tensor::zeros(n, DType::F32, &Device::Cpu)`, the translation of PyTorch's
    /// `torch.zeros(n)`) fails on a GPU with candle's own error, but on `sim:N` it *is* in host
    /// memory like everything else, and no check of devices can see it. So on a simulated
    /// device, in evaluation mode, `apply` runs the layer a second time in float64, with its
    /// parameters, buffers and inputs converted (the *shadow pass*): an intermediate made from
    /// the input (`x.zeros_like()`, `Tensor::zeros(n, x.dtype(), x.device())`) follows it, while
    /// one made with a fixed device and dtype meets a float64 tensor and stops the pass, and the
    /// error names the layer and the fix. Its limit: an intermediate with the input's dtype
    /// but a fixed device (`Tensor::zeros(n, x.dtype(), &Device::Cpu)`) passes on `sim:N`: it is
    /// the same call, with the same result, as `Tensor::zeros(n, x.dtype(), x.device())` there.
    /// A real device catches it, and so does the code's witness, [`crate::fixed_device`], which
    /// reads the layer's source for devices written in it.
    fn apply(&self, input: &LayerInput<'_>, dropout: Option<&mut Dropout>) -> Result<LayerOutput> {
        let what = format!("{} parameters", self.layer_type());
        self.check_forward(&what, input.x, input.edge_index, input.edge_weight)?;
        let shadow = dropout.is_none()
            && self.placement().is_sim()
            && input.x.dtype() != DType::F64
            && self.shadow_check();
        let o = self.forward_layer(input, dropout)?;
        let at = self.placement();
        let got = inherit(&o.out, at);
        let culprit = format!("{}.forward output", self.layer_type());
        check_all(&what, at, &[Placed::new(culprit, Role::Intermediate, &got)])?;
        if shadow {
            self.shadow_pass(input)?;
        }
        Ok(o)
    }

    /// The float64 shadow pass of [`GraphLayer::apply`] on a simulated device.
    fn shadow_pass(&self, input: &LayerInput<'_>) -> Result<()> {
        let at = self.placement();
        let layer = self.map_boxed(&mut Caster::new(at, DType::F64))?;
        let x = input.x.to_dtype(DType::F64)?;
        let w = input
            .edge_weight
            .map(|w| w.to_dtype(DType::F64))
            .transpose()?;
        let shadow_input = LayerInput {
            x: &x,
            edge_index: input.edge_index,
            edge_weight: w.as_ref(),
        };
        let problem = match layer.forward_layer(&shadow_input, None) {
            // candle appends a backtrace under RUST_BACKTRACE: keep the message
            Err(e) => Some(format!(
                "it stopped with: {}",
                e.to_string().lines().next().unwrap_or_default()
            )),
            Ok(o) if o.out.dtype() != DType::F64 => {
                Some(format!("its output came back {:?}", o.out.dtype()))
            }
            Ok(_) => None,
        };
        match problem {
            None => Ok(()),
            Some(problem) => Err(crate::module::intermediate_error(
                self.layer_type(),
                at,
                &problem,
            )),
        }
    }
}

/// The object-safe copies behind `Box<dyn GraphLayer>` (implemented for every `Clone` layer).
pub trait DynLayer {
    /// A boxed copy.
    fn clone_boxed(&self) -> Box<dyn GraphLayer>;
    /// A boxed [`Module::map_tensors`].
    fn map_boxed(&self, m: &mut dyn TensorMap) -> Result<Box<dyn GraphLayer>>;
}

impl<T: GraphLayer + Clone> DynLayer for T {
    fn clone_boxed(&self) -> Box<dyn GraphLayer> {
        Box::new(self.clone())
    }
    fn map_boxed(&self, m: &mut dyn TensorMap) -> Result<Box<dyn GraphLayer>> {
        Ok(Box::new(self.map_tensors(m)?))
    }
}

/// A layer's constructor arguments (PyG's), as a model config holds them: sizes, parameter
/// names and shapes, PyG's initialisation, and how to build the layer.
pub trait LayerSpec: Debug {
    /// PyG's class name (`"GCNConv"`).
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
    /// Parameter names (without prefix) and shapes, in PyG's `state_dict` order.
    fn parameter_shapes(&self) -> Vec<(String, Vec<usize>)>;
    /// PyG's initial values, drawn from `rng` on the host and placed on `device`.
    fn init_parameters(
        &self,
        rng: &mut rand_chacha::ChaCha8Rng,
        device: &candle_core::Device,
    ) -> Result<Vec<(String, Tensor)>>;
    /// Checks values PyG would accept but that make no sense.
    fn validate(&self) -> Result<()> {
        Ok(())
    }
    /// Builds the layer, taking its parameters by name from `vb`.
    fn build(&self, vb: candle_nn::VarBuilder) -> Result<Box<dyn GraphLayer>>;
}

impl LayerSpec for GcnConfig {
    fn layer_type(&self) -> &'static str {
        "GCNConv"
    }
    fn in_channels(&self) -> usize {
        self.in_channels
    }
    fn out_channels(&self) -> usize {
        self.out_channels
    }
    fn parameter_shapes(&self) -> Vec<(String, Vec<usize>)> {
        GcnConfig::parameter_shapes(self)
    }
    fn init_parameters(
        &self,
        rng: &mut rand_chacha::ChaCha8Rng,
        device: &candle_core::Device,
    ) -> Result<Vec<(String, Tensor)>> {
        GcnConfig::init_parameters(self, rng, device)
    }
    fn build(&self, vb: candle_nn::VarBuilder) -> Result<Box<dyn GraphLayer>> {
        Ok(Box::new(GcnConv::new(self.clone(), vb)?))
    }
}

impl LayerSpec for GatV2Config {
    fn layer_type(&self) -> &'static str {
        "GATv2Conv"
    }
    fn in_channels(&self) -> usize {
        self.in_channels
    }
    fn out_channels(&self) -> usize {
        self.out_channels
    }
    fn heads(&self) -> usize {
        self.heads
    }
    fn output_width(&self) -> usize {
        GatV2Config::output_width(self)
    }
    fn parameter_shapes(&self) -> Vec<(String, Vec<usize>)> {
        GatV2Config::parameter_shapes(self)
    }
    fn init_parameters(
        &self,
        rng: &mut rand_chacha::ChaCha8Rng,
        device: &candle_core::Device,
    ) -> Result<Vec<(String, Tensor)>> {
        GatV2Config::init_parameters(self, rng, device)
    }
    fn validate(&self) -> Result<()> {
        GatV2Config::validate(self)
    }
    fn build(&self, vb: candle_nn::VarBuilder) -> Result<Box<dyn GraphLayer>> {
        Ok(Box::new(GatV2Conv::new(self.clone(), vb)?))
    }
}
