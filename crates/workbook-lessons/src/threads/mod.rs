//! Thread safety (chapter 3): share one model between threads, and keep training while serving.
//!
//! # The safe pattern
//!
//! Build the model once, wrap it in an `Arc`, and give every thread a clone of the `Arc`. Every
//! forward pass takes `&self` and keeps nothing: [`GatV2Conv::forward`](workbook::GatV2Conv::forward)
//! *returns* its attention, with the edges it belongs to, instead of storing it. Each thread gets
//! exactly the answer it would get alone.
//!
//! ```
//! use std::sync::Arc;
//! use workbook::{datasets, Model, ModelConfig};
//! let graph = datasets::karate(&workbook::candle_core::Device::Cpu).unwrap();
//! let config = ModelConfig::gatv2(graph.num_features(), 8, 2, graph.num_classes());
//! let (model, _vars) = Model::init(config, 0, graph.device()).unwrap();
//! let model = Arc::new(model);
//! let handles: Vec<_> = (0..4)
//!     .map(|_| {
//!         let (model, graph) = (Arc::clone(&model), graph.clone());
//!         std::thread::spawn(move || model.forward(graph.x(), graph.edge_index(), None).unwrap())
//!     })
//!     .collect();
//! for handle in handles {
//!     let out = handle.join().unwrap();
//!     let (_layer, attention) = &out.attention[0];     // this thread's own attention
//!     assert_eq!(attention.edge_index.num_edges(), graph.num_edges() + graph.num_nodes());
//! }
//! ```
//!
//! - [`serving`]: the library helper. N threads share one `Arc<Model>`, answer a list of
//!   requests (different graphs, node subsets), and every answer is compared bit for bit with
//!   the sequential one; [`serving::sweep`] measures throughput versus thread count.
//! - [`send_sync`]: compile-time assertions that every model, layer, graph and serving type is
//!   `Send + Sync`; the library does not compile otherwise.
//! - [`snapshot`]: training while serving. The optimiser writes parameters in place, so serve
//!   from an immutable [`Snapshot`] that is swapped atomically after each step
//!   ([`SnapshotServer`]); readers never see two steps mixed. [`snapshot::torn_read_demo`] shows
//!   the hazard of serving the live `Var`s instead, deterministically.
//!
//! # The anti-pattern, and what Rust does and does not catch
//!
//! PyTorch Geometric's `GATv2Conv` before 2.5 passed the attention from `message()` to
//! `forward()` through `self._alpha` (issue 8741): `message()` wrote it, `forward()` read it,
//! asserted it was not `None` and cleared it. Two threads running inference on one module could
//! read each other's attention, or find `None` and fail with `AssertionError`.
//!
//! - [`StatefulGatV2`] (**anti-pattern**) ports that to Rust with a `Mutex`. It compiles — a
//!   `Mutex` is `Sync` — and it is still wrong: [`race_demo`] forces both bad interleavings with
//!   channels and shows thread A receiving thread B's attention, and a thread finding the slot
//!   empty (an error value, PyG's `AssertionError`), every time, while the stateless layer under
//!   the same interleavings never goes wrong.
//! - [`CellGatV2`] keeps the state in a `RefCell`, which is not `Sync`: putting it in an `Arc`
//!   and handing it to another thread **does not compile** (E0277, "`RefCell<..>` cannot be
//!   shared between threads safely"; the compile-fail tests in `crates/workbook-lessons/tests/compile_fail/`
//!   hold the exact message).
//!
//! Rust rules out data races; only the absence of shared mutable state rules out the logic race.
//!
//! One layer keeps state by design: `GCNConv(cached=true)` fills a `OnceLock` with the first
//! graph's normalisation, exactly like PyG (thread-safe, and first caller wins). Serve different
//! graphs with `cached=false`, the default.
//!
//! The CLI runs all of it: `workbook serve-demo --threads 1,2,4,8`.

pub mod cell_gatv2;
pub mod race_demo;
pub mod send_sync;
pub mod serving;
pub mod snapshot;
pub mod stateful_gatv2;

pub use cell_gatv2::CellGatV2;
pub use race_demo::{RaceDemo, Schedule};
pub use serving::{Request, Response, ServingRun};
pub use snapshot::{Snapshot, SnapshotServer};
pub use stateful_gatv2::StatefulGatV2;
