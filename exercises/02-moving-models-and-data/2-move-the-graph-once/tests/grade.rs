//! Graded tests for exercise 02-2 (points in exercise.toml). Do not edit: the grader checks this
//! file against its checksum.
//!
//! Each test is a scenario (the `scenario` crate): it records what it observed (the graph's
//! copies and every epoch's read-backs in the transfer ledger, the metrics), and a teacher's
//! grader compares that with the reference solution's. The run's challenge picks the training
//! seed, the number of epochs, the larger graph and the simulated accelerator's number.

use super::move_once::{train_on, EpochMetrics};
use scenario::{Json, Scenario, Tolerance};
use workbook::datasets::{self, CsbmConfig};
use workbook::device::accelerator_or_sim;
use workbook::ledger::{Ledger, Transfer};
use workbook::train::{TrainConfig, Trainer};
use workbook::{Graph, ModelConfig, Placement};

/// The accelerator: `cuda:0`, or `sim:2` to `sim:7` as the run's challenge picks.
fn accelerator(s: &Scenario) -> Placement {
    accelerator_or_sim(s.pick("accelerator", 2..8)).placement
}

fn recipe(s: &Scenario, epochs: usize) -> TrainConfig {
    TrainConfig {
        epochs,
        seed: s.seed("training"),
        ..TrainConfig::gcn()
    }
}

/// Trains with `train_on` on the accelerator, with a ledger attached.
fn ledgered_run(
    s: &Scenario,
    host: &Graph,
    epochs: usize,
) -> (Ledger, Placement, Vec<EpochMetrics>) {
    let ledger = Ledger::new();
    let gpu = accelerator(s).with_ledger(&ledger);
    let metrics = train_on(host, &gpu, &recipe(s, epochs))
        .unwrap_or_else(|e| panic!("train_on failed on {gpu}: {e}"));
    assert_eq!(
        metrics.len(),
        epochs,
        "train_on should return one entry per epoch"
    );
    (ledger, gpu, metrics)
}

/// Every epoch's metrics, to observe: the epoch, the loss and the three accuracies.
fn metric_rows(metrics: &[EpochMetrics]) -> Vec<(usize, [f32; 4])> {
    metrics
        .iter()
        .map(|m| {
            (
                m.epoch,
                [m.loss, m.train_accuracy, m.val_accuracy, m.test_accuracy],
            )
        })
        .collect()
}

/// Metrics of two correct loops differ by float rounding at most.
const SAME_METRICS: Tolerance = Tolerance {
    abs: 1e-5,
    rel: 1e-5,
};

/// The library's trainer on the same device with the same recipe: the loop's reference.
fn reference(s: &Scenario, host: &Graph, epochs: usize) -> Vec<EpochMetrics> {
    let gpu = accelerator(s);
    let graph = host.to_device(&gpu).unwrap();
    let config = ModelConfig::gcn(host.num_features(), 16, host.num_classes());
    let mut trainer = Trainer::new(config, &graph, &recipe(s, epochs)).unwrap();
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

/// The copies of the graph's parts, to observe: what, from, to, bytes and phase.
fn graph_copy_rows(ledger: &Ledger, host: &Graph) -> Vec<(String, String, String, u64, String)> {
    graph_parts(ledger, host)
        .into_iter()
        .map(|t| (t.what, t.from, t.to, t.bytes, t.phase))
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

/// Per epoch, to observe: the size of every copy back from `gpu`, and how many copies went to
/// it (the first epoch's derived edge structures aside).
fn per_epoch(ledger: &Ledger, gpu: &Placement, epochs: usize) -> Vec<(Vec<u64>, usize)> {
    let gpu = gpu.to_string();
    (1..=epochs)
        .map(|epoch| {
            let transfers = ledger.in_phase(&format!("epoch {epoch}"));
            let back = transfers.iter().filter(|t| t.from == gpu).map(|t| t.bytes);
            let up = transfers
                .iter()
                .filter(|t| t.to == gpu && !(epoch == 1 && t.what.starts_with("edge_index (")));
            (back.collect(), up.count())
        })
        .collect()
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
        let up: Vec<&Transfer> = transfers
            .iter()
            .filter(|t| t.to == gpu && !(epoch == 1 && t.what.starts_with("edge_index (")))
            .collect();
        assert!(
            back.len() == 1 && back[0].bytes <= 16,
            "in {phase}, exactly one read-back of at most 16 bytes (loss + 3 accuracies) should come back from {gpu}, got {} read-back(s): {:?}\n{}",
            back.len(),
            back.iter().map(|t| format!("{} ({} bytes)", t.what, t.bytes)).collect::<Vec<_>>(),
            ledger.table()
        );
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
    let s = scenario::start();
    let epochs = s.pick("epochs", 3..8);
    let host = datasets::karate(Placement::cpu()).unwrap();
    let (ledger, gpu, metrics) = ledgered_run(&s, &host, epochs);
    // One record: the copies (the same for every seed) with the metrics (which are not).
    s.observe_within(
        "metrics, and the graph's copies",
        &(metric_rows(&metrics), Json(graph_copy_rows(&ledger, &host))),
        SAME_METRICS,
    );
    assert_crosses_once(&ledger, &gpu, &host, epochs);
    assert_same_run(
        &metrics,
        &reference(&s, &host, epochs),
        &format!("karate, {epochs} epochs"),
    );
}

#[test]
fn each_epoch_reads_back_only_the_metrics() {
    let s = scenario::start();
    let epochs = s.pick("epochs", 3..8);
    let host = datasets::karate(Placement::cpu()).unwrap();
    let (ledger, gpu, metrics) = ledgered_run(&s, &host, epochs);
    // One record: the read-backs (the same for every seed) with the metrics (which are not).
    s.observe_within(
        "metrics, and per epoch: bytes of each read-back, copies to the device",
        &(metric_rows(&metrics), per_epoch(&ledger, &gpu, epochs)),
        SAME_METRICS,
    );
    assert_only_metrics_per_epoch(&ledger, &gpu, epochs);
    assert_same_run(
        &metrics,
        &reference(&s, &host, epochs),
        &format!("karate, {epochs} epochs"),
    );
}

#[test]
fn a_larger_graph_costs_the_same_per_epoch() {
    // About 1000 nodes, 10 edges per node, 32 features, 5 classes: per epoch, still 16 bytes.
    let s = scenario::start();
    let config = CsbmConfig {
        seed: s.seed("graph"),
        ..CsbmConfig::new(s.pick("nodes", 800..1_200))
    };
    let host = datasets::csbm(&config, Placement::cpu()).unwrap();
    let (ledger, gpu, metrics) = ledgered_run(&s, &host, 3);
    // One record: the read-backs (the same for every graph) with the metrics and the graph's
    // copies (which are not).
    s.observe_within(
        "metrics, the graph's copies, and per epoch: bytes of each read-back, copies to the device",
        &(
            metric_rows(&metrics),
            Json(graph_copy_rows(&ledger, &host)),
            per_epoch(&ledger, &gpu, 3),
        ),
        SAME_METRICS,
    );
    assert_crosses_once(&ledger, &gpu, &host, 3);
    assert_only_metrics_per_epoch(&ledger, &gpu, 3);
    assert_same_run(
        &metrics,
        &reference(&s, &host, 3),
        &format!("csbm:{}, 3 epochs", config.nodes),
    );
}
