//! A [`ProcessGroup`] over NCCL for `cuda:N`, one process (or thread) per GPU: PyTorch's `nccl`
//! backend, through cudarc's bindings (`cudarc::nccl::safe::Comm`, as candle's
//! `llama_multiprocess` example uses them). Behind the `nccl` feature (candle's `nccl`, which
//! links `libnccl.so.2`), so that neither the default build nor the `cuda` build needs NCCL.
//!
//! **Finding each other.** NCCL ranks meet through a 128-byte `ncclUniqueId` that rank 0 makes
//! and every other rank must receive before `ncclCommInitRank`. [`NcclGroup::new`] sends it over
//! another group that is already up, the *bootstrap*: `MpiGroup` (feature `mpi`) under
//! `mpirun` (features `nccl,mpi`), or [`ThreadGroup`] for ranks as threads of
//! one process. The same exchange carries each rank's GPU (its UUID), so two ranks on one GPU,
//! the classic missing `cuda:{local_rank}`, fail on every rank with both ranks named, before
//! NCCL would (inside `ncclCommInitRank`, as "Duplicate GPU detected"). [`NcclGroup::single`] is
//! a world of one that needs no bootstrap from the caller: that is what runs on a machine with
//! one GPU and no MPI. The bootstrap is only used during `new`; NCCL does every call after.
//!
//! **Device memory.** [`ProcessGroup::all_reduce_sum_on_device`] and
//! [`ProcessGroup::broadcast_on_device`] reduce a `cuda:N` tensor where it lives: the
//! `CudaSlice` is taken from the tensor's storage (as candle's NCCL example does) and the result
//! is a new tensor on the same device; nothing crosses to the host. Float32 and float64 are
//! reduced on the device (this library trains in float32); a tensor elsewhere (the CPU) or of
//! another dtype gets `Ok(None)` and [`World`](super::World) takes the host path, so the copies
//! are in its ledger. A tensor on another GPU than the group's is an error on this rank, and
//! the others hear of it at once (it joins their length check with an impossible length)
//! rather than at their time limit.
//!
//! **Host buffers** (`all_reduce_sum(&mut [f32])`, `all_reduce_max(&mut [u64])` for the
//! [`World`](super::World)'s call check, `broadcast`, `barrier`) are copied to the GPU, reduced
//! by NCCL and copied back. Not the bootstrap's MPI: one library carries every call of a run, in
//! one order, with one time limit and one way to fail (a rank stuck in NCCL must not be waited
//! for in MPI, or the other way round), and a world of one needs no MPI at all. The cost is two
//! small copies per call, some tens of microseconds, against a gradient all-reduce per step.
//! NCCL has no barrier; as PyTorch's NCCL backend does, a barrier is an all-reduce of one value.
//!
//! **Lengths.** NCCL trusts every rank to give the same element count; when they differ it reads
//! or writes past the smaller buffer or waits forever. Every call with data first all-reduces
//! the count (as `[n, !n]` under max, which gives the largest and the smallest) and fails on
//! every rank, naming both, when they differ.
//!
//! **Time limits.** NCCL calls only enqueue work on the CUDA stream; a stream synchronize would
//! block forever when a peer never comes. Each call here records a CUDA event after the work and
//! polls it (`cuEventQuery`) until it completes or the time limit passes. On a timeout the
//! communicator is aborted (`ncclCommAbort`, which is what cudarc's `Comm` does when dropped: it
//! stops the kernel that waits for the peer, so the GPU and its stream are usable again) and the
//! call returns [`WorkbookError::Distributed`], as `MpiGroup` (feature `mpi`) does; every
//! later call on this group fails saying so. The job should then end (`MpiGroup::abort` under
//! `mpirun`). One wait has no limit, because cudarc's safe API offers none: `ncclCommInitRank`
//! in [`NcclGroup::new`] (it runs right after the bootstrap exchange showed every rank alive).
//! A call's time limit also counts the work queued on the stream before it (the backward pass
//! whose gradients it reduces).
//!
//! **Streams and threads.** The communicator queues on the stream of the candle `Device` it was
//! built from (candle's per-thread default stream), as candle's own kernels do, so a collective
//! runs after the kernels that computed its tensor. Build the group from the same `Device` as the
//! tensors (one `Device` per GPU, cloned) and make the calls from the thread that computed them.
//!
//! The example needs a GPU (and `libnccl.so.2`, e.g. from PyTorch's pip packages); for several
//! ranks, start it under `mpirun -n N` built with `--features nccl,mpi`, make the bootstrap with
//! `MpiGroup::init()`, pick `cuda:{local rank}` and call [`NcclGroup::new`] instead of `single`.
//!
//! ```no_run
//! use std::sync::Arc;
//! use workbook::candle_core::{Device, Tensor};
//! use workbook::parallel::{NcclGroup, World};
//! use workbook::placement::Placement;
//! let gpu = Device::new_cuda(0).unwrap();
//! let world = World::new(Arc::new(NcclGroup::single(&gpu).unwrap()));
//! let grads = Tensor::new(&[1f32, 2.0, 3.0], &gpu).unwrap();
//! let sum = world.all_reduce_tensor(&grads, &Placement::of(&gpu), "gradients").unwrap();
//! assert_eq!(sum.to_vec1::<f32>().unwrap(), vec![1.0, 2.0, 3.0]); // a world of one
//! assert_eq!(world.backend(), "nccl");
//! ```

use super::process_group::ProcessGroup;
use super::thread_group::ThreadGroup;
use crate::error::{Result, WorkbookError};
use candle_core::cuda_backend::cudarc::driver::{
    CudaSlice, CudaStream, CudaView, DeviceRepr, DriverError, ValidAsZeroBits,
};
use candle_core::cuda_backend::cudarc::nccl::result::NcclError;
use candle_core::cuda_backend::cudarc::nccl::safe::{Comm, Id, NcclType, ReduceOp};
use candle_core::cuda_backend::{CudaDType, CudaDevice, CudaStorage};
use candle_core::op::BackpropOp;
use candle_core::{DType, Device, DeviceLocation, Storage, Tensor};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// The time limit of the bootstrap exchange in [`NcclGroup::single`] (a world of one never waits).
const SINGLE_TIMEOUT: Duration = Duration::from_secs(60);

/// This process's rank of an NCCL communicator on one GPU (see the module docs).
pub struct NcclGroup {
    /// `None` once aborted after a timeout. Calls are serialised: an NCCL communicator must not
    /// be used by two threads at once.
    comm: Mutex<Option<SendComm>>,
    stream: Arc<CudaStream>,
    ordinal: usize,
    rank: usize,
    size: usize,
}

/// cudarc's `Comm` holds NCCL's raw `ncclComm_t`, so it is neither `Send` nor `Sync`.
struct SendComm(Comm);

// SAFETY: an NCCL communicator may be used from any thread as long as no two threads use it at
// the same time (NCCL's thread-safety rules); `NcclGroup` only reaches it through its mutex, and
// every call first makes the communicator's CUDA context current on the calling thread.
unsafe impl Send for SendComm {}

/// Each rank's row in the bootstrap exchange: a status, its GPU's UUID (two words), its ordinal.
const ROW: usize = 4;
/// The `ncclUniqueId` as words (128 bytes), after a status word of rank 0.
const ID_WORDS: usize = 16;
const OK: u64 = 1;
const NOT_CUDA: u64 = 2;
const NO_UUID: u64 = 3;
const NO_ID: u64 = 4;

impl NcclGroup {
    /// This rank's NCCL communicator on `device` (a `cuda:N`), with every rank of `bootstrap`,
    /// which carries rank 0's NCCL id and each rank's GPU (see the module docs). Every rank of
    /// `bootstrap` calls it; `timeout` limits the exchange, not `ncclCommInitRank`.
    pub fn new(bootstrap: &dyn ProcessGroup, device: &Device, timeout: Duration) -> Result<Self> {
        let (rank, size) = (bootstrap.rank(), bootstrap.world_size());
        let err = |message: String| WorkbookError::Distributed {
            rank,
            world_size: size,
            message,
        };
        // Every rank joins the exchange whatever went wrong here, so that the others hear why
        // instead of waiting for it until their time limit.
        let cuda = match device {
            Device::Cuda(c) => Some(c.clone()),
            _ => None,
        };
        let mut table = vec![0u64; size * ROW + 1 + ID_WORDS];
        let mine = &mut table[rank * ROW..(rank + 1) * ROW];
        let mut local_problem = None;
        match &cuda {
            None => {
                mine[0] = NOT_CUDA;
                local_problem = Some(format!(
                    "NCCL works on CUDA devices, but this rank was given {:?}: give each rank its own GPU (cuda:{{local rank}})",
                    device.location()
                ));
            }
            Some(c) => match c.cuda_stream().context().uuid() {
                Ok(uuid) => {
                    let b: Vec<u8> = uuid.bytes.iter().map(|&x| x as u8).collect();
                    mine[0] = OK;
                    mine[1] = u64::from_le_bytes(b[..8].try_into().expect("8 bytes"));
                    mine[2] = u64::from_le_bytes(b[8..].try_into().expect("8 bytes"));
                    mine[3] = ordinal_of(device) as u64;
                }
                Err(e) => {
                    mine[0] = NO_UUID;
                    local_problem = Some(format!("cannot read this GPU's UUID: {e:?}"));
                }
            },
        }
        if rank == 0 {
            let id_area = &mut table[size * ROW..];
            match cuda
                .as_ref()
                .map(|c| c.cuda_stream().context().bind_to_thread())
            {
                Some(Ok(())) => match Id::new() {
                    Ok(id) => {
                        id_area[0] = OK;
                        let bytes: Vec<u8> = id.internal().iter().map(|&x| x as u8).collect();
                        for (w, chunk) in id_area[1..].iter_mut().zip(bytes.chunks(8)) {
                            *w = u64::from_le_bytes(chunk.try_into().expect("8 bytes"));
                        }
                    }
                    Err(e) => {
                        id_area[0] = NO_ID;
                        local_problem = Some(format!(
                            "ncclGetUniqueId failed ({}): NCCL could not set up its bootstrap socket (see NCCL_SOCKET_IFNAME, NCCL_DEBUG=INFO)",
                            nccl_error(&e)
                        ));
                    }
                },
                Some(Err(e)) => {
                    id_area[0] = NO_ID;
                    local_problem = Some(format!("cannot use this rank's GPU: {e:?}"));
                }
                None => id_area[0] = NO_ID,
            }
        }
        bootstrap.all_reduce_max(&mut table, timeout).map_err(|e| {
            err(format!(
                "while the ranks exchanged the NCCL id: {}",
                inner_message(&e)
            ))
        })?;
        if let Some(problem) = local_problem {
            return Err(err(problem));
        }
        let rows: Vec<&[u64]> = table[..size * ROW].chunks(ROW).collect();
        let bad: Vec<String> = rows
            .iter()
            .enumerate()
            .filter(|(_, r)| r[0] != OK)
            .map(|(k, r)| match r[0] {
                NOT_CUDA => format!("rank {k} was not given a CUDA device"),
                NO_UUID => format!("rank {k} could not read its GPU's UUID"),
                _ => format!("rank {k} never filled in its GPU"),
            })
            .collect();
        if !bad.is_empty() {
            return Err(err(format!(
                "the NCCL group cannot start: {}; each rank needs its own cuda:N",
                bad.join(", ")
            )));
        }
        for (a, ra) in rows.iter().enumerate() {
            if let Some(b) = (a + 1..size).find(|&b| rows[b][1..3] == ra[1..3]) {
                return Err(err(format!(
                    "ranks {a} and {b} are on the same GPU (cuda:{} and cuda:{}, UUID {:016x}{:016x}): NCCL needs one GPU per rank. Pick the device by the rank's local rank (cuda:{{local rank}}, e.g. OMPI_COMM_WORLD_LOCAL_RANK under Open MPI), not cuda:0 on every rank",
                    ra[3], rows[b][3], ra[1].swap_bytes(), ra[2].swap_bytes()
                )));
            }
        }
        let id_area = &table[size * ROW..];
        if id_area[0] != OK {
            return Err(err(
                "rank 0 could not make the NCCL id (its error says why)".into(),
            ));
        }
        let mut internal = [0 as std::ffi::c_char; 128];
        for (k, w) in id_area[1..].iter().enumerate() {
            for (j, byte) in w.to_le_bytes().into_iter().enumerate() {
                internal[k * 8 + j] = byte as std::ffi::c_char;
            }
        }
        let cuda = cuda.expect("checked: every rank is on a CUDA device");
        let stream = cuda.cuda_stream();
        stream
            .context()
            .bind_to_thread()
            .map_err(|e| err(format!("cannot use cuda:{}: {e:?}", ordinal_of(device))))?;
        let comm =
            Comm::from_rank(stream.clone(), rank, size, Id::uninit(internal)).map_err(|e| {
                err(format!(
                    "ncclCommInitRank failed ({}); NCCL_DEBUG=INFO says why",
                    nccl_error(&e)
                ))
            })?;
        Ok(Self {
            comm: Mutex::new(Some(SendComm(comm))),
            stream,
            ordinal: ordinal_of(device),
            rank,
            size,
        })
    }

    /// A world of one on `device` (a `cuda:N`): rank 0 of 1, no bootstrap, no MPI.
    pub fn single(device: &Device) -> Result<Self> {
        let one = ThreadGroup::new(1)?
            .pop()
            .expect("ThreadGroup::new(1) gives one rank");
        Self::new(&one, device, SINGLE_TIMEOUT)
    }

    /// The GPU of this rank (`cuda:N`'s `N`).
    pub fn ordinal(&self) -> usize {
        self.ordinal
    }

    fn error(&self, message: String) -> WorkbookError {
        WorkbookError::Distributed {
            rank: self.rank,
            world_size: self.size,
            message,
        }
    }

    /// Runs `enqueue` (which queues NCCL work on the stream and returns the buffers that work
    /// uses), then waits for that work until `timeout`. The buffers come back only once the work
    /// is done; on a timeout the communicator is aborted before they are freed.
    fn collective<R>(
        &self,
        what: &str,
        timeout: Duration,
        enqueue: impl FnOnce(&Comm, &Arc<CudaStream>) -> std::result::Result<R, String>,
    ) -> Result<R> {
        let mut guard = self
            .comm
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let Some(SendComm(comm)) = guard.as_ref() else {
            return Err(self.error(format!(
                "NCCL {what}: this rank's communicator was aborted after an earlier collective timed out; the run cannot go on (end the job, e.g. MpiGroup::abort under mpirun)"
            )));
        };
        self.stream.context().bind_to_thread().map_err(|e| {
            self.error(format!(
                "NCCL {what}: cannot use cuda:{}: {e:?}",
                self.ordinal
            ))
        })?;
        let buffers = enqueue(comm, &self.stream)
            .map_err(|e| self.error(format!("NCCL {what} failed: {e}")))?;
        let done = self
            .stream
            .record_event(None)
            .map_err(|e| self.error(format!("NCCL {what}: cannot record a CUDA event: {e:?}")))?;
        let deadline = Instant::now() + timeout;
        let mut spins = 0u32;
        loop {
            match done.try_is_complete() {
                Ok(true) => return Ok(buffers),
                Ok(false) => {}
                Err(e) => {
                    return Err(self.error(format!(
                        "NCCL {what} failed on cuda:{} ({e:?})",
                        self.ordinal
                    )))
                }
            }
            if Instant::now() >= deadline {
                // ncclCommAbort (cudarc's Drop for Comm) ends the kernel that waits for the
                // peer; only then may the buffers it uses be freed.
                let comm = guard.take();
                let aborted = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| drop(comm)));
                drop(buffers);
                let abort = match aborted {
                    Ok(()) => "this rank's communicator was aborted (ncclCommAbort)",
                    Err(_) => "aborting this rank's communicator (ncclCommAbort) failed too",
                };
                return Err(self.error(format!(
                    "NCCL {what} timed out after {timeout:?}: another rank never made this call. Every rank must make the same collective calls in the same order (a rank that skips a step, stops early or has fewer batches leaves the others waiting); {abort}, so end the job (MpiGroup::abort under mpirun)"
                )));
            }
            spins += 1;
            if spins > 1000 {
                std::thread::sleep(Duration::from_micros(50));
            } else {
                std::hint::spin_loop();
            }
        }
    }

    /// Every rank gives the same element count, or every rank fails naming the largest and the
    /// smallest.
    fn check_len(&self, what: &str, n: usize, timeout: Duration) -> Result<()> {
        let mut v = [n as u64, !(n as u64)];
        self.max_u64(what, &mut v, timeout)?;
        if v[0] != !v[1] {
            return Err(self.error(format!(
                "NCCL {what}: the ranks gave different lengths (this rank {n}, the largest {}, the smallest {}); every rank must reduce or broadcast tensors of the same shape, in the same order",
                v[0], !v[1]
            )));
        }
        Ok(())
    }

    fn max_u64(&self, what: &str, data: &mut [u64], timeout: Duration) -> Result<()> {
        let buf = self.collective(what, timeout, |comm, stream| {
            let mut buf = stream.clone_htod(&*data).map_err(driver)?;
            comm.all_reduce_in_place(&mut buf, &ReduceOp::Max)
                .map_err(|e| nccl_error(&e))?;
            Ok(buf)
        })?;
        self.download(what, &buf, data)
    }

    fn download<T: DeviceRepr>(
        &self,
        what: &str,
        buf: &CudaSlice<T>,
        data: &mut [T],
    ) -> Result<()> {
        self.stream.memcpy_dtoh(buf, data).map_err(|e| {
            self.error(format!(
                "NCCL {what}: copying the result back failed: {e:?}"
            ))
        })
    }

    /// The cuda storage of `tensor` as a typed, contiguous view, with the work to do on it.
    fn on_device<T, F>(
        &self,
        tensor: &Tensor,
        what: &str,
        timeout: Duration,
        op: F,
    ) -> Result<Tensor>
    where
        T: CudaDType + NcclType + DeviceRepr + ValidAsZeroBits,
        F: FnOnce(&Comm, &CudaView<'_, T>, &mut CudaSlice<T>) -> std::result::Result<(), String>,
    {
        let n = tensor.elem_count();
        self.check_len(what, n, timeout)?;
        if n == 0 {
            return Ok(tensor.clone());
        }
        let tensor = tensor.contiguous()?;
        let (storage, layout) = tensor.storage_and_layout();
        let Storage::Cuda(cuda) = &*storage else {
            unreachable!("checked by the caller: the tensor is on a CUDA device")
        };
        let slice = cuda.as_cuda_slice::<T>()?;
        let (start, end) = layout
            .contiguous_offsets()
            .expect("contiguous() gives contiguous offsets");
        let view = slice.slice(start..end);
        let out = self.collective(what, timeout, |comm, stream| {
            let mut out = stream.alloc_zeros::<T>(n).map_err(driver)?;
            op(comm, &view, &mut out)?;
            Ok(out)
        })?;
        let device: CudaDevice = cuda.device.clone();
        let shape = tensor.shape().clone();
        drop(storage);
        Ok(Tensor::from_storage(
            Storage::Cuda(CudaStorage::wrap_cuda_slice(out, device)),
            shape,
            BackpropOp::none(),
            false,
        ))
    }

    /// `Ok(false)` for a tensor the host path should take (not on a GPU), an error for one on
    /// another GPU than this rank's.
    fn is_mine(&self, tensor: &Tensor, what: &str, timeout: Duration) -> Result<bool> {
        match tensor.device().location() {
            DeviceLocation::Cuda { gpu_id } if gpu_id == self.ordinal => Ok(true),
            DeviceLocation::Cuda { gpu_id } => {
                // The others are in their length check by now: a length no tensor has stops
                // them at once (their error names the lengths, this one the cause).
                let _ = self.check_len(what, usize::MAX, timeout);
                Err(self.error(format!(
                    "NCCL {what}: the tensor is on cuda:{gpu_id}, but this rank's communicator is on cuda:{}; move it there first (each rank reduces on its own GPU)",
                    self.ordinal
                )))
            }
            _ => Ok(false),
        }
    }
}

impl ProcessGroup for NcclGroup {
    fn rank(&self) -> usize {
        self.rank
    }

    fn world_size(&self) -> usize {
        self.size
    }

    fn backend(&self) -> &'static str {
        "nccl"
    }

    fn all_reduce_sum(&self, data: &mut [f32], timeout: Duration) -> Result<()> {
        let what = "all_reduce (sum)";
        self.check_len(what, data.len(), timeout)?;
        if data.is_empty() {
            return Ok(());
        }
        let buf = self.collective(what, timeout, |comm, stream| {
            let mut buf = stream.clone_htod(&*data).map_err(driver)?;
            comm.all_reduce_in_place(&mut buf, &ReduceOp::Sum)
                .map_err(|e| nccl_error(&e))?;
            Ok(buf)
        })?;
        self.download(what, &buf, data)
    }

    fn all_reduce_max(&self, data: &mut [u64], timeout: Duration) -> Result<()> {
        let what = "all_reduce (max)";
        self.check_len(what, data.len(), timeout)?;
        if data.is_empty() {
            return Ok(());
        }
        self.max_u64(what, data, timeout)
    }

    fn broadcast(&self, data: &mut [f32], root: usize, timeout: Duration) -> Result<()> {
        let what = "broadcast";
        self.check_len(what, data.len(), timeout)?;
        if data.is_empty() {
            return Ok(());
        }
        let buf = self.collective(what, timeout, |comm, stream| {
            let mut buf = stream.clone_htod(&*data).map_err(driver)?;
            comm.broadcast_in_place(&mut buf, root as i32)
                .map_err(|e| nccl_error(&e))?;
            Ok(buf)
        })?;
        self.download(what, &buf, data)
    }

    fn barrier(&self, timeout: Duration) -> Result<()> {
        self.max_u64("barrier", &mut [0], timeout)
    }

    fn all_reduce_sum_on_device(
        &self,
        tensor: &Tensor,
        timeout: Duration,
    ) -> Result<Option<Tensor>> {
        let what = "all_reduce (sum) on the device";
        if !self.is_mine(tensor, what, timeout)? {
            return Ok(None);
        }
        macro_rules! sum {
            ($t:ty) => {
                self.on_device::<$t, _>(tensor, what, timeout, |comm, src, out| {
                    comm.all_reduce(src, out, &ReduceOp::Sum)
                        .map(|_| ())
                        .map_err(|e| nccl_error(&e))
                })
            };
        }
        Ok(Some(match tensor.dtype() {
            DType::F32 => sum!(f32)?,
            DType::F64 => sum!(f64)?,
            _ => return Ok(None),
        }))
    }

    fn broadcast_on_device(
        &self,
        tensor: &Tensor,
        root: usize,
        timeout: Duration,
    ) -> Result<Option<Tensor>> {
        let what = "broadcast on the device";
        if !self.is_mine(tensor, what, timeout)? {
            return Ok(None);
        }
        let me = self.rank;
        macro_rules! bcast {
            ($t:ty) => {
                self.on_device::<$t, _>(tensor, what, timeout, |comm, src, out| {
                    let send = (me == root).then_some(src);
                    comm.broadcast(send, out, root as i32)
                        .map(|_| ())
                        .map_err(|e| nccl_error(&e))
                })
            };
        }
        Ok(Some(match tensor.dtype() {
            DType::F32 => bcast!(f32)?,
            DType::F64 => bcast!(f64)?,
            _ => return Ok(None),
        }))
    }
}

fn ordinal_of(device: &Device) -> usize {
    match device.location() {
        DeviceLocation::Cuda { gpu_id } => gpu_id,
        _ => usize::MAX,
    }
}

fn driver(e: DriverError) -> String {
    format!("CUDA error {e:?}")
}

/// cudarc's `NcclError` prints only "NcclError"; the code inside names the failure.
fn nccl_error(e: &NcclError) -> String {
    format!("{:?}", e.0)
}

/// The message of a [`WorkbookError::Distributed`] without its rank prefix, to nest it.
fn inner_message(e: &WorkbookError) -> String {
    match e {
        WorkbookError::Distributed { message, .. } => message.clone(),
        other => other.to_string(),
    }
}
