//! Export (chapter 4): pre-flight checks, precision, safetensors for PyG, and ONNX.
//!
//! Every export starts with [`preflight::check`], which reports every problem at once (devices,
//! dtype, eval mode, the example inputs, a forward pass). Then:
//!
//! * [`safetensors::export`] — PyG-named weights plus a JSON config;
//! * [`onnx::write`] — an opset-18 ONNX graph with dynamic `num_nodes` and `num_edges`, checked
//!   against onnxruntime by `scripts/check_onnx.py`;
//! * [`precision`] — f16/bf16 inference copies ([`crate::Model::to_dtype`]) and what they cost.
//!
//! ```
//! use workbook::{datasets, Model, ModelConfig, Placement};
//! use workbook::export::{onnx, preflight};
//! let graph = datasets::karate(&Placement::cpu()).unwrap();
//! let (model, _) = Model::init(ModelConfig::gcn(34, 8, 4), 0, &Placement::cpu()).unwrap();
//! preflight::check(&model, &preflight::Example::from_graph(&graph)).unwrap();
//! let dir = tempfile::tempdir().unwrap();
//! onnx::write(&model, &dir.path().join("gcn.onnx"), &onnx::OnnxOptions::default()).unwrap();
//! ```

pub mod onnx;
/// The ONNX protobuf messages ([`crate::onnx_graph::proto`]).
pub use crate::onnx_graph::proto as onnx_proto;
pub mod precision;
pub mod preflight;
pub mod safetensors;
