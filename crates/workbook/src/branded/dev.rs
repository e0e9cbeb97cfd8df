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

use crate::placement::Placement;
use std::marker::PhantomData;

/// The brand itself: zero bytes, invariant in `'d`.
pub(crate) type Brand<'d> = PhantomData<fn(&'d ()) -> &'d ()>;

/// A placement whose values carry the brand `'d` ([`On<'d, T>`](super::On)). Only the `with_placement`
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
}

impl std::fmt::Debug for Dev<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Dev({})", self.placement)
    }
}
