//! Graded tests for exercise 02-1 (points in exercise.toml). Do not edit: the grader checks this
//! file against its checksum.

use super::move_everything::{cached_gcn, Run};
use workbook::candle_core::{Device, Tensor};
use workbook::device::accelerator;
use workbook::train::{TrainConfig, Trainer};
use workbook::{datasets, Graph, Placement};

fn recipe() -> TrainConfig {
    TrainConfig {
        epochs: 8,
        ..TrainConfig::gcn()
    }
}

/// A run on karate on the cpu, trained for `epochs` epochs (so the caches and Adam's state are
/// filled).
fn run_on_cpu(epochs: usize) -> (Graph, Run) {
    let graph = datasets::karate(Placement::cpu()).unwrap();
    let mut run = Run::new(&graph, &recipe()).unwrap();
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

#[test]
fn parameters_and_cached_buffers_move() {
    let gpu = accelerator().placement;
    let (graph, mut run) = run_on_cpu(2);
    run.to_device(&gpu)
        .unwrap_or_else(|e| panic!("Run::to_device({gpu}) failed: {e}"));
    for (name, at) in run.model.parameter_placements() {
        assert_eq!(
            at, &gpu,
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
    let buffers = run.model.buffer_placements();
    let names: Vec<&str> = buffers.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(
        names,
        ["conv1._cached_edge_index", "conv2._cached_edge_index"],
        "the cached normalisation of both layers should move with the model, not be dropped"
    );
    for (name, at) in &buffers {
        assert_eq!(
            *at, &gpu,
            "cached buffer '{name}' should be on {gpu} after the move, not {at} (PyTorch's module.to leaves it behind)"
        );
    }
    let graph = graph.to_device(&gpu).unwrap();
    run.epoch(&graph)
        .unwrap_or_else(|e| panic!("after moving the run to {gpu}, the next epoch failed: {e}"));
}

#[test]
fn optimizer_state_moves_with_the_model() {
    let gpu = accelerator().placement;
    let (_, mut run) = run_on_cpu(2);
    let before: Vec<(String, Vec<f32>, Vec<f32>)> = run
        .optimizer
        .state()
        .map(|(n, m, v)| (n.to_string(), host_values(m), host_values(v)))
        .collect();
    run.to_device(&gpu)
        .unwrap_or_else(|e| panic!("Run::to_device({gpu}) failed: {e}"));
    let opt = &run.optimizer;
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
        2,
        "the optimiser should keep its 2 steps: move it (Adam::to_model), do not build a new one"
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
    assert!(
        after == before,
        "exp_avg and exp_avg_sq should be copied unchanged (a new optimiser starts from zeros)"
    );
}

#[test]
fn training_continues_with_identical_losses() {
    // The reference: the library's trainer, never moved, 8 epochs on the cpu.
    let host = datasets::karate(Placement::cpu()).unwrap();
    let mut reference = Trainer::new(cached_gcn(34, 16, 4), &host, &recipe()).unwrap();
    let expected: Vec<f32> = (0..8)
        .map(|_| reference.epoch(&host).unwrap().loss)
        .collect();

    // 3 epochs on the cpu, 3 on sim:1, 2 on sim:2 (host-backed devices, so bit for bit).
    let (_, mut run) = run_on_cpu(3);
    for (to, epochs) in [(Placement::sim(1), 3), (Placement::sim(2), 2)] {
        run.to_device(&to)
            .unwrap_or_else(|e| panic!("Run::to_device({to}) failed: {e}"));
        let graph = host.to_device(&to).unwrap();
        for _ in 0..epochs {
            run.epoch(&graph).unwrap_or_else(|e| {
                panic!("after moving the run to {to}, the next epoch failed: {e}")
            });
        }
    }
    assert_eq!(
        run.losses, expected,
        "a run moved between epochs should give exactly the losses of a run that never moved"
    );
}
