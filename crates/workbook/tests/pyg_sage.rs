//! GraphSAGE against PyG (`tests/fixtures/pyg/sage`, see the README there): 8 PyG 2.8.1
//! `SAGEConv(8, 4, aggr="mean")` cases, every combination of `root_weight`, `normalize` and
//! `bias`. Each must match PyG's output to 1e-5 through the layer itself (built only through the
//! public trait), through a model built from PyG's constructor arguments, and exported to ONNX
//! in onnxruntime (`scripts/check_onnx.py`). `predict` runs the same files in
//! `crates/workbook-cli/tests/pyg_matrix.rs`. Every failing file is named.

use crate::common;

use common::{fixtures_dir, max_abs_diff};
use std::collections::HashMap;
use std::path::PathBuf;
use std::process::Command;
use workbook::candle_core::{DType, Device, Tensor};
use workbook::candle_nn::VarBuilder;
use workbook::export::onnx;
use workbook::layers::{SageConfig, SageConv};
use workbook::{
    checkpoint, datasets, tensor_file, EdgeIndex, GraphLayer, LayerInput, Model, ModelConfig,
    Placement,
};

const TOL: f32 = 1e-5;

fn sage_dir() -> PathBuf {
    fixtures_dir().join("sage")
}

fn cases() -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(sage_dir())
        .unwrap()
        .filter_map(|e| {
            let name = e.unwrap().file_name().into_string().unwrap();
            Some(name.strip_suffix(".safetensors")?.to_string())
        })
        .collect();
    names.sort();
    assert_eq!(names.len(), 8, "the sage fixtures are 8 files: {names:?}");
    names
}

struct Case {
    config_json: String,
    params: HashMap<String, Tensor>,
    tensors: HashMap<String, Tensor>,
    edge_index: EdgeIndex,
}

fn load(name: &str) -> Case {
    let file = tensor_file::read(
        &sage_dir().join(format!("{name}.safetensors")),
        &Device::Cpu,
    )
    .unwrap();
    assert_eq!(file.metadata["layer"], "SAGEConv");
    let mut config: serde_json::Value = serde_json::from_str(&file.metadata["config"]).unwrap();
    config["layer"] = "SAGEConv".into();
    let params = file
        .tensors
        .iter()
        .filter_map(|(k, v)| Some((k.strip_prefix("params.")?.to_string(), v.clone())))
        .collect();
    let x = &file.tensors["x"];
    let edge_index =
        EdgeIndex::from_tensor(&file.tensors["edge_index"], x.dim(0).unwrap()).unwrap();
    Case {
        config_json: config.to_string(),
        params,
        tensors: file.tensors,
        edge_index,
    }
}

fn model_of(c: &Case) -> Model {
    let config = ModelConfig::from_json(&c.config_json).unwrap();
    Model::from_tensors(config, &c.params, &Device::Cpu).unwrap()
}

fn check(name: &str) -> Result<String, String> {
    let c = load(name);
    let t = &c.tensors;
    // 1. the layer alone, through the trait
    let mut v: serde_json::Value = serde_json::from_str(&c.config_json).unwrap();
    v.as_object_mut().unwrap().remove("layer");
    let config: SageConfig = serde_json::from_value(v).map_err(|e| e.to_string())?;
    let vb = VarBuilder::from_tensors(c.params.clone(), DType::F32, &Device::Cpu);
    let conv = SageConv::new(config, vb).map_err(|e| e.to_string())?;
    let input = LayerInput {
        x: &t["x"],
        edge_index: &c.edge_index,
        edge_weight: None,
    };
    let out = conv.apply(&input, None).map_err(|e| e.to_string())?.out;
    let d_layer = max_abs_diff(&out, &t["expected.out"]);
    // 2. a model from PyG's constructor arguments
    let logits = model_of(&c)
        .forward(&t["x"], &c.edge_index, None)
        .map_err(|e| e.to_string())?
        .logits;
    let d_model = max_abs_diff(&logits, &t["expected.out"]);
    if d_layer.is_nan() || d_layer >= TOL || d_model.is_nan() || d_model >= TOL {
        return Err(format!(
            "differs from PyG: layer {d_layer}, model {d_model}"
        ));
    }
    Ok(format!(
        "layer within {d_layer:.1e}, model within {d_model:.1e}"
    ))
}

#[test]
fn every_sage_fixture_matches_pyg() {
    let failures: Vec<String> = cases()
        .into_iter()
        .filter_map(|name| match check(&name) {
            Ok(d) => {
                println!("ok   {name}: {d}");
                None
            }
            Err(e) => Some(format!("{name}: {e}")),
        })
        .collect();
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn parameter_names_are_pygs() {
    let model = model_of(&load("sage_root1_norm0_bias1"));
    let names: Vec<String> = model
        .named_parameters()
        .into_iter()
        .map(|(n, _)| n)
        .collect();
    assert_eq!(names, ["lin_l.weight", "lin_l.bias", "lin_r.weight"]);
    let config = ModelConfig::from_json(&load("sage_root0_norm0_bias0").config_json).unwrap();
    assert_eq!(
        config.parameter_shapes(),
        [("lin_l.weight".to_string(), vec![4, 8])]
    );
}

#[test]
fn another_aggregation_is_refused_by_name() {
    let err = ModelConfig::from_json(
        r#"{"layer": "SAGEConv", "in_channels": 8, "out_channels": 4, "aggr": "max"}"#,
    )
    .unwrap_err()
    .to_string();
    assert!(err.contains("aggr = \"max\" is not supported"), "{err}");
    assert!(err.contains("\"mean\""), "{err}");
}

#[test]
fn moves_checks_and_names_the_culprit_on_sim() {
    let sim = Placement::sim(1);
    let (model, _) = Model::init(ModelConfig::sage(34, 8, 4), 0, Placement::cpu()).unwrap();
    let graph = datasets::karate(&sim).unwrap();
    let err = model.forward_graph(&graph).unwrap_err().to_string();
    assert!(err.contains("model parameters are on cpu"), "{err}");
    assert!(err.contains("is on sim:1"), "{err}");
    let moved = model.to_device(&sim).unwrap();
    for (name, at) in moved.parameter_placements() {
        assert_eq!(at, &sim, "{name}");
    }
    let table = workbook::inspect::model_table(&moved);
    assert!(
        table.contains("conv2.lin_r.weight") && table.contains("sim:1"),
        "{table}"
    );
    assert!(moved.forward_graph(&graph).is_ok());
    // dtype conversion is generic too
    let half = moved.to_dtype(DType::BF16).unwrap();
    assert!(half
        .named_parameters()
        .iter()
        .all(|(_, t)| t.dtype() == DType::BF16));
}

#[test]
fn trains_and_checkpoints() {
    let graph = datasets::karate(Placement::cpu()).unwrap();
    let config = ModelConfig::sage(graph.num_features(), 16, graph.num_classes());
    let report = workbook::train::train(
        config,
        &graph,
        &workbook::train::TrainConfig {
            epochs: 60,
            ..workbook::train::TrainConfig::gcn()
        },
        |_| {},
    )
    .unwrap();
    let first = report.history.first().unwrap().loss;
    let last = report.history.last().unwrap().loss;
    assert!(last < first * 0.5, "loss {first} -> {last}");
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("sage.safetensors");
    checkpoint::save(&report.model, &path).unwrap();
    let sim = Placement::sim(1);
    let back = checkpoint::load(&path, &sim).unwrap();
    assert_eq!(back.config(), report.model.config());
    let a = report.model.forward_graph(&graph).unwrap().logits;
    let b = back
        .forward_graph(&graph.to_device(&sim).unwrap())
        .unwrap()
        .logits;
    assert_eq!(max_abs_diff(&a, &b), 0.0);
}

#[test]
fn every_sage_fixture_matches_pyg_in_onnxruntime() {
    let dir = tempfile::tempdir().unwrap();
    let mut manifest = Vec::new();
    for name in cases() {
        let c = load(&name);
        let t = &c.tensors;
        let model_file = format!("{name}.onnx");
        onnx::write(
            &model_of(&c),
            &dir.path().join(&model_file),
            &Default::default(),
        )
        .unwrap();
        let inputs_file = format!("{name}__inputs.safetensors");
        let inputs = [
            ("x".to_string(), t["x"].clone()),
            ("edge_index".to_string(), t["edge_index"].clone()),
        ];
        tensor_file::write(&dir.path().join(&inputs_file), &inputs, None).unwrap();
        let expected_file = format!("{name}__pyg.safetensors");
        let expected = [("logits".to_string(), t["expected.out"].clone())];
        tensor_file::write(&dir.path().join(&expected_file), &expected, None).unwrap();
        manifest.push(serde_json::json!({
            "name": name, "model": model_file, "inputs": inputs_file, "expected": expected_file,
        }));
    }
    std::fs::write(
        dir.path().join("manifest.json"),
        serde_json::to_string_pretty(&manifest).unwrap(),
    )
    .unwrap();
    let python = std::env::var("WORKBOOK_PYTHON").unwrap_or_else(|_| "python3".into());
    let has_ort = Command::new(&python)
        .args(["-c", "import onnxruntime, numpy, safetensors"])
        .status()
        .map(|s| s.success())
        .unwrap_or(false);
    if !has_ort {
        if std::env::var("WORKBOOK_REQUIRE_ONNXRUNTIME").as_deref() == Ok("1") {
            panic!("WORKBOOK_REQUIRE_ONNXRUNTIME=1 but `{python}` cannot import onnxruntime, numpy and safetensors");
        }
        eprintln!("\n*** SKIPPED the onnxruntime check of the SAGE fixtures: `{python}` cannot import onnxruntime/numpy/safetensors. ***\n");
        return;
    }
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../scripts/check_onnx.py");
    let out = Command::new(&python)
        .arg(&script)
        .arg(dir.path())
        .args(["--tol", &TOL.to_string()])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    println!("{stdout}{}", String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "{stdout}");
    assert_eq!(
        stdout.lines().filter(|l| l.starts_with("ok ")).count(),
        8,
        "{stdout}"
    );
}
