//! Graded tests for exercise 02-2 (points in exercise.toml). Do not edit: the grader checks this
//! file against its checksum.

use super::move_once::{train_on, EpochMetrics};
use workbook::datasets::{self, CsbmConfig};
use workbook::device::accelerator;
use workbook::ledger::{Ledger, Transfer};
use workbook::train::{TrainConfig, Trainer};
use workbook::{Graph, ModelConfig, Placement};

fn recipe(epochs: usize) -> TrainConfig {
    TrainConfig {
        epochs,
        ..TrainConfig::gcn()
    }
}

/// Trains with `train_on` on the accelerator, with a ledger attached.
fn ledgered_run(host: &Graph, epochs: usize) -> (Ledger, Placement, Vec<EpochMetrics>) {
    let ledger = Ledger::new();
    let gpu = accelerator().placement.with_ledger(&ledger);
    let metrics = train_on(host, &gpu, &recipe(epochs))
        .unwrap_or_else(|e| panic!("train_on failed on {gpu}: {e}"));
    assert_eq!(
        metrics.len(),
        epochs,
        "train_on should return one entry per epoch"
    );
    (ledger, gpu, metrics)
}

/// The library's trainer on the same device with the same recipe: the loop's reference.
fn reference(host: &Graph, epochs: usize) -> Vec<EpochMetrics> {
    let gpu = accelerator().placement;
    let graph = host.to_device(&gpu).unwrap();
    let config = ModelConfig::gcn(host.num_features(), 16, host.num_classes());
    let mut trainer = Trainer::new(config, &graph, &recipe(epochs)).unwrap();
    (1..=epochs)
        .map(|epoch| {
            let s = trainer.epoch(&graph).unwrap();
            EpochMetrics {
                epoch,
                loss: s.loss,
                train_accuracy: s.train_accuracy,
                val_accuracy: s.val_accuracy,
                test_accuracy: s.test_accuracy,
            }
        })
        .collect()
}

/// Equal up to float noise (bit for bit on host-backed devices; a GPU may reorder sums).
fn close(a: f32, b: f32) -> bool {
    (a.is_nan() && b.is_nan()) || (a - b).abs() <= 1e-5 * (1.0 + b.abs())
}

fn assert_same_run(ours: &[EpochMetrics], theirs: &[EpochMetrics], what: &str) {
    for (a, b) in ours.iter().zip(theirs) {
        let same = a.epoch == b.epoch
            && close(a.loss, b.loss)
            && close(a.train_accuracy, b.train_accuracy)
            && close(a.val_accuracy, b.val_accuracy)
            && close(a.test_accuracy, b.test_accuracy);
        assert!(
            same,
            "{what}: epoch {} should match the library's Trainer with the same seed:\n  train_on: {a:?}\n  Trainer:  {b:?}",
            b.epoch
        );
    }
}

/// The transfers of `graph`'s own parts (`karate.x`, `karate.edge_index`, ...).
fn graph_parts(ledger: &Ledger, graph: &Graph) -> Vec<Transfer> {
    let prefix = format!("{}.", graph.name);
    ledger
        .transfers()
        .into_iter()
        .filter(|t| t.what.starts_with(&prefix))
        .collect()
}

/// Checks that every part of `host` crossed to `gpu` exactly once, outside the epochs.
fn assert_crosses_once(ledger: &Ledger, gpu: &Placement, host: &Graph, epochs: usize) {
    let parts = graph_parts(ledger, host);
    for part in ["x", "edge_index", "y", "train_mask/val_mask/test_mask"] {
        let what = format!("{}.{part}", host.name);
        let times = parts.iter().filter(|t| t.what == what).count();
        assert_eq!(
            times,
            1,
            "over {epochs} epochs, {what} should cross from cpu to {gpu} once, not {times} times:\n{}",
            ledger.table()
        );
    }
    if let Some(t) = parts.iter().find(|t| t.phase.starts_with("epoch ")) {
        panic!(
            "the graph should be moved before the loop, but {} crossed in {}:\n{}",
            t.what,
            t.phase,
            ledger.table()
        );
    }
}

/// Checks that in every epoch the only read-back is one transfer of at most 16 bytes (the loss
/// and three accuracies), and that nothing is uploaded after the first epoch (which uploads the
/// layers' derived edge structures, once).
fn assert_only_metrics_per_epoch(ledger: &Ledger, gpu: &Placement, epochs: usize) {
    let gpu = gpu.to_string();
    for epoch in 1..=epochs {
        let phase = format!("epoch {epoch}");
        let transfers = ledger.in_phase(&phase);
        let back: Vec<&Transfer> = transfers.iter().filter(|t| t.from == gpu).collect();
        assert!(
            back.len() == 1 && back[0].bytes <= 16,
            "in {phase}, exactly one read-back of at most 16 bytes (loss + 3 accuracies) should come back from {gpu}, got {} read-back(s): {:?}\n{}",
            back.len(),
            back.iter().map(|t| format!("{} ({} bytes)", t.what, t.bytes)).collect::<Vec<_>>(),
            ledger.table()
        );
        let up: Vec<&Transfer> = transfers
            .iter()
            .filter(|t| t.to == gpu && !(epoch == 1 && t.what.starts_with("edge_index (")))
            .collect();
        assert!(
            up.is_empty(),
            "in {phase}, nothing should be copied to {gpu}, got: {:?}\n{}",
            up.iter().map(|t| t.what.as_str()).collect::<Vec<_>>(),
            ledger.table()
        );
    }
}

#[test]
fn the_graph_crosses_once() {
    let host = datasets::karate(Placement::cpu()).unwrap();
    let (ledger, gpu, metrics) = ledgered_run(&host, 5);
    assert_crosses_once(&ledger, &gpu, &host, 5);
    assert_same_run(&metrics, &reference(&host, 5), "karate, 5 epochs");
}

#[test]
fn each_epoch_reads_back_only_the_metrics() {
    let host = datasets::karate(Placement::cpu()).unwrap();
    let (ledger, gpu, metrics) = ledgered_run(&host, 5);
    assert_only_metrics_per_epoch(&ledger, &gpu, 5);
    assert_same_run(&metrics, &reference(&host, 5), "karate, 5 epochs");
}

#[test]
fn a_larger_graph_costs_the_same_per_epoch() {
    // 1000 nodes, about 10 000 edges, 32 features, 5 classes: per epoch, still 16 bytes.
    let host = datasets::csbm(&CsbmConfig::new(1_000), Placement::cpu()).unwrap();
    let (ledger, gpu, metrics) = ledgered_run(&host, 3);
    assert_crosses_once(&ledger, &gpu, &host, 3);
    assert_only_metrics_per_epoch(&ledger, &gpu, 3);
    assert_same_run(&metrics, &reference(&host, 3), "csbm:1000, 3 epochs");
}
