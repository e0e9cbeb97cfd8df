//! One module per subcommand.

pub mod data;
pub mod demo;
pub mod predict;
pub mod train;
