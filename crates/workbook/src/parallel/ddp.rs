//! Distributed data parallelism, one process (rank) per device: PyTorch's
//! `DistributedDataParallel` (DDP) on a [`World`].
//!
//! What each rank does, as DDP does it:
//!
//! 1. **At the start, rank 0's parameters are broadcast** to every rank, so ranks that
//!    initialised differently (another seed, a rank that loaded a checkpoint the others did not)
//!    start from the same model. A config that differs between ranks is refused before that.
//! 2. **Each rank trains on its own shard** of the seeds
//!    ([`DistributedSampler`](super::DistributedSampler)), on its own device.
//! 3. **After backward, the gradients are summed across ranks** in one bucket (one all-reduce
//!    of every gradient, flattened), then divided by the number of seeds in the step over all
//!    ranks. Every rank then takes the same optimiser step on the same gradients, so the
//!    parameters stay equal without another broadcast.
//! 4. **A rank without a batch still joins** ([`step`](DistributedDataParallel::step) with
//!    `None`): it adds zeros. A rank that skips the call instead leaves the others waiting; the
//!    [`World`] names it or ends the wait at its time limit.
//! 5. **Only rank 0 writes** checkpoints and reports ([`World::is_main`]); the model it saves is
//!    [`module`](DistributedDataParallel::module), whose names carry no `module.` prefix, so it
//!    loads in a one-process run as it is. (A PyTorch checkpoint saved from the DDP wrapper has
//!    that prefix; [`checkpoint::load`](crate::checkpoint) explains it and how to strip it.)
//!
//! **Equivalence.** The gradient of rank `r`'s summed loss over its `s_r` seeds, summed over
//! the ranks and divided by `S = Σ s_r`, is the gradient of the mean loss over all `S` seeds:
//! what [`DataParallel`](super::DataParallel) computes with one replica per rank on the same
//! batches, and what one device computes on their union. PyTorch's DDP divides by the world size
//! instead, which equals this only when every rank's batch has the same size; weighting by the
//! seeds keeps the last, smaller batches of an epoch exact. The sums run in another order, so
//! parameters agree to float tolerance (tested: within 1e-5 after an epoch).
//!
//! ```
//! use std::sync::Arc;
//! use workbook::{datasets, placement::Placement, Model, ModelConfig};
//! use workbook::loader::{LoaderConfig, NeighborLoader};
//! use workbook::parallel::{DistributedDataParallel, ThreadGroup, World};
//! use workbook::train::TrainConfig;
//! let g = datasets::karate(&Placement::cpu()).unwrap();
//! let config = ModelConfig::gcn(g.num_features(), 8, g.num_classes());
//! let finals = ThreadGroup::run(2, |group| {
//!     let world = Arc::new(World::new(Arc::new(group)));
//!     let rank = world.rank();
//!     // Each rank initialises with its own seed; rank 0's parameters win.
//!     let (model, _) = Model::init(config.clone(), rank as u64, &Placement::cpu())?;
//!     let at = Placement::sim(rank + 1);
//!     let mut ddp = DistributedDataParallel::new(&model, world, &at, &TrainConfig::gcn())?;
//!     let loader = NeighborLoader::new(&g, LoaderConfig::new(&[5, 5], 2))?;
//!     let batch = loader.batch(0, rank)?.to_device(&at)?;
//!     ddp.step(Some(&batch))?;
//!     Ok(ddp.module().vars()?[0].1.as_tensor().flatten_all()?.to_vec1::<f32>()?)
//! });
//! let (a, b) = (finals[0].as_ref().unwrap(), finals[1].as_ref().unwrap());
//! assert_eq!(a, b); // the same step on the same gradients: equal bit for bit
//! ```

use super::data_parallel::{replica_seed, SyncReport};
use super::world::{fingerprint, World};
use crate::error::{Result, WorkbookError};
use crate::loader::Batch;
use crate::model::Model;
use crate::placement::Placement;
use crate::train::{Adam, Dropout, TrainConfig};
use candle_core::{DType, Tensor, Var};
use std::sync::Arc;

/// One rank's replica of a model, trained with every other rank's (see the module docs).
pub struct DistributedDataParallel {
    world: Arc<World>,
    placement: Placement,
    model: Model,
    vars: Vec<(String, Var)>,
    opt: Adam,
    dropout: Dropout,
}

/// What one step computed, over all ranks.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct DistributedStep {
    /// The mean loss over the step's seeds on every rank.
    pub loss: f32,
    /// The step's seeds on every rank together.
    pub seeds: usize,
    /// This rank's seeds (0 when it had no batch).
    pub local_seeds: usize,
}

impl DistributedDataParallel {
    /// This rank's replica: `model` copied to `at`, the config checked to be every rank's, and
    /// rank 0's parameters broadcast into it (PyTorch: `DDP(model.to(rank), device_ids=[rank])`),
    /// with `train_config`'s optimiser and this rank's dropout stream (the one
    /// [`DataParallel`](super::DataParallel) gives replica `rank`).
    pub fn new(
        model: &Model,
        world: Arc<World>,
        at: &Placement,
        train_config: &TrainConfig,
    ) -> Result<Self> {
        model.check_materialized("DistributedDataParallel::new")?;
        let config = serde_json::to_string(model.config()).map_err(|e| {
            WorkbookError::InvalidConfig(format!("the model config cannot be written: {e}"))
        })?;
        world.agree("the model config", fingerprint(&config))?;
        world.agree(
            "the training config (learning rate, weight decay, seed)",
            fingerprint(&format!(
                "{} {} {} {}",
                train_config.lr,
                train_config.weight_decay,
                train_config.decay_first_layer_only,
                train_config.seed
            )),
        )?;
        let model = model.to_device(model.placement().destination(at))?;
        let vars = model.vars()?;
        let mut ddp = Self {
            opt: train_config.optimizer(&model)?,
            dropout: Dropout::new(replica_seed(train_config.seed, world.rank()), at.device()),
            world,
            placement: at.clone(),
            model,
            vars,
        };
        ddp.broadcast_parameters()?;
        Ok(ddp)
    }

    /// Rank 0's parameters copied into this rank's, in one bucket.
    fn broadcast_parameters(&mut self) -> Result<()> {
        let bucket = self.flat_parameters()?;
        let theirs = self
            .world
            .broadcast_tensor(&bucket, &self.placement, 0, "parameters")?;
        let mut offset = 0;
        for (_, v) in &self.vars {
            let n = v.as_tensor().elem_count();
            let part = theirs
                .narrow(0, offset, n)?
                .reshape(v.as_tensor().shape())?
                .to_dtype(v.as_tensor().dtype())?;
            v.set(&part)?;
            offset += n;
        }
        Ok(())
    }

    fn flat_parameters(&self) -> Result<Tensor> {
        let parts = self
            .vars
            .iter()
            .map(|(_, v)| v.as_tensor().flatten_all()?.to_dtype(DType::F32))
            .collect::<candle_core::Result<Vec<_>>>()?;
        Ok(Tensor::cat(&parts, 0)?)
    }

    /// The run this rank belongs to.
    pub fn world(&self) -> &Arc<World> {
        &self.world
    }

    /// This rank's device.
    pub fn placement(&self) -> &Placement {
        &self.placement
    }

    /// The model (PyTorch's `ddp.module`): save, export and evaluate this, on rank 0.
    pub fn module(&self) -> &Model {
        &self.model
    }

    /// Unwraps: the model (PyTorch's `model = ddp.module`).
    pub fn into_module(self) -> Model {
        self.model
    }

    /// The optimiser (each rank has its own, with the same state on every rank).
    pub fn optimizer(&self) -> &Adam {
        &self.opt
    }

    /// One training step on every rank: this rank's `batch` (on this rank's device), or `None`
    /// when its shard has run out; the gradients summed over the ranks in one all-reduce (with
    /// the seed counts and losses in the same bucket), divided by all ranks' seeds, and one
    /// optimiser step.
    pub fn step(&mut self, batch: Option<&Batch>) -> Result<DistributedStep> {
        let at = self.placement.clone();
        let nvars = self.vars.len();
        let mut parts: Vec<Tensor> = Vec::with_capacity(nvars + 1);
        let mut flags = vec![0f32; nvars];
        let (local_seeds, loss_sum) = match batch {
            Some(batch) => {
                batch.check_on(&format!("rank {}'s parameters", self.world.rank()), &at)?;
                let y = batch.y().ok_or_else(|| {
                    WorkbookError::InvalidGraph("the batch has no labels (batch.y)".into())
                })?;
                let bs = batch.batch_size();
                let out = self.model.forward_t(
                    batch.x(),
                    batch.edge_index(),
                    batch.edge_weight(),
                    Some(&mut self.dropout),
                )?;
                let ce = candle_nn::loss::cross_entropy(
                    &out.logits.narrow(0, 0, bs)?,
                    &y.narrow(0, 0, bs)?,
                )?;
                let sum = (&ce * bs as f64)?;
                let g = sum.backward()?;
                for (i, (_, v)) in self.vars.iter().enumerate() {
                    let t = v.as_tensor();
                    parts.push(match g.get(t) {
                        Some(grad) => {
                            flags[i] = 1.0;
                            grad.flatten_all()?.to_dtype(DType::F32)?
                        }
                        None => Tensor::zeros(t.elem_count(), DType::F32, at.device())?,
                    });
                }
                // The loss joins the bucket on the device: no read-back per step.
                (bs, sum.to_dtype(DType::F32)?.reshape(1)?)
            }
            None => {
                for (_, v) in &self.vars {
                    let t = v.as_tensor();
                    parts.push(Tensor::zeros(t.elem_count(), DType::F32, at.device())?);
                }
                (0, Tensor::zeros(1, DType::F32, at.device())?)
            }
        };
        let mut counts = flags;
        counts.push(local_seeds as f32);
        parts.push(Tensor::from_vec(counts, nvars + 1, at.device())?);
        parts.push(loss_sum);
        let bucket = Tensor::cat(&parts, 0)?;
        let total = bucket.elem_count();
        let reduced = self.world.all_reduce_tensor(&bucket, &at, "gradients")?;
        let tail: Vec<f32> = at.fetch_vec1(
            &reduced.narrow(0, total - nvars - 2, nvars + 2)?,
            "step counts",
        )?;
        let seeds = tail[nvars] as usize;
        if seeds == 0 {
            return Err(WorkbookError::Mismatched(
                "a distributed step in which no rank had a batch: give at least one rank a batch (the step count comes from the largest shard)".into(),
            ));
        }
        let mut grads = Vec::with_capacity(nvars);
        let mut offset = 0;
        for (i, (name, v)) in self.vars.iter().enumerate() {
            let t = v.as_tensor();
            let n = t.elem_count();
            if tail[i] > 0.0 {
                let g = (reduced.narrow(0, offset, n)?.reshape(t.shape())? / seeds as f64)?
                    .to_dtype(t.dtype())?;
                grads.push((name.clone(), g));
            }
            offset += n;
        }
        self.opt.step_with_gradients(&grads)?;
        Ok(DistributedStep {
            loss: tail[nvars + 1] / seeds as f32,
            seeds,
            local_seeds,
        })
    }

    /// Whether every rank's parameters equal rank 0's, bit for bit: rank 0's are broadcast and
    /// compared on each rank, and the verdict shared, so every rank returns the same
    /// `in_sync`. Its `differences` name this rank's parameters that differ.
    pub fn check_in_sync(&self) -> Result<SyncReport> {
        let mine = self.flat_parameters()?;
        let rank0 = self
            .world
            .broadcast_tensor(&mine, &self.placement, 0, "sync check")?;
        let a: Vec<f32> = self.placement.fetch_vec1(&mine, "sync check")?;
        let b: Vec<f32> = self.placement.fetch_vec1(&rank0, "sync check")?;
        let mut differences = Vec::new();
        let mut offset = 0;
        for (name, v) in &self.vars {
            let n = v.as_tensor().elem_count();
            let (x, y) = (&a[offset..offset + n], &b[offset..offset + n]);
            if x.iter().zip(y).any(|(p, q)| p.to_bits() != q.to_bits()) {
                let max = x
                    .iter()
                    .zip(y)
                    .map(|(p, q)| (p - q).abs())
                    .fold(0f32, f32::max);
                differences.push(format!(
                    "rank {} ({}): '{name}' differs from rank 0 by up to {max:e}",
                    self.world.rank(),
                    self.placement
                ));
            }
            offset += n;
        }
        let any = self
            .world
            .any(!differences.is_empty(), "sync check verdict")?;
        Ok(SyncReport {
            in_sync: !any,
            differences,
        })
    }
}
