//! `GatV2Conv`: dynamic graph attention (Brody, Alon & Yahav, 2022), as PyG's `GATv2Conv`.
//!
//! For every edge `j → i` and head `h`:
//! `e_ji = aᵀ LeakyReLU(W_r x_i + W_l x_j)`, `α_ji = softmax_j(e_ji)` over the edges into `i`
//! (stabilised with `i`'s own maximum, [`crate::ops::segment_softmax()`]), and
//! `x'_i = Σ_j α_ji W_l x_j`. Heads are concatenated or averaged, then a bias is added.
//!
//! Unlike PyG before 2.5 (issue 8741: attention kept in `self._alpha` during `forward`, racy
//! under concurrent inference), the layer keeps nothing between calls: [`GatV2Conv::forward`]
//! takes `&self` and *returns* the attention weights together with the edge index they belong
//! to (after self-loop handling), in one [`GatV2Output`].
//!
//! PyG names: `lin_l.weight` `[H·C, in]`, `lin_l.bias`, `lin_r.weight`, `lin_r.bias`,
//! `att` `[1, H, C]`, `bias` (`[H·C]` when concatenating, `[C]` when averaging). With
//! `share_weights`, `lin_r` is `lin_l` (PyG still lists both names in its `state_dict`).
//!
//! ```
//! use workbook::candle_core::{DType, Device, Tensor};
//! use workbook::candle_nn::{VarBuilder, VarMap};
//! use workbook::{EdgeIndex, GatV2Config, GatV2Conv};
//! let dev = Device::Cpu;
//! let varmap = VarMap::new();
//! let conv = GatV2Conv::new(GatV2Config::new(4, 3).heads(2), VarBuilder::from_varmap(&varmap, DType::F32, &dev)).unwrap();
//! let x = Tensor::ones((3, 4), DType::F32, &dev).unwrap();
//! let ei = EdgeIndex::new(&[0, 1, 2], &[1, 2, 0], 3, &dev).unwrap();
//! let out = conv.forward(&x, &ei).unwrap();
//! assert_eq!(out.out.dims(), &[3, 6]);                     // 2 heads × 3 channels, concatenated
//! assert_eq!(out.attention.edge_index.num_edges(), 3 + 3); // + one self-loop per node
//! assert_eq!(out.attention.weights.dims(), &[6, 2]);       // one weight per edge and head
//! ```

use super::graph_layer::{check_features, GraphLayer, LayerInput, LayerOutput};
use super::init::glorot;
use super::spec::LayerSpec;
use crate::edge_index::EdgeIndex;
use crate::error::{Result, WorkbookError};
use crate::onnx_graph::{attr_float, attr_int, Builder, GatOut, OnnxLayerOut, Sizes};
use crate::ops::dropout::Dropout;
use crate::ops::segment_softmax;
use crate::placement::Placement;
use crate::Module;
use candle_core::{DType, Device, Tensor, D};
use candle_nn::{Linear, VarBuilder};
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};

/// `GATv2Conv`'s constructor arguments, with PyG's names and defaults.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GatV2Config {
    pub in_channels: usize,
    /// Channels per head (`C`).
    pub out_channels: usize,
    #[serde(default = "one")]
    pub heads: usize,
    /// Concatenate heads (`[N, H·C]`); otherwise average them (`[N, C]`).
    #[serde(default = "yes")]
    pub concat: bool,
    #[serde(default = "slope")]
    pub negative_slope: f64,
    /// Dropout on the attention weights, in training only.
    #[serde(default)]
    pub dropout: f64,
    /// Remove existing self-loops, then add one per node.
    #[serde(default = "yes")]
    pub add_self_loops: bool,
    /// Use one linear map for sources and targets (`lin_r = lin_l`).
    #[serde(default)]
    pub share_weights: bool,
    #[serde(default = "yes")]
    pub bias: bool,
}

fn yes() -> bool {
    true
}
fn one() -> usize {
    1
}
fn slope() -> f64 {
    0.2
}

impl GatV2Config {
    /// PyG's defaults: one head, concatenated, slope 0.2, no dropout, self-loops, bias.
    pub fn new(in_channels: usize, out_channels: usize) -> Self {
        Self {
            in_channels,
            out_channels,
            heads: 1,
            concat: true,
            negative_slope: 0.2,
            dropout: 0.0,
            add_self_loops: true,
            share_weights: false,
            bias: true,
        }
    }

    /// Sets the number of heads.
    pub fn heads(mut self, heads: usize) -> Self {
        self.heads = heads;
        self
    }

    /// Width of the layer's output.
    pub fn output_width(&self) -> usize {
        if self.concat {
            self.heads * self.out_channels
        } else {
            self.out_channels
        }
    }

    /// Parameter names (without prefix) and shapes, in PyG's `state_dict` order.
    pub fn parameter_shapes(&self) -> Vec<(String, Vec<usize>)> {
        let hc = self.heads * self.out_channels;
        let mut p = vec![("lin_l.weight".to_string(), vec![hc, self.in_channels])];
        if self.bias {
            p.push(("lin_l.bias".to_string(), vec![hc]));
        }
        p.push(("lin_r.weight".to_string(), vec![hc, self.in_channels]));
        if self.bias {
            p.push(("lin_r.bias".to_string(), vec![hc]));
        }
        p.push(("att".to_string(), vec![1, self.heads, self.out_channels]));
        if self.bias {
            p.push(("bias".to_string(), vec![self.output_width()]));
        }
        p
    }

    /// Checks values PyG would accept but that make no sense.
    pub fn validate(&self) -> Result<()> {
        if self.heads == 0 || self.out_channels == 0 || self.in_channels == 0 {
            return Err(WorkbookError::InvalidConfig(
                "GATv2Conv: in_channels, out_channels and heads must be at least 1".into(),
            ));
        }
        if !(0.0..1.0).contains(&self.dropout) {
            return Err(WorkbookError::InvalidConfig(format!(
                "GATv2Conv: dropout must be in [0, 1), got {}",
                self.dropout
            )));
        }
        Ok(())
    }

    /// PyG's initial values: Glorot for the linear maps and `att`, zero biases. With
    /// `share_weights`, `lin_r` gets the same values as `lin_l`.
    pub fn init_parameters(
        &self,
        rng: &mut ChaCha8Rng,
        device: &Device,
    ) -> Result<Vec<(String, Tensor)>> {
        let mut out: Vec<(String, Tensor)> = Vec::new();
        for (name, shape) in self.parameter_shapes() {
            let t = if name.ends_with("bias") {
                Tensor::zeros(shape.as_slice(), DType::F32, device)?
            } else if self.share_weights && name == "lin_r.weight" {
                out.iter()
                    .find(|(n, _)| n == "lin_l.weight")
                    .unwrap()
                    .1
                    .clone()
            } else {
                glorot(&shape, rng, device)?
            };
            out.push((name, t));
        }
        Ok(out)
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
        rng: &mut ChaCha8Rng,
        device: &Device,
    ) -> Result<Vec<(String, Tensor)>> {
        GatV2Config::init_parameters(self, rng, device)
    }
    fn validate(&self) -> Result<()> {
        GatV2Config::validate(self)
    }
    fn has_attention(&self) -> bool {
        true
    }
    fn build(&self, vb: VarBuilder, at: &Placement) -> Result<Box<dyn GraphLayer>> {
        Ok(Box::new(GatV2Conv::build(self.clone(), vb, at)?))
    }
}

pub use super::graph_layer::Attention;

/// What a forward pass returns: the node outputs and the attention that produced them.
#[derive(Clone, Debug)]
pub struct GatV2Output {
    pub out: Tensor,
    pub attention: Attention,
}

/// `lin_l` / `lin_r`: candle-nn's `Linear` under PyG's names (`{name}.weight`, `{name}.bias`).
fn linear(vb: &VarBuilder, name: &str, out: usize, inp: usize, bias: bool) -> Result<Linear> {
    let vb = vb.pp(name);
    let weight = vb.get((out, inp), "weight")?;
    let bias = if bias {
        Some(vb.get_with_hints(out, "bias", candle_nn::Init::Const(0.))?)
    } else {
        None
    };
    Ok(Linear::new(weight, bias))
}

/// `x · Wᵀ + b` for `lin_l` / `lin_r`, over x's non-zeros when it is sparse (bag-of-words
/// features), as one op with a lean backward pass otherwise ([`crate::ops::linear`]);
/// candle-nn's `Linear` keeps the parameters, this computes the product.
fn project(lin: &Linear, x: &Tensor) -> Result<Tensor> {
    Ok(crate::ops::linear::linear(x, lin.weight(), lin.bias())?)
}

/// PyG's `GATv2Conv` (without edge features or residual connections).
/// Its tensors are declared once, by `#[derive(Module)]`.
#[derive(Clone, Debug, Module)]
pub struct GatV2Conv {
    #[module(skip)]
    config: GatV2Config,
    lin_l: Linear,
    /// `None` when `share_weights`: targets use `lin_l`, whose tensors PyG's `state_dict` lists
    /// under `lin_r.*` too.
    #[module(or = "lin_l")]
    lin_r: Option<Linear>,
    att: Tensor,
    bias: Option<Tensor>,
    #[module(placement)]
    at: Placement,
}

impl GatV2Conv {
    /// Builds the layer from `vb` (PyG names, see the module docs).
    pub fn new(config: GatV2Config, vb: VarBuilder) -> Result<Self> {
        config.validate()?;
        let at = Placement::of(vb.device());
        Self::build(config, vb, &at)
    }

    /// A freshly initialised layer (PyG's initialisation, seeded, drawn on the host) on `at`.
    pub fn init(config: GatV2Config, seed: u64, at: &Placement) -> Result<Self> {
        let layer = config.init(seed, at)?;
        Ok(layer
            .as_any()
            .downcast_ref::<Self>()
            .expect("GatV2Config builds a GatV2Conv")
            .clone())
    }

    /// [`GatV2Conv::new`] of a validated config, labelled `at` (whose device is `vb`'s).
    fn build(config: GatV2Config, vb: VarBuilder, at: &Placement) -> Result<Self> {
        let hc = config.heads * config.out_channels;
        let lin_l = linear(&vb, "lin_l", hc, config.in_channels, config.bias)?;
        let lin_r = if config.share_weights {
            None
        } else {
            Some(linear(&vb, "lin_r", hc, config.in_channels, config.bias)?)
        };
        let att = vb.get((1, config.heads, config.out_channels), "att")?;
        let bias = if config.bias {
            Some(vb.get_with_hints(config.output_width(), "bias", candle_nn::Init::Const(0.))?)
        } else {
            None
        };
        Ok(Self {
            config,
            lin_l,
            lin_r,
            att,
            bias,
            at: at.clone(),
        })
    }

    /// The layer's configuration.
    pub fn config(&self) -> &GatV2Config {
        &self.config
    }

    /// Where the parameters live.
    pub fn placement(&self) -> &Placement {
        &self.at
    }

    /// A copy on `to` with every parameter as a fresh trainable variable (like `tensor.to`,
    /// not like PyTorch's in-place `module.to`); [`Module::to_device`]. GATv2 caches nothing.
    pub fn to_device(&self, to: impl Into<Placement>) -> Result<Self> {
        Module::to_device(self, to)
    }

    /// Every parameter tensor with its PyG name (without prefix); [`Module::named_parameters`].
    pub fn named_parameters(&self) -> Vec<(String, Tensor)> {
        Module::named_parameters(self)
    }

    /// Evaluation-mode forward pass (no attention dropout).
    pub fn forward(&self, x: &Tensor, edge_index: &EdgeIndex) -> Result<GatV2Output> {
        self.forward_t(x, edge_index, None)
    }

    /// Forward pass; with `dropout` given (training), attention weights are dropped with the
    /// layer's `dropout` probability before aggregation. The returned attention is the
    /// softmax before dropout, as in PyG.
    pub fn forward_t(
        &self,
        x: &Tensor,
        edge_index: &EdgeIndex,
        dropout: Option<&mut Dropout>,
    ) -> Result<GatV2Output> {
        check_features(x, edge_index, self.config.in_channels, "GATv2Conv")?;
        Module::check_forward(self, "GATv2Conv parameters", x, edge_index, None)?;
        let (h, c) = (self.config.heads, self.config.out_channels);
        let n = edge_index.num_nodes();
        // [N, H·C], heads side by side: the fused kernels take that shape on the CPU, so no
        // reshape node (whose backward pass copies the gradient) sits between them.
        let x_l = project(&self.lin_l, x)?;
        let x_r = match &self.lin_r {
            Some(lin_r) => project(lin_r, x)?,
            None => x_l.clone(),
        };
        let edges = if self.config.add_self_loops {
            edge_index.with_self_loops()?.edge_index.clone()
        } else {
            edge_index.clone()
        };
        // The fused CSR kernels (crate::ops) compute the same scores, softmax and sums without
        // forming [E, H, C] tensors; candle's ops remain for dtypes and devices they do not cover.
        let csr = if crate::ops::kernels_support(x.dtype(), x.device()) {
            Some(edges.csr()?.clone())
        } else {
            None
        };
        let (x_l, x_r) = match &csr {
            Some(_) if x.device().is_cpu() => (x_l, x_r),
            _ => (x_l.reshape((n, h, c))?, x_r.reshape((n, h, c))?),
        };
        let slope = self.config.negative_slope;
        let (alpha, x_j) = match &csr {
            Some(csr) => {
                let scores = crate::ops::gat_scores(&x_l, &x_r, &self.att, csr, slope)?;
                (crate::ops::csr_softmax(&scores, csr)?, None)
            }
            None => {
                let x_j = x_l.index_select(edges.sources(), 0)?; // [E, H, C]
                let x_i = x_r.index_select(edges.targets(), 0)?;
                let s = candle_nn::ops::leaky_relu(&(x_i + &x_j)?, slope)?;
                let scores = s.broadcast_mul(&self.att)?.sum(D::Minus1)?; // [E, H]
                (segment_softmax(&scores, edges.targets(), n)?, Some(x_j))
            }
        };
        let used = match dropout {
            Some(d) if self.config.dropout > 0.0 => d.apply(&alpha, self.config.dropout)?,
            _ => alpha.clone(),
        };
        // [N, H·C] from the CPU kernel, [N, H, C] otherwise
        let out = match (&csr, x_j) {
            (Some(csr), _) => crate::ops::csr_spmm(&x_l, &used, csr)?,
            (None, x_j) => {
                let x_j = match x_j {
                    Some(x_j) => x_j,
                    None => x_l.index_select(edges.sources(), 0)?,
                };
                let messages = x_j.broadcast_mul(&used.unsqueeze(D::Minus1)?)?;
                Tensor::zeros((n, h, c), x.dtype(), x.device())?.index_add(
                    edges.targets(),
                    &messages,
                    0,
                )?
            }
        };
        let out = if self.config.concat || h == 1 {
            // Concatenated heads, or one head, whose mean is itself (x / 1 is exact). Already
            // [N, H·C] from the CPU kernel: no reshape node, whose backward pass copies.
            let width = if self.config.concat { h * c } else { c };
            if out.dims() == [n, width] {
                out
            } else {
                out.reshape((n, width))?
            }
        } else {
            out.reshape((n, h, c))?.mean(1)?
        };
        let out = match &self.bias {
            Some(b) => crate::ops::linear::add_bias(&out, b)?,
            None => out,
        };
        Ok(GatV2Output {
            out,
            attention: Attention {
                edge_index: edges,
                weights: alpha,
            },
        })
    }
}

impl GraphLayer for GatV2Conv {
    fn layer_type(&self) -> &'static str {
        "GATv2Conv"
    }

    fn forward_layer(
        &self,
        i: &LayerInput<'_>,
        dropout: Option<&mut Dropout>,
    ) -> Result<LayerOutput> {
        if i.edge_weight.is_some() {
            return Err(WorkbookError::InvalidGraph(
                "GATv2Conv does not use edge weights (PyG's GATv2Conv without edge_dim rejects them too); remove edge_weight from the graph".into(),
            ));
        }
        let o = self.forward_t(i.x, i.edge_index, dropout)?;
        Ok(LayerOutput {
            out: o.out,
            attention: Some(o.attention),
        })
    }

    fn shadow_check(&self) -> bool {
        false
    }

    /// The ONNX lowering (see [`crate::export::onnx`] for the operators and PyG's rules).
    fn export_onnx(
        &self,
        b: &mut Builder,
        s: &Sizes,
        h: &str,
        prefix: &str,
    ) -> Result<OnnxLayerOut> {
        if s.edge_weight.is_some() {
            return Err(WorkbookError::Unsupported(
                "ONNX export with an edge_weight input: GATv2Conv takes no edge weights (PyG's GATv2Conv without edge_dim rejects them); export without OnnxOptions::edge_weight".into(),
            ));
        }
        let o = gatv2_layer(b, s, h, &self.config, &self.named_parameters(), prefix)?;
        Ok(OnnxLayerOut {
            out: o.out.clone(),
            attention: Some(o),
        })
    }
}

fn gatv2_layer(
    b: &mut Builder,
    s: &Sizes,
    h_in: &str,
    c: &GatV2Config,
    params: &[(String, Tensor)],
    prefix: &str,
) -> Result<GatOut> {
    let get = |name: &str| params.iter().find(|(n, _)| n == name).map(|(_, t)| t);
    let (heads, ch) = (c.heads as i64, c.out_channels as i64);
    let hc_shape = b.const_i64(&[-1, heads, ch], &[3]);
    let linear = |b: &mut Builder, side: &str| -> Result<String> {
        let w = get(&format!("{side}.weight")).ok_or_else(|| {
            WorkbookError::InvalidConfig(format!("missing {prefix}{side}.weight"))
        })?;
        let wn = b.param(&format!("{prefix}{side}.weight"), w)?;
        let y = match get(&format!("{side}.bias")) {
            Some(bias) => {
                let bn = b.param(&format!("{prefix}{side}.bias"), bias)?;
                b.op("Gemm", &[h_in, &wn, &bn], vec![attr_int("transB", 1)], side)
            }
            None => b.op("Gemm", &[h_in, &wn], vec![attr_int("transB", 1)], side),
        };
        Ok(b.op("Reshape", &[&y, &hc_shape], vec![], side))
    };
    let x_l = linear(b, "lin_l")?;
    let x_r = linear(b, "lin_r")?;
    let e = if c.add_self_loops {
        s.with_self_loops(b)
    } else {
        s.edges()
    };
    let x_j = b.gather_rows(&x_l, &e.src); // [E, H, C]
    let x_i = b.gather_rows(&x_r, &e.dst);
    let sum = b.op("Add", &[&x_i, &x_j], vec![], "x_ij");
    let act = b.op(
        "LeakyRelu",
        &[&sum],
        vec![attr_float("alpha", c.negative_slope as f32)],
        "leaky",
    );
    let att =
        get("att").ok_or_else(|| WorkbookError::InvalidConfig(format!("missing {prefix}att")))?;
    let att = b.param(&format!("{prefix}att"), att)?;
    let weighted = b.op("Mul", &[&act, &att], vec![], "att_mul");
    let axes2 = b.const_i64(&[2], &[1]);
    let scores = b.op(
        "ReduceSum",
        &[&weighted, &axes2],
        vec![attr_int("keepdims", 0)],
        "scores",
    ); // [E, H]
    let heads_c = b.const_i64(&[heads], &[1]);
    let nh_shape = b.op(
        "Concat",
        &[&s.n_1d, &heads_c],
        vec![attr_int("axis", 0)],
        "nh_shape",
    );
    let lowest = b.filled(&nh_shape, f32::MIN, "max0");
    let max = b.scatter_rows(&lowest, &e.dst, &scores, 2, "max");
    let max_e = b.gather_rows(&max, &e.dst);
    let shifted = b.op("Sub", &[&scores, &max_e], vec![], "shifted");
    let ex = b.op("Exp", &[&shifted], vec![], "exp");
    let zeros = b.filled(&nh_shape, 0.0, "sum0");
    let sums = b.scatter_rows(&zeros, &e.dst, &ex, 2, "add");
    let sums_e = b.gather_rows(&sums, &e.dst);
    let eps = b.const_f32(&[1e-16], &[]);
    let denom = b.op("Add", &[&sums_e, &eps], vec![], "denom");
    let alpha = b.op("Div", &[&ex, &denom], vec![], "alpha");
    let alpha3 = b.unsqueeze(&alpha, 2);
    let messages = b.op("Mul", &[&x_j, &alpha3], vec![], "messages");
    let hc = b.const_i64(&[heads, ch], &[2]);
    let nhc_shape = b.op(
        "Concat",
        &[&s.n_1d, &hc],
        vec![attr_int("axis", 0)],
        "nhc_shape",
    );
    let zeros = b.filled(&nhc_shape, 0.0, "agg0");
    let out = b.scatter_rows(&zeros, &e.dst, &messages, 3, "add");
    let out = if c.concat {
        let flat = b.const_i64(&[-1, heads * ch], &[2]);
        b.op("Reshape", &[&out, &flat], vec![], "concat")
    } else {
        let axes1 = b.const_i64(&[1], &[1]);
        b.op(
            "ReduceMean",
            &[&out, &axes1],
            vec![attr_int("keepdims", 0)],
            "mean",
        )
    };
    let out = match get("bias") {
        Some(bias) => {
            let bn = b.param(&format!("{prefix}bias"), bias)?;
            b.op("Add", &[&out, &bn], vec![], "gat_out")
        }
        None => out,
    };
    Ok(GatOut {
        out,
        heads,
        alpha,
        src: e.src,
        dst: e.dst,
    })
}
