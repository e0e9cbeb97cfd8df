//! Graph convolution layers with PyTorch Geometric's semantics, parameter names and options.

pub mod gatv2_conv;
pub mod gcn_conv;
pub(crate) mod init;

pub use gatv2_conv::{Attention, GatV2Config, GatV2Conv, GatV2Output};
pub use gcn_conv::{GcnConfig, GcnConv};
