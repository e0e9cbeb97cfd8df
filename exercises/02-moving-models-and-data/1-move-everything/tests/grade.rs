//! Graded tests for exercise 02-1 (points in exercise.toml). Do not edit: the grader checks this
//! file against its checksum.
//!
//! Each test is a scenario (the `scenario` crate): it records what it observed (placements,
//! Adam's state, losses, the copies in the transfer ledger), and a teacher's grader compares that
//! with the reference solution's. The run's challenge picks the training seed, the simulated
//! devices' numbers and when the run moves, so the answers cannot be written down in advance.

use super::move_everything::{cached_gcn, Run};
use scenario::{Json, Scenario, Tolerance};
use workbook::candle_core::{Device, Tensor};
use workbook::device::accelerator_or_sim;
use workbook::ledger::{Ledger, Transfer};
use workbook::train::{TrainConfig, Trainer};
use workbook::{datasets, Graph, Placement};

/// The accelerator: `cuda:0`, or `sim:2` to `sim:7` as the run's challenge picks.
fn accelerator(s: &Scenario) -> Placement {
    accelerator_or_sim(s.pick("accelerator", 2..8)).placement
}

/// The GCN recipe, 8 epochs, with a seed the challenge picks.
fn recipe(s: &Scenario) -> TrainConfig {
    TrainConfig {
        epochs: 8,
        seed: s.seed("training"),
        ..TrainConfig::gcn()
    }
}

/// A run on karate on the cpu, trained for `epochs` epochs (so the caches and Adam's state are
/// filled).
fn run_on_cpu(s: &Scenario, epochs: usize) -> (Graph, Run) {
    let graph = datasets::karate(Placement::cpu()).unwrap();
    let mut run = Run::new(&graph, &recipe(s)).unwrap();
    for _ in 0..epochs {
        run.epoch(&graph).unwrap();
    }
    (graph, run)
}

fn host_values(t: &Tensor) -> Vec<f32> {
    t.to_device(&Device::Cpu)
        .unwrap()
        .flatten_all()
        .unwrap()
        .to_vec1::<f32>()
        .unwrap()
}

/// `(name, device)` pairs as strings, to observe.
fn named(pairs: Vec<(String, &Placement)>) -> Vec<(String, String)> {
    pairs
        .into_iter()
        .map(|(n, at)| (n, at.to_string()))
        .collect()
}

/// The ledger's copies, sorted (the order two correct moves make them in may differ).
fn copies(transfers: Vec<Transfer>) -> Vec<(String, String, String, u64)> {
    let mut rows: Vec<_> = transfers
        .into_iter()
        .map(|t| (t.what, t.from, t.to, t.bytes))
        .collect();
    rows.sort();
    rows
}

#[test]
fn parameters_and_cached_buffers_move() {
    let s = scenario::start();
    let gpu = accelerator(&s);
    let (graph, mut run) = run_on_cpu(&s, s.pick("epochs before the move", 1..4));
    run.to_device(&gpu)
        .unwrap_or_else(|e| panic!("Run::to_device({gpu}) failed: {e}"));
    let parameters = named(run.model.parameter_placements());
    let buffers = named(run.model.buffer_placements());
    s.observe("parameters after the move", &parameters);
    s.observe("cached buffers after the move", &buffers);
    for (name, at) in &parameters {
        assert_eq!(
            at,
            &gpu.to_string(),
            "parameter '{name}' should be on {gpu} after the move, not {at}"
        );
    }
    for (name, t) in run.model.named_parameters() {
        assert!(
            t.device().same_device(gpu.device()),
            "parameter '{name}' says {gpu} but its data is on {:?}",
            t.device()
        );
    }
    let names: Vec<&str> = buffers.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(
        names,
        ["conv1._cached_edge_index", "conv2._cached_edge_index"],
        "the cached normalisation of both layers should move with the model, not be dropped"
    );
    for (name, at) in &buffers {
        assert_eq!(
            at,
            &gpu.to_string(),
            "cached buffer '{name}' should be on {gpu} after the move, not {at} (PyTorch's module.to leaves it behind)"
        );
    }
    let graph = graph.to_device(&gpu).unwrap();
    let loss = run.epoch(&graph);
    s.observe(
        "the next epoch's loss",
        &loss.as_ref().map_err(|_| ()).ok().copied(),
    );
    loss.unwrap_or_else(|e| panic!("after moving the run to {gpu}, the next epoch failed: {e}"));
}

#[test]
fn optimizer_state_moves_with_the_model() {
    let s = scenario::start();
    let gpu = accelerator(&s);
    let steps = s.pick("epochs before the move", 1..4);
    let (_, mut run) = run_on_cpu(&s, steps);
    let before: Vec<(String, Vec<f32>, Vec<f32>)> = run
        .optimizer
        .state()
        .map(|(n, m, v)| (n.to_string(), host_values(m), host_values(v)))
        .collect();
    run.to_device(&gpu)
        .unwrap_or_else(|e| panic!("Run::to_device({gpu}) failed: {e}"));
    let opt = &run.optimizer;
    s.observe(
        "Adam's state placement after the move",
        &opt.state_placement().to_string(),
    );
    // One record: the step count, drawn from a few, with the moments it produced (which depend
    // on the training seed), so that no part of it could be written down in advance.
    s.observe(
        "Adam's steps after the move, and exp_avg and exp_avg_sq by parameter",
        &(
            opt.steps(),
            opt.state()
                .map(|(n, m, v)| (n.to_string(), m, v))
                .collect::<Vec<_>>(),
        ),
    );
    assert_eq!(
        opt.state_placement(),
        &gpu,
        "Adam's state (exp_avg, exp_avg_sq) should be on {gpu} after the move, not {}",
        opt.state_placement()
    );
    if let Err(e) = opt.check_placement() {
        panic!("after the move, the optimiser's state is not with the parameters: {e}");
    }
    assert_eq!(
        opt.steps(),
        steps as u64,
        "the optimiser should keep its {steps} steps: move it (Adam::to_model), do not build a new one"
    );
    let after: Vec<(String, Vec<f32>, Vec<f32>)> = opt
        .state()
        .map(|(n, m, v)| {
            assert!(
                m.device().same_device(gpu.device()) && v.device().same_device(gpu.device()),
                "exp_avg[{n}] / exp_avg_sq[{n}] should hold their data on {gpu}"
            );
            (n.to_string(), host_values(m), host_values(v))
        })
        .collect();
    // compared as values: NaN never equals itself, so a NaN state cannot pass
    assert!(
        after == before,
        "exp_avg and exp_avg_sq should be copied unchanged (a new optimiser starts from zeros)"
    );
}

#[test]
fn training_continues_with_identical_losses() {
    let s = scenario::start();
    // The reference: the library's trainer, never moved, 8 epochs on the cpu.
    let host = datasets::karate(Placement::cpu()).unwrap();
    let mut reference = Trainer::new(cached_gcn(34, 16, 4), &host, &recipe(&s)).unwrap();
    let expected: Vec<f32> = (0..8)
        .map(|_| reference.epoch(&host).unwrap().loss)
        .collect();

    // Some epochs on the cpu, then on the accelerator, then on another simulated device (never
    // the accelerator's number), when the challenge says; the ledger watches each move and the
    // epoch after it.
    let first = s.pick("epochs on the cpu", 1..4);
    let second = s.pick("epochs on the accelerator", 1..4);
    let (_, mut run) = run_on_cpu(&s, first);
    let ledger = Ledger::new();
    let stops = [
        (accelerator(&s).with_ledger(&ledger), second),
        (
            Placement::sim(s.pick("other device", 8..16)).with_ledger(&ledger),
            8 - first - second,
        ),
    ];
    for (to, epochs) in stops {
        ledger.clear();
        run.to_device(&to)
            .unwrap_or_else(|e| panic!("Run::to_device({to}) failed: {e}"));
        s.observe(
            format!("copies of the move to {to}"),
            &Json(copies(ledger.transfers())),
        );
        let graph = host.to_device(&to).unwrap();
        for k in 0..epochs {
            ledger.clear();
            run.epoch(&graph).unwrap_or_else(|e| {
                panic!("after moving the run to {to}, the next epoch failed: {e}")
            });
            if k == 0 {
                // Everything the run needs came with the move: the epoch after it rebuilds
                // nothing (a cache cleared instead of moved is recomputed here, and uploads the
                // normalisation's self-loops). Only the kernels' index of each cached graph
                // (`edge_index (CSR)`) is built on first use on a device.
                let uploaded = copies(
                    ledger
                        .transfers()
                        .into_iter()
                        .filter(|t| t.to == to.to_string())
                        .collect(),
                );
                s.observe(
                    format!("copies to {to} in the epoch after the move"),
                    &Json(&uploaded),
                );
                let rebuilt: Vec<&str> = uploaded
                    .iter()
                    .map(|(what, ..)| what.as_str())
                    .filter(|what| !what.ends_with("(CSR)"))
                    .collect();
                assert!(
                    rebuilt.is_empty(),
                    "in the first epoch after moving to {to}, the run rebuilt and copied {rebuilt:?} to {to}: the cached normalisation should move with the model (keep the cache: move it rather than clearing it)"
                );
            }
        }
    }
    s.observe_within(
        "losses",
        &run.losses,
        Tolerance {
            abs: 1e-6,
            rel: 1e-5,
        },
    );
    assert_eq!(
        run.losses, expected,
        "a run moved between epochs should give exactly the losses of a run that never moved"
    );
}
