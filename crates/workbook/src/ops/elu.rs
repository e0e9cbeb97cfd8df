//! ELU as one op with a one-pass gradient: the same values as candle's `elu`, less traffic.
//!
//! candle computes `elu` on one thread, and its backward pass builds the derivative from eight
//! tensors as large as the input (a zero tensor, two comparisons and their conversions, a shift,
//! two products and a sum, then a zero tensor and a sum for the accumulation). GATv2's hidden
//! layer (`N × 64` on a mini-batch of 10⁴ nodes) paid for all of them every step. Here the
//! forward pass runs in parallel over fixed chunks and the gradient is one pass:
//! `∂x = g · ([x > 0] + [x ≤ 0] · (y + α))`, the expression candle evaluates, in the same
//! order, so values equal candle's bit for bit. Other devices and dtypes use candle's op.
//!
//! ```
//! use workbook::candle_core::{Device, Tensor};
//! let x = Tensor::new(&[-1f32, 0., 2.], &Device::Cpu).unwrap();
//! let y = workbook::ops::elu::elu(&x, 1.0).unwrap().to_vec1::<f32>().unwrap();
//! assert_eq!(y, [(-1f32).exp() - 1., 0., 2.]);
//! ```

use super::kernel_support::{host_slice, with_host, Real, ELEMENTS_PER_TASK};
use candle_core::backend::BackendStorage;
use candle_core::{CpuStorage, CustomOp1, DType, Layout, Shape, Tensor};
use rayon::prelude::*;

/// `x` where `x > 0`, else `α · (eˣ - 1)` (candle's `elu`; see the module docs).
pub fn elu(x: &Tensor, alpha: f64) -> candle_core::Result<Tensor> {
    if !(x.device().is_cpu() && matches!(x.dtype(), DType::F32 | DType::F64)) {
        return x.elu(alpha);
    }
    x.contiguous()?.apply_op1(Elu { alpha })
}

struct Elu {
    alpha: f64,
}

/// candle's element function.
#[inline]
fn elu_value<T: Real>(v: T, alpha: T) -> T {
    if v.to_f64().is_sign_positive() {
        v
    } else {
        (v.exp() - T::one()) * alpha
    }
}

fn forward<T: Real>(x: &[T], alpha: T) -> Vec<T> {
    let mut out = vec![T::zero(); x.len()];
    out.par_chunks_mut(ELEMENTS_PER_TASK)
        .zip(x.par_chunks(ELEMENTS_PER_TASK))
        .for_each(|(o, x)| {
            for (o, &v) in o.iter_mut().zip(x) {
                *o = elu_value(v, alpha);
            }
        });
    out
}

/// `g · ([x > 0] + [x ≤ 0] · (y + α))`, as candle's backward pass rounds it.
fn backward<T: Real>(g: &[T], x: &[T], y: &[T], alpha: T) -> Vec<T> {
    let mut out = vec![T::zero(); g.len()];
    out.par_chunks_mut(ELEMENTS_PER_TASK)
        .zip(g.par_chunks(ELEMENTS_PER_TASK))
        .zip(
            x.par_chunks(ELEMENTS_PER_TASK)
                .zip(y.par_chunks(ELEMENTS_PER_TASK)),
        )
        .for_each(|((o, g), (x, y))| {
            for (((o, &g), &x), &y) in o.iter_mut().zip(g).zip(x).zip(y) {
                let pos = if x > T::zero() { T::one() } else { T::zero() };
                let neg = if x <= T::zero() { T::one() } else { T::zero() };
                *o = g * (pos + neg * (y + alpha));
            }
        });
    out
}

impl CustomOp1 for Elu {
    fn name(&self) -> &'static str {
        "elu"
    }

    fn cpu_fwd(&self, s: &CpuStorage, l: &Layout) -> candle_core::Result<(CpuStorage, Shape)> {
        let out = match s {
            CpuStorage::F32(_) => {
                CpuStorage::F32(forward(host_slice::<f32>(s, l, "elu")?, self.alpha as f32))
            }
            CpuStorage::F64(_) => {
                CpuStorage::F64(forward(host_slice::<f64>(s, l, "elu")?, self.alpha))
            }
            other => candle_core::bail!(
                "elu supports f32 and f64 on the CPU, got {:?}",
                other.dtype()
            ),
        };
        Ok((out, l.shape().clone()))
    }

    fn bwd(&self, x: &Tensor, res: &Tensor, grad: &Tensor) -> candle_core::Result<Option<Tensor>> {
        let grad = grad.contiguous()?;
        let dx = match grad.dtype() {
            DType::F32 => {
                let alpha = self.alpha as f32;
                let v = with_host::<f32, _>(&grad, "elu", |g| {
                    with_host::<f32, _>(x, "elu", |x| {
                        with_host::<f32, _>(res, "elu", |y| Ok(backward(g, x, y, alpha)))
                    })
                })?;
                Tensor::from_vec(v, x.shape(), x.device())?
            }
            DType::F64 => {
                let v = with_host::<f64, _>(&grad, "elu", |g| {
                    with_host::<f64, _>(x, "elu", |x| {
                        with_host::<f64, _>(res, "elu", |y| Ok(backward(g, x, y, self.alpha)))
                    })
                })?;
                Tensor::from_vec(v, x.shape(), x.device())?
            }
            other => candle_core::bail!("elu supports f32 and f64 on the CPU, got {other:?}"),
        };
        Ok(Some(dx))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use candle_core::{Device, Var};

    /// Values and gradients equal candle's `elu` bit for bit, zeros of both signs included.
    #[test]
    fn equals_candles_elu() {
        let vals: Vec<f32> = (0..40_000)
            .map(|i| ((i as f32) * 0.37).sin() * 5.0)
            .chain([0.0, -0.0, 1e-30, -1e-30, -80.0])
            .collect();
        let x = Var::from_vec(vals.clone(), vals.len(), &Device::Cpu).unwrap();
        let run = |ours: bool| {
            let y = if ours {
                elu(x.as_tensor(), 1.0).unwrap()
            } else {
                x.as_tensor().elu(1.0).unwrap()
            };
            let w = Tensor::from_vec(
                (0..vals.len())
                    .map(|i| (i % 7) as f32 - 3.0)
                    .collect::<Vec<_>>(),
                vals.len(),
                &Device::Cpu,
            )
            .unwrap();
            let g = (y.clone() * w)
                .unwrap()
                .sum_all()
                .unwrap()
                .backward()
                .unwrap();
            let bits = |t: &Tensor| {
                t.to_vec1::<f32>()
                    .unwrap()
                    .iter()
                    .map(|v| v.to_bits())
                    .collect::<Vec<_>>()
            };
            (bits(&y), bits(g.get(x.as_tensor()).unwrap()))
        };
        assert_eq!(run(true), run(false));
    }
}
