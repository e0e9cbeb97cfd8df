//! # workbook: graph neural networks on real devices, without the classic failures
//!
//! GCN and GATv2 layers on [candle](https://github.com/huggingface/candle) that match PyTorch
//! Geometric numerically (tested against PyG's own outputs), with PyG's parameter names so a
//! PyG `state_dict` loads unchanged; datasets (karate, Planetoid Cora/CiteSeer, synthetic CSBM);
//! full-batch training, and mini-batch training over PyG's `NeighborLoader` ([`loader`],
//! [`train::minibatch`]). Everything runs on the CPU, and on CUDA with the `cuda` feature;
//! one process per device over MPI with the `mpi` feature (NCCL on GPUs: `nccl`).
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
//! ## The layout: a stack, each module importing only from below
//!
//! ```text
//! layers (bottom to top):
//! ids and errors: ids error
//! base: limits atomic_write input_file ledger
//! placement: sim_device placement device placed_tensor fixed_device
//! files: tensor_file torch_file non_finite onnx_graph
//! graph: edge_index unchecked_graph graph graph_file reorder datasets loader
//! ops: ops
//! layers: module layers
//! model: model
//! training and checkpoints: train checkpoint
//! uses of a model: export predict inspect parallel branded
//! ```
//!
//! - **ids and errors**: [`PlacementId`](ids::PlacementId) and [`Role`](ids::Role), the values
//!   the one error type ([`error`]) carries;
//! - **base**: bounds on sizes and counts ([`limits`]), atomic writes ([`atomic_write`]), capped
//!   reads ([`input_file`]), the transfer [`ledger`];
//! - **placement**: how a simulated device reports a kernel's fault, at once or asynchronously
//!   as CUDA does ([`sim_device`]), where tensors live, `cpu`, `cuda:N` or a simulated `sim:N` ([`placement`]),
//!   the device policy ([`device`]), a tensor that checks its operand ([`placed_tensor`]), the
//!   witness of devices written in code ([`fixed_device`]);
//! - **files**: safetensors I/O ([`tensor_file`]), PyTorch's `.pt` checkpoints
//!   ([`torch_file`]), NaN checks ([`non_finite`]), ONNX graph writing ([`onnx_graph`]);
//! - **graph**: the validated [`edge_index`] and its CSR, a graph as PyG's `Data` holds it,
//!   nothing checked ([`unchecked_graph`], made a [`Graph`] by [`Graph::validate`]), [`graph`]s and their files
//!   ([`graph_file`]), node orders that keep neighbours close and the permutation back
//!   ([`reorder`]), [`datasets`], the neighbour [`loader`];
//! - **ops**: kernels and ops candle lacks, dropout among them, and the gather and scatter that
//!   trust their indices as PyG's do ([`ops`], [`ops::raw_index`]);
//! - **layers**: the [`module`] bookkeeping and the [`layers`] (one a file, each owning its
//!   config, initialisation, forward pass and ONNX lowering), PyG's lazy input width
//!   (`in_channels = -1`, [`layers::lazy`]);
//! - **model**: a stack of layers and its config ([`model`]);
//! - **training and checkpoints**: [`train`]ing (full-batch and mini-batch), [`checkpoint`]s;
//! - **uses of a model**: [`export`] (pre-flight, safetensors, ONNX), [`predict`], [`inspect`]
//!   tables, many devices ([`parallel`]), placements the compiler checks ([`branded`]).
//!
//! Within a layer, imports run one way too. `scripts/import_graph.py` draws the graph from the
//! source and checks it against the table above (the test `tests/layout.rs` runs it): no import
//! circle, no import running up. Old paths stay: a module that moved down is re-exported
//! from where it was (`train::Dropout` is [`ops::Dropout`]).
//!
//! ## What this crate is, and what it is not
//!
//! The core: tensors, layers, placement, loaders and files. Its dependencies are candle,
//! safetensors, serde (and erased-serde, for layer configs of any type), rand, rayon, tempfile,
//! thiserror, prost (the ONNX messages), zip (PyTorch's `.pt` files), proc-macro2 (Rust tokens, for the [`fixed_device`]
//! witness), the `planetoid` reader and `workbook-derive` (the `#[derive(Module)]` that visits
//! every tensor field of a layer), and on Linux libc (`madvise`, for 2 MiB pages under large
//! tensors: [`ops::huge_pages`]): no HTTP client and no plotting crate.
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
pub mod branded;
pub mod checkpoint;
pub mod datasets;
pub mod device;
pub mod edge_index;
pub mod error;
pub mod export;
pub mod fixed_device;
pub mod graph;
pub mod graph_file;
pub mod ids;
pub mod input_file;
pub mod inspect;
pub mod layers;
pub mod ledger;
pub mod limits;
pub mod loader;
pub mod model;
pub mod module;
pub mod non_finite;
pub mod onnx_graph;
pub mod ops;
pub mod parallel;
pub mod placed_tensor;
pub mod placement;
pub mod predict;
pub mod reorder;
pub mod sim_device;
pub mod tensor_file;
pub mod torch_file;
pub mod train;
pub mod unchecked_graph;

pub use edge_index::EdgeIndex;
pub use error::{Result, WorkbookError};
pub use graph::{Graph, GraphPart, Split};
pub use layers::{
    Attention, GatV2Config, GatV2Conv, GatV2Output, GcnConfig, GcnConv, GraphLayer, LayerInput,
    LayerOutput, LayerRegistry, LayerSpec, SageConfig, SageConv,
};
pub use model::{Activation, Layer, LayerConfig, Model, ModelConfig, ModelOutput};
pub use module::Module;
pub use placement::Placement;
pub use unchecked_graph::UncheckedGraph;
/// `#[derive(Module)]`: see [`module`].
pub use workbook_derive::Module;

/// Re-exported so that notebooks, exercises and a crate with layers of its own need one
/// dependency (a [`LayerSpec`] draws its initial values from a `rand_chacha::ChaCha8Rng`).
pub use candle_core;
pub use candle_nn;
pub use rand;
pub use rand_chacha;
