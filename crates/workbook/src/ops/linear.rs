//! `x · Wᵀ + b` as one op, and adding a bias row, with backward passes that do only what is needed.
//!
//! Composed from candle ops, a linear map with bias is a `matmul` with a transposed view of `W`
//! and a `broadcast_add`. candle's backward pass then does more than the gradients need: the
//! `matmul` always computes `∂x = G · W`, also for the input features, which need no gradient
//! (on the first layer, a product as large as the forward one); the broadcast bias first gets a
//! gradient as large as `G` (a zero tensor plus `G`), then candle's sum over its rows, which
//! computes an index per element (on a mini-batch of `csbm:100000`, the sums behind GATv2's
//! three biases per layer were a fifth of the training step). Here [`linear`] computes the same
//! forward values with the same `matmul` call and additions, and its gradient computes `∂x`
//! only when `x` needs it, `∂W` as candle does, and `∂b` as one pass over `G`'s rows.
//! [`add_bias`] is the bias part alone (for layers whose product is a sparse one or an
//! aggregation); [`super::product`] is the product alone. The row sum adds the rows in order, as candle's sum does, so every value equals
//! the composed ops' bit for bit. Other devices and dtypes use the composed ops.
//!
//! ```
//! use workbook::candle_core::{Device, Tensor};
//! use workbook::ops::linear::{add_bias, linear};
//! let dev = Device::Cpu;
//! let x = Tensor::new(&[[1f32, 2.], [3., 4.]], &dev).unwrap();
//! let w = Tensor::new(&[[1f32, 0.], [0., 1.], [1., 1.]], &dev).unwrap(); // [out 3, in 2]
//! let b = Tensor::new(&[10f32, 20., 30.], &dev).unwrap();
//! let y = linear(&x, &w, Some(&b)).unwrap();
//! assert_eq!(y.to_vec2::<f32>().unwrap(), [[11., 22., 33.], [13., 24., 37.]]);
//! let z = add_bias(&x, &Tensor::new(&[1f32, -1.], &dev).unwrap()).unwrap();
//! assert_eq!(z.to_vec2::<f32>().unwrap(), [[2., 1.], [4., 3.]]);
//! ```

use super::kernel_support::{host_slice, with_host, Real, ELEMENTS_PER_TASK};
use super::product::on_cpu;
use candle_core::backend::BackendStorage;
use candle_core::{CpuStorage, CustomOp2, CustomOp3, DType, Layout, Shape, Tensor};
use rayon::prelude::*;

/// `x · weightᵀ + bias` for `x` `[N, F]`, `weight` `[O, F]`, `bias` `[O]`: over the non-zeros
/// of `x` when it holds sparse features ([`super::sparse_features`]), as one op (see the module
/// docs) on the CPU, candle's ops elsewhere.
pub fn linear(x: &Tensor, weight: &Tensor, bias: Option<&Tensor>) -> candle_core::Result<Tensor> {
    let Some(b) = bias else {
        return super::sparse_features::linear(x, weight);
    };
    let fused = on_cpu(x)
        && x.rank() == 2
        && weight.dtype() == x.dtype()
        && b.dtype() == x.dtype()
        && weight.device().is_cpu()
        && b.device().is_cpu()
        && super::sparse_features::SparseFeatures::of(x).is_none();
    if !fused {
        return add_bias(&super::sparse_features::linear(x, weight)?, b);
    }
    let (_, f) = x.dims2()?;
    let (o, fw) = weight.dims2()?;
    if f != fw || b.dims() != [o] {
        candle_core::bail!(
            "linear: x is {:?}, the weight {:?} and the bias {:?}; want [N, F], [O, F] and [O]",
            x.dims(),
            weight.dims(),
            b.dims()
        );
    }
    x.contiguous()?
        .apply_op3(&weight.contiguous()?, &b.contiguous()?, Linear)
}

/// `y + bias` on every row of `y` `[N, O]`, `bias` `[O]` (candle's `broadcast_add`, with the
/// bias gradient as one pass over the rows; see the module docs).
pub fn add_bias(y: &Tensor, bias: &Tensor) -> candle_core::Result<Tensor> {
    let fits = on_cpu(y)
        && y.rank() == 2
        && bias.dtype() == y.dtype()
        && bias.device().is_cpu()
        && bias.dims() == [y.dim(1)?];
    if !fits {
        return y.broadcast_add(bias);
    }
    y.contiguous()?.apply_op2(&bias.contiguous()?, AddBias)
}

/// `y[i, :] += b`, as `broadcast_add` rounds it (`y + b`), in parallel over blocks of rows.
fn add_rows<T: Real>(y: &mut [T], b: &[T]) {
    if b.is_empty() {
        return;
    }
    y.par_chunks_mut(rows_per_task(b.len()) * b.len())
        .for_each(|rows| {
            for row in rows.chunks_mut(b.len()) {
                for (a, &v) in row.iter_mut().zip(b) {
                    *a += v;
                }
            }
        });
}

/// `y[i, :] + b` into a new buffer in one pass (no copy of `y` first), in parallel over blocks
/// of rows; the same sums as [`add_rows`].
fn plus_rows<T: Real>(y: &[T], b: &[T]) -> Vec<T> {
    let width = b.len();
    if width == 0 {
        return Vec::new();
    }
    let chunk = rows_per_task(width) * width;
    let mut out = Vec::with_capacity(y.len());
    out.spare_capacity_mut()[..y.len()]
        .par_chunks_mut(chunk)
        .zip(y.par_chunks(chunk))
        .for_each(|(o, y)| {
            for (orow, yrow) in o.chunks_mut(width).zip(y.chunks(width)) {
                for ((o, &a), &v) in orow.iter_mut().zip(yrow).zip(b) {
                    o.write(a + v);
                }
            }
        });
    // SAFETY: the capacity is at least `y.len()`, and each of the first `y.len()` elements was
    // written: the chunks of `out` and `y` have equal lengths, so do their rows, and each row
    // is at most `width = b.len()` long, so the zip with `b` writes every element of it.
    unsafe { out.set_len(y.len()) };
    out
}

/// Rows per parallel task: about [`ELEMENTS_PER_TASK`] values.
fn rows_per_task(width: usize) -> usize {
    (ELEMENTS_PER_TASK / width.max(1)).max(1)
}

/// `Σ_i g[i, :]`, the rows added in order (candle's `sum(0)` adds them in the same order).
fn column_sums<T: Real>(g: &[T], width: usize) -> Vec<T> {
    let mut out = vec![T::zero(); width];
    if width == 0 {
        return out;
    }
    for row in g.chunks(width) {
        for (o, &v) in out.iter_mut().zip(row) {
            *o += v;
        }
    }
    out
}

/// The bias gradient `[O]` of an output gradient `grad` `[N, O]`, on the host.
fn bias_grad(grad: &Tensor, bias: &Tensor) -> candle_core::Result<Tensor> {
    let width = bias.elem_count();
    let sums = match grad.dtype() {
        DType::F32 => Tensor::from_vec(
            with_host::<f32, _>(grad, "linear", |g| Ok(column_sums(g, width)))?,
            bias.shape(),
            grad.device(),
        )?,
        DType::F64 => Tensor::from_vec(
            with_host::<f64, _>(grad, "linear", |g| Ok(column_sums(g, width)))?,
            bias.shape(),
            grad.device(),
        )?,
        other => candle_core::bail!("linear supports f32 and f64 on the CPU, got {other:?}"),
    };
    Ok(sums)
}

/// The op of [`linear`]: arguments `x`, `weight`, `bias`.
struct Linear;

impl CustomOp3 for Linear {
    fn name(&self) -> &'static str {
        "linear"
    }

    fn cpu_fwd(
        &self,
        s1: &CpuStorage,
        l1: &Layout,
        s2: &CpuStorage,
        l2: &Layout,
        s3: &CpuStorage,
        l3: &Layout,
    ) -> candle_core::Result<(CpuStorage, Shape)> {
        let (y, shape) = super::product::times_transposed(s1, l1, s2, l2)?;
        let y = match y {
            CpuStorage::F32(mut v) => {
                add_rows(&mut v, host_slice::<f32>(s3, l3, "linear")?);
                CpuStorage::F32(v)
            }
            CpuStorage::F64(mut v) => {
                add_rows(&mut v, host_slice::<f64>(s3, l3, "linear")?);
                CpuStorage::F64(v)
            }
            other => candle_core::bail!(
                "linear supports f32 and f64 on the CPU, got {:?}",
                other.dtype()
            ),
        };
        Ok((y, shape))
    }

    fn bwd(
        &self,
        x: &Tensor,
        weight: &Tensor,
        bias: &Tensor,
        _res: &Tensor,
        grad: &Tensor,
    ) -> candle_core::Result<(Option<Tensor>, Option<Tensor>, Option<Tensor>)> {
        let grad = grad.contiguous()?;
        let (dx, dw) = super::product::product_grads(x, weight, &grad)?;
        let db = if bias.track_op() {
            Some(bias_grad(&grad, bias)?)
        } else {
            None
        };
        Ok((dx, dw, db))
    }
}

/// The op of [`add_bias`]: arguments `y`, `bias`.
struct AddBias;

impl CustomOp2 for AddBias {
    fn name(&self) -> &'static str {
        "add-bias"
    }

    fn cpu_fwd(
        &self,
        s1: &CpuStorage,
        l1: &Layout,
        s2: &CpuStorage,
        l2: &Layout,
    ) -> candle_core::Result<(CpuStorage, Shape)> {
        let out = match s1 {
            CpuStorage::F32(_) => CpuStorage::F32(plus_rows(
                host_slice::<f32>(s1, l1, "add_bias")?,
                host_slice::<f32>(s2, l2, "add_bias")?,
            )),
            CpuStorage::F64(_) => CpuStorage::F64(plus_rows(
                host_slice::<f64>(s1, l1, "add_bias")?,
                host_slice::<f64>(s2, l2, "add_bias")?,
            )),
            other => candle_core::bail!(
                "add_bias supports f32 and f64 on the CPU, got {:?}",
                other.dtype()
            ),
        };
        Ok((out, l1.shape().clone()))
    }

    fn bwd(
        &self,
        y: &Tensor,
        bias: &Tensor,
        _res: &Tensor,
        grad: &Tensor,
    ) -> candle_core::Result<(Option<Tensor>, Option<Tensor>)> {
        let grad = grad.contiguous()?;
        let dy = y.track_op().then(|| grad.clone());
        let db = if bias.track_op() {
            Some(bias_grad(&grad, bias)?)
        } else {
            None
        };
        Ok((dy, db))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use candle_core::{Device, Var};

    /// Forward values and all three gradients equal the composed candle ops bit for bit.
    #[test]
    fn linear_equals_matmul_and_broadcast_add() {
        let dev = Device::Cpu;
        let x = Var::new(
            &[[0.3f32, -1.2, 2.5], [0.7, 0.1, -0.4], [1.9, -2.2, 0.05]],
            &dev,
        )
        .unwrap();
        let w = Var::new(&[[0.11f32, -0.7, 1.3], [2.1, 0.9, -0.35]], &dev).unwrap();
        let b = Var::new(&[0.25f32, -1.5], &dev).unwrap();
        let run = |fused: bool| {
            let y = if fused {
                linear(x.as_tensor(), w.as_tensor(), Some(b.as_tensor())).unwrap()
            } else {
                x.matmul(&w.t().unwrap())
                    .unwrap()
                    .broadcast_add(b.as_tensor())
                    .unwrap()
            };
            let loss = (y.sqr().unwrap() * 0.5).unwrap().sum_all().unwrap();
            let g = loss.backward().unwrap();
            let v = |t: &Tensor| t.flatten_all().unwrap().to_vec1::<f32>().unwrap();
            (
                v(&y),
                v(g.get(x.as_tensor()).unwrap()),
                v(g.get(w.as_tensor()).unwrap()),
                v(g.get(b.as_tensor()).unwrap()),
            )
        };
        assert_eq!(run(true), run(false));
    }

    /// `add_bias` equals `broadcast_add`, gradients included.
    #[test]
    fn add_bias_equals_broadcast_add() {
        let dev = Device::Cpu;
        let y = Var::new(&[[1.5f64, -2.0], [0.25, 3.0], [-0.5, 0.125]], &dev).unwrap();
        let b = Var::new(&[0.1f64, -0.3], &dev).unwrap();
        let run = |fused: bool| {
            let z = if fused {
                add_bias(y.as_tensor(), b.as_tensor()).unwrap()
            } else {
                y.broadcast_add(b.as_tensor()).unwrap()
            };
            let loss = z.sqr().unwrap().sum_all().unwrap();
            let g = loss.backward().unwrap();
            let v = |t: &Tensor| t.flatten_all().unwrap().to_vec1::<f64>().unwrap();
            (
                v(&z),
                v(g.get(y.as_tensor()).unwrap()),
                v(g.get(b.as_tensor()).unwrap()),
            )
        };
        assert_eq!(run(true), run(false));
    }
}
