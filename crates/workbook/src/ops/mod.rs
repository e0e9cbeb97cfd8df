//! Graph operations candle lacks or does slowly: the segment max and per-destination softmax,
//! the fused message-passing kernels (CPU, multi-threaded; CUDA behind the `cuda` feature)
//! that GCN and GATv2 use on a destination-sorted [`Csr`], the seeded [`Dropout`] the
//! layers and models apply in training (an op, as in candle-nn), and the gather and scatter over
//! an unchecked index that a reader's own layer uses as PyG does ([`raw_index`]).

pub mod aggregate;
pub mod cpu_pool;
pub mod csr_softmax;
pub mod dropout;
pub mod elu;
pub mod gat_scores;
mod gat_scores_8x8;
pub mod gcn_norm;
pub mod gcn_spmm;
pub mod huge_pages;
pub mod kernel_support;
pub mod linear;
pub mod product;
pub mod raw_index;
pub mod relu;
pub mod segment_max;
pub mod segment_softmax;
pub mod sparse_features;
pub mod spmm;

pub use crate::edge_index::csr;
pub use aggregate::aggregate_sum;
pub use cpu_pool::{cpu_threads, on_cpu_pool, set_cpu_threads};
pub use csr::Csr;
pub use csr_softmax::csr_softmax;
pub use dropout::Dropout;
pub use gat_scores::gat_scores;
pub use gcn_spmm::gcn_spmm;
pub use kernel_support::{kernels_support, GatherSchedule, CUDA_MESSAGE_PASSING, MAX_BLOCK_ROWS};
pub use segment_max::segment_max;
pub use segment_softmax::segment_softmax;
pub use spmm::{csr_spmm, csr_spmm_scheduled};
