//! Full-batch node classification: PyTorch's Adam and the training loop, full-batch and by
//! mini-batches. (The seeded dropout is an op, [`crate::ops::dropout`], re-exported here.)

pub mod adam;
pub mod evaluation;
pub mod minibatch;
pub mod trainer;

pub use crate::ops::dropout;
pub use crate::ops::Dropout;
pub use adam::Adam;
pub use trainer::{train, EpochStats, TrainConfig, TrainReport, Trainer};
