//! Ranks as threads of one process: a [`ProcessGroup`] for tests, notebooks and the book, where
//! starting processes under `mpirun` is not possible (evcxr cannot) or not wanted (`cargo test`
//! without MPI installed).
//!
//! It keeps every rule of a real group: every rank must make the same calls in the same order,
//! a rank that does not come makes the others wait until their time limit and fail, and after
//! one failure the group is broken for everyone (as an MPI job is). It is not a transport:
//! the ranks share memory, so nothing here is measured as communication. For a real run use
//! `MpiGroup` (feature `mpi`).
//!
//! ```
//! use std::time::Duration;
//! use workbook::parallel::{ProcessGroup, ThreadGroup};
//! let out = ThreadGroup::run(2, |g| {
//!     if g.rank() == 1 {
//!         return Ok(None); // rank 1 skips the barrier...
//!     }
//!     Ok(Some(g.barrier(Duration::from_millis(200)).unwrap_err().to_string()))
//! });
//! let waited = out[0].as_ref().unwrap().clone().unwrap();
//! assert!(waited.contains("rank 0 of 2") && waited.contains("timed out")); // ...rank 0 is told
//! ```

use super::process_group::ProcessGroup;
use crate::error::{Result, WorkbookError};
use std::collections::HashMap;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

/// One rank of a group of threads (see the module docs). Clone it to hand it to a
/// [`World`](super::World); every clone is the same rank.
#[derive(Clone)]
pub struct ThreadGroup {
    rank: usize,
    shared: Arc<Shared>,
}

struct Shared {
    world_size: usize,
    state: Mutex<State>,
    arrived: Condvar,
}

#[derive(Default)]
struct State {
    /// The call being assembled (every rank's `calls` is this one or the one before).
    round: u64,
    slots: Vec<Option<Payload>>,
    /// Finished calls: the result and how many ranks have yet to read it.
    done: HashMap<u64, (std::result::Result<Payload, String>, usize)>,
    /// Why the group is broken, once a call failed.
    broken: Option<String>,
    /// Per rank: how many calls it has made.
    calls: Vec<u64>,
}

#[derive(Clone, Debug, PartialEq)]
enum Payload {
    Sum(Vec<f32>),
    Max(Vec<u64>),
    Broadcast { root: usize, data: Vec<f32> },
    Barrier,
}

impl Payload {
    fn name(&self) -> &'static str {
        match self {
            Payload::Sum(_) => "all_reduce_sum",
            Payload::Max(_) => "all_reduce_max",
            Payload::Broadcast { .. } => "broadcast",
            Payload::Barrier => "barrier",
        }
    }
}

impl ThreadGroup {
    /// The `world_size` ranks of a new group, rank `k` at index `k`.
    pub fn new(world_size: usize) -> Result<Vec<ThreadGroup>> {
        crate::limits::check_count("world size", world_size, 1)?;
        let shared = Arc::new(Shared {
            world_size,
            state: Mutex::new(State {
                slots: vec![None; world_size],
                calls: vec![0; world_size],
                ..State::default()
            }),
            arrived: Condvar::new(),
        });
        Ok((0..world_size)
            .map(|rank| ThreadGroup {
                rank,
                shared: shared.clone(),
            })
            .collect())
    }

    /// Runs `f` once per rank, each on its own thread, and returns what each returned, in rank
    /// order. A world size that is not a usable count is every rank's error.
    pub fn run<T, F>(world_size: usize, f: F) -> Vec<Result<T>>
    where
        T: Send,
        F: Fn(ThreadGroup) -> Result<T> + Sync,
    {
        let ranks = match Self::new(world_size) {
            Ok(r) => r,
            Err(e) => return vec![Err(e)],
        };
        std::thread::scope(|s| {
            let handles: Vec<_> = ranks
                .into_iter()
                .map(|g| {
                    let f = &f;
                    s.spawn(move || f(g))
                })
                .collect();
            handles
                .into_iter()
                .enumerate()
                .map(|(k, h)| {
                    h.join().unwrap_or_else(|_| {
                        Err(WorkbookError::Thread(format!("rank {k} panicked")))
                    })
                })
                .collect()
        })
    }

    fn error(&self, message: String) -> WorkbookError {
        WorkbookError::Distributed {
            rank: self.rank,
            world_size: self.shared.world_size,
            message,
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // A rank that panicked while holding the lock left consistent data (every update is
        // one assignment), so the poison flag is cleared rather than spread to every rank.
        self.shared
            .state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Deposits this rank's part of the next call and waits for the result.
    fn exchange(&self, mine: Payload, timeout: Duration) -> Result<Payload> {
        let what = mine.name();
        let deadline = Instant::now() + timeout;
        let world = self.shared.world_size;
        let mut st = self.lock();
        if let Some(why) = &st.broken {
            return Err(self.error(format!(
                "{what}: the group is broken since an earlier call failed ({why}); start the run again"
            )));
        }
        let call = st.calls[self.rank];
        st.calls[self.rank] += 1;
        debug_assert_eq!(call, st.round);
        st.slots[self.rank] = Some(mine);
        if st.slots.iter().all(Option::is_some) {
            let parts: Vec<Payload> = st.slots.iter_mut().map(|s| s.take().unwrap()).collect();
            let result = combine(&parts);
            st.done.insert(call, (result, world));
            st.round += 1;
            self.shared.arrived.notify_all();
        }
        loop {
            if let Some((result, readers)) = st.done.get_mut(&call) {
                let out = result.clone();
                *readers -= 1;
                if *readers == 0 {
                    st.done.remove(&call);
                }
                return out.map_err(|m| self.error(format!("{what} (call #{call}): {m}")));
            }
            if let Some(why) = &st.broken {
                return Err(self.error(format!(
                    "{what} (call #{call}): the group broke while this rank waited ({why})"
                )));
            }
            let now = Instant::now();
            if now >= deadline {
                let missing: Vec<String> = st
                    .slots
                    .iter()
                    .enumerate()
                    .filter(|(_, s)| s.is_none())
                    .map(|(k, _)| k.to_string())
                    .collect();
                let why = format!(
                    "{what} (call #{call}) timed out after {timeout:?}: rank(s) {} never made this call",
                    missing.join(", ")
                );
                st.broken = Some(why.clone());
                self.shared.arrived.notify_all();
                return Err(self.error(format!(
                    "{why}. Every rank must make the same collective calls in the same order: a rank that skips a step, stops early or has fewer batches leaves the others waiting"
                )));
            }
            st = self
                .shared
                .arrived
                .wait_timeout(st, deadline - now)
                .unwrap_or_else(|poisoned| poisoned.into_inner())
                .0;
        }
    }
}

/// The result every rank receives, or why the call cannot have one.
fn combine(parts: &[Payload]) -> std::result::Result<Payload, String> {
    let first = &parts[0];
    if let Some(k) = parts.iter().position(|p| p.name() != first.name()) {
        return Err(format!(
            "the ranks called different collectives: rank 0 {}, rank {k} {}",
            first.name(),
            parts[k].name()
        ));
    }
    let len = |p: &Payload| match p {
        Payload::Sum(v) | Payload::Broadcast { data: v, .. } => v.len(),
        Payload::Max(v) => v.len(),
        Payload::Barrier => 0,
    };
    if let Some(k) = parts.iter().position(|p| len(p) != len(first)) {
        return Err(format!(
            "the ranks gave buffers of different lengths: rank 0 {}, rank {k} {}",
            len(first),
            len(&parts[k])
        ));
    }
    Ok(match first {
        Payload::Sum(v) => {
            // In rank order, as MPI's reduction of a commutative operation may not be: the
            // threads' result is reproducible, MPI's equal to float tolerance.
            let mut sum = v.clone();
            for p in &parts[1..] {
                if let Payload::Sum(w) = p {
                    sum.iter_mut().zip(w).for_each(|(a, b)| *a += b);
                }
            }
            Payload::Sum(sum)
        }
        Payload::Max(v) => {
            let mut max = v.clone();
            for p in &parts[1..] {
                if let Payload::Max(w) = p {
                    max.iter_mut().zip(w).for_each(|(a, b)| *a = (*a).max(*b));
                }
            }
            Payload::Max(max)
        }
        Payload::Broadcast { root, .. } => {
            if let Some(k) = parts
                .iter()
                .position(|p| !matches!(p, Payload::Broadcast { root: r, .. } if r == root))
            {
                return Err(format!("the ranks disagree on the broadcast's root (rank 0 says {root}; rank {k} another)"));
            }
            parts
                .get(*root)
                .cloned()
                .ok_or_else(|| format!("broadcast from rank {root}, which does not exist"))?
        }
        Payload::Barrier => Payload::Barrier,
    })
}

impl ProcessGroup for ThreadGroup {
    fn rank(&self) -> usize {
        self.rank
    }

    fn world_size(&self) -> usize {
        self.shared.world_size
    }

    fn backend(&self) -> &'static str {
        "threads"
    }

    fn all_reduce_sum(&self, data: &mut [f32], timeout: Duration) -> Result<()> {
        if let Payload::Sum(v) = self.exchange(Payload::Sum(data.to_vec()), timeout)? {
            data.copy_from_slice(&v);
        }
        Ok(())
    }

    fn all_reduce_max(&self, data: &mut [u64], timeout: Duration) -> Result<()> {
        if let Payload::Max(v) = self.exchange(Payload::Max(data.to_vec()), timeout)? {
            data.copy_from_slice(&v);
        }
        Ok(())
    }

    fn broadcast(&self, data: &mut [f32], root: usize, timeout: Duration) -> Result<()> {
        let mine = Payload::Broadcast {
            root,
            data: data.to_vec(),
        };
        if let Payload::Broadcast { data: v, .. } = self.exchange(mine, timeout)? {
            data.copy_from_slice(&v);
        }
        Ok(())
    }

    fn barrier(&self, timeout: Duration) -> Result<()> {
        self.exchange(Payload::Barrier, timeout).map(|_| ())
    }
}
