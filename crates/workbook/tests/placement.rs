//! Devices and movement on simulated devices: named mismatches for every input, buffer and
//! optimiser state; moving a training run; exact ledger counts; portable checkpoints.
//!
//! Everything here runs on `cpu` and `sim:N`; `tests/cuda.rs` repeats the device-specific parts
//! on a real GPU when there is one.

use workbook::candle_core::{DType, Tensor};
use workbook::device::DeviceSpec;
use workbook::ledger::Ledger;
use workbook::train::{TrainConfig, Trainer};
use workbook::{
    checkpoint, datasets, inspect, GcnConfig, Graph, GraphPart, LayerConfig, Model, ModelConfig,
    Placement, WorkbookError,
};

fn sim(n: usize) -> Placement {
    Placement::sim(n)
}

fn karate_gcn(at: &Placement) -> (Graph, Model) {
    let g = datasets::karate(at).unwrap();
    let (m, _) = Model::init(ModelConfig::gcn(34, 8, 4), 0, at).unwrap();
    (g, m)
}

fn mismatch(err: WorkbookError) -> (String, String, String, String) {
    let text = err.to_string();
    match err {
        WorkbookError::DeviceMismatch(m) => {
            assert!(text.starts_with("Expected all tensors to be on the same device: "));
            (
                m.role.noun().to_string(),
                m.culprit,
                m.found.to_string(),
                m.expected.to_string(),
            )
        }
        other => panic!("expected a device mismatch, got: {other}"),
    }
}

#[test]
fn device_spec_accepts_sim_and_lists_valid_forms() {
    assert_eq!("sim:3".parse::<DeviceSpec>().unwrap(), DeviceSpec::Sim(3));
    assert_eq!("CUDA:1".parse::<DeviceSpec>().unwrap(), DeviceSpec::Cuda(1));
    for bad in ["gpu", "sim", "sim:x", "cuda:-1", "tpu:0"] {
        let err = bad.parse::<DeviceSpec>().unwrap_err().to_string();
        for form in ["auto", "cpu", "cuda", "cuda:N", "sim:N"] {
            assert!(err.contains(form), "{bad}: {err}");
        }
    }
    let chosen = workbook::device::choose(Some(DeviceSpec::Sim(2))).unwrap();
    assert_eq!(chosen.name, "sim:2");
    assert!(chosen.reason.contains("simulated"), "{}", chosen.reason);
}

#[test]
fn model_on_sim_and_graph_on_cpu_names_x_first() {
    let (_, model) = karate_gcn(&sim(1));
    let graph = datasets::karate(Placement::cpu()).unwrap();
    let err = model.forward_graph(&graph).unwrap_err();
    assert_eq!(
        err.to_string(),
        "Expected all tensors to be on the same device: model parameters are on sim:1 but input 'x' is on cpu. Move the graph with graph.to_device(&device)"
    );
}

#[test]
fn every_graph_part_left_behind_is_named() {
    let (graph, model) = karate_gcn(&sim(1));
    let w = Tensor::ones(graph.num_edges(), DType::F32, graph.device()).unwrap();
    let graph = graph.with_edge_weight(w).unwrap();
    model.forward_graph(&graph).unwrap();
    for part in [
        GraphPart::X,
        GraphPart::EdgeIndex,
        GraphPart::EdgeWeight,
        GraphPart::Labels,
        GraphPart::Masks,
    ] {
        let partial = graph.move_part(part, &Placement::cpu()).unwrap();
        let (kind, culprit, found, expected) = mismatch(model.forward_graph(&partial).unwrap_err());
        assert_eq!(
            (
                kind.as_str(),
                culprit.as_str(),
                found.as_str(),
                expected.as_str()
            ),
            ("input", part.name(), "cpu", "sim:1"),
            "{part:?}"
        );
        // And the same on another simulated device: sim:1 and sim:2 are different devices.
        let elsewhere = graph.move_part(part, &sim(2)).unwrap();
        let (_, culprit, found, _) = mismatch(model.forward_graph(&elsewhere).unwrap_err());
        assert_eq!((culprit.as_str(), found.as_str()), (part.name(), "sim:2"));
    }
}

#[test]
fn labels_and_masks_are_checked_by_the_trainer() {
    let at = sim(1);
    let graph = datasets::karate(&at).unwrap();
    let config = ModelConfig::gcn(34, 8, 4);
    let mut t = Trainer::new(config, &graph, &TrainConfig::gcn()).unwrap();
    let bad = graph
        .move_part(GraphPart::Labels, &Placement::cpu())
        .unwrap();
    let (_, culprit, _, _) = mismatch(t.epoch(&bad).unwrap_err());
    assert_eq!(culprit, "y");
    // A failed check changes nothing: the run goes on with the right graph.
    assert!(t.history().is_empty());
    t.epoch(&graph).unwrap();
}

#[test]
fn raw_forward_names_edge_index_and_edge_weight() {
    let (graph, model) = karate_gcn(&sim(1));
    let cpu_graph = graph.to_device(Placement::cpu()).unwrap();
    let (_, culprit, _, _) = mismatch(
        model
            .forward(graph.x(), cpu_graph.edge_index(), None)
            .unwrap_err(),
    );
    assert_eq!(culprit, "edge_index");
}

fn cached_gcn(at: &Placement) -> Model {
    let conv = |i, o| {
        let mut c = GcnConfig::new(i, o);
        c.cached = true;
        LayerConfig::Gcn(c)
    };
    let config = ModelConfig {
        layers: vec![conv(34, 8), conv(8, 4)],
        ..ModelConfig::gcn(34, 8, 4)
    };
    Model::init(config, 0, at).unwrap().0
}

#[test]
fn cached_buffer_left_behind_is_named_and_to_device_moves_it() {
    let cpu = Placement::cpu();
    let model = cached_gcn(&cpu);
    let graph = datasets::karate(&cpu).unwrap();
    let want = model.forward_graph(&graph).unwrap().logits; // fills the caches on the cpu
    let on_sim = graph.to_device(sim(1)).unwrap();

    // PyTorch's module.to moves parameters but not PyG's _cached_edge_index.
    let params_only = model.parameters_to_device(sim(1)).unwrap();
    let (kind, culprit, found, expected) =
        mismatch(params_only.forward_graph(&on_sim).unwrap_err());
    assert_eq!(
        (
            kind.as_str(),
            culprit.as_str(),
            found.as_str(),
            expected.as_str()
        ),
        ("cached buffer", "conv1._cached_edge_index", "cpu", "sim:1")
    );
    let mut cleared = params_only.clone();
    cleared.clear_cache();
    cleared.forward_graph(&on_sim).unwrap();

    let moved = model.to_device(sim(1)).unwrap();
    let rows = inspect::model_rows(&moved);
    let buffers: Vec<_> = rows.iter().filter(|r| r.kind == "buffer").collect();
    assert_eq!(buffers.len(), 4, "{}", inspect::model_table(&moved));
    assert!(buffers.iter().all(|r| r.device == "sim:1"));
    let got = moved.forward_graph(&on_sim).unwrap().logits;
    assert_eq!(
        want.to_vec2::<f32>().unwrap(),
        got.to_vec2::<f32>().unwrap()
    );
}

#[test]
fn optimizer_state_left_behind_is_named() {
    let cpu = Placement::cpu();
    let graph = datasets::karate(&cpu).unwrap();
    let mut t = Trainer::new(ModelConfig::gcn(34, 8, 4), &graph, &TrainConfig::gcn()).unwrap();
    t.epoch(&graph).unwrap();
    let moved = t.model().to_device(sim(1)).unwrap();
    t.rebind_model_only(moved).unwrap();
    let on_sim = graph.to_device(sim(1)).unwrap();
    let err = t.epoch(&on_sim).unwrap_err();
    assert!(
        err.to_string()
            .ends_with("Move the optimizer with the model: adam.to_model(&model)"),
        "{err}"
    );
    let (kind, culprit, found, _) = mismatch(err);
    assert_eq!(
        (kind.as_str(), culprit.as_str(), found.as_str()),
        ("optimizer state", "exp_avg[conv1.lin.weight]", "cpu")
    );
}

/// Losses of `epochs` epochs, moving the whole run to `to` after `move_after` epochs.
fn losses(config: &ModelConfig, epochs: usize, move_after: Option<(usize, Placement)>) -> Vec<f32> {
    let mut graph = datasets::karate(Placement::cpu()).unwrap();
    let tc = TrainConfig {
        seed: 7,
        ..TrainConfig::gatv2()
    };
    let mut t = Trainer::new(config.clone(), &graph, &tc).unwrap();
    let mut out = Vec::new();
    for e in 0..epochs {
        if let Some((k, to)) = &move_after {
            if *k == e {
                t.to_device(to).unwrap();
                graph = graph.to_device(to).unwrap();
            }
        }
        out.push(t.epoch(&graph).unwrap().loss);
    }
    out
}

#[test]
fn moving_mid_training_gives_the_same_losses() {
    for config in [ModelConfig::gcn(34, 8, 4), ModelConfig::gatv2(34, 4, 2, 4)] {
        let stay = losses(&config, 8, None);
        let moved = losses(&config, 8, Some((3, sim(1))));
        let moved_twice = losses(&config, 8, Some((5, sim(4))));
        for (a, b) in stay.iter().zip(&moved).chain(stay.iter().zip(&moved_twice)) {
            assert!((a - b).abs() <= 1e-6, "{stay:?} vs {moved:?}");
        }
        // The run really trains, so equal losses mean something.
        assert!(stay[7] < stay[0], "{stay:?}");
    }
}

#[test]
fn ledger_counts_a_scripted_training_run_exactly() {
    let ledger = Ledger::new();
    let at = sim(1).with_ledger(&ledger);
    ledger.set_phase("load");
    let graph = datasets::karate(&at).unwrap();
    let config = ModelConfig::gcn(34, 16, 4);
    let mut t = Trainer::new(config, &graph, &TrainConfig::gcn()).unwrap();
    for _ in 0..5 {
        t.epoch(&graph).unwrap();
    }
    let (n, e) = (34u64, 156u64);
    let load: Vec<(String, u64)> = ledger
        .in_phase("load")
        .into_iter()
        .map(|t| (t.what, t.bytes))
        .collect();
    assert_eq!(
        load,
        vec![
            ("karate.x".to_string(), n * 34 * 4),
            ("karate.edge_index".to_string(), 2 * e * 4),
            ("karate.y".to_string(), n * 4),
            (
                "karate.train_mask/val_mask/test_mask".to_string(),
                (4 + 30 + 30) * 4
            ),
        ]
    );
    assert!(ledger
        .in_phase("load")
        .iter()
        .all(|t| t.from == "cpu" && t.to == "sim:1"));
    let init: Vec<String> = ledger
        .in_phase("init")
        .into_iter()
        .map(|t| t.what)
        .collect();
    assert_eq!(
        init,
        [
            "conv1.lin.weight",
            "conv1.bias",
            "conv2.lin.weight",
            "conv2.bias"
        ]
    );
    // Epoch 1 uploads the self-looped edges and their CSR once; after that only the metrics
    // come back.
    let first: Vec<(String, String, u64)> = ledger
        .in_phase("epoch 1")
        .into_iter()
        .map(|t| (t.what, t.to, t.bytes))
        .collect();
    assert_eq!(
        first,
        vec![
            (
                "edge_index (self-loops)".into(),
                "sim:1".into(),
                (e + n) * 4 * 3
            ),
            // the destination-sorted CSR of the looped edges: src, dst and two sortings
            (
                "edge_index (CSR)".into(),
                "sim:1".into(),
                4 * (6 * (e + n) + 2 * (n + 1))
            ),
            ("metrics (loss, 3 accuracies)".into(), "cpu".into(), 16),
        ]
    );
    for epoch in 2..=5 {
        let rest = ledger.in_phase(&format!("epoch {epoch}"));
        assert_eq!(rest.len(), 1, "epoch {epoch}: {rest:?}");
        assert_eq!((rest[0].from.as_str(), rest[0].bytes), ("sim:1", 16));
    }
    assert_eq!(ledger.transfers().len(), 4 + 4 + 3 + 4);
    let table = ledger.table();
    assert!(table.contains("epoch *"), "{table}");
}

#[test]
fn moving_the_graph_every_epoch_shows_in_the_ledger() {
    let ledger = Ledger::new();
    let cpu = Placement::cpu().with_ledger(&ledger);
    let at = sim(1).with_ledger(&ledger);
    let host_graph = datasets::karate(&cpu).unwrap();
    let (_, model) = karate_gcn(&at);
    for epoch in 1..=3 {
        ledger.set_phase(format!("epoch {epoch}"));
        let g = host_graph.to_device(&at).unwrap(); // the mistake: inside the loop
        model.forward_graph(&g).unwrap();
    }
    for epoch in 1..=3 {
        let moved = ledger.in_phase(&format!("epoch {epoch}"));
        assert!(moved.iter().any(|t| t.what == "karate.x"), "{moved:?}");
    }
}

#[test]
fn checkpoints_round_trip_across_every_pair_of_devices() {
    let mut places = vec![Placement::cpu(), sim(1), sim(2)];
    if let Ok(gpu) = Placement::cuda(0) {
        places.push(gpu);
    } else {
        eprintln!("note: no CUDA device, checkpoint pairs cover cpu, sim:1 and sim:2 only");
    }
    let dir = tempfile::tempdir().unwrap();
    for from in &places {
        let (model, _) = Model::init(ModelConfig::gatv2(34, 4, 2, 4), 3, from).unwrap();
        let path = dir.path().join(format!(
            "{}.safetensors",
            from.to_string().replace(':', "_")
        ));
        checkpoint::save(&model, &path).unwrap();
        let graph = datasets::karate(from).unwrap();
        let want = model.forward_graph(&graph).unwrap().logits;
        for to in &places {
            let back = checkpoint::load(&path, to).unwrap();
            assert_eq!(back.placement(), to);
            let names = |m: &Model| -> Vec<String> {
                m.named_parameters().into_iter().map(|(n, _)| n).collect()
            };
            assert_eq!(names(&back), names(&model));
            let got = back
                .forward_graph(&graph.to_device(to).unwrap())
                .unwrap()
                .logits
                .to_device(&workbook::candle_core::Device::Cpu)
                .unwrap();
            let diff = (got - want.to_device(&workbook::candle_core::Device::Cpu).unwrap())
                .unwrap()
                .abs()
                .unwrap()
                .max_all()
                .unwrap()
                .to_scalar::<f32>()
                .unwrap();
            assert!(diff <= 1e-5, "{from} -> {to}: {diff}");
        }
    }
}

#[test]
fn checkpoint_problems_are_all_reported_at_once() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("bad.safetensors");
    let cpu = workbook::candle_core::Device::Cpu;
    let tensors = vec![
        // conv1.lin.weight missing; conv1.bias has the wrong shape; conv2.bias the wrong dtype
        (
            "conv1.bias".to_string(),
            Tensor::zeros(5, DType::F32, &cpu).unwrap(),
        ),
        (
            "conv2.lin.weight".to_string(),
            Tensor::zeros((4, 8), DType::F32, &cpu).unwrap(),
        ),
        (
            "conv2.bias".to_string(),
            Tensor::zeros(4, DType::F64, &cpu).unwrap(),
        ),
        (
            "conv3.bias".to_string(),
            Tensor::zeros(4, DType::F32, &cpu).unwrap(),
        ),
    ];
    workbook::tensor_file::write(&path, &tensors, None).unwrap();
    let err = checkpoint::load(&path, sim(1)).unwrap_err().to_string();
    assert!(err.contains("has no model config"), "{err}");
    let err = checkpoint::load_with_config(&path, ModelConfig::gcn(34, 8, 4), sim(1))
        .unwrap_err()
        .to_string();
    for needle in [
        "missing 'conv1.lin.weight'",
        "'conv1.bias' has shape [5]",
        "'conv2.bias' is F64",
        "unexpected 'conv3.bias'",
        "bad.safetensors",
    ] {
        assert!(err.contains(needle), "{needle} not in: {err}");
    }
    std::fs::write(&path, b"not a checkpoint").unwrap();
    let err = checkpoint::load(&path, sim(1)).unwrap_err().to_string();
    assert!(err.contains("not a valid safetensors file"), "{err}");
}

#[test]
fn loaded_checkpoint_resumes_training() {
    let graph = datasets::karate(sim(1)).unwrap();
    let mut t = Trainer::new(ModelConfig::gcn(34, 8, 4), &graph, &TrainConfig::gcn()).unwrap();
    t.epoch(&graph).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ckpt.safetensors");
    checkpoint::save(t.model(), &path).unwrap();
    let model = checkpoint::load(&path, sim(2)).unwrap();
    let mut resumed = Trainer::from_model(model, &TrainConfig::gcn()).unwrap();
    let graph2 = graph.to_device(sim(2)).unwrap();
    let first = resumed.epoch(&graph2).unwrap().loss;
    let mut last = first;
    for _ in 0..20 {
        last = resumed.epoch(&graph2).unwrap().loss;
    }
    assert!(first.is_finite() && last < first, "{first} {last}");
}

#[test]
fn checkpoint_save_and_load_are_recorded_in_the_ledger() {
    let ledger = Ledger::new();
    let at = sim(1).with_ledger(&ledger);
    let (model, _) = Model::init(ModelConfig::gcn(34, 8, 4), 0, &at).unwrap();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("c.safetensors");
    ledger.set_phase("save");
    checkpoint::save(&model, &path).unwrap();
    ledger.set_phase("load");
    let back = checkpoint::load(&path, sim(2).with_ledger(&ledger)).unwrap();
    assert_eq!(back.placement().to_string(), "sim:2");
    let dirs = |phase: &str| -> Vec<(String, String)> {
        ledger
            .in_phase(phase)
            .into_iter()
            .map(|t| (t.from, t.to))
            .collect()
    };
    assert_eq!(dirs("save"), vec![("sim:1".into(), "cpu".into()); 4]);
    assert_eq!(dirs("load"), vec![("cpu".into(), "sim:2".into()); 4]);
}
