//! Graded tests for exercise 06-3 (points in exercise.toml). Do not edit: the grader checks this
//! file against its checksum.
//!
//! Each test is a scenario (the `scenario` crate): it records what it observed, and a teacher's
//! grader compares that with the reference solution's. The grading run's challenge picks the
//! simulated devices (how many, their numbers), the model's size and seed, which replica drifts
//! and where, and the bad example's width, so the files, copies and errors cannot be written
//! down in advance. The tests run on simulated devices in every build (two GPUs are rare).

use super::serving_export::export_for_serving;
use scenario::{Scenario, Tolerance};
use std::collections::HashMap;
use workbook::datasets::{self, CsbmConfig};
use workbook::export::onnx;
use workbook::ledger::Ledger;
use workbook::loader::{Batch, LoaderConfig, NeighborLoader};
use workbook::module::Module;
use workbook::parallel::DataParallel;
use workbook::placement::{bytes_of, Placement};
use workbook::train::TrainConfig;
use workbook::{Graph, Model, ModelConfig};

fn cora() -> Graph {
    datasets::load("cora", None, Placement::cpu()).expect("loading Cora")
}

/// A GCN (hidden size and seed the challenge's) trained for three data-parallel steps on Cora
/// over 2 to 4 simulated devices numbered from one the challenge picks (the ledger attached to
/// all), and the host graph.
fn trained(s: &Scenario, ledger: &Ledger) -> (DataParallel, Graph) {
    let g = cora();
    let first = s.pick("first device", 1..50);
    let n = s.pick("devices", 2..5);
    let devices: Vec<Placement> = (first..first + n)
        .map(|k| Placement::sim(k).with_ledger(ledger))
        .collect();
    let config = ModelConfig::gcn(g.num_features(), s.pick("hidden", 4..40), g.num_classes());
    let (model, _) = Model::init(config, s.seed("model"), Placement::cpu()).unwrap();
    let mut dp = DataParallel::new(&model, &devices, &TrainConfig::gcn()).unwrap();
    let loader = NeighborLoader::new(&g, LoaderConfig::new(&[5, 5], 32)).unwrap();
    let batches: Vec<Batch> = loader
        .batches(1)
        .take(3 * n)
        .collect::<Result<_, _>>()
        .unwrap();
    for some in batches.chunks(n) {
        dp.step(&dp.scatter(some).unwrap()).unwrap();
    }
    assert!(dp.check_in_sync().unwrap().in_sync);
    (dp, g)
}

/// The first replica's parameters, by name, read to the host.
fn parameters(dp: &DataParallel) -> Vec<(String, Vec<f32>)> {
    dp.module()
        .named_parameters()
        .into_iter()
        .map(|(n, t)| (n, t.flatten_all().unwrap().to_vec1::<f32>().unwrap()))
        .collect()
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

#[test]
fn the_file_loads_with_the_trained_parameters() {
    let s = scenario::start();
    let ledger = Ledger::new();
    let (dp, g) = trained(&s, &ledger);
    let expected = parameters(&dp);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("cora_gcn.onnx");
    export_for_serving(dp, &g, &path).unwrap_or_else(|e| panic!("the export failed: {e}"));
    let proto = onnx::read(&path).unwrap_or_else(|e| panic!("the file does not load: {e}"));
    let graph = proto.graph.expect("an ONNX graph");
    let stored: HashMap<String, Vec<f32>> = graph
        .initializer
        .iter()
        .map(|t| {
            let v = t
                .raw_data
                .chunks_exact(4)
                .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
                .collect();
            (t.name.clone(), v)
        })
        .collect();
    let mut names: Vec<&String> = stored.keys().collect();
    names.sort();
    // one record: the names are the same under every challenge, the trained values (digests)
    // are the challenge's
    let digests: Vec<(&str, Vec<f64>)> = expected
        .iter()
        .filter_map(|(name, _)| stored.get(name).map(|got| (name.as_str(), digest(got))))
        .collect();
    s.observe_within(
        "initializers, and the digest of each the model has",
        &(
            names.iter().map(|n| n.as_str()).collect::<Vec<_>>(),
            digests,
        ),
        SAME_DIGEST,
    );
    for (name, values) in expected {
        assert!(
            !name.starts_with("module."),
            "'{name}': the plain model's names"
        );
        let got = stored.get(&name).unwrap_or_else(|| {
            panic!(
                "the file has no initializer '{name}' (it has {:?})",
                stored.keys().collect::<Vec<_>>()
            )
        });
        assert!(
            *got == values,
            "'{name}' in the file differs from the trained first replica's"
        );
    }
}

#[test]
fn the_exported_model_is_on_the_cpu_and_the_move_is_in_the_ledger() {
    let s = scenario::start();
    let ledger = Ledger::new();
    let (dp, g) = trained(&s, &ledger);
    let first = dp.devices()[0].to_string();
    let params: Vec<(String, u64)> = dp
        .module()
        .named_parameters()
        .iter()
        .map(|(n, t)| (n.clone(), bytes_of(t)))
        .collect();
    let dir = tempfile::tempdir().unwrap();
    ledger.clear();
    let model = export_for_serving(dp, &g, &dir.path().join("m.onnx"))
        .unwrap_or_else(|e| panic!("the export failed: {e}"));
    let placed: Vec<(String, String)> = model
        .tensor_placements()
        .into_iter()
        .map(|(n, _, p)| (n, p.to_string()))
        .collect();
    // the model's copies (the sync check's read-backs are the other test's business)
    let mut moved: Vec<(String, String, String, u64)> = ledger
        .transfers()
        .iter()
        .filter(|t| !t.what.starts_with("sync check"))
        .map(|t| (t.what.clone(), t.from.clone(), t.to.clone(), t.bytes))
        .collect();
    moved.sort();
    // one record: the exported model's tensors (all on the cpu) are the same under every
    // challenge, the copies (from the challenge's first device) are not
    s.observe(
        "the exported model's tensors, and the copies of the export",
        &(&placed, &moved),
    );
    for (name, kind, at) in model.tensor_placements() {
        assert!(
            at.is_cpu(),
            "the serving host has no accelerator, but the exported model's {} '{name}' is on {at}",
            kind.as_str()
        );
    }
    let export = ledger.transfers();
    for (name, bytes) in params {
        let n = export
            .iter()
            .filter(|t| t.what == name && t.from == first && t.to == "cpu" && t.bytes == bytes)
            .count();
        assert_eq!(
            n,
            1,
            "'{name}' ({bytes} bytes) should be copied from {first} to the cpu once, not {n} times:\n{}",
            ledger.table()
        );
    }
}

#[test]
fn replicas_out_of_sync_are_refused_and_nothing_is_written() {
    let s = scenario::start();
    let ledger = Ledger::new();
    let (dp, g) = trained(&s, &ledger);
    // A replica drifts: the first replica is no longer *the* trained model.
    let k = s.pick("drifting replica", 1..dp.replicas().len());
    let mut vars = dp.replicas()[k].vars().unwrap();
    let (name, var) = vars.remove(s.pick("drifting parameter", 0..vars.len()));
    var.set(&(var.as_tensor() + 1e-3).unwrap()).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("drifted.onnx");
    let result = export_for_serving(dp, &g, &path);
    let msg = result
        .as_ref()
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
    let replica = format!("replica {k}");
    // one record: written or not is the same under every challenge
    s.observe(
        format!(
            "{replica}'s {name} drifted: refused, naming the replica and the parameter; written"
        ),
        &(
            result.is_err(),
            msg.contains(&replica),
            msg.contains(&name),
            path.exists(),
        ),
    );
    let err = result.expect_err("replicas out of sync should be an error, not an export");
    assert!(
        msg.contains(&name) && msg.contains(&replica),
        "the error should name the replica and the parameter that differ ({replica}, '{name}'): {err}"
    );
    assert!(!path.exists(), "nothing should be written: {msg}");
}

#[test]
fn a_bad_example_fails_the_pre_flight_and_nothing_is_written() {
    let s = scenario::start();
    let ledger = Ledger::new();
    let (dp, _) = trained(&s, &ledger);
    // A synthetic graph of the challenge's width; the model takes Cora's 1433 features.
    let mut config = CsbmConfig::new(s.pick("example nodes", 30..300));
    config.features = s.pick("example features", 2..1000);
    config.seed = s.seed("example");
    let features = config.features;
    let example = datasets::csbm(&config, Placement::cpu()).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bad_example.onnx");
    let result = export_for_serving(dp, &example, &path);
    let msg = result
        .as_ref()
        .err()
        .map(|e| e.to_string())
        .unwrap_or_default();
    let numbers: Vec<&str> = msg
        .split(|c: char| !c.is_ascii_digit())
        .filter(|w| !w.is_empty())
        .collect();
    // one record: written or not is the same under every challenge
    s.observe(
        format!("an example of {features} features: refused by the pre-flight, naming the width; written"),
        &(
            result.is_err(),
            msg.contains("pre-flight"),
            numbers.contains(&features.to_string().as_str()),
            path.exists(),
        ),
    );
    let err = result
        .expect_err("an example with the wrong number of features should fail the pre-flight");
    assert!(
        msg.contains("pre-flight") && numbers.contains(&features.to_string().as_str()),
        "the pre-flight should report the example's {features} features: {err}"
    );
    assert!(!path.exists(), "nothing should be written: {msg}");
}
