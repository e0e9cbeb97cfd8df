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
    if world_size == 0 || rank >= world_size {
        return Err(WorkbookError::InvalidConfig(format!(
            "rank {rank} of a world of {world_size}: ranks are 0..world_size, and a world has at least one rank"
        )));
    }
    // The run's seed and the epoch make the key; the rank does not: every rank must shuffle
    // the same way, or the shards overlap.
    let mut key = [0u8; 32];
    key[..8].copy_from_slice(&seed.to_le_bytes());
    key[8..16].copy_from_slice(&epoch.to_le_bytes());
    let mut order = seeds.to_vec();
    order.shuffle(&mut ChaCha8Rng::from_seed(key));
    Ok(order.into_iter().skip(rank).step_by(world_size).collect())
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
    let at = model.placement();
    let params = model.named_parameters();
    // This rank's part of the bucket: every gradient flattened (zeros without a batch: the
    // rank still joins), then its seed count.
    let mut parts = Vec::with_capacity(params.len() + 1);
    match local {
        Some(local) => {
            let given: Vec<&str> = local.grads.iter().map(|(n, _)| n.as_str()).collect();
            let wanted: Vec<&str> = params.iter().map(|(n, _)| n.as_str()).collect();
            if given != wanted {
                return Err(WorkbookError::InvalidConfig(format!(
                    "rank {} gave gradients for {given:?}; the model's parameters are {wanted:?}",
                    world.rank()
                )));
            }
            for ((name, p), (_, g)) in params.iter().zip(&local.grads) {
                if g.dims() != p.dims() {
                    return Err(WorkbookError::InvalidConfig(format!(
                        "rank {}: the gradient of {name} has the shape {:?}, the parameter {:?}",
                        world.rank(),
                        g.dims(),
                        p.dims()
                    )));
                }
                parts.push(g.flatten_all()?.to_dtype(DType::F32)?);
            }
        }
        None => {
            for (_, p) in &params {
                parts.push(p.flatten_all()?.zeros_like()?.to_dtype(DType::F32)?);
            }
        }
    }
    let seeds = local.map_or(0, |l| l.seeds);
    // A count in float32 is exact up to 2^24 seeds per step.
    parts.push(Tensor::new(&[seeds as f32], at.device())?);
    let bucket = Tensor::cat(&parts, 0)?;
    let summed = world.all_reduce_tensor(&bucket, at, "gradients and seeds")?;
    let n = summed.elem_count();
    let total: Vec<f32> = at.fetch_vec1(&summed.narrow(0, n - 1, 1)?, "seeds of all ranks")?;
    let total = total[0];
    if total == 0.0 {
        // Every rank sees the same sum, so every rank returns this error: none is left waiting.
        return Err(WorkbookError::InvalidConfig(
            "no rank had a batch in this step: the mean over no seeds is 0/0; give the step count of the largest shard".into(),
        ));
    }
    let mut averaged = Vec::with_capacity(params.len());
    let mut offset = 0;
    for (name, p) in &params {
        let len = p.elem_count();
        let g = (summed.narrow(0, offset, len)?.reshape(p.shape())? / f64::from(total))?
            .to_dtype(p.dtype())?;
        averaged.push((name.clone(), g));
        offset += len;
    }
    Ok(averaged)
}

/// Writes `model` to `path` (`workbook::checkpoint::save`) on rank 0 only, and returns on every
/// rank once it is written: no rank goes on before the file is there. When rank 0 cannot write
/// it, every rank returns an error.
pub fn save_if_main(world: &World, model: &Model, path: &Path) -> Result<()> {
    let written = if world.is_main() {
        checkpoint::save(model, path)
    } else {
        Ok(())
    };
    // Every rank waits here for rank 0 (a barrier that also carries whether the write failed,
    // so the other ranks learn of it instead of going on without a checkpoint).
    let failed = world.any(written.is_err(), "checkpoint written")?;
    written?;
    if failed {
        return Err(WorkbookError::InvalidConfig(format!(
            "rank 0 could not write the checkpoint {} (its own error says why)",
            path.display()
        )));
    }
    Ok(())
}
