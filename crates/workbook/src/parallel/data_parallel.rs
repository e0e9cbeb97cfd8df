//! Data parallelism: one replica of the model per device, each taking its share of a step's
//! mini-batches; gradients reduced onto the first device, one optimiser step there, the new
//! parameters broadcast back.
//!
//! PyTorch's `nn.DataParallel(model, device_ids=[0, 1])` replicates the model onto every device
//! on each forward, scatters the batch, and gathers the outputs to `cuda:0`; the classic
//! failures all come from that: a replica reading a weight that was never copied to its device,
//! outputs gathered to `cuda:0` while the labels sit on `cuda:1`, optimiser state on one device
//! for parameters on another, a checkpoint saved from the wrapper with `module.` names. A
//! [`DataParallel`] keeps one persistent replica per device (as DistributedDataParallel does) and
//! makes each of those a named error:
//!
//! - every replica's parameters and buffers are checked to be on that replica's device before
//!   each step ([`DataParallel::check_replicas`], [`Role::ReplicaTensor`]);
//! - each batch must be on its replica's device (`batch.y` left behind is named);
//! - the optimiser updates the first replica and its state must be there
//!   ([`DataParallel::with_optimizer`]);
//! - gathered outputs check the labels' device ([`Gathered::cross_entropy`], [`Role::Label`]);
//! - the wrapper is not a [`Model`]: `checkpoint::save(&dp, ..)` and `onnx::write(&dp, ..)` do
//!   not compile; unwrap with [`DataParallel::module`] or [`DataParallel::into_module`].
//!
//! **Equivalence with one device.** A step over batches `b_0 .. b_{n-1}` (with `s_k` seeds each,
//! `S` in all) makes replica `k` back-propagate `cross_entropy(b_k) · s_k / S`; the reduce sums
//! those gradients, which is the gradient of the mean loss over all `S` seeds, exactly what one
//! device computes on the same batches. Only the order of additions differs (per-replica sums
//! of per-node terms, then a sum over replicas), so losses agree to float tolerance. With one
//! device the step is the mini-batch trainer's, bit for bit.
//!
//! Every copy is in the [ledger](crate::ledger): `replicate ...` once, then per step the
//! batches, `reduce grad[...]` (one per replica after the first) and `broadcast ...`.
//!
//! ```
//! use workbook::{datasets, ledger::Ledger, placement::Placement, Model, ModelConfig};
//! use workbook::loader::{LoaderConfig, NeighborLoader};
//! use workbook::parallel::DataParallel;
//! use workbook::train::TrainConfig;
//! let g = datasets::karate(&Placement::cpu()).unwrap();
//! let ledger = Ledger::new();
//! let devices = [Placement::sim(1).with_ledger(&ledger), Placement::sim(2).with_ledger(&ledger)];
//! let (model, _) = Model::init(ModelConfig::gcn(g.num_features(), 8, g.num_classes()), 0, &Placement::cpu()).unwrap();
//! let mut dp = DataParallel::new(&model, &devices, &TrainConfig::gcn()).unwrap();
//! let loader = NeighborLoader::new(&g, LoaderConfig::new(&[5, 5], 2)).unwrap();
//! let batches: Vec<_> = loader.batches(0).take(2).collect::<Result<_, _>>().unwrap();
//! let on_devices = dp.scatter(&batches).unwrap();  // batch k to device k
//! let step = dp.step(&on_devices).unwrap();
//! assert!(step.loss().unwrap().is_finite());
//! assert!(dp.check_in_sync().unwrap().in_sync);
//! assert!(ledger.transfers().iter().any(|t| t.what == "reduce grad[conv1.lin.weight]"));
//! ```

use super::collective::{Collective, HostCollective};
use crate::error::{Result, WorkbookError};
use crate::loader::Batch;
use crate::model::Model;
use crate::module::{Kind, Module};
use crate::placement::{check_all, Placed, Placement, Role};
use crate::train::{Adam, Dropout, TrainConfig};
use candle_core::{DType, Tensor, Var, D};
use std::sync::Arc;

/// The label of the ledger mark [`DataParallel::step`] leaves where each step begins.
pub const STEP_MARK: &str = "data-parallel step";

/// Replicas of one model on several devices, trained as one (see the module docs).
pub struct DataParallel {
    devices: Vec<Placement>,
    replicas: Vec<Model>,
    vars: Vec<Vec<(String, Var)>>,
    opt: Adam,
    dropouts: Vec<Dropout>,
    collective: Arc<dyn Collective>,
}

/// What one step computed, per replica that had a batch.
pub struct Step {
    /// Per replica: the mean cross-entropy over its seeds (on its device) and the seed count.
    pub per_replica: Vec<(Tensor, usize)>,
    devices: Vec<Placement>,
}

impl Step {
    /// The step's mean loss over all its seeds, read back to the host (one transfer per
    /// replica, recorded as `loss`).
    pub fn loss(&self) -> Result<f32> {
        let seeds: usize = self.per_replica.iter().map(|(_, s)| s).sum();
        let mut total = 0f64;
        for ((loss, s), at) in self.per_replica.iter().zip(&self.devices) {
            let l: f32 = at.fetch_scalar(&loss.to_dtype(DType::F32)?, "loss")?;
            total += l as f64 * *s as f64;
        }
        Ok((total / seeds.max(1) as f64) as f32)
    }
}

/// The outcome of [`DataParallel::check_in_sync`].
#[derive(Clone, Debug, PartialEq)]
pub struct SyncReport {
    /// Every replica's every parameter equals the first replica's, bit for bit.
    pub in_sync: bool,
    /// One line per parameter that differs: replica, device, name, largest difference.
    pub differences: Vec<String>,
}

impl DataParallel {
    /// Replicates `model` onto every device of `devices` (a copy of every parameter and buffer
    /// per device, recorded as `replicate ...`), with `train_config`'s optimiser on the first
    /// replica and one dropout stream per replica (the first is the single-device trainer's).
    pub fn new(model: &Model, devices: &[Placement], train_config: &TrainConfig) -> Result<Self> {
        // Replicas of a lazy model would each create their weights at their first pass.
        model.check_materialized("DataParallel::new")?;
        check_devices(devices)?;
        let replicas = devices
            .iter()
            .map(|d| replicate(model, d))
            .collect::<Result<Vec<_>>>()?;
        let opt = train_config.optimizer(&replicas[0])?;
        Self::assemble(replicas, devices, opt, train_config.seed)
    }

    /// Wraps replicas made elsewhere (one per device, in order), with `train_config`'s
    /// optimiser on the first. Each replica is checked to be entirely on its device: a replica
    /// that still reads a tensor from another device is named, with the fix.
    pub fn from_replicas(
        replicas: Vec<Model>,
        devices: &[Placement],
        train_config: &TrainConfig,
    ) -> Result<Self> {
        check_devices(devices)?;
        if replicas.len() != devices.len() {
            return Err(WorkbookError::Mismatched(format!(
                "{} replica(s) for {} device(s): give one replica per device",
                replicas.len(),
                devices.len()
            )));
        }
        check_replicas(&replicas, devices)?;
        let opt = train_config.optimizer(&replicas[0])?;
        Self::assemble(replicas, devices, opt, train_config.seed)
    }

    fn assemble(replicas: Vec<Model>, devices: &[Placement], opt: Adam, seed: u64) -> Result<Self> {
        let vars = replicas
            .iter()
            .map(Model::vars)
            .collect::<Result<Vec<_>>>()?;
        let dropouts = devices
            .iter()
            .enumerate()
            .map(|(k, d)| Dropout::new(replica_seed(seed, k), d.device()))
            .collect();
        Ok(Self {
            devices: devices.to_vec(),
            replicas,
            vars,
            opt,
            dropouts,
            collective: Arc::new(HostCollective),
        })
    }

    /// Uses `opt` instead of the recipe's optimiser. It must update the first replica's
    /// parameters, with its state on the first device: an optimiser restored on another device
    /// and rebound without moving its state is named (`exp_avg[...]` on `sim:2`, parameters on
    /// `sim:1`). Move it with `opt.to_model(dp.module())`.
    pub fn with_optimizer(mut self, opt: Adam) -> Result<Self> {
        if !opt.is_bound_to(&self.replicas[0]) {
            return Err(WorkbookError::Mismatched(
                "the optimiser does not update the first replica's parameters (it was built for another copy of the model); bind it with opt.to_model(dp.module())".into(),
            ));
        }
        opt.check_placement()?;
        self.opt = opt;
        Ok(self)
    }

    /// Replaces the reduce and broadcast (e.g. with an NCCL-backed [`Collective`]).
    pub fn with_collective(mut self, collective: Arc<dyn Collective>) -> Self {
        self.collective = collective;
        self
    }

    /// The reduce and broadcast in use.
    pub fn collective(&self) -> &dyn Collective {
        self.collective.as_ref()
    }

    /// The devices, one per replica; the first holds the optimiser.
    pub fn devices(&self) -> &[Placement] {
        &self.devices
    }

    /// The replicas, one per device.
    pub fn replicas(&self) -> &[Model] {
        &self.replicas
    }

    /// The wrapped model: the first replica (PyTorch's `dp.module`). Save, export and evaluate
    /// this, not the wrapper.
    pub fn module(&self) -> &Model {
        &self.replicas[0]
    }

    /// Unwraps: the first replica, the others dropped (PyTorch's `model = dp.module`).
    pub fn into_module(self) -> Model {
        self.replicas
            .into_iter()
            .next()
            .expect("at least one replica")
    }

    /// The optimiser (on the first device).
    pub fn optimizer(&self) -> &Adam {
        &self.opt
    }

    /// Every replica's parameters and buffers on that replica's device; names the first one
    /// that is not.
    pub fn check_replicas(&self) -> Result<()> {
        check_replicas(&self.replicas, &self.devices)
    }

    /// Batch `k` copied to device `k` (PyTorch's scatter), each part in the ledger. At most one
    /// batch per device.
    pub fn scatter(&self, batches: &[Batch]) -> Result<Vec<Batch>> {
        self.check_batch_count(batches.len())?;
        batches
            .iter()
            .zip(&self.devices)
            .map(|(b, d)| b.to_device(d))
            .collect()
    }

    /// One training step: replica `k` takes `batches[k]` (already on device `k`; fewer batches
    /// than devices leaves the last replicas idle), the gradients are reduced onto the first
    /// device, the optimiser steps once, and the new parameters are broadcast. The first
    /// device's ledger, if any, is marked [`STEP_MARK`] where the step begins (after the batches'
    /// copies, before the reduce's).
    pub fn step(&mut self, batches: &[Batch]) -> Result<Step> {
        self.check_batch_count(batches.len())?;
        if batches.is_empty() {
            return Err(WorkbookError::Mismatched(
                "a data-parallel step needs at least one batch".into(),
            ));
        }
        self.check_replicas()?;
        if let Some(l) = self.devices[0].ledger() {
            l.mark(STEP_MARK);
        }
        let seeds: usize = batches.iter().map(Batch::batch_size).sum();
        let mut per_replica = Vec::with_capacity(batches.len());
        let mut grads: Vec<Vec<Option<Tensor>>> = Vec::with_capacity(batches.len());
        for (k, batch) in batches.iter().enumerate() {
            let at = &self.devices[k];
            batch.check_on(&format!("replica {k}'s parameters"), at)?;
            let y = batch.y().ok_or_else(|| {
                WorkbookError::InvalidGraph("the batch has no labels (batch.y)".into())
            })?;
            let bs = batch.batch_size();
            let out = self.replicas[k].forward_t(
                batch.x(),
                batch.edge_index(),
                batch.edge_weight(),
                Some(&mut self.dropouts[k]),
            )?;
            let ce = candle_nn::loss::cross_entropy(
                &out.logits.narrow(0, 0, bs)?,
                &y.narrow(0, 0, bs)?,
            )?;
            // This replica's share of the mean over the step's seeds: the reduce's plain sum
            // is then the mean's gradient. With one batch the factor is exactly 1.
            let share = if bs == seeds {
                ce.clone()
            } else {
                (&ce * (bs as f64 / seeds as f64))?
            };
            let g = share.backward()?;
            grads.push(
                self.vars[k]
                    .iter()
                    .map(|(_, v)| g.get(v.as_tensor()).cloned())
                    .collect(),
            );
            per_replica.push((ce.detach(), bs));
        }
        let root = self.devices[0].clone();
        let mut reduced = Vec::with_capacity(self.vars[0].len());
        for (i, (name, _)) in self.vars[0].iter().enumerate() {
            let parts: Vec<(&Tensor, &Placement)> = grads
                .iter()
                .zip(&self.devices)
                .filter_map(|(g, d)| g[i].as_ref().map(|t| (t, d)))
                .collect();
            if parts.is_empty() {
                continue;
            }
            let sum = self
                .collective
                .reduce_sum(&parts, &root, &format!("grad[{name}]"))?;
            reduced.push((name.clone(), sum));
        }
        self.opt.step_with_gradients(&reduced)?;
        self.broadcast()?;
        Ok(Step {
            per_replica,
            devices: self.devices[..batches.len()].to_vec(),
        })
    }

    /// The first replica's parameters copied into every other replica's (in place).
    fn broadcast(&self) -> Result<()> {
        let root = &self.devices[0];
        for (i, (name, v0)) in self.vars[0].iter().enumerate() {
            let copies =
                self.collective
                    .broadcast(v0.as_tensor(), root, &self.devices[1..], name)?;
            for (k, copy) in copies.iter().enumerate() {
                self.vars[k + 1][i].1.set(copy)?;
            }
        }
        Ok(())
    }

    /// Compares every replica's parameters with the first replica's, bit for bit, on the host
    /// (each read back is recorded as `sync check ...`).
    pub fn check_in_sync(&self) -> Result<SyncReport> {
        let host = |k: usize, name: &str, t: &Tensor| -> Result<Vec<f32>> {
            let flat = t.flatten_all()?.to_dtype(DType::F32)?;
            self.devices[k].fetch_vec1::<f32>(&flat, &format!("sync check {name}"))
        };
        let mut differences = Vec::new();
        for (i, (name, v0)) in self.vars[0].iter().enumerate() {
            let first = host(0, name, v0.as_tensor())?;
            for k in 1..self.replicas.len() {
                let other = host(k, name, self.vars[k][i].1.as_tensor())?;
                let differ = first.len() != other.len()
                    || first
                        .iter()
                        .zip(&other)
                        .any(|(a, b)| a.to_bits() != b.to_bits());
                if differ {
                    let max = first
                        .iter()
                        .zip(&other)
                        .map(|(a, b)| (a - b).abs())
                        .fold(0f32, f32::max);
                    differences.push(format!(
                        "replica {k} ({}): '{name}' differs from replica 0 ({}) by up to {max:e}",
                        self.devices[k], self.devices[0]
                    ));
                }
            }
        }
        Ok(SyncReport {
            in_sync: differences.is_empty(),
            differences,
        })
    }

    /// Evaluation-mode forward of batch `k` on replica `k`, the seeds' logits gathered to
    /// `output_device` (PyTorch's `output_device`, `cuda:0` by default), recorded as `gather
    /// logits`.
    pub fn forward_gather(&self, batches: &[Batch], output_device: &Placement) -> Result<Gathered> {
        self.check_batch_count(batches.len())?;
        self.check_replicas()?;
        let mut parts = Vec::with_capacity(batches.len());
        for (k, batch) in batches.iter().enumerate() {
            batch.check_on(&format!("replica {k}'s parameters"), &self.devices[k])?;
            let out =
                self.replicas[k].forward(batch.x(), batch.edge_index(), batch.edge_weight())?;
            let seeds = out.logits.narrow(0, 0, batch.batch_size())?;
            parts.push(self.devices[k].destination(output_device).move_tensor(
                &seeds,
                &self.devices[k],
                "gather logits",
            )?);
        }
        Ok(Gathered {
            logits: Tensor::cat(&parts, 0)?,
            placement: output_device.clone(),
        })
    }

    fn check_batch_count(&self, n: usize) -> Result<()> {
        if n > self.devices.len() {
            return Err(WorkbookError::Mismatched(format!(
                "{n} batches for {} device(s): give at most one batch per device per step",
                self.devices.len()
            )));
        }
        Ok(())
    }
}

/// Outputs gathered to one device.
pub struct Gathered {
    /// The seeds' logits of every batch, in batch order.
    pub logits: Tensor,
    /// Where they were gathered.
    pub placement: Placement,
}

impl Gathered {
    /// Cross-entropy against `labels`, which live on `labels_at`: labels on another device than
    /// the gathered outputs are named, with both devices and the fix (PyTorch: *"found at least
    /// two devices, cuda:0 and cuda:1"*).
    pub fn cross_entropy(&self, labels: &Tensor, labels_at: &Placement) -> Result<Tensor> {
        check_all(
            "gathered outputs",
            &self.placement,
            &[Placed::new("y", Role::Label, labels_at)],
        )?;
        Ok(candle_nn::loss::cross_entropy(&self.logits, labels)?)
    }

    /// Predicted classes (argmax), on the gathered device.
    pub fn predictions(&self) -> Result<Tensor> {
        Ok(self.logits.argmax(D::Minus1)?)
    }
}

/// A copy of `model` on `to`, every tensor recorded as `replicate ...`.
fn replicate(model: &Model, to: &Placement) -> Result<Model> {
    let from = model.placement();
    let phase = to.ledger().map(|l| l.phase());
    if let Some(l) = to.ledger() {
        l.set_phase(format!("replicate to {to}"));
    }
    let copy = model.to_device(from.destination(to));
    if let (Some(l), Some(p)) = (to.ledger(), phase) {
        l.set_phase(p);
    }
    copy
}

fn check_devices(devices: &[Placement]) -> Result<()> {
    if devices.is_empty() {
        return Err(WorkbookError::InvalidConfig(
            "data parallelism needs at least one device, e.g. --devices sim:1,sim:2".into(),
        ));
    }
    for (i, d) in devices.iter().enumerate() {
        if let Some(j) = devices[..i].iter().position(|e| e == d) {
            return Err(WorkbookError::InvalidConfig(format!(
                "device {d} is listed twice (positions {j} and {i}): give each device once"
            )));
        }
    }
    Ok(())
}

fn check_replicas(replicas: &[Model], devices: &[Placement]) -> Result<()> {
    for (k, (replica, at)) in replicas.iter().zip(devices).enumerate() {
        let home = replica.placement();
        let mut names: Vec<(String, Placement)> = Vec::new();
        replica.visit_tensors(&mut |n| {
            if matches!(n.kind, Kind::Parameter | Kind::Buffer) {
                names.push((n.name, n.placement.unwrap_or(home).clone()));
            }
        });
        let items: Vec<Placed> = names
            .iter()
            .map(|(n, p)| Placed::new(n.clone(), Role::ReplicaTensor, p))
            .collect();
        check_all(&format!("replica {k}'s device and batch"), at, &items)?;
    }
    Ok(())
}

/// Replica `k`'s dropout seed: the single-device trainer's for the first, distinct streams for
/// the others.
pub(crate) fn replica_seed(seed: u64, k: usize) -> u64 {
    seed.wrapping_add(1) ^ ((k as u64) << 40)
}
