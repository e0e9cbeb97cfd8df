//! Graded program of exercise 01-5 (`a_brand_cannot_be_forged`, `compile_fail`): two devices
//! taken out of their closures as `Device<'static>`, which would give them one brand, so that a
//! tensor of `sim:1` and one of `sim:2` could be added. With your `src/branded.rs` it must not
//! compile: the grader builds it with `--cfg grade_mistake` (the forgery) and expects the
//! compiler's refusal, and without it (one device used as both, inside its closure), which must
//! compile. Do not edit: the grader checks this file against its checksum.

#![forbid(unsafe_code)]
#![allow(unexpected_cfgs)]

#[allow(dead_code)]
mod under_test {
    include!(concat!(env!("CARGO_MANIFEST_DIR"), "/src/branded.rs"));
}

#[allow(unused_imports)]
use under_test::{with_device, Device};
use workbook::{Placement, Result};

/// Adds a tensor made on `first` to one made on `second`: one brand, so one device, it says.
fn sum_of<'d>(first: &Device<'d>, second: &Device<'d>) -> Result<Vec<f32>> {
    let a = first.tensor("a", &[1.0, 2.0])?;
    let b = second.tensor("b", &[3.0, 4.0])?;
    a.add(&b)?.values()
}

fn main() -> Result<()> {
    // The forgery: each device leaves its closure, with a brand the caller chose.
    #[cfg(grade_mistake)]
    let sum = {
        let d1: Device<'static> = with_device(Placement::sim(1), |d| d);
        let d2: Device<'static> = with_device(Placement::sim(2), |d| d);
        sum_of(&d1, &d2)?
    };
    // Right: one device, inside its closure.
    #[cfg(not(grade_mistake))]
    let sum = with_device(Placement::sim(1), |d| sum_of(&d, &d))?;
    println!("{sum:?}");
    Ok(())
}
