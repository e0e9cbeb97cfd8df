//! A tensor that knows its placement, so that arithmetic on two of them is checked the way a GPU
//! checks it, on `sim:N` too.
//!
//! A bare candle [`Tensor`] on `sim:1` is host memory, and candle adds it to a CPU tensor
//! without complaint; on a real GPU the same addition fails (`DeviceMismatchBinaryOp`). A
//! [`PlacedTensor`] carries its [`Placement`] and a name, and checks the placements of both
//! operands before it computes, so the first lesson of chapter 1 (two tensors, two devices, an
//! error, a move) fails and passes the same way on every machine. The layers, models and trainers
//! check their own inputs; this type is for tensor code of your own, and for learning.
//!
//! ```
//! use workbook::{placed_tensor::PlacedTensor, Placement};
//! let a = PlacedTensor::new("a", &[1.0, 2.0], &Placement::cpu()).unwrap();
//! let b = PlacedTensor::new("b", &[10.0, 20.0], &Placement::sim(1)).unwrap();
//! let err = a.add(&b).unwrap_err().to_string();
//! assert!(err.contains("'b' is on sim:1"), "{err}");
//! let b = b.to_device(a.placement()).unwrap(); // PyTorch: b = b.to(a.device)
//! assert_eq!(a.add(&b).unwrap().to_vec().unwrap(), vec![11.0, 22.0]);
//! ```

use crate::error::{Result, WorkbookError};
use crate::placement::{Mismatch, Placement, Role};
use candle_core::Tensor;

/// A named `f32` tensor and the placement it lives on (see the module docs).
#[derive(Clone, Debug)]
pub struct PlacedTensor {
    name: String,
    tensor: Tensor,
    placement: Placement,
}

impl PlacedTensor {
    /// A one-dimensional tensor of `values` on `at`, drawn on the host and copied there (the
    /// copy is recorded in `at`'s ledger, as `name`).
    pub fn new(name: &str, values: &[f32], at: &Placement) -> Result<Self> {
        let host = Tensor::new(values, &candle_core::Device::Cpu)?;
        let tensor = at.move_tensor(&host, &Placement::cpu(), name)?;
        Ok(Self {
            name: name.into(),
            tensor,
            placement: at.clone(),
        })
    }

    /// `tensor`, already on `at`, under `name`; refused when its candle device is not `at`'s
    /// (a bare tensor cannot tell `sim:1` from `cpu`: both are host memory, so that part is
    /// the caller's word).
    pub fn wrap(name: &str, tensor: Tensor, at: &Placement) -> Result<Self> {
        if !tensor.device().same_device(at.device()) {
            return Err(WorkbookError::DeviceMismatch(Box::new(Mismatch::new(
                format!("the placement given for '{name}'"),
                at.id(),
                Role::Operand,
                name,
                Placement::of(tensor.device()).id(),
            ))));
        }
        Ok(Self {
            name: name.into(),
            tensor,
            placement: at.clone(),
        })
    }

    /// The tensor's name, used in errors and in the ledger.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// Where the tensor lives.
    pub fn placement(&self) -> &Placement {
        &self.placement
    }

    /// The candle tensor itself (on `placement().device()`).
    pub fn tensor(&self) -> &Tensor {
        &self.tensor
    }

    /// A copy on `to` (PyTorch: `t.to(device)`); already there, the same tensor, no copy.
    pub fn to_device(&self, to: &Placement) -> Result<Self> {
        let to = self.placement.destination(to);
        Ok(Self {
            name: self.name.clone(),
            tensor: to.move_tensor(&self.tensor, &self.placement, &self.name)?,
            placement: to,
        })
    }

    /// `self + rhs`, element by element, on their device; both operands must be on the same
    /// one. The error names the right operand, both devices and the move that fixes it.
    pub fn add(&self, rhs: &Self) -> Result<Self> {
        if rhs.placement != self.placement {
            return Err(WorkbookError::DeviceMismatch(Box::new(
                Mismatch::new(
                    format!("the values of '{}'", self.name),
                    self.placement.id(),
                    Role::Operand,
                    rhs.name.clone(),
                    rhs.placement.id(),
                )
                .with_fix(format!(
                    "{}: let {b} = {b}.to_device({a}.placement())? (PyTorch: {b} = {b}.to({a}.device))",
                    Role::Operand.fix(),
                    a = self.name,
                    b = rhs.name
                )),
            )));
        }
        Ok(Self {
            name: format!("{} + {}", self.name, rhs.name),
            tensor: self.tensor.add(&rhs.tensor)?,
            placement: self.placement.clone(),
        })
    }

    /// The values, read back to the host in one copy (recorded as this tensor's name).
    pub fn to_vec(&self) -> Result<Vec<f32>> {
        self.placement.fetch_vec1(&self.tensor, &self.name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ledger::Ledger;

    #[test]
    fn the_same_device_adds_and_two_devices_fail_naming_the_right_operand() {
        let (cpu, sim) = (Placement::cpu(), Placement::sim(1));
        let a = PlacedTensor::new("a", &[1.0, 2.0, 3.0], &cpu).unwrap();
        let b = PlacedTensor::new("b", &[1.0, 1.0, 1.0], &sim).unwrap();
        let err = a.add(&b).unwrap_err().to_string();
        assert_eq!(
            err,
            "Expected all tensors to be on the same device: the values of 'a' are on cpu but operand 'b' is on sim:1. Move one operand to the other's device first: let b = b.to_device(a.placement())? (PyTorch: b = b.to(a.device))"
        );
        // Either direction fails; the culprit is the right operand.
        assert!(b.add(&a).unwrap_err().to_string().contains("'a' is on cpu"));
        let sum = a.add(&b.to_device(&cpu).unwrap()).unwrap();
        assert_eq!(sum.to_vec().unwrap(), vec![2.0, 3.0, 4.0]);
        assert_eq!(sum.placement(), &cpu);
        assert_eq!(sum.name(), "a + b");
        // Two simulated devices are two devices, as cuda:0 and cuda:1 are.
        let c = PlacedTensor::new("c", &[0.0, 0.0, 0.0], &Placement::sim(2)).unwrap();
        assert!(b.add(&c).is_err());
    }

    #[test]
    fn copies_are_real_and_recorded_and_a_move_in_place_copies_nothing() {
        let ledger = Ledger::new();
        let sim = Placement::sim(1).with_ledger(&ledger);
        let a = PlacedTensor::new("a", &[1.0, 2.0], &sim).unwrap();
        let back = a.to_device(&Placement::cpu()).unwrap();
        let same = a.to_device(&sim).unwrap();
        assert_eq!(same.tensor().id(), a.tensor().id());
        assert_eq!(back.to_vec().unwrap(), vec![1.0, 2.0]);
        let moves: Vec<_> = ledger
            .transfers()
            .into_iter()
            .map(|t| (t.from, t.to, t.bytes))
            .collect();
        assert_eq!(
            moves,
            vec![
                ("cpu".to_string(), "sim:1".to_string(), 8),
                ("sim:1".to_string(), "cpu".to_string(), 8),
            ]
        );
        // The copy on the host does not share the simulated device's storage.
        assert_ne!(back.tensor().id(), a.tensor().id());
    }
}
