//! Graded program of exercise 01-5 (`a_gradient_from_another_device_is_refused`,
//! `compile_fail`): chapter 6's mistake, an optimiser step on one device with a gradient that
//! another replica computed on its own device. With your `src/branded.rs` it must not compile:
//! the grader builds it with `--cfg grade_mistake` (the mistake) and expects the compiler's
//! refusal, and without it (the fix: move the gradient first), which must compile. Do not edit:
//! the grader checks this file against its checksum.

#![forbid(unsafe_code)]
#![allow(unexpected_cfgs)]

#[allow(dead_code)]
mod under_test {
    include!(concat!(env!("CARGO_MANIFEST_DIR"), "/src/branded.rs"));
}

use under_test::{sgd_step, with_devices};
use workbook::{Placement, Result};

fn main() -> Result<()> {
    with_devices(
        Placement::sim(1),
        Placement::sim(2),
        |d1, d2| -> Result<()> {
            let weights = d1.tensor("weights", &[0.5, -1.0, 2.0])?;
            // What the replica on the second device computed.
            let grad = d2.tensor("grad", &[0.25, 0.5, -0.5])?;
            // The mistake: the gradient is still on the other device.
            #[cfg(grade_mistake)]
            let weights = sgd_step(&weights, &grad, 0.1)?;
            // The fix: move it to the weights' device first.
            #[cfg(not(grade_mistake))]
            let weights = sgd_step(&weights, &grad.to(&d1)?, 0.1)?;
            println!("{:?} on {}", weights.values()?, weights.placement());
            Ok(())
        },
    )
}
