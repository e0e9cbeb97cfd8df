//! `workbook predict` on PyG's option matrix (`crates/workbook/tests/fixtures/pyg/matrix`, 88
//! PyG 2.8.1 single-layer cases): each file is the weights *and* the graph, its metadata the
//! config; the output must match PyG's to 1e-5. All cases run; every failing file is named.
//! The note about `improved` without edge weights must appear exactly where PyG ignores it.

use std::path::{Path, PathBuf};
use std::process::Command;
use workbook::candle_core::{Device, Tensor};
use workbook::tensor_file;

fn matrix_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../workbook/tests/fixtures/pyg/matrix")
}

fn max_diff(a: &Tensor, b: &Tensor) -> f32 {
    if a.dims() != b.dims() {
        return f32::INFINITY;
    }
    (a - b)
        .unwrap()
        .abs()
        .unwrap()
        .flatten_all()
        .unwrap()
        .max(0)
        .unwrap()
        .to_scalar()
        .unwrap()
}

fn sage_dir() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../workbook/tests/fixtures/pyg/sage")
}

/// Runs `predict` on the CPU on one fixture; Ok(whether the improved note was printed).
fn predict(dir: &Path, name: &str) -> Result<bool, String> {
    predict_in(&matrix_dir(), dir, name, "cpu")
}

/// The `.safetensors` fixtures in `dir`, by name, sorted.
fn fixture_names(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .unwrap()
        .filter_map(|e| {
            let n = e.unwrap().file_name().into_string().unwrap();
            Some(n.strip_suffix(".safetensors")?.to_string())
        })
        .collect();
    names.sort();
    names
}

fn predict_in(fixtures: &Path, dir: &Path, name: &str, device: &str) -> Result<bool, String> {
    let fx = fixtures.join(format!("{name}.safetensors"));
    let file = tensor_file::read(&fx, &Device::Cpu).map_err(|e| e.to_string())?;
    let mut config: serde_json::Value =
        serde_json::from_str(&file.metadata["config"]).map_err(|e| e.to_string())?;
    config["layer"] = file.metadata["layer"].clone().into();
    let config_path = dir.join(format!("{name}.json"));
    std::fs::write(&config_path, config.to_string()).unwrap();
    let out_path = dir.join(format!("{name}__out.safetensors"));
    let run = Command::new(env!("CARGO_BIN_EXE_workbook"))
        .arg("predict")
        .arg("--config")
        .arg(&config_path)
        .arg("--weights")
        .arg(&fx)
        .args(["--weights-prefix", "params."])
        .arg("--graph")
        .arg(&fx)
        .arg("--out")
        .arg(&out_path)
        .args(["--device", device])
        .env_remove("RUST_BACKTRACE")
        .output()
        .map_err(|e| e.to_string())?;
    let stderr = String::from_utf8_lossy(&run.stderr);
    if !run.status.success() {
        return Err(format!("predict failed: {stderr}"));
    }
    let ours = tensor_file::read(&out_path, &Device::Cpu).map_err(|e| e.to_string())?;
    let diff = max_diff(&ours.tensors["out"], &file.tensors["expected.out"]);
    if diff.is_nan() || diff >= 1e-5 {
        return Err(format!("out differs from PyG by {diff}"));
    }
    if let Some(alpha) = file.tensors.get("expected.alpha") {
        let ei = ours.tensors["alpha_edge_index"].to_vec2::<i64>().unwrap();
        if ei
            != file.tensors["expected.alpha_edge_index"]
                .to_vec2::<i64>()
                .unwrap()
        {
            return Err("alpha_edge_index differs from PyG's".into());
        }
        let diff = max_diff(&ours.tensors["alpha"], alpha);
        if diff.is_nan() || diff >= 1e-5 {
            return Err(format!("alpha differs from PyG by {diff}"));
        }
    }
    Ok(stderr.contains("PyG ignores improved without edge weights; the workbook matches PyG; pass edge weights of 1.0 to get A + 2I"))
}

#[test]
fn predict_matches_pyg_on_every_matrix_fixture() {
    let dir = tempfile::tempdir().unwrap();
    let names = fixture_names(&matrix_dir());
    assert_eq!(names.len(), 88, "{names:?}");
    let mut failures = Vec::new();
    let mut noted = Vec::new();
    for name in &names {
        match predict(dir.path(), name) {
            Ok(note) => {
                if note {
                    noted.push(name.clone());
                }
            }
            Err(e) => failures.push(format!("{name}: {e}")),
        }
    }
    assert!(
        failures.is_empty(),
        "{} of 88 matrix fixtures differ from PyG through predict:\n{}",
        failures.len(),
        failures.join("\n")
    );
    // the note appears for improved=true with self-loops and normalisation on an unweighted
    // graph, and nowhere else
    assert_eq!(
        noted,
        vec![
            "gcn_improved1_loops1_norm1_bias0_weighted0".to_string(),
            "gcn_improved1_loops1_norm1_bias1_weighted0".to_string(),
        ]
    );
}

/// GraphSAGE (`tests/fixtures/pyg/sage`, 8 PyG 2.8.1 `SAGEConv` cases) through `predict`, with
/// PyG's constructor arguments as the config (`{"layer": "SAGEConv", ..., "aggr": "mean"}`).
#[test]
fn predict_matches_pyg_on_every_sage_fixture() {
    let dir = tempfile::tempdir().unwrap();
    let names = fixture_names(&sage_dir());
    assert_eq!(names.len(), 8, "{names:?}");
    let failures: Vec<String> = names
        .iter()
        .filter_map(|name| {
            predict_in(&sage_dir(), dir.path(), name, "cpu")
                .err()
                .map(|e| format!("{name}: {e}"))
        })
        .collect();
    assert!(
        failures.is_empty(),
        "SAGE fixtures differ from PyG through predict:\n{}",
        failures.join("\n")
    );
}

/// `predict --device cuda:0` on every matrix and SAGE fixture: the GPU path (our CUDA kernels,
/// cuBLAS) against PyG's outputs at the same 1e-5. Runs in a `cuda` build on a machine with a
/// GPU; elsewhere it is ignored (no `cuda` feature) or prints SKIPPED (no usable GPU).
#[test]
#[cfg_attr(
    not(feature = "cuda"),
    ignore = "needs a GPU: cargo test --features cuda"
)]
fn predict_matches_pyg_on_the_gpu() {
    if let Err(e) = Device::new_cuda(0) {
        eprintln!("SKIPPED predict_matches_pyg_on_the_gpu: no usable CUDA device ({e})");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let mut failures = Vec::new();
    let mut ran = 0;
    for fixtures in [matrix_dir(), sage_dir()] {
        for name in fixture_names(&fixtures) {
            ran += 1;
            if let Err(e) = predict_in(&fixtures, dir.path(), &name, "cuda:0") {
                failures.push(format!("{name}: {e}"));
            }
        }
    }
    assert_eq!(ran, 96);
    assert!(
        failures.is_empty(),
        "{} of {ran} fixtures differ from PyG through predict on cuda:0:\n{}",
        failures.len(),
        failures.join("\n")
    );
    println!("predict on cuda:0: all {ran} PyG fixtures within 1e-5");
}
