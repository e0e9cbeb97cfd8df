//! Mini-batches: PyG's `NeighborLoader`, batches that move to the device every step, and
//! prefetching.
//!
//! "The model moves once, the data moves every batch": a [`NeighborLoader`] samples a small
//! subgraph around each batch of seed nodes on the host ([`sampler`]), each [`Batch`] is moved
//! whole with [`Batch::to_device`] inside the loop (the [ledger](crate::ledger) shows the
//! per-step traffic), and [`Prefetch`] prepares the next batches on a background thread.
//!
//! ```
//! use workbook::{datasets, loader::{NeighborLoader, LoaderConfig}, ledger::Ledger, placement::Placement};
//! let g = datasets::karate(&Placement::cpu()).unwrap();
//! let ledger = Ledger::new();
//! let device = Placement::sim(1).with_ledger(&ledger);
//! let loader = NeighborLoader::new(&g, LoaderConfig::new(&[10, 10], 16)).unwrap();
//! for batch in loader.batches(0) {
//!     let batch = batch.unwrap().to_device(&device).unwrap(); // every step, every part
//!     assert_eq!(batch.placement(), &device);
//! }
//! assert_eq!(ledger.transfers().len(), 3 * 5); // 3 batches x (x, edge_index, y, n_id, e_id)
//! ```

pub mod batch;
pub mod neighbor_loader;
pub mod prefetch;
pub mod sampler;

pub use batch::{Batch, BatchPart, Prepared};
pub use neighbor_loader::{InputNodes, LoaderConfig, NeighborLoader};
pub use prefetch::Prefetch;
pub use sampler::{NeighborSampler, Sampled};
