//! PyG's option matrix (`tests/fixtures/pyg/matrix`, see the README there): 88 PyG 2.8.1
//! single-layer cases, every `GCNConv` option combination PyG accepts (with and without edge
//! weights) and every `GATv2Conv` combination of heads, concat, share_weights, add_self_loops,
//! bias and negative_slope. PyG's outputs are the ground truth: each case must match them to
//! 1e-5 in the layer and, exported to ONNX, in onnxruntime (`scripts/check_onnx.py`, one Python
//! run for all cases). The `predict` CLI runs the same files in
//! `crates/workbook-cli/tests/pyg_matrix.rs`.
//!
//! Every test loops over all cases and reports every failing file by name, not only the first.

use crate::common;

use common::{fixtures_dir, max_abs_diff};
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use workbook::candle_core::{Device, Tensor};
use workbook::export::onnx;
use workbook::{tensor_file, EdgeIndex, Model, ModelConfig};

const TOL: f32 = 1e-5;

fn matrix_dir() -> PathBuf {
    fixtures_dir().join("matrix")
}

/// Every fixture of the matrix, by file stem, sorted.
fn cases() -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(matrix_dir())
        .unwrap()
        .filter_map(|e| {
            let name = e.unwrap().file_name().into_string().unwrap();
            Some(name.strip_suffix(".safetensors")?.to_string())
        })
        .collect();
    names.sort();
    assert_eq!(names.len(), 88, "the matrix has 88 files: {names:?}");
    assert_eq!(names.iter().filter(|n| n.starts_with("gcn_")).count(), 24);
    assert_eq!(names.iter().filter(|n| n.starts_with("gatv2_")).count(), 64);
    names
}

/// One fixture: the model with PyG's parameters, its inputs and PyG's outputs.
struct Case {
    model: Model,
    tensors: HashMap<String, Tensor>,
    edge_index: EdgeIndex,
}

fn load(name: &str) -> Result<Case, String> {
    let dev = Device::Cpu;
    let file = tensor_file::read(&matrix_dir().join(format!("{name}.safetensors")), &dev)
        .map_err(|e| e.to_string())?;
    let meta = &file.metadata;
    if meta.get("format").map(String::as_str) != Some("pyg-fixture/1") {
        return Err(format!("not a pyg-fixture/1 file: {meta:?}"));
    }
    let mut config: serde_json::Value =
        serde_json::from_str(&meta["config"]).map_err(|e| e.to_string())?;
    config["layer"] = meta["layer"].clone().into();
    let config = ModelConfig::from_json(&config.to_string()).map_err(|e| e.to_string())?;
    let params: HashMap<String, Tensor> = file
        .tensors
        .iter()
        .filter_map(|(k, v)| Some((k.strip_prefix("params.")?.to_string(), v.clone())))
        .collect();
    let model = Model::from_tensors(config, &params, &dev).map_err(|e| e.to_string())?;
    let x = &file.tensors["x"];
    let edge_index = EdgeIndex::from_tensor(&file.tensors["edge_index"], x.dim(0).unwrap())
        .map_err(|e| e.to_string())?;
    Ok(Case {
        model,
        tensors: file.tensors,
        edge_index,
    })
}

fn check_layer(name: &str) -> Result<String, String> {
    let c = load(name)?;
    let t = &c.tensors;
    let out = c
        .model
        .forward(&t["x"], &c.edge_index, t.get("edge_weight"))
        .map_err(|e| e.to_string())?;
    let diff = max_abs_diff(&out.logits, &t["expected.out"]);
    if diff.is_nan() || diff >= TOL {
        return Err(format!("output differs from PyG by {diff}"));
    }
    let mut detail = format!("out within {diff:.1e}");
    if let Some(alpha) = t.get("expected.alpha") {
        let (_, att) = &out.attention[0];
        let ours = att.edge_index.to_tensor(&Device::Cpu).unwrap();
        if ours.to_vec2::<i64>().unwrap()
            != t["expected.alpha_edge_index"].to_vec2::<i64>().unwrap()
        {
            return Err("attention edges differ from PyG's".into());
        }
        let diff = max_abs_diff(&att.weights, alpha);
        if diff.is_nan() || diff >= TOL {
            return Err(format!("attention differs from PyG by {diff}"));
        }
        detail += &format!(", alpha within {diff:.1e}");
    }
    Ok(detail)
}

#[test]
fn every_matrix_fixture_matches_pyg_in_the_layer() {
    let mut failures = Vec::new();
    for name in cases() {
        match check_layer(&name) {
            Ok(detail) => println!("ok   {name}: {detail}"),
            Err(e) => {
                println!("FAIL {name}: {e}");
                failures.push(format!("{name}: {e}"));
            }
        }
    }
    assert!(
        failures.is_empty(),
        "{} of 88 matrix fixtures differ from PyG:\n{}",
        failures.len(),
        failures.join("\n")
    );
}

/// `improved=True` without edge weights is exactly `improved=False` in PyG 2.8.1, and with
/// edge weights it is not: the layer reproduces the trap, and the config says when it applies.
#[test]
fn pyg_ignores_improved_without_edge_weights() {
    // Each file has its own random parameters, so compare the layer with one set of them (the
    // matrix test above already checks the layer against PyG's outputs in every case).
    let c = load("gcn_improved1_loops1_norm1_bias1_weighted1").unwrap();
    let mut plain = c.model.config().clone();
    if let workbook::LayerConfig::Gcn(g) = &mut plain.layers[0] {
        g.improved = false;
    }
    let params: HashMap<String, Tensor> = c.model.named_parameters().into_iter().collect();
    let plain = Model::from_tensors(plain, &params, &Device::Cpu).unwrap();
    let t = &c.tensors;
    let w = t.get("edge_weight");
    let a = c.model.forward(&t["x"], &c.edge_index, w).unwrap().logits;
    let b = plain.forward(&t["x"], &c.edge_index, w).unwrap().logits;
    assert!(
        max_abs_diff(&a, &b) > 1e-3,
        "with edge weights improved matters"
    );
    let a = c
        .model
        .forward(&t["x"], &c.edge_index, None)
        .unwrap()
        .logits;
    let b = plain.forward(&t["x"], &c.edge_index, None).unwrap().logits;
    assert_eq!(
        max_abs_diff(&a, &b),
        0.0,
        "without edge weights it does not"
    );
    assert_eq!(
        c.model.config().improved_ignored_layers(false),
        vec!["GCNConv".to_string()]
    );
    assert!(c.model.config().improved_ignored_layers(true).is_empty());
}

fn onnx_out_dir() -> (PathBuf, Option<tempfile::TempDir>) {
    match std::env::var_os("WORKBOOK_ONNX_OUT") {
        Some(d) => {
            let d = PathBuf::from(d).join("pyg-matrix");
            std::fs::create_dir_all(&d).unwrap();
            (d, None)
        }
        None => {
            let t = tempfile::tempdir().unwrap();
            (t.path().to_path_buf(), Some(t))
        }
    }
}

/// Writes the ONNX file, its inputs and PyG's outputs (under the ONNX output names) for one
/// case, and returns its manifest entry.
fn write_onnx_case(dir: &Path, name: &str) -> Result<serde_json::Value, String> {
    let c = load(name)?;
    let t = &c.tensors;
    let weighted = t.contains_key("edge_weight");
    let gat = t.contains_key("expected.alpha");
    let model_file = format!("{name}.onnx");
    onnx::write(
        &c.model,
        &dir.join(&model_file),
        &onnx::OnnxOptions {
            attention: gat,
            edge_weight: weighted,
        },
    )
    .map_err(|e| format!("export failed: {e}"))?;
    let mut inputs = vec![
        ("x".to_string(), t["x"].clone()),
        ("edge_index".to_string(), t["edge_index"].clone()),
    ];
    if let Some(w) = t.get("edge_weight") {
        inputs.push(("edge_weight".to_string(), w.clone()));
    }
    let inputs_file = format!("{name}__inputs.safetensors");
    tensor_file::write(&dir.join(&inputs_file), &inputs, None).map_err(|e| e.to_string())?;
    let mut expected = vec![("logits".to_string(), t["expected.out"].clone())];
    if gat {
        expected.push((
            "attention_edge_index".into(),
            t["expected.alpha_edge_index"].clone(),
        ));
        expected.push(("attention_conv".into(), t["expected.alpha"].clone()));
    }
    let expected_file = format!("{name}__pyg.safetensors");
    tensor_file::write(&dir.join(&expected_file), &expected, None).map_err(|e| e.to_string())?;
    Ok(serde_json::json!({
        "name": name, "model": model_file, "inputs": inputs_file, "expected": expected_file,
    }))
}

#[test]
fn every_matrix_fixture_matches_pyg_in_onnxruntime() {
    let (dir, _keep) = onnx_out_dir();
    let mut manifest = Vec::new();
    let mut failures = Vec::new();
    for name in cases() {
        match write_onnx_case(&dir, &name) {
            Ok(entry) => manifest.push(entry),
            Err(e) => failures.push(format!("{name}: {e}")),
        }
    }
    assert!(
        failures.is_empty(),
        "{} matrix fixtures could not be exported:\n{}",
        failures.len(),
        failures.join("\n")
    );
    std::fs::write(
        dir.join("manifest.json"),
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
        eprintln!("\n*** SKIPPED the onnxruntime check of the PyG matrix: `{python}` cannot import onnxruntime/numpy/safetensors. ***");
        eprintln!("*** Install them (pip install onnxruntime numpy safetensors) and set WORKBOOK_PYTHON. ***\n");
        return;
    }
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../scripts/check_onnx.py");
    let out = Command::new(&python)
        .arg(&script)
        .arg(&dir)
        .args(["--tol", &TOL.to_string()])
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    println!("{stdout}{}", String::from_utf8_lossy(&out.stderr));
    let failed: Vec<&str> = stdout.lines().filter(|l| l.starts_with("FAIL")).collect();
    assert!(
        out.status.success() && failed.is_empty(),
        "onnxruntime disagrees with PyG on {} matrix fixture(s):\n{}",
        failed.len(),
        failed.join("\n")
    );
    assert_eq!(
        stdout.lines().filter(|l| l.starts_with("ok ")).count(),
        88,
        "{stdout}"
    );
}
