//! Graded tests for exercise 04-3 (points in exercise.toml). Do not edit: the grader checks this
//! file against its checksum.
//!
//! `onnxruntime_agrees_on_two_graph_sizes` runs `scripts/check_onnx.py` with the Python named
//! by `WORKBOOK_PYTHON` (default `python3`), which needs onnxruntime, numpy and safetensors.

use super::onnx_gcn::{check_declared, export_gcn, signature_problems, write_inputs, Finding};
use std::path::{Path, PathBuf};
use std::process::Command;
use workbook::candle_core::{DType, Device, Tensor};
use workbook::datasets::{self, CsbmConfig};
use workbook::device::accelerator;
use workbook::export::onnx::{self, OPSET};
use workbook::export::onnx_proto::{
    Dimension, DimensionValue, ModelProto, ValueInfoProto, FLOAT, INT64,
};
use workbook::{tensor_file, Graph, Model, ModelConfig, Placement};

/// The repository root (both exercises/ and solutions/ are three levels below it).
fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../..")
}

fn cora(at: &Placement) -> Graph {
    datasets::load("cora", None, at).expect("loading Cora")
}

/// The GCN PyTorch Geometric trained on Cora (the library's test fixtures), on `at`.
fn trained_gcn(at: &Placement) -> Model {
    let path = repo_root().join("crates/workbook/tests/fixtures/pyg/cora_gcn_trained.safetensors");
    let file = tensor_file::read(&path, &Device::Cpu).expect("reading the PyG-trained Cora GCN");
    Model::from_tensors(ModelConfig::gcn(1433, 16, 7), &file.tensors, at)
        .expect("loading the PyG-trained Cora GCN")
}

fn listed(found: &[Finding]) -> String {
    if found.is_empty() {
        return "no findings".into();
    }
    found
        .iter()
        .map(|f| f.to_string())
        .collect::<Vec<_>>()
        .join(" | ")
}

/// Sets dimension `k` of the declared input or output `name`.
fn set_dim(proto: &mut ModelProto, name: &str, k: usize, value: DimensionValue) {
    let graph = proto.graph.as_mut().unwrap();
    let v = graph
        .input
        .iter_mut()
        .chain(graph.output.iter_mut())
        .find(|v| v.name == name)
        .unwrap();
    let shape = v
        .r#type
        .as_mut()
        .unwrap()
        .tensor_type
        .as_mut()
        .unwrap()
        .shape
        .as_mut()
        .unwrap();
    shape.dim[k].value = Some(value);
}

/// The dimensions declared for `value` (its shape's `dim` list).
fn dims_of(value: &mut ValueInfoProto) -> &mut Vec<Dimension> {
    &mut value
        .r#type
        .as_mut()
        .unwrap()
        .tensor_type
        .as_mut()
        .unwrap()
        .shape
        .as_mut()
        .unwrap()
        .dim
}

fn set_elem_type(proto: &mut ModelProto, name: &str, elem_type: i32) {
    let graph = proto.graph.as_mut().unwrap();
    let v = graph.input.iter_mut().find(|v| v.name == name).unwrap();
    v.r#type
        .as_mut()
        .unwrap()
        .tensor_type
        .as_mut()
        .unwrap()
        .elem_type = elem_type;
}

fn export_cora_gcn(dir: &Path) -> (Model, Graph, ModelProto) {
    let gpu = accelerator().placement;
    let model = trained_gcn(&gpu);
    let example = cora(&gpu);
    let path = dir.join("cora_gcn.onnx");
    let proto = export_gcn(&model, &example, &path).unwrap_or_else(|e| {
        panic!("export_gcn failed for a clean model and example on {gpu}: {e}")
    });
    (model, example, proto)
}

#[test]
fn refuses_to_export_before_the_preflight_passes() {
    let gpu = accelerator().placement;
    let dir = tempfile::tempdir().unwrap();
    let model = trained_gcn(&gpu);
    let on_cpu = cora(&Placement::cpu());
    let path = dir.path().join("wrong_device.onnx");
    match export_gcn(&model, &on_cpu, &path) {
        Ok(_) => panic!(
            "export_gcn exported a model on {gpu} with its example on cpu: the pre-flight must refuse it"
        ),
        Err(e) => assert!(
            e.to_string().contains("example input 'x' is on cpu"),
            "the error should be the pre-flight's, naming the example on cpu; got: {e}"
        ),
    }
    assert!(
        !path.exists(),
        "nothing may be written when the pre-flight fails, but {} exists",
        path.display()
    );
    let half = model.to_dtype(DType::F16).unwrap();
    let path = dir.path().join("half.onnx");
    let result = export_gcn(&half, &cora(&gpu), &path);
    assert!(
        result.is_err() && !path.exists(),
        "a half-precision model must be refused by the pre-flight (exports are float32), and nothing written"
    );
}

#[test]
fn writes_float32_and_int64_inputs() {
    let gpu = accelerator().placement;
    let graph = datasets::karate(&gpu).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("karate_inputs.safetensors");
    write_inputs(&graph, &path).unwrap_or_else(|e| panic!("write_inputs failed: {e}"));
    let file = tensor_file::read(&path, &Device::Cpu)
        .unwrap_or_else(|e| panic!("write_inputs wrote no readable safetensors file: {e}"));
    let x = file
        .tensors
        .get("x")
        .expect("the inputs file has no tensor 'x'");
    assert!(
        x.dtype() == DType::F32 && x.dims() == [34, 34],
        "x must be float32 [34, 34]; got {:?} {:?}",
        x.dtype(),
        x.dims()
    );
    let ei = file
        .tensors
        .get("edge_index")
        .expect("the inputs file has no tensor 'edge_index'");
    assert!(
        ei.dtype() == DType::I64 && ei.dims() == [2, 156],
        "edge_index must be int64 [2, 156] (PyG's layout, the exported model's input type); got {:?} {:?}",
        ei.dtype(),
        ei.dims()
    );
    let rows = ei.to_vec2::<i64>().unwrap();
    let src: Vec<i64> = graph
        .edge_index()
        .sources_host()
        .iter()
        .map(|&v| v as i64)
        .collect();
    let dst: Vec<i64> = graph
        .edge_index()
        .targets_host()
        .iter()
        .map(|&v| v as i64)
        .collect();
    assert!(
        rows[0] == src && rows[1] == dst,
        "edge_index row 0 must hold the sources and row 1 the targets, in the graph's order"
    );
    let x_host = graph.x().to_device(&Device::Cpu).unwrap();
    let same = (x - &x_host).unwrap().abs().unwrap().sum_all().unwrap();
    assert_eq!(
        same.to_scalar::<f32>().unwrap(),
        0.0,
        "x must hold the graph's features unchanged"
    );
}

#[test]
fn the_export_has_dynamic_sizes() {
    let dir = tempfile::tempdir().unwrap();
    let (_, _, proto) = export_cora_gcn(dir.path());
    let back = onnx::read(&dir.path().join("cora_gcn.onnx"))
        .unwrap_or_else(|e| panic!("export_gcn wrote no readable ONNX file at cora_gcn.onnx: {e}"));
    assert_eq!(back, proto, "export_gcn should return what it wrote");
    assert_eq!(
        back.opset_import[0].version, OPSET,
        "the file should use opset 18"
    );
    let found = signature_problems(&back, 1433, 7);
    assert!(
        found.is_empty(),
        "the exported GCN's signature is right (x float32 [num_nodes, 1433], edge_index int64 [2, num_edges], logits [num_nodes, 7]); got {}",
        listed(&found)
    );
    let graph = back.graph.unwrap();
    assert!(
        check_declared(&graph.input, "x", FLOAT, &[None, Some(1433)]).is_none()
            && check_declared(&graph.input, "edge_index", INT64, &[Some(2), None]).is_none(),
        "check_declared should accept the exported inputs"
    );
}

#[test]
fn frozen_sizes_and_wrong_types_are_caught() {
    let dir = tempfile::tempdir().unwrap();
    let (_, _, proto) = export_cora_gcn(dir.path());
    // what torch.onnx.export writes without dynamic_axes: the example's sizes, frozen
    let mut frozen = proto.clone();
    set_dim(&mut frozen, "x", 0, DimensionValue::DimValue(2708));
    let found = signature_problems(&frozen, 1433, 7);
    assert!(
        found.len() == 1 && found[0].what == "x",
        "x declared [2708, 1433] only takes Cora-sized graphs: expected one finding about 'x'; got {}",
        listed(&found)
    );
    let mut frozen = proto.clone();
    set_dim(
        &mut frozen,
        "edge_index",
        1,
        DimensionValue::DimValue(10556),
    );
    set_dim(&mut frozen, "logits", 0, DimensionValue::DimValue(2708));
    let found = signature_problems(&frozen, 1433, 7);
    let whats: Vec<&str> = found.iter().map(|f| f.what.as_str()).collect();
    assert!(
        whats == ["edge_index", "logits"],
        "edge_index [2, 10556] and logits [2708, 7] are frozen: expected one finding about each; got {}",
        listed(&found)
    );
    // a symbolic size where a fixed one belongs, a wrong element type, an old opset
    let mut wrong = proto.clone();
    set_dim(
        &mut wrong,
        "x",
        1,
        DimensionValue::DimParam("features".into()),
    );
    set_elem_type(&mut wrong, "edge_index", 6); // INT32
    wrong.opset_import[0].version = 11;
    let found = signature_problems(&wrong, 1433, 7);
    let mut whats: Vec<&str> = found.iter().map(|f| f.what.as_str()).collect();
    whats.sort();
    assert!(
        whats == ["edge_index", "opset", "x"],
        "x [num_nodes, features], edge_index of INT32 and opset 11: expected one finding about each of opset, x and edge_index; got {}",
        listed(&found)
    );
    // the model takes 1433 features, not 500
    let found = signature_problems(&proto, 500, 7);
    assert!(
        found.len() == 1 && found[0].what == "x",
        "checked for in_channels = 500, the file's x [num_nodes, 1433] is wrong: expected one finding about 'x'; got {}",
        listed(&found)
    );
}

#[test]
fn check_declared_reads_every_dimension() {
    // The library's export of the model, so that this test depends on check_declared alone.
    let model = trained_gcn(&Placement::cpu());
    let proto = onnx::to_onnx(&model, &onnx::OnnxOptions::default()).unwrap();
    let inputs = proto.graph.unwrap().input;
    let x = || inputs.iter().find(|v| v.name == "x").unwrap().clone();
    let edge_index = || {
        inputs
            .iter()
            .find(|v| v.name == "edge_index")
            .unwrap()
            .clone()
    };
    let fixed = |n| Dimension {
        value: Some(DimensionValue::DimValue(n)),
    };
    let symbolic = |s: &str| Dimension {
        value: Some(DimensionValue::DimParam(s.into())),
    };
    // (what is wrong, the declared input, what check_declared is asked to accept)
    let mut cases: Vec<(&str, ValueInfoProto, i32, Vec<Option<i64>>)> = Vec::new();
    let mut v = x();
    dims_of(&mut v).push(fixed(1));
    cases.push((
        "x declared [num_nodes, 1433, 1], one dimension too many",
        v,
        FLOAT,
        vec![None, Some(1433)],
    ));
    let mut v = edge_index();
    dims_of(&mut v).remove(0);
    cases.push((
        "edge_index declared [num_edges], one dimension too few",
        v,
        INT64,
        vec![Some(2), None],
    ));
    let mut v = x();
    dims_of(&mut v).clear();
    cases.push((
        "x declared with no dimensions at all",
        v,
        FLOAT,
        vec![None, Some(1433)],
    ));
    let mut v = x();
    dims_of(&mut v)[0] = Dimension { value: None };
    cases.push((
        "x's dimension 0 declared without any size (neither fixed nor named)",
        v,
        FLOAT,
        vec![None, Some(1433)],
    ));
    let mut v = x();
    dims_of(&mut v)[1] = Dimension { value: None };
    cases.push((
        "x's dimension 1 declared without any size where 1433 is expected",
        v,
        FLOAT,
        vec![None, Some(1433)],
    ));
    let mut v = edge_index();
    dims_of(&mut v)[1] = symbolic("");
    cases.push((
        "edge_index's dimension 1 declared with an empty size name",
        v,
        INT64,
        vec![Some(2), None],
    ));
    let mut v = edge_index();
    dims_of(&mut v)[0] = symbolic("two");
    cases.push((
        "edge_index's dimension 0 symbolic ('two') where 2 is expected",
        v,
        INT64,
        vec![Some(2), None],
    ));
    let mut v = x();
    v.r#type = None;
    cases.push((
        "x declared with no tensor type",
        v,
        FLOAT,
        vec![None, Some(1433)],
    ));
    for (wrong, value, elem_type, expected) in cases {
        let name = value.name.clone();
        match check_declared(&[value], &name, elem_type, &expected) {
            Some(f) => assert_eq!(
                f.what, name,
                "{wrong}: the finding should be about '{name}'; got {f}"
            ),
            None => panic!("check_declared accepted {wrong}"),
        }
    }
    // ...and what is right is accepted, under any non-empty size name
    let mut v = edge_index();
    dims_of(&mut v)[1] = symbolic("E");
    assert!(
        check_declared(&[v], "edge_index", INT64, &[Some(2), None]).is_none(),
        "edge_index declared [2, E] is right: any non-empty size name is symbolic"
    );
    assert!(
        check_declared(&[x()], "edge_index", INT64, &[Some(2), None])
            .is_some_and(|f| f.what == "edge_index"),
        "a list without edge_index should give a finding that it is not declared"
    );
}

/// The Python that runs onnxruntime: `WORKBOOK_PYTHON` (a relative path is taken from the
/// repository root when it is not found here), else `python3`.
fn python() -> String {
    let chosen = std::env::var("WORKBOOK_PYTHON").unwrap_or_else(|_| "python3".into());
    let path = Path::new(&chosen);
    if path.is_relative() && chosen.contains('/') && !path.exists() {
        let from_root = repo_root().join(path);
        if from_root.exists() {
            return from_root.to_string_lossy().into_owned();
        }
    }
    chosen
}

#[test]
fn onnxruntime_agrees_on_two_graph_sizes() {
    let python = python();
    let ready = Command::new(&python)
        .args(["-c", "import onnxruntime, numpy, safetensors"])
        .output()
        .map(|o| o.status.success())
        .unwrap_or(false);
    assert!(
        ready,
        "onnxruntime is missing; from the repository root, install it (README.md) with:\n  python3 -m venv .venv && .venv/bin/pip install onnxruntime numpy safetensors\n  WORKBOOK_PYTHON=.venv/bin/python cargo grade 04-3\n(`{python}` cannot import onnxruntime, numpy and safetensors)"
    );

    let dir = tempfile::tempdir().unwrap();
    let (model, cora_graph, _) = export_cora_gcn(dir.path());
    // a second graph of another size: the edges of a 600-node synthetic CSBM graph, with rows
    // of Cora's features (the inputs the model was trained on)
    let mut config = CsbmConfig::new(600);
    config.seed = 3;
    let structure = datasets::csbm(&config, Placement::cpu()).unwrap();
    let rows: Vec<u32> = (0..600u32).map(|i| (i * 7) % 2708).collect();
    let rows = Tensor::new(rows.as_slice(), &Device::Cpu).unwrap();
    let cora_x = cora_graph.x().to_device(&Device::Cpu).unwrap();
    let x = cora_x.index_select(&rows, 0).unwrap();
    let small = Graph::new("csbm600", x, structure.edge_index().clone())
        .unwrap()
        .to_device(model.placement())
        .unwrap();
    let mut manifest = Vec::new();
    for (name, graph) in [("cora", &cora_graph), ("csbm600", &small)] {
        let inputs = format!("graph_{name}.safetensors");
        write_inputs(graph, &dir.path().join(&inputs))
            .unwrap_or_else(|e| panic!("write_inputs failed on {name}: {e}"));
        let logits: Tensor = model.forward_graph(graph).unwrap().logits;
        let expected = format!("expected_{name}.safetensors");
        tensor_file::write(
            &dir.path().join(&expected),
            &[("logits".to_string(), logits)],
            None,
        )
        .unwrap();
        manifest.push(serde_json::json!({
            "name": format!("GCN on {name} ({} nodes)", graph.num_nodes()),
            "model": "cora_gcn.onnx", "inputs": inputs, "expected": expected,
        }));
    }
    std::fs::write(
        dir.path().join("manifest.json"),
        serde_json::to_string_pretty(&manifest).unwrap(),
    )
    .unwrap();
    let script = repo_root().join("scripts/check_onnx.py");
    let out = Command::new(&python)
        .arg(&script)
        .arg(dir.path())
        .args(["--tol", "1e-4"])
        .output()
        .unwrap_or_else(|e| panic!("cannot run `{python} {}`: {e}", script.display()));
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let first_failure = stdout
        .lines()
        .find(|l| l.starts_with("FAIL"))
        .or_else(|| stderr.lines().rev().find(|l| !l.trim().is_empty()))
        .unwrap_or("no output");
    assert!(
        out.status.success(),
        "onnxruntime disagrees with Rust: {first_failure}\n{stdout}{stderr}"
    );
    let checked = stdout.lines().filter(|l| l.starts_with("ok ")).count();
    assert_eq!(
        checked, 2,
        "onnxruntime should have checked both graphs, it checked {checked}:\n{stdout}"
    );
    println!("{stdout}");
}
