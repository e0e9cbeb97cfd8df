// Exercise 01-5: your branded placements. The graded tests and programs include this file, so
// it starts with no `//!` comment (the module's documentation is in src/lib.rs).

use std::marker::PhantomData;
use workbook::placed_tensor::PlacedTensor;
use workbook::{Placement, Result};

/// The brand: a lifetime that carries no borrow. `fn(&'d ()) -> &'d ()` makes it *invariant*:
/// the compiler may neither shorten nor stretch it to make two brands agree, so two devices'
/// brands never unify into one.
type Brand<'d> = PhantomData<fn(&'d ()) -> &'d ()>;

/// A device whose values carry the brand `'d`. Only `with_device` and `with_devices` make one
/// (the constructor is private), each call with a brand no other device has.
pub struct Device<'d> {
    placement: Placement,
    brand: Brand<'d>,
}

impl<'d> Device<'d> {
    fn new(placement: Placement) -> Self {
        Self {
            placement,
            brand: PhantomData,
        }
    }

    /// Where the device is (`sim:1`, `cuda:0`, ...).
    pub fn placement(&self) -> &Placement {
        &self.placement
    }

    /// A one-dimensional tensor of `values` on this device, with its brand.
    pub fn tensor(&self, name: &str, values: &[f32]) -> Result<Tensor<'d>> {
        Ok(Tensor {
            inner: PlacedTensor::new(name, values, &self.placement)?,
            brand: PhantomData,
        })
    }
}

/// A tensor on the device branded `'d`.
pub struct Tensor<'d> {
    inner: PlacedTensor,
    brand: Brand<'d>,
}

impl<'d> Tensor<'d> {
    /// `self + other`: both with the brand `'d`, so both on one device.
    pub fn add(&self, other: &Tensor<'d>) -> Result<Tensor<'d>> {
        Ok(Tensor {
            inner: self.inner.add(&other.inner)?,
            brand: PhantomData,
        })
    }

    /// A copy on `to` (PyTorch: `x.to(device)`), with `to`'s brand: the one way across.
    pub fn to<'e>(&self, to: &Device<'e>) -> Result<Tensor<'e>> {
        Ok(Tensor {
            inner: self.inner.to_device(to.placement())?,
            brand: PhantomData,
        })
    }

    /// The values, read back to the host.
    pub fn values(&self) -> Result<Vec<f32>> {
        self.inner.to_vec()
    }

    /// Where the tensor is.
    pub fn placement(&self) -> &Placement {
        self.inner.placement()
    }
}

/// Runs `f` with `placement` under a fresh brand: `for<'d>` means `f` must work for every
/// brand, so it cannot return the device or its values (its result `R` cannot name `'d`), and
/// no caller can choose the brand (`Device<'static>`).
pub fn with_device<R>(placement: Placement, f: impl for<'d> FnOnce(Device<'d>) -> R) -> R {
    f(Device::new(placement))
}

/// Runs `f` with two devices under two different brands, even when they are the same device.
pub fn with_devices<R>(
    first: Placement,
    second: Placement,
    f: impl for<'a, 'b> FnOnce(Device<'a>, Device<'b>) -> R,
) -> R {
    f(Device::new(first), Device::new(second))
}

/// One step of gradient descent, `weights - lr * grad`: the gradient must be on the weights'
/// device (the same brand), as an optimiser's step needs.
pub fn sgd_step<'d>(weights: &Tensor<'d>, grad: &Tensor<'d>, lr: f32) -> Result<Tensor<'d>> {
    let step = (grad.inner.tensor() * f64::from(lr))?;
    let updated = weights.inner.tensor().sub(&step)?;
    Ok(Tensor {
        inner: PlacedTensor::wrap(
            &format!("{} - lr * {}", weights.inner.name(), grad.inner.name()),
            updated,
            weights.placement(),
        )?,
        brand: PhantomData,
    })
}
