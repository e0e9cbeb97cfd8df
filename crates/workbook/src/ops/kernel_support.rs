//! Plumbing shared by the message-passing kernels: float types, host slices, CUDA modules.
//!
//! The kernels ([`super::spmm`], [`super::gat_scores()`], [`super::csr_softmax()`]) are candle
//! custom ops. Their backward passes need tensors that are not arguments of the op (the CSR
//! arrays on a GPU, the forward inputs); those are read here through
//! `Tensor::storage_and_layout`, which works for any backend without copying.
//!
//! ```
//! use workbook::candle_core::{DType, Device};
//! use workbook::ops::kernels_support;
//! assert!(kernels_support(DType::F64, &Device::Cpu));
//! assert!(!kernels_support(DType::BF16, &Device::Cpu)); // the layers fall back to candle's ops
//! ```

use super::csr::Sorted;
use candle_core::{CpuStorage, DType, Device, Layout, Storage, Tensor, WithDType};
use rayon::prelude::*;
use std::mem::MaybeUninit;

/// The CUDA source of the message-passing kernels, for NVRTC and for CI's compile check.
pub const CUDA_MESSAGE_PASSING: &str = include_str!("../../kernels/message_passing.cu");

/// Whether the fast kernels handle `dtype` on `device`. Where they do not, the layers use the
/// composed candle ops instead, which give the same results more slowly.
pub fn kernels_support(dtype: DType, device: &Device) -> bool {
    match device {
        Device::Cpu => matches!(dtype, DType::F32 | DType::F64),
        Device::Cuda(_) => cfg!(feature = "cuda") && dtype == DType::F32,
        _ => false,
    }
}

/// The float types the CPU kernels are written for.
pub(crate) trait Real: WithDType {
    fn exp(self) -> Self;
    fn powf(self, e: Self) -> Self;
    /// The float type's own `max` (`NaN.max(0) = 0`), as candle's `relu` calls it.
    fn float_max(self, v: Self) -> Self;
    /// `self` folded with `v` as torch's max does: NaN wins, so a NaN score never vanishes.
    #[allow(clippy::eq_op)]
    fn fold_max(self, v: Self) -> Self {
        if v > self || v != v {
            v
        } else {
            self
        }
    }
}

impl Real for f32 {
    fn exp(self) -> Self {
        f32::exp(self)
    }
    fn powf(self, e: Self) -> Self {
        f32::powf(self, e)
    }
    fn float_max(self, v: Self) -> Self {
        f32::max(self, v)
    }
}

impl Real for f64 {
    fn exp(self) -> Self {
        f64::exp(self)
    }
    fn powf(self, e: Self) -> Self {
        f64::powf(self, e)
    }
    fn float_max(self, v: Self) -> Self {
        f64::max(self, v)
    }
}

/// The contiguous elements of a CPU storage as `&[T]`.
pub(crate) fn host_slice<'a, T: WithDType>(
    storage: &'a CpuStorage,
    layout: &Layout,
    op: &str,
) -> candle_core::Result<&'a [T]> {
    let Some((a, b)) = layout.contiguous_offsets() else {
        candle_core::bail!("{op}: inputs must be contiguous");
    };
    Ok(&storage.as_slice::<T>()?[a..b])
}

/// Runs `f` on the host elements of a CPU tensor that is not an argument of the op.
pub(crate) fn with_host<T: WithDType, R>(
    t: &Tensor,
    op: &str,
    f: impl FnOnce(&[T]) -> candle_core::Result<R>,
) -> candle_core::Result<R> {
    let (storage, layout) = t.storage_and_layout();
    match &*storage {
        Storage::Cpu(cpu) => f(host_slice(cpu, layout, op)?),
        _ => candle_core::bail!("{op}: expected a CPU tensor, got one on {:?}", t.device()),
    }
}

/// Cache lines of neighbours' rows the gathering kernels keep requested ahead of the edge they
/// sum ([`prefetch_edges`]). Swept with `bench --roofline` on `csbm:1000000`, two threads (29 Nov
/// 2026, after large buffers started on a cache line): `csr_spmm` at GCN's width (one line a
/// row) took 84 ms at 8 edges ahead, 71 at 12, 42 at 32, 29 at 64, 27-28 at 96 and 128, the
/// latency-bound limit of that run being 28 ms; at GATv2's 8 × 8 (four lines a row) 82-87 ms
/// at 32 edges ahead against 139-161 at 8 and 12 and 87-99 at 64 to 128; `gat_scores` 173 ms
/// at 32 against 193 at 8. So about 128 lines, whatever the row's width.
pub(crate) const PREFETCH_LINES: usize = 128;

/// How many edges ahead a kernel gathering one random row of `row_bytes` per edge requests it:
/// [`PREFETCH_LINES`] lines' worth, at least 8 edges.
///
/// (An earlier 8 edges, then 12 for `csr_spmm`, had been measured when glibc started every large
/// buffer 16 bytes past a cache line, so that each request covered only part of a row and the
/// rest missed anyway: more requests ahead then only cost more, docs/performance.md.)
pub(crate) fn prefetch_edges(row_bytes: usize) -> usize {
    (PREFETCH_LINES / row_bytes.div_ceil(64).max(1)).max(8)
}

/// Destination rows whose neighbour lists [`csr_spmm`](super::csr_spmm) walks interleaved, an
/// edge of each in turn ([`GatherSchedule::block_rows`]). Measured, more rows were slower: 2
/// rows took 1.4-1.6× the CPU time of 1, 4 rows 1.2-2.0× (the turns' branches cost more than
/// the extra misses in flight gain, which the prefetch already provides).
pub(crate) const BLOCK_ROWS: usize = 1;

/// The most rows [`GatherSchedule::block_rows`] may interleave (a fixed array of cursors).
pub const MAX_BLOCK_ROWS: usize = 16;

/// How the CPU gather of [`csr_spmm_scheduled`](super::spmm::csr_spmm_scheduled) is scheduled:
/// how far ahead it requests neighbours' rows, and how many destination rows it walks at once.
/// Only the order of memory requests changes: each destination row still sums its edges in
/// their original order, so every schedule gives bit-identical results. The default is the
/// one measured fastest on a graph without locality for rows of one cache line
/// ([`GatherSchedule::scattered`]; docs/performance.md, roofline section);
/// other values are for measuring (`workbook bench --roofline`).
///
/// ```
/// use workbook::ops::GatherSchedule;
/// let s = GatherSchedule::default();
/// assert!(s.prefetch_ahead > 0 && s.block_rows >= 1);
/// assert!(GatherSchedule::new(0, 4).is_ok()); // no prefetch, four rows interleaved
/// assert!(GatherSchedule::new(8, 0).is_err());
/// ```
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct GatherSchedule {
    /// Edges ahead of the one being summed whose source row is requested (0: none).
    pub prefetch_ahead: usize,
    /// Destination rows walked together, one edge of each in turn (1: row after row), so the
    /// misses of several rows are in flight at once; 1 to [`MAX_BLOCK_ROWS`].
    pub block_rows: usize,
}

impl Default for GatherSchedule {
    /// [`GatherSchedule::scattered`] for rows of one cache line (GCN's 16 channels of `f32`).
    fn default() -> Self {
        Self::scattered(64)
    }
}

/// Node-row bytes within which a neighbour's row is taken to be in the cache already when its
/// destination's row is: one core's L2 cache on the machine measured (512 KiB, AMD EPYC).
pub const NEAR_BYTES: usize = 512 << 10;

/// Destination rows [`GatherSchedule::for_rows`] samples (evenly spaced) to judge a graph's order.
const SAMPLED_ROWS: usize = 1024;

impl GatherSchedule {
    /// The schedule [`csr_spmm`](super::csr_spmm) uses for rows of `row_bytes` over `sorted`:
    /// no software prefetch when at least 999 in 1,000 sampled edges join nodes whose rows lie
    /// within [`NEAR_BYTES`] of each other (a graph in a locality-preserving order, or a node
    /// table small enough for the cache), since a request for a row already in the cache only
    /// costs instructions; [`GatherSchedule::scattered`] otherwise. Measured with `bench
    /// --roofline` (29 Nov 2026, 2 threads, GCN's width): on `knn:1000000@rcm`, where no sampled
    /// edge is far, `csr_spmm` took 11.8-12.3 ms without prefetch against 12.8 ms with it; after
    /// Rabbit order, where 1.4% of the edges are far, 24-27 ms without against 13 ms with it (an
    /// earlier threshold of nine in ten had chosen none there); on the same graph with shuffled
    /// ids and on `csbm:1000000` the prefetch is what keeps misses in flight.
    ///
    /// ```
    /// use workbook::candle_core::Device;
    /// use workbook::ops::{Csr, GatherSchedule};
    /// // a path 0 - 1 - 2 - ... : every neighbour is the next row
    /// let n = 10_000u32;
    /// let (src, dst): (Vec<u32>, Vec<u32>) = (1..n).map(|i| (i - 1, i)).unzip();
    /// let csr = Csr::new(&src, &dst, n as usize, &Device::Cpu).unwrap();
    /// assert_eq!(GatherSchedule::for_rows(csr.by_dst(), 64).prefetch_ahead, 0);
    /// // a path of 100 000 nodes where one node in fifty also hears from half the graph away:
    /// // 2% of the edges miss the cache, enough to request rows ahead
    /// let n = 100_000u32;
    /// let (mut src, mut dst): (Vec<u32>, Vec<u32>) = (1..n).map(|i| (i - 1, i)).unzip();
    /// for i in (0..n).step_by(50) {
    ///     src.push((i + n / 2) % n);
    ///     dst.push(i);
    /// }
    /// let csr = Csr::new(&src, &dst, n as usize, &Device::Cpu).unwrap();
    /// assert_eq!(GatherSchedule::for_rows(csr.by_dst(), 64), GatherSchedule::scattered(64));
    /// // 200 000 nodes (12 MB of rows) whose edges join ids far apart: requested ahead, as by
    /// // default
    /// let n = 200_000u32;
    /// let (src, dst): (Vec<u32>, Vec<u32>) = (0..n).map(|i| (i, (i * 7919) % n)).unzip();
    /// let csr = Csr::new(&src, &dst, n as usize, &Device::Cpu).unwrap();
    /// assert_eq!(GatherSchedule::for_rows(csr.by_dst(), 64), GatherSchedule::default());
    /// ```
    pub fn for_rows(sorted: &Sorted, row_bytes: usize) -> Self {
        let (ptr, other) = (sorted.ptr(), sorted.other());
        let n = ptr.len().saturating_sub(1);
        let near_rows = NEAR_BYTES / row_bytes.max(1);
        let (mut near, mut all) = (0usize, 0usize);
        for i in (0..n).step_by((n / SAMPLED_ROWS).max(1)) {
            for &j in &other[ptr[i] as usize..ptr[i + 1] as usize] {
                all += 1;
                near += usize::from((j as usize).abs_diff(i) <= near_rows);
            }
        }
        if all > 0 && near * 1000 >= all * 999 {
            Self {
                prefetch_ahead: 0,
                block_rows: BLOCK_ROWS,
            }
        } else {
            Self::scattered(row_bytes)
        }
    }

    /// The schedule for rows of `row_bytes` gathered at random (a graph without locality): each
    /// row requested as many edges ahead as make 128 cache lines in flight (at least 8 edges),
    /// one destination row after another; measured in docs/performance.md ("Rows on a cache
    /// line").
    ///
    /// ```
    /// use workbook::ops::GatherSchedule;
    /// let (gcn, gat) = (GatherSchedule::scattered(64), GatherSchedule::scattered(256));
    /// // rows of four cache lines are requested fewer edges ahead: the same lines in flight
    /// assert_eq!(gcn.prefetch_ahead, 4 * gat.prefetch_ahead);
    /// ```
    pub fn scattered(row_bytes: usize) -> Self {
        Self {
            prefetch_ahead: prefetch_edges(row_bytes),
            block_rows: BLOCK_ROWS,
        }
    }

    /// A schedule, or an error when `block_rows` is not in 1..=[`MAX_BLOCK_ROWS`].
    pub fn new(prefetch_ahead: usize, block_rows: usize) -> crate::Result<Self> {
        if !(1..=MAX_BLOCK_ROWS).contains(&block_rows) {
            return Err(crate::WorkbookError::InvalidConfig(format!(
                "block_rows must be 1 to {MAX_BLOCK_ROWS}, got {block_rows}"
            )));
        }
        Ok(Self {
            prefetch_ahead,
            block_rows,
        })
    }
}

/// Asks the CPU to start loading `data[start..start + len]` into the cache, one request per
/// 64-byte line it touches, without waiting for it. The kernels gather rows of random
/// neighbours: on a large graph every row is a cache (and TLB) miss, and issued one at a time
/// those misses serialise; requested ahead they overlap. The lines are counted from the row's
/// addresses, not from its first element: a row that starts inside a line (glibc starts a large
/// buffer 16 bytes into its mapping) touches one line more, and a miss on it would stall the
/// kernel. Only a hint: nothing is read, results are unchanged; out-of-range requests are
/// skipped; other architectures do nothing. Public for a reader's own gathering kernel (and the
/// CLI's gather micro-benchmark), which needs the same requests.
///
/// ```
/// use workbook::ops::kernel_support::prefetch_row;
/// let table = vec![1f32; 1 << 16];
/// let order = [40_000usize, 7, 12_345, 63_999];
/// let mut sum = 0.0;
/// for (i, &row) in order.iter().enumerate() {
///     if let Some(&next) = order.get(i + 2) {
///         prefetch_row(&table, next, 16); // two rows ahead
///     }
///     sum += table[row];
/// }
/// prefetch_row(&table, 1 << 20, 16); // past the end: skipped
/// assert_eq!(sum, 4.0);
/// ```
#[inline(always)]
pub fn prefetch_row<T>(data: &[T], start: usize, len: usize) {
    #[cfg(target_arch = "x86_64")]
    {
        let end = (start + len).min(data.len());
        if start >= end {
            return;
        }
        let size = std::mem::size_of::<T>();
        let (ptr, base) = (data.as_ptr() as *const i8, data.as_ptr() as usize);
        let (first, last) = (base + start * size, base + end * size - 1);
        let mut line = first & !63;
        while line <= last {
            let at = ptr.wrapping_offset(line as isize - base as isize);
            // SAFETY: `line` lies within the 64-byte lines that `data[start..end]` touches, all
            // inside the slice's own lines; a prefetch is a hint that reads nothing
            // architecturally and cannot fault, even for an address outside any mapping; SSE
            // is part of the x86_64 baseline.
            unsafe {
                use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
                _mm_prefetch::<_MM_HINT_T0>(at);
            }
            line += 64;
        }
    }
    #[cfg(not(target_arch = "x86_64"))]
    let _ = (data, start, len);
}

/// `n` rows of `width` values, each written once by `row(i, out_i)`, in parallel over rows; the
/// buffer is never zeroed first. Zeroing it would cost a pass over the whole output, and the
/// kernel writes every value anyway: on a 10⁶-node graph that pass was a large share of the
/// gather's time (the kernel's pages zeroed by the operating system, then by `calloc`).
pub(crate) fn rows_written_once<T: Real>(
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
    // the `n` chunks of `width` (each caller's `row` writes its whole `out` slice), so the
    // first `n * width` elements are initialised.
    unsafe { out.set_len(n * width) };
    out
}

/// Rows handed to one rayon task: fewer and the scheduling costs more than the work.
pub(crate) const MIN_ROWS_PER_TASK: usize = 64;

/// Whether this CPU runs AVX code: the kernels' 256-bit paths (`gat_scores` at 8 × 8,
/// `csr_spmm`'s and `gcn_spmm`'s usual widths), chosen at run time since the library is
/// compiled for the x86-64 baseline. Each gives the same bits as the portable code.
pub(crate) fn avx() -> bool {
    #[cfg(target_arch = "x86_64")]
    {
        std::arch::is_x86_feature_detected!("avx")
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        false
    }
}

/// Elements handed to one rayon task by the element-wise ops (ELU, dropout); element-wise, so
/// the split changes no value.
pub(crate) const ELEMENTS_PER_TASK: usize = 1 << 14;

/// The CUDA side: the modules' PTX, device views of tensors, and the one way this crate starts a
/// kernel ([`cuda::Launch`], whose `run` carries the one safety contract of every launch).
#[cfg(feature = "cuda")]
pub(crate) mod cuda {
    use candle_core::cuda_backend::cudarc::driver::{
        CudaFunction, CudaSlice, CudaStream, CudaView, LaunchArgs, LaunchConfig,
    };
    use candle_core::cuda_backend::cudarc::nvrtc::{compile_ptx_with_opts, CompileOptions};
    use candle_core::cuda_backend::{CudaDevice, WrapErr};
    use candle_core::{Storage, Tensor};
    use std::sync::{Arc, OnceLock};

    /// The message-passing kernels' source, compiled once per process by NVRTC.
    pub(crate) const MODULE: &str = "workbook_message_passing";

    /// `len` zeroed `f32`s on `dev`, at least one (CUDA refuses an empty allocation), for a
    /// kernel's output.
    pub(crate) fn zeros(dev: &CudaDevice, len: usize) -> candle_core::Result<CudaSlice<f32>> {
        dev.alloc_zeros::<f32>(len.max(1))
    }

    /// One launch of kernel `name` of the module `module` (compiled from `ptx`, once per
    /// process and device), over `threads` threads in blocks of the driver's default size.
    pub(crate) struct Launch {
        stream: Arc<CudaStream>,
        func: CudaFunction,
        threads: u32,
    }

    impl Launch {
        /// A launch of `name` from the message-passing module ([`MODULE`]).
        pub(crate) fn new(
            dev: &CudaDevice,
            name: &str,
            threads: usize,
        ) -> candle_core::Result<Self> {
            Self::of(dev, MODULE, ptx()?, name, threads)
        }

        /// A launch of `name` from `module`, compiled from `ptx`.
        pub(crate) fn of(
            dev: &CudaDevice,
            module: &str,
            ptx: &str,
            name: &str,
            threads: usize,
        ) -> candle_core::Result<Self> {
            let threads = u32::try_from(threads).map_err(|_| {
                candle_core::Error::Msg(format!(
                    "{name}: {threads} threads is more than one CUDA launch takes (2^32 - 1)"
                ))
            })?;
            Ok(Self {
                stream: dev.cuda_stream(),
                func: dev
                    .get_or_load_custom_func(name, module, ptx)?
                    .into_cuda_function(),
                threads,
            })
        }

        /// Pushes the kernel's arguments with `push` and launches it; nothing when there are no
        /// threads.
        ///
        /// # Safety
        ///
        /// The one contract of every kernel this crate launches (`kernels/*.cu`):
        ///
        /// 1. `push` pushes exactly the kernel's parameters, in their order and with their
        ///    types (device views of `u32` or `f32`, `u32` or `f32` scalars);
        /// 2. every index array it passes holds ids the kernel may use without checking: a
        ///    [`Csr`](crate::ops::Csr)'s arrays, whose ids `Csr::new` checked
        ///    (< num_nodes, < num_edges), or indices the caller checked against the sizes it
        ///    passes;
        /// 3. every buffer holds the elements the kernel reads or writes for `threads` threads:
        ///    each kernel bounds its thread id by the sizes passed to it, and the output was
        ///    allocated ([`zeros`]) with the elements those sizes name;
        /// 4. every buffer outlives the launch: it is borrowed for the call, and candle's stream
        ///    orders the kernel before any later use or free of its memory.
        pub(crate) unsafe fn run<'a>(
            &'a self,
            push: impl FnOnce(&mut LaunchArgs<'a>),
        ) -> candle_core::Result<()> {
            if self.threads == 0 {
                return Ok(());
            }
            let mut b = self.stream.launch_builder(&self.func);
            push(&mut b);
            // SAFETY: the caller keeps `run`'s contract (above): the arguments match the
            // kernel, the indices are in range, the buffers are large enough and outlive it.
            unsafe { b.launch(LaunchConfig::for_num_elems(self.threads)) }.w()?;
            Ok(())
        }
    }

    pub(crate) fn ptx() -> candle_core::Result<&'static str> {
        static PTX: OnceLock<Result<String, String>> = OnceLock::new();
        PTX.get_or_init(|| {
            compile_ptx_with_opts(super::CUDA_MESSAGE_PASSING, CompileOptions::default())
                .map(|p| p.to_src())
                .map_err(|e| format!("NVRTC could not compile kernels/message_passing.cu: {e}"))
        })
        .as_deref()
        .map_err(|e| candle_core::Error::Cuda(e.clone().into()))
    }

    /// Runs `f` on the device elements of a CUDA tensor of `T` (from its layout's offset).
    pub(crate) fn with_view<T, R>(
        t: &Tensor,
        op: &str,
        f: impl FnOnce(&CudaView<'_, T>) -> candle_core::Result<R>,
    ) -> candle_core::Result<R>
    where
        T: candle_core::cuda_backend::CudaDType + candle_core::WithDType,
    {
        let (storage, layout) = t.storage_and_layout();
        match &*storage {
            Storage::Cuda(cuda) => {
                let slice = cuda.as_cuda_slice::<T>().map_err(|_| {
                    candle_core::Error::Msg(format!(
                        "{op} on CUDA supports f32 (and u32 indices), got {:?}",
                        t.dtype()
                    ))
                })?;
                f(&slice.slice(layout.start_offset()..))
            }
            _ => candle_core::bail!("{op}: expected a CUDA tensor, got one on {:?}", t.device()),
        }
    }
}
