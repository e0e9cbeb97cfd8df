//! # workbook: graph neural networks on real devices, without the classic failures
//!
//! GCN and GATv2 layers on [candle](https://github.com/huggingface/candle) that match PyTorch
//! Geometric numerically (tested against PyG's own outputs), with PyG's parameter names so a
//! PyG `state_dict` loads unchanged; datasets (karate, Planetoid Cora/CiteSeer, synthetic CSBM);
//! and full-batch training. Everything runs on the CPU, and on CUDA with the `cuda` feature.
//!
//! ```
//! use workbook::{datasets, device, ModelConfig, train::{train, TrainConfig}};
//! let chosen = device::choose(None).unwrap();            // --device, WORKBOOK_DEVICE, or auto
//! let graph = datasets::karate(&chosen.device).unwrap(); // embedded, no files needed
//! let config = ModelConfig::gcn(graph.num_features(), 16, graph.num_classes());
//! let report = train(config, &graph, &TrainConfig { epochs: 20, ..TrainConfig::gcn() }, |_| {}).unwrap();
//! assert!(report.last().loss.is_finite());
//! ```
//!
//! The layers take `&self` and keep nothing between calls (GATv2 returns its attention), so a
//! model can be shared across threads.

pub mod atomic_write;
pub mod datasets;
pub mod device;
pub mod edge_index;
pub mod error;
pub mod figures;
pub mod graph;
pub mod graph_file;
pub mod layers;
pub mod model;
pub mod ops;
pub mod predict;
pub mod tensor_file;
pub mod train;

pub use edge_index::EdgeIndex;
pub use error::{Result, WorkbookError};
pub use graph::{Graph, Split};
pub use layers::{Attention, GatV2Config, GatV2Conv, GatV2Output, GcnConfig, GcnConv};
pub use model::{Activation, Layer, LayerConfig, Model, ModelConfig, ModelOutput};

/// Re-exported so that notebooks and exercises need one dependency.
pub use candle_core;
pub use candle_nn;
pub use plotters;
