//! Timing a model on a graph: forward pass and training epoch, medians after warm-up.
//!
//! What is timed matches `scripts/pyg_bench.py` step for step, so the two can be compared:
//! - `forward_ms`: one evaluation-mode forward pass (no dropout, no gradient tape needed);
//! - `epoch_ms`: one training step: forward with dropout, cross-entropy on the training nodes,
//!   backward, one Adam step (no evaluation pass).
//!
//! Each is run `warmup` times untimed (allocator, caches, the CSR and self-loops built on first
//! use), then `repeats` times; the median is reported. On a GPU each timing ends with a device
//! synchronisation. Memory is the process's peak resident set (Linux `VmHWM`), the same figure
//! Python's `resource.getrusage` gives, plus the resident set before the model existed, so the
//! difference is what training added.
//!
//! ```
//! use workbook_lessons::bench::{bench, BenchConfig};
//! use workbook::train::TrainConfig;
//! use workbook::{datasets, ModelConfig};
//! let g = datasets::karate(&workbook::candle_core::Device::Cpu).unwrap();
//! let config = ModelConfig::gcn(g.num_features(), 16, g.num_classes());
//! let r = bench(config, &TrainConfig::gcn(), &g, &BenchConfig { warmup: 1, repeats: 2 }).unwrap();
//! assert!(r.epoch_ms > 0.0 && r.forward_ms > 0.0);
//! assert_eq!(r.epoch_samples_ms.len(), 2);
//! ```

use candle_core::Tensor;
use serde::Serialize;
use std::time::Instant;
use workbook::error::{Result, WorkbookError};
use workbook::graph::Graph;
use workbook::model::{Model, ModelConfig};
use workbook::train::TrainConfig;

/// How many runs to discard and to time.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BenchConfig {
    pub warmup: usize,
    pub repeats: usize,
}

impl Default for BenchConfig {
    fn default() -> Self {
        Self {
            warmup: 3,
            repeats: 20,
        }
    }
}

/// Measured times (milliseconds) and memory (MiB).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct BenchReport {
    /// Median evaluation forward pass.
    pub forward_ms: f64,
    /// Median training step (forward, loss, backward, Adam).
    pub epoch_ms: f64,
    pub forward_samples_ms: Vec<f64>,
    pub epoch_samples_ms: Vec<f64>,
    /// Peak resident set of the process, if the platform reports it.
    pub peak_rss_mb: Option<f64>,
    /// Resident set after loading the graph, before the model was built.
    pub base_rss_mb: Option<f64>,
}

/// The median of `samples` (the mean of the middle two for an even count).
pub fn median(samples: &[f64]) -> f64 {
    if samples.is_empty() {
        return f64::NAN;
    }
    let mut s = samples.to_vec();
    s.sort_by(f64::total_cmp);
    let m = s.len() / 2;
    if s.len() % 2 == 1 {
        s[m]
    } else {
        (s[m - 1] + s[m]) / 2.0
    }
}

/// The process's resident set (`VmRSS`) and its peak (`VmHWM`) in MiB, on Linux.
pub fn resident_mb() -> Option<(f64, f64)> {
    let status = std::fs::read_to_string("/proc/self/status").ok()?;
    let field = |name: &str| -> Option<f64> {
        let line = status.lines().find(|l| l.starts_with(name))?;
        let kb: f64 = line.split_whitespace().nth(1)?.parse().ok()?;
        Some(kb / 1024.0)
    };
    Some((field("VmRSS:")?, field("VmHWM:")?))
}

/// Resets the process's peak resident set (Linux `VmHWM`) so that an earlier, larger run does
/// not count in the next one, and returns the resident set now (MiB): the base that the next
/// run's added memory is measured from.
pub fn reset_peak_rss() -> Option<f64> {
    let _ = std::fs::write("/proc/self/clear_refs", "5");
    resident_mb().map(|(rss, _)| rss)
}

/// Times `config` trained with `train_config`'s optimiser settings on `graph`.
pub fn bench(
    config: ModelConfig,
    train_config: &TrainConfig,
    graph: &Graph,
    runs: &BenchConfig,
) -> Result<BenchReport> {
    if runs.repeats == 0 {
        return Err(WorkbookError::InvalidConfig(
            "bench needs at least one timed repeat".into(),
        ));
    }
    workbook::limits::check_count("repeats (--epochs)", runs.repeats, 1)?;
    workbook::limits::check_count("warm-up runs (--warmup)", runs.warmup, 0)?;
    let (y, split) = match (graph.y(), graph.split()) {
        (Some(y), Some(s)) if s.train.dim(0)? > 0 => (y, s),
        _ => {
            return Err(WorkbookError::InvalidGraph(format!(
                "graph '{}' has no labels or no training nodes; bench trains a classifier",
                graph.name
            )))
        }
    };
    let base_rss_mb = reset_peak_rss();
    let at = graph.placement();
    workbook::limits::check_training_fits("timing", &config, graph)?;
    let (model, _) = Model::init(config, train_config.seed, at)?;
    let mut opt = train_config.optimizer(&model)?;
    let mut dropout = train_config.dropout(at.device());
    let y_train = y.index_select(&split.train, 0)?;
    let sync = |t: &Tensor| -> Result<()> { Ok(t.device().synchronize()?) };

    let mut forward = Vec::with_capacity(runs.repeats);
    let mut epoch = Vec::with_capacity(runs.repeats);
    // On a worker of the CPU pool, as the trainers run their steps (`ops::on_cpu_pool`).
    workbook::ops::on_cpu_pool(at.device(), || -> Result<()> {
        for k in 0..runs.warmup + runs.repeats {
            let start = Instant::now();
            let out = model.forward(graph.x(), graph.edge_index(), graph.edge_weight())?;
            sync(&out.logits)?;
            let forward_ms = start.elapsed().as_secs_f64() * 1e3;
            drop(out);

            let start = Instant::now();
            let out = model.forward_t(
                graph.x(),
                graph.edge_index(),
                graph.edge_weight(),
                Some(&mut dropout),
            )?;
            let loss = candle_nn::loss::cross_entropy(
                &out.logits.index_select(&split.train, 0)?,
                &y_train,
            )?;
            opt.backward_step(&loss)?;
            sync(&loss)?;
            let epoch_ms = start.elapsed().as_secs_f64() * 1e3;
            if k >= runs.warmup {
                forward.push(forward_ms);
                epoch.push(epoch_ms);
            }
        }
        Ok(())
    })?;
    Ok(BenchReport {
        forward_ms: median(&forward),
        epoch_ms: median(&epoch),
        forward_samples_ms: forward,
        epoch_samples_ms: epoch,
        peak_rss_mb: resident_mb().map(|(_, peak)| peak),
        base_rss_mb,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_of_odd_and_even_counts() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), 2.5);
        assert!(median(&[]).is_nan());
    }
}
