//! `workbook bench --devices sim:1,sim:2,sim:3,sim:4 --batch-size 128`: data-parallel training
//! over the first 1, 2, ..., N devices of the list, one JSON line per device count (`"bench":
//! "data_parallel"`) and a table on stderr.
//!
//! Each line reports the median time of one optimiser step (the epoch's training pass over its
//! steps: sampling, copies, forward and backward on every replica, reduce, Adam, broadcast;
//! evaluation excluded) and the bytes a step moves, read from one ledger attached to every
//! device: batches (host to each device), gradient reduce (each replica after the first to the
//! first) and parameter broadcast (back). The global batch stays the same for every count; when
//! it does not split evenly over a count (128 over 3), that count uses the largest multiple
//! below it (126) and says so.
//!
//! On `sim:N` every device is the same host and the replicas run one after another, so more
//! devices cannot be faster: the numbers are our overheads (the extra copies, the reduce and the
//! broadcast), not a speed-up. Real speed-ups need real devices working concurrently.

use super::bench::Args;
use super::train_data_parallel::needs_batch_size;
use anyhow::{bail, Context, Result};
use serde_json::json;
use workbook::device::DeviceSpec;
use workbook::ledger::Ledger;
use workbook::parallel::{DataParallelTrainer, StepBytes};
use workbook::placement::Placement;
use workbook::train::minibatch::{Eval, MiniBatchConfig};
use workbook::train::TrainConfig;
use workbook::Graph;
use workbook_lessons::bench::median;

/// What one device count measured (a row of the table).
struct Row {
    model: &'static str,
    devices: Vec<String>,
    batch_size: usize,
    step_ms: f64,
    bytes: StepBytes,
    in_sync: bool,
}

pub fn run(args: &Args) -> Result<()> {
    let list = args.devices.as_ref().expect("called with --devices");
    let Some(asked) = args.mini.batch_size else {
        bail!("{}", needs_batch_size(list.0.len()));
    };
    if let Some(t) = args.threads {
        workbook::ops::set_cpu_threads(t).context("setting --threads")?;
    }
    use workbook::limits::check_count;
    check_count("--epochs", args.epochs, 1)?;
    check_count("--warmup", args.warmup, 0)?;
    if asked < list.0.len() {
        bail!(
            "--batch-size {asked} is smaller than the {} devices: every device needs at least one seed per step",
            list.0.len()
        );
    }
    let ledger = Ledger::new();
    let devices = list.open(&ledger)?;
    let simulated = list.0.iter().all(|d| !matches!(d, DeviceSpec::Cuda(_)));
    if simulated {
        eprintln!(
            "note: simulated devices (and cpu) share this host and its cores, and the replicas run one after another: these numbers are the overheads of data parallelism (copies, reduce, broadcast), not a speed-up"
        );
    }
    let graph = match &args.graph {
        Some(path) => Graph::load(path, Placement::cpu())
            .with_context(|| format!("reading graph file {}", path.display()))?,
        None => {
            crate::inputs::load_dataset(&args.dataset, args.data_dir.as_deref(), Placement::cpu())?
        }
    };
    let mut rows = Vec::new();
    for &kind in &args.model {
        let (config, recipe) = kind.recipe(&graph);
        let recipe = TrainConfig {
            seed: args.seed,
            ..recipe
        };
        let layers = config.layers.len();
        let num_neighbors = args.mini.num_neighbors(layers);
        for k in 1..=devices.len() {
            let batch_size = asked / k * k;
            if batch_size != asked {
                eprintln!(
                    "note: {k} devices: --batch-size {asked} does not split evenly over {k}, so this count uses {batch_size}"
                );
            }
            let mb = MiniBatchConfig {
                // Evaluation is not timed; sampled like training, to keep it short.
                eval: Eval::Batches {
                    num_neighbors: num_neighbors.clone(),
                    batch_size: 1024,
                },
                ..args.mini.config(batch_size, layers)
            };
            let on = &devices[..k];
            let names = list.prefix(k).names();
            let mut t = DataParallelTrainer::new(config.clone(), &graph, &recipe, mb, on)
                .with_context(|| {
                    format!(
                        "data-parallel {} on {} over {}",
                        kind.name(),
                        graph.name,
                        names.join(",")
                    )
                })?;
            for _ in 0..args.warmup {
                t.epoch()?;
            }
            ledger.clear();
            let mut epochs = Vec::new();
            for _ in 0..args.epochs {
                epochs.push(t.epoch()?);
            }
            let steps: usize = epochs.iter().map(|e| e.steps).sum();
            let bytes = StepBytes::from_ledger(&ledger, steps);
            let step_ms = median(
                &epochs
                    .iter()
                    .map(|e| e.stats.step_ms / e.steps.max(1) as f64)
                    .collect::<Vec<_>>(),
            );
            let epoch_ms = median(&epochs.iter().map(|e| e.stats.step_ms).collect::<Vec<_>>());
            let in_sync = epochs.iter().all(|e| e.replicas_in_sync);
            println!(
                "{}",
                json!({
                    "impl": "workbook",
                    "bench": "data_parallel",
                    "model": kind.name(),
                    "dataset": graph.name,
                    "nodes": graph.num_nodes(),
                    "edges": graph.num_edges(),
                    "threads": workbook::ops::cpu_threads(),
                    "devices": names,
                    "device_count": k,
                    "simulated": simulated,
                    "batch_size": batch_size,
                    "batch_size_per_device": batch_size / k,
                    "num_neighbors": num_neighbors,
                    "prefetch": args.mini.prefetch,
                    "warmup": args.warmup,
                    "repeats": args.epochs,
                    "steps_per_epoch": epochs[0].steps,
                    "epoch_ms": epoch_ms,
                    "step_ms": step_ms,
                    "batch_bytes_per_step": bytes.batch,
                    "reduce_bytes_per_step": bytes.reduce,
                    "broadcast_bytes_per_step": bytes.broadcast,
                    "replicas_in_sync": in_sync,
                })
            );
            rows.push(Row {
                model: kind.name(),
                devices: names,
                batch_size,
                step_ms,
                bytes,
                in_sync,
            });
        }
    }
    eprint!("{}", table(&rows));
    Ok(())
}

/// The rows as a plain-text table, one line per model and device count.
fn table(rows: &[Row]) -> String {
    let w = rows
        .iter()
        .map(|r| r.devices.join(",").len())
        .max()
        .unwrap_or(0)
        .max(7);
    let mut out = format!(
        "{:<6} {:<w$} {:>5} {:>9} {:>11} {:>11} {:>11} {:>8}\n",
        "model", "devices", "batch", "step ms", "batch KB", "reduce KB", "bcast KB", "in sync"
    );
    for r in rows {
        out += &format!(
            "{:<6} {:<w$} {:>5} {:>9.2} {:>11.1} {:>11.1} {:>11.1} {:>8}\n",
            r.model,
            r.devices.join(","),
            r.batch_size,
            r.step_ms,
            r.bytes.batch / 1e3,
            r.bytes.reduce / 1e3,
            r.bytes.broadcast / 1e3,
            if r.in_sync { "yes" } else { "NO" }
        );
    }
    out
}
