//! Graded program of exercise 01-5 (`two_devices_do_not_mix`, `compile_fail`): a tensor of one
//! device added to a tensor of another, chapter 1's mistake (PyTorch: "Expected all tensors to be
//! on the same device, but found at least two devices, cuda:0 and cuda:1!"). With your
//! `src/branded.rs` it must not compile: the grader builds it with `--cfg grade_mistake` (the
//! mistake) and expects the compiler's refusal, and without it (the fix: move first), which
//! must compile. Do not edit: the grader checks this file against its checksum.

#![forbid(unsafe_code)]
#![allow(unexpected_cfgs)]

#[allow(dead_code)]
mod under_test {
    include!(concat!(env!("CARGO_MANIFEST_DIR"), "/src/branded.rs"));
}

use under_test::with_devices;
use workbook::{Placement, Result};

fn main() -> Result<()> {
    with_devices(
        Placement::sim(1),
        Placement::sim(2),
        |d1, d2| -> Result<()> {
            let a = d1.tensor("a", &[1.0, 2.0])?;
            let b = d2.tensor("b", &[3.0, 4.0])?;
            // The mistake: `b` is on the other device.
            #[cfg(grade_mistake)]
            let sum = a.add(&b)?;
            // The fix: move it here first.
            #[cfg(not(grade_mistake))]
            let sum = a.add(&b.to(&d1)?)?;
            println!("{:?} on {}", sum.values()?, sum.placement());
            Ok(())
        },
    )
}
