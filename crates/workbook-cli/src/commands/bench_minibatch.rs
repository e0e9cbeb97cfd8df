//! `workbook bench --batch-size N [--num-neighbors 10,10] [--prefetch]`: the mini-batch line.
//!
//! After the full-batch line of the same model and graph, one JSON line with `"bench":
//! "minibatch"`: the training pass over one epoch's batches (`epoch_ms`, median over the timed
//! epochs; no evaluation runs, [`Eval::Skip`]), sampled batches per second (batches over the
//! time spent sampling and gathering them), the sampling share of the epoch, bytes moved to the
//! device per step, `full_batch_epoch_ms` (the full-batch line's median) for comparison, and
//! the memory the mini-batch run added (peak resident set minus the resident set before it,
//! with the peak reset first, as the full-batch line measures it). In this binary it reads near
//! 0: the run reuses the heap the full-batch run freed, which the allocator settings
//! (`crate::allocator`) keep in the process (docs/performance.md, "How time and memory grow"); so the scaling
//! figure draws the mini-batch run's time and not its memory.
//! `compute_ms` is the epoch's training steps alone (forward, loss, backward, optimiser step;
//! no sampling, no copy), the part `scripts/pyg_bench.py --batches` measures for PyG on the
//! batches `--save-batches FILE` writes ([`batch_file`](super::batch_file)).

use crate::commands::minibatch_args::MiniBatchArgs;
use crate::commands::train::ModelKind;
use anyhow::{Context, Result};
use serde_json::json;
use workbook::device::Chosen;
use workbook::train::minibatch::{Eval, MiniBatchConfig, MiniBatchTrainer};
use workbook::train::TrainConfig;
use workbook::Graph;
use workbook_lessons::bench::{median, reset_peak_rss, resident_mb};

/// The mini-batch settings of a bench run.
pub struct Settings {
    pub batch_size: usize,
    pub mini: MiniBatchArgs,
    pub warmup: usize,
    pub repeats: usize,
    pub seed: u64,
    /// Write every batch of the run (warm-up and timed epochs) here for PyG to replay.
    pub save_batches: Option<std::path::PathBuf>,
}

/// What a mini-batch run measured, for the scaling figure.
pub struct Outcome {
    /// Median training pass over one epoch's batches.
    pub epoch_ms: f64,
}

/// Runs `warmup + repeats` mini-batch epochs of `kind` on `host_graph` (on the host) with the
/// model on the chosen device, and prints the line.
pub fn run(
    kind: ModelKind,
    host_graph: &Graph,
    chosen: &Chosen,
    s: &Settings,
    full_batch_epoch_ms: f64,
) -> Result<Outcome> {
    // The full-batch run before this one must not count in the peak.
    let base_rss_mb = reset_peak_rss();
    let (config, recipe) = kind.recipe(host_graph);
    let recipe = TrainConfig {
        seed: s.seed,
        ..recipe
    };
    let layers = config.layers.len();
    let num_neighbors = s.mini.num_neighbors(layers);
    let mb = MiniBatchConfig {
        // Nothing between epochs, as in PyG's replay of these batches: an evaluation pass
        // would evict the caches and the allocator's free lists each training step reuses.
        eval: Eval::Skip,
        ..s.mini.config(s.batch_size, layers)
    };
    let mut t = MiniBatchTrainer::new(config, host_graph, &recipe, mb, &chosen.placement)
        .with_context(|| format!("mini-batch {} on {}", kind.name(), host_graph.name))?;
    let mut epochs = Vec::new();
    for k in 0..s.warmup + s.repeats {
        let e = t.epoch()?;
        if k >= s.warmup {
            epochs.push(e);
        }
    }
    let epoch_ms = median(&epochs.iter().map(|e| e.stats.step_ms).collect::<Vec<_>>());
    let compute_ms = median(
        &epochs
            .iter()
            .map(|e| e.steps.iter().map(|s| s.compute.1 - s.compute.0).sum())
            .collect::<Vec<f64>>(),
    );
    let prepare: f64 = epochs.iter().map(|e| e.prepare_ms()).sum();
    let batches: usize = epochs.iter().map(|e| e.batches).sum();
    let total: f64 = epochs.iter().map(|e| e.stats.step_ms).sum();
    let bytes = epochs.iter().map(|e| e.bytes_per_step()).sum::<f64>() / epochs.len() as f64;
    let memory_mb = match (resident_mb(), base_rss_mb) {
        (Some((_, peak)), Some(base)) => Some(peak - base),
        _ => None,
    };
    println!(
        "{}",
        json!({
            "impl": "workbook",
            "bench": "minibatch",
            "model": kind.name(),
            "dataset": host_graph.name,
            "device": chosen.name,
            "threads": workbook::ops::cpu_threads(),
            "nodes": host_graph.num_nodes(),
            "edges": host_graph.num_edges(),
            "batch_size": s.batch_size,
            "num_neighbors": num_neighbors,
            "prefetch": s.mini.prefetch,
            "batches_per_epoch": epochs[0].batches,
            "warmup": s.warmup,
            "repeats": s.repeats,
            "epoch_ms": epoch_ms,
            "compute_ms": compute_ms,
            "sampled_batches_per_second": batches as f64 / (prepare / 1e3),
            "sampling_share": prepare / total,
            "bytes_per_step": bytes,
            "full_batch_epoch_ms": full_batch_epoch_ms,
            "memory_added_mb": memory_mb,
        })
    );
    if let Some(path) = &s.save_batches {
        let n = super::batch_file::save(
            path,
            t.loader(),
            &host_graph.name,
            host_graph.num_nodes(),
            s.warmup + s.repeats,
            s.warmup,
        )?;
        eprintln!("wrote {n} batches to {}", path.display());
    }
    Ok(Outcome { epoch_ms })
}
