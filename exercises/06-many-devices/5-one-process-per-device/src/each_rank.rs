//! One process per device, written by hand: the three things every rank of a distributed
//! data-parallel run must do that one process with many replicas (06-1 to 06-4) never had to.
//!
//! With PyTorch's `DistributedDataParallel` the same program runs once per device
//! (`mpirun -n 2 ...`, `torchrun --nproc-per-node 2 ...`), each copy a **rank** that holds one
//! replica and sees only its own tensors. What the ranks share, they share through collectives
//! ([`World`]: all-reduce, broadcast, barrier), which every rank must call, in the same order:
//! collectives are matched by order, not by name.
//!
//! * **Its own shard of the seeds** ([`shard`]). Every rank shuffles the *same* list in the
//!   same way, from the run's seed and the **epoch** (PyTorch's `sampler.set_epoch(epoch)`;
//!   forget it and every epoch repeats the first one's order), and keeps its part: the shards
//!   of one epoch are disjoint and together hold every seed exactly once. A rank that shuffles
//!   with its own seed, or that takes every seed, trains some nodes several times per epoch and
//!   others never. Nothing is repeated to even out the shards (PyTorch pads them by default):
//!   shards differ by at most one seed.
//! * **The gradients summed across ranks, divided by every rank's seeds**
//!   ([`average_gradients`]). Each rank's backward ran on the *sum* of its seeds' losses; the sum
//!   over the ranks, divided by the number of seeds of all ranks `S`, is the gradient of the
//!   mean loss over the whole step, what one process computes on all the seeds. Dividing by the
//!   number of ranks is right only when every rank's batch has the same size, and an epoch's
//!   last batches rarely do. Every gradient and the seed count travel in **one** all-reduce (a
//!   bucket): a collective costs a round trip whatever its size. A rank whose shard has run out
//!   of batches **still joins**, with zeros and no seeds: a rank that skips the call leaves the
//!   others waiting (here until the [`World`]'s time limit, in PyTorch forever).
//! * **One checkpoint, written by rank 0** ([`save_if_main`]), of the model itself (its names
//!   have no `module.` prefix, so it loads in a one-process run as it is), and **every rank
//!   waits** until it is written: a rank that reads it next (to resume, to evaluate) must not
//!   find it missing or half there. Every rank writing the same file is wasted work at best.
//!
//! ```text
//! for epoch in 0..epochs {
//!     let mine = shard(&train, world.rank(), world.world_size(), epoch, run_seed)?;
//!     for step in 0..steps {                       // the same count on every rank
//!         let local = batch_of(&mine, step).map(backward_of_summed_loss); // None: no batch left
//!         let grads = average_gradients(&world, &model, local.as_ref())?; // every rank calls it
//!         optimiser.step(&grads)?;                 // the same step on every rank
//!     }
//!     save_if_main(&world, &model, &path)?;        // rank 0 writes, every rank waits
//! }
//! ```

// The imports are those of the finished file; until then some are unused.
#![allow(unused_imports)]

use std::path::Path;
use workbook::candle_core::{DType, Tensor};
use workbook::checkpoint;
use workbook::parallel::World;
use workbook::rand::seq::SliceRandom;
use workbook::rand::SeedableRng;
use workbook::rand_chacha::ChaCha8Rng;
use workbook::{Model, Result, WorkbookError};

/// This rank's seeds for `epoch`: `seeds` shuffled by `seed` and `epoch` alone (the same order
/// on every rank, another one each epoch), then every `world_size`-th of them from `rank` on.
/// Over the ranks `0..world_size` the shards are disjoint, hold every seed exactly once and
/// differ in size by at most one. An error when `world_size` is 0 or `rank` is not below it.
pub fn shard(
    seeds: &[u32],
    rank: usize,
    world_size: usize,
    epoch: u64,
    seed: u64,
) -> Result<Vec<u32>> {
    // TODO: refuse a world of 0 ranks or a rank not below it; shuffle `seeds` with an RNG keyed by `seed` and `epoch` (never the rank: workbook::rand and workbook::rand_chacha), then keep every `world_size`-th from `rank` on.
    todo!(
        "shard: rank {rank} of {world_size}, epoch {epoch}, run seed {seed}, {} seeds",
        seeds.len()
    )
}

/// What this rank's batch gave in a step.
#[derive(Clone, Debug)]
pub struct LocalGradients {
    /// How many seeds the batch had.
    pub seeds: usize,
    /// The gradient of the **summed** loss over those seeds, one per parameter of the model, in
    /// its order (`model.named_parameters()`), on the rank's device.
    pub grads: Vec<(String, Tensor)>,
}

/// The gradient of the mean loss over every rank's seeds, per parameter of `model` (in its
/// order), on `model`'s device, the same on every rank: the ranks' gradients summed and divided
/// by the seeds of all ranks. Every rank calls it once per step, `local` being `None` when its
/// shard has no batch left; the gradients and the seed count travel in one all-reduce. An error
/// on every rank when no rank had seeds; an error when `local` does not list `model`'s
/// parameters in its order with their shapes.
pub fn average_gradients(
    world: &World,
    model: &Model,
    local: Option<&LocalGradients>,
) -> Result<Vec<(String, Tensor)>> {
    // TODO: one bucket (every gradient flattened, zeros without a batch, then the seed count), one all-reduce (world.all_reduce_tensor), then each parameter's part divided by the seeds of all ranks; an error when no rank had seeds.
    todo!(
        "average_gradients: rank {} of {}, {} seeds, {} parameters",
        world.rank(),
        world.world_size(),
        local.map_or(0, |l| l.seeds),
        model.named_parameters().len()
    )
}

/// Writes `model` to `path` (`workbook::checkpoint::save`) on rank 0 only, and returns on every
/// rank once it is written: no rank goes on before the file is there. When rank 0 cannot write
/// it, every rank returns an error.
pub fn save_if_main(world: &World, model: &Model, path: &Path) -> Result<()> {
    // TODO: rank 0 writes (workbook::checkpoint::save); then every rank waits in one collective until it is written (world.barrier, or world.any to share a failure too).
    todo!(
        "save_if_main: rank {} of {} to {}, from {}",
        world.rank(),
        world.world_size(),
        path.display(),
        model.placement()
    )
}
