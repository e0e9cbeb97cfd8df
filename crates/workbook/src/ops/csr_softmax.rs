//! The per-destination softmax of [`super::segment_softmax()`], fused into one op over a [`Csr`].
//!
//! `alpha[e, h] = exp(s[e, h] - m[i, h]) / (Σ_{e' → i} exp(s[e', h] - m[i, h]) + 1e-16)` with
//! `m[i, h]` node `i`'s own maximum, exactly PyG's `utils.softmax`. The composed version takes a
//! segment max, two gathers, an `exp`, a scatter-add and a divide, eight passes over `[E, H]`
//! plus their backward; here each destination's edges are one contiguous run, handled in one
//! parallel task. The terms are added in the original edge order, as `index_add` does, so the
//! values equal the composed op's.
//!
//! Gradient: `∂s[e] = alpha[e] · (g[e] - Σ_{e' → i} alpha[e'] g[e'])`, the softmax Jacobian
//! (the `1e-16` is inside `alpha`; the maximum is a constant, as PyG detaches it).
//!
//! ```
//! use std::sync::Arc;
//! use workbook::candle_core::{Device, Tensor};
//! use workbook::ops::{csr_softmax, Csr};
//! let dev = Device::Cpu;
//! let csr = Arc::new(Csr::new(&[0, 1], &[2, 2], 3, &dev).unwrap()); // both edges into node 2
//! let s = Tensor::new(&[[-1000f32], [-1001.]], &dev).unwrap();
//! let a = csr_softmax(&s, &csr).unwrap().to_vec2::<f32>().unwrap();
//! assert!((a[0][0] - 0.7311).abs() < 1e-4 && (a[1][0] - 0.2689).abs() < 1e-4);
//! ```

use super::csr::{Csr, Sorted};
use super::kernel_support::{host_slice, prefetch_edges, prefetch_row, Real, MIN_ROWS_PER_TASK};
use candle_core::backend::BackendStorage;
use candle_core::{CpuStorage, CustomOp1, CustomOp2, Layout, Shape, Tensor};
use rayon::prelude::*;
use std::sync::Arc;

/// PyG's softmax of `scores` (`[E, H]`) over the edges that share a destination.
pub fn csr_softmax(scores: &Tensor, csr: &Arc<Csr>) -> candle_core::Result<Tensor> {
    let (e, _) = scores.dims2()?;
    if e != csr.num_edges() {
        candle_core::bail!(
            "csr_softmax: scores must be [{}, H], got {:?}",
            csr.num_edges(),
            scores.dims()
        );
    }
    scores
        .contiguous()?
        .apply_op1(CsrSoftmax { csr: csr.clone() })
}

struct CsrSoftmax {
    csr: Arc<Csr>,
}

/// The rows of `buf` (in destination order, `width` values per edge), one slice per node.
fn rows_mut<'a, T>(mut buf: &'a mut [T], ptr: &[u32], width: usize) -> Vec<&'a mut [T]> {
    let mut rows = Vec::with_capacity(ptr.len().saturating_sub(1));
    for w in ptr.windows(2) {
        let (row, rest) = buf.split_at_mut((w[1] - w[0]) as usize * width);
        rows.push(row);
        buf = rest;
    }
    rows
}

/// Runs `row_fn(node, sorted_row)` on every node in parallel, with `sorted_row` the node's slice
/// of a destination-ordered buffer, then returns that buffer in the original edge order.
/// `gathered` are the `[E, h]` inputs `row_fn` reads by edge id: the next node's entries are
/// requested while this one is computed (they are scattered, so each is a cache miss).
fn per_row<T: Real>(
    sorted: &Sorted,
    h: usize,
    gathered: &[&[T]],
    row_fn: impl Fn(usize, &mut [T]) + Sync,
) -> Vec<T> {
    let mut buf = vec![T::zero(); sorted.edge().len() * h];
    rows_mut(&mut buf, sorted.ptr(), h)
        .into_par_iter()
        .with_min_len(MIN_ROWS_PER_TASK)
        .enumerate()
        .for_each(|(i, row)| {
            if let Some(&end) = sorted.ptr().get(i + 2) {
                for &e in &sorted.edge()[sorted.ptr()[i + 1] as usize..end as usize] {
                    for a in gathered {
                        prefetch_row(a, e as usize * h, h);
                    }
                }
            }
            row_fn(i, row)
        });
    let mut out = vec![T::zero(); sorted.edge().len() * h];
    if h > 0 {
        let ahead = prefetch_edges(h * std::mem::size_of::<T>());
        out.par_chunks_mut(h)
            .with_min_len(MIN_ROWS_PER_TASK)
            .enumerate()
            .for_each(|(e, o)| {
                if let Some(&p) = sorted.pos().get(e + ahead) {
                    prefetch_row(&buf, p as usize * h, h);
                }
                o.copy_from_slice(&buf[sorted.pos()[e] as usize * h..][..h])
            });
    }
    out
}

fn softmax<T: Real>(s: &[T], sorted: &Sorted, h: usize) -> Vec<T> {
    let eps = T::from_f64(1e-16);
    per_row(sorted, h, &[s], |i, row| {
        let edges = &sorted.edge()[sorted.ptr()[i] as usize..sorted.ptr()[i + 1] as usize];
        if edges.is_empty() {
            return;
        }
        for hh in 0..h {
            let score = |k: usize| s[edges[k] as usize * h + hh];
            let m = (1..edges.len()).fold(score(0), |m, k| m.fold_max(score(k)));
            let mut sum = T::zero();
            for k in 0..edges.len() {
                let x = (score(k) - m).exp();
                row[k * h + hh] = x;
                sum += x;
            }
            let denom = sum + eps;
            for k in 0..edges.len() {
                row[k * h + hh] /= denom;
            }
        }
    })
}

fn softmax_grad<T: Real>(alpha: &[T], g: &[T], sorted: &Sorted, h: usize) -> Vec<T> {
    per_row(sorted, h, &[alpha, g], |i, row| {
        let edges = &sorted.edge()[sorted.ptr()[i] as usize..sorted.ptr()[i + 1] as usize];
        for hh in 0..h {
            let at = |k: usize| edges[k] as usize * h + hh;
            let dot = (0..edges.len()).fold(T::zero(), |d, k| d + alpha[at(k)] * g[at(k)]);
            for k in 0..edges.len() {
                row[k * h + hh] = alpha[at(k)] * (g[at(k)] - dot);
            }
        }
    })
}

impl CustomOp1 for CsrSoftmax {
    fn name(&self) -> &'static str {
        "csr-softmax"
    }

    fn cpu_fwd(&self, s: &CpuStorage, l: &Layout) -> candle_core::Result<(CpuStorage, Shape)> {
        let (_, h) = l.shape().dims2()?;
        let sorted = self.csr.by_dst();
        let out = match s {
            CpuStorage::F32(_) => {
                CpuStorage::F32(softmax(host_slice(s, l, "csr_softmax")?, sorted, h))
            }
            CpuStorage::F64(_) => {
                CpuStorage::F64(softmax(host_slice(s, l, "csr_softmax")?, sorted, h))
            }
            other => candle_core::bail!(
                "csr_softmax on the CPU supports f32 and f64, got {:?}",
                other.dtype()
            ),
        };
        Ok((out, l.shape().clone()))
    }

    #[cfg(feature = "cuda")]
    fn cuda_fwd(
        &self,
        s: &candle_core::CudaStorage,
        l: &Layout,
    ) -> candle_core::Result<(candle_core::CudaStorage, Shape)> {
        cuda::softmax(&self.csr, (s, l), None)
    }

    fn bwd(
        &self,
        _arg: &Tensor,
        res: &Tensor,
        grad: &Tensor,
    ) -> candle_core::Result<Option<Tensor>> {
        let op = SoftmaxGrad {
            csr: self.csr.clone(),
        };
        Ok(Some(res.apply_op2_no_bwd(&grad.contiguous()?, &op)?))
    }
}

/// `(alpha, g) ↦ ∂s`.
struct SoftmaxGrad {
    csr: Arc<Csr>,
}

impl CustomOp2 for SoftmaxGrad {
    fn name(&self) -> &'static str {
        "csr-softmax-grad"
    }

    fn cpu_fwd(
        &self,
        s1: &CpuStorage,
        l1: &Layout,
        s2: &CpuStorage,
        l2: &Layout,
    ) -> candle_core::Result<(CpuStorage, Shape)> {
        let (_, h) = l1.shape().dims2()?;
        let sorted = self.csr.by_dst();
        let out = match (s1, s2) {
            (CpuStorage::F32(_), CpuStorage::F32(_)) => CpuStorage::F32(softmax_grad(
                host_slice(s1, l1, "csr_softmax")?,
                host_slice(s2, l2, "csr_softmax")?,
                sorted,
                h,
            )),
            (CpuStorage::F64(_), CpuStorage::F64(_)) => CpuStorage::F64(softmax_grad(
                host_slice(s1, l1, "csr_softmax")?,
                host_slice(s2, l2, "csr_softmax")?,
                sorted,
                h,
            )),
            _ => candle_core::bail!(
                "csr_softmax on the CPU supports f32 and f64, got {:?}",
                s1.dtype()
            ),
        };
        Ok((out, l1.shape().clone()))
    }

    #[cfg(feature = "cuda")]
    fn cuda_fwd(
        &self,
        s1: &candle_core::CudaStorage,
        l1: &Layout,
        s2: &candle_core::CudaStorage,
        l2: &Layout,
    ) -> candle_core::Result<(candle_core::CudaStorage, Shape)> {
        cuda::softmax(&self.csr, (s1, l1), Some((s2, l2)))
    }
}

#[cfg(feature = "cuda")]
mod cuda {
    use super::super::kernel_support::cuda::{with_view, zeros, Launch};
    use super::Csr;
    use candle_core::backend::BackendStorage;
    use candle_core::cuda_backend::cudarc::driver::{CudaView, PushKernelArg};
    use candle_core::{CudaStorage, Layout, Shape};

    fn f32_view<'a>(s: &'a CudaStorage, l: &Layout) -> candle_core::Result<CudaView<'a, f32>> {
        let slice = s.as_cuda_slice::<f32>().map_err(|_| {
            candle_core::Error::Msg(format!(
                "csr_softmax on CUDA supports f32, got {:?}",
                s.dtype()
            ))
        })?;
        Ok(slice.slice(l.start_offset()..))
    }

    /// The softmax of `a` (scores), or with `g` given, its gradient (`a` is then alpha).
    pub(super) fn softmax(
        csr: &Csr,
        (s1, l1): (&CudaStorage, &Layout),
        g: Option<(&CudaStorage, &Layout)>,
    ) -> candle_core::Result<(CudaStorage, Shape)> {
        let (e, h) = l1.shape().dims2()?;
        let n = csr.num_nodes();
        let dev = s1.device().clone();
        let a = f32_view(s1, l1)?;
        let d = csr.on_device().ok_or_else(|| {
            candle_core::Error::Msg("csr_softmax: the CSR was built for the CPU".into())
        })?;
        let out = zeros(&dev, e * h)?;
        let (n32, h32) = (n as u32, h as u32);
        // one thread per (node, head); none when there are no edges to normalise
        let threads = if e == 0 { 0 } else { n * h };
        with_view::<u32, _>(d.by_dst().ptr(), "csr_softmax", |ptr| {
            with_view::<u32, _>(d.by_dst().edge(), "csr_softmax", |edge| match g {
                None => {
                    let launch = Launch::new(&dev, "softmax_f32", threads)?;
                    // SAFETY: `Launch::run`'s contract: `softmax_f32`'s parameters in order; a
                    // `Csr`'s arrays; scores of the shape `csr_softmax` checked against it; the
                    // n·h threads write `out`'s e·h elements through the CSR's edge ids.
                    unsafe {
                        launch.run(|b| {
                            b.arg(ptr);
                            b.arg(edge);
                            b.arg(&a);
                            b.arg(&out);
                            b.arg(&n32);
                            b.arg(&h32);
                        })
                    }
                }
                Some((s2, l2)) => {
                    let g = f32_view(s2, l2)?;
                    let launch = Launch::new(&dev, "softmax_grad_f32", threads)?;
                    // SAFETY: `Launch::run`'s contract: `softmax_grad_f32`'s parameters in
                    // order; a `Csr`'s arrays; alpha and its gradient of the shape
                    // `csr_softmax` checked; the n·h threads write `out`'s e·h elements through
                    // the CSR's edge ids.
                    unsafe {
                        launch.run(|b| {
                            b.arg(ptr);
                            b.arg(edge);
                            b.arg(&a);
                            b.arg(&g);
                            b.arg(&out);
                            b.arg(&n32);
                            b.arg(&h32);
                        })
                    }
                }
            })
        })?;
        Ok((CudaStorage::wrap_cuda_slice(out, dev), Shape::from((e, h))))
    }
}
