//! The reduce of data parallelism, written by hand: the gradient of the mean loss over every
//! seed of a step, from replicas whose batches differ in size.
//!
//! PyTorch's `DistributedDataParallel` gives each replica the **mean** loss over its own batch
//! and averages the replicas' gradients. That is the gradient of the mean over all the step's
//! seeds only when every batch has the same number of seeds. The last batch of an epoch is
//! usually smaller (Cora's 140 training nodes in batches of 64: 64, 64, 12), and with `s_k`
//! seeds on replica `k`, `S` in all, the mean over all seeds is
//!
//! ```text
//! (1/S) Σ_k Σ_{i in b_k} CE_i  =  Σ_k (s_k / S) · mean_k
//! ```
//!
//! so the gradient of the step is `Σ_k (s_k / S) · g_k`, each replica weighed by its share of
//! the seeds (the book's chapter 6, "Our design", scales each replica's loss by the same share
//! before the backward pass; here the replicas already took their means, as DDP's do).
//!
//! Three more things make it right:
//!
//! * a replica with **no seeds** (more devices than batches left) contributes nothing: its mean
//!   over no seeds is `0 / 0 = NaN`, its gradient NaN, and `0 · NaN` is still NaN, so it must
//!   be left out, not weighed by zero;
//! * every gradient not on the root crosses **once**, straight to the root, with
//!   `root.move_tensor(gradient, &replica.device, "reduce grad[NAME]")` (so the ledger shows it);
//!   never through the host;
//! * every tensor is made where its inputs are: multiplying a tensor by a number
//!   (`(&t * share)?`) stays on its device, a tensor made with `&Device::Cpu` does not (on
//!   `sim:N` it computes the same, on a GPU it stops).
//!
//! Replicas that do not list the same parameters, in the same order, are an error, and so is a
//! step without any seed: never a panic.

// The imports are those of the finished file; until then some are unused.
#![allow(unused_imports)]

use workbook::candle_core::Tensor;
use workbook::{Placement, Result, WorkbookError};

/// What one replica computed in a step: the gradient of the mean loss over its own `seeds`
/// seeds (what each of DDP's replicas computes), one tensor per parameter, on `device`.
#[derive(Clone, Debug)]
pub struct ReplicaGradients {
    /// Where the replica, and its gradients, are.
    pub device: Placement,
    /// How many seeds its batch had (0: it had no batch this step).
    pub seeds: usize,
    /// `(parameter name, gradient)`, in the model's order of parameters.
    pub grads: Vec<(String, Tensor)>,
}

/// The gradient of the mean loss over all the step's seeds, per parameter (in the replicas'
/// order), on `root`: `Σ_k (s_k / S) · g_k` over the replicas with seeds. Each gradient not on
/// `root` is copied there once, recorded as `reduce grad[NAME]`; a replica without seeds is left
/// out (nothing of it is copied). An error, not a panic, when no replica has seeds or when the
/// replicas do not list the same parameters in the same order (naming the replica and the
/// parameters).
pub fn average_gradients(
    replicas: &[ReplicaGradients],
    root: &Placement,
) -> Result<Vec<(String, Tensor)>> {
    // TODO: the weighted mean Σ_k (s_k / S) · g_k on `root`, per parameter, from the replicas with seeds (see the module's documentation for what makes it right).
    todo!(
        "average_gradients: {} replica(s) with {:?} seeds onto {root}",
        replicas.len(),
        replicas.iter().map(|r| r.seeds).collect::<Vec<_>>()
    )
}
