//! Weighted neighbour sums over a [`Csr`]: the aggregation of GCN and GATv2, as one candle op.
//!
//! `out[i, h, :] = Σ_{e = (j → i)} w[e, h] · x[j, h, :]` for node features `x` `[N, H, C]` and
//! edge weights `w` `[E, H]` (GCN: `H = 1`, `w` its normalised edge weights; GATv2: `H` heads,
//! `w` the attention). Composed from candle ops this is `index_select` (an `[E, H, C]` copy of the
//! source rows), a multiply, and an `index_add` into the targets: three passes over `E·H·C`
//! values, the last single-threaded. Here it is one pass over the destination-sorted edges,
//! parallel over nodes, that never forms the `[E, H, C]` messages.
//!
//! The gradient is the same sum over the source-sorted edges (`∂x`), and a per-edge dot product
//! (`∂w`), computed only when `w` needs it. Sums run in the original edge order, so forward and
//! `∂x` equal candle's `index_add` results bit for bit.
//!
//! ```
//! use std::sync::Arc;
//! use workbook::candle_core::{Device, Tensor};
//! use workbook::ops::{csr_spmm, Csr};
//! let dev = Device::Cpu;
//! // 0 -> 1 (weight 2), 2 -> 1 (weight 3); node features [3, 1 head, 1 channel]
//! let csr = Arc::new(Csr::new(&[0, 2], &[1, 1], 3, &dev).unwrap());
//! let x = Tensor::new(&[[[1f32]], [[10.]], [[100.]]], &dev).unwrap();
//! let w = Tensor::new(&[[2f32], [3.]], &dev).unwrap();
//! let out = csr_spmm(&x, &w, &csr).unwrap();
//! assert_eq!(out.flatten_all().unwrap().to_vec1::<f32>().unwrap(), vec![0., 302., 0.]);
//! ```

use super::csr::{Csr, Sorted};
use super::kernel_support::{
    host_slice, prefetch_row, GatherSchedule, Real, MAX_BLOCK_ROWS, MIN_ROWS_PER_TASK,
    PREFETCH_AHEAD,
};
use candle_core::backend::BackendStorage;
use candle_core::{CpuStorage, CustomOp2, Layout, Shape, Tensor};
use rayon::prelude::*;
use std::mem::MaybeUninit;
use std::sync::Arc;

/// `Σ_{e = (j → i)} w[e, h] · x[j, h, :]` for every node `i` (see the module docs). `x` is
/// `[N, H, C]`, or on the CPU also `[N, H·C]` (heads side by side: no reshape node, whose backward
/// pass would copy the gradient); the result has `x`'s shape. On the CPU the gather requests
/// neighbours' rows ahead only where the numbering scatters them ([`GatherSchedule::for_rows`]).
pub fn csr_spmm(x: &Tensor, w: &Tensor, csr: &Arc<Csr>) -> candle_core::Result<Tensor> {
    // prefetch or not, by how local the graph's numbering is for rows of x's width
    let row_bytes = x.elem_count() / csr.num_nodes().max(1) * x.dtype().size_in_bytes();
    let schedule = GatherSchedule::for_rows(csr.by_dst(), row_bytes);
    csr_spmm_scheduled(x, w, csr, schedule)
}

/// [`csr_spmm`] with the CPU gather scheduled by `schedule` (prefetch distance, rows walked
/// together), for measuring; the results are bit-identical for every schedule. The GPU ignores
/// it.
///
/// ```
/// use std::sync::Arc;
/// use workbook::candle_core::{Device, Tensor};
/// use workbook::ops::{csr_spmm, csr_spmm_scheduled, Csr, GatherSchedule};
/// let dev = Device::Cpu;
/// let csr = Arc::new(Csr::new(&[0, 2, 1], &[1, 1, 0], 3, &dev).unwrap());
/// let x = Tensor::new(&[[[1f32]], [[10.]], [[100.]]], &dev).unwrap();
/// let w = Tensor::new(&[[2f32], [3.], [4.]], &dev).unwrap();
/// let s = GatherSchedule::new(1, 3).unwrap();
/// let a = csr_spmm_scheduled(&x, &w, &csr, s).unwrap().flatten_all().unwrap();
/// let b = csr_spmm(&x, &w, &csr).unwrap().flatten_all().unwrap();
/// assert_eq!(a.to_vec1::<f32>().unwrap(), b.to_vec1::<f32>().unwrap());
/// ```
pub fn csr_spmm_scheduled(
    x: &Tensor,
    w: &Tensor,
    csr: &Arc<Csr>,
    schedule: GatherSchedule,
) -> candle_core::Result<Tensor> {
    // the fields are public: a hand-made schedule is checked here, not trusted
    let schedule = GatherSchedule::new(schedule.prefetch_ahead, schedule.block_rows)
        .map_err(|e| candle_core::Error::Msg(format!("csr_spmm: {e}")))?;
    let n = csr.num_nodes();
    let h = w.dims().get(1).copied().unwrap_or(0);
    let fits = match *x.dims() {
        [xn, xh, _] => xn == n && xh == h,
        [xn, f] => xn == n && h > 0 && f % h == 0 && x.device().is_cpu(),
        _ => false,
    };
    if !fits || w.dims() != [csr.num_edges(), h] {
        candle_core::bail!(
            "csr_spmm: x must be [{}, H, C] (or [{}, H·C] on the CPU) and w [{}, H], got {:?} and {:?}",
            n,
            n,
            csr.num_edges(),
            x.dims(),
            w.dims()
        );
    }
    if x.dtype() != w.dtype() {
        candle_core::bail!("csr_spmm: x is {:?} but w is {:?}", x.dtype(), w.dtype());
    }
    x.contiguous()?.apply_op2(
        &w.contiguous()?,
        Spmm {
            csr: csr.clone(),
            transpose: false,
            schedule,
        },
    )
}

/// Heads and channels per head of node features `x` (`[N, H, C]` or `[N, H·C]`) with `h` heads.
fn heads_channels(x: &Shape, h: usize) -> (usize, usize) {
    match x.dims() {
        [_, h, c] => (*h, *c),
        [_, f] if h > 0 => (h, f / h),
        _ => (h, 0),
    }
}

/// The op; `transpose` sums over the edges out of each node instead (the gradient).
struct Spmm {
    csr: Arc<Csr>,
    transpose: bool,
    schedule: GatherSchedule,
}

impl Spmm {
    fn sorted(&self) -> &Sorted {
        if self.transpose {
            self.csr.by_src()
        } else {
            self.csr.by_dst()
        }
    }
}

/// What one destination row's gather reads: the node rows `x`, the edge weights `w`, and the
/// sorted edges.
struct Gather<'a, T> {
    x: &'a [T],
    w: &'a [T],
    ptr: &'a [u32],
    other: &'a [u32],
    edge: &'a [u32],
    h: usize,
    c: usize,
    ahead: usize,
}

impl<'a, T: Real> Gather<'a, T> {
    fn new(
        x: &'a [T],
        w: &'a [T],
        sorted: &'a Sorted,
        h: usize,
        c: usize,
        schedule: GatherSchedule,
    ) -> Self {
        Self {
            x,
            w,
            ptr: sorted.ptr(),
            other: sorted.other(),
            edge: sorted.edge(),
            h,
            c,
            ahead: schedule.prefetch_ahead,
        }
    }

    /// Requests the rows edge `k` will read; past the last edge, nothing.
    #[inline(always)]
    fn prefetch(&self, k: usize) {
        if self.ahead > 0 {
            if let (Some(&j), Some(&e)) = (self.other.get(k), self.edge.get(k)) {
                let width = self.h * self.c;
                prefetch_row(self.x, j as usize * width, width);
                prefetch_row(self.w, e as usize * self.h, self.h);
            }
        }
    }

    /// Adds edge `k`'s message to `row` (any width): x · w, then +=, the rounding of candle's
    /// broadcast_mul + index_add. Slices per head, no division per edge.
    #[inline(always)]
    fn add_any(&self, row: &mut [T], k: usize) {
        let (h, c) = (self.h, self.c);
        let (e, j) = (self.edge[k] as usize, self.other[k] as usize);
        let xj = &self.x[j * h * c..][..h * c];
        for (hh, &wv) in self.w[e * h..][..h].iter().enumerate() {
            let o = &mut row[hh * c..][..c];
            for (o, &xv) in o.iter_mut().zip(&xj[hh * c..][..c]) {
                *o += xv * wv;
            }
        }
    }

    /// Row `i`'s sum into `out` (zeros on entry), any width.
    fn row_any(&self, i: usize, out: &mut [T]) {
        for k in self.ptr[i] as usize..self.ptr[i + 1] as usize {
            self.prefetch(k + self.ahead);
            self.add_any(out, k);
        }
    }

    /// Row `i`'s sum into `out`, for `W = h · c` values in heads of `C`, both known when
    /// compiled: the loop over a row unrolls and the sum stays in registers until the row is
    /// done, instead of a load and a store of `out` per edge. The same additions in the same
    /// order as [`Self::row_any`], so the same bits.
    fn row_fixed<const W: usize, const C: usize>(&self, i: usize, out: &mut [MaybeUninit<T>]) {
        // every value of the row is written below: what `rows_written_once` relies on
        assert_eq!(
            out.len(),
            W,
            "csr_spmm: a row of {} values for width {W}",
            out.len()
        );
        let mut acc = [T::zero(); W];
        for k in self.ptr[i] as usize..self.ptr[i + 1] as usize {
            self.prefetch(k + self.ahead);
            let (e, j) = (self.edge[k] as usize, self.other[k] as usize);
            let xj = &self.x[j * W..][..W];
            let we = &self.w[e * (W / C)..][..W / C];
            for (t, a) in acc.iter_mut().enumerate() {
                *a += xj[t] * we[t / C];
            }
        }
        for (o, a) in out.iter_mut().zip(acc) {
            o.write(a);
        }
    }
}

/// Runs `row(i, out_i)` for every destination row, in parallel over rows.
fn for_each_row<T: Real>(out: &mut [T], width: usize, row: impl Fn(usize, &mut [T]) + Sync) {
    out.par_chunks_mut(width)
        .with_min_len(MIN_ROWS_PER_TASK)
        .enumerate()
        .for_each(|(i, o)| row(i, o));
}

/// `n` rows of `width` values, each written once by `row(i, out_i)`, in parallel over rows; the
/// buffer is never zeroed first. Zeroing it would cost a pass over the whole output, and the
/// kernel writes every value anyway: on a 10⁶-node graph that pass was a large share of the
/// gather's time (the kernel's pages zeroed by the operating system, then by `calloc`).
fn rows_written_once<T: Real>(
    n: usize,
    width: usize,
    row: impl Fn(usize, &mut [MaybeUninit<T>]) + Sync,
) -> Vec<T> {
    let mut out = Vec::with_capacity(n * width);
    out.spare_capacity_mut()[..n * width]
        .par_chunks_mut(width)
        .with_min_len(MIN_ROWS_PER_TASK)
        .enumerate()
        .for_each(|(i, o)| row(i, o));
    // SAFETY: the capacity is at least `n * width`, and `row` wrote every element of each of
    // the `n` chunks of `width` (`Gather::row_fixed` writes its whole `out` slice), so the
    // first `n * width` elements are initialised.
    unsafe { out.set_len(n * width) };
    out
}

fn spmm<T: Real>(
    x: &[T],
    w: &[T],
    sorted: &Sorted,
    h: usize,
    c: usize,
    schedule: GatherSchedule,
) -> Vec<T> {
    let n = sorted.ptr().len() - 1;
    let width = h * c;
    if width == 0 {
        return Vec::new();
    }
    let g = Gather::new(x, w, sorted, h, c, schedule);
    let mut out = vec![T::zero(); n * width];
    let rows = schedule.block_rows.clamp(1, MAX_BLOCK_ROWS);
    if rows > 1 {
        interleaved(&g, &mut out, rows);
    } else {
        for_each_row(&mut out, width, |i, o| g.row_any(i, o));
    }
    out
}

/// [`spmm`] in `f32`, with the layers' usual widths compiled for their size
/// ([`Gather::row_fixed`]): one head of 1 to 8 channels (an output layer's classes), 16, 32 or
/// 64 (hidden channels), 8 heads of 8 (GATv2's default). Any other width, and the interleaved
/// schedules, take the general loop. `f64` (tests, gradient checks) always does: compiling
/// every width twice would lengthen every build for no program's benefit.
fn spmm_f32(
    x: &[f32],
    w: &[f32],
    sorted: &Sorted,
    h: usize,
    c: usize,
    schedule: GatherSchedule,
) -> Vec<f32> {
    let n = sorted.ptr().len() - 1;
    let width = h * c;
    if schedule.block_rows == 1 {
        let g = Gather::new(x, w, sorted, h, c, schedule);
        macro_rules! compiled {
            ($(($w:literal, $c:literal)),*) => {
                match (width, c) {
                    $(($w, $c) => {
                        return rows_written_once(n, width, |i, o| g.row_fixed::<$w, $c>(i, o))
                    })*
                    _ => {}
                }
            };
        }
        compiled!(
            (1, 1),
            (2, 2),
            (3, 3),
            (4, 4),
            (5, 5),
            (6, 6),
            (7, 7),
            (8, 8),
            (16, 16),
            (32, 32),
            (64, 64),
            (64, 8)
        );
    }
    spmm(x, w, sorted, h, c, schedule)
}

/// The gather with `rows` destination rows walked together, an edge of each in turn. Each row
/// still adds its edges in their order, so its sum is the same; the requests run `ahead` edges
/// in front of the block's edges counted in storage order, which the turns only permute.
fn interleaved<T: Real>(g: &Gather<'_, T>, out: &mut [T], rows: usize) {
    let width = g.h * g.c;
    out.par_chunks_mut(width * rows)
        .with_min_len(MIN_ROWS_PER_TASK.div_ceil(rows))
        .enumerate()
        .for_each(|(b, block)| {
            let first = b * rows;
            let base = g.ptr[first] as usize;
            let mut next = [0usize; MAX_BLOCK_ROWS];
            let mut end = [0usize; MAX_BLOCK_ROWS];
            let count = block.len() / width;
            for r in 0..count {
                next[r] = g.ptr[first + r] as usize;
                end[r] = g.ptr[first + r + 1] as usize;
            }
            let mut done = base;
            let mut left = end[count - 1] - base;
            while left > 0 {
                for (r, row) in block.chunks_mut(width).enumerate() {
                    if next[r] < end[r] {
                        g.prefetch(done + g.ahead);
                        g.add_any(row, next[r]);
                        next[r] += 1;
                        done += 1;
                        left -= 1;
                    }
                }
            }
        });
}

/// `out[e, h] = Σ_c a[dst(e), h, c] · b[src(e), h, c]` (with ends swapped when `transpose`).
fn edge_dot<T: Real>(a: &[T], b: &[T], csr: &Csr, transpose: bool, h: usize, c: usize) -> Vec<T> {
    let (to, from) = if transpose {
        (csr.src(), csr.dst())
    } else {
        (csr.dst(), csr.src())
    };
    let width = h * c;
    let mut out = vec![T::zero(); csr.num_edges() * h];
    if h == 0 {
        return out;
    }
    out.par_chunks_mut(h)
        .with_min_len(MIN_ROWS_PER_TASK)
        .enumerate()
        .for_each(|(e, oe)| {
            if let (Some(&i), Some(&j)) = (to.get(e + PREFETCH_AHEAD), from.get(e + PREFETCH_AHEAD))
            {
                prefetch_row(a, i as usize * width, width);
                prefetch_row(b, j as usize * width, width);
            }
            let (i, j) = (to[e] as usize, from[e] as usize);
            let ai = &a[i * width..(i + 1) * width];
            let bj = &b[j * width..(j + 1) * width];
            for (hh, o) in oe.iter_mut().enumerate() {
                let r = hh * c..(hh + 1) * c;
                *o = ai[r.clone()]
                    .iter()
                    .zip(&bj[r])
                    .fold(T::zero(), |s, (&p, &q)| s + p * q);
            }
        });
    out
}

impl CustomOp2 for Spmm {
    fn name(&self) -> &'static str {
        "csr-spmm"
    }

    fn cpu_fwd(
        &self,
        s1: &CpuStorage,
        l1: &Layout,
        s2: &CpuStorage,
        l2: &Layout,
    ) -> candle_core::Result<(CpuStorage, Shape)> {
        let (_, h) = l2.shape().dims2()?;
        let (h, c) = heads_channels(l1.shape(), h);
        let out = match (s1, s2) {
            (CpuStorage::F32(_), CpuStorage::F32(_)) => CpuStorage::F32(spmm_f32(
                host_slice(s1, l1, "csr_spmm")?,
                host_slice(s2, l2, "csr_spmm")?,
                self.sorted(),
                h,
                c,
                self.schedule,
            )),
            (CpuStorage::F64(_), CpuStorage::F64(_)) => CpuStorage::F64(spmm(
                host_slice(s1, l1, "csr_spmm")?,
                host_slice(s2, l2, "csr_spmm")?,
                self.sorted(),
                h,
                c,
                self.schedule,
            )),
            _ => candle_core::bail!(
                "csr_spmm on the CPU supports f32 and f64, got {:?}",
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
        cuda::spmm(&self.csr, self.transpose, s1, l1, s2, l2)
    }

    fn bwd(
        &self,
        x: &Tensor,
        w: &Tensor,
        _res: &Tensor,
        grad: &Tensor,
    ) -> candle_core::Result<(Option<Tensor>, Option<Tensor>)> {
        let grad = grad.contiguous()?;
        let dx = if x.track_op() {
            let op = Spmm {
                csr: self.csr.clone(),
                transpose: !self.transpose,
                schedule: self.schedule,
            };
            Some(grad.apply_op2_no_bwd(w, &op)?)
        } else {
            None
        };
        let dw = if w.track_op() {
            let op = EdgeDot {
                csr: self.csr.clone(),
                h: w.dim(1)?,
                transpose: self.transpose,
            };
            Some(grad.apply_op2_no_bwd(x, &op)?)
        } else {
            None
        };
        Ok((dx, dw))
    }
}

/// `∂w`: the dot product of the output gradient at each edge's target with the source's row.
struct EdgeDot {
    csr: Arc<Csr>,
    /// Heads (`x` may be `[N, H·C]`).
    h: usize,
    transpose: bool,
}

impl CustomOp2 for EdgeDot {
    fn name(&self) -> &'static str {
        "csr-edge-dot"
    }

    fn cpu_fwd(
        &self,
        s1: &CpuStorage,
        l1: &Layout,
        s2: &CpuStorage,
        l2: &Layout,
    ) -> candle_core::Result<(CpuStorage, Shape)> {
        let (h, c) = heads_channels(l1.shape(), self.h);
        let (csr, t) = (&*self.csr, self.transpose);
        let out = match (s1, s2) {
            (CpuStorage::F32(_), CpuStorage::F32(_)) => CpuStorage::F32(edge_dot(
                host_slice(s1, l1, "csr_spmm")?,
                host_slice(s2, l2, "csr_spmm")?,
                csr,
                t,
                h,
                c,
            )),
            (CpuStorage::F64(_), CpuStorage::F64(_)) => CpuStorage::F64(edge_dot(
                host_slice(s1, l1, "csr_spmm")?,
                host_slice(s2, l2, "csr_spmm")?,
                csr,
                t,
                h,
                c,
            )),
            _ => candle_core::bail!(
                "csr_spmm on the CPU supports f32 and f64, got {:?}",
                s1.dtype()
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
    ) -> candle_core::Result<(candle_core::CudaStorage, Shape)> {
        cuda::edge_dot(&self.csr, self.transpose, s1, l1, s2, l2)
    }
}

#[cfg(feature = "cuda")]
mod cuda {
    use super::super::kernel_support::cuda::{with_view, zeros, Launch};
    use super::Csr;
    use candle_core::backend::BackendStorage;
    use candle_core::cuda_backend::cudarc::driver::PushKernelArg;
    use candle_core::{CudaStorage, Layout, Shape};

    fn f32_view<'a>(
        s: &'a CudaStorage,
        l: &Layout,
    ) -> candle_core::Result<candle_core::cuda_backend::cudarc::driver::CudaView<'a, f32>> {
        let slice = s.as_cuda_slice::<f32>().map_err(|_| {
            candle_core::Error::Msg(format!(
                "csr_spmm on CUDA supports f32, got {:?}",
                s.dtype()
            ))
        })?;
        Ok(slice.slice(l.start_offset()..))
    }

    fn on_device(csr: &Csr) -> candle_core::Result<&super::super::csr::CsrOnDevice> {
        csr.on_device().ok_or_else(|| {
            candle_core::Error::Msg("csr_spmm: the CSR was built for the CPU".into())
        })
    }

    pub(super) fn spmm(
        csr: &Csr,
        transpose: bool,
        s1: &CudaStorage,
        l1: &Layout,
        s2: &CudaStorage,
        l2: &Layout,
    ) -> candle_core::Result<(CudaStorage, Shape)> {
        let (n, h, c) = l1.shape().dims3()?;
        let dev = s1.device().clone();
        let x = f32_view(s1, l1)?;
        let w = f32_view(s2, l2)?;
        let d = on_device(csr)?;
        let sorted = if transpose { d.by_src() } else { d.by_dst() };
        let len = n * h * c;
        let out = zeros(&dev, len)?;
        let launch = Launch::new(&dev, "spmm_f32", len)?;
        let (n32, h32, c32) = (n as u32, h as u32, c as u32);
        with_view::<u32, _>(sorted.ptr(), "csr_spmm", |ptr| {
            with_view::<u32, _>(sorted.other(), "csr_spmm", |other| {
                with_view::<u32, _>(sorted.edge(), "csr_spmm", |edge| {
                    // SAFETY: `Launch::run`'s contract: `spmm_f32`'s parameters in order; a
                    // `Csr`'s arrays; x and w of the shapes `csr_spmm` checked against it; `out`
                    // holds the n·h·c elements of the n·h·c threads.
                    unsafe {
                        launch.run(|b| {
                            b.arg(ptr);
                            b.arg(other);
                            b.arg(edge);
                            b.arg(&x);
                            b.arg(&w);
                            b.arg(&out);
                            b.arg(&n32);
                            b.arg(&h32);
                            b.arg(&c32);
                        })
                    }
                })
            })
        })?;
        Ok((
            CudaStorage::wrap_cuda_slice(out, dev),
            Shape::from((n, h, c)),
        ))
    }

    pub(super) fn edge_dot(
        csr: &Csr,
        transpose: bool,
        s1: &CudaStorage,
        l1: &Layout,
        s2: &CudaStorage,
        l2: &Layout,
    ) -> candle_core::Result<(CudaStorage, Shape)> {
        let (_, h, c) = l1.shape().dims3()?;
        let e = csr.num_edges();
        let dev = s1.device().clone();
        let a = f32_view(s1, l1)?;
        let bsrc = f32_view(s2, l2)?;
        let d = on_device(csr)?;
        let (to, from) = if transpose {
            (d.src(), d.dst())
        } else {
            (d.dst(), d.src())
        };
        let len = e * h;
        let out = zeros(&dev, len)?;
        let launch = Launch::new(&dev, "edge_dot_f32", len)?;
        let (e32, h32, c32) = (e as u32, h as u32, c as u32);
        with_view::<u32, _>(to, "csr_spmm", |to| {
            with_view::<u32, _>(from, "csr_spmm", |from| {
                // SAFETY: `Launch::run`'s contract: `edge_dot_f32`'s parameters in order; a
                // `Csr`'s arrays; the two float buffers of the shapes `csr_spmm` (whose backward
                // this is) checked; `out` holds the e·h elements of the e·h threads.
                unsafe {
                    launch.run(|b| {
                        b.arg(to);
                        b.arg(from);
                        b.arg(&a);
                        b.arg(&bsrc);
                        b.arg(&out);
                        b.arg(&e32);
                        b.arg(&h32);
                        b.arg(&c32);
                    })
                }
            })
        })?;
        Ok((CudaStorage::wrap_cuda_slice(out, dev), Shape::from((e, h))))
    }
}
