//! Graded tests for exercise 05-1 (points in exercise.toml). Do not edit: the grader checks this
//! file against its checksum.

use super::batch_loop::train_epoch;
use workbook::datasets::{self, CsbmConfig};
use workbook::device::accelerator;
use workbook::ledger::Ledger;
use workbook::train::minibatch::{Eval, MiniBatchConfig, MiniBatchTrainer};
use workbook::train::TrainConfig;
use workbook::{Graph, ModelConfig, Placement};

/// A host graph of 3000 nodes and a trainer (GCN, [5, 5] neighbours, 32 seeds a batch) whose
/// model is on the accelerator, with a ledger attached.
fn setup(ledger: &Ledger) -> (Graph, Placement, MiniBatchTrainer) {
    let graph = datasets::csbm(&CsbmConfig::new(3_000), Placement::cpu()).unwrap();
    let device = accelerator().placement.with_ledger(ledger);
    let trainer = new_trainer(&graph, &device);
    (graph, device, trainer)
}

fn new_trainer(graph: &Graph, device: &Placement) -> MiniBatchTrainer {
    let config = ModelConfig::gcn(graph.num_features(), 16, graph.num_classes());
    let mb = MiniBatchConfig {
        eval: Eval::FullGraph,
        ..MiniBatchConfig::new(&[5, 5], 32)
    };
    MiniBatchTrainer::new(config, graph, &TrainConfig::gcn(), mb, device).unwrap()
}

#[test]
fn every_step_runs_on_the_device() {
    let ledger = Ledger::new();
    let (graph, device, mut trainer) = setup(&ledger);
    let steps = train_epoch(&mut trainer, &graph, &device, 1)
        .unwrap_or_else(|e| panic!("train_epoch failed on {device}: {e}"));
    assert_eq!(
        steps,
        trainer.loader().len(),
        "one step per batch of the epoch"
    );
}

#[test]
fn each_step_moves_its_batch_and_nothing_else() {
    let ledger = Ledger::new();
    let (graph, device, mut trainer) = setup(&ledger);
    ledger.set_phase("epoch 1");
    let steps = train_epoch(&mut trainer, &graph, &device, 1)
        .unwrap_or_else(|e| panic!("train_epoch failed on {device}: {e}"));
    let transfers = ledger.in_phase("epoch 1");
    for part in ["x", "edge_index", "y", "n_id", "e_id"] {
        let what = format!("batch.{part}");
        let n = transfers.iter().filter(|t| t.what == what).count();
        assert_eq!(
            n,
            steps,
            "{what} should cross to {device} once per step ({steps} steps), not {n} times:\n{}",
            ledger.table()
        );
    }
    let graph_prefix = format!("{}.", graph.name);
    if let Some(t) = transfers.iter().find(|t| t.what.starts_with(&graph_prefix)) {
        panic!(
            "only the batch should cross inside the loop, but the graph's {} did ({} bytes, the whole graph's):\n{}",
            t.what,
            t.bytes,
            ledger.table()
        );
    }
}

#[test]
fn the_epoch_matches_the_library() {
    let ledger = Ledger::new();
    let (graph, device, mut ours) = setup(&ledger);
    train_epoch(&mut ours, &graph, &device, 1)
        .unwrap_or_else(|e| panic!("train_epoch failed on {device}: {e}"));
    let mut theirs = new_trainer(&graph, &device);
    theirs.epoch().unwrap(); // the library's epoch 1: the same batches, the same steps
    for ((name, a), (_, b)) in ours
        .model()
        .named_parameters()
        .iter()
        .zip(theirs.model().named_parameters())
    {
        let diff = (a - &b)
            .unwrap()
            .abs()
            .unwrap()
            .max_all()
            .unwrap()
            .to_scalar::<f32>()
            .unwrap();
        assert!(
            diff <= 1e-5,
            "after one epoch, {name} should match MiniBatchTrainer::epoch's (max difference {diff})"
        );
    }
}
