//! Graded tests for exercise 05-1 (points in exercise.toml). Do not edit: the grader checks this
//! file against its checksum.
//!
//! Each test is a scenario (the `scenario` crate): it records what it observed, and a teacher's
//! grader compares that with the reference solution's. The grading run's challenge picks the
//! accelerator (`cuda:0`, or a simulated `sim:2` to `sim:7`), the graph (its size and seed) and
//! the batch size, so the copies and the trained weights cannot be written down in advance.
//! Which copies came before which step is read from the marks `MiniBatchTrainer::step` leaves in
//! the ledger (the library sets them, not the code under test).

use super::batch_loop::train_epoch;
use scenario::{Json, Scenario, Tolerance};
use workbook::datasets::{self, CsbmConfig};
use workbook::device::accelerator_or_sim;
use workbook::ledger::{Ledger, Transfer};
use workbook::train::minibatch::{Eval, MiniBatchConfig, MiniBatchTrainer, STEP_MARK};
use workbook::train::TrainConfig;
use workbook::{Graph, ModelConfig, Placement};

/// The accelerator: `cuda:0`, or `sim:2` to `sim:7` as the run's challenge picks.
fn accelerator(s: &Scenario) -> Placement {
    accelerator_or_sim(s.pick("accelerator", 2..8)).placement
}

/// A host graph of 1500 to 3499 nodes and a trainer (GCN, [5, 5] neighbours, 24 to 47 seeds a
/// batch) whose model is on the accelerator, with a ledger attached; sizes and seeds are the
/// challenge's.
fn setup(s: &Scenario, ledger: &Ledger) -> (Graph, Placement, MiniBatchTrainer) {
    let mut config = CsbmConfig::new(s.pick("nodes", 1500..3500));
    config.seed = s.seed("graph");
    let graph = datasets::csbm(&config, Placement::cpu()).unwrap();
    let device = accelerator(s).with_ledger(ledger);
    let trainer = new_trainer(s, &graph, &device);
    (graph, device, trainer)
}

fn new_trainer(s: &Scenario, graph: &Graph, device: &Placement) -> MiniBatchTrainer {
    let config = ModelConfig::gcn(graph.num_features(), 16, graph.num_classes());
    let mb = MiniBatchConfig {
        eval: Eval::FullGraph,
        ..MiniBatchConfig::new(&[5, 5], s.pick("batch size", 24..48))
    };
    let train = TrainConfig {
        seed: s.seed("model"),
        ..TrainConfig::gcn()
    };
    MiniBatchTrainer::new(config, graph, &train, mb, device).unwrap()
}

/// What the judge compares of a copy: what, from where to where, how many bytes.
fn row(t: &Transfer) -> (String, String, String, u64) {
    (t.what.clone(), t.from.clone(), t.to.clone(), t.bytes)
}

/// Whether a copy is the structure GCN derives from a batch's edges during the step (self-loops,
/// the sorted CSR): the library's, made inside `trainer.step`.
fn derived_in_the_step(t: &Transfer) -> bool {
    t.what.starts_with("edge_index (")
}

#[test]
fn every_step_runs_on_the_device() {
    let s = scenario::start();
    let ledger = Ledger::new();
    let (graph, device, mut trainer) = setup(&s, &ledger);
    let steps = train_epoch(&mut trainer, &graph, &device, 1)
        .unwrap_or_else(|e| panic!("train_epoch failed on {device}: {e}"));
    s.observe("steps", &steps);
    s.observe(
        "steps the trainer took",
        &ledger.before_each(STEP_MARK).len(),
    );
    for (name, p) in trainer.model().named_parameters() {
        if name.ends_with("bias") {
            s.observe_within(
                format!("{name} after the epoch"),
                &p,
                Tolerance {
                    abs: 1e-5,
                    rel: 1e-5,
                },
            );
        }
    }
    assert_eq!(
        steps,
        trainer.loader().len(),
        "one step per batch of the epoch"
    );
    assert_eq!(
        ledger.before_each(STEP_MARK).len(),
        steps,
        "train_epoch returned {steps} steps, but the trainer took a different number"
    );
}

#[test]
fn each_step_moves_its_batch_and_nothing_else() {
    let s = scenario::start();
    let ledger = Ledger::new();
    let (graph, device, mut trainer) = setup(&s, &ledger);
    ledger.set_phase("epoch 1");
    let steps = train_epoch(&mut trainer, &graph, &device, 1)
        .unwrap_or_else(|e| panic!("train_epoch failed on {device}: {e}"));
    let transfers = ledger.in_phase("epoch 1");
    let mut counts = Vec::new();
    for part in ["x", "edge_index", "y", "n_id", "e_id"] {
        let what = format!("batch.{part}");
        let n = transfers.iter().filter(|t| t.what == what).count();
        let bytes: u64 = transfers
            .iter()
            .filter(|t| t.what == what)
            .map(|t| t.bytes)
            .sum();
        counts.push((what, n, bytes));
    }
    let graph_prefix = format!("{}.", graph.name);
    let graph_copies: Vec<_> = transfers
        .iter()
        .filter(|t| t.what.starts_with(&graph_prefix))
        .map(row)
        .collect();
    // one record: the graph's copies (none) are the same under every challenge, the batches'
    // counts and bytes are the challenge's
    s.observe(
        "copies of each part of the batches (count, bytes), and of the graph",
        &(&counts, &graph_copies),
    );
    for (what, n, _) in &counts {
        assert_eq!(
            *n,
            steps,
            "{what} should cross to {device} once per step ({steps} steps), not {n} times:\n{}",
            ledger.table()
        );
    }
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
fn each_batch_crosses_just_before_its_step() {
    // The order, not the counts: between the end of step k - 1 and the start of step k, exactly
    // batch k's parts cross. A loop that moves every batch first (all of them on the device at
    // once) or the graph with them shows it here.
    let s = scenario::start();
    let ledger = Ledger::new();
    let (graph, device, mut trainer) = setup(&s, &ledger);
    ledger.clear();
    train_epoch(&mut trainer, &graph, &device, 1)
        .unwrap_or_else(|e| panic!("train_epoch failed on {device}: {e}"));
    let before = ledger.before_each(STEP_MARK);
    let per_step: Vec<Vec<(String, String, String, u64)>> = before
        .iter()
        .map(|copies| {
            let mut rows: Vec<_> = copies
                .iter()
                .filter(|t| !derived_in_the_step(t))
                .map(row)
                .collect();
            rows.sort();
            rows
        })
        .collect();
    s.observe("copies before each step", &Json(&per_step));
    let batches: Vec<_> = trainer
        .loader()
        .batches(1)
        .collect::<Result<_, _>>()
        .unwrap();
    assert_eq!(
        per_step.len(),
        batches.len(),
        "one step per batch of the epoch"
    );
    for (k, (rows, batch)) in per_step.iter().zip(&batches).enumerate() {
        let whats: Vec<&str> = rows.iter().map(|r| r.0.as_str()).collect();
        assert_eq!(
            whats,
            [
                "batch.e_id",
                "batch.edge_index",
                "batch.n_id",
                "batch.x",
                "batch.y"
            ],
            "just before step {k}, exactly batch {k}'s five parts should cross (moved inside the loop, one batch at a time); the ledger shows {whats:?} there:\n{}",
            ledger.table()
        );
        let bytes: u64 = rows.iter().map(|r| r.3).sum();
        assert_eq!(
            bytes,
            batch.bytes(),
            "the copies before step {k} should be batch {k}'s ({} bytes), not {bytes} bytes",
            batch.bytes()
        );
        assert!(
            rows.iter()
                .all(|r| r.1 == "cpu" && r.2 == device.to_string()),
            "batch {k} should cross from the cpu to {device}: {rows:?}"
        );
    }
}

#[test]
fn the_epoch_matches_the_library() {
    let s = scenario::start();
    let ledger = Ledger::new();
    let (graph, device, mut ours) = setup(&s, &ledger);
    train_epoch(&mut ours, &graph, &device, 1)
        .unwrap_or_else(|e| panic!("train_epoch failed on {device}: {e}"));
    let mut theirs = new_trainer(&s, &graph, &device);
    theirs.epoch().unwrap(); // the library's epoch 1: the same batches, the same steps
    let expected: std::collections::HashMap<_, _> =
        theirs.model().named_parameters().into_iter().collect();
    for (name, a) in ours.model().named_parameters() {
        s.observe_within(
            format!("{name} after one epoch"),
            &a,
            Tolerance {
                abs: 1e-5,
                rel: 1e-5,
            },
        );
        let a = a.flatten_all().unwrap().to_vec1::<f32>().unwrap();
        let b = expected[&name]
            .flatten_all()
            .unwrap()
            .to_vec1::<f32>()
            .unwrap();
        // NaN-aware: a NaN differs from everything (f32::max would skip it)
        let worst = a
            .iter()
            .zip(&b)
            .map(|(x, y)| (x - y).abs())
            .fold(0f32, |m, d| {
                if d.is_nan() || m.is_nan() {
                    f32::NAN
                } else {
                    m.max(d)
                }
            });
        assert!(
            worst <= 1e-5,
            "after one epoch, {name} should match MiniBatchTrainer::epoch's (max difference {worst})"
        );
    }
}
