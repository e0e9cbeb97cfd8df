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
    /// `lin_r.weight` `[out, in]`, no bias: applied to the node itself (with `root_weight`).
    lin_r: Option<Linear>,
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
        let lin_r = if config.root_weight {
            Some(Linear::new(vb.get((o, i), "lin_r.weight")?, None))
        } else {
            None
        };
        Ok(Self {
            config,
            lin_l,
            lin_r,
            at: at.clone(),
        })
    }
}

/// The mean of `x[j]` over the edges `j → i` into every node (0 without in-edges), every
/// intermediate made from `x`.
fn mean_aggregate(x: &Tensor, edges: &EdgeIndex) -> Result<Tensor> {
    let messages = x.index_select(edges.sources(), 0)?;
    let sums = x.zeros_like()?.index_add(edges.targets(), &messages, 0)?;
    let ones = messages.narrow(1, 0, 1)?.ones_like()?; // [E, 1]
    let counts = x
        .narrow(1, 0, 1)?
        .zeros_like()?
        .index_add(edges.targets(), &ones, 0)?
        .maximum(1.0)?;
    Ok(sums.broadcast_div(&counts)?)
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
        let mut out = self.lin_l.forward(&mean_aggregate(x, input.edge_index)?)?;
        if let Some(lin_r) = &self.lin_r {
            out = (out + lin_r.forward(x)?)?;
        }
        if self.config.normalize {
            let norm = out.sqr()?.sum_keepdim(1)?.sqrt()?.maximum(1e-12)?;
            out = out.broadcast_div(&norm)?;
        }
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
