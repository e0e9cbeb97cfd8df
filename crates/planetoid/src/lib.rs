//! A safe reader for the original Planetoid citation graphs (Cora and CiteSeer), assembled exactly
//! as PyTorch Geometric 2.8 does with `NormalizeFeatures`.
//!
//! The Planetoid files (`ind.<name>.{x,tx,allx,y,ty,ally,graph,test.index}`) are Python 2
//! pickles of numpy arrays, SciPy CSR matrices and a `defaultdict`. Unpickling them in Python
//! can execute arbitrary code; this crate instead evaluates the pickle opcodes into inert data
//! ([`pickle`]), accepts only the few numpy/SciPy/`collections` shapes the files really contain
//! ([`numpy`], [`scipy_sparse`], [`graph_dict`]), bounds every size, and reports any corrupt or
//! unexpected file as a typed [`PlanetoidError`] — it never panics on bad input. [`dataset`]
//! reproduces PyG's `read_planetoid_data` (test-row reordering, CiteSeer's isolated test nodes,
//! the public split, self-loop removal and coalescing) and its `NormalizeFeatures`.
//!
//! ```no_run
//! use planetoid::{load, PlanetoidName};
//!
//! let data = load("data/planetoid", PlanetoidName::CiteSeer)?;
//! assert_eq!((data.num_nodes, data.num_edges()), (3327, 9104));
//! assert_eq!(data.train_mask.iter().filter(|&&m| m).count(), 120);
//! let row0 = data.features(0).unwrap();
//! assert!((row0.iter().sum::<f32>() - 1.0).abs() < 1e-5);
//! # Ok::<(), planetoid::PlanetoidError>(())
//! ```
//!
//! Errors name the file and say what to do:
//!
//! ```
//! use planetoid::{assemble, PlanetoidFiles, PlanetoidName};
//! let files = PlanetoidFiles::default(); // eight empty files
//! let err = assemble(PlanetoidName::Cora, &files).unwrap_err();
//! assert_eq!(
//!     err.to_string(),
//!     "ind.cora.x: truncated pickle (no STOP opcode: the data ends at byte 0, in the opcode \
//!      starting at offset 0); the file is incomplete — delete it and download again"
//! );
//! ```

pub mod dataset;
pub mod error;
pub mod graph_dict;
pub mod numpy;
pub mod pickle;
pub mod scipy_sparse;

#[cfg(test)]
mod test_pickles;

pub use dataset::{
    assemble, load, parse_test_index, Planetoid, PlanetoidFiles, PlanetoidName, FILE_PARTS,
    MAX_FILE_BYTES, MAX_NODES, NUM_VAL,
};
pub use error::{DecodeError, PickleError, PlanetoidError, Result};
