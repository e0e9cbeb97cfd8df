//! `workbook figures --only prefetch`: `prefetch_timeline.svg`, one mini-batch epoch of GCN on
//! `csbm:100000` (10 seeds a batch, `[10, 10]` neighbours) without and with prefetch, drawn from
//! the step timings the trainer measured (the second epoch of each run, past one-off costs).

use anyhow::{Context, Result};
use std::path::Path;
use workbook::datasets::{self, CsbmConfig};
use workbook::device::Chosen;
use workbook::train::minibatch::{Eval, MiniBatchConfig, MiniBatchEpoch, MiniBatchTrainer};
use workbook::train::TrainConfig;
use workbook::{ModelConfig, Placement};
use workbook_lessons::figures::draw_prefetch_timeline;

pub fn draw(out: &Path, chosen: &Chosen) -> Result<()> {
    let graph = datasets::csbm(&CsbmConfig::new(100_000), Placement::cpu())
        .context("generating csbm:100000")?;
    let epoch = |prefetch: usize| -> Result<MiniBatchEpoch> {
        let config = ModelConfig::gcn(graph.num_features(), 16, graph.num_classes());
        let mb = MiniBatchConfig {
            prefetch,
            eval: Eval::Batches {
                num_neighbors: vec![10, 10],
                batch_size: 1024,
            },
            ..MiniBatchConfig::new(&[10, 10], 10)
        };
        let mut t =
            MiniBatchTrainer::new(config, &graph, &TrainConfig::gcn(), mb, &chosen.placement)?;
        t.epoch()?;
        Ok(t.epoch()?)
    };
    let inline = epoch(0)?;
    let ahead = epoch(2)?;
    let path = out.join("prefetch_timeline.svg");
    let title = |name: &str, e: &MiniBatchEpoch| {
        format!(
            "{name}: {} steps in {:.1} ms ({} on {}, csbm:100000)",
            e.batches, e.stats.step_ms, "GCN", chosen.name
        )
    };
    draw_prefetch_timeline(
        &path,
        &[
            (&title("in the loop", &inline), &inline.steps),
            (&title("prefetch (depth 2)", &ahead), &ahead.steps),
        ],
    )?;
    eprintln!(
        "wrote {} (epoch {:.1} ms without prefetch, {:.1} ms with; prepare {:.1} / {:.1} ms)",
        path.display(),
        inline.stats.step_ms,
        ahead.stats.step_ms,
        inline.prepare_ms(),
        ahead.prepare_ms()
    );
    Ok(())
}
