//! Branded placements: a device mismatch refused by the compiler, before the program exists.
//!
//! The rest of the library checks placements at run time, before every forward pass, and names
//! the culprit. This module moves the same check into the type system. A closure receives a
//! [`Dev<'d>`] whose brand `'d` is fresh: no other placement of the program has it, even one
//! on the same kind of device (`cuda:0` and `cuda:1`, `sim:1` and `sim:2`). Values placed there
//! are [`On<'d, T>`], and every operation that combines two values ([`train::forward`],
//! [`train::cross_entropy`], an optimiser's [`step`](On::step)) needs one brand for all. So a
//! model on one device and a graph on another, labels left on the host, an optimiser built
//! before the model moved, or a replica fed another replica's batch do not compile.
//! [`On::to`] is the one way across, and it is an ordinary move, recorded in the
//! [ledger](crate::ledger).
//!
//! ```
//! use workbook::branded::{train, with_placements};
//! use workbook::{datasets, ModelConfig, Placement};
//! let graph = datasets::karate(&Placement::cpu()).unwrap();
//! with_placements(Placement::sim(1), Placement::sim(2), |d1, d2| -> workbook::Result<()> {
//!     let model = d1.init(ModelConfig::gcn(34, 16, 4), 0)?;
//!     let g2 = d2.put(&graph)?;
//!     // train::forward(&model, &g2)?;  // does not compile: two brands
//!     let g1 = g2.to(&d1)?;             // the move that fixes it
//!     let logits = train::forward(&model, &g1)?;
//!     assert_eq!(logits.placement().to_string(), "sim:1");
//!     Ok(())
//! }).unwrap();
//! ```
//!
//! The compiler's refusals are in `tests/branded_fail/` with their messages. An operand without
//! a brand, or a [`Cpu<T>`] (the static marker for the host), is refused through the trait
//! [`OnDevice`], whose message says what PyTorch would and how to fix it. Two different brands
//! are refused as a lifetime error (`lifetime may not live long enough`, naming `Dev<'1>` and
//! `Dev<'2>`): rustc lets no library reword those.
//!
//! ## Zero cost
//!
//! A brand is a lifetime: `On<'d, T>` is as big as `T` and the operations call the unbranded
//! ones. `cargo bench -p workbook --bench branded` times a branded training step against the
//! unbranded one (docs/performance.md).
//!
//! ## Where a brand stops, and the way back
//!
//! - **A device list chosen at run time** (`--devices sim:1,sim:2,...`, any length): a closure
//!   has a fixed number of brands. Brand one device at a time ([`with_placement`] in a loop),
//!   or keep the runtime-checked types for what crosses between devices.
//! - **Threads and processes**: `On<'d, T>` cannot outlive its closure, so it cannot go to a
//!   `std::thread::spawn`ed thread (scoped threads are fine) or another process.
//! - **Files**: a checkpoint stores values, not brands.
//!
//! In each case [`On::into_inner`] gives the plain value and [`branded`] brings one back,
//! checking at run time that it is where the brand says, with the usual named mismatch if not.

mod dev;
mod on;
pub mod train;

pub use dev::Dev;
pub use on::{branded, Cpu, On, OnDevice, Placeable};

use crate::placement::Placement;

/// Runs `f` with `placement` under a fresh brand. Values branded `'d` cannot leave `f` (its
/// result `R` cannot name `'d`): take them out with [`On::into_inner`].
pub fn with_placement<R>(
    placement: impl Into<Placement>,
    f: impl for<'d> FnOnce(Dev<'d>) -> R,
) -> R {
    f(Dev::new(placement.into()))
}

/// Runs `f` with two placements under two brands, different even when the placements are the
/// same device (values then still move explicitly, and the move costs nothing).
pub fn with_placements<R>(
    first: impl Into<Placement>,
    second: impl Into<Placement>,
    f: impl for<'a, 'b> FnOnce(Dev<'a>, Dev<'b>) -> R,
) -> R {
    f(Dev::new(first.into()), Dev::new(second.into()))
}

/// Runs `f` with three placements under three brands (a pipeline of three stages, a host and
/// two devices).
pub fn with_placements3<R>(
    first: impl Into<Placement>,
    second: impl Into<Placement>,
    third: impl Into<Placement>,
    f: impl for<'a, 'b, 'c> FnOnce(Dev<'a>, Dev<'b>, Dev<'c>) -> R,
) -> R {
    f(
        Dev::new(first.into()),
        Dev::new(second.into()),
        Dev::new(third.into()),
    )
}
