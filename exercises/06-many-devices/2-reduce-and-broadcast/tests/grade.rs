//! Graded tests for exercise 06-2 (points in exercise.toml). Do not edit: the grader checks this
//! file against its checksum.
//!
//! Each test is a scenario (the `scenario` crate): it records what it observed, and a teacher's
//! grader compares that with the reference solution's. The grading run's challenge picks the
//! simulated devices' numbers, the root, the tensors' sizes and values and the models' seeds, so
//! the sums, copies and losses cannot be written down in advance. The tests run on simulated
//! devices in every build (two GPUs are rare); every check, copy and ledger entry is the same on
//! `sim:N` as on `cuda:N`, except one: a tensor made on a device written in the code (a sum
//! started with `Tensor::zeros(.., &Device::Cpu)`) is stopped by candle on a GPU, while a
//! simulated device keeps its tensors in host memory and cannot tell. For that the tests use the
//! code's witness (`workbook::fixed_device`), which reads `src/collective.rs` for devices
//! written in it.

use super::collective::CopyCollective;
use scenario::{Json, Scenario, Tolerance};
use std::sync::Arc;
use workbook::candle_core::{Device, Tensor};
use workbook::datasets;
use workbook::ledger::Ledger;
use workbook::loader::{Batch, LoaderConfig, NeighborLoader};
use workbook::parallel::{Collective, DataParallel, STEP_MARK};
use workbook::placement::{bytes_of, Placement};
use workbook::train::TrainConfig;
use workbook::{fixed_device, Graph, Model, ModelConfig};

/// The file under test, from whichever tree (exercises/ or solutions/) is graded.
const SOURCE: &str = include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/src/collective.rs"));

fn cora() -> Graph {
    datasets::load("cora", None, Placement::cpu()).expect("loading Cora")
}

/// `n` simulated devices with consecutive numbers from one the challenge picks (1 to 49).
fn sims(s: &Scenario, n: usize, ledger: &Ledger) -> Vec<Placement> {
    let first = s.pick("first device", 1..50);
    (first..first + n)
        .map(|k| Placement::sim(k).with_ledger(ledger))
        .collect()
}

/// A tensor of `len` values drawn from the challenge (multiples of 1/8 in -64..64, so that sums
/// are exact in float32 whatever the order).
fn drawn(s: &Scenario, label: &str, len: usize) -> Tensor {
    let values: Vec<f32> = (0..len)
        .map(|i| (s.pick(&format!("{label}[{i}]"), 0..1024) as f32 - 512.0) / 8.0)
        .collect();
    Tensor::new(values.as_slice(), &Device::Cpu).unwrap()
}

fn values(t: &Tensor) -> Vec<f32> {
    t.flatten_all().unwrap().to_vec1::<f32>().unwrap()
}

/// (from, to, bytes, what) of every transfer recorded so far, sorted.
fn copies(ledger: &Ledger) -> Vec<(String, String, u64, String)> {
    let mut all: Vec<_> = ledger
        .transfers()
        .into_iter()
        .map(|t| (t.from, t.to, t.bytes, t.what))
        .collect();
    all.sort();
    all
}

fn copy(from: &Placement, to: &Placement, bytes: u64, what: &str) -> (String, String, u64, String) {
    (from.to_string(), to.to_string(), bytes, what.into())
}

/// Fails with the device mismatch a GPU would raise if `function` makes a tensor on a device
/// written in the code.
fn assert_no_fixed_device(function: &str, runs_on: &Placement) {
    let others: Vec<&str> = ["reduce_sum", "broadcast"]
        .into_iter()
        .filter(|f| *f != function)
        .collect();
    let found: Vec<_> = fixed_device::mismatching(SOURCE, &others, runs_on)
        .unwrap_or_default()
        .into_iter()
        .filter(|f| f.function.as_deref() == Some(function))
        .collect();
    if let Some(first) = found.first() {
        let err = fixed_device::check(
            "src/collective.rs",
            SOURCE,
            &others,
            &format!("the {function}'s inputs"),
            runs_on,
        )
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
        panic!(
            "{function} makes a tensor on a device written in the code ({} at line {}): on {runs_on} it computes the same numbers, on a GPU it stops:\n{err}",
            first.written, first.line
        );
    }
}

#[test]
fn reduce_sums_every_part_onto_the_root() {
    let s = scenario::start();
    let ledger = Ledger::new();
    let d = sims(&s, 3, &ledger);
    let len = s.pick("length", 2..50);
    let parts: Vec<Tensor> = (0..3)
        .map(|k| drawn(&s, &format!("part {k}"), len))
        .collect();
    // The root is the challenge's: the others send their parts to it.
    let r = s.pick("root", 0..3);
    let what = format!("grad[w{}]", s.pick("name", 0..100));
    let sum = CopyCollective
        .reduce_sum(
            &[(&parts[0], &d[0]), (&parts[1], &d[1]), (&parts[2], &d[2])],
            &d[r],
            &what,
        )
        .unwrap_or_else(|e| panic!("reduce_sum failed: {e}"));
    s.observe("the sum", &sum);
    s.observe("the copies", &copies(&ledger));
    let expected: Vec<f32> = (0..len)
        .map(|i| parts.iter().map(|p| values(p)[i]).sum())
        .collect();
    assert_eq!(
        values(&sum),
        expected,
        "the reduce adds the parts (it does not average them)"
    );
    let bytes = 4 * len as u64;
    let mut want: Vec<_> = (0..3)
        .filter(|&k| k != r)
        .map(|k| copy(&d[k], &d[r], bytes, &format!("reduce {what}")))
        .collect();
    want.sort();
    assert_eq!(
        copies(&ledger),
        want,
        "each part not on the root ({}) is copied there once, straight from its device, recorded as 'reduce {what}'; the root's own part is not copied:\n{}",
        d[r],
        ledger.table()
    );
    ledger.clear();
    let alone = CopyCollective
        .reduce_sum(&[(&parts[0], &d[0])], &d[0], &what)
        .unwrap_or_else(|e| panic!("reduce_sum of one part failed: {e}"));
    let alone_copies = copies(&ledger);
    let err = CopyCollective.reduce_sum(&[], &d[0], &what);
    let named = err.as_ref().err().map(|e| e.to_string().contains(&what));
    // one record: the copies for one part (none) and the error for no parts are the same under
    // every challenge, the part is the challenge's
    s.observe(
        "the sum of one part, the copies for it, and for no parts an error naming what was reduced",
        &(&alone, &alone_copies, named),
    );
    assert_eq!(
        values(&alone),
        values(&parts[0]),
        "one part on the root is the sum"
    );
    assert!(
        ledger.transfers().is_empty(),
        "a part already on the root is not copied:\n{}",
        ledger.table()
    );
    assert!(
        named == Some(true),
        "reducing no parts should be an error naming what was reduced ({what}); got {:?}",
        err.map(|t| t.dims().to_vec())
    );
    // Whether the file holds a device written in the code is checked by the judge itself on the submitted file
    // (exercise.toml's [[test.source]]), never recorded: a value that is the same under every
    // challenge could be written into the log by anything in this process.
    assert_no_fixed_device("reduce_sum", &d[r]);
}

#[test]
fn broadcast_copies_the_root_to_every_device() {
    let s = scenario::start();
    let ledger = Ledger::new();
    let d = sims(&s, 3, &ledger);
    let len = s.pick("length", 2..50);
    let w = drawn(&s, "parameter", len);
    let r = s.pick("root", 0..3);
    let what = format!("conv{}.lin.weight", s.pick("layer", 1..100));
    let out = CopyCollective
        .broadcast(&w, &d[r], &d, &what)
        .unwrap_or_else(|e| panic!("broadcast failed: {e}"));
    s.observe(
        "the copies' values",
        &out.iter().map(values).collect::<Vec<_>>(),
    );
    s.observe("the ledger", &copies(&ledger));
    assert_eq!(out.len(), 3, "one tensor per device of `to`");
    for (k, o) in out.iter().enumerate() {
        assert_eq!(values(o), values(&w), "the copy for {}", d[k]);
    }
    let mut want: Vec<_> = (0..3)
        .filter(|&k| k != r)
        .map(|k| copy(&d[r], &d[k], 4 * len as u64, &format!("broadcast {what}")))
        .collect();
    want.sort();
    assert_eq!(
        copies(&ledger),
        want,
        "the root's tensor is copied to every other device, recorded as 'broadcast {what}'; the root keeps its own:\n{}",
        ledger.table()
    );
    // Whether the file holds a device written in the code is checked by the judge itself on the submitted file
    // (exercise.toml's [[test.source]]), never recorded: a value that is the same under every
    // challenge could be written into the log by anything in this process.
    assert_no_fixed_device("broadcast", &d[r]);
}

/// A large tensor's digest for the judge (a test's log is capped): the sum, the sum of
/// magnitudes and 64 evenly spaced values, in float64; a NaN anywhere makes the sums NaN.
fn digest(values: &[f32]) -> Vec<f64> {
    let step = (values.len() / 64).max(1);
    let mut out = vec![
        values.iter().map(|&v| f64::from(v)).sum(),
        values.iter().map(|&v| f64::from(v).abs()).sum(),
    ];
    out.extend(values.iter().step_by(step).take(64).map(|&v| f64::from(v)));
    out
}

/// How close two digests of the same values computed in another order are.
const SAME_DIGEST: Tolerance = Tolerance {
    abs: 1e-5,
    rel: 1e-5,
};

/// `steps` data-parallel steps on Cora over `n` devices, with `collective` (or the library's
/// `HostCollective`), returning each step's loss and the wrapper.
fn train(
    s: &Scenario,
    n: usize,
    collective: Option<Arc<dyn Collective>>,
    steps: usize,
) -> (Vec<f32>, DataParallel) {
    let g = cora();
    let config = ModelConfig::gcn(g.num_features(), 16, g.num_classes());
    let (model, _) = Model::init(config, s.seed("model"), Placement::cpu()).unwrap();
    let devices = sims(s, n, &Ledger::new());
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

/// The largest |a - b|, NaN as soon as one difference is NaN (f32::max would skip it).
fn max_diff(a: &[f32], b: &[f32]) -> f32 {
    a.iter()
        .zip(b)
        .map(|(x, y)| (x - y).abs())
        .fold(0f32, |m, d| {
            if d.is_nan() || m.is_nan() {
                f32::NAN
            } else {
                m.max(d)
            }
        })
}

#[test]
fn training_with_it_matches_the_host_collective() {
    let s = scenario::start();
    for n in [2, 3] {
        let (ours, dp) = train(&s, n, Some(Arc::new(CopyCollective)), 6);
        let (theirs, reference) = train(&s, n, None, 6);
        let sync = dp.check_in_sync().unwrap();
        // one record: in sync is the same under every challenge, the losses are the challenge's
        s.observe_within(
            format!("{n} devices: the losses, and in sync"),
            &(&ours, sync.in_sync),
            Tolerance {
                abs: 1e-6,
                rel: 1e-5,
            },
        );
        let diff = max_diff(&ours, &theirs);
        assert!(
            diff <= 1e-6,
            "{n} devices: the losses with CopyCollective differ from HostCollective's by {diff}: {ours:?} against {theirs:?}"
        );
        assert!(
            sync.in_sync,
            "{n} devices: the replicas differ after training: {:?}",
            sync.differences
        );
        let theirs: std::collections::HashMap<_, _> =
            reference.module().named_parameters().into_iter().collect();
        for (name, p) in dp.module().named_parameters() {
            s.observe_within(
                format!("{n} devices: {name} after 6 steps"),
                &digest(&values(&p)),
                SAME_DIGEST,
            );
            let diff = max_diff(&values(&p), &values(&theirs[&name]));
            assert!(
                diff <= 1e-5,
                "{n} devices: after 6 steps '{name}' differs from HostCollective's by {diff}"
            );
        }
    }
}

#[test]
fn each_step_moves_the_parameters_once_per_other_replica() {
    let s = scenario::start();
    let g = cora();
    let ledger = Ledger::new();
    let d = sims(&s, 3, &ledger);
    let root = d[0].to_string();
    let config = ModelConfig::gcn(g.num_features(), s.pick("hidden", 4..40), g.num_classes());
    let (model, _) = Model::init(config, s.seed("model"), Placement::cpu()).unwrap();
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
    let mut per_step = Vec::new();
    for three in batches.chunks(3) {
        let on = dp.scatter(three).unwrap();
        ledger.clear();
        dp.step(&on)
            .unwrap_or_else(|e| panic!("a data-parallel step failed: {e}"));
        // what the step moved after it began (the library marks where)
        let mark = ledger
            .marks()
            .iter()
            .find(|m| m.label == STEP_MARK)
            .map(|m| m.after);
        let step: Vec<_> = ledger.transfers()[mark.unwrap_or(0)..].to_vec();
        let sum = |prefix: &str| -> u64 {
            step.iter()
                .filter(|t| t.what.starts_with(prefix))
                .map(|t| t.bytes)
                .sum()
        };
        // the collective's copies (GCN's forward uploads the structure it derives from each
        // batch's edges, its own business)
        let mut directions: Vec<(String, String, String)> = step
            .iter()
            .filter(|t| t.what.starts_with("reduce ") || t.what.starts_with("broadcast "))
            .map(|t| {
                let kind = t.what.split(' ').next().unwrap_or("").to_string();
                (kind, t.from.clone(), t.to.clone())
            })
            .collect();
        directions.sort();
        directions.dedup();
        per_step.push((sum("reduce grad["), sum("broadcast "), directions));
    }
    s.observe(
        "per step: reduce bytes, broadcast bytes, directions",
        &Json(&per_step),
    );
    for (k, (reduce, broadcast, directions)) in per_step.iter().enumerate() {
        assert_eq!(
            *reduce,
            param_bytes * 2,
            "step {k}: the two other replicas each send every gradient ({param_bytes} bytes) to {root} once:\n{}",
            ledger.table()
        );
        assert_eq!(
            *broadcast,
            param_bytes * 2,
            "step {k}: the new parameters ({param_bytes} bytes) go from {root} to each of the two other devices once:\n{}",
            ledger.table()
        );
        for (kind, from, to) in directions {
            match kind.as_str() {
                "reduce" => assert_eq!(to, &root, "gradients are reduced onto {root}, straight from their device: {kind} {from} -> {to}"),
                "broadcast" => assert_eq!(from, &root, "parameters are broadcast from {root}: {kind} {from} -> {to}"),
                _ => unreachable!("only the collective's copies are listed"),
            }
        }
    }
}
