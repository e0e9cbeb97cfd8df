//! Model parallelism in miniature (issue 21): a two-layer GCN with conv1 on sim:1 and conv2 on
//! sim:2 computes what the model computes on one device, trains the same, and moves exactly one
//! activation and one gradient between the devices per step; a split model is not exported
//! without being gathered, and weights saved from a wrapped (data-parallel) model are named.

use crate::common;

use common::max_abs_diff;
use std::collections::HashMap;
use workbook::export::{onnx, preflight};
use workbook::ledger::{Ledger, Transfer};
use workbook::parallel::model_parallel::ModelParallel;
use workbook::train::{TrainConfig, Trainer};
use workbook::{candle_core::Tensor, WorkbookError};
use workbook::{checkpoint, datasets, tensor_file, Graph, Model, ModelConfig, Placement};

fn cora() -> Graph {
    datasets::load("cora", None, Placement::cpu()).unwrap()
}

fn sims(ledger: &Ledger) -> [Placement; 2] {
    [
        Placement::sim(1).with_ledger(ledger),
        Placement::sim(2).with_ledger(ledger),
    ]
}

fn row(t: &Transfer) -> (String, String, String, u64) {
    (t.what.clone(), t.from.clone(), t.to.clone(), t.bytes)
}

fn row_of(what: &str, from: &str, to: &str, bytes: usize) -> (String, String, String, u64) {
    (what.into(), from.into(), to.into(), bytes as u64)
}

#[test]
fn same_logits_and_losses_as_one_device_with_one_activation_each_way_per_step() {
    let graph = cora();
    let (n, hidden) = (graph.num_nodes(), 16);
    let config = ModelConfig::gcn(graph.num_features(), hidden, graph.num_classes());
    let recipe = TrainConfig::gcn();
    let (model, _) = Model::init(config, recipe.seed, Placement::cpu()).unwrap();

    let ledger = Ledger::new();
    ledger.set_phase("split");
    let mp = ModelParallel::new(&model, &sims(&ledger)).unwrap();
    let split: Vec<_> = ledger.in_phase("split").iter().map(row).collect();
    assert_eq!(
        split
            .iter()
            .map(|r| (&r.0[..], &r.2[..]))
            .collect::<Vec<_>>(),
        [
            ("conv1.lin.weight", "sim:1"),
            ("conv1.bias", "sim:1"),
            ("conv2.lin.weight", "sim:2"),
            ("conv2.bias", "sim:2"),
        ],
        "{split:?}"
    );

    ledger.set_phase("place graph");
    let g = mp.place_graph(&graph).unwrap();
    let placed: Vec<_> = ledger
        .in_phase("place graph")
        .iter()
        .map(|t| format!("{} -> {}", t.what, t.to))
        .collect();
    assert_eq!(
        placed,
        [
            "Cora.edge_index -> sim:1",
            "Cora.x -> sim:1",
            "Cora.edge_index -> sim:2",
            "Cora.y -> sim:2",
            "Cora.train_mask/val_mask/test_mask -> sim:2",
        ],
        "x goes to the first stage only, labels and masks to the last"
    );

    // evaluation: the same logits, on the last stage
    let want = model.forward_graph(&graph).unwrap().logits;
    ledger.set_phase("eval");
    let got = mp.forward(&g).unwrap().logits;
    let diff = max_abs_diff(&want, &got);
    eprintln!("logits: largest difference {diff}");
    assert!(diff <= 1e-6, "logits differ by {diff}");
    // The first pass also uploads each stage's graph structure (self-loops, CSR), once per
    // device, from the host where it is built; between the devices, only the activations.
    let eval: Vec<_> = ledger.in_phase("eval").iter().map(row).collect();
    assert!(
        eval.iter()
            .all(|r| r.1 != "cpu" || r.0.starts_with("edge_index (")),
        "{eval:?}"
    );
    let between: Vec<_> = eval.into_iter().filter(|r| r.1 != "cpu").collect();
    assert_eq!(
        between,
        [row_of(
            "activations conv1 -> conv2",
            "sim:1",
            "sim:2",
            n * hidden * 4
        )]
    );

    // training: the same losses as the one-device trainer (same initial weights, same dropout
    // stream), and per step exactly one activation and one gradient between the devices
    let mut trainer = Trainer::from_model(model.clone(), &recipe).unwrap();
    let mut optimizers = mp.optimizers(&recipe).unwrap();
    assert_eq!(
        optimizers
            .iter()
            .map(|o| o.state_placement().to_string())
            .collect::<Vec<_>>(),
        ["sim:1", "sim:2"],
        "each stage's optimiser state lives with its parameters"
    );
    let mut dropout = recipe.dropout(mp.placements()[0].device());
    for step in 1..=5 {
        let want = trainer.epoch(&graph).unwrap().loss;
        ledger.set_phase(format!("step {step}"));
        let got = mp.train_step(&g, &mut optimizers, &mut dropout).unwrap();
        eprintln!("step {step}: loss on one device {want}, model-parallel {got}");
        assert!(
            (want - got).abs() <= 1e-6,
            "step {step}: one device {want}, model-parallel {got}"
        );
        let moved: Vec<_> = ledger
            .in_phase(&format!("step {step}"))
            .iter()
            .map(row)
            .collect();
        assert_eq!(
            moved,
            [
                row_of(
                    "activations conv1 -> conv2",
                    "sim:1",
                    "sim:2",
                    n * hidden * 4
                ),
                row_of(
                    "activation gradient conv2 -> conv1",
                    "sim:2",
                    "sim:1",
                    n * hidden * 4
                ),
                row_of("loss", "sim:2", "cpu", 4),
            ],
            "step {step}"
        );
    }
    // the trained parameters agree too, and the accuracies
    let trained = trainer.into_report().model;
    let mp_acc = mp.accuracies(&g).unwrap();
    let one_acc = workbook::train::trainer::accuracies(
        &trained.forward_graph(&graph).unwrap().logits,
        &graph,
    )
    .unwrap();
    assert_eq!(mp_acc, one_acc);
    ledger.set_phase("gather");
    let gathered = mp.into_model(Placement::cpu()).unwrap();
    for ((name, a), (_, b)) in trained
        .named_parameters()
        .iter()
        .zip(gathered.named_parameters())
    {
        let diff = max_abs_diff(a, &b);
        assert!(diff <= 1e-6, "{name} differs by {diff}");
    }
    // each parameter comes home from its own device
    let home: Vec<_> = ledger
        .in_phase("gather")
        .iter()
        .map(|t| format!("{} {} -> {}", t.what, t.from, t.to))
        .collect();
    assert_eq!(
        home,
        [
            "conv1.lin.weight sim:1 -> cpu",
            "conv1.bias sim:1 -> cpu",
            "conv2.lin.weight sim:2 -> cpu",
            "conv2.bias sim:2 -> cpu",
        ]
    );
}

#[test]
fn wrong_placements_are_named() {
    let graph = datasets::karate(Placement::cpu()).unwrap();
    let (model, _) = Model::init(ModelConfig::gcn(34, 8, 4), 0, Placement::cpu()).unwrap();
    let three = [Placement::sim(1), Placement::sim(2), Placement::sim(3)];
    let err = ModelParallel::new(&model, &three).unwrap_err().to_string();
    assert!(
        err.contains("one placement per layer: the model has 2 layer(s) (conv1, conv2) but 3 placement(s) were given (sim:1, sim:2, sim:3)"),
        "{err}"
    );

    // a graph placed for another split is named, stage and devices
    let a = ModelParallel::new(&model, &[Placement::sim(1), Placement::sim(2)]).unwrap();
    let b = ModelParallel::new(&model, &[Placement::sim(1), Placement::sim(3)]).unwrap();
    let g = b.place_graph(&graph).unwrap();
    let err = a.forward(&g).unwrap_err().to_string();
    assert!(
        err.contains("conv2 parameters are on sim:2 but input 'edge_index (placed for stage conv2)' is on sim:3"),
        "{err}"
    );
    assert!(err.contains("model_parallel.place_graph(&graph)"), "{err}");

    // the optimisers must be one per stage
    let g = a.place_graph(&graph).unwrap();
    let recipe = TrainConfig::gcn();
    let mut one = a.optimizers(&recipe).unwrap();
    one.truncate(1);
    let mut dropout = recipe.dropout(a.placements()[0].device());
    let err = a
        .train_step(&g, &mut one, &mut dropout)
        .unwrap_err()
        .to_string();
    assert!(err.contains("2 stage(s) but 1 optimiser(s)"), "{err}");

    // the split model on its own, without the move between its layers: the classic error
    let on_sim1 = graph.to_device(Placement::sim(1)).unwrap();
    let err = a.model().forward_graph(&on_sim1).unwrap_err().to_string();
    assert!(
        err.contains("model parameters are on sim:1 but parameter 'conv2.lin.weight' is on sim:2"),
        "{err}"
    );
}

#[test]
fn split_model_is_not_exported_but_checkpoints_and_gathers() {
    let graph = datasets::karate(Placement::cpu()).unwrap();
    let (model, _) = Model::init(ModelConfig::gcn(34, 8, 4), 0, Placement::cpu()).unwrap();
    let mp = ModelParallel::new(&model, &[Placement::sim(1), Placement::sim(2)]).unwrap();
    let on_sim1 = graph.to_device(Placement::sim(1)).unwrap();

    // pre-flight: one problem for the split, naming the tensor, both devices and the fix
    let problems = match preflight::check(mp.model(), &preflight::Example::from_graph(&on_sim1)) {
        Err(WorkbookError::Preflight(p)) => p,
        other => panic!("expected a pre-flight failure, got {other:?}"),
    };
    let split: Vec<_> = problems.iter().filter(|p| p.contains("split")).collect();
    assert_eq!(split.len(), 1, "{problems:?}");
    assert!(
        split[0].contains(
            "parameter 'conv2.lin.weight' is on sim:2 but the model's first layer is on sim:1"
        ),
        "{problems:?}"
    );
    assert!(
        split[0].contains("(conv1 on sim:1, conv2 on sim:2)"),
        "{problems:?}"
    );
    assert!(
        split[0].contains(
            "put the whole model on one device first: model_parallel.into_model(&Placement::cpu())"
        ),
        "{problems:?}"
    );
    // no second line for the same parameters
    assert_eq!(
        problems.iter().filter(|p| p.contains("conv2.")).count(),
        1,
        "{problems:?}"
    );

    // ONNX export refuses the split model with the same words
    let dir = tempfile::tempdir().unwrap();
    let err = onnx::write(
        mp.model(),
        &dir.path().join("split.onnx"),
        &Default::default(),
    )
    .unwrap_err()
    .to_string();
    assert!(
        err.contains("model_parallel.into_model(&Placement::cpu())"),
        "{err}"
    );
    assert!(!dir.path().join("split.onnx").exists());

    // a checkpoint of the split model holds no devices and loads anywhere
    let ledger = Ledger::new();
    let mp = ModelParallel::new(
        &model,
        &[
            Placement::sim(1).with_ledger(&ledger),
            Placement::sim(2).with_ledger(&ledger),
        ],
    )
    .unwrap();
    ledger.set_phase("save");
    let path = dir.path().join("split.safetensors");
    checkpoint::save(mp.model(), &path).unwrap();
    let saved: Vec<_> = ledger
        .in_phase("save")
        .iter()
        .map(|t| format!("{} {}", t.what, t.from))
        .collect();
    assert_eq!(
        saved,
        [
            "conv1.lin.weight sim:1",
            "conv1.bias sim:1",
            "conv2.lin.weight sim:2",
            "conv2.bias sim:2"
        ]
    );
    let back = checkpoint::load(&path, Placement::cpu()).unwrap();
    let want = model.forward_graph(&graph).unwrap().logits;
    assert!(max_abs_diff(&want, &back.forward_graph(&graph).unwrap().logits) <= 1e-6);

    // gathered on one device, it passes the pre-flight and exports
    let whole = mp.into_model(Placement::cpu()).unwrap();
    preflight::check(&whole, &preflight::Example::from_graph(&graph)).unwrap();
    onnx::write(&whole, &dir.path().join("whole.onnx"), &Default::default()).unwrap();
}

/// A PyG state_dict saved from `DataParallel(model)`: every name starts with `module.`.
fn wrapped_file(model: &Model, dir: &std::path::Path) -> std::path::PathBuf {
    let path = dir.join("dp.safetensors");
    let tensors: Vec<(String, Tensor)> = model
        .named_parameters()
        .into_iter()
        .map(|(n, t)| (format!("module.{n}"), t))
        .collect();
    tensor_file::write(&path, &tensors, None).unwrap();
    path
}

#[test]
fn weights_of_a_wrapped_model_are_named_and_load_stripped() {
    let graph = datasets::karate(Placement::cpu()).unwrap();
    let config = ModelConfig::gcn(34, 8, 4);
    let (model, _) = Model::init(config.clone(), 0, Placement::cpu()).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let path = wrapped_file(&model, dir.path());

    let err = checkpoint::load_with_config(&path, config.clone(), Placement::cpu()).unwrap_err();
    match &err {
        WorkbookError::WrappedWeights {
            prefix,
            example,
            expected,
            ..
        } => {
            assert_eq!(prefix, "module.");
            assert_eq!(example, "module.conv1.lin.weight");
            assert_eq!(expected, "conv1.lin.weight");
        }
        other => panic!("expected WrappedWeights, got {other}"),
    }
    let text = err.to_string();
    for needle in [
        "dp.safetensors: the weights were saved from a wrapped model",
        "torch.nn.DataParallel (or DistributedDataParallel) saves names that way",
        "model.module.state_dict()",
        "checkpoint::load_stripping_prefix(path, config, map_location, \"module.\")",
        "k.removeprefix(\"module.\")",
    ] {
        assert!(text.contains(needle), "missing {needle:?} in: {text}");
    }

    // the same from names already read
    let file = tensor_file::read(&path, &workbook::candle_core::Device::Cpu).unwrap();
    let err = Model::from_tensors(config.clone(), &file.tensors, Placement::cpu()).unwrap_err();
    assert!(
        matches!(err, WorkbookError::WrappedWeights { ref origin, .. } if origin == "state_dict"),
        "{err}"
    );

    // the fixes: strip when loading, or strip the names read
    let ledger = Ledger::new();
    let sim = Placement::sim(1).with_ledger(&ledger);
    let loaded = checkpoint::load_stripping_prefix(&path, config.clone(), &sim, "module.").unwrap();
    assert_eq!(loaded.placement().to_string(), "sim:1");
    assert_eq!(ledger.transfers().len(), 4, "{}", ledger.table());
    let want = model.forward_graph(&graph).unwrap().logits;
    let got = loaded
        .forward_graph(&graph.to_device(&sim).unwrap())
        .unwrap()
        .logits;
    assert_eq!(max_abs_diff(&want, &got), 0.0);
    let stripped = checkpoint::strip_prefix(file.tensors.clone(), "module.").unwrap();
    Model::from_tensors(config.clone(), &stripped, Placement::cpu()).unwrap();

    // a clash is an error, not a silent overwrite
    let mut both: HashMap<String, Tensor> = file.tensors;
    both.insert("conv1.bias".into(), both["module.conv1.bias"].clone());
    let err = checkpoint::strip_prefix(both, "module.")
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("both 'module.conv1.bias' and 'conv1.bias'"),
        "{err}"
    );

    // a file that only lacks some names is not called wrapped
    let partial = dir.path().join("partial.safetensors");
    let tensors: Vec<(String, Tensor)> = model
        .named_parameters()
        .into_iter()
        .filter(|(n, _)| n != "conv2.bias")
        .collect();
    tensor_file::write(&partial, &tensors, None).unwrap();
    let err = checkpoint::load_with_config(&partial, config, Placement::cpu()).unwrap_err();
    assert!(matches!(err, WorkbookError::WeightsMismatch(_)), "{err}");
    assert!(err.to_string().contains("missing 'conv2.bias'"), "{err}");
}

#[test]
fn gatv2_model_parallel_trains_like_one_device() {
    // attention dropout inside the layers draws from the same stream in the same order
    let graph = datasets::karate(Placement::cpu()).unwrap();
    let config = ModelConfig::gatv2(34, 4, 2, 4);
    let recipe = TrainConfig::gatv2();
    let (model, _) = Model::init(config, recipe.seed, Placement::cpu()).unwrap();
    let ledger = Ledger::new();
    let mp = ModelParallel::new(&model, &sims(&ledger)).unwrap();
    let g = mp.place_graph(&graph).unwrap();
    let out = mp.forward(&g).unwrap();
    assert_eq!(
        out.attention
            .iter()
            .map(|(n, _)| n.as_str())
            .collect::<Vec<_>>(),
        ["conv1", "conv2"]
    );
    let mut trainer = Trainer::from_model(model, &recipe).unwrap();
    let mut optimizers = mp.optimizers(&recipe).unwrap();
    let mut dropout = recipe.dropout(mp.placements()[0].device());
    for step in 1..=3 {
        let want = trainer.epoch(&graph).unwrap().loss;
        ledger.set_phase(format!("step {step}"));
        let got = mp.train_step(&g, &mut optimizers, &mut dropout).unwrap();
        assert!((want - got).abs() <= 1e-6, "step {step}: {want} vs {got}");
        // 34 nodes × (2 heads × 4 channels) × 4 bytes, each way
        let bytes: Vec<u64> = ledger
            .in_phase(&format!("step {step}"))
            .iter()
            .filter(|t| t.what.starts_with("activation"))
            .map(|t| t.bytes)
            .collect();
        assert_eq!(bytes, [34 * 8 * 4, 34 * 8 * 4]);
    }
}
