//! Export (chapter 4): pre-flight, precision, safetensors for PyG, and ONNX checked by
//! onnxruntime (`scripts/check_onnx.py`).
//!
//! The ONNX test writes models, inputs and the Rust outputs into `WORKBOOK_ONNX_OUT` (or a
//! temporary directory) and runs the script with `WORKBOOK_PYTHON` (default `python3`) when
//! that Python can import onnxruntime. With `WORKBOOK_REQUIRE_ONNXRUNTIME=1` (CI) a missing
//! onnxruntime is a failure; otherwise the check is skipped loudly.

use crate::common;

use common::{fixtures_dir, max_abs_diff};
use std::path::{Path, PathBuf};
use std::process::Command;
use workbook::candle_core::{DType, Device, Tensor};
use workbook::datasets::{self, csbm::CsbmConfig};
use workbook::export::preflight::{Example, Preflight};
use workbook::export::{onnx, precision, preflight, safetensors as st_export};
use workbook::{
    checkpoint, tensor_file, EdgeIndex, GatV2Config, GcnConfig, Graph, LayerConfig, Model,
    ModelConfig, Placement, WorkbookError,
};

fn cpu() -> Placement {
    Placement::cpu()
}

fn cora() -> Graph {
    datasets::load("cora", None, cpu()).unwrap()
}

fn trained(model: &str) -> Model {
    let path = fixtures_dir().join(format!("cora_{model}_trained.safetensors"));
    let file = tensor_file::read(&path, &Device::Cpu).unwrap();
    let config = match model {
        "gcn" => ModelConfig::gcn(1433, 16, 7),
        _ => ModelConfig::gatv2(1433, 8, 8, 7),
    };
    Model::from_tensors(config, &file.tensors, cpu()).unwrap()
}

fn preflight_err(model: &Model, example: &Example, training: bool) -> Vec<String> {
    match Preflight::new(model).training(training).check(example) {
        Err(WorkbookError::Preflight(p)) => p,
        other => panic!("expected a pre-flight failure, got {other:?}"),
    }
}

fn has(problems: &[String], needle: &str) -> bool {
    problems.iter().any(|p| p.contains(needle))
}

#[test]
fn preflight_catches_each_seeded_problem() {
    let graph = datasets::karate(cpu()).unwrap();
    let config = ModelConfig::gcn(34, 8, 4);
    let (model, _) = Model::init(config.clone(), 0, cpu()).unwrap();

    // clean: five checks pass and are reported
    let report = preflight::check(&model, &Example::from_graph(&graph)).unwrap();
    assert_eq!(report.checks.len(), 5, "{:?}", report.checks);
    assert!(report.checks.iter().any(|c| c.starts_with("forward pass")));

    // parameters on sim:1, example on cpu: both example inputs named
    let sim = model.to_device(Placement::sim(1)).unwrap();
    let p = preflight_err(&sim, &Example::from_graph(&graph), false);
    assert!(
        has(&p, "example input 'x' is on cpu but the model is on sim:1"),
        "{p:?}"
    );
    assert!(
        has(
            &p,
            "example input 'edge_index' is on cpu but the model is on sim:1"
        ),
        "{p:?}"
    );
    assert!(has(&p, "forward pass not attempted"), "{p:?}");

    // half precision model
    let half = model.to_dtype(DType::F16).unwrap();
    let p = preflight_err(&half, &Example::from_graph(&graph), false);
    assert!(has(&p, "parameter 'conv1.lin.weight' is F16"), "{p:?}");
    assert!(has(&p, "model.to_dtype(DType::F32)"), "{p:?}");

    // training mode
    let p = preflight_err(&model, &Example::from_graph(&graph), true);
    assert!(has(&p, "training mode"), "{p:?}");
    assert!(has(&p, "model.eval()"), "{p:?}");

    // wrong input dtype
    let x16 = graph.x().to_dtype(DType::F16).unwrap();
    let p = preflight_err(&model, &Example::new(&x16, graph.edge_index()), false);
    assert!(has(&p, "example input 'x' is F16"), "{p:?}");

    // wrong feature width and wrong node count
    let x_wide = Tensor::zeros((34, 35), DType::F32, &Device::Cpu).unwrap();
    let p = preflight_err(&model, &Example::new(&x_wide, graph.edge_index()), false);
    assert!(
        has(
            &p,
            "35 features per node but the model takes in_channels = 34"
        ),
        "{p:?}"
    );
    let x_short = Tensor::zeros((30, 34), DType::F32, &Device::Cpu).unwrap();
    let p = preflight_err(&model, &Example::new(&x_short, graph.edge_index()), false);
    assert!(has(&p, "30 rows but edge_index is for 34 nodes"), "{p:?}");

    // several problems at once are all listed
    let p = preflight_err(
        &half.to_device(Placement::sim(1)).unwrap(),
        &Example::new(&x16, graph.edge_index()),
        true,
    );
    assert!(p.len() >= 5, "{p:?}");

    // stale buffer: parameters moved, GCN cache left behind
    let mut cfg = config;
    for l in &mut cfg.layers {
        if let LayerConfig::Gcn(c) = l {
            c.cached = true;
        }
    }
    let (cached, _) = Model::init(cfg, 0, cpu()).unwrap();
    cached.forward_graph(&graph).unwrap();
    let stale = cached.parameters_to_device(Placement::sim(1)).unwrap();
    let sim_graph = graph.to_device(Placement::sim(1)).unwrap();
    let p = preflight_err(&stale, &Example::from_graph(&sim_graph), false);
    assert!(
        has(&p, "buffer 'conv1._cached_edge_index' is on cpu"),
        "{p:?}"
    );
}

#[test]
fn half_precision_round_trip_and_cora_accuracy() {
    let graph = cora();
    for name in ["gcn", "gatv2"] {
        let model = trained(name);
        // f32 -> f16 -> f32: every weight moves by at most its f16 rounding
        let back = model
            .to_dtype(DType::F16)
            .unwrap()
            .to_dtype(DType::F32)
            .unwrap();
        assert_eq!(back.dtype(), DType::F32);
        for ((n, a), (m, b)) in model.named_parameters().iter().zip(back.named_parameters()) {
            assert_eq!(n, &m);
            let rel = ((a - &b).unwrap().abs().unwrap()
                - (a.abs().unwrap() * (1.0 / 2048.0)).unwrap())
            .unwrap()
            .flatten_all()
            .unwrap()
            .max(0)
            .unwrap()
            .to_scalar::<f32>()
            .unwrap();
            assert!(
                rel <= 1e-7,
                "{name} {n}: round trip error exceeds f16 rounding by {rel}"
            );
        }
        for (dtype, tol) in [
            (DType::F16, precision::F16_ACCURACY_TOLERANCE),
            (DType::BF16, precision::BF16_ACCURACY_TOLERANCE),
        ] {
            let r = precision::compare(&model, &graph, dtype).unwrap();
            println!(
                "cora {name} {dtype:?}: test accuracy f32 {:.4} vs {:.4} ({} nodes), agreement {:.4}, max |logit diff| {:.3e}",
                r.accuracy_f32, r.accuracy_converted, r.nodes, r.agreement, r.max_logit_diff
            );
            assert_eq!(r.nodes, 1000);
            assert!(
                (r.accuracy_f32 - r.accuracy_converted).abs() <= tol,
                "{name} {dtype:?}: accuracy {} vs f32 {} (tolerance {tol})",
                r.accuracy_converted,
                r.accuracy_f32
            );
            assert!(
                r.agreement > 0.98,
                "{name} {dtype:?}: agreement {}",
                r.agreement
            );
        }
        // the half model really computes in f16
        let half = model.to_dtype(DType::F16).unwrap();
        let x = graph.x().to_dtype(DType::F16).unwrap();
        let out = half.forward(&x, graph.edge_index(), None).unwrap();
        assert_eq!(out.logits.dtype(), DType::F16);
    }
}

#[test]
fn safetensors_export_round_trips_with_pyg_names() {
    let dir = tempfile::tempdir().unwrap();
    let graph = cora();
    for name in ["gcn", "gatv2"] {
        let model = trained(name);
        let path = dir.path().join(format!("cora_{name}.safetensors"));
        let json = st_export::export(&model, &path).unwrap();
        // the names are PyG's, the values unchanged
        let file = tensor_file::read(&path, &Device::Cpu).unwrap();
        let mut names: Vec<_> = file.tensors.keys().cloned().collect();
        names.sort();
        let mut expected: Vec<_> = model
            .config()
            .parameter_shapes()
            .into_iter()
            .map(|(n, _)| n)
            .collect();
        expected.sort();
        assert_eq!(names, expected);
        if name == "gcn" {
            assert!(names.contains(&"conv1.lin.weight".to_string()));
        } else {
            assert!(names.contains(&"conv2.lin_r.bias".to_string()));
        }
        for (n, t) in model.named_parameters() {
            assert_eq!(max_abs_diff(&t, &file.tensors[&n]), 0.0, "{n}");
            assert_eq!(file.tensors[&n].dtype(), DType::F32);
        }
        // the side config describes the architecture
        let config = ModelConfig::from_json(&std::fs::read_to_string(&json).unwrap()).unwrap();
        assert_eq!(&config, model.config());
        // and both load back to the same predictions
        let back = checkpoint::load_with_config(&path, config, cpu()).unwrap();
        let a = model.forward_graph(&graph).unwrap().logits;
        let b = back.forward_graph(&graph).unwrap().logits;
        assert_eq!(max_abs_diff(&a, &b), 0.0);
    }
    // a half model is refused with the fix
    let err = st_export::export(
        &trained("gcn").to_dtype(DType::BF16).unwrap(),
        &dir.path().join("h.safetensors"),
    )
    .unwrap_err()
    .to_string();
    assert!(err.contains("to_dtype(DType::F32)"), "{err}");
}

#[test]
fn corrupt_or_truncated_files_give_clear_errors() {
    let dir = tempfile::tempdir().unwrap();
    let model = trained("gcn");
    let onnx_path = dir.path().join("gcn.onnx");
    onnx::write(&model, &onnx_path, &onnx::OnnxOptions::default()).unwrap();
    let bytes = std::fs::read(&onnx_path).unwrap();
    let proto = onnx::read(&onnx_path).unwrap();
    assert_eq!(proto.opset_import[0].version, onnx::OPSET);

    let cut = dir.path().join("cut.onnx");
    std::fs::write(&cut, &bytes[..bytes.len() / 2]).unwrap();
    let err = onnx::read(&cut).unwrap_err().to_string();
    assert!(
        err.contains("cut.onnx") && err.contains("truncated or corrupt"),
        "{err}"
    );

    let junk = dir.path().join("junk.onnx");
    std::fs::write(&junk, b"this is not protobuf at all \xff\xff\xff").unwrap();
    let err = onnx::read(&junk).unwrap_err().to_string();
    assert!(
        err.contains("junk.onnx") && err.contains("corrupt"),
        "{err}"
    );

    let empty = dir.path().join("empty.onnx");
    std::fs::write(&empty, b"").unwrap();
    assert!(onnx::read(&empty)
        .unwrap_err()
        .to_string()
        .contains("is empty"));

    let missing = onnx::read(&dir.path().join("nope.onnx"))
        .unwrap_err()
        .to_string();
    assert!(missing.contains("nope.onnx"), "{missing}");

    let st = dir.path().join("gcn.safetensors");
    st_export::export(&model, &st).unwrap();
    let bytes = std::fs::read(&st).unwrap();
    let cut = dir.path().join("cut.safetensors");
    std::fs::write(&cut, &bytes[..bytes.len() - 100]).unwrap();
    let err = checkpoint::load(&cut, cpu()).unwrap_err().to_string();
    assert!(err.contains("cut.safetensors"), "{err}");
    let mut bad = bytes.clone();
    bad[..8].copy_from_slice(&u64::MAX.to_le_bytes());
    let corrupt = dir.path().join("corrupt.safetensors");
    std::fs::write(&corrupt, &bad).unwrap();
    let err = checkpoint::load(&corrupt, cpu()).unwrap_err().to_string();
    assert!(err.contains("corrupt.safetensors"), "{err}");
    println!("truncated safetensors: {err}");
}

/// A synthetic graph of another size: CSBM edges, plus two self-loops and a duplicate edge so
/// the exported self-loop handling is exercised, and Cora-like features (rows of Cora's `x`
/// drawn at random) so the Cora-trained models see inputs like their training data.
fn synthetic(nodes: usize, seed: u64, cora: &Graph) -> Graph {
    let mut c = CsbmConfig::new(nodes);
    c.features = 1433;
    c.classes = 7;
    c.seed = seed;
    let g = datasets::csbm::csbm(&c, cpu()).unwrap();
    let ei = g.edge_index();
    let mut src: Vec<i64> = ei.sources_host().iter().map(|&v| v as i64).collect();
    let mut dst: Vec<i64> = ei.targets_host().iter().map(|&v| v as i64).collect();
    src.extend([0, 3, src[0]]);
    dst.extend([0, 3, dst[0]]);
    let ei = EdgeIndex::new(&src, &dst, nodes, cpu()).unwrap();
    let mut state = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    let rows: Vec<u32> = (0..nodes)
        .map(|_| {
            state = state
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            ((state >> 33) % cora.num_nodes() as u64) as u32
        })
        .collect();
    let rows = Tensor::new(rows.as_slice(), &Device::Cpu).unwrap();
    let x = cora.x().index_select(&rows, 0).unwrap();
    Graph::new(format!("csbm{nodes}"), x, ei).unwrap()
}

fn write_inputs(dir: &Path, name: &str, g: &Graph) -> String {
    let file = format!("graph_{name}.safetensors");
    let ei = g.edge_index().to_tensor(&Device::Cpu).unwrap();
    tensor_file::write(
        &dir.join(&file),
        &[("x".into(), g.x().clone()), ("edge_index".into(), ei)],
        None,
    )
    .unwrap();
    file
}

fn onnx_out_dir() -> (PathBuf, Option<tempfile::TempDir>) {
    match std::env::var_os("WORKBOOK_ONNX_OUT") {
        Some(d) => {
            let d = PathBuf::from(d);
            std::fs::create_dir_all(&d).unwrap();
            (d, None)
        }
        None => {
            let t = tempfile::tempdir().unwrap();
            (t.path().to_path_buf(), Some(t))
        }
    }
}

#[test]
fn onnx_export_matches_onnxruntime_on_several_graph_sizes() {
    let (dir, _keep) = onnx_out_dir();
    let cora_graph = cora();
    let graphs = [
        ("csbm50".to_string(), synthetic(50, 1, &cora_graph)),
        ("csbm3000".to_string(), synthetic(3000, 2, &cora_graph)),
        ("cora".to_string(), cora_graph),
    ];
    let gcn1 = {
        let mut c = GcnConfig::new(1433, 7);
        c.improved = true;
        ModelConfig::from_json(&serde_json::to_string(&LayerConfig::Gcn(c)).unwrap()).unwrap()
    };
    let gat1 = ModelConfig::from_json(
        &serde_json::to_string(&LayerConfig::GatV2(GatV2Config::new(1433, 4).heads(2))).unwrap(),
    )
    .unwrap();
    let models: Vec<(&str, Model, bool)> = vec![
        ("gcn1", Model::init(gcn1, 3, cpu()).unwrap().0, false),
        ("gatv2_1", Model::init(gat1, 4, cpu()).unwrap().0, true),
        ("gcn2_cora", trained("gcn"), false),
        ("gatv2_2_cora", trained("gatv2"), true),
    ];
    let inputs: Vec<String> = graphs
        .iter()
        .map(|(n, g)| write_inputs(&dir, n, g))
        .collect();
    let mut manifest = Vec::new();
    for (name, model, attention) in &models {
        // pre-flight on Cora, the export example
        let cora_graph = &graphs[2].1;
        preflight::check(model, &Example::from_graph(cora_graph)).unwrap();
        let file = format!("{name}.onnx");
        let proto = onnx::write(
            model,
            &dir.join(&file),
            &onnx::OnnxOptions {
                attention: *attention,
                ..Default::default()
            },
        )
        .unwrap();
        let back = onnx::read(&dir.join(&file)).unwrap();
        assert_eq!(back, proto, "{name}: the file decodes to what was written");
        let graph = back.graph.unwrap();
        for (pname, _) in model.named_parameters() {
            assert!(
                graph.initializer.iter().any(|t| t.name == pname),
                "{name}: no initializer {pname}"
            );
        }
        for op in graph.node.iter().map(|n| n.op_type.as_str()) {
            assert!(!op.is_empty());
        }
        for ((gname, g), input) in graphs.iter().zip(&inputs) {
            let out = model.forward_graph(g).unwrap();
            let mut tensors = vec![("logits".to_string(), out.logits.clone())];
            if *attention {
                let first = &out.attention[0].1;
                tensors.push((
                    "attention_edge_index".into(),
                    first.edge_index.to_tensor(&Device::Cpu).unwrap(),
                ));
                for (lname, a) in &out.attention {
                    // a bare layer has no name in Rust; the ONNX output calls it `conv`
                    let lname = if lname.is_empty() {
                        "conv"
                    } else {
                        lname.as_str()
                    };
                    tensors.push((format!("attention_{lname}"), a.weights.clone()));
                }
            }
            let expected = format!("{name}__{gname}.safetensors");
            tensor_file::write(&dir.join(&expected), &tensors, None).unwrap();
            manifest.push(serde_json::json!({
                "name": format!("{name} on {gname}"), "model": file, "inputs": input, "expected": expected,
            }));
        }
    }
    std::fs::write(
        dir.join("manifest.json"),
        serde_json::to_string_pretty(&manifest).unwrap(),
    )
    .unwrap();
    assert_eq!(manifest.len(), 12);

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
        eprintln!("\n*** SKIPPED the onnxruntime check: `{python}` cannot import onnxruntime/numpy/safetensors. ***");
        eprintln!("*** Install them (pip install onnxruntime numpy safetensors) and set WORKBOOK_PYTHON. ***\n");
        return;
    }
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../scripts/check_onnx.py");
    let out = Command::new(&python)
        .arg(&script)
        .arg(&dir)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    println!("{stdout}{}", String::from_utf8_lossy(&out.stderr));
    assert!(
        out.status.success(),
        "onnxruntime disagrees with Rust (see above)"
    );
    assert_eq!(
        stdout.lines().filter(|l| l.starts_with("ok ")).count(),
        12,
        "{stdout}"
    );
}

#[test]
fn the_export_reads_parameters_through_the_ledger_and_refuses_half_precision_in_one_sentence() {
    let ledger = workbook::ledger::Ledger::new();
    let sim = Placement::sim(3).with_ledger(&ledger);
    let (model, _) = Model::init(ModelConfig::gcn(34, 8, 4), 0, &sim).unwrap();
    ledger.clear();
    onnx::to_onnx(&model, &onnx::OnnxOptions::default()).unwrap();
    // one copy to the host per parameter, named as the parameter, with its size
    let copies: Vec<(String, String, String, u64)> = ledger
        .transfers()
        .iter()
        .map(|t| (t.what.clone(), t.from.clone(), t.to.clone(), t.bytes))
        .collect();
    let expected: Vec<(String, String, String, u64)> = model
        .named_parameters()
        .iter()
        .map(|(n, t)| {
            (
                n.clone(),
                "sim:3".into(),
                "cpu".into(),
                4 * t.elem_count() as u64,
            )
        })
        .collect();
    assert_eq!(copies, expected);
    // the float32 rule: the same sentence from the ONNX export, the safetensors export and the
    // pre-flight
    let half = model.to_dtype(DType::F16).unwrap();
    let want = "parameter 'conv1.lin.weight' is F16; exports are float32: convert with model.to_dtype(DType::F32) (PyTorch: model.float())";
    let onnx_err = onnx::to_onnx(&half, &onnx::OnnxOptions::default()).unwrap_err();
    assert!(matches!(
        onnx_err,
        WorkbookError::Float32 {
            found: DType::F16,
            ..
        }
    ));
    assert_eq!(onnx_err.to_string(), want);
    let dir = tempfile::tempdir().unwrap();
    let st_err = st_export::export(&half, &dir.path().join("m.safetensors")).unwrap_err();
    assert_eq!(st_err.to_string(), want);
    let graph = datasets::karate(&sim).unwrap();
    let problems = preflight_err(&half, &Example::from_graph(&graph), false);
    assert!(problems.iter().any(|p| p == want), "{problems:?}");
}

#[test]
fn the_varmap_init_returns_is_the_model_s_own() {
    let (model, vars) = Model::init(ModelConfig::gcn(34, 8, 4), 0, cpu()).unwrap();
    let own = model.vars().unwrap();
    let map = vars.data().lock().unwrap();
    assert_eq!(own.len(), map.len());
    for (name, var) in &own {
        // the same variable: a write through one is seen by the other
        let in_map = &map[name];
        var.set(&var.as_tensor().ones_like().unwrap()).unwrap();
        assert_eq!(
            max_abs_diff(in_map.as_tensor(), &var.as_tensor().ones_like().unwrap()),
            0.0,
            "{name}"
        );
    }
    // and the model's tensors are those variables
    for (name, t) in model.named_parameters() {
        assert_eq!(max_abs_diff(&t, &t.ones_like().unwrap()), 0.0, "{name}");
    }
}
