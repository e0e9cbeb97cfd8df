//! Graded tests for exercise 06-3 (points in exercise.toml). Do not edit: the grader checks this
//! file against its checksum.

use super::serving_export::export_for_serving;
use std::collections::HashMap;
use workbook::datasets;
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

/// A GCN trained for three data-parallel steps on Cora over sim:1 and sim:2 (the ledger
/// attached to both), and the host graph.
fn trained(ledger: &Ledger) -> (DataParallel, Graph) {
    let g = cora();
    let devices = [
        Placement::sim(1).with_ledger(ledger),
        Placement::sim(2).with_ledger(ledger),
    ];
    let config = ModelConfig::gcn(g.num_features(), 16, g.num_classes());
    let (model, _) = Model::init(config, 0, Placement::cpu()).unwrap();
    let mut dp = DataParallel::new(&model, &devices, &TrainConfig::gcn()).unwrap();
    let loader = NeighborLoader::new(&g, LoaderConfig::new(&[5, 5], 32)).unwrap();
    let batches: Vec<Batch> = loader.batches(1).take(6).collect::<Result<_, _>>().unwrap();
    for pair in batches.chunks(2) {
        dp.step(&dp.scatter(pair).unwrap()).unwrap();
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

#[test]
fn the_file_loads_with_the_trained_parameters() {
    let ledger = Ledger::new();
    let (dp, g) = trained(&ledger);
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
    let ledger = Ledger::new();
    let (dp, g) = trained(&ledger);
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
            .filter(|t| t.what == name && t.from == "sim:1" && t.to == "cpu" && t.bytes == bytes)
            .count();
        assert_eq!(
            n,
            1,
            "'{name}' ({bytes} bytes) should be copied from sim:1 to the cpu once, not {n} times:\n{}",
            ledger.table()
        );
    }
}

#[test]
fn replicas_out_of_sync_are_refused_and_nothing_is_written() {
    let ledger = Ledger::new();
    let (dp, g) = trained(&ledger);
    // Replica 1 drifts: the first replica is no longer *the* trained model.
    let (name, var) = dp.replicas()[1].vars().unwrap().remove(1);
    var.set(&(var.as_tensor() + 1e-3).unwrap()).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("drifted.onnx");
    let err = export_for_serving(dp, &g, &path)
        .expect_err("replicas out of sync should be an error, not an export");
    let msg = err.to_string();
    assert!(
        msg.contains(&name) && msg.contains("replica 1"),
        "the error should name the replica and the parameter that differ (replica 1, '{name}'): {msg}"
    );
    assert!(!path.exists(), "nothing should be written: {msg}");
}

#[test]
fn a_bad_example_fails_the_pre_flight_and_nothing_is_written() {
    let ledger = Ledger::new();
    let (dp, _) = trained(&ledger);
    // Karate has 34 features; the model takes Cora's 1433.
    let karate = datasets::karate(Placement::cpu()).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bad_example.onnx");
    let err = export_for_serving(dp, &karate, &path)
        .expect_err("an example with the wrong number of features should fail the pre-flight");
    let msg = err.to_string();
    assert!(
        msg.contains("pre-flight") && msg.contains("34"),
        "the pre-flight should report the example's 34 features: {msg}"
    );
    assert!(!path.exists(), "nothing should be written: {msg}");
}
