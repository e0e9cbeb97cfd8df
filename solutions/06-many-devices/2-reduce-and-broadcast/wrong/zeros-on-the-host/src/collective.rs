//! The two collectives of data parallelism, written by hand: **reduce** (sum every replica's
//! gradient onto the first device) and **broadcast** (copy the first device's new parameters to
//! every other device).
//!
//! `DataParallel::step` gives each replica a share `s_k / S` of the step's loss (its seeds over
//! all seeds), so the plain **sum** of the replicas' gradients is already the gradient of the
//! mean loss: the reduce adds, it does not average (PyTorch's DDP divides by the number of
//! replicas because each replica there takes the mean over its own batch instead). Every copy
//! goes through `Placement::move_tensor`, so it is in the ledger, on `sim:N` as on `cuda:N`.
//!
//! On several GPUs or machines, NCCL's `ncclReduce` and `ncclBroadcast` would go behind the same
//! trait (`workbook::parallel::Collective`); see the book's chapter 6.

use workbook::candle_core::{Device, Tensor};
use workbook::parallel::Collective;
use workbook::{Placement, Result, WorkbookError};

/// Reduce and broadcast by copies between placements, every copy in the ledger.
#[derive(Clone, Copy, Debug, Default)]
pub struct CopyCollective;

impl Collective for CopyCollective {
    /// The sum of `parts` (each tensor with the device it is on), on `root`, added in the order
    /// given. Each part not on `root` is copied there first, recorded as `reduce {what}`; the
    /// part already on `root` is not copied. No parts at all is an error (naming `what`), not a
    /// panic.
    fn reduce_sum(
        &self,
        parts: &[(&Tensor, &Placement)],
        root: &Placement,
        what: &str,
    ) -> Result<Tensor> {
        let Some(&(first, _)) = parts.first() else {
            return Err(WorkbookError::InvalidConfig(format!(
                "reduce {what}: nothing to reduce (no replica gave a tensor)"
            )));
        };
        let what = format!("reduce {what}");
        let mut sum = Tensor::zeros(first.shape(), first.dtype(), &Device::Cpu)?;
        for &(t, at) in parts {
            sum = (sum + root.move_tensor(t, at, &what)?)?;
        }
        Ok(sum)
    }

    /// `tensor` (on `root`) copied to every device of `to`, in order, each copy recorded as
    /// `broadcast {what}`; for `root` itself, the same tensor (no copy).
    fn broadcast(
        &self,
        tensor: &Tensor,
        root: &Placement,
        to: &[Placement],
        what: &str,
    ) -> Result<Vec<Tensor>> {
        let what = format!("broadcast {what}");
        // The root's own entry is the same tensor: move_tensor copies nothing there.
        to.iter()
            .map(|d| d.move_tensor(tensor, root, &what))
            .collect()
    }
}
