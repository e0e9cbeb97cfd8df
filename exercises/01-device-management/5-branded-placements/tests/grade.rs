//! Graded tests for exercise 01-5 (points in exercise.toml). Do not edit: the grader checks this
//! file against its checksum.
//!
//! The tests here run your branded API on simulated devices (`sim:N`, numbers the run's
//! challenge picks) and record what they observed (the values and the device of each result),
//! which a teacher's grader compares with the reference solution's. The challenge also picks the
//! values, so the answers cannot be written down in advance. The other graded tests are
//! programs in `tests/programs/`, each a classic mistake that must not compile (exercise.toml:
//! `compile_fail`).

use super::branded::{sgd_step, with_device, with_devices};
use scenario::Scenario;
use workbook::{Placement, Result};

/// `n` values the challenge draws: multiples of 1/4 in -8..8, so that sums and steps are exact.
fn values(s: &Scenario, label: &str, n: usize) -> Vec<f32> {
    let mut state = s.seed(label);
    (0..n)
        .map(|_| {
            // SplitMix64, as the scenario crate's own mixer.
            state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
            let mut z = state;
            z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
            z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
            z ^= z >> 31;
            (z % 64) as f32 / 4.0 - 8.0
        })
        .collect()
}

/// Two different simulated devices, numbered by the challenge.
fn two_devices(s: &Scenario) -> (Placement, Placement) {
    let first = s.pick("first device", 1..5);
    let second = first + s.pick("second device, after the first", 1..4);
    (Placement::sim(first), Placement::sim(second))
}

#[test]
fn adds_on_one_device() {
    let s = scenario::start();
    let n = s.pick("length", 3..9);
    let (a, b) = (values(&s, "a", n), values(&s, "b", n));
    let at = Placement::sim(s.pick("device", 1..8));
    let (sum, placed) = with_device(at.clone(), |dev| -> Result<_> {
        let x = dev.tensor("a", &a)?;
        let y = dev.tensor("b", &b)?;
        let z = x.add(&y)?;
        Ok((z.values()?, z.placement().to_string()))
    })
    .unwrap_or_else(|e| panic!("adding two tensors of {at}: {e}"));
    s.observe("the sum and its device", &(&sum, &placed));
    let want: Vec<f32> = a.iter().zip(&b).map(|(x, y)| x + y).collect();
    assert_eq!(
        placed,
        at.to_string(),
        "the sum of two tensors of {at} must be on {at}"
    );
    assert_eq!(sum, want, "{a:?} + {b:?}");
}

#[test]
fn moves_then_adds_across_devices() {
    let s = scenario::start();
    let n = s.pick("length", 3..9);
    let (a, b) = (values(&s, "a", n), values(&s, "b", n));
    let (first, second) = two_devices(&s);
    let (moved, sum) = with_devices(first.clone(), second.clone(), |d1, d2| -> Result<_> {
        let x = d1.tensor("a", &a)?;
        let y = d2.tensor("b", &b)?;
        let y_here = y.to(&d1)?;
        let z = x.add(&y_here)?;
        Ok((
            (y_here.values()?, y_here.placement().to_string()),
            (z.values()?, z.placement().to_string()),
        ))
    })
    .unwrap_or_else(|e| panic!("moving b from {second} to {first}, then adding: {e}"));
    s.observe("b moved to the first device", &moved);
    s.observe("the sum and its device", &sum);
    assert_eq!(
        moved.1,
        first.to_string(),
        "b.to(&d1) must be on {first}, d1's device"
    );
    assert_eq!(moved.0, b, "b.to(&d1) must keep b's values");
    let want: Vec<f32> = a.iter().zip(&b).map(|(x, y)| x + y).collect();
    assert_eq!(sum.1, first.to_string(), "the sum must be on {first}");
    assert_eq!(sum.0, want, "{a:?} + {b:?}");
}

#[test]
fn steps_with_a_gradient_moved_here() {
    let s = scenario::start();
    let n = s.pick("length", 3..9);
    let (weights, grad) = (values(&s, "weights", n), values(&s, "gradient", n));
    // 1/2, 1/4 or 1/8: exact in f32.
    let lr = 1.0 / (1u32 << s.pick("learning rate, as a power of 1/2", 1..4)) as f32;
    let (first, second) = two_devices(&s);
    let stepped = with_devices(first.clone(), second.clone(), |d1, d2| -> Result<_> {
        let w = d1.tensor("weights", &weights)?;
        let g = d2.tensor("gradient", &grad)?;
        let w = sgd_step(&w, &g.to(&d1)?, lr)?;
        Ok((w.values()?, w.placement().to_string()))
    })
    .unwrap_or_else(|e| panic!("a step on {first} with a gradient from {second}: {e}"));
    s.observe("the weights after the step, and their device", &stepped);
    let want: Vec<f32> = weights.iter().zip(&grad).map(|(w, g)| w - lr * g).collect();
    assert_eq!(
        stepped.1,
        first.to_string(),
        "the new weights must be on {first}, the weights' device"
    );
    assert_eq!(stepped.0, want, "{weights:?} - {lr} * {grad:?}");
}
