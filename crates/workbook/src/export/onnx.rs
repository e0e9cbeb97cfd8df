//! ONNX export of GCN and GATv2 models with a dynamic number of nodes and edges.
//!
//! The file takes `x: float32 [num_nodes, F]` and `edge_index: int64 [2, num_edges]` (both
//! sizes symbolic, so one file serves any graph) and returns `logits: float32 [num_nodes, C]`;
//! with [`OnnxOptions::attention`] it also returns, for every GATv2 layer `convK`,
//! `attention_convK: [num_edges', heads]` over `attention_edge_index: int64 [2, num_edges']`
//! (the edges after self-loop handling, in the order the Rust layer reports them).
//!
//! **Opset 18, standard operators only** (IR version 8): `Shape`, `Gather`, `Squeeze`,
//! `Unsqueeze`, `Range`, `Equal`, `Not`, `Compress`, `Concat`, `ConstantOfShape`, `Cast`, `Gemm`,
//! `Reshape`, `Expand`, `Mul`, `Add`, `Sub`, `Div`, `Exp`, `Pow`, `Max`, `Greater`, `Where`, `LeakyRelu`,
//! `ReduceSum`, `ReduceMean`, `Relu`, `Elu`, `Identity` and `ScatterElements` (axis 0) with
//! `reduction="add"` (opset 16) and `reduction="max"` (opset 18). The graph reproduces PyG exactly:
//!
//! * self-loops: existing loops are dropped with `Compress` on the mask `src != dst`, and one
//!   loop per node (`Range(0, num_nodes)`) is appended — PyG's `remove_self_loops` +
//!   `add_self_loops` (GATv2) and, for GCN, `add_remaining_self_loops` (a node that had a loop
//!   keeps that loop's weight, others get the fill value: 2 when `improved` **and** the file
//!   takes edge weights, else 1, because PyG ignores `improved` without edge weights);
//! * GCN: `deg = scatter_add(w, dst)`, `norm = deg^-1/2[src] * w * deg^-1/2[dst]` (0 where
//!   `deg = 0`), `out = scatter_add(norm * (x W^T)[src], dst) + bias`; with
//!   `normalize=false`, `out = scatter_add(w * (x W^T)[src], dst) + bias` on the edges as given.
//!   `w` is 1 per edge, or the optional input `edge_weight: float32 [num_edges]`
//!   ([`OnnxOptions::edge_weight`]);
//! * GATv2: `e = att · leaky_relu(x_l[src] + x_r[dst])`, the per-destination softmax as in
//!   PyG's `utils.softmax` (subtract the per-target max, a *segment max* computed with
//!   `ScatterElements(reduction="max")` into a tensor filled with the lowest float, then
//!   `exp / (scatter_add + 1e-16)`), aggregation `scatter_add(alpha * x_l[src], dst)`, concat or
//!   mean over heads, `+ bias`.
//!
//! Parameters are initializers under their PyG names and shapes (`conv1.lin.weight`, ...).
//!
//! ```
//! use workbook::{Model, ModelConfig, Placement};
//! use workbook::export::onnx::{to_onnx, OnnxOptions, OPSET};
//! let (model, _) = Model::init(ModelConfig::gatv2(3, 4, 2, 2), 0, &Placement::cpu()).unwrap();
//! let proto = to_onnx(&model, &OnnxOptions::default()).unwrap();
//! assert_eq!(proto.opset_import[0].version, OPSET);
//! let graph = proto.graph.unwrap();
//! assert_eq!(graph.input[0].name, "x");
//! assert!(graph.initializer.iter().any(|t| t.name == "conv1.att"));
//! ```

use super::onnx_proto::*;
use crate::atomic_write;
use crate::error::{Result, WorkbookError};
use crate::layers::{GatV2Config, GatV2Conv, GcnConfig, GcnConv};
use crate::model::{Activation, Model};
use candle_core::{DType, Device, Tensor};
use prost::Message;
use std::path::Path;

/// The ONNX operator set the files use (`ScatterElements` with `reduction="max"` needs 18).
pub const OPSET: i64 = 18;
/// The ONNX IR version matching opset 18.
pub const IR_VERSION: i64 = 8;

/// What to put in the exported file.
#[derive(Clone, Debug, Default)]
pub struct OnnxOptions {
    /// Also output each GATv2 layer's attention (`attention_convK`) and the edge list it is
    /// over (`attention_edge_index`).
    pub attention: bool,
    /// Take a third input `edge_weight: float32 [num_edges]` for the GCN layers (PyG's
    /// `GCNConv(x, edge_index, edge_weight)`). Without it every edge weighs 1, and, as in PyG,
    /// `improved` then has no effect. Refused for models with GATv2 layers, which take no edge
    /// weights.
    pub edge_weight: bool,
}

/// Builds an ONNX graph's nodes with fresh names; what
/// [`GraphLayer::export_onnx`](crate::layers::GraphLayer::export_onnx) writes into.
pub struct Builder {
    nodes: Vec<NodeProto>,
    initializers: Vec<TensorProto>,
    counter: usize,
}

/// An int attribute for [`Builder::op`].
pub fn attr_int(name: &str, i: i64) -> AttributeProto {
    AttributeProto {
        name: name.into(),
        r#type: attribute_type::INT,
        i,
        ..Default::default()
    }
}

/// A float attribute for [`Builder::op`].
pub fn attr_float(name: &str, f: f32) -> AttributeProto {
    AttributeProto {
        name: name.into(),
        r#type: attribute_type::FLOAT,
        f,
        ..Default::default()
    }
}

fn attr_string(name: &str, s: &str) -> AttributeProto {
    AttributeProto {
        name: name.into(),
        r#type: attribute_type::STRING,
        s: s.as_bytes().to_vec(),
        ..Default::default()
    }
}

fn attr_tensor(name: &str, t: TensorProto) -> AttributeProto {
    AttributeProto {
        name: name.into(),
        r#type: attribute_type::TENSOR,
        t: Some(t),
        ..Default::default()
    }
}

fn f32_tensor(name: &str, dims: &[i64], values: &[f32]) -> TensorProto {
    TensorProto {
        dims: dims.to_vec(),
        data_type: FLOAT,
        name: name.into(),
        raw_data: values.iter().flat_map(|v| v.to_le_bytes()).collect(),
        ..Default::default()
    }
}

fn i64_tensor(name: &str, dims: &[i64], values: &[i64]) -> TensorProto {
    TensorProto {
        dims: dims.to_vec(),
        data_type: INT64,
        name: name.into(),
        raw_data: values.iter().flat_map(|v| v.to_le_bytes()).collect(),
        ..Default::default()
    }
}

fn value_info(name: &str, elem_type: i32, dims: &[Result<i64, &str>]) -> ValueInfoProto {
    let dim = dims
        .iter()
        .map(|d| Dimension {
            value: Some(match d {
                Ok(v) => DimensionValue::DimValue(*v),
                Err(p) => DimensionValue::DimParam(p.to_string()),
            }),
        })
        .collect();
    ValueInfoProto {
        name: name.into(),
        r#type: Some(TypeProto {
            tensor_type: Some(TypeProtoTensor {
                elem_type,
                shape: Some(TensorShapeProto { dim }),
            }),
        }),
        doc_string: String::new(),
    }
}

impl Builder {
    /// A fresh value name starting with `hint`.
    pub fn fresh(&mut self, hint: &str) -> String {
        self.counter += 1;
        format!("{hint}_{}", self.counter)
    }

    /// Adds a node with one output and returns the output's name.
    pub fn op(
        &mut self,
        op: &str,
        inputs: &[&str],
        attrs: Vec<AttributeProto>,
        hint: &str,
    ) -> String {
        let out = self.fresh(hint);
        self.op_named(op, inputs, attrs, &out);
        out
    }

    /// Adds a node whose one output is named `out`.
    pub fn op_named(&mut self, op: &str, inputs: &[&str], attrs: Vec<AttributeProto>, out: &str) {
        self.nodes.push(NodeProto {
            input: inputs.iter().map(|s| s.to_string()).collect(),
            output: vec![out.to_string()],
            name: format!("{op}_{}", self.nodes.len()),
            op_type: op.into(),
            attribute: attrs,
            ..Default::default()
        });
    }

    /// An int64 constant.
    pub fn const_i64(&mut self, values: &[i64], dims: &[i64]) -> String {
        let name = self.fresh("const_i64");
        self.initializers.push(i64_tensor(&name, dims, values));
        name
    }

    /// A float32 constant.
    pub fn const_f32(&mut self, values: &[f32], dims: &[i64]) -> String {
        let name = self.fresh("const_f32");
        self.initializers.push(f32_tensor(&name, dims, values));
        name
    }

    /// A parameter as a float32 initializer named `name` (its full PyG name).
    pub fn param(&mut self, name: &str, t: &Tensor) -> Result<String> {
        let dims: Vec<i64> = t.dims().iter().map(|&d| d as i64).collect();
        let values = t
            .to_device(&Device::Cpu)?
            .to_dtype(DType::F32)?
            .flatten_all()?
            .to_vec1::<f32>()?;
        self.initializers.push(f32_tensor(name, &dims, &values));
        Ok(name.to_string())
    }

    /// A float32 tensor of shape `shape` (an int64 1-D tensor name) filled with `value`.
    pub fn filled(&mut self, shape: &str, value: f32, hint: &str) -> String {
        let t = f32_tensor("value", &[1], &[value]);
        self.op(
            "ConstantOfShape",
            &[shape],
            vec![attr_tensor("value", t)],
            hint,
        )
    }

    /// `Unsqueeze(x, [axis])`.
    pub fn unsqueeze(&mut self, x: &str, axis: i64) -> String {
        let axes = self.const_i64(&[axis], &[1]);
        self.op("Unsqueeze", &[x, &axes], vec![], "unsqueeze")
    }

    /// `ScatterElements(data, dst broadcast to updates' shape, updates, axis=0, reduction)`:
    /// row `e` of `updates` reduced into row `dst[e]` of `data`. (ScatterElements rather than
    /// ScatterND: onnxruntime's ScatterND with a reduction runs index blocks in parallel and
    /// races on repeated destinations, giving wrong, run-to-run different sums.)
    pub fn scatter_rows(
        &mut self,
        data: &str,
        dst: &str,
        updates: &str,
        rank: usize,
        reduction: &str,
    ) -> String {
        let index = if rank == 1 {
            dst.to_string()
        } else {
            let mut dims = vec![-1i64];
            dims.extend(std::iter::repeat_n(1, rank - 1));
            let shape = self.const_i64(&dims, &[rank as i64]);
            let col = self.op("Reshape", &[dst, &shape], vec![], "dst_col");
            let target = self.op("Shape", &[updates], vec![], "updates_shape");
            self.op("Expand", &[&col, &target], vec![], "dst_expanded")
        };
        self.op(
            "ScatterElements",
            &[data, &index, updates],
            vec![attr_int("axis", 0), attr_string("reduction", reduction)],
            &format!("scatter_{reduction}"),
        )
    }

    /// `Gather(data, index, axis=0)`: rows `index` of `data`.
    pub fn gather_rows(&mut self, data: &str, index: &str) -> String {
        self.op(
            "Gather",
            &[data, index],
            vec![attr_int("axis", 0)],
            "gather",
        )
    }
}

/// The graph-size tensors every layer uses (names of values in the graph).
pub struct Sizes {
    /// `[num_nodes]` as a 1-D int64 tensor.
    pub n_1d: String,
    /// `edge_index[0]`, `edge_index[1]` (int64 `[E]`).
    pub src: String,
    pub dst: String,
    /// `Range(0, num_nodes)`.
    pub loops: String,
    /// `src != dst`.
    pub not_loop: String,
    /// The `edge_weight` input, when the export takes one.
    pub edge_weight: Option<String>,
}

/// Edge lists after self-loop handling.
struct Edges {
    src: String,
    dst: String,
}

fn sizes(b: &mut Builder) -> Sizes {
    let shape = b.op(
        "Shape",
        &["x"],
        vec![attr_int("start", 0), attr_int("end", 1)],
        "num_nodes_1d",
    );
    let zero = b.const_i64(&[0], &[]);
    let one = b.const_i64(&[1], &[]);
    let axes0 = b.const_i64(&[0], &[1]);
    let n = b.op("Squeeze", &[&shape, &axes0], vec![], "num_nodes");
    let src = b.op(
        "Gather",
        &["edge_index", &zero],
        vec![attr_int("axis", 0)],
        "src",
    );
    let dst = b.op(
        "Gather",
        &["edge_index", &one],
        vec![attr_int("axis", 0)],
        "dst",
    );
    let loops = b.op("Range", &[&zero, &n, &one], vec![], "loops");
    let eq = b.op("Equal", &[&src, &dst], vec![], "is_loop");
    let not_loop = b.op("Not", &[&eq], vec![], "not_loop");
    Sizes {
        n_1d: shape,
        src,
        dst,
        loops,
        not_loop,
        edge_weight: None,
    }
}

/// Existing self-loops removed, one loop per node appended (PyG's order).
fn with_self_loops(b: &mut Builder, s: &Sizes) -> Edges {
    let axis0 = vec![attr_int("axis", 0)];
    let src_k = b.op(
        "Compress",
        &[&s.src, &s.not_loop],
        axis0.clone(),
        "src_kept",
    );
    let dst_k = b.op(
        "Compress",
        &[&s.dst, &s.not_loop],
        axis0.clone(),
        "dst_kept",
    );
    let src = b.op("Concat", &[&src_k, &s.loops], axis0.clone(), "src_loops");
    let dst = b.op("Concat", &[&dst_k, &s.loops], axis0, "dst_loops");
    Edges { src, dst }
}

fn without_change(s: &Sizes) -> Edges {
    Edges {
        src: s.src.clone(),
        dst: s.dst.clone(),
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
        let e = without_change(s);
        let w = match edge_weight {
            Some(w) => w.to_string(),
            None => ones_per_edge(b, &e.src, "edge_w"),
        };
        return gcn_aggregate(b, s, &h, &e, &w, c, bias, prefix);
    }
    let (edges, weight) = if c.add_self_loops {
        // add_remaining_self_loops: edges that are not loops keep their weight; every node gets
        // one loop, weighing what the input's (last) loop at that node weighed, else the fill.
        let e = with_self_loops(b, s);
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
        let e = without_change(s);
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

/// An attention layer's exported attention: `alpha` `[E', heads]` over edges `src → dst`.
pub struct GatOut {
    pub out: String,
    pub heads: i64,
    pub alpha: String,
    pub src: String,
    pub dst: String,
}

/// What a layer's export returns: its output's name, and its attention if it has one.
pub struct OnnxLayerOut {
    pub out: String,
    pub attention: Option<GatOut>,
}

/// [`GcnConv`]'s export.
pub(crate) fn gcn_export(
    b: &mut Builder,
    s: &Sizes,
    h: &str,
    conv: &GcnConv,
    prefix: &str,
) -> Result<OnnxLayerOut> {
    let out = gcn_layer(
        b,
        s,
        h,
        conv.config(),
        conv.weight(),
        conv.bias(),
        prefix,
        s.edge_weight.as_deref(),
    )?;
    Ok(OnnxLayerOut {
        out,
        attention: None,
    })
}

/// [`GatV2Conv`]'s export.
pub(crate) fn gatv2_export(
    b: &mut Builder,
    s: &Sizes,
    h: &str,
    conv: &GatV2Conv,
    prefix: &str,
) -> Result<OnnxLayerOut> {
    if s.edge_weight.is_some() {
        return Err(WorkbookError::InvalidConfig(
            "ONNX export with an edge_weight input: GATv2Conv takes no edge weights (PyG's GATv2Conv without edge_dim rejects them); export without OnnxOptions::edge_weight".into(),
        ));
    }
    let o = gatv2_layer(b, s, h, conv.config(), &conv.named_parameters(), prefix)?;
    Ok(OnnxLayerOut {
        out: o.out.clone(),
        attention: Some(o),
    })
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
        with_self_loops(b, s)
    } else {
        without_change(s)
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

/// Builds the ONNX model of `model` (its eval-mode forward pass; dropout is not exported).
/// Run [`crate::export::preflight::check`] first: this function only refuses what it cannot
/// express (non-f32 parameters, an `edge_weight` input for GATv2 layers) and a model whose
/// layers are split across devices.
pub fn to_onnx(model: &Model, options: &OnnxOptions) -> Result<ModelProto> {
    // A split model would export (its weights are readable wherever they are) but its own
    // forward pass refuses to run: name the split rather than write a file of a model that
    // does not run here.
    if let Some(split) = crate::export::preflight::split_problem(model) {
        return Err(WorkbookError::InvalidConfig(format!(
            "ONNX export needs the model on one device: {split}"
        )));
    }
    if let Some((name, t)) = model
        .named_parameters()
        .into_iter()
        .find(|(_, t)| t.dtype() != DType::F32)
    {
        return Err(WorkbookError::InvalidConfig(format!(
            "ONNX export writes float32 but '{name}' is {:?}; convert with model.to_dtype(DType::F32)",
            t.dtype()
        )));
    }
    let config = model.config();
    let mut b = Builder {
        nodes: Vec::new(),
        initializers: Vec::new(),
        counter: 0,
    };
    let mut s = sizes(&mut b);
    s.edge_weight = options.edge_weight.then(|| "edge_weight".to_string());
    let mut h = "x".to_string();
    let last = model.layers().len() - 1;
    let mut attention: Vec<(String, GatOut)> = Vec::new();
    for (k, layer) in model.layers().iter().enumerate() {
        let prefix = config.prefix(k);
        let o = layer
            .as_graph_layer()
            .export_onnx(&mut b, &s, &h, &prefix)?;
        h = o.out;
        if let Some(a) = o.attention {
            let name = if prefix.is_empty() {
                "conv".to_string()
            } else {
                prefix.trim_end_matches('.').to_string()
            };
            attention.push((name, a));
        }
        if k != last {
            h = match config.activation {
                Activation::Relu => b.op("Relu", &[&h], vec![], "relu"),
                Activation::Elu => b.op("Elu", &[&h], vec![attr_float("alpha", 1.0)], "elu"),
                Activation::None => h,
            };
        }
    }
    b.op_named("Identity", &[&h], vec![], "logits");
    let classes = config
        .layers
        .last()
        .map(|l| l.output_width() as i64)
        .unwrap_or(0);
    let features = config.layers[0].in_channels() as i64;
    let mut outputs = vec![value_info(
        "logits",
        FLOAT,
        &[Err("num_nodes"), Ok(classes)],
    )];
    if options.attention && !attention.is_empty() {
        // Every GATv2 layer with self-loops uses the same edge list; export the first one's.
        let (_, first) = &attention[0];
        let (src, dst) = (first.src.clone(), first.dst.clone());
        let s0 = b.unsqueeze(&src, 0);
        let d0 = b.unsqueeze(&dst, 0);
        b.op_named(
            "Concat",
            &[&s0, &d0],
            vec![attr_int("axis", 0)],
            "attention_edge_index",
        );
        outputs.push(value_info(
            "attention_edge_index",
            INT64,
            &[Ok(2), Err("num_attention_edges")],
        ));
        for (name, o) in &attention {
            let out = format!("attention_{name}");
            b.op_named("Identity", &[&o.alpha], vec![], &out);
            outputs.push(value_info(
                &out,
                FLOAT,
                &[Err("num_attention_edges"), Ok(o.heads)],
            ));
        }
    }
    let mut input = vec![
        value_info("x", FLOAT, &[Err("num_nodes"), Ok(features)]),
        value_info("edge_index", INT64, &[Ok(2), Err("num_edges")]),
    ];
    if options.edge_weight {
        input.push(value_info("edge_weight", FLOAT, &[Err("num_edges")]));
    }
    let config_json = serde_json::to_string(config)
        .map_err(|e| WorkbookError::InvalidConfig(format!("cannot serialise the config: {e}")))?;
    Ok(ModelProto {
        ir_version: IR_VERSION,
        opset_import: vec![OperatorSetIdProto {
            domain: String::new(),
            version: OPSET,
        }],
        producer_name: "workbook".into(),
        producer_version: env!("CARGO_PKG_VERSION").into(),
        doc_string: "GNN exported by workbook: inputs x [num_nodes, F] f32 and edge_index [2, num_edges] int64".into(),
        graph: Some(GraphProto {
            node: b.nodes,
            name: "workbook_gnn".into(),
            initializer: b.initializers,
            input,
            output: outputs,
            ..Default::default()
        }),
        metadata_props: vec![StringStringEntryProto {
            key: crate::checkpoint::CONFIG_KEY.into(),
            value: config_json,
        }],
        ..Default::default()
    })
}

/// Writes `model` as ONNX to `path` (atomically) and returns the model proto written.
pub fn write(model: &Model, path: &Path, options: &OnnxOptions) -> Result<ModelProto> {
    // The message holds a copy of every weight, and its encoding another.
    crate::limits::check_memory(
        &format!("the ONNX export of {}", path.display()),
        crate::limits::parameter_bytes(model.config()).saturating_mul(2),
    )?;
    let proto = to_onnx(model, options)?;
    atomic_write::write(path, &proto.encode_to_vec())?;
    Ok(proto)
}

/// Reads an ONNX file back (for checks and round trips), with a clear error for files that are
/// truncated, corrupt, or not ONNX models with a graph.
pub fn read(path: &Path) -> Result<ModelProto> {
    let bytes = crate::input_file::read(path, &crate::input_file::Cap::loading())?;
    decode(&bytes, path)
}

/// [`read`] on bytes already in memory; `origin` names them in errors.
pub fn decode(bytes: &[u8], origin: &Path) -> Result<ModelProto> {
    if bytes.is_empty() {
        return Err(WorkbookError::file(
            origin,
            "is empty; it is not an ONNX model (re-export it)",
        ));
    }
    let proto = ModelProto::decode(bytes).map_err(|e| {
        WorkbookError::file(
            origin,
            format!("is not a valid ONNX protobuf ({e}); the file is truncated or corrupt, re-export it"),
        )
    })?;
    let Some(graph) = &proto.graph else {
        return Err(WorkbookError::file(
            origin,
            "decodes as protobuf but holds no ONNX graph; the file is truncated or not an ONNX model",
        ));
    };
    if proto.opset_import.is_empty() || graph.input.is_empty() || graph.output.is_empty() {
        return Err(WorkbookError::file(
            origin,
            "holds an ONNX graph without opset, inputs or outputs; the file is truncated or corrupt",
        ));
    }
    Ok(proto)
}
