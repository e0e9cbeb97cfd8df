//! How a value is written into a scenario's log: as JSON, with non-finite floats spelled out
//! (`"NaN"`, `"inf"`, `"-inf"`: JSON has no such numbers, and a NaN must never pass for a value),
//! tensors as their dims, dtype and values.
//!
//! ```
//! use scenario::{Json, Observable, Shown};
//! assert_eq!(f32::NAN.observation(), serde_json::json!("NaN"));
//! assert_eq!((3u32, "cpu").observation(), serde_json::json!([3, "cpu"]));
//! assert_eq!(Shown(Some(2)).observation(), serde_json::json!("Some(2)"));
//! assert_eq!(Json(vec![("a", 1)]).observation(), serde_json::json!([["a", 1]]));
//! ```

use serde_json::Value;
use std::collections::BTreeMap;

/// A value a scenario can observe.
pub trait Observable {
    /// The value as it goes into the log.
    fn observation(&self) -> Value;
}

/// Observes a value by its `Debug` form (an enum, a device spec): compared as text.
#[derive(Clone, Copy, Debug)]
pub struct Shown<T>(pub T);

impl<T: std::fmt::Debug> Observable for Shown<T> {
    fn observation(&self) -> Value {
        Value::String(format!("{:?}", self.0))
    }
}

/// Observes a value by its serde form (a ledger's rows, a report): compared field by field.
/// Non-finite floats become `null` in serde's JSON; observe such numbers directly instead.
#[derive(Clone, Copy, Debug)]
pub struct Json<T>(pub T);

impl<T: serde::Serialize> Observable for Json<T> {
    fn observation(&self) -> Value {
        serde_json::to_value(&self.0)
            .unwrap_or_else(|e| serde_json::json!({ "unserialisable": e.to_string() }))
    }
}

fn float(v: f64) -> Value {
    match serde_json::Number::from_f64(v) {
        Some(n) => Value::Number(n),
        None if v.is_nan() => Value::String("NaN".into()),
        None if v > 0.0 => Value::String("inf".into()),
        None => Value::String("-inf".into()),
    }
}

impl Observable for f64 {
    fn observation(&self) -> Value {
        float(*self)
    }
}

impl Observable for f32 {
    fn observation(&self) -> Value {
        float(f64::from(*self))
    }
}

macro_rules! integer {
    ($($t:ty),*) => {$(
        impl Observable for $t {
            fn observation(&self) -> Value {
                Value::from(*self)
            }
        }
    )*};
}
integer!(i8, i16, i32, i64, isize, u8, u16, u32, u64, usize);

impl Observable for bool {
    fn observation(&self) -> Value {
        Value::Bool(*self)
    }
}

impl Observable for str {
    fn observation(&self) -> Value {
        Value::String(self.to_string())
    }
}

impl Observable for String {
    fn observation(&self) -> Value {
        Value::String(self.clone())
    }
}

impl Observable for char {
    fn observation(&self) -> Value {
        Value::String(self.to_string())
    }
}

impl<T: Observable + ?Sized> Observable for &T {
    fn observation(&self) -> Value {
        (**self).observation()
    }
}

impl<T: Observable> Observable for Option<T> {
    fn observation(&self) -> Value {
        match self {
            Some(v) => serde_json::json!({ "some": v.observation() }),
            None => Value::Null,
        }
    }
}

impl<T: Observable> Observable for [T] {
    fn observation(&self) -> Value {
        Value::Array(self.iter().map(Observable::observation).collect())
    }
}

impl<T: Observable, const N: usize> Observable for [T; N] {
    fn observation(&self) -> Value {
        self.as_slice().observation()
    }
}

impl<T: Observable> Observable for Vec<T> {
    fn observation(&self) -> Value {
        self.as_slice().observation()
    }
}

impl<T: Observable> Observable for BTreeMap<String, T> {
    fn observation(&self) -> Value {
        Value::Object(
            self.iter()
                .map(|(k, v)| (k.clone(), v.observation()))
                .collect(),
        )
    }
}

macro_rules! tuple {
    ($($name:ident : $i:tt),*) => {
        impl<$($name: Observable),*> Observable for ($($name,)*) {
            fn observation(&self) -> Value {
                Value::Array(vec![$(self.$i.observation()),*])
            }
        }
    };
}
tuple!(A: 0, B: 1);
tuple!(A: 0, B: 1, C: 2);
tuple!(A: 0, B: 1, C: 2, D: 3);

/// Tensors of up to this many elements are logged whole; larger ones as a summary (their sum,
/// sum of absolute values and evenly spaced elements), which still changes with any wrong value
/// in bulk.
#[cfg(feature = "candle")]
pub const WHOLE_TENSOR_ELEMENTS: usize = 1 << 16;

#[cfg(feature = "candle")]
impl Observable for candle_core::Tensor {
    fn observation(&self) -> Value {
        match tensor_values(self) {
            Ok(values) => {
                let dims = self.dims().to_vec();
                serde_json::json!({
                    "dims": dims,
                    "dtype": self.dtype().as_str(),
                    "values": values,
                })
            }
            // Reading it back failed (a tensor the student's code broke): that is what was seen.
            Err(e) => serde_json::json!({ "unreadable": e.to_string() }),
        }
    }
}

#[cfg(feature = "candle")]
fn tensor_values(t: &candle_core::Tensor) -> candle_core::Result<Value> {
    use candle_core::{DType, Device};
    let flat = t.flatten_all()?.to_device(&Device::Cpu)?;
    let integral = matches!(flat.dtype(), DType::U8 | DType::U32 | DType::I64);
    let values: Vec<Value> = if integral {
        flat.to_dtype(DType::I64)?
            .to_vec1::<i64>()?
            .into_iter()
            .map(Value::from)
            .collect()
    } else {
        flat.to_dtype(DType::F64)?
            .to_vec1::<f64>()?
            .into_iter()
            .map(float)
            .collect()
    };
    if values.len() <= WHOLE_TENSOR_ELEMENTS {
        return Ok(Value::Array(values));
    }
    let as_f64: Vec<f64> = values
        .iter()
        .map(|v| v.as_f64().unwrap_or(f64::NAN))
        .collect();
    let step = as_f64.len() / 256;
    Ok(serde_json::json!({
        "len": as_f64.len(),
        "sum": float(as_f64.iter().sum()),
        "sum_abs": float(as_f64.iter().map(|v| v.abs()).sum()),
        "every": step,
        "sampled": as_f64.iter().step_by(step).map(|v| float(*v)).collect::<Vec<_>>(),
    }))
}

#[cfg(all(test, feature = "candle"))]
mod tests {
    use super::*;
    use candle_core::{Device, Tensor};

    #[test]
    fn tensors_are_logged_with_dims_dtype_and_values() {
        let t = Tensor::new(&[[1f32, 2.0], [3.0, f32::NAN]], &Device::Cpu).unwrap();
        assert_eq!(
            t.observation(),
            serde_json::json!({"dims": [2, 2], "dtype": "f32", "values": [1.0, 2.0, 3.0, "NaN"]})
        );
        let ids = Tensor::new(&[3u32, 1], &Device::Cpu).unwrap();
        assert_eq!(ids.observation()["values"], serde_json::json!([3, 1]));
    }

    #[test]
    fn large_tensors_are_summarised() {
        let t = Tensor::ones(
            WHOLE_TENSOR_ELEMENTS + 1,
            candle_core::DType::F32,
            &Device::Cpu,
        )
        .unwrap();
        let seen = t.observation();
        assert_eq!(seen["values"]["len"], WHOLE_TENSOR_ELEMENTS + 1);
        assert_eq!(seen["values"]["sum"], (WHOLE_TENSOR_ELEMENTS + 1) as f64);
    }
}
