//! One module per subcommand.

pub mod batch_file;
pub mod bench;
pub mod bench_data_parallel;
pub mod bench_minibatch;
pub mod data;
pub mod demo;
pub mod devices;
pub mod export;
pub mod figures;
pub mod gather;
pub mod import;
pub mod inspect;
pub mod minibatch_args;
pub mod predict;
pub mod prefetch_figure;
pub mod reorder_arg;
pub mod roofline;
pub mod serve_demo;
pub mod train;
pub mod train_data_parallel;
pub mod train_distributed;
