//! `workbook bench --roofline`: how close the aggregation kernels come to the memory bandwidth.
//!
//! Message passing does little arithmetic per byte (a multiply-add per value read), so its
//! physical limit is memory bandwidth, not the cores' speed. This measures both sides on this
//! machine, with the same thread count:
//!
//! - **bandwidth**: STREAM's copy (`a = b`) and triad (`a = b + s·c`) over f32 arrays of
//!   [`STREAM_ELEMENTS`] each (128 MiB, far beyond any cache), split over the threads; the best
//!   of the repeats, counting bytes as STREAM does (each array read or written once);
//! - **kernels**: `csr_spmm` at GCN's width (1 head × 16) and GATv2's (8 heads × 8),
//!   `gcn_spmm` (GCN's width without edge weights, as `GCNConv` runs it), GATv2's
//!   `gat_scores` and `csr_softmax`, on a large graph (default `csbm:1000000`: 10⁶ nodes, 1.1·10⁷
//!   edges with self-loops); the median time of the repeats.
//!
//! For each kernel, `bytes_min` is what it must move at the least: every input and output array
//! once (the CSR's index arrays, the edge weights or scores, the node rows, the result).
//! `bytes_gather` replaces the node rows read once by one fetch per edge of whole 64-byte cache
//! lines, which is what a gather of random neighbours costs once the node rows no longer fit in
//! the cache. `fraction` = (`bytes_min` / time) / bandwidth: 1 would be the physical limit.
//!
//! A gather of random neighbours is bound by memory *latency* long before bandwidth: each edge
//! is a cache miss, and what counts is how many the cores keep in flight. So beside the
//! bandwidth this measures that limit (`commands/gather.rs`): random 64-byte reads from a
//! 512 MiB table, one to 64 independent chains per thread, on 4 KiB and 2 MiB pages; the best
//! rate in lines per second is the **latency-bound limit**. The same benchmark measures random
//! rows of 256 bytes (GATv2's 8 × 8), whose four adjacent lines cost less than four random ones.
//! Each kernel line adds `latency_bound_ms`, what the reads it must make at random take at those
//! rates: `random_rows` node rows at the rate of rows of their width, and `random_weight_lines`
//! lines of edge weights at the line rate. A read is counted random when it is neither the row
//! (or line) read before it nor the one after, the reads a core's prefetchers would bring: for
//! `csr_spmm` and `gcn_spmm` the neighbours' rows in the order visited (about one per edge on a
//! random graph) and, for `csr_spmm`, the weights it finds by edge id (most edges of a graph
//! stored by source, such as csbm; few where edges are stored by destination); for `gat_scores`,
//! which reads both ends' rows in edge order, both ends (one of them mostly in order);
//! `csr_softmax` gathers nothing. And `fraction_latency` (bound / time; 1 would be the limit).
//!
//! Times: `ms` is the median wall time, `cpu_ms` the median of the process's CPU time divided
//! by the threads; on a machine shared with other work the wall clock counts the time the
//! threads waited for a core, so `fraction_latency_cpu` uses `cpu_ms` (the gather's own rates
//! are CPU time too). On an idle machine the two agree. Freed buffers are kept while measuring
//! ([`KEEP_WHILE_MEASURING`], unless `WORKBOOK_KEEP_BUFFERS` is set), so each kernel writes its
//! output into pages already faulted in, as STREAM writes its arrays: the kernel is compared with
//! the memory, not with the system's page zeroing (`WORKBOOK_KEEP_BUFFERS=0` measures that too,
//! as a training step without kept buffers pays it).
//!
//! Then `csr_spmm`'s gather schedules (`"roofline": "spmm_schedule"`, both widths): the schedule
//! it had before tuning (prefetch 8 edges ahead, one row after the other), the library's
//! default, the ones named by `WORKBOOK_ROOFLINE_PREFETCH` and `WORKBOOK_ROOFLINE_BLOCK`
//! (comma-separated prefetch distances and destination rows walked together; GCN's width only;
//! a measuring aid, the library takes no such variable), then on copies of `x` and `w` advised
//! into 2 MiB pages (`workbook::ops::huge_pages`, with the advice's cost and the share granted),
//! and the default on 4 KiB pages once more.
//!
//! One JSON line per measurement: `"bandwidth"`, two `"gather"` (4 KiB, 2 MiB pages), then the
//! kernels, each `csr_spmm` followed by its `"spmm_schedule"` lines (and GCN's by `gcn_spmm`).

use anyhow::{Context, Result};
use serde_json::json;
use std::sync::Arc;
use std::time::Instant;
use workbook::candle_core::{DType, Device, Tensor};
use workbook::device::Chosen;
use workbook::ops::huge_pages::{advise_huge_pages, tensor_huge_page_bytes};
use workbook::ops::{
    csr_softmax, csr_spmm, csr_spmm_scheduled, gat_scores, gcn_spmm, Csr, GatherSchedule,
};

use super::gather::{self, Pages};

/// Elements per STREAM array (f32): 128 MiB each.
pub const STREAM_ELEMENTS: usize = 1 << 25;

/// Bytes of freed buffers kept while measuring, unless `WORKBOOK_KEEP_BUFFERS` says otherwise:
/// room for a few of the largest outputs (GATv2's scores on a graph of 10⁷ edges, 352 MB).
pub const KEEP_WHILE_MEASURING: usize = 1 << 30;

/// What `--roofline` keeps of freed buffers, given `WORKBOOK_KEEP_BUFFERS`: unset, at least
/// [`KEEP_WHILE_MEASURING`], so that each kernel writes its output into pages already faulted
/// in, as STREAM writes its arrays; set (`0` included), what it says.
fn keep_while_measuring(env: Option<&std::ffi::OsStr>) -> Option<usize> {
    env.is_none().then_some(KEEP_WHILE_MEASURING)
}

/// Best bandwidth (bytes/s) of `repeats` copy and triad passes on `threads` threads.
pub fn stream_bandwidth(threads: usize, repeats: usize) -> (f64, f64) {
    let n = STREAM_ELEMENTS;
    let mut a = vec![0f32; n];
    let b = vec![1f32; n];
    let c = vec![2f32; n];
    let chunk = n.div_ceil(threads.max(1));
    let mut pass = |triad: bool| -> f64 {
        let start = Instant::now();
        std::thread::scope(|s| {
            for ((a, b), c) in a
                .chunks_mut(chunk)
                .zip(b.chunks(chunk))
                .zip(c.chunks(chunk))
            {
                s.spawn(move || {
                    if triad {
                        for ((a, &b), &c) in a.iter_mut().zip(b).zip(c) {
                            *a = b + 3.0 * c;
                        }
                    } else {
                        a.copy_from_slice(b);
                    }
                });
            }
        });
        start.elapsed().as_secs_f64()
    };
    let (mut copy, mut triad) = (f64::INFINITY, f64::INFINITY);
    pass(false); // touch every page once: page faults are not bandwidth
    for _ in 0..repeats.max(1) {
        copy = copy.min(pass(false));
        triad = triad.min(pass(true));
    }
    std::hint::black_box(&a);
    let bytes = (n * 4) as f64;
    (2.0 * bytes / copy, 3.0 * bytes / triad)
}

/// One kernel's time: the median of the repeats on the wall clock, and of the process's CPU
/// time divided by the threads. On a machine shared with other work the wall clock also counts
/// the time the threads waited for a core; the CPU time does not (stalls on memory still count,
/// so on an idle machine the two agree).
#[derive(Clone, Copy)]
struct Timing {
    wall: f64,
    cpu: f64,
}

/// Seconds of CPU time this process has used, all threads.
pub fn process_cpu_seconds() -> f64 {
    cpu_clock(libc::CLOCK_PROCESS_CPUTIME_ID)
}

/// Seconds of CPU time the calling thread has used.
pub fn thread_cpu_seconds() -> f64 {
    cpu_clock(libc::CLOCK_THREAD_CPUTIME_ID)
}

fn cpu_clock(clock: libc::clockid_t) -> f64 {
    let mut t = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `t` is a valid, writable timespec for the call; the clock ids are Linux's CPU
    // clocks, which exist for every process and thread. A failure is reported as NaN.
    let rc = unsafe { libc::clock_gettime(clock, &mut t) };
    if rc != 0 {
        return f64::NAN;
    }
    t.tv_sec as f64 + t.tv_nsec as f64 * 1e-9
}

/// Seconds each kernel runs untimed before it is measured (at least one call).
const WARM_UP_SECONDS: f64 = 0.25;

/// [`Timing`] of `repeats` runs of `f` (on `threads` threads) after [`WARM_UP_SECONDS`] of
/// untimed ones.
fn time(repeats: usize, threads: usize, mut f: impl FnMut() -> Result<Tensor>) -> Result<Timing> {
    // Right after a large graph is loaded, a kernel's first calls can run slower: `csr_spmm` on
    // `knn:1000000@rcm` with nothing kept took 20.8 ms in the first line and 13.7-16.0 ms for
    // the same schedule later in the run (29 Nov 2026). Calls until a quarter of a second has
    // passed leave that out of every kernel's time.
    let start = Instant::now();
    loop {
        drop(f()?);
        if start.elapsed().as_secs_f64() >= WARM_UP_SECONDS {
            break;
        }
    }
    let mut wall = Vec::new();
    let mut cpu = Vec::new();
    for _ in 0..repeats.max(1) {
        let (start, cpu_start) = (Instant::now(), process_cpu_seconds());
        let out = f()?;
        wall.push(start.elapsed().as_secs_f64());
        cpu.push((process_cpu_seconds() - cpu_start) / threads.max(1) as f64);
        drop(out);
    }
    let median = |mut v: Vec<f64>| {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    };
    Ok(Timing {
        wall: median(wall),
        cpu: median(cpu),
    })
}

fn randn(shape: &[usize]) -> Result<Tensor> {
    Ok(Tensor::randn(0f32, 1f32, shape, &Device::Cpu)?)
}

/// Runs the measurements on `dataset` and prints one JSON line each.
pub fn run(dataset: &str, repeats: usize, chosen: &Chosen) -> Result<()> {
    if !chosen.placement.device().is_cpu() {
        anyhow::bail!(
            "--roofline measures the CPU kernels against this machine's memory bandwidth; run it with --device cpu"
        );
    }
    if let Some(bytes) = keep_while_measuring(std::env::var_os("WORKBOOK_KEEP_BUFFERS").as_deref())
    {
        crate::allocator::keep_at_least(bytes);
    }
    let threads = workbook::ops::cpu_threads();
    eprintln!("measuring memory bandwidth ({threads} threads)...");
    let (copy, triad) = stream_bandwidth(threads, repeats);
    let bandwidth = copy.max(triad);
    println!(
        "{}",
        json!({
            "impl": "workbook",
            "roofline": "bandwidth",
            "threads": threads,
            "array_mib": STREAM_ELEMENTS * 4 / (1 << 20),
            // other work on the machine lowers both numbers; say how much there was
            "load_average": std::fs::read_to_string("/proc/loadavg")
                .ok()
                .and_then(|l| l.split_whitespace().next()?.parse::<f64>().ok()),
            "copy_gb_s": copy / 1e9,
            "triad_gb_s": triad / 1e9,
            // with freed buffers kept (the default here, or WORKBOOK_KEEP_BUFFERS), a kernel's
            // output is written into pages already faulted in, as STREAM's arrays are; with
            // WORKBOOK_KEEP_BUFFERS=0 the system zeroes fresh pages for every call, as a
            // training step without kept buffers pays, and that is in the kernels' times
            "keep_buffers_mb": crate::allocator::kept_buffers_cap() >> 20,
        })
    );

    // The latency-bound limit: the best random-line and wide-row rates over both page sizes.
    let mut limits = Limits {
        lines_per_s: 0.0,
        wide_rows_per_s: 0.0,
    };
    for pages in [Pages::Small, Pages::Huge] {
        eprintln!("measuring random gathers on {} pages...", pages.label());
        let g = gather::measure(
            pages,
            gather::TABLE_BYTES,
            threads,
            repeats,
            gather::READS_PER_THREAD,
        )?;
        limits.lines_per_s = limits.lines_per_s.max(g.best_lines_per_s);
        limits.wide_rows_per_s = limits.wide_rows_per_s.max(g.best_wide_rows_per_s);
        let by = |rates: &[(usize, f64)]| -> serde_json::Map<String, serde_json::Value> {
            rates
                .iter()
                .map(|&(k, r)| (k.to_string(), json!(r)))
                .collect()
        };
        println!(
            "{}",
            json!({
                "impl": "workbook",
                "roofline": "gather",
                "pages": pages.label(),
                "threads": threads,
                "table_mib": gather::TABLE_BYTES >> 20,
                "huge_share": g.huge_share,
                "latency_ns": g.latency_ns,
                "lines_per_s_by_streams": by(&g.lines_per_s),
                "lines_per_s_by_prefetch_ahead": by(&g.lines_per_s_ahead),
                "best_streams": g.best_streams,
                "best_lines_per_s": g.best_lines_per_s,
                "best_gb_s": g.best_lines_per_s * 64.0 / 1e9,
                "wide_row_bytes": gather::WIDE_ROW_LINES * 64,
                "wide_rows_per_s_by_prefetch_ahead": by(&g.wide_rows_per_s_ahead),
                "best_wide_rows_per_s": g.best_wide_rows_per_s,
                "note": g.note,
            })
        );
    }

    eprintln!("loading {dataset}...");
    let graph = workbook::datasets::load(dataset, None, &chosen.placement)
        .with_context(|| format!("loading dataset '{dataset}'"))?;
    let looped = graph.edge_index().with_self_loops()?.edge_index.clone();
    let csr: Arc<Csr> = looped.csr()?.clone();
    let (n, e) = (csr.num_nodes(), csr.num_edges());
    // Loading left buffers of its own sizes kept: released, so that the kernels' outputs are
    // kept from their first call (otherwise the first kernel measured wrote into fresh pages
    // until those went stale: `csr_spmm` on `knn:1000000`, 36 ms against 24 for the same
    // schedule measured later in the run).
    crate::allocator::release_kept_buffers();
    let line = 64usize;
    // `rows` node-row arrays gathered per edge; `random`: the rows and lines of edge weights
    // read at random (`random_reads`)
    let report = |kernel: &str,
                  h: usize,
                  c: usize,
                  t: Timing,
                  bytes_min: usize,
                  rows: usize,
                  random: RandomReads| {
        let seconds = t.wall;
        // `rows` node-row arrays are gathered per edge in the realistic count.
        let row_bytes = (4 * h * c).div_ceil(line) * line;
        let bytes_gather = bytes_min - rows * n * h * c * 4 + rows * e * row_bytes;
        let achieved = bytes_min as f64 / seconds;
        let latency_bound = limits.seconds(random.rows, row_bytes, random.weight_lines);
        println!(
            "{}",
            json!({
                "impl": "workbook",
                "roofline": kernel,
                "dataset": graph.name,
                "threads": threads,
                "nodes": n,
                "edges": e,
                "heads": h,
                "channels": c,
                "ms": seconds * 1e3,
                "cpu_ms": t.cpu * 1e3,
                "bytes_min": bytes_min,
                "bytes_gather": bytes_gather,
                "achieved_gb_s": achieved / 1e9,
                "bound_ms": bytes_min as f64 / bandwidth * 1e3,
                "fraction": achieved / bandwidth,
                "fraction_gather": bytes_gather as f64 / seconds / bandwidth,
                "row_bytes": row_bytes,
                "random_rows": random.rows,
                "random_weight_lines": random.weight_lines,
                "latency_bound_ms": latency_bound.map(|b| b * 1e3),
                "fraction_latency": latency_bound.map(|b| b / seconds),
                "fraction_latency_cpu": latency_bound.map(|b| b / t.cpu),
            })
        );
    };
    let idx = 4 * (n + 1) + 8 * e; // ptr, other, edge of one sort

    // GCN: 16 channels, one weight per edge.
    let (h, c) = (1, 16);
    // `csr_spmm` reads the neighbours' rows and each edge's weights by edge id in destination
    // order: on a graph whose edges are stored otherwise (csbm: by source) most weight reads land
    // on a random line too
    let reads = RandomReads::of_spmm(&csr, h, c);
    let x = randn(&[n, h, c])?;
    let w = randn(&[e, h])?;
    let s = time(repeats, threads, || Ok(csr_spmm(&x, &w, &csr)?))?;
    report(
        "csr_spmm",
        h,
        c,
        s,
        idx + 4 * e * h + 2 * 4 * n * h * c,
        1,
        reads,
    );
    let ctx = Ctx {
        csr: &csr,
        repeats,
        threads,
        bandwidth,
        limits,
    };
    schedules(&ctx, h, c, &x, &w, reads)?;
    // The same width as GCNConv runs it without edge weights: each edge's weight formed from
    // deg^-1/2 of its ends, so neither the [E] weights nor the edge ids are read.
    let x_flat = x.reshape((n, h * c))?;
    let s = time(repeats, threads, || Ok(gcn_spmm(&x_flat, &looped)?))?;
    report(
        "gcn_spmm",
        h,
        c,
        s,
        4 * (n + 1) + 4 * e + 4 * n + 2 * 4 * n * h * c,
        1,
        RandomReads {
            // deg^-1/2, 4 MB for 10^6 nodes, stays in the cache
            weight_lines: 0,
            ..reads
        },
    );

    // GATv2: 8 heads × 8 channels.
    let (h, c) = (8, 8);
    let x_l = randn(&[n, h, c])?;
    let x_r = randn(&[n, h, c])?;
    let att = randn(&[1, h, c])?;
    let s = time(repeats, threads, || {
        Ok(gat_scores(&x_l, &x_r, &att, &csr, 0.2)?)
    })?;
    // src and dst per edge, both node-row arrays, the scores written
    report(
        "gat_scores",
        h,
        c,
        s,
        8 * e + 2 * 4 * n * h * c + 4 * e * h,
        2,
        // both ends' rows in edge order; the scores written in edge order
        RandomReads {
            rows: random_reads(csr.src(), 4 * h * c) + random_reads(csr.dst(), 4 * h * c),
            weight_lines: 0,
        },
    );
    let scores = gat_scores(&x_l, &x_r, &att, &csr, 0.2)?;
    let s = time(repeats, threads, || Ok(csr_softmax(&scores, &csr)?))?;
    // scores read, attention written, the destination sort's ptr and edge ids
    report(
        "csr_softmax",
        h,
        0,
        s,
        4 * (n + 1) + 4 * e + 2 * 4 * e * h,
        0,
        RandomReads::default(),
    );
    let alpha = csr_softmax(&scores, &csr)?.to_dtype(DType::F32)?;
    let s = time(repeats, threads, || Ok(csr_spmm(&x_l, &alpha, &csr)?))?;
    let reads = RandomReads::of_spmm(&csr, h, c);
    report(
        "csr_spmm",
        h,
        c,
        s,
        idx + 4 * e * h + 2 * 4 * n * h * c,
        1,
        reads,
    );
    schedules(&ctx, h, c, &x_l, &alpha, reads)?;
    Ok(())
}

/// `WORKBOOK_ROOFLINE_PREFETCH` and `WORKBOOK_ROOFLINE_BLOCK`: comma-separated prefetch
/// distances and rows per block to sweep (a measuring aid; the library's schedule is
/// `GatherSchedule::default()`).
fn sweep_values(var: &str) -> Result<Vec<usize>> {
    match std::env::var(var) {
        Err(_) => Ok(Vec::new()),
        Ok(v) => v
            .split(',')
            .map(|p| {
                p.trim()
                    .parse::<usize>()
                    .with_context(|| format!("{var}={v}: expected numbers separated by commas"))
            })
            .collect(),
    }
}

/// What the `"spmm_schedule"` lines need of the run.
struct Ctx<'a> {
    csr: &'a Arc<Csr>,
    repeats: usize,
    threads: usize,
    bandwidth: f64,
    limits: Limits,
}

/// The gather micro-benchmark's best rates, both page sizes: what the latency-bound limit of a
/// kernel is made of.
#[derive(Clone, Copy, Debug)]
struct Limits {
    /// Random 64-byte lines per second.
    lines_per_s: f64,
    /// Random rows of [`gather::WIDE_ROW_LINES`] lines per second.
    wide_rows_per_s: f64,
}

impl Limits {
    /// Seconds for `rows` random node rows of `row_bytes` each and `weight_lines` random lines
    /// of edge weights (none: nothing is gathered). A row as wide as the micro-benchmark's wide
    /// rows counts at their rate, any other at its lines' rate.
    fn seconds(&self, rows: usize, row_bytes: usize, weight_lines: usize) -> Option<f64> {
        if rows + weight_lines == 0 {
            return None;
        }
        let row_lines = row_bytes.div_ceil(64);
        let rows_s = if row_lines == gather::WIDE_ROW_LINES {
            rows as f64 / self.wide_rows_per_s
        } else {
            (rows * row_lines) as f64 / self.lines_per_s
        };
        Some(rows_s + weight_lines as f64 / self.lines_per_s)
    }
}

/// The reads a kernel makes at random: node rows, and lines of edge weights.
#[derive(Clone, Copy, Debug, Default)]
struct RandomReads {
    rows: usize,
    weight_lines: usize,
}

impl RandomReads {
    /// `csr_spmm`'s over `csr` with `h` heads of `c`: the neighbours' rows and the edges'
    /// weights, both in destination order.
    fn of_spmm(csr: &Csr, h: usize, c: usize) -> Self {
        let sorted = csr.by_dst();
        Self {
            rows: random_reads(sorted.other(), 4 * h * c),
            weight_lines: random_reads(sorted.edge(), 4 * h),
        }
    }
}

/// How many reads of a kernel that reads items of `bytes` (a node row, an edge's weights) in the
/// order `ids` (item `id` at `id · bytes`) land at random: neither on the line(s) of the previous
/// read nor on those right after, which a core's prefetchers would have brought. Items read in
/// the order stored cost no random read after the first; items read in another order (csbm's
/// edges, stored by source, visited by destination) about one each.
fn random_reads(ids: &[u32], bytes: usize) -> usize {
    // lines from one item's start to the next one's
    let step = bytes.div_ceil(64);
    let line = |id: u32| id as usize * bytes / 64;
    let first = usize::from(!ids.is_empty());
    first
        + ids
            .windows(2)
            .filter(|p| {
                let (a, b) = (line(p[0]), line(p[1]));
                b != a && b != a + step
            })
            .count()
}

/// `csr_spmm` at one width under the schedule it had before tuning (prefetch 8, row after row),
/// under the one it chooses for this graph ([`GatherSchedule::for_rows`], `"default": true`) and
/// the one it would choose for a graph without locality ([`GatherSchedule::scattered`]), any
/// swept ones (the environment's, see [`sweep_values`]), and then the first two again on copies
/// of `x` and `w` advised into 2 MiB pages (`MADV_HUGEPAGE` + `MADV_COLLAPSE`), and the default
/// once more on 4 KiB pages; one `"spmm_schedule"` line each, against the latency limit of
/// `random` ([`RandomReads::of_spmm`] at this width).
fn schedules(
    ctx: &Ctx,
    h: usize,
    c: usize,
    x: &Tensor,
    w: &Tensor,
    random: RandomReads,
) -> Result<()> {
    let before = GatherSchedule::new(8, 1)?;
    // what `csr_spmm` itself chooses for this graph and width, and its choice for a graph
    // without locality
    let row_bytes = 4 * h * c;
    let d = GatherSchedule::for_rows(ctx.csr.by_dst(), row_bytes);
    let ahead = sweep_values("WORKBOOK_ROOFLINE_PREFETCH")?;
    let blocks = sweep_values("WORKBOOK_ROOFLINE_BLOCK")?;
    let ahead = if ahead.is_empty() {
        vec![d.prefetch_ahead]
    } else {
        ahead
    };
    let blocks = if blocks.is_empty() {
        vec![d.block_rows]
    } else {
        blocks
    };
    let mut swept = Vec::new();
    for &a in &ahead {
        for &b in &blocks {
            swept.push(GatherSchedule::new(a, b)?);
        }
    }
    let mut list = vec![before];
    for s in [d, GatherSchedule::scattered(row_bytes)]
        .into_iter()
        .chain(swept)
    {
        if !list.contains(&s) {
            list.push(s);
        }
    }
    let (n, e) = (ctx.csr.num_nodes(), ctx.csr.num_edges());
    let bytes_min = 4 * (n + 1) + 8 * e + 4 * e * h + 2 * 4 * n * h * c;
    let latency_bound = ctx.limits.seconds(
        random.rows,
        row_bytes.next_multiple_of(64),
        random.weight_lines,
    );
    let run = |sched: GatherSchedule,
               x: &Tensor,
               w: &Tensor,
               huge: Option<&serde_json::Value>|
     -> Result<()> {
        let s = time(ctx.repeats, ctx.threads, || {
            Ok(csr_spmm_scheduled(x, w, ctx.csr, sched)?)
        })?;
        println!(
            "{}",
            json!({
                "impl": "workbook",
                "roofline": "spmm_schedule",
                "threads": ctx.threads,
                "heads": h,
                "channels": c,
                "prefetch_ahead": sched.prefetch_ahead,
                "block_rows": sched.block_rows,
                "default": sched == d,
                "huge_pages": huge,
                "ms": s.wall * 1e3,
                "cpu_ms": s.cpu * 1e3,
                "fraction": bytes_min as f64 / s.wall / ctx.bandwidth,
                "fraction_latency": latency_bound.map(|b| b / s.wall),
                "fraction_latency_cpu": latency_bound.map(|b| b / s.cpu),
            })
        );
        Ok(())
    };
    for &sched in &list {
        run(sched, x, w, None)?;
    }
    // fresh buffers, so the 4 KiB runs above stay what they were
    let (xh, wh) = (x.copy()?, w.copy()?);
    let start = Instant::now();
    let (ax, aw) = (advise_huge_pages(&xh, true), advise_huge_pages(&wh, true));
    let advise_ms = start.elapsed().as_secs_f64() * 1e3;
    let share = |t: &Tensor| {
        let total = t.elem_count() * t.dtype().size_in_bytes();
        tensor_huge_page_bytes(t).map(|b| b as f64 / total as f64)
    };
    let huge = json!({
        "advise_ms": advise_ms,
        "x_huge_share": share(&xh),
        "w_huge_share": share(&wh),
        "collapsed": ax.collapsed && aw.collapsed,
        "note": ax.note.or(aw.note),
    });
    run(before, &xh, &wh, Some(&huge))?;
    if d != before {
        run(d, &xh, &wh, Some(&huge))?;
    }
    // the default on 4 KiB pages once more: the load of a shared machine drifts, and the
    // huge-page runs are bracketed by 4 KiB ones
    run(d, x, w, None)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn outputs_reuse_pages_unless_the_environment_says_otherwise() {
        assert_eq!(keep_while_measuring(None), Some(KEEP_WHILE_MEASURING));
        // `0` asks for fresh pages: what a step without kept buffers pays
        assert_eq!(keep_while_measuring(Some("0".as_ref())), None);
        assert_eq!(keep_while_measuring(Some("6G".as_ref())), None);
    }

    #[test]
    fn items_read_in_the_order_stored_cost_no_random_read() {
        let ids: Vec<u32> = (0..1000).collect();
        // the first read is a miss; every later one is the same line or the next
        assert_eq!(random_reads(&ids, 4), 1);
        assert_eq!(random_reads(&ids, 32), 1);
        // rows of one line and of four: each the row after the last
        assert_eq!(random_reads(&ids, 64), 1);
        assert_eq!(random_reads(&ids, 256), 1);
        assert_eq!(random_reads(&[], 4), 0);
    }

    #[test]
    fn items_read_far_apart_cost_a_read_each() {
        // every id 100 lines from the last, alternating up and down
        let ids: Vec<u32> = (0..100u32).map(|k| (k % 2) * 1600 + k * 16).collect();
        assert_eq!(random_reads(&ids, 4), 100);
        // back to the same line twice in a row costs nothing more
        assert_eq!(random_reads(&[0, 1600, 1601, 0], 4), 3);
        // rows of 256 bytes two rows apart are not the next row's lines
        assert_eq!(random_reads(&[0, 2, 4, 5], 256), 3);
        assert_eq!(random_reads(&[7, 7, 8], 256), 1);
    }

    #[test]
    fn the_limit_adds_rows_at_their_width_and_weight_lines() {
        let l = Limits {
            lines_per_s: 100.0,
            wide_rows_per_s: 40.0,
        };
        assert_eq!(l.seconds(0, 64, 0), None);
        assert_eq!(l.seconds(200, 64, 0), Some(2.0));
        assert_eq!(l.seconds(200, 64, 100), Some(3.0));
        let wide = gather::WIDE_ROW_LINES * 64;
        assert_eq!(l.seconds(80, wide, 0), Some(2.0));
        // a width the micro-benchmark does not measure: its lines at the line rate
        assert_eq!(l.seconds(100, 128, 0), Some(2.0));
    }
}
