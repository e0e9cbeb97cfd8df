//! Parity with PyTorch Geometric 2.8.1: every fixture in `tests/fixtures/pyg` (see its README)
//! is loaded by its PyG parameter names and must reproduce PyG's outputs to 1e-5.

use crate::common;

use common::{fixtures_dir, max_abs_diff, shared_planetoid_dir};
use std::collections::HashMap;
use workbook::candle_core::{Device, Tensor};
use workbook::{datasets, tensor_file, EdgeIndex, Model, ModelConfig};

const TOL: f32 = 1e-5;

fn single_layer_fixtures() -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(fixtures_dir())
        .unwrap()
        .filter_map(|e| {
            let name = e.unwrap().file_name().into_string().unwrap();
            let stem = name.strip_suffix(".safetensors")?.to_string();
            (stem.starts_with("gcn_") || stem.starts_with("gatv2_")).then_some(stem)
        })
        .collect();
    names.sort();
    names
}

fn run_single_layer(name: &str) {
    let dev = Device::Cpu;
    let file =
        tensor_file::read(&fixtures_dir().join(format!("{name}.safetensors")), &dev).unwrap();
    let meta = &file.metadata;
    assert_eq!(meta["format"], "pyg-fixture/1");
    let mut config: serde_json::Value = serde_json::from_str(&meta["config"]).unwrap();
    config["layer"] = meta["layer"].clone().into();
    let config = ModelConfig::from_json(&config.to_string()).unwrap();
    let params: HashMap<String, Tensor> = file
        .tensors
        .iter()
        .filter_map(|(k, v)| Some((k.strip_prefix("params.")?.to_string(), v.clone())))
        .collect();
    let model = Model::from_tensors(config, &params, &dev).unwrap();
    let x = &file.tensors["x"];
    let ei = EdgeIndex::from_tensor(&file.tensors["edge_index"], x.dim(0).unwrap()).unwrap();
    let out = model
        .forward(x, &ei, file.tensors.get("edge_weight"))
        .unwrap();
    let diff = max_abs_diff(&out.logits, &file.tensors["expected.out"]);
    assert!(diff < TOL, "{name}: output differs from PyG by {diff}");
    if let Some(alpha) = file.tensors.get("expected.alpha") {
        let (_, att) = &out.attention[0];
        let expected_ei = file.tensors["expected.alpha_edge_index"]
            .to_vec2::<i64>()
            .unwrap();
        let ours = att
            .edge_index
            .to_tensor(&dev)
            .unwrap()
            .to_vec2::<i64>()
            .unwrap();
        assert_eq!(
            ours, expected_ei,
            "{name}: attention edges differ from PyG's"
        );
        let diff = max_abs_diff(&att.weights, alpha);
        assert!(diff < TOL, "{name}: attention differs from PyG by {diff}");
    }
    println!("{name}: matches PyG");
}

#[test]
fn every_single_layer_fixture_matches_pyg() {
    let names = single_layer_fixtures();
    assert!(
        names.len() >= 4,
        "expected the four single-layer fixtures, found {names:?}"
    );
    for name in names {
        run_single_layer(&name);
    }
}

fn trained_config(model: &str, features: usize, classes: usize) -> ModelConfig {
    match model {
        "gcn" => ModelConfig::gcn(features, 16, classes),
        "gatv2" => ModelConfig::gatv2(features, 8, 8, classes),
        other => panic!("unknown fixture model {other}"),
    }
}

fn check_trained(dataset: &str, model: &str, graph: &workbook::Graph) {
    let dev = Device::Cpu;
    let path = fixtures_dir().join(format!("{dataset}_{model}_trained.safetensors"));
    let file = tensor_file::read(&path, &dev).unwrap();
    assert_eq!(file.metadata["model"], model);
    let config = trained_config(model, graph.num_features(), graph.num_classes());
    let model_ = Model::from_tensors(config, &file.tensors, &dev).unwrap();
    let out = model_.forward(graph.x(), graph.edge_index(), None).unwrap();
    let diff = max_abs_diff(&out.logits, &file.tensors["expected.logits"]);
    assert!(
        diff < TOL,
        "{dataset} {model}: logits differ from PyG by {diff}"
    );
    let [_, _, test] = workbook::train::trainer::accuracies(&out.logits, graph).unwrap();
    let expected: f32 = file.metadata["test_accuracy"].parse().unwrap();
    assert!(
        (test - expected).abs() < 1e-6,
        "{dataset} {model}: test accuracy {test} vs PyG's {expected}"
    );
    println!("{dataset} {model}: logits within {diff:e} of PyG, test accuracy {test}");
}

#[test]
fn trained_cora_models_reproduce_pyg_logits() {
    let cora = datasets::load(
        "cora",
        Some(&std::env::temp_dir().join("no-such-dir")),
        &Device::Cpu,
    )
    .unwrap();
    check_trained("cora", "gcn", &cora);
    check_trained("cora", "gatv2", &cora);
}

#[test]
fn trained_citeseer_models_reproduce_pyg_logits() {
    let Some(dir) = shared_planetoid_dir("trained_citeseer_models_reproduce_pyg_logits") else {
        return;
    };
    let citeseer = datasets::load("citeseer", Some(&dir), &Device::Cpu).unwrap();
    check_trained("citeseer", "gcn", &citeseer);
    check_trained("citeseer", "gatv2", &citeseer);
}
