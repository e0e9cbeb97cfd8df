//! NaN and infinite values: found in a model or a graph as it is loaded, and in a training loss
//! as soon as it appears.
//!
//! A weight or feature that is NaN or ±inf makes every prediction it reaches NaN, and a forward
//! pass raises no error. So loaders count the non-finite values of each tensor they read (on the
//! host, before anything moves to a device) and refuse the file with the tensors and counts
//! ([`WorkbookError::NonFinite`]), unless [`set_allowed`]`(true)` (the CLI's
//! `--allow-non-finite`). Training stops at the first epoch whose loss is not finite
//! ([`WorkbookError::NonFiniteLoss`]) and names the likely cause ([`loss_cause`]).
//!
//! ```
//! use workbook::candle_core::{Device, Tensor};
//! use workbook::non_finite::{check, count};
//! let w = Tensor::new(&[1f32, f32::NAN, f32::INFINITY, 2.], &Device::Cpu).unwrap();
//! assert_eq!(count(&w).unwrap(), 2);
//! let err = check("w.safetensors", [("conv1.bias", &w)]).unwrap_err().to_string();
//! assert!(err.contains("conv1.bias (2 of 4 values)"), "{err}");
//! ```

use crate::error::{Result, WorkbookError};
use candle_core::{DType, Device, Tensor};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

static ALLOWED: AtomicBool = AtomicBool::new(false);
static LET_IN: Mutex<Vec<String>> = Mutex::new(Vec::new());

/// Whether loaders accept tensors with NaN or infinite values (default: no). Process-wide, set
/// once by the CLI from `--allow-non-finite`.
pub fn set_allowed(allowed: bool) {
    ALLOWED.store(allowed, Ordering::Relaxed);
}

/// See [`set_allowed`].
pub fn allowed() -> bool {
    ALLOWED.load(Ordering::Relaxed)
}

/// One tensor's non-finite values (the payload of [`WorkbookError::NonFinite`]).
pub use crate::error::NonFiniteValues as Found;

/// The NaN and infinite values of `t` (0 for integer tensors), counted on the host.
pub fn count(t: &Tensor) -> Result<usize> {
    let host = t.to_device(&Device::Cpu)?.flatten_all()?;
    Ok(match host.dtype() {
        DType::F64 => host
            .to_vec1::<f64>()?
            .iter()
            .filter(|v| !v.is_finite())
            .count(),
        // float16 and bfloat16 widen to float32 exactly, NaN and inf included
        DType::F32 | DType::F16 | DType::BF16 => host
            .to_dtype(DType::F32)?
            .to_vec1::<f32>()?
            .iter()
            .filter(|v| !v.is_finite())
            .count(),
        _ => 0,
    })
}

/// Every named tensor with non-finite values, in the order given.
pub fn scan<'a, S: AsRef<str>>(
    tensors: impl IntoIterator<Item = (S, &'a Tensor)>,
) -> Result<Vec<Found>> {
    let mut found = Vec::new();
    for (name, t) in tensors {
        let count = count(t)?;
        if count > 0 {
            found.push(Found {
                name: name.as_ref().to_string(),
                count,
                total: t.elem_count(),
            });
        }
    }
    Ok(found)
}

/// Refuses `tensors` of `origin` (a file, for the message) if any holds a non-finite value,
/// unless [`allowed`]: then what was let in is kept for [`take_let_in`].
pub fn check<'a, S: AsRef<str>>(
    origin: &str,
    tensors: impl IntoIterator<Item = (S, &'a Tensor)>,
) -> Result<()> {
    let found = scan(tensors)?;
    if found.is_empty() {
        return Ok(());
    }
    if allowed() {
        let names: Vec<String> = found.iter().map(ToString::to_string).collect();
        let note = format!(
            "{origin}: NaN or infinite values let in by --allow-non-finite: {}",
            names.join(", ")
        );
        LET_IN.lock().unwrap_or_else(|p| p.into_inner()).push(note);
        return Ok(());
    }
    Err(WorkbookError::NonFinite {
        origin: origin.to_string(),
        found,
    })
}

/// What [`check`] let through because non-finite values were [`allowed`], one message per
/// file, since the last call: the CLI prints them as warnings, so that a run on such data
/// never looks like an ordinary one.
pub fn take_let_in() -> Vec<String> {
    std::mem::take(&mut *LET_IN.lock().unwrap_or_else(|p| p.into_inner()))
}

/// Weights larger than this (in absolute value) have run away: trained GNN weights are of
/// order 1.
const RUNAWAY_WEIGHT: f32 = 1e4;

/// The largest absolute value of `t` (NaN if it holds one).
fn largest(t: &Tensor) -> Option<f32> {
    t.abs()
        .ok()?
        .max_all()
        .ok()?
        .to_dtype(DType::F32)
        .ok()?
        .to_scalar::<f32>()
        .ok()
}

/// The likely cause of a training loss that is not finite, from what the model's `parameters`
/// (`model.named_parameters()`) and the data hold: non-finite features or edge weights; else
/// weights that are non-finite or ran away (a learning rate too high); else logits that
/// overflowed (features too large).
pub fn loss_cause(
    params: &[(String, Tensor)],
    features: Option<&Tensor>,
    edge_weight: Option<&Tensor>,
    lr: f64,
) -> String {
    let inputs = [
        ("the node features (x)", features),
        ("the edge weights", edge_weight),
    ];
    for (what, t) in inputs {
        if let Some(n) = t.and_then(|t| count(t).ok()).filter(|&n| n > 0) {
            return format!(
                "{what} hold {n} NaN or infinite value(s); fix the data (they were let in by --allow-non-finite)"
            );
        }
    }
    let largest_x = features
        .and_then(largest)
        .map(|m| format!(" (largest |x| = {m:e})"))
        .unwrap_or_default();
    let bad = scan(params.iter().map(|(n, t)| (n.as_str(), t))).unwrap_or_default();
    let largest_w = params
        .iter()
        .filter_map(|(_, t)| largest(t))
        .fold(0f32, |a, b| if b.is_nan() { b } else { a.max(b) });
    if !bad.is_empty() || largest_w.is_nan() || largest_w > RUNAWAY_WEIGHT {
        let state = if bad.is_empty() {
            format!("the largest |weight| is {largest_w:e}")
        } else {
            let names: Vec<String> = bad.iter().map(ToString::to_string).collect();
            format!("non-finite now: {}", names.join(", "))
        };
        return format!(
            "the weights diverged ({state}): the learning rate ({lr:?}) is likely too high for these features{largest_x}; lower it, or normalise the features"
        );
    }
    format!(
        "the logits overflowed although the weights are finite and moderate (largest |weight| {largest_w:e}): the features are likely too large{largest_x}; normalise them (as PyG's NormalizeFeatures does)"
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_every_float_dtype_and_ignores_integers() {
        let cpu = Device::Cpu;
        let t = Tensor::new(&[[f32::NAN, 1.0], [f32::NEG_INFINITY, 0.0]], &cpu).unwrap();
        assert_eq!(count(&t).unwrap(), 2);
        assert_eq!(count(&t.to_dtype(DType::F16).unwrap()).unwrap(), 2);
        assert_eq!(count(&t.to_dtype(DType::BF16).unwrap()).unwrap(), 2);
        let big = Tensor::new(&[1e300f64, f64::INFINITY], &cpu).unwrap();
        assert_eq!(count(&big).unwrap(), 1, "a large f64 is finite");
        assert_eq!(count(&Tensor::new(&[1i64, 2], &cpu).unwrap()).unwrap(), 0);
        let ok = Tensor::new(&[1f32, 2.0], &cpu).unwrap();
        assert!(
            scan([("ok", &ok), ("t", &t)]).unwrap()
                == vec![Found {
                    name: "t".into(),
                    count: 2,
                    total: 4
                }]
        );
    }
}
