//! `--batch-size`, `--num-neighbors`, `--prefetch`: the mini-batch options `train` and `bench`
//! share, under PyG's names (chapter 5).

use workbook::train::minibatch::MiniBatchConfig;

/// Flattened into a subcommand's arguments (`#[command(flatten)]`).
#[derive(clap::Args, Clone, Debug)]
pub struct MiniBatchArgs {
    /// Train by mini-batches of this many seed (training) nodes, sampled with PyG's
    /// NeighborLoader semantics on the host; each batch moves to the device every step
    /// (`bench`: one more JSON line, the mini-batch epoch next to the full-batch one).
    #[arg(long)]
    pub batch_size: Option<usize>,
    /// Neighbours sampled per node, one count per layer (-1: all), as PyG's num_neighbors.
    /// Default 10 per layer. Needs --batch-size.
    #[arg(
        long,
        value_delimiter = ',',
        allow_hyphen_values = true,
        requires = "batch_size"
    )]
    pub num_neighbors: Option<Vec<i64>>,
    /// Prepare the next batches on a background thread while the current one computes.
    #[arg(long, requires = "batch_size")]
    pub prefetch: bool,
}

impl MiniBatchArgs {
    /// `--num-neighbors`, or 10 per layer of a model with `layers` layers.
    pub fn num_neighbors(&self, layers: usize) -> Vec<i64> {
        self.num_neighbors
            .clone()
            .unwrap_or_else(|| vec![10; layers])
    }

    /// The loader settings for `batch_size` seeds a batch (prefetching 2 batches with
    /// `--prefetch`); evaluation as `MiniBatchConfig::new` sets it.
    pub fn config(&self, batch_size: usize, layers: usize) -> MiniBatchConfig {
        MiniBatchConfig {
            prefetch: if self.prefetch { 2 } else { 0 },
            ..MiniBatchConfig::new(&self.num_neighbors(layers), batch_size)
        }
    }
}
