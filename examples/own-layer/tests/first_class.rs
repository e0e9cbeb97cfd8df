//! A layer of this crate takes the path the built-in layers take, with the workbook's public API
//! only: a two-layer GIN on Cora, trained by `Trainer`, saved, reloaded through a registry that
//! knows its kind, replicated by `DataParallel`, pre-flighted, exported to ONNX, and onnxruntime's
//! output compared with the model's own forward pass.
//!
//! The onnxruntime check runs `scripts/check_onnx.py` with `WORKBOOK_PYTHON` (default `python3`)
//! when that Python can import onnxruntime, numpy and safetensors; with
//! `WORKBOOK_REQUIRE_ONNXRUNTIME=1` (CI) a missing onnxruntime is a failure, otherwise the check
//! is skipped, saying so.

use own_layer::GinConfig;
use std::path::{Path, PathBuf};
use std::process::Command;
use workbook::candle_core::{DType, Tensor};
use workbook::export::onnx::{self, OnnxOptions};
use workbook::export::preflight::{self, Example};
use workbook::layers::{LayerConfig, LayerRegistry};
use workbook::parallel::DataParallel;
use workbook::train::{TrainConfig, Trainer};
use workbook::{
    checkpoint, datasets, tensor_file, Graph, Model, ModelConfig, Placement, WorkbookError,
};

fn gin(features: usize, classes: usize) -> ModelConfig {
    ModelConfig::new(vec![
        LayerConfig::new(GinConfig::new(features, 16)),
        LayerConfig::new(GinConfig::new(16, classes)),
    ])
    .dropout(0.5)
}

fn registry() -> LayerRegistry {
    LayerRegistry::builtin().with::<GinConfig>("GINConv")
}

fn max_abs_diff(a: &Tensor, b: &Tensor) -> f32 {
    (a - b)
        .unwrap()
        .abs()
        .unwrap()
        .flatten_all()
        .unwrap()
        .max(0)
        .unwrap()
        .to_scalar::<f32>()
        .unwrap()
}

#[test]
fn a_layer_of_this_crate_trains_saves_loads_replicates_and_exports() {
    let cpu = Placement::cpu();
    let graph = datasets::load("cora", None, &cpu).unwrap();
    let config = gin(graph.num_features(), graph.num_classes());
    assert!(matches!(config.layers[0], LayerConfig::Custom(_)));

    // trained by the library's trainer
    let recipe = TrainConfig {
        epochs: 60,
        ..TrainConfig::gcn()
    };
    let mut trainer = Trainer::new(config.clone(), &graph, &recipe).unwrap();
    let mut history = Vec::new();
    for _ in 0..recipe.epochs {
        history.push(trainer.epoch(&graph).unwrap());
    }
    let (first, last) = (&history[0], history.last().unwrap());
    assert!(
        last.loss < first.loss / 2.0,
        "the loss should fall: {} → {}",
        first.loss,
        last.loss
    );
    // Cora's 7 classes: a guess is right 1 time in 7, two of these layers about 3 times in 4
    assert!(last.test_accuracy > 0.6, "{last:?}");
    let model = trainer.into_report().model;
    println!("GIN on Cora after {} epochs: {last:?}", recipe.epochs);

    // saved, and read back with the kind registered (and not without)
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("gin.safetensors");
    checkpoint::save(&model, &path).unwrap();
    let err = checkpoint::load(&path, &cpu).unwrap_err();
    let msg = err.to_string();
    assert!(
        msg.contains("unknown layer 'GINConv'") && msg.contains("with::<YourConfig>(\"GINConv\")"),
        "{msg}"
    );
    let back = checkpoint::load_with(&path, &cpu, &registry()).unwrap();
    assert_eq!(back.config(), model.config());
    let (ours, theirs) = (model.named_parameters(), back.named_parameters());
    assert_eq!(ours.len(), 6);
    for ((n, a), (m, b)) in ours.iter().zip(&theirs) {
        assert_eq!(n, m);
        assert_eq!(max_abs_diff(a, b), 0.0, "{n}");
    }
    let logits = model.forward_graph(&graph).unwrap().logits;
    println!(
        "largest |logit|: {}",
        logits
            .abs()
            .unwrap()
            .max_all()
            .unwrap()
            .to_scalar::<f32>()
            .unwrap()
    );
    assert_eq!(
        max_abs_diff(&logits, &back.forward_graph(&graph).unwrap().logits),
        0.0
    );
    // and trainable again: its parameters are the model's own variables
    assert_eq!(back.vars().unwrap().len(), 6);

    // replicated on two simulated devices, one step, replicas still in sync
    let devices = [Placement::sim(1), Placement::sim(2)];
    let mut dp = DataParallel::new(&back, &devices, &recipe).unwrap();
    for (replica, at) in dp.replicas().iter().zip(&devices) {
        assert_eq!(replica.placement(), at);
        assert_eq!(replica.layers()[0].as_graph_layer().layer_type(), "GINConv");
    }
    let loader = workbook::loader::NeighborLoader::new(
        &graph,
        workbook::loader::LoaderConfig::new(&[5, 5], 64),
    )
    .unwrap();
    let batches: Vec<_> = loader.batches(0).take(2).collect::<Result<_, _>>().unwrap();
    let step = dp.step(&dp.scatter(&batches).unwrap()).unwrap();
    assert!(step.loss().unwrap().is_finite());
    assert!(dp.check_in_sync().unwrap().in_sync);

    // pre-flighted and exported; onnxruntime gives the model's own logits
    let report = preflight::check(&back, &Example::from_graph(&graph)).unwrap();
    assert!(report.checks.len() >= 5, "{:?}", report.checks);
    let onnx_path = dir.path().join("gin.onnx");
    let proto = onnx::write(&back, &onnx_path, &OnnxOptions::default()).unwrap();
    let graph_proto = proto.graph.as_ref().unwrap();
    for name in ["conv1.lin.weight", "conv1.eps", "conv2.lin.bias"] {
        assert!(
            graph_proto.initializer.iter().any(|t| t.name == name),
            "{name} is not an initializer"
        );
    }
    check_with_onnxruntime(dir.path(), &graph, &logits);
}

#[test]
fn its_own_checks_and_the_registrys_hold() {
    // a config the layer's own validation refuses, at the boundary
    let mut bad = GinConfig::new(4, 2);
    bad.eps = f64::NAN;
    let Err(err) = Model::init(
        ModelConfig::new(vec![LayerConfig::new(bad)]),
        0,
        Placement::cpu(),
    ) else {
        panic!("a NaN eps must be refused");
    };
    assert!(err.to_string().contains("eps must be finite"), "{err}");
    // a kind registered under another name than the config's layer_type is refused by name
    let wrong = LayerRegistry::new().with::<GinConfig>("GIN");
    let err = wrong
        .parse(&serde_json::json!({"layer": "GIN", "in_channels": 3, "out_channels": 2}))
        .unwrap_err();
    assert!(
        matches!(err, WorkbookError::InvalidConfig(_)) && err.to_string().contains("\"GINConv\""),
        "{err}"
    );
    // a config read back equals the one written
    let config = gin(3, 2);
    let json = serde_json::to_string(&config).unwrap();
    assert!(
        json.contains(r#"{"layer":"GINConv","in_channels":3,"out_channels":16,"eps":0.0}"#),
        "{json}"
    );
    assert_eq!(
        ModelConfig::from_json_with(&json, &registry()).unwrap(),
        config
    );
}

/// Writes the ONNX check's inputs (Cora's features and edges) and expected outputs (`logits`,
/// the model's own forward pass) beside `gin.onnx`, and has onnxruntime compare them at 1e-5.
fn check_with_onnxruntime(dir: &Path, graph: &Graph, logits: &Tensor) {
    let ei = graph.edge_index();
    let ids: Vec<i64> = ei
        .sources_host()
        .iter()
        .chain(ei.targets_host())
        .map(|&i| i as i64)
        .collect();
    let edge_index = Tensor::from_vec(
        ids,
        (2, ei.num_edges()),
        &workbook::candle_core::Device::Cpu,
    )
    .unwrap();
    let x = graph.x().to_dtype(DType::F32).unwrap();
    tensor_file::write(
        &dir.join("cora.safetensors"),
        &[("x".to_string(), x), ("edge_index".to_string(), edge_index)],
        None,
    )
    .unwrap();
    tensor_file::write(
        &dir.join("expected.safetensors"),
        &[("logits".to_string(), logits.clone())],
        None,
    )
    .unwrap();
    std::fs::write(
        dir.join("manifest.json"),
        r#"[{"name": "gin on cora", "model": "gin.onnx", "inputs": "cora.safetensors", "expected": "expected.safetensors"}]"#,
    )
    .unwrap();
    let python = std::env::var("WORKBOOK_PYTHON").unwrap_or_else(|_| "python3".into());
    let has_ort = Command::new(&python)
        .args(["-c", "import onnxruntime, numpy, safetensors"])
        .status()
        .is_ok_and(|s| s.success());
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
        .arg(dir)
        .args(["--tol", "1e-5"])
        .output()
        .unwrap();
    let text =
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr);
    println!("{text}");
    assert!(
        out.status.success(),
        "onnxruntime disagrees with the model:\n{text}"
    );
    assert!(text.contains("1 case(s), 0 failure(s)"), "{text}");
}

#[test]
fn a_lazy_gin_layer_gets_its_width_from_its_first_forward_pass() {
    // "in_channels": -1 works for a registered layer of this crate as for PyG's: the config is
    // read again with the width its first forward pass finds.
    let json = r#"{"layers": [{"layer": "GINConv", "in_channels": -1, "out_channels": 16},
                              {"layer": "GINConv", "in_channels": -1, "out_channels": 4}]}"#;
    let config = ModelConfig::from_json_with(json, &registry()).unwrap();
    assert!(config.is_lazy());
    let sim = Placement::sim(1);
    let (mut model, _) = Model::init(config, 0, &sim).unwrap();
    let err = checkpoint::save(&model, Path::new("never-written.safetensors")).unwrap_err();
    assert!(
        matches!(&err, WorkbookError::Uninitialized { layer, kind, .. } if layer == "conv1" && kind == "GINConv"),
        "{err}"
    );
    let graph = datasets::karate(&sim).unwrap();
    let out = model.materialize(&graph).unwrap();
    assert_eq!(out.logits.dims(), &[34, 4]);
    assert_eq!(
        model.config().layers,
        vec![
            LayerConfig::new(GinConfig::new(34, 16)),
            LayerConfig::new(GinConfig::new(16, 4))
        ]
    );
    assert!(model
        .parameter_placements()
        .iter()
        .all(|(_, at)| at.to_string() == "sim:1"));
    let written = serde_json::to_string(&LayerConfig::lazy(|i| GinConfig::new(i, 16))).unwrap();
    assert!(
        written.starts_with(r#"{"layer":"GINConv","in_channels":-1"#),
        "{written}"
    );
}
