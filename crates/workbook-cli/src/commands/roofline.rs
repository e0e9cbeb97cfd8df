//! `workbook bench --roofline`: how close the aggregation kernels come to the memory bandwidth.
//!
//! Message passing does little arithmetic per byte (a multiply-add per value read), so its
//! physical limit is memory bandwidth, not the cores' speed. This measures both sides on this
//! machine, with the same thread count:
//!
//! - **bandwidth**: STREAM's copy (`a = b`) and triad (`a = b + s·c`) over f32 arrays of
//!   [`STREAM_ELEMENTS`] each (128 MiB, far beyond any cache), split over the threads; the best
//!   of the repeats, counting bytes as STREAM does (each array read or written once);
//! - **kernels**: `csr_spmm` at GCN's width (1 head × 16) and GATv2's (8 heads × 8), GATv2's
//!   `gat_scores` and `csr_softmax`, on a large graph (default `csbm:1000000`: 10⁶ nodes, 1.1·10⁷
//!   edges with self-loops); the median time of the repeats.
//!
//! For each kernel, `bytes_min` is what it must move at the least: every input and output array
//! once (the CSR's index arrays, the edge weights or scores, the node rows, the result).
//! `bytes_gather` replaces the node rows read once by one fetch per edge of whole 64-byte cache
//! lines, which is what a gather of random neighbours costs once the node rows no longer fit in
//! the cache. `fraction` = (`bytes_min` / time) / bandwidth: 1 would be the physical limit.
//!
//! One JSON line per measurement (`"roofline": "bandwidth"`, then one per kernel).

use anyhow::{Context, Result};
use serde_json::json;
use std::sync::Arc;
use std::time::Instant;
use workbook::candle_core::{DType, Device, Tensor};
use workbook::device::Chosen;
use workbook::ops::{csr_softmax, csr_spmm, gat_scores, Csr};

/// Elements per STREAM array (f32): 128 MiB each.
pub const STREAM_ELEMENTS: usize = 1 << 25;

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

/// Median seconds of `repeats` runs of `f` after one untimed run.
fn time(repeats: usize, mut f: impl FnMut() -> Result<Tensor>) -> Result<f64> {
    drop(f()?);
    let mut samples: Vec<f64> = (0..repeats.max(1))
        .map(|_| {
            let start = Instant::now();
            let out = f()?;
            let s = start.elapsed().as_secs_f64();
            drop(out);
            Ok(s)
        })
        .collect::<Result<_>>()?;
    samples.sort_by(f64::total_cmp);
    Ok(samples[samples.len() / 2])
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
        })
    );

    eprintln!("loading {dataset}...");
    let graph = workbook::datasets::load(dataset, None, &chosen.placement)
        .with_context(|| format!("loading dataset '{dataset}'"))?;
    let looped = graph.edge_index().with_self_loops()?.edge_index.clone();
    let csr: Arc<Csr> = looped.csr()?.clone();
    let (n, e) = (csr.num_nodes(), csr.num_edges());
    let line = 64usize;
    let report = |kernel: &str, h: usize, c: usize, seconds: f64, bytes_min: usize, rows: usize| {
        // `rows` node-row arrays are gathered per edge in the realistic count.
        let row_bytes = (4 * h * c).div_ceil(line) * line;
        let bytes_gather = bytes_min - rows * n * h * c * 4 + rows * e * row_bytes;
        let achieved = bytes_min as f64 / seconds;
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
                "bytes_min": bytes_min,
                "bytes_gather": bytes_gather,
                "achieved_gb_s": achieved / 1e9,
                "bound_ms": bytes_min as f64 / bandwidth * 1e3,
                "fraction": achieved / bandwidth,
                "fraction_gather": bytes_gather as f64 / seconds / bandwidth,
            })
        );
    };
    let idx = 4 * (n + 1) + 8 * e; // ptr, other, edge of one sort

    // GCN: 16 channels, one weight per edge.
    let (h, c) = (1, 16);
    let x = randn(&[n, h, c])?;
    let w = randn(&[e, h])?;
    let s = time(repeats, || Ok(csr_spmm(&x, &w, &csr)?))?;
    report("csr_spmm", h, c, s, idx + 4 * e * h + 2 * 4 * n * h * c, 1);

    // GATv2: 8 heads × 8 channels.
    let (h, c) = (8, 8);
    let x_l = randn(&[n, h, c])?;
    let x_r = randn(&[n, h, c])?;
    let att = randn(&[1, h, c])?;
    let s = time(repeats, || Ok(gat_scores(&x_l, &x_r, &att, &csr, 0.2)?))?;
    // src and dst per edge, both node-row arrays, the scores written
    report(
        "gat_scores",
        h,
        c,
        s,
        8 * e + 2 * 4 * n * h * c + 4 * e * h,
        2,
    );
    let scores = gat_scores(&x_l, &x_r, &att, &csr, 0.2)?;
    let s = time(repeats, || Ok(csr_softmax(&scores, &csr)?))?;
    // scores read, attention written, the destination sort's ptr and edge ids
    report(
        "csr_softmax",
        h,
        0,
        s,
        4 * (n + 1) + 4 * e + 2 * 4 * e * h,
        0,
    );
    let alpha = csr_softmax(&scores, &csr)?.to_dtype(DType::F32)?;
    let s = time(repeats, || Ok(csr_spmm(&x_l, &alpha, &csr)?))?;
    report("csr_spmm", h, c, s, idx + 4 * e * h + 2 * 4 * n * h * c, 1);
    Ok(())
}
