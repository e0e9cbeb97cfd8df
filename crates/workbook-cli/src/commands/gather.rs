//! The gather micro-benchmark of `workbook bench --roofline`: how many random 64-byte lines per
//! second this machine's cores fetch from a table far larger than the last-level cache.
//!
//! A GNN's aggregation on a graph without locality reads one random node row per edge: its
//! limit is not the bandwidth of a stream but how many cache misses the cores keep in flight.
//! This measures that limit directly. A table of [`TABLE_BYTES`] holds one random cycle through
//! all its 64-byte lines (each line stores the index of the next). Each thread follows `k`
//! chains of that cycle at once, interleaved, for `k` in [`STREAMS`]: with one chain every read
//! waits for the one before (the **latency** of a miss, page walk included); with more, the
//! reads of different chains overlap, until the cores' miss buffers are full. The best rate over
//! `k` is the **latency-bound limit** of a gather: what a kernel would reach if each edge were
//! one random line and nothing else.
//!
//! Chains stop adding misses in flight when the core's window of instructions is full (the
//! rate was still rising at 64 chains a thread on this project's machine). A kernel that
//! requests rows ahead of use (`prefetch`) does not hold its window for them, and once large
//! buffers started on a cache line `csr_spmm` ran faster than the chains' best rate (docs/performance.md,
//! issue 47). So each thread also reads lines in a random order known in advance, requesting
//! each [`PREFETCH_AHEAD`] reads before it uses it, as the kernels do with an edge list: the
//! limit is the best rate of either way. Rows of [`WIDE_ROW_LINES`] adjacent lines (GATv2's
//! 256-byte rows) are read the same way, each requested whole ahead: the limit of a gather of
//! such rows. Both page sizes are measured, on a mapping this module
//! owns: 4 KiB pages (`MADV_NOHUGEPAGE`) and 2 MiB pages (`MADV_HUGEPAGE` before the first
//! touch; the share the kernel granted is reported, and a refusal is a note, not an error).
//! Times are each thread's CPU time, the slowest thread's, best of the repeats: on a machine
//! shared with other work, time spent waiting for a core is not a property of the memory
//! (stalls on memory are CPU time, so on an idle machine this is the wall clock).
//!
//! One JSON line per page size (`"roofline": "gather"`), printed by `commands/roofline.rs`.

use super::roofline::thread_cpu_seconds;
use anyhow::{bail, Result};
use workbook::ops::huge_pages::{advise_range, huge_page_bytes, HUGE_PAGE};
use workbook::ops::kernel_support::prefetch_row;

/// Bytes of the table: 16 times the 32 MiB L3 of this project's machine, twice GATv2's node
/// table on `csbm:1000000`.
pub const TABLE_BYTES: usize = 512 << 20;

/// Chains each thread follows at once.
pub const STREAMS: [usize; 7] = [1, 2, 4, 8, 16, 32, 64];

/// How many reads ahead the requested-ahead reads ask for their line.
pub const PREFETCH_AHEAD: [usize; 4] = [32, 64, 128, 256];

/// Random reads each thread makes per measurement, over all its chains.
pub const READS_PER_THREAD: usize = 1 << 21;

/// Cache lines in a wide row: GATv2's 8 heads × 8 channels of `f32`, 256 bytes. Adjacent lines
/// of one row cost less than as many random lines (they share a page walk, and the hardware
/// fetches pairs of lines), so a kernel gathering such rows is held to the rate of random rows
/// of that width, measured the same way.
pub const WIDE_ROW_LINES: usize = 4;

const LINE: usize = 64;
const WORDS_PER_LINE: usize = LINE / 8;

/// Which pages back the table.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pages {
    /// 4 KiB pages.
    Small,
    /// 2 MiB transparent huge pages.
    Huge,
}

impl Pages {
    /// The page size as the JSON lines name it.
    pub fn label(self) -> &'static str {
        match self {
            Pages::Small => "4KiB",
            Pages::Huge => "2MiB",
        }
    }
}

/// One page size's result.
#[derive(Clone, Debug)]
pub struct Gather {
    /// Share of the table the kernel backed with 2 MiB pages (`None`: smaps unreadable).
    pub huge_share: Option<f64>,
    /// Nanoseconds per read of one chain: each waits for the previous one.
    pub latency_ns: f64,
    /// Random lines per second, all threads, for each entry of [`STREAMS`].
    pub lines_per_s: Vec<(usize, f64)>,
    /// Random lines per second, all threads, requested ahead by each entry of [`PREFETCH_AHEAD`].
    pub lines_per_s_ahead: Vec<(usize, f64)>,
    /// Random rows of [`WIDE_ROW_LINES`] lines per second, all threads, requested ahead by each
    /// entry of [`PREFETCH_AHEAD`] (counted in lines, as the kernels count their distance).
    pub wide_rows_per_s_ahead: Vec<(usize, f64)>,
    /// The chain count of the chains' best rate.
    pub best_streams: usize,
    /// The best rate, chains or requested ahead: the latency-bound limit.
    pub best_lines_per_s: f64,
    /// The best rate of random wide rows: the limit of a gather of such rows.
    pub best_wide_rows_per_s: f64,
    /// What did not go as asked (advice refused).
    pub note: Option<String>,
}

/// An anonymous mapping this module owns, 2 MiB-aligned, unmapped on drop.
struct Mapping {
    start: usize,
    len: usize,
}

impl Mapping {
    fn new(len: usize) -> Result<Self> {
        // no advice yet: the caller gives each page size its own
        let start = crate::mapped_buffers::map(len, false);
        if start.is_null() {
            bail!(
                "mapping {} MiB for the gather table: {}",
                len >> 20,
                std::io::Error::last_os_error()
            );
        }
        Ok(Self {
            start: start as usize,
            len,
        })
    }

    fn words(&mut self) -> &mut [u64] {
        // SAFETY: `[start, start + len)` is the mapping `new` made, which is readable, writable,
        // zero-filled (a valid u64 array), 2 MiB-aligned, and borrowed mutably through `self`
        // only.
        unsafe { std::slice::from_raw_parts_mut(self.start as *mut u64, self.len / 8) }
    }
}

impl Drop for Mapping {
    fn drop(&mut self) {
        // SAFETY: exactly the mapping `new` made; no slice of it outlives `self`.
        unsafe { crate::mapped_buffers::unmap(self.start as *mut u8, self.len) }
    }
}

/// The lines of a table of `lines` lines in one random cycle (Sattolo's shuffle), from a fixed
/// seed: the same order for both page sizes.
fn cycle(lines: usize) -> Vec<u32> {
    let mut order: Vec<u32> = (0..lines as u32).collect();
    let mut s = 0x9E37_79B9_7F4A_7C15u64;
    for i in (1..lines).rev() {
        // xorshift64*: plenty for a shuffle that only needs to defeat the prefetchers
        s ^= s >> 12;
        s ^= s << 25;
        s ^= s >> 27;
        let r = s.wrapping_mul(0x2545_F491_4F6C_DD1D);
        let j = (r % i as u64) as usize; // j < i: a single cycle
        order.swap(i, j);
    }
    order
}

/// Follows `K` chains from `starts` for `steps` reads each; returns where they ended, so the
/// reads cannot be optimised away.
fn chase<const K: usize>(table: &[u64], starts: &[u64], steps: usize) -> u64 {
    let mut p = [0u64; K];
    p.copy_from_slice(&starts[..K]);
    for _ in 0..steps {
        for q in p.iter_mut() {
            *q = table[*q as usize * WORDS_PER_LINE];
        }
    }
    p.iter().fold(0, |a, &b| a ^ b)
}

/// Sums the first word of the lines `order` names, each requested `AHEAD` reads before its use.
fn ahead<const AHEAD: usize>(table: &[u64], order: &[u32]) -> u64 {
    let mut sum = 0u64;
    for (i, &line) in order.iter().enumerate() {
        if let Some(&next) = order.get(i + AHEAD) {
            prefetch_row(table, next as usize * WORDS_PER_LINE, 1);
        }
        sum = sum.wrapping_add(table[line as usize * WORDS_PER_LINE]);
    }
    sum
}

fn ahead_k(k: usize, table: &[u64], order: &[u32]) -> u64 {
    match k {
        32 => ahead::<32>(table, order),
        64 => ahead::<64>(table, order),
        128 => ahead::<128>(table, order),
        _ => ahead::<256>(table, order),
    }
}

/// Sums the first word of every line of the wide rows `rows` names (rows of [`WIDE_ROW_LINES`]
/// lines), each row requested whole `AHEAD` rows before its use, as a kernel gathering such
/// rows does.
fn ahead_wide<const AHEAD: usize>(table: &[u64], rows: &[u32]) -> u64 {
    const ROW_WORDS: usize = WIDE_ROW_LINES * WORDS_PER_LINE;
    let mut sum = 0u64;
    for (i, &row) in rows.iter().enumerate() {
        if let Some(&next) = rows.get(i + AHEAD) {
            prefetch_row(table, next as usize * ROW_WORDS, ROW_WORDS);
        }
        let words = &table[row as usize * ROW_WORDS..][..ROW_WORDS];
        for line in words.chunks_exact(WORDS_PER_LINE) {
            sum = sum.wrapping_add(line[0]);
        }
    }
    sum
}

/// [`ahead_wide`] requesting `lines` lines ahead, that is `lines / WIDE_ROW_LINES` rows.
fn ahead_wide_k(lines: usize, table: &[u64], rows: &[u32]) -> u64 {
    match lines / WIDE_ROW_LINES {
        8 => ahead_wide::<8>(table, rows),
        16 => ahead_wide::<16>(table, rows),
        32 => ahead_wide::<32>(table, rows),
        _ => ahead_wide::<64>(table, rows),
    }
}

/// The slowest of `threads` threads' CPU seconds for `f(thread)`, best of `repeats`.
fn slowest_thread(threads: usize, repeats: usize, f: impl Fn(usize) + Sync) -> f64 {
    let mut best = f64::INFINITY;
    for _ in 0..repeats.max(1) {
        let slowest = std::thread::scope(|s| {
            let runs: Vec<_> = (0..threads)
                .map(|t| {
                    let f = &f;
                    s.spawn(move || {
                        let start = thread_cpu_seconds();
                        f(t);
                        thread_cpu_seconds() - start
                    })
                })
                .collect();
            runs.into_iter()
                .map(|r| r.join().unwrap_or(f64::NAN))
                .fold(0f64, f64::max)
        });
        best = best.min(slowest);
    }
    best
}

fn chase_k(k: usize, table: &[u64], starts: &[u64], steps: usize) -> u64 {
    match k {
        1 => chase::<1>(table, starts, steps),
        2 => chase::<2>(table, starts, steps),
        4 => chase::<4>(table, starts, steps),
        8 => chase::<8>(table, starts, steps),
        16 => chase::<16>(table, starts, steps),
        32 => chase::<32>(table, starts, steps),
        _ => chase::<64>(table, starts, steps),
    }
}

/// Items per second, all threads, read by `read(distance, stretch)` for each distance of
/// [`PREFETCH_AHEAD`]: each thread reads its own stretch of one random `order` of the items (no
/// item twice), at most `reads` of them; the slowest thread's CPU time, best of `repeats`.
fn rates_ahead(
    threads: usize,
    repeats: usize,
    order: &[u32],
    reads: usize,
    read: impl Fn(usize, &[u32]) -> u64 + Sync,
) -> Vec<(usize, f64)> {
    let n = order.len();
    let per_thread = reads.min(n / threads).max(1);
    PREFETCH_AHEAD
        .iter()
        .map(|&d| {
            let best = slowest_thread(threads, repeats, |t| {
                let mine = &order[(t * per_thread).min(n)..((t + 1) * per_thread).min(n)];
                std::hint::black_box(read(d, mine));
            });
            (d, (threads * per_thread) as f64 / best)
        })
        .collect()
}

/// Measures one page size on a table of `bytes` (a multiple of 2 MiB) with `threads` threads,
/// `reads` reads per thread per measurement, best of `repeats`.
pub fn measure(
    pages: Pages,
    bytes: usize,
    threads: usize,
    repeats: usize,
    reads: usize,
) -> Result<Gather> {
    let bytes = bytes.next_multiple_of(HUGE_PAGE);
    let lines = bytes / LINE;
    if lines > u32::MAX as usize {
        bail!("a gather table of {bytes} bytes has more lines than u32 indices");
    }
    let threads = threads.max(1);
    let mut map = Mapping::new(bytes)?;
    let mut note = None;
    match pages {
        Pages::Huge => {
            let advice = advise_range(map.start, map.len, false);
            note = advice.note;
        }
        #[cfg(target_os = "linux")]
        Pages::Small => {
            // SAFETY: the range lies inside the mapping this function owns; MADV_NOHUGEPAGE
            // changes only which pages back it; a refusal is an error return.
            let rc = unsafe {
                libc::madvise(
                    map.start as *mut libc::c_void,
                    map.len,
                    libc::MADV_NOHUGEPAGE,
                )
            };
            if rc != 0 {
                note = Some(format!(
                    "MADV_NOHUGEPAGE refused ({}): the system's THP default applies",
                    std::io::Error::last_os_error()
                ));
            }
        }
        // elsewhere the system's default pages, which are small
        #[cfg(not(target_os = "linux"))]
        Pages::Small => {}
    }
    let order = cycle(lines);
    let table = map.words();
    for (i, &line) in order.iter().enumerate() {
        table[line as usize * WORDS_PER_LINE] = order[(i + 1) % lines] as u64;
    }
    let huge_share = huge_page_bytes(map.start, map.len).map(|b| b as f64 / bytes as f64);
    let table: &[u64] = map.words();

    let mut lines_per_s = Vec::new();
    let mut latency_ns = f64::NAN;
    for &k in &STREAMS {
        // chains start evenly spaced along the cycle and never run into each other's reads
        let chains = threads * k;
        let steps = (reads / k).min(lines / chains).max(1);
        let starts: Vec<u64> = (0..chains)
            .map(|c| order[c * (lines / chains)] as u64)
            .collect();
        // the slowest thread's CPU time, best of the repeats
        let best = slowest_thread(threads, repeats, |t| {
            std::hint::black_box(chase_k(k, table, &starts[t * k..(t + 1) * k], steps));
        });
        if k == 1 {
            latency_ns = best / steps as f64 * 1e9;
        }
        lines_per_s.push((k, (chains * steps) as f64 / best));
    }
    let lines_per_s_ahead = rates_ahead(threads, repeats, &order, reads, |d, mine| {
        ahead_k(d, table, mine)
    });
    let wide_order = cycle(lines / WIDE_ROW_LINES);
    let wide_rows_per_s_ahead = rates_ahead(
        threads,
        repeats,
        &wide_order,
        reads / WIDE_ROW_LINES,
        |d, mine| ahead_wide_k(d, table, mine),
    );
    let best = |rates: &[(usize, f64)]| {
        rates
            .iter()
            .copied()
            .max_by(|a, b| a.1.total_cmp(&b.1))
            .unwrap_or((1, f64::NAN))
    };
    let (best_streams, chained) = best(&lines_per_s);
    let (_, requested) = best(&lines_per_s_ahead);
    let (_, wide) = best(&wide_rows_per_s_ahead);
    Ok(Gather {
        huge_share,
        latency_ns,
        lines_per_s,
        lines_per_s_ahead,
        wide_rows_per_s_ahead,
        best_streams,
        best_lines_per_s: chained.max(requested),
        best_wide_rows_per_s: wide,
        note,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cycle_visits_every_line_once() {
        let order = cycle(1000);
        let mut seen = order.clone();
        seen.sort_unstable();
        assert_eq!(seen, (0..1000).collect::<Vec<u32>>());
        // following "next" from line 0 comes back after exactly 1000 steps
        let mut next = vec![0u32; 1000];
        for (i, &l) in order.iter().enumerate() {
            next[l as usize] = order[(i + 1) % 1000];
        }
        let (mut at, mut steps) = (next[0], 1);
        while at != 0 {
            at = next[at as usize];
            steps += 1;
        }
        assert_eq!(steps, 1000);
    }

    #[test]
    fn a_wide_row_read_touches_each_of_its_lines() {
        // line l's first word holds l: rows 2 and 0 of 4 lines sum lines 8..12 and 0..4
        let lines = 4 * WIDE_ROW_LINES;
        let mut table = vec![0u64; lines * WORDS_PER_LINE];
        for l in 0..lines {
            table[l * WORDS_PER_LINE] = l as u64;
        }
        let want = (8..12).chain(0..4).sum::<u64>();
        for d in PREFETCH_AHEAD {
            assert_eq!(ahead_wide_k(d, &table, &[2, 0]), want, "{d} lines ahead");
        }
    }

    #[test]
    fn every_chain_count_is_measured_on_both_page_sizes() {
        for pages in [Pages::Small, Pages::Huge] {
            let g = measure(pages, 4 << 20, 2, 1, 1 << 14).unwrap();
            let ks: Vec<usize> = g.lines_per_s.iter().map(|&(k, _)| k).collect();
            assert_eq!(ks, STREAMS);
            assert!(g.lines_per_s.iter().all(|&(_, r)| r > 0.0 && r.is_finite()));
            let ds: Vec<usize> = g.lines_per_s_ahead.iter().map(|&(d, _)| d).collect();
            assert_eq!(ds, PREFETCH_AHEAD);
            assert!(g
                .lines_per_s_ahead
                .iter()
                .all(|&(_, r)| r > 0.0 && r.is_finite()));
            let ds: Vec<usize> = g.wide_rows_per_s_ahead.iter().map(|&(d, _)| d).collect();
            assert_eq!(ds, PREFETCH_AHEAD);
            let best_wide = g.wide_rows_per_s_ahead.iter().map(|&(_, r)| r);
            assert_eq!(g.best_wide_rows_per_s, best_wide.fold(0.0, f64::max));
            assert!(g.best_wide_rows_per_s > 0.0 && g.best_wide_rows_per_s.is_finite());
            // the limit is the best of both ways
            let all = g.lines_per_s.iter().chain(&g.lines_per_s_ahead);
            assert_eq!(g.best_lines_per_s, all.map(|&(_, r)| r).fold(0.0, f64::max));
            assert!(g.latency_ns > 0.0 && g.latency_ns.is_finite());
            assert!(STREAMS.contains(&g.best_streams));
            if let Some(share) = g.huge_share {
                assert!((0.0..=1.0).contains(&share), "{share}");
                if pages == Pages::Small && g.note.is_none() {
                    assert_eq!(share, 0.0, "MADV_NOHUGEPAGE was accepted");
                }
            }
        }
    }
}
