//! Graded tests for exercise 06-2 (points in exercise.toml). Do not edit: the grader checks this
//! file against its checksum.

use super::collective::CopyCollective;
use std::sync::Arc;
use workbook::candle_core::{Device, Tensor};
use workbook::datasets;
use workbook::ledger::Ledger;
use workbook::loader::{Batch, LoaderConfig, NeighborLoader};
use workbook::parallel::{Collective, DataParallel};
use workbook::placement::{bytes_of, Placement};
use workbook::train::TrainConfig;
use workbook::{Graph, Model, ModelConfig};

fn cora() -> Graph {
    datasets::load("cora", None, Placement::cpu()).expect("loading Cora")
}

fn sims(n: usize, ledger: &Ledger) -> Vec<Placement> {
    (1..=n)
        .map(|k| Placement::sim(k).with_ledger(ledger))
        .collect()
}

fn t(values: &[f32]) -> Tensor {
    Tensor::new(values, &Device::Cpu).unwrap()
}

fn values(t: &Tensor) -> Vec<f32> {
    t.flatten_all().unwrap().to_vec1::<f32>().unwrap()
}

/// (from, to, bytes, what) of every transfer recorded so far.
fn copies(ledger: &Ledger) -> Vec<(String, String, u64, String)> {
    ledger
        .transfers()
        .into_iter()
        .map(|t| (t.from, t.to, t.bytes, t.what))
        .collect()
}

fn copy(from: &str, to: &str, bytes: u64, what: &str) -> (String, String, u64, String) {
    (from.into(), to.into(), bytes, what.into())
}

#[test]
fn reduce_sums_every_part_onto_the_root() {
    let ledger = Ledger::new();
    let d = sims(3, &ledger);
    let (a, b, c) = (t(&[1., 2.]), t(&[10., 20.]), t(&[100., 200.]));
    // The root is the second device: the others send their parts to it.
    let sum = CopyCollective
        .reduce_sum(&[(&a, &d[0]), (&b, &d[1]), (&c, &d[2])], &d[1], "grad[w]")
        .unwrap_or_else(|e| panic!("reduce_sum failed: {e}"));
    assert_eq!(
        values(&sum),
        [111., 222.],
        "the reduce adds the parts (it does not average them)"
    );
    assert_eq!(
        copies(&ledger),
        [
            copy("sim:1", "sim:2", 8, "reduce grad[w]"),
            copy("sim:3", "sim:2", 8, "reduce grad[w]"),
        ],
        "each part not on the root is copied there once, recorded as 'reduce grad[w]'; the root's own part is not copied:\n{}",
        ledger.table()
    );
    ledger.clear();
    let alone = CopyCollective
        .reduce_sum(&[(&a, &d[0])], &d[0], "grad[w]")
        .unwrap_or_else(|e| panic!("reduce_sum of one part failed: {e}"));
    assert_eq!(values(&alone), [1., 2.], "one part on the root is the sum");
    assert!(
        ledger.transfers().is_empty(),
        "a part already on the root is not copied:\n{}",
        ledger.table()
    );
    let err = CopyCollective
        .reduce_sum(&[], &d[0], "grad[w]")
        .expect_err("reducing no parts should be an error");
    assert!(
        err.to_string().contains("grad[w]"),
        "the error for no parts should name what was reduced: {err}"
    );
}

#[test]
fn broadcast_copies_the_root_to_every_device() {
    let ledger = Ledger::new();
    let d = sims(3, &ledger);
    let w = t(&[0.5, -1.5, 2.0]);
    let out = CopyCollective
        .broadcast(&w, &d[0], &d, "conv1.lin.weight")
        .unwrap_or_else(|e| panic!("broadcast failed: {e}"));
    assert_eq!(out.len(), 3, "one tensor per device of `to`");
    for (k, o) in out.iter().enumerate() {
        assert_eq!(values(o), [0.5, -1.5, 2.0], "the copy for {}", d[k]);
    }
    assert_eq!(
        copies(&ledger),
        [
            copy("sim:1", "sim:2", 12, "broadcast conv1.lin.weight"),
            copy("sim:1", "sim:3", 12, "broadcast conv1.lin.weight"),
        ],
        "the root's tensor is copied to every other device, recorded as 'broadcast conv1.lin.weight'; the root keeps its own:\n{}",
        ledger.table()
    );
}

/// `steps` data-parallel steps on Cora over `n` devices, with `collective` (or the library's
/// `HostCollective`), returning each step's loss and the wrapper.
fn train(
    n: usize,
    collective: Option<Arc<dyn Collective>>,
    steps: usize,
) -> (Vec<f32>, DataParallel) {
    let g = cora();
    let config = ModelConfig::gcn(g.num_features(), 16, g.num_classes());
    let (model, _) = Model::init(config, 0, Placement::cpu()).unwrap();
    let devices: Vec<Placement> = (1..=n).map(Placement::sim).collect();
    let mut dp = DataParallel::new(&model, &devices, &TrainConfig::gcn()).unwrap();
    if let Some(c) = collective {
        dp = dp.with_collective(c);
    }
    let loader = NeighborLoader::new(&g, LoaderConfig::new(&[5, 5], 24)).unwrap();
    let batches: Vec<Batch> = loader
        .batches(1)
        .take(n * steps)
        .collect::<Result<_, _>>()
        .unwrap();
    let losses = batches
        .chunks(n)
        .map(|b| {
            dp.step(&dp.scatter(b).unwrap())
                .unwrap_or_else(|e| panic!("a data-parallel step failed: {e}"))
                .loss()
                .unwrap()
        })
        .collect();
    (losses, dp)
}

#[test]
fn training_with_it_matches_the_host_collective() {
    for n in [2, 3] {
        let (ours, dp) = train(n, Some(Arc::new(CopyCollective)), 6);
        let (theirs, reference) = train(n, None, 6);
        for (s, (a, b)) in ours.iter().zip(&theirs).enumerate() {
            assert!(
                (a - b).abs() <= 1e-6,
                "{n} devices, step {s}: loss {a} with CopyCollective, {b} with HostCollective"
            );
        }
        let sync = dp.check_in_sync().unwrap();
        assert!(
            sync.in_sync,
            "{n} devices: the replicas differ after training: {:?}",
            sync.differences
        );
        let theirs: std::collections::HashMap<_, _> =
            reference.module().named_parameters().into_iter().collect();
        for (name, p) in dp.module().named_parameters() {
            let diff = values(&p)
                .iter()
                .zip(values(&theirs[&name]))
                .map(|(a, b)| (a - b).abs())
                .fold(0f32, f32::max);
            assert!(
                diff <= 1e-5,
                "{n} devices: after 6 steps '{name}' differs from HostCollective's by {diff}"
            );
        }
    }
}

#[test]
fn each_step_moves_the_parameters_once_per_other_replica() {
    let g = cora();
    let ledger = Ledger::new();
    let d = sims(3, &ledger);
    let config = ModelConfig::gcn(g.num_features(), 16, g.num_classes());
    let (model, _) = Model::init(config, 0, Placement::cpu()).unwrap();
    let param_bytes: u64 = model
        .named_parameters()
        .iter()
        .map(|(_, t)| bytes_of(t))
        .sum();
    let mut dp = DataParallel::new(&model, &d, &TrainConfig::gcn())
        .unwrap()
        .with_collective(Arc::new(CopyCollective));
    let loader = NeighborLoader::new(&g, LoaderConfig::new(&[5, 5], 16)).unwrap();
    let batches: Vec<Batch> = loader.batches(1).take(6).collect::<Result<_, _>>().unwrap();
    for (s, three) in batches.chunks(3).enumerate() {
        let on = dp.scatter(three).unwrap();
        ledger.clear();
        dp.step(&on)
            .unwrap_or_else(|e| panic!("a data-parallel step failed: {e}"));
        let step = ledger.transfers();
        let sum = |prefix: &str| -> u64 {
            step.iter()
                .filter(|t| t.what.starts_with(prefix))
                .map(|t| t.bytes)
                .sum()
        };
        assert_eq!(
            sum("reduce grad["),
            param_bytes * 2,
            "step {s}: the two other replicas each send every gradient ({param_bytes} bytes) to sim:1 once:\n{}",
            ledger.table()
        );
        assert_eq!(
            sum("broadcast "),
            param_bytes * 2,
            "step {s}: the new parameters ({param_bytes} bytes) go from sim:1 to each of the two other devices once:\n{}",
            ledger.table()
        );
        for t in &step {
            if t.what.starts_with("reduce ") {
                assert_eq!(t.to, "sim:1", "gradients are reduced onto sim:1: {t:?}");
            }
            if t.what.starts_with("broadcast ") {
                assert_eq!(
                    t.from, "sim:1",
                    "parameters are broadcast from sim:1: {t:?}"
                );
            }
        }
    }
}
