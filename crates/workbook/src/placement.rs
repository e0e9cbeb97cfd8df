//! Where tensors live: `cpu`, `cuda:N`, or a simulated device `sim:N`.
//!
//! PyTorch only reports a device mismatch when a second device exists, so a learner without a
//! GPU never meets *"Expected all tensors to be on the same device"* until production. A
//! [`Placement`] is a real candle [`Device`] plus a name. For `cpu` and `cuda:N` the name is
//! the device's own; a **simulated device** `sim:N` keeps its tensors in host memory but is a
//! distinct device for every placement check this library makes (as JAX's
//! `--xla_force_host_platform_device_count` fakes several host devices). Copies between `sim:1`
//! and `cpu` are real copies, so the code path and the [transfer ledger](crate::ledger) are the
//! same as for a GPU.
//!
//! What a simulated device cannot do: candle itself sees only the CPU, so code that bypasses
//! this library's checks (adding two bare tensors, say) runs on `sim:1` where on a GPU candle
//! stops it with its own error, `DeviceMismatchBinaryOp` (*"device mismatch in add, lhs: Cuda {
//! gpu_id: 0 }, rhs: Cpu"*). Our checks run before every forward pass, optimiser step and
//! training epoch, so code that goes through them fails the same way on both. A tensor made on
//! a fixed device inside a layer (`Tensor::zeros(n, x.dtype(), &Device::Cpu)`) is the same call
//! as one made from the input on `sim:N`; [`crate::fixed_device`] reads the code instead, and
//! reports it as the mismatch a GPU would raise.
//!
//! Real devices stay first-class: [`Placement::device`] is an ordinary candle `Device`, and every
//! constructor that takes a placement also takes a `&Device` (`impl Into<Placement>`).
//!
//! ```
//! use workbook::placement::Placement;
//! use workbook::candle_core::Device;
//! let sim = Placement::sim(1);
//! assert!(sim.device().is_cpu());                    // host memory...
//! assert_ne!(sim, Placement::cpu());                 // ...but a device of its own
//! assert_eq!(sim.to_string(), "sim:1");
//! assert_eq!(Placement::from(&Device::Cpu), Placement::cpu());
//! ```

use crate::error::{Result, WorkbookError};
use crate::ledger::Ledger;
use crate::sim_device::{SimDevice, SimErrors};
use candle_core::{DeviceLocation, Tensor, Var, WithDType};
use std::fmt;
use std::sync::Arc;

pub use crate::error::Mismatch;
pub use crate::ids::{PlacementId, Role};
pub use candle_core::Device;

/// A device and its name, optionally with a [`Ledger`] that records transfers to and from it.
/// A simulated device also carries its [`SimDevice`] state (how its kernels' faults are
/// reported, and whether one has been), shared by every clone.
#[derive(Clone)]
pub struct Placement {
    id: PlacementId,
    device: Device,
    ledger: Option<Ledger>,
    sim: Option<Arc<SimDevice>>,
}

impl Placement {
    /// The host CPU.
    pub fn cpu() -> Self {
        Self {
            id: PlacementId::Cpu,
            device: Device::Cpu,
            ledger: None,
            sim: None,
        }
    }

    /// Simulated device `n`: tensors in host memory, a device of its own for every check. Every
    /// `Placement::sim(n)` of the process shares one device state, whose kernels report faults
    /// as the environment says (`WORKBOOK_SIM_ASYNC`, `WORKBOOK_LAUNCH_BLOCKING`; see
    /// [`crate::sim_device`]).
    pub fn sim(n: usize) -> Self {
        Self {
            id: PlacementId::Sim(n),
            device: Device::Cpu,
            ledger: None,
            sim: Some(SimDevice::shared(n)),
        }
    }

    /// A fresh simulated device `n` whose kernels report faults as `errors` says, whatever the
    /// environment: its clones share its state, nothing else does (a test, or a lesson, that
    /// must not depend on the environment or on other users of `sim:n`).
    ///
    /// ```
    /// use workbook::placement::Placement;
    /// use workbook::sim_device::SimErrors;
    /// let gpu = Placement::sim_with(1, SimErrors::Blocking);
    /// assert_eq!(gpu, Placement::sim(1)); // the same device for every placement check
    /// assert_eq!(gpu.sim_errors(), Some(SimErrors::Blocking));
    /// ```
    pub fn sim_with(n: usize, errors: SimErrors) -> Self {
        Self {
            sim: Some(SimDevice::new(n, errors)),
            ..Self::sim(n)
        }
    }

    /// CUDA device `n`, or an error saying why it cannot be opened.
    pub fn cuda(n: usize) -> Result<Self> {
        let device = open_cuda(n).map_err(|why| {
            WorkbookError::InvalidConfig(format!(
                "cuda:{n} is not available: {why}; use cpu, or sim:{n} to practise without a GPU"
            ))
        })?;
        Ok(Self::of(&device))
    }

    /// The placement of a candle device: `cpu`, `cuda:N` or `metal:N`. (A candle device alone
    /// never says `sim`; simulated placement is carried by this library's containers.)
    pub fn of(device: &Device) -> Self {
        let id = match device.location() {
            DeviceLocation::Cpu => PlacementId::Cpu,
            DeviceLocation::Cuda { gpu_id } => PlacementId::Cuda(gpu_id),
            DeviceLocation::Metal { gpu_id } => PlacementId::Metal(gpu_id),
        };
        Self {
            id,
            device: device.clone(),
            ledger: None,
            sim: None,
        }
    }

    /// The same placement, recording its transfers in `ledger`.
    pub fn with_ledger(mut self, ledger: &Ledger) -> Self {
        self.ledger = Some(ledger.clone());
        self
    }

    /// The ledger attached to this placement, if any.
    pub fn ledger(&self) -> Option<&Ledger> {
        self.ledger.as_ref()
    }

    /// The candle device that holds the data (the CPU for `sim:N`).
    pub fn device(&self) -> &Device {
        &self.device
    }

    /// `cpu`, `cuda:0`, `sim:1`, ...
    pub fn id(&self) -> PlacementId {
        self.id
    }

    /// Whether this is a simulated device.
    pub fn is_sim(&self) -> bool {
        matches!(self.id, PlacementId::Sim(_))
    }

    /// How a simulated device reports its kernels' faults; `None` for other devices.
    pub fn sim_errors(&self) -> Option<SimErrors> {
        self.sim.as_ref().map(|d| d.mode())
    }

    /// The state of a simulated device (for kernels that check their indices,
    /// [`crate::ops::raw_index`]); `None` for other devices.
    pub fn sim_device(&self) -> Option<&SimDevice> {
        self.sim.as_deref()
    }

    /// Waits for the device (PyTorch: `torch.cuda.synchronize()`). On a simulated device in
    /// the asynchronous mode, this is where a kernel's earlier fault is reported; on the others
    /// there is nothing to wait for (candle's CUDA calls wait when they copy).
    pub fn synchronize(&self) -> Result<()> {
        self.sync(|| "synchronize".into())
    }

    /// Makes a simulated device usable again after a kernel fault (see
    /// [`crate::sim_device`]); nothing to do for other devices. A CUDA program cannot do this:
    /// it has to restart.
    pub fn reset_device(&self) {
        if let Some(d) = &self.sim {
            d.reset();
        }
    }

    /// A synchronising operation `op` on this placement: reports a simulated device's fault.
    fn sync(&self, op: impl FnOnce() -> String) -> Result<()> {
        match &self.sim {
            Some(d) => d.synchronize(op),
            None => Ok(()),
        }
    }

    /// Whether this is the host CPU itself (not a simulated device).
    pub fn is_cpu(&self) -> bool {
        self.id == PlacementId::Cpu
    }

    /// Copies `tensor`, which lives on `from`, to this placement, recording the copy as `what`.
    /// Already there: returns the same tensor and records nothing (as `tensor.to(device)` does
    /// in PyTorch).
    pub fn move_tensor(&self, tensor: &Tensor, from: &Placement, what: &str) -> Result<Tensor> {
        let mut moved = self.move_tensors(&[tensor], from, what)?;
        Ok(moved.remove(0))
    }

    /// Copies several tensors that together make one named thing (an edge index's two rows, a
    /// split's three id lists), recording one transfer of their total size.
    pub fn move_tensors(
        &self,
        tensors: &[&Tensor],
        from: &Placement,
        what: &str,
    ) -> Result<Vec<Tensor>> {
        if self == from {
            return Ok(tensors.iter().map(|&t| t.clone()).collect());
        }
        let op = || format!("the copy of '{what}' from {from} to {self}");
        from.sync(op)?;
        self.sync(op)?;
        let moved = tensors
            .iter()
            .map(|t| {
                if self.device.is_cpu() && from.device.is_cpu() {
                    // sim:N <-> cpu: a real host copy, so no two placements share storage.
                    t.copy()
                } else {
                    t.to_device(&self.device)
                }
            })
            .collect::<candle_core::Result<Vec<_>>>()?;
        self.record(from, self, tensors.iter().map(|&t| bytes_of(t)).sum(), what);
        Ok(moved)
    }

    /// Copies a parameter living on `from` into a fresh trainable [`Var`] here, recording the
    /// copy as `what`. Already here: the same `Var` (shared storage), as PyTorch's `module.to`
    /// keeps a parameter that is already in place.
    pub fn move_parameter(&self, tensor: &Tensor, from: &Placement, what: &str) -> Result<Var> {
        if self == from {
            return Ok(Var::from_tensor(tensor)?);
        }
        let op = || format!("the copy of '{what}' from {from} to {self}");
        from.sync(op)?;
        self.sync(op)?;
        // `Var::from_tensor` copies a non-variable tensor into new storage, so detaching first
        // costs one real copy on the host and cuts the autograd link to the old parameter.
        let staged = if self.device.is_cpu() && from.device.is_cpu() {
            tensor.detach()
        } else {
            tensor.to_device(&self.device)?.detach()
        };
        self.record(from, self, bytes_of(tensor), what);
        Ok(Var::from_tensor(&staged)?)
    }

    /// Records that `bytes` of host data were uploaded to this placement as `what` (a tensor
    /// created here from host values). Nothing is recorded for the CPU itself.
    pub fn record_upload(&self, bytes: u64, what: &str) {
        if !self.is_cpu() {
            self.record(&Placement::cpu(), self, bytes, what);
        }
    }

    /// Reads a scalar back to the host, recording the copy as `what`.
    pub fn fetch_scalar<T: WithDType>(&self, tensor: &Tensor, what: &str) -> Result<T> {
        self.sync(|| format!("fetch_scalar of '{what}' (PyTorch: .item())"))?;
        if !self.is_cpu() {
            self.record(self, &Placement::cpu(), bytes_of(tensor), what);
        }
        Ok(tensor.to_scalar::<T>()?)
    }

    /// Reads a vector back to the host, recording the copy as `what`.
    pub fn fetch_vec1<T: WithDType>(&self, tensor: &Tensor, what: &str) -> Result<Vec<T>> {
        self.sync(|| format!("fetch_vec1 of '{what}' (PyTorch: .tolist())"))?;
        if !self.is_cpu() {
            self.record(self, &Placement::cpu(), bytes_of(tensor), what);
        }
        Ok(tensor.to_vec1::<T>()?)
    }

    /// Records a copy of `bytes` from `from` to `to` in the ledgers of both (once if they share
    /// one), for copies made outside [`Placement::move_tensor`] (candle's backward pass).
    pub(crate) fn record(&self, from: &Placement, to: &Placement, bytes: u64, what: &str) {
        let (a, b) = (from.ledger.as_ref(), to.ledger.as_ref());
        let (from, to) = (from.to_string(), to.to_string());
        if let Some(l) = b {
            l.record(&from, &to, bytes, what);
        }
        if let Some(l) = a {
            if b.is_none_or(|b| !b.same(l)) {
                l.record(&from, &to, bytes, what);
            }
        }
    }

    /// The placement to move to: `to`, inheriting this placement's ledger if `to` has none, so
    /// that moving to a plainly built placement still records in the ledger the program
    /// attached.
    pub(crate) fn destination(&self, to: &Placement) -> Placement {
        let mut p = to.clone();
        if p.ledger.is_none() {
            p.ledger = self.ledger.clone();
        }
        p
    }
}

/// Opens CUDA device `n`, or says why not. `Device::cuda_if_available` is not used: in a `cuda`
/// build it does not fall back when no GPU is present.
pub(crate) fn open_cuda(n: usize) -> std::result::Result<Device, String> {
    if !candle_core::utils::cuda_is_available() {
        return Err("this build has no CUDA support (build with --features cuda)".into());
    }
    Device::new_cuda(n).map_err(|e| format!("no usable CUDA device {n} ({e})"))
}

/// The placement of a plain tensor seen next to `home`: `home` when they share a candle device
/// (a bare tensor cannot say `sim`, so it is taken to be where its owner is), else the tensor's
/// own device.
pub fn inherit(t: &Tensor, home: &Placement) -> Placement {
    if t.device().same_device(home.device()) {
        home.clone()
    } else {
        Placement::of(t.device())
    }
}

/// Size of a tensor's data in bytes.
pub fn bytes_of(t: &Tensor) -> u64 {
    (t.elem_count() * t.dtype().size_in_bytes()) as u64
}

impl PartialEq for Placement {
    /// Same name, and for real devices the same candle device (two handles opened separately
    /// on one GPU are different devices to candle).
    fn eq(&self, other: &Self) -> bool {
        self.id == other.id && (self.device.is_cpu() || self.device.same_device(&other.device))
    }
}

impl fmt::Display for Placement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        self.id.fmt(f)
    }
}

impl fmt::Debug for Placement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "Placement({})", self.id)
    }
}

impl From<&Device> for Placement {
    fn from(d: &Device) -> Self {
        Self::of(d)
    }
}

impl From<Device> for Placement {
    fn from(d: Device) -> Self {
        Self::of(&d)
    }
}

impl From<&Placement> for Placement {
    fn from(p: &Placement) -> Self {
        p.clone()
    }
}

/// One tensor taking part in a placement check.
pub struct Placed<'a> {
    pub name: String,
    pub role: Role,
    pub placement: &'a Placement,
}

impl<'a> Placed<'a> {
    pub fn new(name: impl Into<String>, role: Role, placement: &'a Placement) -> Self {
        Self {
            name: name.into(),
            role,
            placement,
        }
    }
}

/// Checks that every tensor in `items` is on `expected` (described as `expected_what`, e.g.
/// "model parameters"), and names the first one that is not, with the fix.
/// On a simulated device whose kernel fault has been reported, this check fails too, as every
/// launch on a failed CUDA device does.
pub fn check_all(expected_what: &str, expected: &Placement, items: &[Placed]) -> Result<()> {
    if let Some(d) = &expected.sim {
        d.launch(|| format!("the device check of {expected_what}"))?;
    }
    match items.iter().find(|p| p.placement != expected) {
        None => Ok(()),
        Some(bad) => Err(WorkbookError::DeviceMismatch(Box::new(Mismatch::new(
            expected_what,
            expected.id(),
            bad.role,
            bad.name.clone(),
            bad.placement.id(),
        )))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sim_copies_are_real_and_recorded() {
        let ledger = Ledger::new();
        let cpu = Placement::cpu();
        let sim = Placement::sim(2).with_ledger(&ledger);
        let t = Tensor::new(&[1f32, 2., 3.], cpu.device()).unwrap();
        let moved = sim.move_tensor(&t, &cpu, "t").unwrap();
        assert_eq!(moved.to_vec1::<f32>().unwrap(), vec![1., 2., 3.]);
        // Moving to where it already is records nothing.
        let again = sim.move_tensor(&moved, &sim, "t").unwrap();
        assert_eq!(again.id(), moved.id());
        let back: f32 = sim.fetch_scalar(&moved.sum_all().unwrap(), "sum").unwrap();
        assert_eq!(back, 6.0);
        let tr = ledger.transfers();
        assert_eq!(tr.len(), 2);
        assert_eq!(
            (tr[0].from.as_str(), tr[0].to.as_str(), tr[0].bytes),
            ("cpu", "sim:2", 12)
        );
        assert_eq!(
            (tr[1].from.as_str(), tr[1].to.as_str(), tr[1].bytes),
            ("sim:2", "cpu", 4)
        );
    }

    #[test]
    fn check_names_the_culprit() {
        let (cpu, sim) = (Placement::cpu(), Placement::sim(1));
        let err = check_all(
            "model parameters",
            &sim,
            &[
                Placed::new("x", Role::Input, &sim),
                Placed::new("edge_index", Role::Input, &cpu),
            ],
        )
        .unwrap_err()
        .to_string();
        assert_eq!(
            err,
            "Expected all tensors to be on the same device: model parameters are on sim:1 but input 'edge_index' is on cpu. Move the graph with graph.to_device(&device)"
        );
    }
}
