//! The layer trait: what a graph layer is to everything generic in the crate.
//!
//! [`GraphLayer`] is the forward pass on top of [`Module`]'s bookkeeping (named parameters,
//! buffers, placement). A model, the trainer, checkpoints, the pre-flight, the ONNX export and
//! data parallelism see a layer only through these two traits and its config's
//! [`LayerSpec`](super::LayerSpec), so a layer of your own crate is as first-class as the
//! built-in ones: implement the three and register the config
//! ([`LayerRegistry`](super::LayerRegistry)).
//!
//! ```
//! use workbook::candle_core::{DType, Tensor};
//! use workbook::layers::{GraphLayer, LayerInput};
//! use workbook::{EdgeIndex, GcnConfig, GcnConv, Placement};
//! let conv = GcnConv::init(GcnConfig::new(4, 2), 0, &Placement::sim(1)).unwrap();
//! let x = Tensor::ones((3, 4), DType::F32, conv.placement().device()).unwrap();
//! let ei = EdgeIndex::new(&[0, 1], &[1, 2], 3, conv.placement()).unwrap();
//! let out = conv.apply(&LayerInput { x: &x, edge_index: &ei, edge_weight: None }, None).unwrap();
//! assert_eq!(out.out.dims(), &[3, 2]);
//! ```

use crate::edge_index::EdgeIndex;
use crate::error::{Result, WorkbookError};
use crate::module::{intermediate_error, Caster, Module, TensorMap};
use crate::onnx_graph::{Builder, OnnxLayerOut, Sizes};
use crate::ops::dropout::Dropout;
use crate::placement::{check_all, inherit, Placed, Role};
use candle_core::{DType, Tensor};
use std::any::Any;
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

/// Attention weights and the edges they belong to.
#[derive(Clone, Debug)]
pub struct Attention {
    /// The edges after self-loop handling (PyG's returned `edge_index`).
    pub edge_index: EdgeIndex,
    /// `[E', heads]`: `weights[e, h]` is the attention of head `h` on edge `e`.
    pub weights: Tensor,
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
        Err(WorkbookError::Unsupported(format!(
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
            Some(problem) => Err(intermediate_error(self.layer_type(), at, &problem)),
        }
    }
}

/// The object-safe copies behind `Box<dyn GraphLayer>` (implemented for every `Clone` layer).
pub trait DynLayer {
    /// A boxed copy.
    fn clone_boxed(&self) -> Box<dyn GraphLayer>;
    /// A boxed [`Module::map_tensors`].
    fn map_boxed(&self, m: &mut dyn TensorMap) -> Result<Box<dyn GraphLayer>>;
    /// The layer as [`Any`], to get a concrete layer back from `&dyn GraphLayer`
    /// (`layer.as_any().downcast_ref::<GatV2Conv>()`).
    fn as_any(&self) -> &dyn Any;
}

impl<T: GraphLayer + Clone> DynLayer for T {
    fn clone_boxed(&self) -> Box<dyn GraphLayer> {
        Box::new(self.clone())
    }
    fn map_boxed(&self, m: &mut dyn TensorMap) -> Result<Box<dyn GraphLayer>> {
        Ok(Box::new(self.map_tensors(m)?))
    }
    fn as_any(&self) -> &dyn Any {
        self
    }
}

/// Checks node features `x` against the edge index and a layer's input width before any maths:
/// `[num_nodes, in_channels]`, floating point. `layer` names the layer in the error.
pub fn check_features(
    x: &Tensor,
    edge_index: &EdgeIndex,
    in_channels: usize,
    layer: &str,
) -> Result<()> {
    let dims = x.dims();
    if dims.len() != 2 {
        return Err(WorkbookError::InvalidGraph(format!(
            "{layer}: node features x must be [num_nodes, {in_channels}], got {dims:?}"
        )));
    }
    if !x.dtype().is_float() {
        return Err(WorkbookError::InvalidGraph(format!(
            "{layer}: node features x must be floating point, got {:?}; convert with x.to_dtype(DType::F32)",
            x.dtype()
        )));
    }
    if dims[1] != in_channels {
        return Err(WorkbookError::InvalidGraph(format!(
            "{layer}: x has {} features per node but the layer expects in_channels = {in_channels}",
            dims[1]
        )));
    }
    if dims[0] != edge_index.num_nodes() {
        return Err(WorkbookError::InvalidGraph(format!(
            "{layer}: x has {} rows but edge_index was built for {} nodes",
            dims[0],
            edge_index.num_nodes()
        )));
    }
    Ok(())
}
