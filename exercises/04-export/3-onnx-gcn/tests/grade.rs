//! Graded tests for exercise 04-3 (points in exercise.toml). Do not edit: the grader checks this
//! file against its checksum.
//!
//! Each test is a scenario (the `scenario` crate): it records what it observed, and a teacher's
//! grader compares that with the reference solution's. The grading run's challenge picks the
//! accelerator (`cuda:0`, or a simulated `sim:2` to `sim:7`), the graphs written and run (their
//! sizes and seeds), the sizes frozen into a signature and the sizes checked, so the findings and
//! the values cannot be written down in advance.
//!
//! `onnxruntime_agrees_on_two_graph_sizes` runs `scripts/check_onnx.py`, and onnxruntime on the
//! inputs `write_inputs` wrote, with the Python named by `WORKBOOK_PYTHON` (default `python3`),
//! which needs onnxruntime, numpy and safetensors.

use super::onnx_gcn::{check_declared, export_gcn, signature_problems, write_inputs, Finding};
use scenario::{Scenario, Tolerance};
use std::path::{Path, PathBuf};
use std::process::Command;
use workbook::candle_core::{DType, Device, Tensor};
use workbook::datasets::{self, CsbmConfig};
use workbook::device::accelerator_or_sim;
use workbook::export::onnx::{self, OPSET};
use workbook::export::onnx_proto::{
    Dimension, DimensionValue, ModelProto, ValueInfoProto, FLOAT, INT64,
};
use workbook::{tensor_file, Graph, Model, ModelConfig, Placement};

/// The repository root (both exercises/ and solutions/ are three levels below it).
fn repo_root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../..")
}

/// The accelerator: `cuda:0`, or `sim:2` to `sim:7` as the run's challenge picks.
fn accelerator(s: &Scenario) -> Placement {
    accelerator_or_sim(s.pick("accelerator", 2..8)).placement
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

/// What the judge compares of findings: what each is about, in order.
fn whats(found: &[Finding]) -> Vec<String> {
    found.iter().map(|f| f.what.clone()).collect()
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

fn export_cora_gcn(s: &Scenario, dir: &Path) -> (Model, Graph, ModelProto) {
    let gpu = accelerator(s);
    let model = trained_gcn(&gpu);
    let example = cora(&gpu);
    let path = dir.join("cora_gcn.onnx");
    let proto = export_gcn(&model, &example, &path).unwrap_or_else(|e| {
        panic!("export_gcn failed for a clean model and example on {gpu}: {e}")
    });
    (model, example, proto)
}

/// A GCN for Cora whose weights are the challenge's (not the trained ones), exported on the
/// accelerator with Cora as the example: what the file holds then depends on the challenge.
fn export_seeded_gcn(s: &Scenario, dir: &Path) -> ModelProto {
    let gpu = accelerator(s);
    let model = fresh_gcn(1433, 7, s.seed("exported model"), &gpu);
    let example = cora(&gpu);
    let path = dir.join("cora_gcn.onnx");
    export_gcn(&model, &example, &path)
        .unwrap_or_else(|e| panic!("export_gcn failed for a clean model and example on {gpu}: {e}"))
}

/// Each initializer (the weights the file holds) by name, as a digest: float32, little-endian.
fn initializer_digests(proto: &ModelProto) -> Vec<(String, Vec<f64>)> {
    let mut all: Vec<(String, Vec<f64>)> = proto
        .graph
        .iter()
        .flat_map(|g| &g.initializer)
        .map(|t| {
            let v: Vec<f32> = t
                .raw_data
                .chunks_exact(4)
                .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
                .chain(t.float_data.iter().copied())
                .collect();
            (t.name.clone(), digest(&v))
        })
        .collect();
    all.sort_by(|a, b| a.0.cmp(&b.0));
    all
}

/// A 2-layer GCN for a graph of `features` features and `classes` classes on `at`.
fn fresh_gcn(features: usize, classes: usize, seed: u64, at: &Placement) -> Model {
    Model::init(ModelConfig::gcn(features, 16, classes), seed, at)
        .expect("building the GCN")
        .0
}

/// A synthetic graph (CSBM) whose size and seed the challenge picks, on `at`.
fn some_graph(s: &Scenario, label: &str, nodes: std::ops::Range<usize>, at: &Placement) -> Graph {
    let mut config = CsbmConfig::new(s.pick(&format!("{label} nodes"), nodes));
    config.seed = s.seed(&format!("{label} graph"));
    datasets::csbm(&config, at.clone()).expect("generating the graph")
}

/// A graph of the challenge's size (CSBM edges) with rows of Cora's features, on `at`: an
/// example the Cora GCN can run on.
fn cora_like(s: &Scenario, label: &str, nodes: std::ops::Range<usize>, at: &Placement) -> Graph {
    let structure = some_graph(s, label, nodes, &Placement::cpu());
    let n = structure.num_nodes() as u32;
    let offset = s.pick(&format!("{label} feature rows"), 0..2708) as u32;
    let rows: Vec<u32> = (0..n).map(|i| (offset + i * 7) % 2708).collect();
    let rows = Tensor::new(rows.as_slice(), &Device::Cpu).unwrap();
    let cora_x = cora(&Placement::cpu()).x().index_select(&rows, 0).unwrap();
    Graph::new(label, cora_x, structure.edge_index().clone())
        .unwrap()
        .to_device(at)
        .unwrap()
}

#[test]
fn refuses_to_export_before_the_preflight_passes() {
    let s = scenario::start();
    let gpu = accelerator(&s);
    let dir = tempfile::tempdir().unwrap();
    let model = trained_gcn(&gpu);
    let on_cpu = cora_like(&s, "example", 30..2000, &Placement::cpu());
    let nodes = on_cpu.num_nodes();
    let path = dir.path().join("wrong_device.onnx");
    let result = export_gcn(&model, &on_cpu, &path);
    let named = result.as_ref().err().map(|e| {
        e.to_string().contains(&format!(
            "example input 'x' is on cpu but the model is on {gpu}"
        ))
    });
    s.observe(
        format!("example of {nodes} nodes on cpu, model on {gpu}: refused naming the example"),
        &named,
    );
    s.observe(
        format!("example of {nodes} nodes on cpu: written"),
        &path.exists(),
    );
    match result {
        Ok(_) => panic!(
            "export_gcn exported a model on {gpu} with its example on cpu: the pre-flight must refuse it"
        ),
        Err(e) => assert!(
            named == Some(true),
            "the error should be the pre-flight's, naming the example on cpu; got: {e}"
        ),
    }
    assert!(
        !path.exists(),
        "nothing may be written when the pre-flight fails, but {} exists",
        path.display()
    );
    // Another reason to refuse, as the challenge picks: half precision, or a NaN in a weight.
    let (why, refused) = if s.pick("second refusal", 0..2) == 0 {
        (
            "a half-precision model (exports are float32)",
            model.to_dtype(DType::F16).unwrap(),
        )
    } else {
        let mut tensors: std::collections::HashMap<String, Tensor> =
            model.named_parameters().into_iter().collect();
        let w = tensors["conv2.bias"].to_device(&Device::Cpu).unwrap();
        let mut values = w.to_vec1::<f32>().unwrap();
        let at = s.pick("nan at", 0..values.len());
        values[at] = f32::NAN;
        let w = Tensor::new(values.as_slice(), &Device::Cpu).unwrap();
        tensors.insert("conv2.bias".into(), w);
        let poisoned = Model::from_tensors(model.config().clone(), &tensors, &gpu).unwrap();
        ("a model holding a NaN in conv2.bias", poisoned)
    };
    let path = dir.path().join("refused.onnx");
    let result = export_gcn(&refused, &on_cpu.to_device(&gpu).unwrap(), &path);
    s.observe(
        format!("{why}, example of {nodes} nodes: refused, written"),
        &(result.is_err(), path.exists()),
    );
    assert!(
        result.is_err() && !path.exists(),
        "{why} must be refused by the pre-flight, and nothing written"
    );
}

#[test]
fn writes_float32_and_int64_inputs() {
    let s = scenario::start();
    let gpu = accelerator(&s);
    let graph = some_graph(&s, "inputs", 30..200, &gpu);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("inputs.safetensors");
    write_inputs(&graph, &path).unwrap_or_else(|e| panic!("write_inputs failed: {e}"));
    let file = tensor_file::read(&path, &Device::Cpu)
        .unwrap_or_else(|e| panic!("write_inputs wrote no readable safetensors file: {e}"));
    let mut names: Vec<&String> = file.tensors.keys().collect();
    names.sort();
    let x = file
        .tensors
        .get("x")
        .expect("the inputs file has no tensor 'x'");
    let ei = file
        .tensors
        .get("edge_index")
        .expect("the inputs file has no tensor 'edge_index'");
    // one record: the names are the same under every challenge, the tensors are the challenge's
    s.observe(
        "tensors written, x, edge_index",
        &(names.iter().map(|n| n.as_str()).collect::<Vec<_>>(), x, ei),
    );
    let (n, f, e) = (graph.num_nodes(), graph.num_features(), graph.num_edges());
    assert!(
        x.dtype() == DType::F32 && x.dims() == [n, f],
        "x must be float32 [{n}, {f}]; got {:?} {:?}",
        x.dtype(),
        x.dims()
    );
    assert!(
        ei.dtype() == DType::I64 && ei.dims() == [2, e],
        "edge_index must be int64 [2, {e}] (PyG's layout, the exported model's input type); got {:?} {:?}",
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
    let s = scenario::start();
    let dir = tempfile::tempdir().unwrap();
    // a GCN of the challenge's weights: the file's initializers are the challenge's
    let proto = export_seeded_gcn(&s, dir.path());
    let back = onnx::read(&dir.path().join("cora_gcn.onnx"))
        .unwrap_or_else(|e| panic!("export_gcn wrote no readable ONNX file at cora_gcn.onnx: {e}"));
    let found = signature_problems(&back, 1433, 7);
    let graph = back.graph.clone().unwrap();
    let accepted = (
        check_declared(&graph.input, "x", FLOAT, &[None, Some(1433)]).is_none(),
        check_declared(&graph.input, "edge_index", INT64, &[Some(2), None]).is_none(),
    );
    // One record: whether it returned what it wrote, the opset, the findings and what
    // check_declared accepts are the same under every challenge, the weights are not.
    s.observe_within(
        "returned what it wrote; opset; findings on the export; check_declared accepts x and edge_index; the file's initializers",
        &(
            (back == proto, back.opset_import[0].version),
            whats(&found),
            accepted,
            initializer_digests(&back),
        ),
        Tolerance {
            abs: 1e-6,
            rel: 1e-6,
        },
    );
    assert_eq!(back, proto, "export_gcn should return what it wrote");
    assert_eq!(
        back.opset_import[0].version, OPSET,
        "the file should use opset 18"
    );
    assert!(
        found.is_empty(),
        "the exported GCN's signature is right (x float32 [num_nodes, 1433], edge_index int64 [2, num_edges], logits [num_nodes, 7]); got {}",
        listed(&found)
    );
    assert!(
        accepted == (true, true),
        "check_declared should accept the exported inputs"
    );
    // the same file, checked for a model of other sizes (the challenge's): x and logits are wrong
    let features = s.pick("features checked", 100..1400);
    let classes = s.pick("classes checked", 2..7);
    let found = signature_problems(&back, features, classes);
    s.observe(
        format!("findings for {features} features and {classes} classes"),
        &whats(&found),
    );
    assert!(
        whats(&found) == ["x", "logits"],
        "checked for in_channels = {features} and {classes} classes, the file's x [num_nodes, 1433] and logits [num_nodes, 7] are wrong: expected one finding about x, then one about logits; got {}",
        listed(&found)
    );
}

#[test]
fn frozen_sizes_and_wrong_types_are_caught() {
    let s = scenario::start();
    let dir = tempfile::tempdir().unwrap();
    let (_, _, proto) = export_cora_gcn(&s, dir.path());
    // what torch.onnx.export writes without dynamic_axes: the example's sizes, frozen; which
    // sizes are frozen is the challenge's
    let which = 1 + s.pick("frozen", 0..7); // a non-empty subset of {x, edge_index, logits}
    let mut frozen = proto.clone();
    let mut expected = Vec::new();
    if which & 1 != 0 {
        set_dim(&mut frozen, "x", 0, DimensionValue::DimValue(2708));
        expected.push("x");
    }
    if which & 2 != 0 {
        set_dim(
            &mut frozen,
            "edge_index",
            1,
            DimensionValue::DimValue(10556),
        );
        expected.push("edge_index");
    }
    if which & 4 != 0 {
        set_dim(&mut frozen, "logits", 0, DimensionValue::DimValue(2708));
        expected.push("logits");
    }
    let found = signature_problems(&frozen, 1433, 7);
    s.observe(
        format!("findings with {} frozen", expected.join(", ")),
        &whats(&found),
    );
    assert!(
        whats(&found) == expected,
        "{} declared with Cora's sizes frozen (x [2708, 1433], edge_index [2, 10556], logits [2708, 7]) only take Cora-sized graphs: expected one finding about each, in the order x, edge_index, logits; got {}",
        expected.join(", "),
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
    let elem = [6, 1, 10][s.pick("edge_index element type", 0..3)]; // INT32, FLOAT, FLOAT16
    set_elem_type(&mut wrong, "edge_index", elem);
    let opset = s.pick("opset", 9..18) as i64;
    wrong.opset_import[0].version = opset;
    let found = signature_problems(&wrong, 1433, 7);
    let mut sorted = whats(&found);
    sorted.sort();
    s.observe(
        format!("findings with opset {opset} and element type {elem}"),
        &sorted,
    );
    assert!(
        sorted == ["edge_index", "opset", "x"],
        "x [num_nodes, features], edge_index of element type {elem} and opset {opset}: expected one finding about each of opset, x and edge_index; got {}",
        listed(&found)
    );
    // the model takes 1433 features, not the challenge's number
    let features = s.pick("features checked", 100..1400);
    let found = signature_problems(&proto, features, 7);
    s.observe(format!("findings for {features} features"), &whats(&found));
    assert!(
        found.len() == 1 && found[0].what == "x",
        "checked for in_channels = {features}, the file's x [num_nodes, 1433] is wrong: expected one finding about 'x'; got {}",
        listed(&found)
    );
}

#[test]
fn check_declared_reads_every_dimension() {
    let s = scenario::start();
    // The library's export of a GCN of the challenge's width, so that this test depends on
    // check_declared alone.
    let width = s.pick("features", 8..2000) as i64;
    let model = fresh_gcn(width as usize, 7, s.seed("model"), &Placement::cpu());
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
    let mut cases: Vec<(String, ValueInfoProto, i32, Vec<Option<i64>>)> = Vec::new();
    let mut v = x();
    dims_of(&mut v).push(fixed(1));
    cases.push((
        format!("x declared [num_nodes, {width}, 1], one dimension too many"),
        v,
        FLOAT,
        vec![None, Some(width)],
    ));
    let mut v = edge_index();
    dims_of(&mut v).remove(0);
    cases.push((
        "edge_index declared [num_edges], one dimension too few".into(),
        v,
        INT64,
        vec![Some(2), None],
    ));
    let mut v = x();
    dims_of(&mut v).clear();
    cases.push((
        "x declared with no dimensions at all".into(),
        v,
        FLOAT,
        vec![None, Some(width)],
    ));
    let mut v = x();
    dims_of(&mut v)[0] = Dimension { value: None };
    cases.push((
        "x's dimension 0 declared without any size (neither fixed nor named)".into(),
        v,
        FLOAT,
        vec![None, Some(width)],
    ));
    let mut v = x();
    dims_of(&mut v)[1] = Dimension { value: None };
    cases.push((
        format!("x's dimension 1 declared without any size where {width} is expected"),
        v,
        FLOAT,
        vec![None, Some(width)],
    ));
    let other = width + 1 + s.pick("other width", 0..100) as i64;
    cases.push((
        format!("x declared [num_nodes, {width}] where {other} is expected"),
        x(),
        FLOAT,
        vec![None, Some(other)],
    ));
    let mut v = edge_index();
    dims_of(&mut v)[1] = symbolic("");
    cases.push((
        "edge_index's dimension 1 declared with an empty size name".into(),
        v,
        INT64,
        vec![Some(2), None],
    ));
    let mut v = edge_index();
    dims_of(&mut v)[0] = symbolic("two");
    cases.push((
        "edge_index's dimension 0 symbolic ('two') where 2 is expected".into(),
        v,
        INT64,
        vec![Some(2), None],
    ));
    let mut v = x();
    v.r#type = None;
    cases.push((
        "x declared with no tensor type".into(),
        v,
        FLOAT,
        vec![None, Some(width)],
    ));
    // in an order of the challenge's, so that no answer can be given by position
    let start = s.pick("first case", 0..cases.len());
    cases.rotate_left(start);
    let mut seen = Vec::new();
    for (wrong, value, elem_type, expected) in &cases {
        let name = value.name.clone();
        let found = check_declared(std::slice::from_ref(value), &name, *elem_type, expected);
        seen.push(found.as_ref().map(|f| f.what.clone()));
        match found {
            Some(f) => assert_eq!(
                f.what, name,
                "{wrong}: the finding should be about '{name}'; got {f}"
            ),
            None => panic!("check_declared accepted {wrong}"),
        }
    }
    // ...and what is right is accepted, under any non-empty size name
    let name = format!("E{}", s.pick("size name", 0..1000));
    let mut v = edge_index();
    dims_of(&mut v)[1] = symbolic(&name);
    let right = check_declared(&[v], "edge_index", INT64, &[Some(2), None]);
    let x_right = check_declared(&[x()], "x", FLOAT, &[None, Some(width)]);
    let missing = check_declared(&[x()], "edge_index", INT64, &[Some(2), None]);
    // One record: the findings on what is right and on a missing input are the same under every
    // challenge; those on the wrong declarations come in the challenge's order.
    s.observe(
        format!("findings on the wrong declarations (x of {width} features, from case {start}), on edge_index [2, named], on x as exported, on a list without edge_index"),
        &(
            &seen,
            right.as_ref().map(|f| f.what.clone()),
            x_right.as_ref().map(|f| f.what.clone()),
            missing.as_ref().map(|f| f.what.clone()),
        ),
    );
    assert!(
        right.is_none(),
        "edge_index declared [2, {name}] is right: any non-empty size name is symbolic"
    );
    assert!(
        x_right.is_none(),
        "x declared [num_nodes, {width}] is right for {width} features"
    );
    assert!(
        missing.is_some_and(|f| f.what == "edge_index"),
        "a list without edge_index should give a finding that it is not declared"
    );
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

/// Runs the ONNX model at `model` in onnxruntime on the inputs file `inputs` as it is (no
/// conversion: an input of the wrong type is refused, as a serving runtime refuses it) and
/// returns its logits.
fn onnxruntime_logits(python: &str, model: &Path, inputs: &Path, out: &Path) -> Tensor {
    const RUN: &str = r#"
import sys
import onnxruntime as ort
from safetensors.numpy import load_file, save_file
opts = ort.SessionOptions()
opts.log_severity_level = 3
sess = ort.InferenceSession(sys.argv[1], opts, providers=["CPUExecutionProvider"])
inputs = load_file(sys.argv[2])
feeds = {i.name: inputs[i.name] for i in sess.get_inputs()}
save_file({"logits": sess.run(["logits"], feeds)[0]}, sys.argv[3])
"#;
    let run = Command::new(python)
        .args(["-c", RUN])
        .arg(model)
        .arg(inputs)
        .arg(out)
        .output()
        .unwrap_or_else(|e| panic!("cannot run `{python}`: {e}"));
    let stderr = String::from_utf8_lossy(&run.stderr);
    assert!(
        run.status.success(),
        "onnxruntime could not run the export on the inputs of {}: {}",
        inputs.display(),
        stderr
            .lines()
            .rev()
            .find(|l| !l.trim().is_empty())
            .unwrap_or("no output")
    );
    let file = tensor_file::read(out, &Device::Cpu).expect("reading onnxruntime's logits");
    file.tensors["logits"].clone()
}

#[test]
fn onnxruntime_agrees_on_two_graph_sizes() {
    let s = scenario::start();
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
    let (model, cora_graph, _) = export_cora_gcn(&s, dir.path());
    // a second graph of another size, the challenge's: the edges of a synthetic CSBM graph,
    // with rows of Cora's features (the inputs the model was trained on)
    let small = cora_like(&s, "csbm", 300..900, model.placement());
    let mut manifest = Vec::new();
    // Both digests in one record: on Cora (the trained model, the same under every challenge)
    // alone it could be written in advance; the CSBM graph is the challenge's.
    let mut digests = Vec::new();
    for (name, graph) in [("cora", &cora_graph), ("csbm", &small)] {
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
        let theirs = onnxruntime_logits(
            &python,
            &dir.path().join("cora_gcn.onnx"),
            &dir.path().join(&inputs),
            &dir.path().join(format!("ort_{name}.safetensors")),
        );
        let values = theirs.flatten_all().unwrap().to_vec1::<f32>().unwrap();
        digests.push((
            format!("{name} ({} nodes)", graph.num_nodes()),
            digest(&values),
        ));
    }
    s.observe_within(
        "onnxruntime's logits on cora and on csbm",
        &digests,
        Tolerance {
            abs: 1e-3,
            rel: 1e-4,
        },
    );
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
