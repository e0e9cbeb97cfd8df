//! ONNX export of a GCN whose graph size is not frozen, checked by an independent runtime.
//!
//! `torch.onnx.export` traces the model on a dummy input, and without `dynamic_axes` the file
//! keeps the dummy's number of nodes and edges: it fails on the next graph. Here the exporter
//! (`workbook::export::onnx`) declares the sizes symbolic, and you check that it did:
//!
//! * inputs `x: float32 [num_nodes, in_channels]` and `edge_index: int64 [2, num_edges]`
//!   (PyG's layout: int64, sources in row 0, targets in row 1);
//! * output `logits: float32 [num_nodes, classes]`;
//! * opset 18 (`ScatterElements` with `reduction="max"`, used by GATv2's softmax).
//!
//! The graded test then feeds files written by [`write_inputs`] to onnxruntime, on two graphs of
//! different sizes, and compares its logits with Rust's.

use std::fmt;
use std::path::Path;
use workbook::candle_core::{DType, Device};
use workbook::export::onnx::{self, OnnxOptions, OPSET};
use workbook::export::onnx_proto::{DimensionValue, ModelProto, ValueInfoProto, FLOAT, INT64};
use workbook::export::preflight::{self, Example};
use workbook::{tensor_file, Graph, Model, Result};

/// Exports `model` to `path` as ONNX, after the pre-flight on `example` (the dummy input):
/// nothing is written when the pre-flight fails. Returns what was written.
pub fn export_gcn(model: &Model, example: &Graph, path: &Path) -> Result<ModelProto> {
    preflight::check(model, &Example::from_graph(example))?;
    onnx::write(model, path, &OnnxOptions::default())
}

/// Writes the inputs onnxruntime is fed for `graph` to `path` (safetensors): `x` float32
/// `[num_nodes, F]` and `edge_index` int64 `[2, num_edges]`, from wherever the graph is.
pub fn write_inputs(graph: &Graph, path: &Path) -> Result<()> {
    let x = graph.x().to_dtype(DType::F32)?;
    let edge_index = graph.edge_index().to_tensor(&Device::Cpu)?; // PyG's i64 [2, E]
    tensor_file::write(
        path,
        &[("x".to_string(), x), ("edge_index".to_string(), edge_index)],
        None,
    )
}

/// One dimension of a declared input or output.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Dim {
    /// A size fixed in the file, e.g. `1433`.
    Fixed(i64),
    /// A symbolic size, e.g. `num_nodes`: any size is accepted.
    Symbolic(String),
    /// No size information.
    Unknown,
}

/// The element type (`FLOAT`, `INT64`, ... from `onnx_proto`) and dimensions of a declared
/// input or output; `None` if it declares no tensor type.
pub fn tensor_type(value: &ValueInfoProto) -> Option<(i32, Vec<Dim>)> {
    let t = value.r#type.as_ref()?.tensor_type.as_ref()?;
    let dims = t
        .shape
        .as_ref()
        .map(|s| {
            s.dim
                .iter()
                .map(|d| match &d.value {
                    Some(DimensionValue::DimValue(v)) => Dim::Fixed(*v),
                    Some(DimensionValue::DimParam(p)) => Dim::Symbolic(p.clone()),
                    None => Dim::Unknown,
                })
                .collect()
        })
        .unwrap_or_default();
    Some((t.elem_type, dims))
}

/// A problem with an exported file's signature: what it is about (`opset`, `x`, `edge_index`,
/// `logits`) and what is wrong.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Finding {
    pub what: String,
    pub problem: String,
}

impl fmt::Display for Finding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.what, self.problem)
    }
}

fn finding(what: &str, problem: String) -> Finding {
    Finding {
        what: what.to_string(),
        problem,
    }
}

/// Checks the tensor `name` declared in `list` (the graph's inputs or outputs): its element
/// type must be `elem_type`, and its dimensions `expected` (`Some(n)`: fixed to `n`; `None`:
/// symbolic, any size). Everything wrong with it is one finding about `name`; `None` if it is
/// right.
pub fn check_declared(
    list: &[ValueInfoProto],
    name: &str,
    elem_type: i32,
    expected: &[Option<i64>],
) -> Option<Finding> {
    let Some(value) = list.iter().find(|v| v.name == name) else {
        return Some(finding(name, "is not declared".into()));
    };
    let Some((elem, dims)) = tensor_type(value) else {
        return Some(finding(name, "declares no tensor type".into()));
    };
    let mut wrong = Vec::new();
    if elem != elem_type {
        wrong.push(format!("element type {elem}, expected {elem_type}"));
    }
    // The sizes can be anything: only the element type is checked.
    if false {
        wrong.push(format!(
            "{} dimension(s) {dims:?}, expected {}",
            dims.len(),
            expected.len()
        ));
    } else if dims.len() != expected.len() {
        for (k, (d, e)) in dims.iter().zip(expected).enumerate() {
            match (d, e) {
                (Dim::Fixed(v), Some(n)) if v == n => {}
                (Dim::Symbolic(p), None) if !p.is_empty() => {}
                (d, Some(n)) => wrong.push(format!("dimension {k} is {d:?}, expected {n}")),
                (d, None) => wrong.push(format!(
                    "dimension {k} is {d:?}, expected a symbolic size (the graph size must not be frozen)"
                )),
            }
        }
    }
    (!wrong.is_empty()).then(|| finding(name, wrong.join("; ")))
}

/// Everything wrong with an exported GCN's signature, at once (empty: the file serves graphs of
/// any size). One finding per thing at fault, its `what` naming it:
///
/// * `opset`: the default domain's (`""`) opset is not [`OPSET`] (18), or is missing;
/// * `x`: not a `FLOAT` input `[symbolic, in_channels]`;
/// * `edge_index`: not an `INT64` input `[2, symbolic]`;
/// * `logits`: not a `FLOAT` output `[symbolic, classes]`.
///
/// (The element types are `onnx_proto`'s constants: `FLOAT` is 1, `INT64` is 7.)
pub fn signature_problems(proto: &ModelProto, in_channels: usize, classes: usize) -> Vec<Finding> {
    let mut found = Vec::new();
    match proto.opset_import.iter().find(|o| o.domain.is_empty()) {
        Some(o) if o.version == OPSET => {}
        Some(o) => found.push(finding(
            "opset",
            format!("is {}, expected {OPSET}", o.version),
        )),
        None => found.push(finding("opset", "is not declared".into())),
    }
    let Some(graph) = &proto.graph else {
        found.push(finding("x", "the file has no graph".into()));
        return found;
    };
    let (features, classes) = (Some(in_channels as i64), Some(classes as i64));
    found.extend(check_declared(&graph.input, "x", FLOAT, &[None, features]));
    found.extend(check_declared(
        &graph.input,
        "edge_index",
        INT64,
        &[Some(2), None],
    ));
    found.extend(check_declared(
        &graph.output,
        "logits",
        FLOAT,
        &[None, classes],
    ));
    found
}
