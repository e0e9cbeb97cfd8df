//! The two collectives data parallelism needs, declared once: **reduce** (sum every replica's
//! tensor onto the root device) and **broadcast** (copy the root's tensor to every device).
//!
//! [`HostCollective`] implements them with this library's copies between placements, so every
//! byte is in the [ledger](crate::ledger) (`reduce grad[conv1.lin.weight]`, `broadcast
//! conv1.lin.weight`), on `sim:N` and on `cuda:N` alike. It is deliberately simple: the root
//! receives every replica's tensor and adds them in replica order (0, 1, 2, ...), so a run is
//! reproducible bit for bit.
//!
//! Across machines, or for speed on several GPUs, the same trait is the seam where an existing
//! collective library goes: NCCL's `ncclReduce` / `ncclBroadcast` (or one `ncclAllReduce` with a
//! step on every replica) through `cudarc::nccl`, which candle's own multi-GPU examples use, or
//! the design of `torch.distributed` (a process group per rank, bucketed gradients). Such an
//! implementation sums in its own order (ring or tree), so results agree with this one to float
//! tolerance, not bit for bit. We do not write a network layer.
//!
//! ```
//! use workbook::parallel::{Collective, HostCollective};
//! use workbook::{ledger::Ledger, placement::Placement, candle_core::{Device, Tensor}};
//! let ledger = Ledger::new();
//! let (a, b) = (Placement::sim(1).with_ledger(&ledger), Placement::sim(2).with_ledger(&ledger));
//! let ga = Tensor::new(&[1f32, 2.], &Device::Cpu).unwrap();
//! let gb = Tensor::new(&[10f32, 20.], &Device::Cpu).unwrap();
//! let sum = HostCollective.reduce_sum(&[(&ga, &a), (&gb, &b)], &a, "grad[w]").unwrap();
//! assert_eq!(sum.to_vec1::<f32>().unwrap(), vec![11., 22.]);
//! let t = &ledger.transfers()[0];
//! assert_eq!((t.from.as_str(), t.to.as_str(), t.bytes, t.what.as_str()), ("sim:2", "sim:1", 8, "reduce grad[w]"));
//! ```

use crate::error::{Result, WorkbookError};
use crate::placement::Placement;
use candle_core::Tensor;

/// Reduce and broadcast between devices (see the module docs).
pub trait Collective: Send + Sync {
    /// The sum of `parts` (each tensor with the device it is on), on `root`. Every part not on
    /// `root` is copied there, recorded as `reduce {what}`.
    fn reduce_sum(
        &self,
        parts: &[(&Tensor, &Placement)],
        root: &Placement,
        what: &str,
    ) -> Result<Tensor>;

    /// `tensor` (on `root`) copied to every device of `to`, recorded as `broadcast {what}`;
    /// on `root` itself the same tensor.
    fn broadcast(
        &self,
        tensor: &Tensor,
        root: &Placement,
        to: &[Placement],
        what: &str,
    ) -> Result<Vec<Tensor>>;
}

/// Reduce and broadcast by copies through this library's placements, recorded in the ledger.
#[derive(Clone, Copy, Debug, Default)]
pub struct HostCollective;

impl Collective for HostCollective {
    fn reduce_sum(
        &self,
        parts: &[(&Tensor, &Placement)],
        root: &Placement,
        what: &str,
    ) -> Result<Tensor> {
        let what = format!("reduce {what}");
        let mut sum: Option<Tensor> = None;
        for &(t, at) in parts {
            let here = root.move_tensor(t, at, &what)?;
            sum = Some(match sum {
                None => here,
                Some(s) => (s + here)?,
            });
        }
        sum.ok_or_else(|| {
            WorkbookError::Mismatched(format!(
                "{what}: nothing to reduce (no replica gave a tensor)"
            ))
        })
    }

    fn broadcast(
        &self,
        tensor: &Tensor,
        root: &Placement,
        to: &[Placement],
        what: &str,
    ) -> Result<Vec<Tensor>> {
        let what = format!("broadcast {what}");
        to.iter()
            .map(|d| root.destination(d).move_tensor(tensor, root, &what))
            .collect()
    }
}
