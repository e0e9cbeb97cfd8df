//! # workbook-lessons: the demonstrations and tools the book teaches with
//!
//! The core library, [`workbook`], is what a program running a GNN needs: tensors, layers,
//! placement, the transfer ledger, datasets and files. This crate holds everything else the book
//! and the `workbook` command show, so that the core stays small enough to read whole:
//!
//! - [`threads`] (chapter 3): serving one `Arc<Model>` from many threads, PyG's `_alpha` race
//!   reproduced with the stateful anti-pattern ([`threads::StatefulGatV2`],
//!   [`threads::race_demo`]), the `RefCell` version Rust refuses ([`threads::CellGatV2`]), and
//!   training while serving from atomically swapped snapshots, with the torn read it prevents
//!   ([`threads::snapshot::torn_read_demo`]);
//! - [`figures`]: the SVG figures of the book and the CLI, drawn with plotters;
//! - [`bench`](mod@bench): timing a model's forward pass and training step, comparable with PyG.
//!
//! Its dependencies beyond the core are plotters (figures) and arc-swap (snapshots).
//!
//! ```
//! use workbook::{datasets, ModelConfig, Model};
//! use workbook_lessons::threads::serving;
//! let graph = datasets::karate(&workbook::candle_core::Device::Cpu).unwrap();
//! let config = ModelConfig::gcn(graph.num_features(), 16, graph.num_classes());
//! let model = std::sync::Arc::new(Model::init(config, 0, graph.device()).unwrap().0);
//! let requests = serving::mixed_requests(&graph, 4, 0).unwrap();
//! let run = serving::check(model, requests.into(), 2).unwrap();
//! assert_eq!(run.mismatches, 0); // four threads' answers equal the sequential ones bit for bit
//! ```

pub mod bench;
pub mod figures;
pub mod threads;

/// Re-exported so that notebooks can draw with the same plotters version (and its `evcxr`
/// feature, through this crate's `evcxr` feature).
pub use plotters;
