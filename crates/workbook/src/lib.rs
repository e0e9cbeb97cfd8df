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
//! assert!(report.last().loss.is_finite());
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

pub mod atomic_write;
pub mod bench;
pub mod checkpoint;
pub mod datasets;
pub mod device;
pub mod edge_index;
pub mod error;
pub mod export;
pub mod figures;
pub mod graph;
pub mod graph_file;
pub mod inspect;
pub mod layers;
pub mod ledger;
pub mod limits;
pub mod loader;
pub mod model;
pub mod ops;
pub mod placement;
pub mod predict;
pub mod tensor_file;
pub mod threads;
pub mod train;

pub use edge_index::EdgeIndex;
pub use error::{Result, WorkbookError};
pub use graph::{Graph, GraphPart, Split};
pub use layers::{Attention, GatV2Config, GatV2Conv, GatV2Output, GcnConfig, GcnConv};
pub use model::{Activation, Layer, LayerConfig, Model, ModelConfig, ModelOutput};
pub use placement::Placement;

/// Re-exported so that notebooks and exercises need one dependency.
pub use candle_core;
pub use candle_nn;
pub use plotters;
