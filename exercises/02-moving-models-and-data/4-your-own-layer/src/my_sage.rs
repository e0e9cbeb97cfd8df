//! GraphSAGE (PyG's `SAGEConv`, mean aggregation) as your own layer, on the workbook's layer
//! trait: `#[derive(Module)]` declares the parameters (so `to_device`, `inspect` and
//! checkpoints see them), `GraphLayer::forward_layer` is the forward pass.
//!
//! `x'_i = lin_l(mean_{j → i} x_j) + lin_r(x_i)` (`lin_r` only with `root_weight`, without a
//! bias), then with `normalize` each row divided by `max(‖row‖₂, 1e-12)`. PyG's names:
//! `lin_l.weight` `[out, in]`, `lin_l.bias` (with `bias`), `lin_r.weight`.

use workbook::candle_core::Tensor;
use workbook::candle_nn::{Linear, Module as _, VarBuilder};
use workbook::layers::sage_conv::lower_onnx;
use workbook::layers::{GraphLayer, LayerInput, LayerOutput, SageConfig};
use workbook::onnx_graph::{Builder, OnnxLayerOut, Sizes};
use workbook::{train::Dropout, EdgeIndex, Module, Placement, Result};

#[derive(Clone, Debug, Module)]
pub struct MySageConv {
    #[module(skip)]
    config: SageConfig,
    /// `lin_l.weight` `[out, in]` and `lin_l.bias`: applied to the mean of the neighbours.
    lin_l: Linear,
    // TODO: `lin_r.weight` `[out, in]`, no bias, applied to the node itself, only with
    // `root_weight`: declare it so that the derive sees it (a field the derive does not see is
    // not moved by to_device, not listed by inspect, not saved in checkpoints).
    #[module(placement)]
    at: Placement,
}

impl MySageConv {
    /// Builds the layer from `vb`, by PyG's names, on `at` (where `vb`'s tensors are: a
    /// simulated device's live in host memory, so `vb.device()` alone cannot say).
    pub fn new(config: SageConfig, vb: VarBuilder, at: &Placement) -> Result<Self> {
        let (i, o) = (config.in_channels, config.out_channels);
        let bias = if config.bias {
            Some(vb.get(o, "lin_l.bias")?)
        } else {
            None
        };
        let lin_l = Linear::new(vb.get((o, i), "lin_l.weight")?, bias);
        // TODO: lin_r (with `config.root_weight`), from "lin_r.weight".
        Ok(Self {
            config,
            lin_l,
            at: at.clone(),
        })
    }
}

/// The mean of `x[j]` over the edges `j → i` into every node (0 without in-edges), every
/// intermediate made from `x`.
fn mean_aggregate(x: &Tensor, edges: &EdgeIndex) -> Result<Tensor> {
    // TODO: sum x[j] into every target i (edges.sources(), edges.targets()), count the in-edges,
    // divide (a node without in-edges gets 0). Make every intermediate from x (x.zeros_like(),
    // ...), never on a fixed device.
    let _ = (x, edges);
    Err(workbook::WorkbookError::InvalidConfig(
        "TODO: mean_aggregate".into(),
    ))
}

impl GraphLayer for MySageConv {
    fn layer_type(&self) -> &'static str {
        "SAGEConv"
    }

    fn forward_layer(
        &self,
        input: &LayerInput<'_>,
        _: Option<&mut Dropout>,
    ) -> Result<LayerOutput> {
        let x = input.x;
        let out = self.lin_l.forward(&mean_aggregate(x, input.edge_index)?)?;
        // TODO: add lin_r(x) with root_weight; with normalize, divide every row by
        // max(its L2 norm, 1e-12) (PyG's F.normalize).
        Ok(LayerOutput::new(out))
    }

    fn export_onnx(
        &self,
        b: &mut Builder,
        s: &Sizes,
        h: &str,
        prefix: &str,
    ) -> Result<OnnxLayerOut> {
        // Given: the library's SAGE lowering, which reads your parameters by their PyG names
        // (a parameter the derive does not see is missing from the export, and named).
        lower_onnx(b, s, h, prefix, &self.config, &self.named_parameters())
    }
}
