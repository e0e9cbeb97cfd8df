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

use crate::atomic_write;
use crate::error::{Result, WorkbookError};
use crate::model::{Activation, Model};
use crate::onnx_graph::proto::*;
use crate::onnx_graph::value_info;
use prost::Message;
use std::path::Path;

/// The graph-building API each layer lowers itself with; see [`crate::onnx_graph`].
pub use crate::onnx_graph::{
    attr_float, attr_int, attr_string, attr_tensor, Builder, Edges, GatOut, OnnxLayerOut, Sizes,
};

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

/// Builds the ONNX model of `model` (its eval-mode forward pass; dropout is not exported).
/// Run [`crate::export::preflight::check`] first: this function only refuses what it cannot
/// express (non-f32 parameters, an `edge_weight` input for GATv2 layers) and a model whose
/// layers are split across devices.
pub fn to_onnx(model: &Model, options: &OnnxOptions) -> Result<ModelProto> {
    model.check_materialized("ONNX export")?;
    // A split model would export (its weights are readable wherever they are) but its own
    // forward pass refuses to run: name the split rather than write a file of a model that
    // does not run here.
    if let Some(split) = crate::export::preflight::split_problem(model) {
        return Err(WorkbookError::Unsupported(format!(
            "ONNX export needs the model on one device: {split}"
        )));
    }
    model.require_float32("exports are")?;
    let config = model.config();
    let mut b = Builder::reading_from(model.placement());
    let mut s = Sizes::new(&mut b);
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
        graph: Some(b.into_graph("workbook_gnn", input, outputs)),
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
