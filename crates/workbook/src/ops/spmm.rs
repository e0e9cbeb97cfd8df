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
    host_slice, prefetch_edges, prefetch_row, rows_written_once, GatherSchedule, Real,
    MAX_BLOCK_ROWS, MIN_ROWS_PER_TASK,
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
    csr_spmm_scheduled(x, w, csr, schedule_for(x, csr))
}

/// The gather's schedule for node rows `x` over `csr`: prefetch or not, by how local the graph's
/// numbering is for rows of `x`'s width ([`GatherSchedule::for_rows`]).
pub(super) fn schedule_for(x: &Tensor, csr: &Csr) -> GatherSchedule {
    let row_bytes = x.elem_count() / csr.num_nodes().max(1) * x.dtype().size_in_bytes();
    GatherSchedule::for_rows(csr.by_dst(), row_bytes)
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

/// Where a gather's edge weights come from: an `[E, H]` tensor ([`PerEdge`]), or GCN's
/// `deg^-1/2` of the edge's two ends ([`Symmetric`], `super::gcn_spmm`).
pub(super) trait EdgeWeights<T>: Sync {
    /// Whether the weights are found by edge id: if not, the gather never reads the ids.
    const BY_EDGE_ID: bool;
    /// Requests what [`Self::heads`] will read for edge `e` from node `j`.
    fn prefetch(&self, e: usize, j: usize);
    /// The `H` head weights of edge `e` between row `i` and node `j`.
    fn heads<const H: usize>(&self, e: usize, i: usize, j: usize) -> [T; H];
    /// Head `hh`'s weight of that edge, for any number of heads.
    fn head(&self, e: usize, i: usize, j: usize, hh: usize) -> T;
}

/// Weights read from `w` `[E, h]` by edge id.
pub(super) struct PerEdge<'a, T> {
    pub(super) w: &'a [T],
    pub(super) h: usize,
}

impl<T: Real> EdgeWeights<T> for PerEdge<'_, T> {
    const BY_EDGE_ID: bool = true;
    #[inline(always)]
    fn prefetch(&self, e: usize, _: usize) {
        prefetch_row(self.w, e * self.h, self.h);
    }
    #[inline(always)]
    fn heads<const H: usize>(&self, e: usize, _: usize, _: usize) -> [T; H] {
        let we = &self.w[e * H..][..H];
        std::array::from_fn(|t| we[t])
    }
    #[inline(always)]
    fn head(&self, e: usize, _: usize, _: usize, hh: usize) -> T {
        self.w[e * self.h + hh]
    }
}

/// One weight per edge `j - i`, `dinv[j] · dinv[i]`: GCN's normalisation without edge weights,
/// formed from the two ends instead of read from an `[E]` tensor. The same product as
/// [`super::gcn_norm::unweighted_gcn_norm`]'s, whichever end is the row (IEEE products commute).
pub(super) struct Symmetric<'a, T> {
    pub(super) dinv: &'a [T],
}

impl<T: Real> EdgeWeights<T> for Symmetric<'_, T> {
    const BY_EDGE_ID: bool = false;
    #[inline(always)]
    fn prefetch(&self, _: usize, j: usize) {
        prefetch_row(self.dinv, j, 1);
    }
    #[inline(always)]
    fn heads<const H: usize>(&self, _: usize, i: usize, j: usize) -> [T; H] {
        [self.dinv[j] * self.dinv[i]; H]
    }
    #[inline(always)]
    fn head(&self, _: usize, i: usize, j: usize, _: usize) -> T {
        self.dinv[j] * self.dinv[i]
    }
}

/// What one destination row's gather reads: the node rows `x`, the edge weights `w`, and the
/// sorted edges.
struct Gather<'a, T, W> {
    x: &'a [T],
    w: W,
    ptr: &'a [u32],
    other: &'a [u32],
    edge: &'a [u32],
    h: usize,
    c: usize,
    ahead: usize,
}

impl<'a, T: Real, W: EdgeWeights<T>> Gather<'a, T, W> {
    fn new(
        x: &'a [T],
        w: W,
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
            if let Some(&j) = self.other.get(k) {
                let width = self.h * self.c;
                prefetch_row(self.x, j as usize * width, width);
                self.w.prefetch(self.edge_id(k), j as usize);
            }
        }
    }

    /// Sorted edge `k`'s id, where the weights are found by it (0 otherwise: never read).
    #[inline(always)]
    fn edge_id(&self, k: usize) -> usize {
        if W::BY_EDGE_ID {
            self.edge[k] as usize
        } else {
            0
        }
    }

    /// Adds edge `k`'s message to `row` (any width): x · w, then +=, the rounding of candle's
    /// broadcast_mul + index_add. Slices per head, no division per edge.
    #[inline(always)]
    fn add_any(&self, row: &mut [T], i: usize, k: usize) {
        let (h, c) = (self.h, self.c);
        let (e, j) = (self.edge_id(k), self.other[k] as usize);
        let xj = &self.x[j * h * c..][..h * c];
        for hh in 0..h {
            let wv = self.w.head(e, i, j, hh);
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
            self.add_any(out, i, k);
        }
    }

    /// Row `i`'s sum into `out`, for `N = h · c` values in `H` heads of `C`, all known when
    /// compiled: the loop over a row unrolls and the sum stays in registers until the row is
    /// done, instead of a load and a store of `out` per edge. The same additions in the same
    /// order as [`Self::row_any`], so the same bits. Always inlined, so that [`row_fixed_avx`]
    /// compiles it with AVX.
    #[inline(always)]
    fn row_fixed<const N: usize, const C: usize, const H: usize>(
        &self,
        i: usize,
        out: &mut [MaybeUninit<T>],
    ) {
        // every value of the row is written below: what `rows_written_once` relies on
        assert_eq!(
            out.len(),
            N,
            "csr_spmm: a row of {} values for width {N}",
            out.len()
        );
        let mut acc = [T::zero(); N];
        for k in self.ptr[i] as usize..self.ptr[i + 1] as usize {
            self.prefetch(k + self.ahead);
            let (e, j) = (self.edge_id(k), self.other[k] as usize);
            let xj = &self.x[j * N..][..N];
            let we = self.w.heads::<H>(e, i, j);
            for (t, a) in acc.iter_mut().enumerate() {
                *a += xj[t] * we[t / C];
            }
        }
        for (o, a) in out.iter_mut().zip(acc) {
            o.write(a);
        }
    }
}

/// [`Gather::row_fixed`] compiled with AVX: the compiler keeps the row's sum in 256-bit
/// registers instead of 128-bit ones. The same multiplications and additions in the same order
/// (Rust never fuses a multiply and an add), so the same bits. After RCM, where the rows come
/// from the cache, that arithmetic is what the gather waits on.
#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx")]
fn row_fixed_avx<W: EdgeWeights<f32>, const N: usize, const C: usize, const H: usize>(
    g: &Gather<'_, f32, W>,
    i: usize,
    out: &mut [MaybeUninit<f32>],
) {
    g.row_fixed::<N, C, H>(i, out)
}

/// Runs `row(i, out_i)` for every destination row, in parallel over rows.
fn for_each_row<T: Real>(out: &mut [T], width: usize, row: impl Fn(usize, &mut [T]) + Sync) {
    out.par_chunks_mut(width)
        .with_min_len(MIN_ROWS_PER_TASK)
        .enumerate()
        .for_each(|(i, o)| row(i, o));
}

/// The gather of every row of `sorted`, `h` heads of `c` values per node, in the general loop.
pub(super) fn spmm<T: Real, W: EdgeWeights<T>>(
    x: &[T],
    w: W,
    sorted: &Sorted,
    h: usize,
    c: usize,
    schedule: GatherSchedule,
) -> Vec<T> {
    general(&Gather::new(x, w, sorted, h, c, schedule), schedule)
}

/// Every row through [`Gather::row_any`], or the interleaved schedule.
fn general<T: Real, W: EdgeWeights<T>>(g: &Gather<'_, T, W>, schedule: GatherSchedule) -> Vec<T> {
    let n = g.ptr.len() - 1;
    let width = g.h * g.c;
    if width == 0 {
        return Vec::new();
    }
    let mut out = vec![T::zero(); n * width];
    let rows = schedule.block_rows.clamp(1, MAX_BLOCK_ROWS);
    if rows > 1 {
        interleaved(g, &mut out, rows);
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
pub(super) fn spmm_f32<W: EdgeWeights<f32>>(
    x: &[f32],
    w: W,
    sorted: &Sorted,
    h: usize,
    c: usize,
    schedule: GatherSchedule,
) -> Vec<f32> {
    let n = sorted.ptr().len() - 1;
    let width = h * c;
    let g = Gather::new(x, w, sorted, h, c, schedule);
    if schedule.block_rows == 1 {
        // GCN's hidden width and GATv2's 8 × 8 in AVX where the CPU has it
        #[cfg(target_arch = "x86_64")]
        if super::kernel_support::avx() {
            match (width, c) {
                (16, 16) => {
                    // SAFETY: `avx()` said this CPU runs AVX, all `row_fixed_avx` enables.
                    return rows_written_once(n, width, |i, o| unsafe {
                        row_fixed_avx::<W, 16, 16, 1>(&g, i, o)
                    });
                }
                (64, 8) => {
                    // SAFETY: as above.
                    return rows_written_once(n, width, |i, o| unsafe {
                        row_fixed_avx::<W, 64, 8, 8>(&g, i, o)
                    });
                }
                _ => {}
            }
        }
        macro_rules! compiled {
            ($(($w:literal, $c:literal, $h:literal)),*) => {
                match (width, c) {
                    $(($w, $c) => {
                        return rows_written_once(n, width, |i, o| g.row_fixed::<$w, $c, $h>(i, o))
                    })*
                    _ => {}
                }
            };
        }
        compiled!(
            (1, 1, 1),
            (2, 2, 1),
            (3, 3, 1),
            (4, 4, 1),
            (5, 5, 1),
            (6, 6, 1),
            (7, 7, 1),
            (8, 8, 1),
            (16, 16, 1),
            (32, 32, 1),
            (64, 64, 1),
            (64, 8, 8)
        );
    }
    general(&g, schedule)
}

/// The gather with `rows` destination rows walked together, an edge of each in turn. Each row
/// still adds its edges in their order, so its sum is the same; the requests run `ahead` edges
/// in front of the block's edges counted in storage order, which the turns only permute.
fn interleaved<T: Real, W: EdgeWeights<T>>(g: &Gather<'_, T, W>, out: &mut [T], rows: usize) {
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
                        g.add_any(row, first + r, next[r]);
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
    // edges in their own order; edge lists usually come grouped by one end, so the distance is
    // counted for one gathered row per edge
    let ahead = prefetch_edges(width * std::mem::size_of::<T>());
    out.par_chunks_mut(h)
        .with_min_len(MIN_ROWS_PER_TASK)
        .enumerate()
        .for_each(|(e, oe)| {
            if let (Some(&i), Some(&j)) = (to.get(e + ahead), from.get(e + ahead)) {
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
                PerEdge {
                    w: host_slice(s2, l2, "csr_spmm")?,
                    h,
                },
                self.sorted(),
                h,
                c,
                self.schedule,
            )),
            (CpuStorage::F64(_), CpuStorage::F64(_)) => CpuStorage::F64(spmm(
                host_slice(s1, l1, "csr_spmm")?,
                PerEdge {
                    w: host_slice(s2, l2, "csr_spmm")?,
                    h,
                },
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
