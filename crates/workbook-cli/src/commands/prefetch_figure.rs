//! `workbook figures --only prefetch`: `prefetch_timeline.svg`, mini-batch epochs of GCN on
//! `csbm:100000` (10 seeds a batch, `[10, 10]` neighbours) without and with prefetch, drawn from
//! the step timings the trainer measured, and `prefetch_timeline.md`, the paragraph the book
//! shows under it, with this run's numbers.
//!
//! One epoch is noisy on a shared machine: each run trains a warm-up epoch and [`TIMED`] timed
//! ones, and each panel draws the timed epoch whose time is the median, so the two panels
//! compare typical epochs, and the caption gives the spread.

use anyhow::{Context, Result};
use std::fmt::Write as _;
use std::path::Path;
use workbook::datasets::{self, CsbmConfig};
use workbook::device::Chosen;
use workbook::train::minibatch::{Eval, MiniBatchConfig, MiniBatchEpoch, MiniBatchTrainer};
use workbook::train::TrainConfig;
use workbook::{ModelConfig, Placement};
use workbook_lessons::figures::{draw_prefetch_timeline, MIN_BAR_PX};

/// Timed epochs per run (after one warm-up epoch).
const TIMED: usize = 5;

/// The timed epochs of one run, and the one with the median time.
struct Run {
    epochs: Vec<MiniBatchEpoch>,
    median: usize,
}

impl Run {
    fn median(&self) -> &MiniBatchEpoch {
        &self.epochs[self.median]
    }
    fn times(&self) -> (f64, f64) {
        let t = self.epochs.iter().map(|e| e.stats.step_ms);
        let lo = t.clone().fold(f64::INFINITY, f64::min);
        (lo, t.fold(0.0, f64::max))
    }
}

pub fn draw(out: &Path, chosen: &Chosen) -> Result<()> {
    let graph = datasets::csbm(&CsbmConfig::new(100_000), Placement::cpu())
        .context("generating csbm:100000")?;
    let run = |prefetch: usize| -> Result<Run> {
        let config = ModelConfig::gcn(graph.num_features(), 16, graph.num_classes());
        let mb = MiniBatchConfig {
            prefetch,
            // Not drawn; skipped so that an epoch's end is the training pass's end.
            eval: Eval::Skip,
            ..MiniBatchConfig::new(&[10, 10], 10)
        };
        let mut t =
            MiniBatchTrainer::new(config, &graph, &TrainConfig::gcn(), mb, &chosen.placement)?;
        t.epoch()?;
        let epochs = (0..TIMED)
            .map(|_| t.epoch())
            .collect::<Result<Vec<_>, _>>()?;
        let mut order: Vec<usize> = (0..epochs.len()).collect();
        order.sort_by(|&a, &b| epochs[a].stats.step_ms.total_cmp(&epochs[b].stats.step_ms));
        Ok(Run {
            median: order[order.len() / 2],
            epochs,
        })
    };
    let inline = run(0)?;
    let ahead = run(2)?;
    let path = out.join("prefetch_timeline.svg");
    let title = |name: &str, r: &Run| {
        let e = r.median();
        format!(
            "{name}: the median of {TIMED} epochs, {} steps in {:.1} ms",
            e.batches, e.stats.step_ms
        )
    };
    draw_prefetch_timeline(
        &path,
        &[
            (&title("in the loop", &inline), &inline.median().steps),
            (&title("prefetch (depth 2)", &ahead), &ahead.median().steps),
        ],
    )?;
    let caption = out.join("prefetch_timeline.md");
    let text = caption_text(&chosen.name, &inline, &ahead);
    workbook::atomic_write::write(&caption, text.as_bytes())?;
    eprintln!("wrote {} and {}", path.display(), caption.display());
    Ok(())
}

/// The paragraph under the figure: how it was made, and what its numbers say.
fn caption_text(device: &str, inline: &Run, ahead: &Run) -> String {
    let (a, b) = (inline.median(), ahead.median());
    let copy_ms: f64 = a.steps.iter().map(|s| s.copy.1 - s.copy.0).sum();
    let bytes: u64 = a.steps.iter().map(|s| s.bytes).sum();
    let prepare = a.prepare_ms();
    let (lo_a, hi_a) = inline.times();
    let (lo_b, hi_b) = ahead.times();
    let gain = a.stats.step_ms - b.stats.step_ms;
    let mut t = String::new();
    let _ = write!(
        t,
        "The figure is drawn from the step timings of real epochs (`cargo run --release -- \
         figures --only prefetch --device {device}`: GCN on `csbm:100000`, 10 seeds a batch, \
         `[10, 10]` neighbours). Each run trained one warm-up epoch and {TIMED} timed ones, and \
         each panel shows the timed epoch with the median time: {:.1} ms in the loop (the {TIMED} \
         epochs took {lo_a:.1} to {hi_a:.1} ms), {:.1} ms with prefetch ({lo_b:.1} to {hi_b:.1} \
         ms). Without prefetch the loop prepares (samples and gathers) each batch before copying \
         and computing it; with prefetch a background thread prepares the next batches while the \
         loop computes. Preparing took {prepare:.1} ms of the loop's epoch: that is all prefetch \
         can take off it. ",
        a.stats.step_ms, b.stats.step_ms
    );
    if gain > prepare * 1.5 {
        let _ = write!(
            t,
            "The medians differ by {gain:.1} ms, more than that: the rest is run-to-run \
             variation on this shared 2-core machine, not prefetch. "
        );
    } else if gain < 0.0 {
        let overlap = lo_b <= hi_a && lo_a <= hi_b;
        let _ = write!(
            t,
            "Here the median epoch with prefetch is {:.1} ms slower: {} ",
            -gain,
            if overlap {
                "the thread and the channel cost something, and the difference is within the \
                 spread of the epochs."
            } else {
                "every timed epoch with prefetch was slower than every one without."
            }
        );
        let first = b
            .steps
            .iter()
            .map(|s| s.prepare.0)
            .fold(f64::INFINITY, f64::min);
        if first > 1.0 {
            let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
            let _ = write!(
                t,
                "In the epoch drawn, the prefetch thread started its first batch only {first:.1} \
                 ms into the epoch, while the loop waited (most likely for a core: this machine \
                 has {cores}, and the step's own threads had just held them). "
            );
        }
    } else {
        let _ = write!(
            t,
            "The medians differ by {gain:.1} ms, of the {prepare:.1} ms prefetch could hide. "
        );
    }
    let share = prepare / a.stats.step_ms.max(1e-9);
    if share < 0.2 {
        let _ = write!(
            t,
            "On this graph preparing a batch is small next to computing it ({:.0}% of the \
             epoch), so prefetch can hide little: measure the sampling share (`workbook bench \
             --batch-size`) before expecting more. ",
            share * 100.0
        );
    } else {
        let _ = write!(
            t,
            "Preparing is {:.0}% of the loop's epoch here, time prefetch overlaps with the \
             compute. ",
            share * 100.0
        );
    }
    let _ = writeln!(
        t,
        "The copies (red), the subject of this chapter, moved {:.1} MB in {copy_ms:.2} ms \
         per epoch: on `{device}` a copy is a `memcpy` in host memory, drawn at least \
         {MIN_BAR_PX} px wide to be seen at all; on a GPU the same bytes cross PCIe or NVLink \
         and take their own time.",
        bytes as f64 / 1e6
    );
    t
}
