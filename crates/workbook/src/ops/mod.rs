//! Graph operations candle lacks: the segment max and the per-destination softmax built on it.

pub mod segment_max;
pub mod segment_softmax;

pub use segment_max::segment_max;
pub use segment_softmax::segment_softmax;
