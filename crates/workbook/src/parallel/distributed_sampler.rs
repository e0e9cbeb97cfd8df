//! Each rank's share of the training seeds for one epoch: PyTorch's `DistributedSampler`.
//!
//! Every rank shuffles the same list with the same seed and the epoch number, then takes every
//! `world_size`-th entry from its rank on, so the shards of one epoch are disjoint and together
//! cover every seed exactly once. Two classic mistakes live here:
//!
//! - **every rank loading the whole training set** (no sampler): each epoch trains every node
//!   `world_size` times and the run is no faster;
//! - **forgetting `set_epoch`**: the shuffle then repeats every epoch (PyTorch's docs: "calling
//!   the set_epoch() method at the beginning of each epoch ... is necessary to make shuffling
//!   work properly across multiple epochs"). Here the epoch is an argument of
//!   [`shard`](DistributedSampler::shard), so it cannot be forgotten, only passed wrong.
//!
//! Unlike PyTorch's default (`drop_last=False`, which pads the last shards with repeated seeds
//! so that every rank gets the same count), nothing is repeated: the first `len % world_size`
//! ranks get one seed more. The training loop must then still call every collective on the
//! ranks that ran out of batches ([`DistributedDataParallel::step`] with `None`), which is
//! exactly PyTorch's "uneven inputs" problem that `model.join()` solves.
//!
//! [`DistributedDataParallel::step`]: super::DistributedDataParallel::step
//!
//! ```
//! use workbook::parallel::DistributedSampler;
//! let seeds: Vec<u32> = (0..10).collect();
//! let shards: Vec<Vec<u32>> = (0..3)
//!     .map(|rank| DistributedSampler::new(3, rank, 7).unwrap().shard(&seeds, 1))
//!     .collect();
//! assert_eq!(shards.iter().map(Vec::len).collect::<Vec<_>>(), vec![4, 3, 3]);
//! let mut all: Vec<u32> = shards.concat();
//! all.sort();
//! assert_eq!(all, seeds); // every seed exactly once
//! let next = DistributedSampler::new(3, 0, 7).unwrap().shard(&seeds, 2);
//! assert_ne!(next, shards[0]); // another epoch, another shuffle
//! ```

use crate::error::{Result, WorkbookError};
use rand::seq::SliceRandom;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

/// One rank's sampler (see the module docs).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DistributedSampler {
    world_size: usize,
    rank: usize,
    seed: u64,
    shuffle: bool,
}

impl DistributedSampler {
    /// The sampler of `rank` among `world_size` ranks; every rank must give the same `seed`.
    pub fn new(world_size: usize, rank: usize, seed: u64) -> Result<Self> {
        if world_size == 0 || rank >= world_size {
            return Err(WorkbookError::InvalidConfig(format!(
                "rank {rank} of a world of {world_size}: ranks are 0..world_size, and a world has at least one rank"
            )));
        }
        Ok(Self {
            world_size,
            rank,
            seed,
            shuffle: true,
        })
    }

    /// Keeps the seeds' order (evaluation); the shards still take every `world_size`-th seed.
    pub fn without_shuffle(mut self) -> Self {
        self.shuffle = false;
        self
    }

    /// This rank.
    pub fn rank(&self) -> usize {
        self.rank
    }

    /// How many ranks share the seeds.
    pub fn world_size(&self) -> usize {
        self.world_size
    }

    /// The order of all `seeds` in `epoch`, the same on every rank.
    pub fn epoch_order(&self, seeds: &[u32], epoch: u64) -> Vec<u32> {
        let mut order = seeds.to_vec();
        if self.shuffle {
            let mut rng =
                ChaCha8Rng::seed_from_u64(self.seed ^ epoch.wrapping_mul(0x9E37_79B9_7F4A_7C15));
            order.shuffle(&mut rng);
        }
        order
    }

    /// This rank's seeds for `epoch` (PyTorch: `sampler.set_epoch(epoch)`, then iterate).
    pub fn shard(&self, seeds: &[u32], epoch: u64) -> Vec<u32> {
        self.epoch_order(seeds, epoch)
            .into_iter()
            .skip(self.rank)
            .step_by(self.world_size)
            .collect()
    }

    /// How many seeds rank `rank` gets out of `len`: the first `len % world_size` ranks one more.
    pub fn shard_len(&self, len: usize, rank: usize) -> usize {
        len / self.world_size + usize::from(rank < len % self.world_size)
    }

    /// Steps in an epoch of `len` seeds at `batch_size` seeds per rank and step: the largest
    /// shard's (rank 0's) batch count, the same on every rank, so that every rank makes the
    /// same number of collective calls.
    pub fn steps(&self, len: usize, batch_size: usize) -> usize {
        self.shard_len(len, 0).div_ceil(batch_size.max(1))
    }
}
