//! Lazy input width (`in_channels = -1`, issue 37): configs, the first forward pass through
//! `&mut self`, placement, the ledger, and every error a model with a lazy layer can meet, with
//! its text. PyG's behaviour these mirror (or depart from) is printed by
//! `book/python/ch02_lazy.py` (book/src/generated/python/ch02_lazy*.txt).

use crate::common;

use common::{fixtures_dir, max_abs_diff};
use std::collections::HashMap;
use workbook::export::onnx::{to_onnx, OnnxOptions};
use workbook::export::preflight::{self, Example};
use workbook::ledger::Ledger;
use workbook::parallel::model_parallel::ModelParallel;
use workbook::parallel::DataParallel;
use workbook::train::{Adam, TrainConfig, Trainer};
use workbook::{
    checkpoint, datasets, inspect, tensor_file, GatV2Config, GcnConfig, LayerConfig, Model,
    ModelConfig, Placement, SageConfig, WorkbookError,
};

/// `GCNConv(-1, 16)`, `GCNConv(-1, 4)`.
fn lazy_gcn() -> ModelConfig {
    ModelConfig::from_json(
        r#"{"layers": [{"layer": "GCNConv", "in_channels": -1, "out_channels": 16},
                       {"layer": "GCNConv", "in_channels": -1, "out_channels": 4}]}"#,
    )
    .unwrap()
}

#[test]
fn in_channels_minus_one_is_read_and_written_for_the_three_layers() {
    for (kind, extra) in [
        ("GCNConv", ""),
        ("GATv2Conv", r#", "heads": 2"#),
        ("SAGEConv", ""),
    ] {
        let json = format!(r#"{{"layer": "{kind}", "in_channels": -1, "out_channels": 3{extra}}}"#);
        let config = ModelConfig::from_json(&json).unwrap();
        assert!(config.is_lazy() && config.layers[0].is_lazy(), "{kind}");
        assert_eq!(config.layers[0].spec().layer_type(), kind);
        // no parameter shapes before the first forward pass: they depend on the width
        assert!(config.parameter_shapes().is_empty(), "{kind}");
        let written = serde_json::to_string(&config.layers[0]).unwrap();
        assert!(written.contains(r#""in_channels":-1"#), "{written}");
        let back: LayerConfig = serde_json::from_str(&written).unwrap();
        assert_eq!(
            back, config.layers[0],
            "{kind}: the round trip keeps the config"
        );
        assert_ne!(back, LayerConfig::new(GcnConfig::new(1, 3)));
    }
    // what the first forward pass will make of it, for estimates made before that pass
    assert_eq!(
        lazy_gcn().with_input_width(34).unwrap().layers,
        ModelConfig::gcn(34, 16, 4).layers
    );
    // the Rust spelling is the same config as the JSON one
    let rust = LayerConfig::lazy(|i| GcnConfig::new(i, 16));
    assert_eq!(rust, lazy_gcn().layers[0]);
}

#[test]
fn bad_lazy_configs_are_refused_with_what_to_write() {
    let zero =
        ModelConfig::from_json(r#"{"layer": "GCNConv", "in_channels": -1, "out_channels": 0}"#)
            .unwrap_err()
            .to_string();
    assert!(
        zero.contains("layer 1 (GCNConv): in_channels, out_channels and heads must be at least 1 (got 0, 0, 1)"),
        "{zero}"
    );
    let minus_two =
        ModelConfig::from_json(r#"{"layer": "SAGEConv", "in_channels": -2, "out_channels": 4}"#)
            .unwrap_err()
            .to_string();
    assert!(
        minus_two.contains("in_channels must be a width of at least 1, or -1 (PyG's lazy width"),
        "{minus_two}"
    );
    let bad_aggr = ModelConfig::from_json(
        r#"{"layer": "SAGEConv", "in_channels": -1, "out_channels": 4, "aggr": "median"}"#,
    );
    assert!(
        bad_aggr.is_err(),
        "an argument wrong whatever the width is refused when read"
    );
}

#[test]
fn the_first_forward_pass_creates_pyg_shaped_parameters_from_the_input_width() {
    let graph = datasets::karate(Placement::cpu()).unwrap();
    let cases = [
        (
            LayerConfig::lazy(|i| GcnConfig::new(i, 3)),
            LayerConfig::new(GcnConfig::new(34, 3)),
        ),
        (
            LayerConfig::lazy(|i| GatV2Config::new(i, 3).heads(2)),
            LayerConfig::new(GatV2Config::new(34, 3).heads(2)),
        ),
        (
            LayerConfig::lazy(|i| SageConfig::new(i, 3)),
            LayerConfig::new(SageConfig::new(34, 3)),
        ),
    ];
    for (lazy, eager) in cases {
        let kind = eager.spec().layer_type();
        let (mut model, _) =
            Model::init(ModelConfig::new(vec![lazy]), 0, Placement::cpu()).unwrap();
        assert!(!model.is_materialized());
        assert!(
            model.named_parameters().is_empty(),
            "{kind}: nothing exists yet"
        );
        let out = model.materialize(&graph).unwrap();
        assert!(model.is_materialized());
        assert_eq!(out.logits.dims(), &[34, eager.output_width()], "{kind}");
        let shapes: Vec<_> = model
            .named_parameters()
            .into_iter()
            .map(|(n, t)| (n, t.dims().to_vec()))
            .collect();
        let expected = ModelConfig::new(vec![eager.clone()]).parameter_shapes();
        assert_eq!(shapes, expected, "{kind}: PyG's names and shapes");
        // the config now holds the width that was found, in the built-in variant
        assert_eq!(model.config().layers[0], eager, "{kind}");
        // and later passes are the ordinary &self ones, with the same result
        let again = model.forward_graph(&graph).unwrap();
        assert_eq!(
            again.logits.to_vec2::<f32>().unwrap(),
            out.logits.to_vec2::<f32>().unwrap()
        );
    }
}

#[test]
fn a_lazy_layer_after_an_eager_one_takes_its_width_from_the_layer_before() {
    let graph = datasets::karate(Placement::cpu()).unwrap();
    let config = ModelConfig::new(vec![
        LayerConfig::new(GcnConfig::new(34, 8)),
        LayerConfig::lazy(|i| GatV2Config::new(i, 2).heads(3)),
    ]);
    let (mut model, _) = Model::init(config, 7, Placement::cpu()).unwrap();
    let out = model.materialize(&graph).unwrap();
    assert_eq!(out.logits.dims(), &[34, 6]);
    assert_eq!(
        model.config().layers[1],
        LayerConfig::new(GatV2Config::new(8, 2).heads(3))
    );
    assert_eq!(out.attention.len(), 1);
}

#[test]
fn to_device_before_the_first_forward_decides_where_the_weights_are_born() {
    let ledger = Ledger::new();
    let sim = Placement::sim(1).with_ledger(&ledger);
    let (model, _) = Model::init(lazy_gcn(), 0, Placement::cpu()).unwrap();
    ledger.set_phase("move");
    let mut model = model.to_device(&sim).unwrap();
    assert!(
        ledger.transfers().is_empty(),
        "nothing to copy yet: {:?}",
        ledger.transfers()
    );
    let table = inspect::model_table(&model);
    assert!(
        table.contains("conv1.lin.weight  uninitialised    sim:1"),
        "{table}"
    );
    assert!(
        table
            .contains("conv2.bias        uninitialised    sim:1     f32    ? (first forward pass)"),
        "no shape until the first pass, not an empty one: {table}"
    );

    let graph = datasets::karate(Placement::cpu()).unwrap();
    // the graph on the cpu: refused before anything is created
    let err = model.materialize(&graph).unwrap_err().to_string();
    assert!(err.contains("sim:1"), "{err}");
    assert!(!model.is_materialized());

    ledger.set_phase("first forward");
    let graph = graph.to_device(&sim).unwrap();
    ledger.clear();
    model.materialize(&graph).unwrap();
    for (name, at) in model.parameter_placements() {
        assert_eq!(at.to_string(), "sim:1", "{name}");
    }
    // (the forward pass itself adds its self-loops and CSR, as any GCN pass on a device does)
    let born: Vec<_> = ledger
        .transfers()
        .into_iter()
        .filter(|t| !t.what.starts_with("edge_index"))
        .map(|t| (t.from, t.to, t.what, t.bytes))
        .collect();
    assert_eq!(
        born,
        [
            (
                "cpu",
                "sim:1",
                "conv1.lin.weight (first forward pass)",
                16 * 34 * 4
            ),
            ("cpu", "sim:1", "conv1.bias (first forward pass)", 16 * 4),
            (
                "cpu",
                "sim:1",
                "conv2.lin.weight (first forward pass)",
                4 * 16 * 4
            ),
            ("cpu", "sim:1", "conv2.bias (first forward pass)", 4 * 4),
        ]
        .map(|(f, t, w, b)| (f.to_string(), t.to_string(), w.to_string(), b as u64))
    );
    let table = inspect::model_table(&model);
    assert!(
        table.contains("conv1.lin.weight  parameter") && table.contains("[16, 34]"),
        "{table}"
    );
    assert!(!table.contains("uninitialised"), "{table}");

    // after the first pass, moving copies every parameter, as for any model
    ledger.clear();
    let back = model.to_device(Placement::cpu()).unwrap();
    assert_eq!(ledger.transfers().len(), 4);
    assert_eq!(back.parameter_placements()[0].1.to_string(), "cpu");
}

/// The message every refusal shares: the layer, -1, the fix.
fn assert_uninitialized(err: WorkbookError, action: &str) {
    assert!(
        matches!(&err, WorkbookError::Uninitialized { layer, kind, .. } if layer == "conv1" && kind == "GCNConv"),
        "{err:?}"
    );
    let text = err.to_string();
    assert!(
        text.starts_with(&format!(
            "{action}: layer conv1 (GCNConv) was built with in_channels = -1 and its parameters do not exist yet"
        )),
        "{text}"
    );
    assert!(
        text.contains("on the layer's placement (sim:1). Run one forward pass first: model.materialize(&graph)"),
        "{text}"
    );
    assert!(
        text.contains("\"Attempted to use an uninitialized parameter\""),
        "{text}"
    );
}

#[test]
fn everything_that_needs_the_parameters_refuses_a_model_before_its_first_forward_pass() {
    let sim = Placement::sim(1);
    let (model, _) = Model::init(lazy_gcn(), 0, &sim).unwrap();
    let graph = datasets::karate(&sim).unwrap();

    let err = Adam::for_model(&model, 0.01, |_| 0.0).err().unwrap();
    assert_uninitialized(err, "the optimiser (Adam::for_model)");
    let err = TrainConfig::gcn().optimizer(&model).err().unwrap();
    assert_uninitialized(err, "the optimiser (Adam::for_model)");
    let err = Trainer::from_model(model.clone(), &TrainConfig::gcn())
        .err()
        .unwrap();
    assert_uninitialized(err, "the optimiser (Adam::for_model)");

    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("lazy.safetensors");
    let err = checkpoint::save(&model, &path).unwrap_err();
    assert_uninitialized(err, "checkpoint::save");
    assert!(!path.exists(), "no file is written");
    let err = workbook::export::safetensors::export(&model, &path).unwrap_err();
    assert_uninitialized(err, "safetensors export");
    assert!(!path.exists());

    let err = preflight::check(&model, &Example::from_graph(&graph)).unwrap_err();
    assert_uninitialized(err, "the export pre-flight");
    let err = to_onnx(&model, &OnnxOptions::default()).unwrap_err();
    assert_uninitialized(err, "ONNX export");

    let err = model.forward_graph(&graph).unwrap_err();
    assert_uninitialized(err, "model.forward (a forward pass through &self)");

    let err = model
        .to_dtype(workbook::candle_core::DType::F16)
        .unwrap_err();
    assert_uninitialized(err, "model.to_dtype");

    let devices = [Placement::sim(1), Placement::sim(2)];
    let err = DataParallel::new(&model, &devices, &TrainConfig::gcn())
        .err()
        .unwrap();
    assert_uninitialized(err, "DataParallel::new");
    let err = ModelParallel::new(&model, &devices).err().unwrap();
    assert_uninitialized(err, "ModelParallel::new");
}

#[test]
fn the_same_model_after_one_forward_pass_trains_saves_and_exports() {
    let sim = Placement::sim(1);
    let graph = datasets::karate(&sim).unwrap();
    let (mut model, _) = Model::init(lazy_gcn(), 0, &sim).unwrap();
    model.materialize(&graph).unwrap();
    let opt = Adam::for_model(&model, 0.01, |_| 0.0).unwrap();
    assert_eq!(opt.state().count(), 4, "the optimiser sees every parameter");
    preflight::check(&model, &Example::from_graph(&graph)).unwrap();
    to_onnx(&model, &OnnxOptions::default()).unwrap();

    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("m.safetensors");
    checkpoint::save(&model, &path).unwrap();
    let back = checkpoint::load(&path, Placement::cpu()).unwrap();
    assert_eq!(
        back.config(),
        model.config(),
        "saved with the width found, not -1"
    );
    assert!(!back.config().is_lazy());
}

#[test]
fn training_from_a_lazy_config_runs_the_first_forward_pass_before_the_optimiser() {
    let ledger = Ledger::new();
    let sim = Placement::sim(1).with_ledger(&ledger);
    let graph = datasets::karate(&sim).unwrap();
    let mut trainer = Trainer::new(lazy_gcn(), &graph, &TrainConfig::gcn()).unwrap();
    assert_eq!(trainer.optimizer().state().count(), 4);
    let first = trainer.epoch(&graph).unwrap();
    for _ in 0..30 {
        trainer.epoch(&graph).unwrap();
    }
    let last = trainer.history().last().unwrap().clone();
    assert!(last.loss < first.loss, "{} then {}", first.loss, last.loss);
    // the weights were born on sim:1, in the init phase
    let init: Vec<_> = ledger
        .in_phase("init")
        .into_iter()
        .map(|t| t.what)
        .collect();
    assert!(
        init.contains(&"conv1.lin.weight (first forward pass)".to_string()),
        "{init:?}"
    );
}

#[test]
fn clones_made_before_the_first_forward_pass_get_the_same_weights() {
    // A replica made before the first pass draws from the model's seed, one stream per layer,
    // so two copies materialised apart (on two devices) hold the same values.
    let (model, _) = Model::init(lazy_gcn(), 3, Placement::cpu()).unwrap();
    let mut a = model.clone();
    let mut b = model.to_device(Placement::sim(2)).unwrap();
    a.materialize(&datasets::karate(Placement::cpu()).unwrap())
        .unwrap();
    b.materialize(&datasets::karate(Placement::sim(2)).unwrap())
        .unwrap();
    for ((n, x), (_, y)) in a.named_parameters().into_iter().zip(b.named_parameters()) {
        assert_eq!(
            x.flatten_all().unwrap().to_vec1::<f32>().unwrap(),
            y.flatten_all().unwrap().to_vec1::<f32>().unwrap(),
            "{n}"
        );
    }
    let (other, _) = Model::init(lazy_gcn(), 4, Placement::cpu()).unwrap();
    let mut other = other;
    other
        .materialize(&datasets::karate(Placement::cpu()).unwrap())
        .unwrap();
    assert_ne!(
        other.named_parameters()[0]
            .1
            .flatten_all()
            .unwrap()
            .to_vec1::<f32>()
            .unwrap(),
        a.named_parameters()[0]
            .1
            .flatten_all()
            .unwrap()
            .to_vec1::<f32>()
            .unwrap(),
        "another seed, other values"
    );
}

#[test]
fn two_threads_share_a_lazy_model_and_neither_can_materialise_it_behind_the_other() {
    // The first pass takes &mut self: shared across threads, a lazy model can only refuse, the
    // same way in both, and stays lazy; `materialize` on an Arc<Model> does not compile.
    let sim = Placement::sim(1);
    let (model, _) = Model::init(lazy_gcn(), 0, &sim).unwrap();
    let graph = datasets::karate(&sim).unwrap();
    let errors: Vec<String> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..2)
            .map(|_| s.spawn(|| model.forward_graph(&graph).unwrap_err().to_string()))
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    assert_eq!(errors[0], errors[1]);
    assert!(errors[0].contains("in_channels = -1"), "{}", errors[0]);
    assert!(!model.is_materialized());
    // once materialised (one &mut borrow), both threads read the same weights
    let mut model = model;
    let first = model
        .materialize(&graph)
        .unwrap()
        .logits
        .to_vec2::<f32>()
        .unwrap();
    let outs: Vec<Vec<Vec<f32>>> = std::thread::scope(|s| {
        let handles: Vec<_> = (0..2)
            .map(|_| {
                s.spawn(|| {
                    model
                        .forward_graph(&graph)
                        .unwrap()
                        .logits
                        .to_vec2::<f32>()
                        .unwrap()
                })
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    assert_eq!(outs[0], first);
    assert_eq!(outs[1], first);
}

#[test]
fn loading_weights_into_a_lazy_config_takes_the_width_from_them() {
    // PyTorch: load_state_dict into a lazy module materialises it with the loaded shapes.
    let (eager, _) = Model::init(ModelConfig::gcn(34, 16, 4), 0, Placement::cpu()).unwrap();
    let tensors: HashMap<_, _> = eager.named_parameters().into_iter().collect();
    let mut config = lazy_gcn();
    config.dropout = 0.5;
    let loaded = Model::from_tensors(config, &tensors, Placement::cpu()).unwrap();
    assert!(loaded.is_materialized());
    assert_eq!(loaded.config(), eager.config());

    let mut missing = tensors.clone();
    missing.remove("conv1.lin.weight");
    let err = Model::from_tensors(lazy_gcn(), &missing, Placement::cpu())
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("layer 1 (GCNConv) has in_channels = -1 and the weights do not say its width ('conv1.lin.weight' is missing); write the width in the config"),
        "{err}"
    );
}

#[test]
fn a_first_forward_pass_with_unusable_features_creates_nothing() {
    let (mut model, _) = Model::init(lazy_gcn(), 0, Placement::cpu()).unwrap();
    let graph = datasets::karate(Placement::cpu()).unwrap();
    let flat = graph.x().flatten_all().unwrap();
    let err = model
        .materialize_input(&flat, graph.edge_index(), None)
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("node features x must be [num_nodes, num_features] (the first forward pass of a lazy layer takes its in_channels from num_features), got [1156]"),
        "{err}"
    );
    let empty = graph.x().narrow(1, 0, 0).unwrap();
    let err = model
        .materialize_input(&empty, graph.edge_index(), None)
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("the first forward pass gave 0 features per node"),
        "{err}"
    );
    assert!(!model.is_materialized());
}

#[test]
fn pyg_trained_cora_models_loaded_into_lazy_configs_reproduce_pyg_logits() {
    // The models of the issue's question, GCNConv(-1, ...) and GATv2Conv(-1, ...) in every
    // layer, given PyG's trained weights: the widths come from the weights, the logits are PyG's.
    let cora = datasets::load(
        "cora",
        Some(&std::env::temp_dir().join("no-such-dir")),
        Placement::cpu(),
    )
    .unwrap();
    let configs = [
        (
            "gcn",
            r#"{"layers": [{"layer": "GCNConv", "in_channels": -1, "out_channels": 16},
                               {"layer": "GCNConv", "in_channels": -1, "out_channels": 7}]}"#,
        ),
        (
            "gatv2",
            r#"{"layers": [{"layer": "GATv2Conv", "in_channels": -1, "out_channels": 8, "heads": 8, "dropout": 0.6},
                                 {"layer": "GATv2Conv", "in_channels": -1, "out_channels": 7, "concat": false, "dropout": 0.6}],
                      "activation": "elu"}"#,
        ),
    ];
    for (model, json) in configs {
        let path = fixtures_dir().join(format!("cora_{model}_trained.safetensors"));
        let file = tensor_file::read(&path, Placement::cpu().device()).unwrap();
        let config = ModelConfig::from_json(json).unwrap();
        let loaded = Model::from_tensors(config, &file.tensors, Placement::cpu()).unwrap();
        assert_eq!(loaded.config().layers[0].in_channels(), 1433, "{model}");
        let out = loaded.forward_graph(&cora).unwrap();
        let diff = max_abs_diff(&out.logits, &file.tensors["expected.logits"]);
        assert!(
            diff < 1e-5,
            "cora {model}: logits differ from PyG by {diff}"
        );
    }
}
