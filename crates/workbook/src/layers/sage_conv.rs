//! `SageConv`: GraphSAGE (Hamilton, Ying & Leskovec, 2017), as PyG's `SAGEConv` with mean
//! aggregation, written only through the public layer trait, exactly as a reader would write
//! their own layer: a struct that derives [`Module`](derive@workbook::Module) and implements
//! [`GraphLayer`]. Moving, dtype conversion, placement checks, `inspect`, checkpoints, the
//! optimiser and the model's forward pass then come for free.
//!
//! `x'_i = W_l · mean_{j → i} x_j + b + W_r · x_i`, then (with `normalize`) each row divided by
//! its L2 norm. A node without in-edges aggregates to 0, as in PyG. PyG's names: `lin_l.weight`
//! `[out, in]`, `lin_l.bias` (PyG keeps the bias inside `lin_l`), `lin_r.weight` (no bias).
//!
//! ```
//! use workbook::candle_core::{DType, Tensor};
//! use workbook::layers::sage_conv::{SageConfig, SageConv};
//! use workbook::{EdgeIndex, GraphLayer, LayerInput, Module, Placement};
//! let sim = Placement::sim(1);
//! let conv = SageConv::init(SageConfig::new(4, 2), 0, &Placement::cpu()).unwrap().to_device(&sim).unwrap();
//! let x = Tensor::ones((3, 4), DType::F32, sim.device()).unwrap();
//! let ei = EdgeIndex::new(&[0, 1], &[1, 2], 3, &sim).unwrap();
//! let out = conv.apply(&LayerInput { x: &x, edge_index: &ei, edge_weight: None }, None).unwrap();
//! assert_eq!(out.out.dims(), &[3, 2]);
//! let names: Vec<_> = conv.named_parameters().into_iter().map(|(n, _)| n).collect();
//! assert_eq!(names, ["lin_l.weight", "lin_l.bias", "lin_r.weight"]);
//! ```

use candle_core::{DType, Device, Tensor};
use candle_nn::{Linear, Module as _, VarBuilder};
use rand::Rng;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};
use workbook::layers::{GraphLayer, LayerInput, LayerOutput, LayerSpec};
use workbook::onnx_graph::{attr_int, Builder, OnnxLayerOut, Sizes};
use workbook::ops::{aggregate_sum, Dropout};
use workbook::{EdgeIndex, Module, Placement, Result, WorkbookError};

/// `SAGEConv`'s constructor arguments, with PyG's names and defaults.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SageConfig {
    pub in_channels: usize,
    pub out_channels: usize,
    /// The neighbourhood aggregation; only `"mean"` (PyG's default) is implemented, any other
    /// is refused by name.
    #[serde(default = "mean")]
    pub aggr: String,
    /// Add `W_r · x_i`, the node's own features (`lin_r`).
    #[serde(default = "yes")]
    pub root_weight: bool,
    /// Divide each output row by its L2 norm.
    #[serde(default)]
    pub normalize: bool,
    /// Learn an additive bias (`lin_l.bias`).
    #[serde(default = "yes")]
    pub bias: bool,
}

fn yes() -> bool {
    true
}
fn mean() -> String {
    "mean".into()
}

impl SageConfig {
    /// PyG's defaults: mean aggregation, root weight, no normalisation, bias.
    pub fn new(in_channels: usize, out_channels: usize) -> Self {
        Self {
            in_channels,
            out_channels,
            aggr: mean(),
            root_weight: true,
            normalize: false,
            bias: true,
        }
    }
}

impl LayerSpec for SageConfig {
    fn layer_type(&self) -> &'static str {
        "SAGEConv"
    }
    fn in_channels(&self) -> usize {
        self.in_channels
    }
    fn out_channels(&self) -> usize {
        self.out_channels
    }
    fn parameter_shapes(&self) -> Vec<(String, Vec<usize>)> {
        let (i, o) = (self.in_channels, self.out_channels);
        let mut p = vec![("lin_l.weight".to_string(), vec![o, i])];
        if self.bias {
            p.push(("lin_l.bias".to_string(), vec![o]));
        }
        if self.root_weight {
            p.push(("lin_r.weight".to_string(), vec![o, i]));
        }
        p
    }
    /// PyG's `Linear` initialisation: weights and bias uniform in ±1/√in_channels.
    fn init_parameters(
        &self,
        rng: &mut ChaCha8Rng,
        device: &Device,
    ) -> Result<Vec<(String, Tensor)>> {
        let bound = 1.0 / (self.in_channels.max(1) as f32).sqrt();
        self.parameter_shapes()
            .into_iter()
            .map(|(name, shape)| {
                let len: usize = shape.iter().product();
                let data: Vec<f32> = (0..len).map(|_| rng.random_range(-bound..=bound)).collect();
                Ok((name, Tensor::from_vec(data, shape, device)?))
            })
            .collect()
    }
    fn validate(&self) -> Result<()> {
        if self.aggr != "mean" {
            return Err(WorkbookError::InvalidConfig(format!(
                "SAGEConv: aggr = \"{}\" is not supported; only \"mean\" (PyG's default) is implemented",
                self.aggr
            )));
        }
        Ok(())
    }
    fn build(&self, vb: VarBuilder, at: &Placement) -> Result<Box<dyn GraphLayer>> {
        Ok(Box::new(SageConv::build(self.clone(), vb, at)?))
    }
}

/// PyG's `SAGEConv` with mean aggregation.
#[derive(Clone, Debug, Module)]
pub struct SageConv {
    #[module(skip)]
    config: SageConfig,
    lin_l: Linear,
    lin_r: Option<Linear>,
    #[module(placement)]
    at: Placement,
}

impl SageConv {
    /// Builds the layer from `vb` (PyG names, see the module docs).
    pub fn new(config: SageConfig, vb: VarBuilder) -> Result<Self> {
        config.validate()?;
        let at = Placement::of(vb.device());
        Self::build(config, vb, &at)
    }

    /// [`SageConv::new`] of a validated config, on `at` (whose device is `vb`'s).
    fn build(config: SageConfig, vb: VarBuilder, at: &Placement) -> Result<Self> {
        let (i, o) = (config.in_channels, config.out_channels);
        let l = vb.pp("lin_l");
        let bias = if config.bias {
            Some(l.get(o, "bias")?)
        } else {
            None
        };
        let lin_l = Linear::new(l.get((o, i), "weight")?, bias);
        let lin_r = if config.root_weight {
            Some(Linear::new(vb.pp("lin_r").get((o, i), "weight")?, None))
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

    /// A freshly initialised layer (PyG's initialisation, seeded) on `at`.
    pub fn init(config: SageConfig, seed: u64, at: &Placement) -> Result<Self> {
        config.validate()?;
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let tensors = config
            .init_parameters(&mut rng, &Device::Cpu)?
            .into_iter()
            .collect();
        let vb = VarBuilder::from_tensors(tensors, DType::F32, &Device::Cpu);
        Self::build(config, vb, &Placement::cpu())?.to_device(at)
    }

    /// The layer's configuration.
    pub fn config(&self) -> &SageConfig {
        &self.config
    }
}

/// Mean of `x[j]` over the edges `j → i` into every node `i` (0 without in-edges). Every
/// intermediate is created where `x` lives (`x.device()`), never on a fixed device.
fn mean_aggregate(x: &Tensor, edge_index: &EdgeIndex) -> Result<Tensor> {
    // Sums over in-edges with the library's `aggregate_sum` (a CSR kernel where it runs), not a
    // hand-written `index_add`, which on a GPU would run one thread per feature column.
    let sums = aggregate_sum(x, edge_index, None)?;
    let ones = Tensor::ones((x.dim(0)?, 1), x.dtype(), x.device())?;
    let counts = aggregate_sum(&ones, edge_index, None)?.maximum(1.0)?;
    Ok(sums.broadcast_div(&counts)?)
}

impl GraphLayer for SageConv {
    fn layer_type(&self) -> &'static str {
        "SAGEConv"
    }

    fn forward_layer(
        &self,
        input: &LayerInput<'_>,
        _: Option<&mut Dropout>,
    ) -> Result<LayerOutput> {
        let x = input.x;
        let (n, f) = x.dims2()?;
        if f != self.config.in_channels || n != input.edge_index.num_nodes() {
            return Err(WorkbookError::InvalidGraph(format!(
                "SAGEConv: x is [{n}, {f}] but the layer expects [{}, {}] (in_channels, and one row per node of edge_index)",
                input.edge_index.num_nodes(),
                self.config.in_channels
            )));
        }
        if input.edge_weight.is_some() {
            return Err(WorkbookError::InvalidGraph(
                "SAGEConv does not use edge weights (PyG's SAGEConv takes none); remove edge_weight from the graph".into(),
            ));
        }
        let mut out = self.lin_l.forward(&mean_aggregate(x, input.edge_index)?)?;
        if let Some(lin_r) = &self.lin_r {
            out = (out + lin_r.forward(x)?)?;
        }
        if self.config.normalize {
            // PyG's F.normalize(out, p=2, dim=-1): divide by max(‖row‖₂, 1e-12).
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
        lower_onnx(b, s, h, prefix, &self.config, &self.named_parameters())
    }
}

/// `SAGEConv`'s ONNX lowering (the [`GraphLayer::export_onnx`] of [`SageConv`]), reading the
/// parameters by their PyG names from `params` (a layer's
/// [`named_parameters`](workbook::Module::named_parameters)): a SAGE layer of your own exports
/// through it too, and a parameter its `config` needs but `params` lacks (kept out of the
/// derive) is an error that names it.
pub fn lower_onnx(
    b: &mut Builder,
    s: &Sizes,
    h: &str,
    prefix: &str,
    config: &SageConfig,
    params: &[(String, Tensor)],
) -> Result<OnnxLayerOut> {
    if s.edge_weight.is_some() {
        return Err(WorkbookError::Unsupported(
            "ONNX export with an edge_weight input: SAGEConv takes no edge weights; export without OnnxOptions::edge_weight".into(),
        ));
    }
    let param = |name: &str| -> Result<&Tensor> {
        params
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, t)| t)
            .ok_or_else(|| {
                let declared: Vec<&str> = params.iter().map(|(n, _)| n.as_str()).collect();
                WorkbookError::Unsupported(format!(
                    "SAGEConv's ONNX export needs the parameter '{name}', but the layer declares only {declared:?}: declare it as a field #[derive(Module)] sees"
                ))
            })
    };
    let c = config;
    let mean = b.mean_over_in_edges(h, c.in_channels, s, "sage");
    let mut linear = |input: &str, name: &str, bias: bool| -> Result<String> {
        let w = b.param(
            &format!("{prefix}{name}.weight"),
            param(&format!("{name}.weight"))?,
        )?;
        let mut inputs = vec![input.to_string(), w];
        if bias {
            inputs.push(b.param(
                &format!("{prefix}{name}.bias"),
                param(&format!("{name}.bias"))?,
            )?);
        }
        let inputs: Vec<&str> = inputs.iter().map(String::as_str).collect();
        Ok(b.op("Gemm", &inputs, vec![attr_int("transB", 1)], name))
    };
    let mut out = linear(&mean, "lin_l", c.bias)?;
    if c.root_weight {
        let root = linear(h, "lin_r", false)?;
        out = b.op("Add", &[&out, &root], vec![], "sage_root");
    }
    if c.normalize {
        let axes = b.const_i64(&[1], &[1]);
        let norm = b.op(
            "ReduceL2",
            &[&out, &axes],
            vec![attr_int("keepdims", 1)],
            "sage_norm",
        );
        let eps = b.const_f32(&[1e-12], &[]);
        let norm = b.op("Max", &[&norm, &eps], vec![], "sage_norm_eps");
        out = b.op("Div", &[&out, &norm], vec![], "sage_normalized");
    }
    Ok(OnnxLayerOut {
        out,
        attention: None,
    })
}
