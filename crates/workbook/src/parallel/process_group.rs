//! One process per device: the collectives that ranks of a distributed run call together,
//! declared once as [`ProcessGroup`] (PyTorch's `torch.distributed.ProcessGroup`, whose backends
//! are `mpi`, `nccl` and `gloo`).
//!
//! [`Collective`](super::Collective) serves one process that holds every replica's tensor; here
//! each process (rank) holds only its own and calls the same collective as every other rank, in
//! the same order. The implementations are an existing collective library, never a network
//! layer of ours: `MpiGroup` over MPI (feature `mpi`, launched by `mpirun`),
//! `NcclGroup` for `cuda:N` (feature `nccl`; under `mpirun` with `mpi` too), and [`ThreadGroup`](super::ThreadGroup)
//! (ranks as threads of one process, for tests and notebooks).
//!
//! Every call takes a time limit. A rank that never reaches a collective (it skipped a step, it
//! crashed, it had fewer batches) leaves the others waiting forever in PyTorch unless a timeout
//! is set (`init_process_group(timeout=...)`); here the wait ends with an error that names the
//! call. [`World`](super::World) adds the rest of what a rank needs on top: call numbering, a
//! check that every rank is at the same call, and tensors in and out.
//!
//! ```
//! use std::time::Duration;
//! use workbook::parallel::{ProcessGroup, ThreadGroup};
//! let sums = ThreadGroup::run(3, |g| {
//!     let mut v = vec![g.rank() as f32, 1.0];
//!     g.all_reduce_sum(&mut v, Duration::from_secs(5))?;
//!     Ok(v)
//! });
//! for s in sums {
//!     assert_eq!(s.unwrap(), vec![3.0, 3.0]); // 0 + 1 + 2, and 1 + 1 + 1
//! }
//! ```

use crate::error::Result;
use candle_core::Tensor;
use std::time::Duration;

/// The collectives of one rank (see the module docs). Every method is called by every rank of
/// the group, in the same order, or it waits until `timeout` and fails.
pub trait ProcessGroup: Send + Sync {
    /// This process's rank, `0..world_size()`.
    fn rank(&self) -> usize;

    /// How many ranks the group has.
    fn world_size(&self) -> usize;

    /// The library underneath: `"mpi"`, `"nccl"`, `"threads"`.
    fn backend(&self) -> &'static str;

    /// Every rank's `data` summed element by element, into `data` on every rank (all ranks give
    /// the same length).
    fn all_reduce_sum(&self, data: &mut [f32], timeout: Duration) -> Result<()>;

    /// The element-wise maximum over the ranks, into `data`: small control messages (call
    /// numbers, fingerprints; the minimum is the maximum of the complements).
    fn all_reduce_max(&self, data: &mut [u64], timeout: Duration) -> Result<()>;

    /// `root`'s `data` copied into every other rank's.
    fn broadcast(&self, data: &mut [f32], root: usize, timeout: Duration) -> Result<()>;

    /// Returns when every rank has called it.
    fn barrier(&self, timeout: Duration) -> Result<()>;

    /// The sum of every rank's `tensor`, computed where the tensor lives (NCCL on `cuda:N`).
    /// `Ok(None)`, the default, means the backend works on host memory and [`World`](super::World)
    /// goes through [`all_reduce_sum`](Self::all_reduce_sum) instead.
    fn all_reduce_sum_on_device(
        &self,
        _tensor: &Tensor,
        _timeout: Duration,
    ) -> Result<Option<Tensor>> {
        Ok(None)
    }

    /// `root`'s `tensor` on every rank, copied where the tensors live; `Ok(None)` as above.
    fn broadcast_on_device(
        &self,
        _tensor: &Tensor,
        _root: usize,
        _timeout: Duration,
    ) -> Result<Option<Tensor>> {
        Ok(None)
    }
}
