// Exercise 01-5: your branded placements. The graded tests and programs include this file, so
// it starts with no `//!` comment (the module's documentation is in src/lib.rs).
//
// As it is, this API lets every classic mistake compile: a tensor of one device added to one of
// another, a gradient from another device, a device taken out of its closure as a
// `Device<'static>`. Make the compiler refuse them (the TODO: markers), and write the bodies.

use std::marker::PhantomData;
use workbook::placed_tensor::PlacedTensor;
use workbook::{Placement, Result};

/// The brand: a lifetime that carries no borrow.
// TODO: `&'d ()` is *covariant*: the compiler may shorten a brand, so `Tensor<'a>` and
// `Tensor<'b>` both shrink to one shorter brand and mix. Make it invariant
// (`PhantomData<fn(&'d ()) -> &'d ()>`).
type Brand<'d> = PhantomData<&'d ()>;

/// A device whose values carry the brand `'d`. Only `with_device` and `with_devices` make one.
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
        // TODO: a `PlacedTensor::new(name, values, ...)` on this device, branded `'d`.
        let _ = (name, values);
        todo!("Device::tensor")
    }
}

/// A tensor on the device branded `'d`.
pub struct Tensor<'d> {
    inner: PlacedTensor,
    brand: Brand<'d>,
}

impl<'d> Tensor<'d> {
    /// `self + other`, on their device.
    // TODO: `other` may have any brand `'e` here, so tensors of two devices mix. Give it the
    // brand of `self`. Then add the two `PlacedTensor`s.
    pub fn add<'e>(&self, other: &Tensor<'e>) -> Result<Tensor<'d>> {
        let _ = other;
        todo!("Tensor::add")
    }

    /// A copy on `to` (PyTorch: `x.to(device)`), with `to`'s brand: the one way across.
    pub fn to<'e>(&self, to: &Device<'e>) -> Result<Tensor<'e>> {
        // TODO: move the `PlacedTensor` there (`to_device`), and brand the copy `'e`.
        let _ = to;
        todo!("Tensor::to")
    }

    /// The values, read back to the host.
    pub fn values(&self) -> Result<Vec<f32>> {
        // TODO: the `PlacedTensor`'s values.
        todo!("Tensor::values")
    }

    /// Where the tensor is.
    pub fn placement(&self) -> &Placement {
        self.inner.placement()
    }
}

/// Runs `f` with `placement` under a fresh brand.
// TODO: here the *caller* chooses `'d`, so `with_device(p, |d| d)` hands out a
// `Device<'static>`, and two of them share one brand. Make `f` work for every brand
// (`impl for<'d> FnOnce(Device<'d>) -> R`), so that no caller can choose it.
pub fn with_device<'d, R>(placement: Placement, f: impl FnOnce(Device<'d>) -> R) -> R {
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

/// One step of gradient descent, `weights - lr * grad`, on the weights' device.
// TODO: the gradient may come from any device (`'g`); give it the weights' brand. Then compute
// `weights - lr * grad` on the candle tensors and wrap the result (`PlacedTensor::wrap`).
pub fn sgd_step<'d, 'g>(weights: &Tensor<'d>, grad: &Tensor<'g>, lr: f32) -> Result<Tensor<'d>> {
    let _ = (weights, grad, lr);
    todo!("sgd_step")
}
