//! What a simulated device does when one of its kernels fails: report at once, like the CPU
//! (the default), or asynchronously, like CUDA.
//!
//! On a GPU, a kernel that reads an out-of-range index (an `edge_index` id that is not a node)
//! trips a *device-side assert*. The launch has already returned, so the host learns of it
//! only at the next operation that waits for the device (`.item()`, `.cpu()`, a copy), and
//! PyTorch raises there: *"CUDA error: device-side assert triggered. CUDA kernel errors might
//! be asynchronously reported at some other API call, so the stacktrace below might be
//! incorrect. For debugging consider passing CUDA_LAUNCH_BLOCKING=1"*. The error is sticky:
//! every later CUDA call in the process fails too. `CUDA_LAUNCH_BLOCKING=1` makes every launch
//! wait, so the error is raised by the operation that caused it.
//!
//! A `sim:N` device can do the same, so the failure can be met and debugged without a GPU.
//! Its [`SimErrors`] mode says how:
//!
//! - [`SimErrors::Synchronous`] (the default): the faulting operation fails at once, as on the
//!   CPU (PyTorch: *"IndexError: index out of range in self"*).
//! - [`SimErrors::Asynchronous`] (`WORKBOOK_SIM_ASYNC=1`): the faulting kernel records the
//!   fault and returns a result anyway (the threads of a GPU kernel that did not fault wrote
//!   theirs); the next synchronising operation on the device fails, naming itself and saying
//!   that it may not be the cause; from then on every operation on the device fails.
//! - [`SimErrors::Blocking`] (`WORKBOOK_LAUNCH_BLOCKING=1`, mirroring `CUDA_LAUNCH_BLOCKING=1`):
//!   the faulting kernel fails at once, naming itself, the offending index and the bound; the
//!   device is then unusable, as in the asynchronous mode.
//!
//! The synchronising operations are the copies between a simulated device and anything else
//! ([`Placement::move_tensor`](crate::placement::Placement::move_tensor) and its kin, which
//! `to_device` of graphs, models and checkpoints use), the reads back to the host
//! ([`Placement::fetch_scalar`](crate::placement::Placement::fetch_scalar), `fetch_vec1`:
//! PyTorch's `.item()`, `.tolist()`) and [`Placement::synchronize`](crate::placement::Placement::synchronize)
//! (`torch.cuda.synchronize()`). Once a fault has been reported, launches fail too: the
//! device checks of every forward pass, optimiser step and training epoch, and the kernels of
//! [`crate::ops::raw_index`]. [`Placement::reset_device`](crate::placement::Placement::reset_device)
//! makes the device usable again (a CUDA program has to restart).
//!
//! Every `Placement::sim(n)` of a process shares one device state per `n`, in the mode the
//! environment gives (read once, here, by [`SimErrors::from_env`]);
//! [`Placement::sim_with`](crate::placement::Placement::sim_with) makes a fresh device with a
//! mode given in code, shared by its clones only (what tests and the book use, so that nothing
//! depends on the environment of the process). The CPU stays synchronous, as PyTorch's is.
//!
//! ```
//! use workbook::placement::Placement;
//! use workbook::sim_device::SimErrors;
//! assert_eq!(SimErrors::from_values(Some("1"), None).unwrap(), SimErrors::Asynchronous);
//! assert_eq!(SimErrors::from_values(Some("1"), Some("1")).unwrap(), SimErrors::Blocking);
//! assert_eq!(SimErrors::from_values(None, None).unwrap(), SimErrors::Synchronous);
//! let gpu = Placement::sim_with(1, SimErrors::Asynchronous);
//! assert_eq!(gpu.sim_errors(), Some(SimErrors::Asynchronous));
//! assert!(gpu.synchronize().is_ok()); // no kernel has failed
//! ```

use crate::error::{KernelFault, Result, WorkbookError};
use crate::ids::PlacementId;
use std::collections::BTreeMap;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, OnceLock};

/// Turns on the asynchronous mode for every `Placement::sim(n)` of the process.
pub const ASYNC_ENV: &str = "WORKBOOK_SIM_ASYNC";
/// Reports a simulated kernel's fault at the faulting operation (PyTorch: `CUDA_LAUNCH_BLOCKING`).
pub const LAUNCH_BLOCKING_ENV: &str = "WORKBOOK_LAUNCH_BLOCKING";

/// How a simulated device reports a kernel's fault (see the [module](self) documentation).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SimErrors {
    /// At the faulting operation, as the CPU does. The default.
    Synchronous,
    /// At the next synchronising operation, as CUDA does; the device then stays failed.
    Asynchronous,
    /// At the faulting operation, in CUDA's words, as `CUDA_LAUNCH_BLOCKING=1` does; the device
    /// then stays failed.
    Blocking,
}

impl SimErrors {
    /// The mode the environment asks for: `WORKBOOK_LAUNCH_BLOCKING=1` gives
    /// [`SimErrors::Blocking`], else `WORKBOOK_SIM_ASYNC=1` gives [`SimErrors::Asynchronous`],
    /// else [`SimErrors::Synchronous`]. The one place these variables are read.
    pub fn from_env() -> Result<Self> {
        let var = |name| std::env::var(name).ok();
        Self::from_values(
            var(ASYNC_ENV).as_deref(),
            var(LAUNCH_BLOCKING_ENV).as_deref(),
        )
    }

    /// [`SimErrors::from_env`] on given values of `WORKBOOK_SIM_ASYNC` and
    /// `WORKBOOK_LAUNCH_BLOCKING`. `1`, `true`, `yes` and `on` switch on; `0`, `false`, `no`,
    /// `off` and the empty string leave off; anything else is an error naming the variable.
    pub fn from_values(asynchronous: Option<&str>, blocking: Option<&str>) -> Result<Self> {
        let on = |name: &str, value: Option<&str>| -> Result<bool> {
            match value.map(|v| v.trim().to_ascii_lowercase()).as_deref() {
                None | Some("" | "0" | "false" | "no" | "off") => Ok(false),
                Some("1" | "true" | "yes" | "on") => Ok(true),
                Some(other) => Err(WorkbookError::InvalidConfig(format!(
                    "{name}={other} is not a switch: set it to 1 to turn it on, or 0 (or leave it unset) to turn it off"
                ))),
            }
        };
        let asynchronous = on(ASYNC_ENV, asynchronous)?;
        Ok(if on(LAUNCH_BLOCKING_ENV, blocking)? {
            Self::Blocking
        } else if asynchronous {
            Self::Asynchronous
        } else {
            Self::Synchronous
        })
    }
}

/// The state of one simulated device: its mode and whether a kernel has failed on it.
#[derive(Debug)]
pub struct SimDevice {
    n: usize,
    mode: SimErrors,
    state: Mutex<State>,
    /// Kernel faults recorded since the device was made; `reset` keeps the count.
    faults: AtomicUsize,
}

#[derive(Clone, Debug)]
enum State {
    Healthy,
    /// A kernel failed; no synchronising operation has reported it yet.
    Pending,
    /// Reported (by the operation named): every operation fails until a reset.
    Failed {
        first_reported_by: String,
    },
}

/// Whether any simulated device of the process has ever failed: the launches and copies of a
/// process in which none has check this one flag and nothing else.
static ANY_FAULT: AtomicBool = AtomicBool::new(false);

impl SimDevice {
    /// A fresh device `sim:n` in `mode`.
    pub fn new(n: usize, mode: SimErrors) -> Arc<Self> {
        Arc::new(Self {
            n,
            mode,
            state: Mutex::new(State::Healthy),
            faults: AtomicUsize::new(0),
        })
    }

    /// The device every `Placement::sim(n)` of the process shares, in the environment's mode
    /// (an unreadable value counts as unset here; [`crate::device::choose`] reports it).
    pub fn shared(n: usize) -> Arc<Self> {
        static DEVICES: OnceLock<Mutex<BTreeMap<usize, Arc<SimDevice>>>> = OnceLock::new();
        static MODE: OnceLock<SimErrors> = OnceLock::new();
        let mode = *MODE.get_or_init(|| SimErrors::from_env().unwrap_or(SimErrors::Synchronous));
        let mut devices = lock(DEVICES.get_or_init(Default::default));
        devices
            .entry(n)
            .or_insert_with(|| SimDevice::new(n, mode))
            .clone()
    }

    /// How this device reports a kernel's fault.
    pub fn mode(&self) -> SimErrors {
        self.mode
    }

    /// A kernel found `fault`. Synchronous: the error, at once. Asynchronous: recorded (the
    /// first fault is kept), `Ok` so that the kernel returns its result. Blocking: recorded,
    /// and the error naming the kernel.
    pub fn kernel_fault(&self, fault: KernelFault) -> Result<()> {
        match self.mode {
            SimErrors::Synchronous => Err(WorkbookError::IndexOutOfRange(Box::new(fault))),
            SimErrors::Asynchronous => {
                ANY_FAULT.store(true, Ordering::Relaxed);
                self.faults.fetch_add(1, Ordering::Relaxed);
                let mut state = lock(&self.state);
                if matches!(*state, State::Healthy) {
                    *state = State::Pending;
                }
                Ok(())
            }
            SimErrors::Blocking => {
                ANY_FAULT.store(true, Ordering::Relaxed);
                self.faults.fetch_add(1, Ordering::Relaxed);
                let op = format!("{} '{}'", fault.op, fault.what);
                *lock(&self.state) = State::Failed {
                    first_reported_by: op.clone(),
                };
                Err(WorkbookError::DeviceAssert {
                    device: PlacementId::Sim(self.n),
                    reported_by: op,
                    cause: Some(Box::new(fault)),
                })
            }
        }
    }

    /// A launch (a kernel, a forward pass's checks) of `op` (named only when it fails): fails once a fault has been
    /// reported; a fault not yet reported goes unnoticed, as on a GPU.
    pub fn launch(&self, op: impl FnOnce() -> String) -> Result<()> {
        if !ANY_FAULT.load(Ordering::Relaxed) {
            return Ok(());
        }
        match &*lock(&self.state) {
            State::Failed { first_reported_by } => Err(self.failed(first_reported_by, &op())),
            State::Healthy | State::Pending => Ok(()),
        }
    }

    /// A synchronising operation `op` (named only when it fails): reports a pending fault (naming `op`, which may not be
    /// the cause) and fails once one has been reported.
    pub fn synchronize(&self, op: impl FnOnce() -> String) -> Result<()> {
        if !ANY_FAULT.load(Ordering::Relaxed) {
            return Ok(());
        }
        let mut state = lock(&self.state);
        match &*state {
            State::Healthy => Ok(()),
            State::Pending => {
                let op = op();
                *state = State::Failed {
                    first_reported_by: op.clone(),
                };
                Err(WorkbookError::DeviceAssert {
                    device: PlacementId::Sim(self.n),
                    reported_by: op,
                    cause: None,
                })
            }
            State::Failed { first_reported_by } => Err(self.failed(first_reported_by, &op())),
        }
    }

    /// How many kernel faults this device has recorded (asynchronous and blocking modes) since
    /// it was made. [`SimDevice::reset`] makes the device usable again but keeps this count, so
    /// it witnesses that no kernel met a bad index even where the state was reset afterwards.
    pub fn faults_recorded(&self) -> usize {
        self.faults.load(Ordering::Relaxed)
    }

    /// Forgets any fault: the device is usable again.
    pub fn reset(&self) {
        *lock(&self.state) = State::Healthy;
    }

    fn failed(&self, first_reported_by: &str, op: &str) -> WorkbookError {
        WorkbookError::DeviceFailed {
            device: PlacementId::Sim(self.n),
            first_reported_by: first_reported_by.to_string(),
            reported_by: op.to_string(),
        }
    }
}

/// The lock, whatever a panicking holder left: the state is one enum, always whole.
fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fault() -> KernelFault {
        KernelFault {
            op: "gather_rows".into(),
            what: "x[src]".into(),
            device: PlacementId::Sim(3),
            position: 2,
            index: 7,
            bound: 5,
            count: 1,
            len: 4,
        }
    }

    #[test]
    fn switches_are_read_strictly() {
        let err = SimErrors::from_values(Some("maybe"), None).unwrap_err();
        assert_eq!(
            err.to_string(),
            "invalid configuration: WORKBOOK_SIM_ASYNC=maybe is not a switch: set it to 1 to turn it on, or 0 (or leave it unset) to turn it off"
        );
        assert_eq!(
            SimErrors::from_values(Some("0"), Some("off")).unwrap(),
            SimErrors::Synchronous
        );
        // Launch blocking alone is the blocking mode too: CUDA-like errors, at the launch.
        assert_eq!(
            SimErrors::from_values(None, Some("true")).unwrap(),
            SimErrors::Blocking
        );
    }

    #[test]
    fn a_pending_fault_is_reported_once_then_sticks() {
        let dev = SimDevice::new(3, SimErrors::Asynchronous);
        dev.kernel_fault(fault()).unwrap();
        dev.launch(|| "next kernel".into()).unwrap(); // not noticed yet
        let first = dev.synchronize(|| "fetch of 'loss'".into()).unwrap_err();
        assert!(matches!(
            first,
            WorkbookError::DeviceAssert { cause: None, .. }
        ));
        let then = dev.launch(|| "next kernel".into()).unwrap_err();
        assert!(matches!(then, WorkbookError::DeviceFailed { .. }));
        dev.reset();
        dev.synchronize(|| "fetch of 'loss'".into()).unwrap();
        assert_eq!(dev.faults_recorded(), 1, "a reset keeps the count");
    }
}
