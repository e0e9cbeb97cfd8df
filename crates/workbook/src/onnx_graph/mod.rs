//! Writing ONNX graphs: the protobuf messages ([`proto`], generated from the vendored
//! `onnx.proto`) and a [`Builder`] that adds nodes with fresh names, constants and parameters.
//!
//! Every layer lowers its own eval-mode forward pass through this API
//! ([`GraphLayer::export_onnx`](crate::layers::GraphLayer::export_onnx), called with the graph's
//! [`Sizes`]); [`crate::export::onnx`] puts the layers of a model together into a file. It sits
//! below the layers in the crate's stack and knows nothing of them.
//!
//! ```
//! use workbook::onnx_graph::{attr_int, value_info, Builder, Sizes, FLOAT, INT64};
//! let mut b = Builder::new();
//! let s = Sizes::new(&mut b); // reads the inputs `x` and `edge_index`
//! let e = s.with_self_loops(&mut b);
//! let h = b.gather_rows("x", &e.src);
//! let n = b.nodes().len();
//! let graph = b.into_graph(
//!     "rows",
//!     vec![
//!         value_info("x", FLOAT, &[Err("num_nodes"), Ok(3)]),
//!         value_info("edge_index", INT64, &[Ok(2), Err("num_edges")]),
//!     ],
//!     vec![value_info(&h, FLOAT, &[Err("num_edges"), Ok(3)])],
//! );
//! assert_eq!(graph.node.len(), n);
//! assert_eq!(graph.node.last().unwrap().op_type, "Gather");
//! # let _ = attr_int("axis", 0);
//! ```

pub mod proto;

pub use proto::{BOOL, FLOAT, INT64};

use crate::error::Result;
use crate::placement::{inherit, Placement};
use candle_core::{DType, Tensor};
use proto::*;

/// Builds an ONNX graph's nodes with fresh names; what
/// [`GraphLayer::export_onnx`](crate::layers::GraphLayer::export_onnx) writes into.
pub struct Builder {
    nodes: Vec<NodeProto>,
    initializers: Vec<TensorProto>,
    counter: usize,
    /// Where [`Builder::param`] reads parameters from; each copy to the host is recorded in its
    /// ledger.
    source: Placement,
}

impl Default for Builder {
    fn default() -> Self {
        Self::new()
    }
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

/// A string attribute for [`Builder::op`].
pub fn attr_string(name: &str, s: &str) -> AttributeProto {
    AttributeProto {
        name: name.into(),
        r#type: attribute_type::STRING,
        s: s.as_bytes().to_vec(),
        ..Default::default()
    }
}

/// A tensor attribute for [`Builder::op`].
pub fn attr_tensor(name: &str, t: TensorProto) -> AttributeProto {
    AttributeProto {
        name: name.into(),
        r#type: attribute_type::TENSOR,
        t: Some(t),
        ..Default::default()
    }
}

/// A float32 tensor (little-endian `raw_data`).
pub fn f32_tensor(name: &str, dims: &[i64], values: &[f32]) -> TensorProto {
    TensorProto {
        dims: dims.to_vec(),
        data_type: FLOAT,
        name: name.into(),
        raw_data: values.iter().flat_map(|v| v.to_le_bytes()).collect(),
        ..Default::default()
    }
}

/// An int64 tensor (little-endian `raw_data`).
pub fn i64_tensor(name: &str, dims: &[i64], values: &[i64]) -> TensorProto {
    TensorProto {
        dims: dims.to_vec(),
        data_type: INT64,
        name: name.into(),
        raw_data: values.iter().flat_map(|v| v.to_le_bytes()).collect(),
        ..Default::default()
    }
}

/// A graph input or output: `name`, its element type ([`FLOAT`], [`INT64`]) and dimensions,
/// each fixed (`Ok(n)`) or symbolic (`Err("num_nodes")`).
pub fn value_info(name: &str, elem_type: i32, dims: &[Result<i64, &str>]) -> ValueInfoProto {
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
        ..Default::default()
    }
}

impl Builder {
    /// An empty graph whose parameters are read on the host.
    pub fn new() -> Self {
        Self::reading_from(&Placement::cpu())
    }

    /// An empty graph whose parameters ([`Builder::param`]) live on `at`: each one's copy to the
    /// host is recorded in `at`'s ledger, under the parameter's name.
    pub fn reading_from(at: &Placement) -> Self {
        Self {
            nodes: Vec::new(),
            initializers: Vec::new(),
            counter: 0,
            source: at.clone(),
        }
    }

    /// The nodes and initializers written so far, as a graph named `name` with these inputs and
    /// outputs.
    pub fn into_graph(
        self,
        name: &str,
        input: Vec<ValueInfoProto>,
        output: Vec<ValueInfoProto>,
    ) -> GraphProto {
        GraphProto {
            node: self.nodes,
            name: name.into(),
            initializer: self.initializers,
            input,
            output,
            ..Default::default()
        }
    }

    /// The nodes written so far.
    pub fn nodes(&self) -> &[NodeProto] {
        &self.nodes
    }

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

    /// A parameter as a float32 initializer named `name` (its full PyG name), copied to the host
    /// from the placement the builder reads from (recorded in its ledger as `name`).
    pub fn param(&mut self, name: &str, t: &Tensor) -> Result<String> {
        let dims: Vec<i64> = t.dims().iter().map(|&d| d as i64).collect();
        let from = inherit(t, &self.source);
        let host = from.destination(&Placement::cpu());
        let values = host
            .move_tensor(t, &from, name)?
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

    /// The mean of `h`'s rows (`width` columns) over the edges `src → dst` into every node, 0
    /// for a node without in-edges (counts clamped at 1): PyG's mean aggregation, as SAGE and a
    /// reader's GIN lower it. Node names start with `hint`.
    pub fn mean_over_in_edges(&mut self, h: &str, width: usize, s: &Sizes, hint: &str) -> String {
        let rows = self.gather_rows(h, &s.src);
        let width = self.const_i64(&[width as i64], &[1]);
        let shape = self.op(
            "Concat",
            &[&s.n_1d, &width],
            vec![attr_int("axis", 0)],
            &format!("{hint}_shape"),
        );
        let zeros = self.filled(&shape, 0.0, &format!("{hint}_zeros"));
        let sums = self.scatter_rows(&zeros, &s.dst, &rows, 2, "add");
        let edges = self.op("Shape", &[&s.src], vec![], &format!("{hint}_edges"));
        let ones = self.filled(&edges, 1.0, &format!("{hint}_ones"));
        let no_counts = self.filled(&s.n_1d, 0.0, &format!("{hint}_counts0"));
        let counts = self.scatter_rows(&no_counts, &s.dst, &ones, 1, "add");
        let one = self.const_f32(&[1.0], &[]);
        let counts = self.op("Max", &[&counts, &one], vec![], &format!("{hint}_counts"));
        let counts = self.unsqueeze(&counts, 1);
        self.op("Div", &[&sums, &counts], vec![], &format!("{hint}_mean"))
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

/// Edge lists (names of int64 `[E']` values), after self-loop handling.
pub struct Edges {
    pub src: String,
    pub dst: String,
}

impl Sizes {
    /// The size tensors of the graph inputs `x` `[num_nodes, F]` and `edge_index` `[2, E]`,
    /// written into `b` (every layer's export reads them).
    pub fn new(b: &mut Builder) -> Sizes {
        sizes(b)
    }

    /// The edges as the input gives them.
    pub fn edges(&self) -> Edges {
        Edges {
            src: self.src.clone(),
            dst: self.dst.clone(),
        }
    }

    /// Existing self-loops removed, one loop per node appended (PyG's `remove_self_loops` then
    /// `add_self_loops`, in PyG's order).
    pub fn with_self_loops(&self, b: &mut Builder) -> Edges {
        with_self_loops(b, self)
    }
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
