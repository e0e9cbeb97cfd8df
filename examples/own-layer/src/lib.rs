//! PyG's `GINConv(Linear(in, out), train_eps=True, aggr="mean")` (Xu et al., 2019, with the
//! neighbours averaged rather than summed, an aggregation PyG's `GINConv` takes), written
//! outside the workbook's crates with its public API only, as a reader writes a layer of their
//! own:
//!
//! `x'_i = lin((1 + ε) · x_i + mean_{j → i} x_j)` (0 for a node without in-edges), computed as
//! `(1 + ε) · h_i + mean_j h_j + b` with `h = x · Wᵀ` (the linear map first: the same value,
//! and the mean runs over `out_channels` columns instead of `in_channels`). PyG's names:
//! `lin.weight` `[out, in]`, `lin.bias`, `eps` `[1]`.
//!
//! [`GinConfig`] implements [`LayerSpec`] (sizes, names, initialisation, building the layer) and
//! [`GinConv`] derives [`Module`] and implements [`GraphLayer`] (the forward pass and its ONNX
//! lowering). Nothing more is needed for a model of them to train, save, load, pre-flight,
//! export and replicate: `tests/first_class.rs` does each.
//!
//! ```
//! use own_layer::GinConfig;
//! use workbook::layers::{LayerConfig, LayerSpec};
//! use workbook::{Model, ModelConfig, Placement};
//! let config = ModelConfig::new(vec![LayerConfig::new(GinConfig::new(34, 4))]);
//! let (model, _) = Model::init(config, 0, &Placement::cpu()).unwrap();
//! let names: Vec<_> = model.named_parameters().into_iter().map(|(n, _)| n).collect();
//! assert_eq!(names, ["conv1.lin.weight", "conv1.lin.bias", "conv1.eps"]);
//! ```

use serde::{Deserialize, Serialize};
use workbook::candle_core::{DType, Device, Tensor};
use workbook::candle_nn::{Linear, VarBuilder};
use workbook::layers::init::{glorot, uniform};
use workbook::layers::{check_features, GraphLayer, LayerInput, LayerOutput, LayerSpec};
use workbook::onnx_graph::{attr_int, Builder, OnnxLayerOut, Sizes};
use workbook::ops::{aggregate_sum, Dropout};
use workbook::rand_chacha::ChaCha8Rng;
use workbook::{Module, Placement, Result, WorkbookError};

/// `GINConv(Linear(in_channels, out_channels), train_eps=True, aggr="mean")`'s arguments.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GinConfig {
    pub in_channels: usize,
    pub out_channels: usize,
    /// ε's initial value (PyG's `eps`, 0 by default).
    #[serde(default)]
    pub eps: f64,
}

impl GinConfig {
    pub fn new(in_channels: usize, out_channels: usize) -> Self {
        Self {
            in_channels,
            out_channels,
            eps: 0.0,
        }
    }
}

impl LayerSpec for GinConfig {
    fn layer_type(&self) -> &'static str {
        "GINConv"
    }
    fn in_channels(&self) -> usize {
        self.in_channels
    }
    fn out_channels(&self) -> usize {
        self.out_channels
    }
    fn parameter_shapes(&self) -> Vec<(String, Vec<usize>)> {
        let (i, o) = (self.in_channels, self.out_channels);
        vec![
            ("lin.weight".into(), vec![o, i]),
            ("lin.bias".into(), vec![o]),
            ("eps".into(), vec![1]),
        ]
    }
    fn init_parameters(
        &self,
        rng: &mut ChaCha8Rng,
        device: &Device,
    ) -> Result<Vec<(String, Tensor)>> {
        let (i, o) = (self.in_channels, self.out_channels);
        let bound = 1.0 / (i.max(1) as f64).sqrt();
        Ok(vec![
            ("lin.weight".into(), glorot(&[o, i], rng, device)?),
            ("lin.bias".into(), uniform(&[o], bound, rng, device)?),
            (
                "eps".into(),
                Tensor::full(self.eps as f32, 1, device)?.to_dtype(DType::F32)?,
            ),
        ])
    }
    fn validate(&self) -> Result<()> {
        if !self.eps.is_finite() {
            return Err(WorkbookError::InvalidConfig(format!(
                "GINConv: eps must be finite, got {}",
                self.eps
            )));
        }
        Ok(())
    }
    fn build(&self, vb: VarBuilder, at: &Placement) -> Result<Box<dyn GraphLayer>> {
        let (i, o) = (self.in_channels, self.out_channels);
        Ok(Box::new(GinConv {
            config: self.clone(),
            lin: Linear::new(vb.get((o, i), "lin.weight")?, Some(vb.get(o, "lin.bias")?)),
            eps: vb.get(1, "eps")?,
            at: at.clone(),
        }))
    }
}

/// PyG's `GINConv` with a linear map, a trainable ε and mean aggregation.
#[derive(Clone, Debug, Module)]
pub struct GinConv {
    #[module(skip)]
    config: GinConfig,
    /// `lin.weight`, `lin.bias`.
    lin: Linear,
    /// `eps`, `[1]`.
    eps: Tensor,
    #[module(placement)]
    at: Placement,
}

impl GinConv {
    fn bias(&self) -> Result<&Tensor> {
        self.lin
            .bias()
            .ok_or_else(|| WorkbookError::Unsupported("GINConv without a bias".into()))
    }
}

impl GraphLayer for GinConv {
    fn layer_type(&self) -> &'static str {
        "GINConv"
    }

    fn forward_layer(
        &self,
        input: &LayerInput<'_>,
        _: Option<&mut Dropout>,
    ) -> Result<LayerOutput> {
        let x = input.x;
        check_features(x, input.edge_index, self.config.in_channels, "GINConv")?;
        if input.edge_weight.is_some() {
            return Err(WorkbookError::InvalidGraph(
                "GINConv takes no edge weights; remove edge_weight from the graph".into(),
            ));
        }
        // Every intermediate is made from x (never on a fixed device).
        let h = x.matmul(&self.lin.weight().t()?)?;
        let sums = aggregate_sum(&h, input.edge_index, None)?;
        let ones = Tensor::ones((x.dim(0)?, 1), h.dtype(), h.device())?;
        let counts = aggregate_sum(&ones, input.edge_index, None)?.maximum(1.0)?;
        let neighbours = sums.broadcast_div(&counts)?;
        let own = h.broadcast_mul(&(&self.eps + 1.0)?)?;
        let out = (own + neighbours)?.broadcast_add(self.bias()?)?;
        Ok(LayerOutput::new(out))
    }

    fn export_onnx(
        &self,
        b: &mut Builder,
        s: &Sizes,
        x: &str,
        prefix: &str,
    ) -> Result<OnnxLayerOut> {
        if s.edge_weight.is_some() {
            return Err(WorkbookError::Unsupported(
                "ONNX export with an edge_weight input: GINConv takes no edge weights".into(),
            ));
        }
        let w = b.param(&format!("{prefix}lin.weight"), self.lin.weight())?;
        let h = b.op("Gemm", &[x, &w], vec![attr_int("transB", 1)], "gin_lin");
        let neighbours = b.mean_over_in_edges(&h, self.config.out_channels, s, "gin");
        let one = b.const_f32(&[1.0], &[]);
        let eps = b.param(&format!("{prefix}eps"), &self.eps)?;
        let scale = b.op("Add", &[&eps, &one], vec![], "gin_scale");
        let own = b.op("Mul", &[&h, &scale], vec![], "gin_own");
        let sum = b.op("Add", &[&own, &neighbours], vec![], "gin_sum");
        let bias = b.param(&format!("{prefix}lin.bias"), self.bias()?)?;
        let out = b.op("Add", &[&sum, &bias], vec![], "gin_out");
        Ok(OnnxLayerOut {
            out,
            attention: None,
        })
    }
}
