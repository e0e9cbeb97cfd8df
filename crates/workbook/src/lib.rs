//! # workbook: graph neural networks on real devices, without the classic failures
//!
//! GCN and GATv2 layers on [candle](https://github.com/huggingface/candle) that match PyTorch
//! Geometric numerically (tested against PyG's own outputs), with PyG's parameter names so a
//! PyG `state_dict` loads unchanged; datasets (karate, Planetoid Cora/CiteSeer, synthetic CSBM);
//! full-batch training, and mini-batch training over PyG's `NeighborLoader` ([`loader`],
//! [`train::minibatch`]). Everything runs on the CPU, and on CUDA with the `cuda` feature.
//!
//! ```
//! use workbook::{datasets, device, ModelConfig, train::{train, TrainConfig}};
//! let chosen = device::choose(None).unwrap();                // --device, WORKBOOK_DEVICE, or auto
//! let graph = datasets::karate(&chosen.placement).unwrap(); // embedded, no files needed
//! let config = ModelConfig::gcn(graph.num_features(), 16, graph.num_classes());
//! let report = train(config, &graph, &TrainConfig { epochs: 20, ..TrainConfig::gcn() }, |_| {}).unwrap();
//! assert!(report.last().unwrap().loss.is_finite());
//! ```
//!
//! ## Devices
//!
//! A [`Placement`] is where tensors live: `cpu`, `cuda:N`, or a simulated `sim:N` that keeps
//! data in host memory but is a device of its own for every check, so device mismatches can be
//! met and fixed on any machine. Models check their inputs before the forward pass and name the
//! culprit; [`Model::to_device`] moves parameters and cached buffers; the
//! [`ledger`] records every transfer; [`checkpoint`]s load onto any device.
//!
//! ```
//! use workbook::{datasets, Model, ModelConfig, Placement};
//! let sim = Placement::sim(1);
//! let (model, _) = Model::init(ModelConfig::gcn(34, 16, 4), 0, &sim).unwrap();
//! let graph = datasets::karate(&Placement::cpu()).unwrap();
//! let err = model.forward_graph(&graph).unwrap_err().to_string();
//! assert!(err.contains("model parameters are on sim:1 but input 'x' is on cpu"));
//! assert!(model.forward_graph(&graph.to_device(&sim).unwrap()).is_ok());
//! ```
//!
//! The layers take `&self` and keep nothing between calls (GATv2 returns its attention), so a
//! model can be shared across threads.
//!
//! ## What this crate is, and what it is not
//!
//! The core: tensors and kernels ([`ops`]), [`layers`] and the [`model`], [`placement`] and
//! [`device`] choice, the transfer [`ledger`], [`datasets`], [`train`]ing, [`parallel`] (many
//! devices), and files
//! ([`checkpoint`], [`tensor_file`], [`graph_file`], [`input_file`], [`atomic_write`],
//! [`export`]) with their defences ([`limits`], [`non_finite`]). Its
//! dependencies are candle, safetensors, serde, rand, rayon, tempfile, thiserror, prost (the
//! ONNX messages), proc-macro2 (Rust tokens, for the [`fixed_device`] witness), the `planetoid`
//! reader and `workbook-derive` (the `#[derive(Module)]` that visits every tensor field of a
//! layer): no HTTP client and no plotting crate.
//!
//! - Feature `download` (off by default): fetch Planetoid files that are not in the data folder
//!   (CiteSeer; Cora is embedded) with `ureq`. Without it such a load fails with an error that
//!   names the files and the folder to copy them into. The `workbook` CLI turns it on.
//! - Feature `cuda`: candle's CUDA backend and this crate's kernels.
//!
//! The book's demonstrations and tools (the thread-safety race and the stateful anti-pattern,
//! serving from snapshots, figures, the benchmark) live in the `workbook-lessons` crate, which
//! depends on this one. `.ci/run` fails if an HTTP client or a plotting crate enters this
//! crate's default dependency tree.

// The derive names this crate `::workbook`, inside it too.
extern crate self as workbook;

pub mod atomic_write;
pub mod checkpoint;
pub mod datasets;
pub mod device;
pub mod edge_index;
pub mod error;
pub mod export;
pub mod fixed_device;
pub mod graph;
pub mod graph_file;
pub mod input_file;
pub mod inspect;
pub mod layers;
pub mod ledger;
pub mod limits;
pub mod loader;
pub mod model;
pub mod module;
pub mod non_finite;
pub mod ops;
pub mod parallel;
pub mod placement;
pub mod predict;
pub mod tensor_file;
pub mod train;

pub use edge_index::EdgeIndex;
pub use error::{Result, WorkbookError};
pub use graph::{Graph, GraphPart, Split};
pub use layers::{
    Attention, GatV2Config, GatV2Conv, GatV2Output, GcnConfig, GcnConv, GraphLayer, LayerInput,
    LayerOutput, LayerSpec, SageConfig, SageConv,
};
pub use model::{Activation, Layer, LayerConfig, Model, ModelConfig, ModelOutput};
pub use module::Module;
pub use placement::Placement;
/// `#[derive(Module)]`: see [`module`].
pub use workbook_derive::Module;

/// Re-exported so that notebooks and exercises need one dependency.
pub use candle_core;
pub use candle_nn;
