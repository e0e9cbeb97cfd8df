//! A [`ProcessGroup`] over MPI (the `mpi` crate, rsmpi, on Open MPI or MPICH): one process per
//! rank, started by `mpirun -n N program ...`. Behind the `mpi` feature, so that the default
//! build needs no MPI library.
//!
//! MPI's own collectives block until every rank has called them, with no time limit. Each call
//! here starts the non-blocking form (`MPI_Iallreduce`, `MPI_Ibcast`, `MPI_Ibarrier`) and
//! polls it until it completes or the time limit passes; then it returns an error that names
//! the call, and the program should end the whole job ([`MpiGroup::abort`], which `mpirun`
//! turns into the end of every rank) rather than return normally while the others wait.
//!
//! ```no_run
//! use std::sync::Arc;
//! use workbook::parallel::{MpiGroup, World};
//! // started as: mpirun -n 2 target/release/examples/...
//! let group = MpiGroup::init().unwrap();
//! let world = World::new(Arc::new(group));
//! let mut v = vec![world.rank() as f32];
//! world.all_reduce_sum(&mut v, "ranks").unwrap();
//! assert_eq!(v[0], (0..world.world_size()).sum::<usize>() as f32);
//! ```

use super::process_group::ProcessGroup;
use crate::error::{Result, WorkbookError};
use mpi::collective::{CommunicatorCollectives, Root, SystemOperation};
use mpi::environment::Universe;
use mpi::request::StaticScope;
use mpi::topology::{Communicator, SimpleCommunicator};
use mpi::traits::Equivalence;
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// This process's rank of `MPI_COMM_WORLD` (see the module docs).
pub struct MpiGroup {
    // Calls are serialised: MPI is initialised with MPI_THREAD_SERIALIZED, which allows calls
    // from any thread, one at a time.
    world: Mutex<SimpleCommunicator>,
    rank: usize,
    size: usize,
    // Dropped last: finalises MPI when the group goes.
    _universe: Universe,
}

// SAFETY: every use of the communicator goes through the mutex, so MPI is called from one
// thread at a time, which the thread level asked for at initialisation (MPI_THREAD_SERIALIZED)
// allows; the universe is only dropped.
unsafe impl Send for MpiGroup {}
// SAFETY: as above; `&MpiGroup` reaches MPI only through the mutex.
unsafe impl Sync for MpiGroup {}

/// The environment variables a launcher sets in every rank it starts (Open MPI, MPICH/Hydra,
/// PMIx, Slurm): a process without any of them was started without one.
pub const LAUNCHER_VARIABLES: &[&str] = &[
    "OMPI_COMM_WORLD_SIZE",
    "PMI_SIZE",
    "PMIX_RANK",
    "MPI_LOCALNRANKS",
];

impl MpiGroup {
    /// Initialises MPI (once per process) and returns this rank. Started without a launcher,
    /// MPI runs this process alone as rank 0 of 1 (a "singleton"); [`launched`] tells which.
    pub fn init() -> Result<Self> {
        // Serialized: any thread may call MPI, one at a time, which the mutex guarantees.
        let (universe, level) = mpi::initialize_with_threading(mpi::Threading::Serialized)
            .ok_or_else(|| {
                WorkbookError::Unsupported(
                "MPI is already initialised in this process: make one MpiGroup and share it (Arc)"
                    .into(),
            )
            })?;
        if level < mpi::Threading::Serialized {
            return Err(WorkbookError::Unsupported(format!(
                "this MPI library provides only thread level {level:?}; the workbook calls MPI from more than one thread (one at a time) and needs MPI_THREAD_SERIALIZED: use Open MPI or MPICH as packaged by Debian"
            )));
        }
        let world = universe.world();
        let (rank, size) = (world.rank() as usize, world.size() as usize);
        Ok(Self {
            world: Mutex::new(world),
            rank,
            size,
            _universe: universe,
        })
    }

    /// Ends every rank of the job (`MPI_Abort`), with `code` as `mpirun`'s exit status. For a
    /// rank that failed: returning normally would leave the others waiting in their next
    /// collective until their time limit.
    pub fn abort(&self, code: i32) -> ! {
        let world = self
            .world
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        world.abort(code)
    }

    fn error(&self, message: String) -> WorkbookError {
        WorkbookError::Distributed {
            rank: self.rank,
            world_size: self.size,
            message,
        }
    }

    /// Runs a non-blocking collective that reads `data` and writes its result back into it,
    /// until it completes or `timeout` passes. MPI gets buffers of its own (a copy to send and
    /// one to receive into), which must outlive the request: on a timeout the request is never
    /// completed and they are leaked; otherwise they are reclaimed.
    fn run<T, D>(
        &self,
        what: &str,
        data: &mut [T],
        timeout: Duration,
        start: impl FnOnce(
            &SimpleCommunicator,
            &'static [T],
            &'static mut [T],
        ) -> mpi::request::Request<'static, D, StaticScope>,
    ) -> Result<()>
    where
        T: Equivalence + Copy + 'static,
        D: ?Sized + 'static,
    {
        let world = self
            .world
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        let send: &'static mut [T] = Box::leak(data.to_vec().into_boxed_slice());
        let recv: &'static mut [T] = Box::leak(data.to_vec().into_boxed_slice());
        let (send_ptr, recv_ptr): (*mut [T], *mut [T]) = (send, recv);
        // SAFETY: `send_ptr` is the leaked allocation above, not yet aliased mutably; the
        // shared reborrow is the only use of it until the request completes.
        let mut request = start(&world, unsafe { &*send_ptr }, unsafe { &mut *recv_ptr });
        let deadline = Instant::now() + timeout;
        let mut spins = 0u32;
        loop {
            match request.test() {
                Ok(_) => break,
                Err(pending) => {
                    if Instant::now() >= deadline {
                        // An unfinished collective cannot be cancelled (MPI forbids
                        // MPI_Cancel on one): the buffers stay MPI's, and the job should end.
                        std::mem::forget(pending);
                        return Err(self.error(format!(
                            "MPI {what} timed out after {timeout:?}: another rank never made this call. Every rank must make the same collective calls in the same order (a rank that skips a step, stops early or has fewer batches leaves the others waiting); end the job with MpiGroup::abort"
                        )));
                    }
                    request = pending;
                    spins += 1;
                    if spins > 1000 {
                        std::thread::sleep(Duration::from_micros(50));
                    } else {
                        std::hint::spin_loop();
                    }
                }
            }
        }
        // SAFETY: both pointers came from `Box::leak` above and the request that borrowed
        // them has completed, so MPI no longer uses them and these boxes are their only owners.
        let (send, recv) = unsafe { (Box::from_raw(send_ptr), Box::from_raw(recv_ptr)) };
        drop(send);
        data.copy_from_slice(&recv);
        Ok(())
    }
}

/// Whether this process was started by an MPI launcher (`mpirun`, `mpiexec`, `srun`).
pub fn launched() -> bool {
    LAUNCHER_VARIABLES
        .iter()
        .any(|v| std::env::var_os(v).is_some())
}

impl ProcessGroup for MpiGroup {
    fn rank(&self) -> usize {
        self.rank
    }

    fn world_size(&self) -> usize {
        self.size
    }

    fn backend(&self) -> &'static str {
        "mpi"
    }

    fn all_reduce_sum(&self, data: &mut [f32], timeout: Duration) -> Result<()> {
        self.run("all_reduce (sum)", data, timeout, |w, send, recv| {
            w.immediate_all_reduce_into(StaticScope, send, recv, SystemOperation::sum())
        })
    }

    fn all_reduce_max(&self, data: &mut [u64], timeout: Duration) -> Result<()> {
        self.run("all_reduce (max)", data, timeout, |w, send, recv| {
            w.immediate_all_reduce_into(StaticScope, send, recv, SystemOperation::max())
        })
    }

    fn broadcast(&self, data: &mut [f32], root: usize, timeout: Duration) -> Result<()> {
        let root = root as i32;
        self.run("broadcast", data, timeout, move |w, _send, buf| {
            w.process_at_rank(root)
                .immediate_broadcast_into(StaticScope, buf)
        })
    }

    fn barrier(&self, timeout: Duration) -> Result<()> {
        let mut nothing: [u64; 0] = [];
        self.run("barrier", &mut nothing, timeout, |w, _, _| {
            w.immediate_barrier()
        })
    }
}
