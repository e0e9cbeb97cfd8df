//! GATv2's attention scores, one fused candle op: `s[e, h] = Σ_c a[h, c] · LeakyReLU(x_r[i, h, c] + x_l[j, h, c])`
//! for every edge `e = (j → i)`.
//!
//! Composed from candle ops, the scores gather two `[E, H, C]` copies of node rows, then run five
//! element-wise passes for the LeakyReLU, a multiply and a sum over them, and keep all of it for the
//! backward pass. For Cora with 8 heads that is modest; for a million edges it is gigabytes. This op
//! reads the node rows in place and keeps nothing but its inputs.
//!
//! The gradient recomputes `x_r[i] + x_l[j]`: `∂x_l` sums over the edges out of each node and
//! `∂x_r` over the edges into it (both parallel over nodes on the [`Csr`]), `∂a` over all edges in
//! fixed chunks added in a fixed order, so results do not depend on the number of threads.
//! LeakyReLU's derivative at exactly 0 is the slope, as in torch.
//!
//! ```
//! use std::sync::Arc;
//! use workbook::candle_core::{Device, Tensor};
//! use workbook::ops::{gat_scores, Csr};
//! let dev = Device::Cpu;
//! let csr = Arc::new(Csr::new(&[0], &[1], 2, &dev).unwrap()); // one edge 0 -> 1
//! let x_l = Tensor::new(&[[[1f32, -3.]], [[0., 0.]]], &dev).unwrap(); // [2 nodes, 1 head, 2]
//! let x_r = Tensor::new(&[[[0f32, 0.]], [[1., 1.]]], &dev).unwrap();
//! let att = Tensor::new(&[[[1f32, 1.]]], &dev).unwrap();
//! // LeakyReLU(1 + 1) + LeakyReLU(-3 + 1) = 2 + 0.2 · (-2)
//! let s = gat_scores(&x_l, &x_r, &att, &csr, 0.2).unwrap();
//! assert!((s.to_vec2::<f32>().unwrap()[0][0] - 1.6).abs() < 1e-6);
//! ```

use super::csr::Csr;
use super::kernel_support::{
    host_slice, prefetch_edges, prefetch_row, rows_written_once, with_host, GatherSchedule, Real,
    MIN_ROWS_PER_TASK,
};
use candle_core::backend::BackendStorage;
use candle_core::{CpuStorage, CustomOp1, CustomOp3, Layout, Shape, Tensor};
use rayon::prelude::*;
use std::sync::Arc;

/// Scores of every edge and head (see the module docs). `x_l`, `x_r`: `[N, H, C]`, or on the CPU
/// also `[N, H·C]` (heads side by side, as a linear map returns them: no reshape node, whose
/// backward pass would copy the gradient); `att`: `[1, H, C]` or `[H, C]`; result `[E, H]` in
/// the edges' original order.
pub fn gat_scores(
    x_l: &Tensor,
    x_r: &Tensor,
    att: &Tensor,
    csr: &Arc<Csr>,
    negative_slope: f64,
) -> candle_core::Result<Tensor> {
    let n = csr.num_nodes();
    let (h, c) = match (x_l.dims(), att.dims()) {
        (&[_, h, c], _) => (h, c),
        (&[_, _], &[1, h, c] | &[h, c]) => (h, c),
        _ => (0, 0),
    };
    let fits =
        |t: &Tensor| t.dims() == [n, h, c] || (t.dims() == [n, h * c] && t.device().is_cpu());
    if h * c == 0 || !fits(x_l) || x_r.dims() != x_l.dims() || att.elem_count() != h * c {
        candle_core::bail!(
            "gat_scores: x_l and x_r must be [{}, H, C] (or [{}, H·C] on the CPU) and att hold H·C values, got {:?}, {:?}, {:?}",
            n,
            n,
            x_l.dims(),
            x_r.dims(),
            att.dims()
        );
    }
    if x_r.dtype() != x_l.dtype() || att.dtype() != x_l.dtype() {
        candle_core::bail!("gat_scores: x_l, x_r and att must share one dtype");
    }
    x_l.contiguous()?.apply_op3(
        &x_r.contiguous()?,
        &att.reshape((h, c))?.contiguous()?,
        GatScores {
            csr: csr.clone(),
            slope: negative_slope,
            h,
            c,
        },
    )
}

struct GatScores {
    csr: Arc<Csr>,
    slope: f64,
    /// Heads and channels per head (`x_l` may be `[N, H·C]`).
    h: usize,
    c: usize,
}

#[inline]
fn leaky<T: Real>(z: T, slope: T) -> T {
    if z > T::zero() {
        z
    } else {
        z * slope
    }
}

#[inline]
fn leaky_grad<T: Real>(z: T, slope: T) -> T {
    if z > T::zero() {
        T::one()
    } else {
        slope
    }
}

/// One edge's scores at GATv2's default width, 8 heads of 8: the vector code of
/// [`super::gat_scores_8x8`] for `f32` on a CPU that runs it, else the portable loop; the same
/// bits either way.
trait EdgeScores8x8: Real {
    /// Whether [`Self::edge_scores_8x8`] may take the vector code (asked once per call of the op).
    fn vector_code() -> bool {
        false
    }

    fn edge_scores_8x8(
        lj: &[Self],
        ri: &[Self],
        att: &[Self],
        slope: Self,
        se: &mut [Self],
        _vector: bool,
    ) {
        edge_scores_fixed::<Self, 64, 8>(lj, ri, att, slope, se);
    }
}

impl EdgeScores8x8 for f64 {}

impl EdgeScores8x8 for f32 {
    fn vector_code() -> bool {
        super::kernel_support::avx()
    }

    fn edge_scores_8x8(
        lj: &[f32],
        ri: &[f32],
        att: &[f32],
        slope: f32,
        se: &mut [f32],
        vector: bool,
    ) {
        #[cfg(target_arch = "x86_64")]
        if vector {
            if let (Ok(lj), Ok(ri), Ok(att), Ok(se)) =
                (lj.try_into(), ri.try_into(), att.try_into(), se.try_into())
            {
                return super::gat_scores_8x8::edge_scores(lj, ri, att, slope, se);
            }
        }
        let _ = vector;
        edge_scores_fixed::<f32, 64, 8>(lj, ri, att, slope, se);
    }
}

fn scores<T: EdgeScores8x8>(
    xl: &[T],
    xr: &[T],
    att: &[T],
    csr: &Csr,
    h: usize,
    c: usize,
    slope: T,
) -> Vec<T> {
    let width = h * c;
    let mut out = vec![T::zero(); csr.num_edges() * h];
    if h == 0 {
        return out;
    }
    // edges in their own order; edge lists usually come grouped by one end, so the distance is
    // counted for one gathered row per edge
    let ahead = prefetch_edges(width * std::mem::size_of::<T>());
    let vector = T::vector_code();
    out.par_chunks_mut(h)
        .with_min_len(MIN_ROWS_PER_TASK)
        .enumerate()
        .for_each(|(e, se)| {
            if let (Some(&j), Some(&i)) = (csr.src().get(e + ahead), csr.dst().get(e + ahead)) {
                prefetch_row(xl, j as usize * width, width);
                prefetch_row(xr, i as usize * width, width);
            }
            let (j, i) = (csr.src()[e] as usize, csr.dst()[e] as usize);
            let (lj, ri) = (&xl[j * width..][..width], &xr[i * width..][..width]);
            match (h, c) {
                (8, 8) => T::edge_scores_8x8(lj, ri, att, slope, se, vector),
                _ => {
                    for (hh, s) in se.iter_mut().enumerate() {
                        let r = hh * c..(hh + 1) * c;
                        *s = ri[r.clone()]
                            .iter()
                            .zip(&lj[r.clone()])
                            .zip(&att[r])
                            .fold(T::zero(), |acc, ((&a, &b), &w)| {
                                acc + leaky(a + b, slope) * w
                            });
                    }
                }
            }
        });
    out
}

/// One edge's scores for `W` values in heads of `C`, both known when compiled (GATv2's 8 heads
/// of 8): the LeakyReLU terms of all heads in one pass the compiler vectorises, then each
/// head's `C` terms added as a balanced tree (halves, then halves of those), a fixed order, so
/// the scores still do not depend on the threads. `C` must be a power of two.
#[inline(always)]
fn edge_scores_fixed<T: Real, const W: usize, const C: usize>(
    lj: &[T],
    ri: &[T],
    att: &[T],
    slope: T,
    se: &mut [T],
) {
    let (lj, ri, att) = (&lj[..W], &ri[..W], &att[..W]);
    let mut v = [T::zero(); W];
    for t in 0..W {
        v[t] = leaky(ri[t] + lj[t], slope) * att[t];
    }
    for (s, head) in se.iter_mut().zip(v.chunks_exact_mut(C)) {
        let mut len = C;
        while len > 1 {
            len /= 2;
            let (lo, hi) = head.split_at_mut(len);
            for (a, &b) in lo.iter_mut().zip(&hi[..len]) {
                *a += b;
            }
        }
        *s = head[0];
    }
}

/// Which gradient a [`ScoresGrad`] computes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Wrt {
    XL,
    XR,
    Att,
}

/// Edges per chunk of the `∂a` sum: fixed, so the summation order is too.
const ATT_CHUNK: usize = 2048;

/// [`scores_grad`] in `f32`, with GATv2's 8 heads of 8 compiled for their width
/// ([`scores_grad_fixed`]). `f64` (tests, gradient checks) takes the general loop: compiling
/// the fixed width twice would lengthen every build for no program's benefit.
#[allow(clippy::too_many_arguments)]
fn scores_grad_f32(
    g: &[f32],
    xl: &[f32],
    xr: &[f32],
    att: &[f32],
    csr: &Csr,
    wrt: Wrt,
    (h, c): (usize, usize),
    slope: f32,
) -> Vec<f32> {
    if (h, c) == (8, 8) {
        return scores_grad_fixed::<f32, 64, 8, 8>(g, xl, xr, att, csr, wrt, slope);
    }
    scores_grad(g, xl, xr, att, csr, wrt, (h, c), slope)
}

/// The `∂a` chunks' partial sums added in chunk order: a fixed order, whatever the threads.
fn sum_in_order<T: Real, P: AsRef<[T]>>(partials: Vec<P>, width: usize) -> Vec<T> {
    let mut out = vec![T::zero(); width];
    for p in partials {
        for (o, &v) in out.iter_mut().zip(p.as_ref()) {
            *o += v;
        }
    }
    out
}

#[allow(clippy::too_many_arguments)]
fn scores_grad<T: Real>(
    g: &[T],
    xl: &[T],
    xr: &[T],
    att: &[T],
    csr: &Csr,
    wrt: Wrt,
    (h, c): (usize, usize),
    slope: T,
) -> Vec<T> {
    let width = h * c;
    if width == 0 {
        return Vec::new();
    }
    if wrt == Wrt::Att {
        let e = csr.num_edges();
        let partials: Vec<Vec<T>> = (0..e.div_ceil(ATT_CHUNK))
            .into_par_iter()
            .map(|chunk| {
                let mut acc = vec![T::zero(); width];
                for e in chunk * ATT_CHUNK..((chunk + 1) * ATT_CHUNK).min(e) {
                    let (j, i) = (csr.src()[e] as usize, csr.dst()[e] as usize);
                    let (lj, ri) = (&xl[j * width..][..width], &xr[i * width..][..width]);
                    for hh in 0..h {
                        let ge = g[e * h + hh];
                        let r = hh * c..(hh + 1) * c;
                        for ((a, &l), &r) in
                            acc[r.clone()].iter_mut().zip(&lj[r.clone()]).zip(&ri[r])
                        {
                            *a += ge * leaky(r + l, slope);
                        }
                    }
                }
                acc
            })
            .collect();
        return sum_in_order(partials, width);
    }
    // ∂x_l[j] sums over the edges out of j, ∂x_r[i] over the edges into i.
    let (sorted, node_is_src) = match wrt {
        Wrt::XL => (csr.by_src(), true),
        _ => (csr.by_dst(), false),
    };
    let mut out = vec![T::zero(); csr.num_nodes() * width];
    let ahead = prefetch_edges(width * std::mem::size_of::<T>());
    out.par_chunks_mut(width)
        .with_min_len(MIN_ROWS_PER_TASK)
        .enumerate()
        .for_each(|(node, row)| {
            for k in sorted.ptr()[node] as usize..sorted.ptr()[node + 1] as usize {
                if let Some(&o) = sorted.other().get(k + ahead) {
                    // the other end's row; this node's own row is already in the cache
                    let rows = if node_is_src { xr } else { xl };
                    prefetch_row(rows, o as usize * width, width);
                    prefetch_row(g, sorted.edge()[k + ahead] as usize * h, h);
                }
                let (e, other) = (sorted.edge()[k] as usize, sorted.other()[k] as usize);
                let (j, i) = if node_is_src {
                    (node, other)
                } else {
                    (other, node)
                };
                let (lj, ri) = (&xl[j * width..][..width], &xr[i * width..][..width]);
                for hh in 0..h {
                    let ge = g[e * h + hh];
                    let r = hh * c..(hh + 1) * c;
                    let terms = row[r.clone()]
                        .iter_mut()
                        .zip(&lj[r.clone()])
                        .zip(&ri[r.clone()])
                        .zip(&att[r]);
                    for (((o, &l), &r), &a) in terms {
                        *o += ge * a * leaky_grad(r + l, slope);
                    }
                }
            }
        });
    out
}

/// [`scores_grad`] for `N = H · C` values in `H` heads of `C`, all known when compiled
/// (GATv2's 8 heads of 8): each row's (or chunk's) sum stays in registers and the terms of all
/// heads are one pass the compiler vectorises, and the node rows are written once without
/// being zeroed. Every value gets the same terms in the same order as the general loop, so the
/// same bits. The neighbours' rows are requested ahead only where the numbering scatters them
/// ([`GatherSchedule::for_rows`]).
fn scores_grad_fixed<T: Real, const N: usize, const C: usize, const H: usize>(
    g: &[T],
    xl: &[T],
    xr: &[T],
    att: &[T],
    csr: &Csr,
    wrt: Wrt,
    slope: T,
) -> Vec<T> {
    let att = &att[..N];
    if wrt == Wrt::Att {
        let e = csr.num_edges();
        let partials: Vec<[T; N]> = (0..e.div_ceil(ATT_CHUNK))
            .into_par_iter()
            .map(|chunk| {
                let mut acc = [T::zero(); N];
                for e in chunk * ATT_CHUNK..((chunk + 1) * ATT_CHUNK).min(e) {
                    let (j, i) = (csr.src()[e] as usize, csr.dst()[e] as usize);
                    let (lj, ri) = (&xl[j * N..][..N], &xr[i * N..][..N]);
                    let ge = &g[e * H..][..H];
                    for t in 0..N {
                        acc[t] += ge[t / C] * leaky(ri[t] + lj[t], slope);
                    }
                }
                acc
            })
            .collect();
        return sum_in_order(partials, N);
    }
    let (sorted, node_is_src) = match wrt {
        Wrt::XL => (csr.by_src(), true),
        _ => (csr.by_dst(), false),
    };
    let local = GatherSchedule::for_rows(sorted, N * std::mem::size_of::<T>()).prefetch_ahead == 0;
    let ahead = if local {
        0
    } else {
        prefetch_edges(N * std::mem::size_of::<T>())
    };
    let (ptr, other, edge) = (sorted.ptr(), sorted.other(), sorted.edge());
    // the other end's rows; this node's own row is already in the cache
    let rows = if node_is_src { xr } else { xl };
    rows_written_once(csr.num_nodes(), N, |node, out| {
        assert_eq!(out.len(), N, "gat_scores: a gradient row of {N} values");
        let mut acc = [T::zero(); N];
        for k in ptr[node] as usize..ptr[node + 1] as usize {
            if ahead > 0 {
                if let (Some(&o), Some(&e)) = (other.get(k + ahead), edge.get(k + ahead)) {
                    prefetch_row(rows, o as usize * N, N);
                    prefetch_row(g, e as usize * H, H);
                }
            }
            let (e, o) = (edge[k] as usize, other[k] as usize);
            let (j, i) = if node_is_src { (node, o) } else { (o, node) };
            let (lj, ri) = (&xl[j * N..][..N], &xr[i * N..][..N]);
            let ge = &g[e * H..][..H];
            for t in 0..N {
                acc[t] += ge[t / C] * att[t] * leaky_grad(ri[t] + lj[t], slope);
            }
        }
        for (o, a) in out.iter_mut().zip(acc) {
            o.write(a);
        }
    })
}

impl CustomOp3 for GatScores {
    fn name(&self) -> &'static str {
        "gat-scores"
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
        let (h, c) = (self.h, self.c);
        let csr = &*self.csr;
        macro_rules! run {
            ($t:ty, $ctor:ident) => {
                CpuStorage::$ctor(scores::<$t>(
                    host_slice(s1, l1, "gat_scores")?,
                    host_slice(s2, l2, "gat_scores")?,
                    host_slice(s3, l3, "gat_scores")?,
                    csr,
                    h,
                    c,
                    self.slope as $t,
                ))
            };
        }
        let out = match s1 {
            CpuStorage::F32(_) => run!(f32, F32),
            CpuStorage::F64(_) => run!(f64, F64),
            other => candle_core::bail!(
                "gat_scores on the CPU supports f32 and f64, got {:?}",
                other.dtype()
            ),
        };
        Ok((out, Shape::from((csr.num_edges(), h))))
    }

    #[cfg(feature = "cuda")]
    fn cuda_fwd(
        &self,
        s1: &candle_core::CudaStorage,
        l1: &Layout,
        s2: &candle_core::CudaStorage,
        l2: &Layout,
        s3: &candle_core::CudaStorage,
        l3: &Layout,
    ) -> candle_core::Result<(candle_core::CudaStorage, Shape)> {
        cuda::scores(&self.csr, self.slope as f32, (s1, l1), (s2, l2), (s3, l3))
    }

    fn bwd(
        &self,
        x_l: &Tensor,
        x_r: &Tensor,
        att: &Tensor,
        _res: &Tensor,
        grad: &Tensor,
    ) -> candle_core::Result<(Option<Tensor>, Option<Tensor>, Option<Tensor>)> {
        let grad = grad.contiguous()?;
        let run = |t: &Tensor, wrt: Wrt| -> candle_core::Result<Option<Tensor>> {
            if !t.track_op() {
                return Ok(None);
            }
            let op = ScoresGrad {
                csr: self.csr.clone(),
                h: self.h,
                c: self.c,
                slope: self.slope,
                x_l: x_l.clone(),
                x_r: x_r.clone(),
                att: att.clone(),
                wrt,
            };
            Ok(Some(grad.apply_op1_no_bwd(&op)?.reshape(t.shape())?))
        };
        Ok((run(x_l, Wrt::XL)?, run(x_r, Wrt::XR)?, run(att, Wrt::Att)?))
    }
}

/// One of the three gradients, applied to the scores' gradient `[E, H]`; the forward inputs
/// ride along in the op.
struct ScoresGrad {
    csr: Arc<Csr>,
    h: usize,
    c: usize,
    slope: f64,
    x_l: Tensor,
    x_r: Tensor,
    att: Tensor,
    wrt: Wrt,
}

impl CustomOp1 for ScoresGrad {
    fn name(&self) -> &'static str {
        "gat-scores-grad"
    }

    fn cpu_fwd(&self, s: &CpuStorage, l: &Layout) -> candle_core::Result<(CpuStorage, Shape)> {
        let (n, h, c) = (self.csr.num_nodes(), self.h, self.c);
        let shape = if self.wrt == Wrt::Att {
            Shape::from((h, c))
        } else {
            Shape::from((n, h, c))
        };
        let csr = &*self.csr;
        macro_rules! run {
            ($t:ty, $ctor:ident, $grad:ident) => {{
                let g = host_slice::<$t>(s, l, "gat_scores")?;
                with_host::<$t, _>(&self.x_l, "gat_scores", |xl| {
                    with_host::<$t, _>(&self.x_r, "gat_scores", |xr| {
                        with_host::<$t, _>(&self.att, "gat_scores", |att| {
                            Ok(CpuStorage::$ctor($grad(
                                g,
                                xl,
                                xr,
                                att,
                                csr,
                                self.wrt,
                                (h, c),
                                self.slope as $t,
                            )))
                        })
                    })
                })?
            }};
        }
        let out = match s {
            CpuStorage::F32(_) => run!(f32, F32, scores_grad_f32),
            CpuStorage::F64(_) => run!(f64, F64, scores_grad),
            other => candle_core::bail!(
                "gat_scores on the CPU supports f32 and f64, got {:?}",
                other.dtype()
            ),
        };
        Ok((out, shape))
    }

    #[cfg(feature = "cuda")]
    fn cuda_fwd(
        &self,
        s: &candle_core::CudaStorage,
        l: &Layout,
    ) -> candle_core::Result<(candle_core::CudaStorage, Shape)> {
        cuda::scores_grad(
            &self.csr,
            self.slope as f32,
            (s, l),
            (&self.x_l, &self.x_r, &self.att),
            match self.wrt {
                Wrt::XL => 0,
                Wrt::XR => 1,
                Wrt::Att => 2,
            },
        )
    }
}

#[cfg(feature = "cuda")]
mod cuda {
    use super::super::kernel_support::cuda::{with_view, zeros, Launch};
    use super::Csr;
    use candle_core::backend::BackendStorage;
    use candle_core::cuda_backend::cudarc::driver::{CudaView, PushKernelArg};
    use candle_core::{CudaStorage, Layout, Shape, Tensor};

    fn f32_view<'a>(s: &'a CudaStorage, l: &Layout) -> candle_core::Result<CudaView<'a, f32>> {
        let slice = s.as_cuda_slice::<f32>().map_err(|_| {
            candle_core::Error::Msg(format!(
                "gat_scores on CUDA supports f32, got {:?}",
                s.dtype()
            ))
        })?;
        Ok(slice.slice(l.start_offset()..))
    }

    fn on_device(csr: &Csr) -> candle_core::Result<&super::super::csr::CsrOnDevice> {
        csr.on_device().ok_or_else(|| {
            candle_core::Error::Msg("gat_scores: the CSR was built for the CPU".into())
        })
    }

    pub(super) fn scores(
        csr: &Csr,
        slope: f32,
        (s1, l1): (&CudaStorage, &Layout),
        (s2, l2): (&CudaStorage, &Layout),
        (s3, l3): (&CudaStorage, &Layout),
    ) -> candle_core::Result<(CudaStorage, Shape)> {
        let (_, h, c) = l1.shape().dims3()?;
        let e = csr.num_edges();
        let dev = s1.device().clone();
        let (xl, xr, att) = (f32_view(s1, l1)?, f32_view(s2, l2)?, f32_view(s3, l3)?);
        let d = on_device(csr)?;
        let len = e * h;
        let out = zeros(&dev, len)?;
        let launch = Launch::new(&dev, "gat_scores_f32", len)?;
        let (e32, h32, c32) = (e as u32, h as u32, c as u32);
        with_view::<u32, _>(d.src(), "gat_scores", |src| {
            with_view::<u32, _>(d.dst(), "gat_scores", |dst| {
                // SAFETY: `Launch::run`'s contract: `gat_scores_f32`'s parameters in order; a
                // `Csr`'s arrays; x_l, x_r and att of the shapes `gat_scores` checked against it;
                // `out` holds the e·h elements of the e·h threads.
                unsafe {
                    launch.run(|b| {
                        b.arg(src);
                        b.arg(dst);
                        b.arg(&xl);
                        b.arg(&xr);
                        b.arg(&att);
                        b.arg(&out);
                        b.arg(&e32);
                        b.arg(&h32);
                        b.arg(&c32);
                        b.arg(&slope);
                    })
                }
            })
        })?;
        Ok((CudaStorage::wrap_cuda_slice(out, dev), Shape::from((e, h))))
    }

    pub(super) fn scores_grad(
        csr: &Csr,
        slope: f32,
        (s, l): (&CudaStorage, &Layout),
        (x_l, x_r, att): (&Tensor, &Tensor, &Tensor),
        wrt: u32,
    ) -> candle_core::Result<(CudaStorage, Shape)> {
        let (n, h, c) = x_l.dims3()?;
        let e = csr.num_edges();
        let dev = s.device().clone();
        let g = f32_view(s, l)?;
        let d = on_device(csr)?;
        let (h32, c32, e32, n32) = (h as u32, c as u32, e as u32, n as u32);
        let (len, shape) = if wrt == 2 {
            (h * c, Shape::from((h, c)))
        } else {
            (n * h * c, Shape::from((n, h, c)))
        };
        let out = zeros(&dev, len)?;
        with_view::<f32, _>(x_l, "gat_scores", |xl| {
            with_view::<f32, _>(x_r, "gat_scores", |xr| {
                with_view::<f32, _>(att, "gat_scores", |att| {
                    if len == 0 || e == 0 {
                        return Ok(());
                    }
                    if wrt == 2 {
                        // One thread per (channel, chunk of edges): few atomics on H·C slots.
                        let chunk: u32 = 256;
                        let threads = h * c * e32.div_ceil(chunk) as usize;
                        let launch = Launch::new(&dev, "gat_scores_grad_att_f32", threads)?;
                        return with_view::<u32, _>(d.src(), "gat_scores", |src| {
                            with_view::<u32, _>(d.dst(), "gat_scores", |dst| {
                                // SAFETY: `Launch::run`'s contract: `gat_scores_grad_att_f32`'s
                                // parameters in order; a `Csr`'s arrays; the gradient, x_l and x_r
                                // of the shapes `gat_scores` checked; the threads add into
                                // `out`'s h·c elements.
                                unsafe {
                                    launch.run(|b| {
                                        b.arg(src);
                                        b.arg(dst);
                                        b.arg(&g);
                                        b.arg(xl);
                                        b.arg(xr);
                                        b.arg(&out);
                                        b.arg(&e32);
                                        b.arg(&h32);
                                        b.arg(&c32);
                                        b.arg(&slope);
                                        b.arg(&chunk);
                                    })
                                }
                            })
                        });
                    }
                    let sorted = if wrt == 0 { d.by_src() } else { d.by_dst() };
                    let launch = Launch::new(&dev, "gat_scores_grad_x_f32", len)?;
                    with_view::<u32, _>(sorted.ptr(), "gat_scores", |ptr| {
                        with_view::<u32, _>(sorted.other(), "gat_scores", |other| {
                            with_view::<u32, _>(sorted.edge(), "gat_scores", |edge| {
                                let node_is_src: u32 = u32::from(wrt == 0);
                                // SAFETY: `Launch::run`'s contract: `gat_scores_grad_x_f32`'s
                                // parameters in order; a `Csr`'s arrays; the gradient, x_l, x_r
                                // and att of the shapes `gat_scores` checked; `out` holds the
                                // n·h·c elements of the n·h·c threads.
                                unsafe {
                                    launch.run(|b| {
                                        b.arg(ptr);
                                        b.arg(other);
                                        b.arg(edge);
                                        b.arg(&g);
                                        b.arg(xl);
                                        b.arg(xr);
                                        b.arg(att);
                                        b.arg(&out);
                                        b.arg(&n32);
                                        b.arg(&h32);
                                        b.arg(&c32);
                                        b.arg(&slope);
                                        b.arg(&node_is_src);
                                    })
                                }
                            })
                        })
                    })
                })
            })
        })?;
        Ok((CudaStorage::wrap_cuda_slice(out, dev), shape))
    }
}

#[cfg(all(test, target_arch = "x86_64"))]
mod tests {
    //! [`super::super::gat_scores_8x8`]'s vector code against the portable loop.
    use super::super::gat_scores_8x8::edge_scores;
    use super::super::kernel_support::avx;
    use super::edge_scores_fixed;

    /// What the portable loop gives for one edge.
    fn portable(lj: &[f32; 64], ri: &[f32; 64], att: &[f32; 64], slope: f32) -> [f32; 8] {
        let mut se = [0f32; 8];
        edge_scores_fixed::<f32, 64, 8>(lj, ri, att, slope, &mut se);
        se
    }

    #[test]
    fn the_vector_code_gives_the_portable_loops_bits() {
        if !avx() {
            eprintln!("skipped: this CPU has no AVX");
            return;
        }
        // values of every sign and size, so that rounding differs with the order of additions
        let mut s = 0x2545_F491_4F6C_DD1Du64;
        let mut next = || {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            let m = (s >> 40) as f32 / (1u64 << 24) as f32 - 0.5;
            m * [1e-3f32, 1.0, 7.0, 1e4][(s & 3) as usize]
        };
        for round in 0..2000 {
            let lj: [f32; 64] = std::array::from_fn(|_| next());
            let ri: [f32; 64] = std::array::from_fn(|_| next());
            let att: [f32; 64] = std::array::from_fn(|_| next());
            let slope = [0.2f32, 0.01, 1.0][round % 3];
            let mut se = [0f32; 8];
            edge_scores(&lj, &ri, &att, slope, &mut se);
            let want = portable(&lj, &ri, &att, slope);
            assert_eq!(
                se.map(f32::to_bits),
                want.map(f32::to_bits),
                "round {round}"
            );
        }
    }

    #[test]
    fn each_head_lands_in_its_own_place_and_zero_and_nan_behave_as_in_the_loop() {
        if !avx() {
            eprintln!("skipped: this CPU has no AVX");
            return;
        }
        // head h's terms sum to h + 1: a result out of order would show
        let lj = [0f32; 64];
        let ri: [f32; 64] = std::array::from_fn(|t| (t / 8 + 1) as f32 / 8.0);
        let att = [1f32; 64];
        let mut se = [0f32; 8];
        edge_scores(&lj, &ri, &att, 0.2, &mut se);
        assert_eq!(se, [1., 2., 3., 4., 5., 6., 7., 8.]);
        // -0 + -0 is -0, not > 0: -0 · slope; a NaN stays NaN in its head only
        let mut ri = [-0f32; 64];
        ri[17] = f32::NAN;
        let lj = [-0f32; 64];
        edge_scores(&lj, &ri, &att, 0.2, &mut se);
        let want = portable(&lj, &ri, &att, 0.2);
        assert!(se[2].is_nan() && want[2].is_nan());
        for h in (0..8).filter(|&h| h != 2) {
            assert_eq!(se[h].to_bits(), want[h].to_bits(), "head {h}");
        }
    }
}
