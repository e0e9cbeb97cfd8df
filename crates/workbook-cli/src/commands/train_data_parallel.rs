//! `workbook train --devices sim:1,sim:2 --batch-size 128`: data-parallel mini-batch training
//! ([`workbook::parallel::DataParallelTrainer`]), one replica per listed device.
//!
//! `--batch-size` is the global batch: each step takes that many training seeds, split evenly
//! over the devices (`--batch-size / devices` per replica). Gradients are reduced onto the first
//! device, the optimiser steps there once, and the new parameters are broadcast; after every
//! epoch the replicas are compared bit for bit. One ledger is attached to every device, so the
//! JSON line reports the bytes each step moves: batches (host to each device), gradient reduce
//! (each replica after the first to the first) and parameter broadcast (the first to the
//! others). `--save` writes the unwrapped model (the first replica), never the wrapper.

use super::train::{folded_totals, Args, EvalKind};
use anyhow::{bail, Context, Result};
use serde_json::json;
use workbook::ledger::Ledger;
use workbook::parallel::{train_data_parallel, DataParallelEpoch, StepBytes};

/// One human-readable line per epoch (stderr).
pub fn epoch_line(e: &DataParallelEpoch, epochs: usize, devices: usize) -> String {
    let s = &e.stats;
    format!(
        "epoch {}/{epochs}: loss {:.4}  train {:.1}%  val {:.1}%  test {:.1}%  {} steps x {devices} device(s)  {:.0} ms  replicas {}",
        s.epoch,
        s.loss,
        100.0 * s.train_accuracy,
        100.0 * s.val_accuracy,
        100.0 * s.test_accuracy,
        e.steps,
        s.step_ms,
        if e.replicas_in_sync { "in sync" } else { "DIFFER" }
    )
}

/// The error when `--devices` comes without `--batch-size`.
pub fn needs_batch_size(devices: usize) -> String {
    format!(
        "--devices needs --batch-size: data parallelism splits each step's mini-batches over the devices (--batch-size is the global batch, --batch-size / {devices} seeds per device); add e.g. --batch-size {}",
        128usize.div_ceil(devices) * devices
    )
}

pub fn run(args: &Args) -> Result<()> {
    let list = args.devices.as_ref().expect("called with --devices");
    let n = list.0.len();
    let Some(batch_size) = args.mini.batch_size else {
        bail!("{}", needs_batch_size(n));
    };
    workbook::limits::check_count("--epochs", args.epochs, 1)?;
    let ledger = Ledger::new();
    let devices = list.open(&ledger)?;
    ledger.set_phase("load");
    let (graph, config, recipe, num_neighbors, mb) = super::train::minibatch_setup(
        args,
        batch_size,
        &format!("global batch {batch_size} over {n} device(s)"),
    )?;
    let trainer = train_data_parallel(config, &graph, &recipe, mb, &devices, |e| {
        eprintln!("{}", epoch_line(e, args.epochs, n))
    })
    .with_context(|| {
        format!(
            "training {} on {} data-parallel over {}",
            args.model.name(),
            graph.name,
            list.names().join(",")
        )
    })?;
    let history = trainer.history().to_vec();
    let last = history.last().context("training ran no epochs")?.clone();
    if let Some(path) = &args.save {
        ledger.set_phase("save");
        // Unwrapped first: the checkpoint is the model, loadable on any one device.
        let model = trainer.into_module();
        workbook::checkpoint::save(&model, path)
            .with_context(|| format!("saving a checkpoint to {}", path.display()))?;
        eprintln!(
            "saved the unwrapped model (replica on {}) to {}",
            devices[0],
            path.display()
        );
    }
    if args.ledger {
        eprint!(
            "transfer ledger ({}):\n{}",
            list.names().join(","),
            ledger.table()
        );
    }
    let steps: usize = history.iter().map(|e| e.steps).sum();
    let bytes = StepBytes::from_ledger(&ledger, steps);
    // Mean over the epochs after the first (which pays one-off costs), as the other modes.
    let later = if history.len() > 1 {
        &history[1..]
    } else {
        &history[..]
    };
    let epoch_ms = later.iter().map(|e| e.stats.step_ms).sum::<f64>() / later.len() as f64;
    let summary = json!({
        "model": args.model.name(),
        "dataset": graph.name,
        "devices": list.names(),
        "epochs": args.epochs,
        "seed": args.seed,
        "loss": last.stats.loss,
        "train_accuracy": last.stats.train_accuracy,
        "val_accuracy": last.stats.val_accuracy,
        "test_accuracy": last.stats.test_accuracy,
        "replicas_in_sync": last.replicas_in_sync,
        "epoch_ms": epoch_ms,
        "batch_size": batch_size,
        "batch_size_per_device": batch_size / n,
        "num_neighbors": num_neighbors,
        "prefetch": args.mini.prefetch,
        "eval": if args.eval == EvalKind::Full { "full" } else { "batches" },
        "steps_per_epoch": last.steps,
        "batches_per_epoch": last.batches,
        "batch_bytes_per_step": bytes.batch,
        "reduce_bytes_per_step": bytes.reduce,
        "broadcast_bytes_per_step": bytes.broadcast,
        "ledger": folded_totals(&ledger),
    });
    println!("{summary}");
    Ok(())
}
