//! `GcnConv`: the graph convolution of Kipf & Welling (2017), as PyG's `GCNConv`.
//!
//! `X' = D̂^{-1/2} Â D̂^{-1/2} X Θ + b`, where `Â = A + I` (or `A + 2I` when `improved`, see
//! below) with self-loops added only for nodes that lack one (PyG's `add_remaining_self_loops`),
//! `D̂` its weighted in-degree, and an optional edge weight in place of each 1 in `A`. Messages
//! flow from `edge_index[0]` to `edge_index[1]`.
//!
//! **`improved` does nothing without edge weights, as in PyG.** PyG 2.8's `gcn_norm` calls
//! `add_remaining_self_loops(edge_index, None, fill_value=2.0)`, which drops the fill value when
//! there are no edge attributes, and then gives every edge, self-loops included, weight 1. So
//! `GCNConv(improved=True)` on an unweighted graph computes exactly `improved=False`; only with
//! `edge_weight` do the added self-loops weigh 2. This layer (and training, and the ONNX export)
//! reproduces that, because PyG's outputs are the reference. To get `A + 2I` on an unweighted
//! graph, pass edge weights of 1.0 ([`GcnConfig::improved_is_ignored`] tells the two cases apart).
//!
//! Parameters carry PyG's names, so a PyG `state_dict` loads unchanged: `lin.weight`
//! `[out, in]` and `bias` `[out]`.
//!
//! On the CPU without edge weights, the aggregation is [`crate::ops::gcn_spmm()`], which forms
//! each edge's weight from the `deg^-1/2` of its two ends instead of writing and reading the
//! `[E]` weights [`gcn_norm`] returns: the same values bit for bit, without a pass over the
//! edges per call.
//!
//! `cached` keeps the normalised edges after the first call, as PyG does for transductive
//! training. PyG then silently reuses them for any graph; this layer refuses a graph of another
//! size instead (see [`GcnConv::forward`]).
//!
//! ```
//! use workbook::candle_core::{DType, Device, Tensor};
//! use workbook::candle_nn::{VarBuilder, VarMap};
//! use workbook::{EdgeIndex, GcnConfig, GcnConv};
//! let dev = Device::Cpu;
//! let varmap = VarMap::new();
//! let vb = VarBuilder::from_varmap(&varmap, DType::F32, &dev);
//! let conv = GcnConv::new(GcnConfig::new(4, 2), vb).unwrap();
//! let x = Tensor::ones((3, 4), DType::F32, &dev).unwrap();
//! let ei = EdgeIndex::new(&[0, 1, 1, 2], &[1, 0, 2, 1], 3, &dev).unwrap();
//! let out = conv.forward(&x, &ei, None).unwrap();
//! assert_eq!(out.dims(), &[3, 2]);
//! ```

use super::graph_layer::{check_features, GraphLayer, LayerInput, LayerOutput};
use super::init::glorot;
use super::spec::LayerSpec;
use crate::edge_index::EdgeIndex;
use crate::error::{Result, WorkbookError};
use crate::module::{Kind, Named, TensorMap, Tensors};
use crate::onnx_graph::proto::{FLOAT, INT64};
use crate::onnx_graph::{attr_int, Builder, Edges, OnnxLayerOut, Sizes};
use crate::ops::dropout::Dropout;
use crate::placement::Placement;
use crate::Module;
use candle_core::{DType, Device, Tensor};
use candle_nn::VarBuilder;
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};
use std::sync::OnceLock;

/// `GCNConv`'s constructor arguments, with PyG's names and defaults.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct GcnConfig {
    pub in_channels: usize,
    pub out_channels: usize,
    /// Added self-loops weigh 2 instead of 1 (`Â = A + 2I`), **only when edge weights are
    /// given**: without them PyG (and this layer) ignore it; see the module docs.
    #[serde(default)]
    pub improved: bool,
    /// Reuse the normalised edges of the first call.
    #[serde(default)]
    pub cached: bool,
    /// Add self-loops (only where missing) before normalising.
    #[serde(default = "yes")]
    pub add_self_loops: bool,
    /// Apply the symmetric normalisation; without it, edge weights (or 1) are used as given.
    #[serde(default = "yes")]
    pub normalize: bool,
    /// Learn an additive bias.
    #[serde(default = "yes")]
    pub bias: bool,
}

fn yes() -> bool {
    true
}

impl GcnConfig {
    /// PyG's defaults for the given sizes.
    pub fn new(in_channels: usize, out_channels: usize) -> Self {
        Self {
            in_channels,
            out_channels,
            improved: false,
            cached: false,
            add_self_loops: true,
            normalize: true,
            bias: true,
        }
    }

    /// Whether `improved = true` is set but has no effect on a graph with (`true`) or without
    /// (`false`) edge weights, as in PyG: it only changes the weight of added self-loops, and PyG
    /// drops that weight when there are no edge weights (see the module docs). `predict` uses
    /// it to print a note.
    pub fn improved_is_ignored(&self, has_edge_weight: bool) -> bool {
        self.improved && self.normalize && self.add_self_loops && !has_edge_weight
    }

    /// Parameter names (without prefix) and shapes, in PyG's `state_dict` order.
    pub fn parameter_shapes(&self) -> Vec<(String, Vec<usize>)> {
        let mut p = vec![(
            "lin.weight".to_string(),
            vec![self.out_channels, self.in_channels],
        )];
        if self.bias {
            p.push(("bias".to_string(), vec![self.out_channels]));
        }
        p
    }

    /// PyG's initial values: Glorot weights, zero bias.
    pub fn init_parameters(
        &self,
        rng: &mut ChaCha8Rng,
        device: &Device,
    ) -> Result<Vec<(String, Tensor)>> {
        let mut out = Vec::new();
        for (name, shape) in self.parameter_shapes() {
            let t = if name == "bias" {
                Tensor::zeros(shape.as_slice(), DType::F32, device)?
            } else {
                glorot(&shape, rng, device)?
            };
            out.push((name, t));
        }
        Ok(out)
    }
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
        rng: &mut ChaCha8Rng,
        device: &Device,
    ) -> Result<Vec<(String, Tensor)>> {
        GcnConfig::init_parameters(self, rng, device)
    }
    fn build(&self, vb: VarBuilder, at: &Placement) -> Result<Box<dyn GraphLayer>> {
        Ok(Box::new(GcnConv::build(self.clone(), vb, at)?))
    }
}

/// Normalised edges: the edge index after self-loop handling and one weight per edge.
#[derive(Clone, Debug)]
pub struct NormalizedEdges {
    pub edge_index: EdgeIndex,
    pub weight: Option<Tensor>,
}

/// PyG's `GCNConv`. Its tensors are declared once, by `#[derive(Module)]`: `lin.weight`,
/// `bias` and the buffer `_cached_edge_index`, so moving, checking and saving are generic.
#[derive(Debug, Module)]
pub struct GcnConv {
    #[module(skip)]
    config: GcnConfig,
    #[module(name = "lin.weight")]
    weight: Tensor,
    bias: Option<Tensor>,
    #[module(placement)]
    at: Placement,
    /// PyG keeps `_cached_edge_index` in a plain attribute that `module.to` leaves behind;
    /// here it is a buffer, moved with the layer.
    #[module(buffer, name = "_cached_edge_index")]
    cache: OnceLock<NormalizedEdges>,
}

/// The cached normalisation as a buffer: `_cached_edge_index` (with the placement it remembers)
/// and its part `_cached_edge_index.weight`, moved with it.
impl Tensors for OnceLock<NormalizedEdges> {
    fn visit<'a>(&'a self, name: &str, kind: Kind, f: &mut dyn FnMut(Named<'a>)) {
        if let Some(c) = self.get() {
            let at = c.edge_index.placement();
            f(Named {
                name: name.to_string(),
                kind,
                tensor: c.edge_index.sources(),
                placement: Some(at),
            });
            // A part of the same buffer: it lives and moves with the edges.
            if let Some(w) = &c.weight {
                f(Named {
                    name: format!("{name}.weight"),
                    kind,
                    tensor: w,
                    placement: Some(at),
                });
            }
        }
    }

    fn map(&self, name: &str, kind: Kind, m: &mut dyn TensorMap) -> Result<Self> {
        let out = OnceLock::new();
        if let Some(c) = self.get() {
            if let Some(edge_index) = m.edge_index(name, &c.edge_index)? {
                let from = c.edge_index.placement();
                let weight = c
                    .weight
                    .as_ref()
                    .map(|w| m.tensor(name, kind, w, Some(from)))
                    .transpose()?;
                let _ = out.set(NormalizedEdges { edge_index, weight });
            }
        }
        Ok(out)
    }
}

impl Clone for GcnConv {
    fn clone(&self) -> Self {
        let cache = OnceLock::new();
        if let Some(c) = self.cache.get() {
            let _ = cache.set(c.clone());
        }
        Self {
            config: self.config.clone(),
            weight: self.weight.clone(),
            bias: self.bias.clone(),
            at: self.at.clone(),
            cache,
        }
    }
}

impl GcnConv {
    /// Builds the layer, taking `lin.weight` (and `bias`) from `vb`. With a `VarMap`-backed
    /// builder, missing parameters are created with candle's default initialiser; use
    /// [`GcnConfig::init_parameters`] for PyG's.
    pub fn new(config: GcnConfig, vb: VarBuilder) -> Result<Self> {
        let at = Placement::of(vb.device());
        Self::build(config, vb, &at)
    }

    /// A freshly initialised layer (PyG's initialisation, seeded, drawn on the host) on `at`.
    pub fn init(config: GcnConfig, seed: u64, at: &Placement) -> Result<Self> {
        let layer = config.init(seed, at)?;
        Ok(layer
            .as_any()
            .downcast_ref::<Self>()
            .expect("GcnConfig builds a GcnConv")
            .clone())
    }

    /// [`GcnConv::new`] labelled `at` (whose device is `vb`'s).
    fn build(config: GcnConfig, vb: VarBuilder, at: &Placement) -> Result<Self> {
        let weight = vb.get((config.out_channels, config.in_channels), "lin.weight")?;
        let bias = if config.bias {
            Some(vb.get_with_hints(config.out_channels, "bias", candle_nn::Init::Const(0.))?)
        } else {
            None
        };
        Ok(Self {
            config,
            weight,
            bias,
            at: at.clone(),
            cache: OnceLock::new(),
        })
    }

    /// The layer's configuration.
    pub fn config(&self) -> &GcnConfig {
        &self.config
    }

    /// `lin.weight`, `[out, in]`.
    pub fn weight(&self) -> &Tensor {
        &self.weight
    }

    /// `bias`, `[out]`, if the layer has one.
    pub fn bias(&self) -> Option<&Tensor> {
        self.bias.as_ref()
    }

    /// Every parameter tensor with its PyG name (without prefix); [`Module::named_parameters`].
    pub fn named_parameters(&self) -> Vec<(String, Tensor)> {
        Module::named_parameters(self)
    }

    /// The cached normalised edges, if `cached` is on and a forward pass has filled them.
    pub fn cached_edges(&self) -> Option<&NormalizedEdges> {
        self.cache.get()
    }

    /// Where the parameters live.
    pub fn placement(&self) -> &Placement {
        &self.at
    }

    /// Where the cached normalisation lives, if there is one (named as PyG's attribute).
    pub fn buffer_placements(&self) -> Vec<(String, &Placement)> {
        self.cache
            .get()
            .map(|c| ("_cached_edge_index".to_string(), c.edge_index.placement()))
            .into_iter()
            .collect()
    }

    /// A copy on `to`: every parameter (as a fresh trainable variable) **and** the cached
    /// normalisation ([`Module::to_device`]). PyTorch's `module.to` moves in place and, for
    /// PyG's `GCNConv`, leaves `_cached_edge_index` behind because it is not a registered
    /// buffer; this returns a new layer, like `tensor.to`, and moves the cache too.
    pub fn to_device(&self, to: impl Into<Placement>) -> Result<Self> {
        Module::to_device(self, to)
    }

    /// Forgets the cached normalisation (PyG: `conv._cached_edge_index = None`).
    pub fn clear_cache(&mut self) {
        self.cache = OnceLock::new();
    }

    /// Runs the layer on node features `x` (`[N, in]`), edges, and optional weights (`[E]`).
    pub fn forward(
        &self,
        x: &Tensor,
        edge_index: &EdgeIndex,
        edge_weight: Option<&Tensor>,
    ) -> Result<Tensor> {
        check_features(x, edge_index, self.config.in_channels, "GCNConv")?;
        if let Some(w) = edge_weight {
            edge_index.check_weight(w)?;
        }
        Module::check_forward(self, "GCNConv parameters", x, edge_index, edge_weight)?;
        // x · Wᵀ, over x's non-zeros when it is sparse (bag-of-words features).
        let h = crate::ops::sparse_features::linear(x, &self.weight)?;
        let out = match self.fused_graph(edge_index, edge_weight, h.dtype(), h.device())? {
            Some(graph) => crate::ops::gcn_spmm(&h, &graph)?,
            None => {
                let edges = self.edges(edge_index, edge_weight, x.dtype())?;
                crate::ops::aggregate_sum(&h, &edges.edge_index, edges.weight.as_ref())?
            }
        };
        Ok(match &self.bias {
            // candle's broadcast_add, with a cheaper bias gradient (ops::linear)
            Some(b) => crate::ops::linear::add_bias(&out, b)?,
            None => out,
        })
    }

    /// The graph (self-loops added as configured) for [`crate::ops::gcn_spmm()`], which forms
    /// each edge's weight from its ends instead of reading `gcn_norm`'s `[E]` weights: where it
    /// applies, a normalising layer without edge weights or a cache, on the CPU in a dtype its
    /// kernels take. The same values bit for bit as the path through `gcn_norm`.
    fn fused_graph(
        &self,
        edge_index: &EdgeIndex,
        edge_weight: Option<&Tensor>,
        dtype: DType,
        device: &Device,
    ) -> Result<Option<EdgeIndex>> {
        let applies = self.config.normalize
            && !self.config.cached
            && device.is_cpu()
            && unweighted_on_cpu(edge_index, edge_weight, dtype);
        if !applies {
            return Ok(None);
        }
        Ok(Some(with_loops(edge_index, &self.config)?))
    }

    fn edges(
        &self,
        edge_index: &EdgeIndex,
        edge_weight: Option<&Tensor>,
        dtype: DType,
    ) -> Result<NormalizedEdges> {
        if !self.config.normalize {
            return Ok(NormalizedEdges {
                edge_index: edge_index.clone(),
                weight: edge_weight.cloned(),
            });
        }
        if !self.config.cached {
            return gcn_norm(edge_index, edge_weight, &self.config, dtype);
        }
        if let Some(c) = self.cache.get() {
            if c.edge_index.num_nodes() != edge_index.num_nodes() {
                return Err(WorkbookError::InvalidGraph(format!(
                    "GCNConv(cached=true) normalised a graph of {} nodes on its first call and cannot reuse it for one of {} nodes; call clear_cache() or build the layer with cached=false",
                    c.edge_index.num_nodes(),
                    edge_index.num_nodes()
                )));
            }
            return Ok(c.clone());
        }
        let fresh = gcn_norm(edge_index, edge_weight, &self.config, dtype)?;
        Ok(self.cache.get_or_init(|| fresh).clone())
    }
}

/// Whether every edge weighs 1 and the graph is on the CPU in a dtype the fused kernels take:
/// where [`gcn_norm`] and the fused aggregation skip the tensor ops.
fn unweighted_on_cpu(edge_index: &EdgeIndex, edge_weight: Option<&Tensor>, dtype: DType) -> bool {
    let dev = edge_index.device();
    edge_weight.is_none() && dev.is_cpu() && crate::ops::kernels_support(dtype, dev)
}

/// The graph with its remaining self-loops added when `config` asks for them.
fn with_loops(edge_index: &EdgeIndex, config: &GcnConfig) -> Result<EdgeIndex> {
    Ok(if config.add_self_loops {
        edge_index.with_remaining_self_loops()?.edge_index.clone()
    } else {
        edge_index.clone()
    })
}

/// PyG's `gcn_norm`: add remaining self-loops, then weight each edge `j → i` by
/// `w_ji / sqrt(deg(j) deg(i))`, with degrees summed over targets and `1/sqrt(0)` taken as 0.
/// The added loops weigh 2 with `improved` only when `edge_weight` is given (PyG 2.8 drops the
/// fill value without edge weights; see the module docs).
pub fn gcn_norm(
    edge_index: &EdgeIndex,
    edge_weight: Option<&Tensor>,
    config: &GcnConfig,
    dtype: DType,
) -> Result<NormalizedEdges> {
    let dev = edge_index.device();
    let n = edge_index.num_nodes();
    if unweighted_on_cpu(edge_index, edge_weight, dtype) {
        // every edge weighs 1 (`improved` changes nothing without edge weights, see above): the
        // same values from the CSR's row lengths in one pass, without the [E] intermediates
        let edge_index = with_loops(edge_index, config)?;
        let norm = crate::ops::gcn_norm::unweighted_gcn_norm(&edge_index, dtype)?;
        return Ok(NormalizedEdges {
            edge_index,
            weight: Some(norm),
        });
    }
    let weight = match edge_weight {
        Some(w) => w.to_dtype(dtype)?,
        None => Tensor::ones(edge_index.num_edges(), dtype, dev)?,
    };
    let (edge_index, weight) = if config.add_self_loops {
        // PyG: add_remaining_self_loops(edge_index, None, 2.0) ignores the fill value when there
        // is no edge attribute, and gcn_norm then uses 1 for every edge.
        let fill = if config.improved && edge_weight.is_some() {
            2.0
        } else {
            1.0
        };
        let loops = edge_index.with_remaining_self_loops()?;
        let with_fill = Tensor::cat(&[&weight, &Tensor::full(fill, 1, dev)?.to_dtype(dtype)?], 0)?;
        (
            loops.edge_index.clone(),
            with_fill.index_select(&loops.gather, 0)?,
        )
    } else {
        (edge_index.clone(), weight)
    };
    // The degree is a weighted sum over in-edges: `aggregate_sum` of ones (see its docs for why
    // not candle's `index_add` on a GPU).
    let deg = crate::ops::aggregate_sum(
        &Tensor::ones((n, 1), dtype, dev)?,
        &edge_index,
        Some(&weight),
    )?
    .squeeze(1)?;
    // deg^-1/2 with 0 where deg is 0, without ever forming inf (its gradient would be NaN).
    let positive = deg.gt(0.0)?.to_dtype(dtype)?;
    let deg_inv_sqrt = (deg.maximum(f32::MIN_POSITIVE as f64)?.powf(-0.5)? * positive)?;
    let norm = (deg_inv_sqrt.index_select(edge_index.sources(), 0)? * weight)?
        .mul(&deg_inv_sqrt.index_select(edge_index.targets(), 0)?)?;
    Ok(NormalizedEdges {
        edge_index,
        weight: Some(norm),
    })
}

impl GraphLayer for GcnConv {
    fn layer_type(&self) -> &'static str {
        "GCNConv"
    }

    fn forward_layer(&self, i: &LayerInput<'_>, _: Option<&mut Dropout>) -> Result<LayerOutput> {
        Ok(LayerOutput::new(self.forward(
            i.x,
            i.edge_index,
            i.edge_weight,
        )?))
    }

    fn clear_cache(&mut self) {
        GcnConv::clear_cache(self)
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
        let out = gcn_layer(
            b,
            s,
            h,
            &self.config,
            &self.weight,
            self.bias.as_ref(),
            prefix,
            s.edge_weight.as_deref(),
        )?;
        Ok(OnnxLayerOut {
            out,
            attention: None,
        })
    }
}

#[allow(clippy::too_many_arguments)]
fn gcn_layer(
    b: &mut Builder,
    s: &Sizes,
    h_in: &str,
    c: &GcnConfig,
    weight: &Tensor,
    bias: Option<&Tensor>,
    prefix: &str,
    edge_weight: Option<&str>,
) -> Result<String> {
    let w = b.param(&format!("{prefix}lin.weight"), weight)?;
    let h = b.op("Gemm", &[h_in, &w], vec![attr_int("transB", 1)], "gcn_lin");
    let axis0 = vec![attr_int("axis", 0)];
    let ones_per_edge = |b: &mut Builder, edges: &str, hint: &str| {
        let shape = b.op("Shape", &[edges], vec![], "edge_shape");
        b.filled(&shape, 1.0, hint)
    };
    if !c.normalize {
        // PyG: no self-loops, no normalisation; the edge weights (or 1) as given.
        let e = s.edges();
        let w = match edge_weight {
            Some(w) => w.to_string(),
            None => ones_per_edge(b, &e.src, "edge_w"),
        };
        return gcn_aggregate(b, s, &h, &e, &w, c, bias, prefix);
    }
    let (edges, weight) = if c.add_self_loops {
        // add_remaining_self_loops: edges that are not loops keep their weight; every node gets
        // one loop, weighing what the input's (last) loop at that node weighed, else the fill.
        let e = s.with_self_loops(b);
        let loop_w = match edge_weight {
            Some(w) => {
                let kept = b.op("Compress", &[w, &s.not_loop], axis0.clone(), "kept_w");
                let fill = if c.improved { 2.0 } else { 1.0 };
                let loop_w = last_loop_weight(b, s, w, fill);
                b.op("Concat", &[&kept, &loop_w], axis0, "edge_w")
            }
            // PyG 2.8: without edge weights add_remaining_self_loops drops the fill value and
            // gcn_norm weighs every edge 1, so `improved` has no effect here.
            None => ones_per_edge(b, &e.src, "edge_w"),
        };
        (e, loop_w)
    } else {
        let e = s.edges();
        let w = match edge_weight {
            Some(w) => w.to_string(),
            None => ones_per_edge(b, &e.src, "edge_w"),
        };
        (e, w)
    };
    let zeros = b.filled(&s.n_1d, 0.0, "deg0");
    let deg = b.scatter_rows(&zeros, &edges.dst, &weight, 1, "add");
    let zero = b.const_f32(&[0.0], &[]);
    let tiny = b.const_f32(&[f32::MIN_POSITIVE], &[]);
    let half = b.const_f32(&[-0.5], &[]);
    let positive = b.op("Greater", &[&deg, &zero], vec![], "deg_pos");
    let clamped = b.op("Max", &[&deg, &tiny], vec![], "deg_clamped");
    let pow = b.op("Pow", &[&clamped, &half], vec![], "deg_pow");
    let dis = b.op("Where", &[&positive, &pow, &zero], vec![], "deg_inv_sqrt");
    let dis_src = b.gather_rows(&dis, &edges.src);
    let dis_dst = b.gather_rows(&dis, &edges.dst);
    let norm = b.op("Mul", &[&dis_src, &weight], vec![], "norm");
    let norm = b.op("Mul", &[&norm, &dis_dst], vec![], "norm");
    gcn_aggregate(b, s, &h, &edges, &norm, c, bias, prefix)
}

/// Per node, the weight of the input's last self-loop at that node (PyG keeps it), or `fill`
/// where the node had none. The position of each node's last loop is found with a max-scatter
/// of positions, so repeated loops at one node resolve as in PyG (the last one wins) and not by
/// ScatterElements' unspecified order for duplicates.
fn last_loop_weight(b: &mut Builder, s: &Sizes, w: &str, fill: f32) -> String {
    let axis0 = vec![attr_int("axis", 0)];
    let is_loop = b.op("Not", &[&s.not_loop], vec![], "is_loop");
    let loop_nodes = b.op("Compress", &[&s.dst, &is_loop], axis0.clone(), "loop_nodes");
    let loop_ws = b.op("Compress", &[w, &is_loop], axis0.clone(), "loop_ws");
    let fill_t = b.const_f32(&[fill], &[1]);
    // loop_ws followed by the fill value, at index count
    let candidates = b.op("Concat", &[&loop_ws, &fill_t], axis0, "loop_candidates");
    let count = b.op("Shape", &[&loop_nodes], vec![], "loop_count");
    let count_f = b.op(
        "Cast",
        &[&count],
        vec![attr_int("to", FLOAT as i64)],
        "loop_count_f",
    );
    let axes0 = b.const_i64(&[0], &[1]);
    let count_scalar = b.op("Squeeze", &[&count_f, &axes0], vec![], "loop_count_scalar");
    let zero = b.const_f32(&[0.0], &[]);
    let one = b.const_f32(&[1.0], &[]);
    let positions = b.op("Range", &[&zero, &count_scalar, &one], vec![], "loop_pos");
    let none = b.filled(&s.n_1d, -1.0, "no_loop");
    let last = b.scatter_rows(&none, &loop_nodes, &positions, 1, "max");
    let minus_half = b.const_f32(&[-0.5], &[]);
    let has = b.op("Greater", &[&last, &minus_half], vec![], "has_loop");
    let index_f = b.op("Where", &[&has, &last, &count_f], vec![], "loop_index_f");
    let index = b.op(
        "Cast",
        &[&index_f],
        vec![attr_int("to", INT64 as i64)],
        "loop_index",
    );
    b.gather_rows(&candidates, &index)
}

/// `out = scatter_add(w * h[src], dst) + bias`.
#[allow(clippy::too_many_arguments)]
fn gcn_aggregate(
    b: &mut Builder,
    s: &Sizes,
    h: &str,
    edges: &Edges,
    w: &str,
    c: &GcnConfig,
    bias: Option<&Tensor>,
    prefix: &str,
) -> Result<String> {
    let norm_col = b.unsqueeze(w, 1);
    let h_src = b.gather_rows(h, &edges.src);
    let messages = b.op("Mul", &[&h_src, &norm_col], vec![], "messages");
    let c_out = b.const_i64(&[c.out_channels as i64], &[1]);
    let out_shape = b.op(
        "Concat",
        &[&s.n_1d, &c_out],
        vec![attr_int("axis", 0)],
        "out_shape",
    );
    let zeros = b.filled(&out_shape, 0.0, "agg0");
    let out = b.scatter_rows(&zeros, &edges.dst, &messages, 2, "add");
    Ok(match bias {
        Some(bias) => {
            let bname = b.param(&format!("{prefix}bias"), bias)?;
            b.op("Add", &[&out, &bname], vec![], "gcn_out")
        }
        None => out,
    })
}
