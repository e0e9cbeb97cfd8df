//! Graded tests for exercise 02-4 (points in exercise.toml). Do not edit: the grader checks this
//! file against its checksum.

use super::my_sage::MySageConv;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use workbook::candle_core::{DType, Device, Tensor};
use workbook::candle_nn::VarBuilder;
use workbook::device::accelerator;
use workbook::layers::{GraphLayer, LayerInput, SageConfig};
use workbook::{tensor_file, EdgeIndex, Module, Placement};

/// PyG 2.8.1's SAGEConv(8, 4) on a 40-node graph, every combination of root_weight, normalize
/// and bias (crates/workbook/tests/fixtures/pyg/sage).
fn fixtures() -> Vec<PathBuf> {
    let dir = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../../crates/workbook/tests/fixtures/pyg/sage");
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "safetensors"))
        .collect();
    files.sort();
    assert_eq!(files.len(), 8, "{}", dir.display());
    files
}

struct Case {
    name: String,
    layer: MySageConv,
    x: Tensor,
    edge_index: EdgeIndex,
    expected: Tensor,
}

fn load(path: &Path) -> Case {
    let file = tensor_file::read(path, &Device::Cpu).unwrap();
    let config: SageConfig = serde_json::from_str(&file.metadata["config"]).unwrap();
    let params: HashMap<String, Tensor> = file
        .tensors
        .iter()
        .filter_map(|(k, v)| Some((k.strip_prefix("params.")?.to_string(), v.clone())))
        .collect();
    let vb = VarBuilder::from_tensors(params, DType::F32, &Device::Cpu);
    let x = file.tensors["x"].clone();
    let edge_index = EdgeIndex::from_tensor(&file.tensors["edge_index"], 40).unwrap();
    Case {
        name: path.file_stem().unwrap().to_string_lossy().into_owned(),
        layer: MySageConv::new(config, vb).unwrap(),
        x,
        edge_index,
        expected: file.tensors["expected.out"].clone(),
    }
}

fn max_diff(a: &Tensor, b: &Tensor) -> f32 {
    assert_eq!(a.dims(), b.dims());
    (a.to_device(&Device::Cpu).unwrap() - b)
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

#[test]
fn matches_pyg_on_every_fixture() {
    let mut failures = Vec::new();
    for path in fixtures() {
        let c = load(&path);
        let input = LayerInput {
            x: &c.x,
            edge_index: &c.edge_index,
            edge_weight: None,
        };
        match c.layer.apply(&input, None) {
            Ok(o) => {
                let d = max_diff(&o.out, &c.expected);
                if d.is_nan() || d >= 1e-5 {
                    failures.push(format!("{}: differs from PyG by {d}", c.name));
                }
            }
            Err(e) => failures.push(format!("{}: {e}", c.name)),
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn every_parameter_moves_and_is_named_as_in_pyg() {
    let gpu = accelerator().placement;
    for (file, names) in [
        (
            "sage_root1_norm0_bias1",
            &["lin_l.weight", "lin_l.bias", "lin_r.weight"][..],
        ),
        ("sage_root0_norm1_bias0", &["lin_l.weight"][..]),
    ] {
        let path = fixtures()
            .into_iter()
            .find(|p| p.ends_with(format!("{file}.safetensors")))
            .unwrap();
        let c = load(&path);
        let got: Vec<String> = c
            .layer
            .named_parameters()
            .into_iter()
            .map(|(n, _)| n)
            .collect();
        assert_eq!(
            got, names,
            "{file}: the parameters PyG's state_dict has, by its names"
        );
        let moved = c.layer.to_device(&gpu).unwrap();
        assert_eq!(moved.placement(), &gpu);
        for (name, _, at) in moved.tensor_placements() {
            assert_eq!(at, gpu, "{file}: '{name}' did not move to {gpu}");
        }
        for (name, t) in moved.named_parameters() {
            assert!(
                t.device().same_device(gpu.device()),
                "{file}: '{name}' data not on {gpu}"
            );
        }
        // the graph on the accelerator, the layer left on the cpu: named, not a crash
        let ei = c.edge_index.to_device(&gpu).unwrap();
        let input = LayerInput {
            x: &c.x,
            edge_index: &ei,
            edge_weight: None,
        };
        let err = c.layer.apply(&input, None).unwrap_err().to_string();
        assert!(
            err.contains("SAGEConv parameters are on cpu") && err.contains(&gpu.to_string()),
            "{err}"
        );
    }
}

#[test]
fn no_intermediate_on_a_fixed_device() {
    // On sim:1 this runs the shadow pass of GraphLayer::apply; on a GPU, candle checks devices.
    let gpu = accelerator().placement;
    let cpu = Placement::cpu();
    let mut failures = Vec::new();
    for path in fixtures() {
        let c = load(&path);
        let layer = c.layer.to_device(&gpu).unwrap();
        let x = gpu.move_tensor(&c.x, &cpu, "x").unwrap();
        let ei = c.edge_index.to_device(&gpu).unwrap();
        let input = LayerInput {
            x: &x,
            edge_index: &ei,
            edge_weight: None,
        };
        match layer.apply(&input, None) {
            Ok(o) => {
                let d = max_diff(&o.out, &c.expected);
                if d.is_nan() || d >= 1e-5 {
                    failures.push(format!("{} on {gpu}: differs from PyG by {d}", c.name));
                }
            }
            Err(e) => failures.push(format!("{} on {gpu}: {e}", c.name)),
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
