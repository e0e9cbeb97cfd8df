//! One rank's view of a distributed run: a [`ProcessGroup`] with a time limit on every call, the
//! calls numbered, and a check before each one that every rank is at the same call.
//!
//! Collectives are matched by order, not by name: when one rank skips an all-reduce, its next
//! one is paired with the others' previous one, and the run goes on with mixed-up gradients
//! until some rank waits forever. PyTorch finds this only with `TORCH_DISTRIBUTED_DEBUG=DETAIL`
//! (it then compares every collective's fingerprint across ranks). A [`World`] always does: before
//! each call the ranks exchange a fingerprint of its name (one small all-reduce of two
//! integers), and where the names differ every rank stops with an error that names each rank's
//! call. A rank that skipped one step's all-reduce is caught at the first call whose name
//! differs (the end-of-epoch one, when every step's call has the same name); a rank that never
//! comes ends in the time limit instead of a hang.
//!
//! ```
//! use std::sync::Arc;
//! use workbook::parallel::{ThreadGroup, World};
//! let out = ThreadGroup::run(2, |g| {
//!     let world = World::new(Arc::new(g));
//!     let mut grads = vec![world.rank() as f32 + 1.0];
//!     if world.rank() == 1 {
//!         world.barrier("end of epoch")?;  // rank 1 skipped the all-reduce
//!     }
//!     world.all_reduce_sum(&mut grads, "gradients")?;
//!     Ok(grads)
//! });
//! let err = out[0].as_ref().unwrap_err().to_string();
//! assert!(err.contains("'all_reduce gradients'") && err.contains("'barrier end of epoch'"));
//! ```

use super::process_group::ProcessGroup;
use crate::error::{Result, WorkbookError};
use crate::placement::Placement;
use candle_core::{DType, Tensor};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Duration;

/// The time limit of every collective unless [`World::with_timeout`] says otherwise: five
/// minutes, long enough for rank 0's evaluation or checkpoint while the others wait (PyTorch's
/// default is 10 minutes for NCCL, 30 for the others).
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(300);

/// One rank of a distributed run (see the module docs).
pub struct World {
    group: Arc<dyn ProcessGroup>,
    calls: AtomicU64,
    timeout: Duration,
}

impl World {
    /// This rank of `group`, with [`DEFAULT_TIMEOUT`].
    pub fn new(group: Arc<dyn ProcessGroup>) -> Self {
        Self {
            group,
            calls: AtomicU64::new(0),
            timeout: DEFAULT_TIMEOUT,
        }
    }

    /// The time limit of each collective call.
    pub fn with_timeout(mut self, timeout: Duration) -> Self {
        self.timeout = timeout;
        self
    }

    /// This process's rank.
    pub fn rank(&self) -> usize {
        self.group.rank()
    }

    /// How many ranks the run has.
    pub fn world_size(&self) -> usize {
        self.group.world_size()
    }

    /// Whether this is rank 0, the one that writes checkpoints and reports.
    pub fn is_main(&self) -> bool {
        self.rank() == 0
    }

    /// The collective library underneath (`mpi`, `nccl`, `threads`).
    pub fn backend(&self) -> &'static str {
        self.group.backend()
    }

    /// The time limit of each collective call.
    pub fn timeout(&self) -> Duration {
        self.timeout
    }

    /// The process group.
    pub fn group(&self) -> &Arc<dyn ProcessGroup> {
        &self.group
    }

    fn error(&self, message: String) -> WorkbookError {
        WorkbookError::Distributed {
            rank: self.rank(),
            world_size: self.world_size(),
            message,
        }
    }

    /// Every rank at the same call with the same name, or an error on every rank.
    fn check_call(&self, op: &str, what: &str) -> Result<()> {
        let call = self.calls.fetch_add(1, Ordering::SeqCst);
        let name = format!("{op} {what}");
        let h = fingerprint(&name);
        // Paired calls always have the same number on every rank (pairing is by order), so
        // the number is for the messages; the fingerprint of the name is what can differ.
        let mut v = [h, !h];
        self.group
            .all_reduce_max(&mut v, self.timeout)
            .map_err(|e| {
                self.error(format!(
                    "while this rank waited at collective call #{call} '{name}': {}",
                    inner_message(&e)
                ))
            })?;
        if v[0] == !v[1] {
            return Ok(());
        }
        // Out of step: every rank saw the same reduced values, so every rank comes here and
        // joins one more call that tells each rank where the others are.
        let calls = self.where_is_everyone(call, &name)?;
        Err(self.error(format!(
            "the ranks are at different collective calls: {}. Collectives are matched by order, not by name, so every rank must make the same calls in the same order: a rank skipped or added one (a step without a batch must still join the all-reduce; work only rank 0 does, a checkpoint or a report, must call no collective)",
            calls.join(", ")
        )))
    }

    /// Each rank's call number and name, gathered with one max-reduction (each rank fills its
    /// own row, zeros elsewhere).
    fn where_is_everyone(&self, call: u64, name: &str) -> Result<Vec<String>> {
        const NAME_WORDS: usize = 8;
        let row = 1 + NAME_WORDS;
        let mut table = vec![0u64; row * self.world_size()];
        let mine = &mut table[self.rank() * row..(self.rank() + 1) * row];
        mine[0] = call + 1;
        for (w, chunk) in mine[1..].iter_mut().zip(name.as_bytes().chunks(8)) {
            let mut b = [0u8; 8];
            b[..chunk.len()].copy_from_slice(chunk);
            *w = u64::from_le_bytes(b);
        }
        self.group.all_reduce_max(&mut table, self.timeout)?;
        Ok(table
            .chunks(row)
            .enumerate()
            .map(|(r, t)| {
                let bytes: Vec<u8> = t[1..].iter().flat_map(|w| w.to_le_bytes()).collect();
                let name = String::from_utf8_lossy(&bytes)
                    .trim_end_matches('\0')
                    .to_string();
                let me = if r == self.rank() { " (this rank)" } else { "" };
                format!("rank {r}{me} at call #{} '{name}'", t[0].wrapping_sub(1))
            })
            .collect())
    }

    /// Every rank's `data` summed, into `data` on every rank.
    pub fn all_reduce_sum(&self, data: &mut [f32], what: &str) -> Result<()> {
        self.check_call("all_reduce", what)?;
        self.group.all_reduce_sum(data, self.timeout)
    }

    /// Rank `root`'s `data` into every rank's.
    pub fn broadcast(&self, data: &mut [f32], root: usize, what: &str) -> Result<()> {
        self.check_root(root)?;
        self.check_call("broadcast", what)?;
        self.group.broadcast(data, root, self.timeout)
    }

    /// Returns when every rank has reached the same barrier.
    pub fn barrier(&self, what: &str) -> Result<()> {
        self.check_call("barrier", what)?;
        self.group.barrier(self.timeout)
    }

    /// The sum over the ranks of `tensor` (float32, living on `at`), on `at`. A backend that
    /// works on device memory sums it there; otherwise it goes through the host, both copies in
    /// `at`'s ledger as `all_reduce {what}`.
    pub fn all_reduce_tensor(&self, tensor: &Tensor, at: &Placement, what: &str) -> Result<Tensor> {
        self.check_call("all_reduce", what)?;
        if let Some(t) = self.group.all_reduce_sum_on_device(tensor, self.timeout)? {
            return Ok(t);
        }
        let label = format!("all_reduce {what}");
        let mut host =
            at.fetch_vec1::<f32>(&tensor.flatten_all()?.to_dtype(DType::F32)?, &label)?;
        self.group.all_reduce_sum(&mut host, self.timeout)?;
        self.upload(host, tensor, at, &label)
    }

    /// Rank `root`'s `tensor` (float32, on `at`) on every rank, on `at`.
    pub fn broadcast_tensor(
        &self,
        tensor: &Tensor,
        at: &Placement,
        root: usize,
        what: &str,
    ) -> Result<Tensor> {
        self.check_root(root)?;
        self.check_call("broadcast", what)?;
        if let Some(t) = self.group.broadcast_on_device(tensor, root, self.timeout)? {
            return Ok(t);
        }
        let label = format!("broadcast {what}");
        let mut host =
            at.fetch_vec1::<f32>(&tensor.flatten_all()?.to_dtype(DType::F32)?, &label)?;
        self.group.broadcast(&mut host, root, self.timeout)?;
        self.upload(host, tensor, at, &label)
    }

    /// Fails on every rank unless every rank gives the same `value` for `what` (a fingerprint of
    /// the config, the dataset, the step count): ranks that disagree would otherwise run
    /// different programs and meet in the wrong collectives.
    pub fn agree(&self, what: &str, value: u64) -> Result<()> {
        self.check_call("agree", what)?;
        let mut v = [value, !value];
        self.group.all_reduce_max(&mut v, self.timeout)?;
        if v[0] != !v[1] {
            return Err(self.error(format!(
                "the ranks disagree on {what}: every rank must be started with the same arguments (mpirun -n N <the same command>) and read the same files"
            )));
        }
        Ok(())
    }

    /// Whether `flag` is true on any rank (the same answer on every rank).
    pub fn any(&self, flag: bool, what: &str) -> Result<bool> {
        self.check_call("any", what)?;
        let mut v = [u64::from(flag)];
        self.group.all_reduce_max(&mut v, self.timeout)?;
        Ok(v[0] != 0)
    }

    fn check_root(&self, root: usize) -> Result<()> {
        if root >= self.world_size() {
            return Err(self.error(format!(
                "broadcast from rank {root}, but the ranks are 0..{}",
                self.world_size()
            )));
        }
        Ok(())
    }

    fn upload(&self, host: Vec<f32>, like: &Tensor, at: &Placement, what: &str) -> Result<Tensor> {
        let n = host.len();
        let t = Tensor::from_vec(host, n, at.device())?
            .reshape(like.shape())?
            .to_dtype(like.dtype())?;
        at.record_upload((n * 4) as u64, what);
        Ok(t)
    }
}

/// FNV-1a of a call's name: equal names, equal fingerprints on every rank and every run.
pub fn fingerprint(s: &str) -> u64 {
    s.bytes().fold(0xcbf2_9ce4_8422_2325u64, |h, b| {
        (h ^ b as u64).wrapping_mul(0x0000_0100_0000_01b3)
    })
}

/// The message of a [`WorkbookError::Distributed`] without its rank prefix, to nest it.
fn inner_message(e: &WorkbookError) -> String {
    match e {
        WorkbookError::Distributed { message, .. } => message.clone(),
        other => other.to_string(),
    }
}
