//! A placement with a brand: [`Dev<'d>`], made only by [`with_placement`](super::with_placement)
//! and its siblings, each call with a brand `'d` that no other placement has.
//!
//! The brand is a lifetime that carries no borrow: an *invariant* one
//! (`PhantomData<fn(&'d ()) -> &'d ()>`), so the compiler never shortens or stretches it to
//! make two brands agree. GhostCell and the `indexing` crate use the same trick.
//!
//! ```
//! use workbook::branded::with_placement;
//! use workbook::Placement;
//! let name = with_placement(Placement::sim(1), |dev| dev.placement().to_string());
//! assert_eq!(name, "sim:1");
//! ```

use super::on::{On, Placeable};
use crate::error::Result;
use crate::model::{Model, ModelConfig};
use crate::ops::Dropout;
use crate::placed_tensor::PlacedTensor;
use crate::placement::Placement;
use std::marker::PhantomData;

/// The brand itself: zero bytes, invariant in `'d`.
pub(crate) type Brand<'d> = PhantomData<fn(&'d ()) -> &'d ()>;

/// A placement whose values carry the brand `'d` ([`On<'d, T>`]). Only the `with_placement`
/// family makes one, so two `Dev`s with the same brand are always the same device.
#[derive(Clone)]
pub struct Dev<'d> {
    placement: Placement,
    brand: Brand<'d>,
}

impl<'d> Dev<'d> {
    /// Only the `with_placement` family calls this, each time with a fresh `'d`.
    pub(crate) fn new(placement: Placement) -> Self {
        Self {
            placement,
            brand: PhantomData,
        }
    }

    /// The runtime placement behind the brand (`sim:1`, `cuda:0`, ...), with its ledger.
    pub fn placement(&self) -> &Placement {
        &self.placement
    }

    /// A copy of `value` on this device (PyTorch: `value.to(device)`), recorded in the ledger as
    /// every move is; already here, no copy. The way an unbranded value enters the brand.
    pub fn put<T: Placeable>(&self, value: &T) -> Result<On<'d, T>> {
        Ok(On::new(value.move_to(&self.placement)?))
    }

    /// A freshly initialised model on this device ([`Model::init`], seeded).
    pub fn init(&self, config: ModelConfig, seed: u64) -> Result<On<'d, Model>> {
        let (model, _) = Model::init(config, seed, &self.placement)?;
        Ok(On::new(model))
    }

    /// A one-dimensional `f32` tensor of `values`, drawn on the host and uploaded here.
    pub fn tensor(&self, name: &str, values: &[f32]) -> Result<On<'d, PlacedTensor>> {
        Ok(On::new(PlacedTensor::new(name, values, &self.placement)?))
    }

    /// A seeded source of dropout masks for this device's forward passes.
    pub fn dropout(&self, seed: u64) -> On<'d, Dropout> {
        On::new(Dropout::new(seed, self.placement.device()))
    }
}

impl std::fmt::Debug for Dev<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Dev({})", self.placement)
    }
}
