//! Full-batch node classification: seeded dropout, PyTorch's Adam, and the training loop.

pub mod adam;
pub mod dropout;
pub mod evaluation;
pub mod minibatch;
pub mod trainer;

pub use adam::Adam;
pub use dropout::Dropout;
pub use trainer::{train, EpochStats, TrainConfig, TrainReport, Trainer};
