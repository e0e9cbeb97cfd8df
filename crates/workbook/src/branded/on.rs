//! A value with a device brand: [`On<'d, T>`] is a `T` that is on [`Dev<'d>`]'s placement, as
//! a fact the compiler knows. [`Cpu<T>`] is the static marker for the host: no closure needed.
//!
//! Every operation of [`super::train`] takes its operands as [`OnDevice<'d, T>`], which only
//! `On<'d, T>` implements: two brands do not unify (a lifetime error), and a plain value or a
//! [`Cpu<T>`] is not `OnDevice` at all (a trait error whose message says what to do).
//!
//! ```
//! use workbook::branded::{branded, with_placement, Cpu};
//! use workbook::{placed_tensor::PlacedTensor, Placement};
//! let on_host = Cpu::new(PlacedTensor::new("y", &[1.0, 2.0], &Placement::cpu()).unwrap()).unwrap();
//! with_placement(Placement::sim(1), |dev| {
//!     let y = on_host.to(&dev).unwrap(); // the one way across: a recorded move
//!     assert_eq!(y.placement().to_string(), "sim:1");
//!     // a value made outside the brand is checked at run time when it comes in
//!     let stray = PlacedTensor::new("stray", &[0.0], &Placement::cpu()).unwrap();
//!     assert!(branded(&dev, stray).is_err());
//! });
//! ```

use super::dev::{Brand, Dev};
use crate::error::{Mismatch, Result, WorkbookError};
use crate::graph::Graph;
use crate::model::{Model, ModelConfig};
use crate::ops::Dropout;
use crate::placed_tensor::PlacedTensor;
use crate::placement::{check_all, Placed, Placement, Role};
use crate::train::Adam;
use std::marker::PhantomData;
use std::ops::Deref;

/// A `T` on the device branded `'d`. Same size as `T`: the brand is a zero-sized marker.
pub struct On<'d, T> {
    pub(super) value: T,
    brand: Brand<'d>,
}

impl<'d, T> On<'d, T> {
    /// Only this module's siblings brand a value: after a move there, a check, or an operation
    /// on values already branded `'d`.
    pub(crate) fn new(value: T) -> Self {
        Self {
            value,
            brand: PhantomData,
        }
    }

    /// The value without its brand, for the runtime-checked world (a thread, a file, a device
    /// list of any length); [`branded`] brings it back, checked.
    pub fn into_inner(self) -> T {
        self.value
    }

    /// The value, read-only: changing it in place could put it elsewhere behind the brand.
    pub fn get(&self) -> &T {
        &self.value
    }
}

impl<'d, T: Placeable> On<'d, T> {
    /// A copy on `to` (PyTorch: `x.to(device)`), recorded in the ledger: the one way from one
    /// brand to another.
    pub fn to<'e>(&self, to: &Dev<'e>) -> Result<On<'e, T>> {
        to.put(&self.value)
    }

    /// A copy on the host, statically marked as such.
    pub fn to_cpu(&self) -> Result<Cpu<T>> {
        Ok(Cpu {
            value: self.value.move_to(&Placement::cpu())?,
        })
    }
}

/// What a branded placement makes: values with its brand. (Here, not in `dev.rs`, so that the
/// brand's two files import one way.)
impl<'d> Dev<'d> {
    /// A copy of `value` on this device (PyTorch: `value.to(device)`), recorded in the ledger as
    /// every move is; already here, no copy. The way an unbranded value enters the brand.
    pub fn put<T: Placeable>(&self, value: &T) -> Result<On<'d, T>> {
        Ok(On::new(value.move_to(self.placement())?))
    }

    /// A freshly initialised model on this device ([`Model::init`], seeded).
    pub fn init(&self, config: ModelConfig, seed: u64) -> Result<On<'d, Model>> {
        let (model, _) = Model::init(config, seed, self.placement())?;
        Ok(On::new(model))
    }

    /// A one-dimensional `f32` tensor of `values`, drawn on the host and uploaded here.
    pub fn tensor(&self, name: &str, values: &[f32]) -> Result<On<'d, PlacedTensor>> {
        Ok(On::new(PlacedTensor::new(name, values, self.placement())?))
    }

    /// A seeded source of dropout masks for this device's forward passes.
    pub fn dropout(&self, seed: u64) -> On<'d, Dropout> {
        On::new(Dropout::new(seed, self.placement().device()))
    }
}

impl<T> Deref for On<'_, T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.value
    }
}

impl<T: Clone> Clone for On<'_, T> {
    fn clone(&self) -> Self {
        On::new(self.value.clone())
    }
}

impl<T: std::fmt::Debug> std::fmt::Debug for On<'_, T> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("On").field(&self.value).finish()
    }
}

/// A `T` on the host CPU, statically: the common case needs no closure. Not [`OnDevice`]: it
/// meets a device's values only after [`Cpu::to`].
#[derive(Clone, Debug)]
pub struct Cpu<T> {
    value: T,
}

impl<T: Placeable> Cpu<T> {
    /// `value`, checked to be on the host (`cpu`, not a simulated device).
    pub fn new(value: T) -> Result<Self> {
        value.check_on(&Placement::cpu())?;
        Ok(Self { value })
    }

    /// A copy of `value` on the host (PyTorch: `value.cpu()`).
    pub fn put(value: &T) -> Result<Self> {
        Ok(Self {
            value: value.move_to(&Placement::cpu())?,
        })
    }

    /// A copy on `dev` (PyTorch: `value.to(device)`), recorded in the ledger.
    pub fn to<'d>(&self, dev: &Dev<'d>) -> Result<On<'d, T>> {
        dev.put(&self.value)
    }

    /// The value, unmarked.
    pub fn into_inner(self) -> T {
        self.value
    }
}

impl<T> Deref for Cpu<T> {
    type Target = T;
    fn deref(&self) -> &T {
        &self.value
    }
}

/// An operand on the device branded `'d`: implemented by [`On<'d, T>`] only. Operations take
/// their operands through it so that a value without the brand is refused with this message,
/// not with a bare "mismatched types".
#[diagnostic::on_unimplemented(
    message = "`{Self}` is not branded with this device: the compiler cannot prove it is on the same device as the other operands",
    label = "not on this device (PyTorch would stop at run time: \"Expected all tensors to be on the same device\")",
    note = "a value on another device or on the host joins this one by a move: `value.to(&dev)?` (PyTorch: `value.to(device)`)",
    note = "a plain value (no brand) is moved with `dev.put(&value)?`, or checked at run time with `branded(&dev, value)?`"
)]
pub trait OnDevice<'d, T> {
    /// The branded value.
    fn value(&self) -> &T;
}

impl<'d, T> OnDevice<'d, T> for On<'d, T> {
    fn value(&self) -> &T {
        &self.value
    }
}

/// A value that can say whether it is on a placement, and (for most) move there.
pub trait Placeable: Sized {
    /// `Ok` when every part of the value is on `at`; otherwise the mismatch, naming the part.
    fn check_on(&self, at: &Placement) -> Result<()>;
    /// A copy on `to`, recorded in `to`'s ledger.
    fn move_to(&self, to: &Placement) -> Result<Self>;
}

/// Brands `value` as being on `dev` after checking, at run time, that every part of it is
/// there: the way back from the runtime-checked world (a value from a thread, a file, a device
/// list of any length). The error is the usual [`WorkbookError::DeviceMismatch`], naming the
/// part, with the fix.
pub fn branded<'d, T: Placeable>(dev: &Dev<'d>, value: T) -> Result<On<'d, T>> {
    value.check_on(dev.placement()).map_err(|e| match e {
        WorkbookError::DeviceMismatch(m) => WorkbookError::DeviceMismatch(Box::new(
            Mismatch { fix: None, ..*m }.with_fix(format!(
                "Brand it where it is, or move it here first: dev.put(&value)? (PyTorch: value.to(\"{}\"))",
                dev.placement()
            )),
        )),
        other => other,
    })?;
    Ok(On::new(value))
}

impl Placeable for Graph {
    fn check_on(&self, at: &Placement) -> Result<()> {
        Graph::check_on(self, "values branded for this device", at)
    }
    fn move_to(&self, to: &Placement) -> Result<Self> {
        self.to_device(to)
    }
}

impl Placeable for Model {
    fn check_on(&self, at: &Placement) -> Result<()> {
        let parameters = self.parameter_placements();
        let buffers = self.buffer_placements();
        let items: Vec<Placed> = parameters
            .iter()
            .map(|(n, p)| Placed::new(n.clone(), Role::Parameter, p))
            .chain(
                buffers
                    .iter()
                    .map(|(n, p)| Placed::new(n.clone(), Role::Buffer, p)),
            )
            .collect();
        check_all("values branded for this device", at, &items)
    }
    fn move_to(&self, to: &Placement) -> Result<Self> {
        self.to_device(to)
    }
}

impl Placeable for PlacedTensor {
    fn check_on(&self, at: &Placement) -> Result<()> {
        check_all(
            "values branded for this device",
            at,
            &[Placed::new(self.name(), Role::Operand, self.placement())],
        )
    }
    fn move_to(&self, to: &Placement) -> Result<Self> {
        self.to_device(to)
    }
}

impl Placeable for Adam {
    fn check_on(&self, at: &Placement) -> Result<()> {
        self.check_placement()?;
        check_all(
            "values branded for this device",
            at,
            &[Placed::new(
                "optimiser state",
                Role::OptimizerState,
                self.state_placement(),
            )],
        )
    }
    /// An optimiser does not move alone: its state follows its model
    /// ([`On::follow`](super::train)); this refuses, saying so.
    fn move_to(&self, _to: &Placement) -> Result<Self> {
        Err(WorkbookError::Unsupported(
            "an optimiser moves with its model: let opt = opt.follow(&model_there)? (Adam::to_model)".into(),
        ))
    }
}
