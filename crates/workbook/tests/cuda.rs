//! The CUDA path: the same fixtures on the GPU as on the CPU. Runs only in a `cuda` build on a
//! machine with a GPU. Without the feature, `cargo test` lists them as ignored with the reason; in a
//! `cuda` build without a GPU they print `SKIPPED` and why.

mod common;

use common::gpu;

use workbook::candle_core::{Device, Tensor};

#[test]
#[cfg_attr(
    not(feature = "cuda"),
    ignore = "needs a GPU: cargo test --features cuda"
)]
fn segment_max_on_gpu_equals_cpu() {
    let Some(gpu) = gpu("segment_max_on_gpu_equals_cpu") else {
        return;
    };
    let cpu = Device::Cpu;
    let src = Tensor::randn(0f32, 3.0, (5000, 4), &cpu).unwrap();
    let idx: Vec<u32> = (0..5000u32).map(|i| (i * 7919) % 997).collect();
    let idx = Tensor::from_vec(idx, 5000, &cpu).unwrap();
    let want = workbook::ops::segment_max(&src, &idx, 1000).unwrap();
    let got = workbook::ops::segment_max(
        &src.to_device(&gpu).unwrap(),
        &idx.to_device(&gpu).unwrap(),
        1000,
    )
    .unwrap()
    .to_device(&cpu)
    .unwrap();
    assert_eq!(common::max_abs_diff(&want, &got), 0.0);
}

#[test]
#[cfg_attr(
    not(feature = "cuda"),
    ignore = "needs a GPU: cargo test --features cuda"
)]
fn trained_models_on_gpu_reproduce_pyg_logits() {
    let Some(gpu) = gpu("trained_models_on_gpu_reproduce_pyg_logits") else {
        return;
    };
    let graph = workbook::datasets::load("cora", None, &gpu).unwrap();
    for (model, config) in [
        ("gcn", workbook::ModelConfig::gcn(1433, 16, 7)),
        ("gatv2", workbook::ModelConfig::gatv2(1433, 8, 8, 7)),
    ] {
        let file = workbook::tensor_file::read(
            &common::fixtures_dir().join(format!("cora_{model}_trained.safetensors")),
            &gpu,
        )
        .unwrap();
        let m = workbook::Model::from_tensors(config, &file.tensors, &gpu).unwrap();
        let out = m.forward(graph.x(), graph.edge_index(), None).unwrap();
        let diff = common::max_abs_diff(&out.logits, &file.tensors["expected.logits"]);
        assert!(diff < 1e-4, "{model} on CUDA differs from PyG by {diff}");
        println!("{model} on CUDA: within {diff:e} of PyG");
    }
}

/// The GPU as a placement, or `None` after printing why the test is skipped.
fn gpu_placement(test: &str) -> Option<workbook::Placement> {
    gpu(test).map(|d| workbook::Placement::of(&d))
}

#[test]
#[cfg_attr(
    not(feature = "cuda"),
    ignore = "needs a GPU: cargo test --features cuda"
)]
fn mismatches_on_gpu_are_named_like_on_sim() {
    use workbook::{GraphPart, Model, ModelConfig, Placement, WorkbookError};
    let Some(gpu) = gpu_placement("mismatches_on_gpu_are_named_like_on_sim") else {
        return;
    };
    let (model, _) = Model::init(ModelConfig::gcn(34, 8, 4), 0, &gpu).unwrap();
    let graph = workbook::datasets::karate(&gpu).unwrap();
    model.forward_graph(&graph).unwrap();
    for part in [
        GraphPart::X,
        GraphPart::EdgeIndex,
        GraphPart::Labels,
        GraphPart::Masks,
    ] {
        let partial = graph.move_part(part, &Placement::cpu()).unwrap();
        match model.forward_graph(&partial).unwrap_err() {
            WorkbookError::DeviceMismatch(m) => {
                assert_eq!((m.culprit.as_str(), m.found.as_str()), (part.name(), "cpu"));
                assert_eq!(m.expected, "cuda:0");
            }
            other => panic!("{part:?}: {other}"),
        }
    }
    println!(
        "named on the GPU: {}",
        model
            .forward_graph(&graph.to_device(Placement::cpu()).unwrap())
            .unwrap_err()
    );
}

#[test]
#[cfg_attr(
    not(feature = "cuda"),
    ignore = "needs a GPU: cargo test --features cuda"
)]
fn candle_reports_its_own_error_when_checks_are_bypassed() {
    let Some(gpu) = gpu("candle_reports_its_own_error_when_checks_are_bypassed") else {
        return;
    };
    let a = Tensor::ones(3, workbook::candle_core::DType::F32, &gpu).unwrap();
    let b = Tensor::ones(3, workbook::candle_core::DType::F32, &Device::Cpu).unwrap();
    let err = (a + b).unwrap_err();
    assert!(
        matches!(
            err,
            workbook::candle_core::Error::DeviceMismatchBinaryOp { .. }
        ),
        "{err:?}"
    );
    println!("candle's own error: {err}");
}

#[test]
#[cfg_attr(
    not(feature = "cuda"),
    ignore = "needs a GPU: cargo test --features cuda"
)]
fn ledger_on_gpu_counts_like_sim_and_checkpoint_loads_on_cpu() {
    use workbook::ledger::Ledger;
    use workbook::train::{TrainConfig, Trainer};
    use workbook::{checkpoint, ModelConfig, Placement};
    let Some(gpu) = gpu_placement("ledger_on_gpu_counts_like_sim_and_checkpoint_loads_on_cpu")
    else {
        return;
    };
    let run = |at: Placement| {
        let ledger = Ledger::new();
        let at = at.with_ledger(&ledger);
        ledger.set_phase("load");
        let graph = workbook::datasets::karate(&at).unwrap();
        let mut t = Trainer::new(ModelConfig::gcn(34, 16, 4), &graph, &TrainConfig::gcn()).unwrap();
        for _ in 0..5 {
            t.epoch(&graph).unwrap();
        }
        let shape: Vec<(String, String, u64)> = ledger
            .transfers()
            .into_iter()
            .map(|t| (t.phase, t.what, t.bytes))
            .collect();
        (shape, t)
    };
    let (on_gpu, trainer) = run(gpu.clone());
    let (on_sim, _) = run(Placement::sim(1));
    assert_eq!(on_gpu, on_sim);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("gpu.safetensors");
    checkpoint::save(trainer.model(), &path).unwrap();
    let back = checkpoint::load(&path, Placement::cpu()).unwrap();
    for ((n, a), (_, b)) in trainer
        .model()
        .named_parameters()
        .iter()
        .zip(back.named_parameters())
    {
        assert_eq!(
            common::max_abs_diff(&a.to_device(&Device::Cpu).unwrap(), &b),
            0.0,
            "{n}"
        );
    }
}

/// Model parallelism across two real devices: conv1 on the host, conv2 on the GPU (one GPU is
/// enough for two devices). candle's `to_device` is differentiated, so the gradient crosses
/// back; dropout is off because the GPU draws its own masks.
#[test]
#[cfg_attr(
    not(feature = "cuda"),
    ignore = "needs a GPU: cargo test --features cuda"
)]
fn model_parallel_across_cpu_and_gpu_trains_like_one_device() {
    use workbook::ledger::Ledger;
    use workbook::parallel::model_parallel::ModelParallel;
    use workbook::train::{TrainConfig, Trainer};
    use workbook::{Model, ModelConfig, Placement};
    let Some(gpu) = gpu_placement("model_parallel_across_cpu_and_gpu_trains_like_one_device")
    else {
        return;
    };
    let graph = workbook::datasets::load("cora", None, Placement::cpu()).unwrap();
    let mut config = ModelConfig::gcn(1433, 16, 7);
    config.dropout = 0.0;
    let recipe = TrainConfig::gcn();
    let (model, _) = Model::init(config, 0, Placement::cpu()).unwrap();
    let ledger = Ledger::new();
    let stages = [
        Placement::cpu().with_ledger(&ledger),
        gpu.clone().with_ledger(&ledger),
    ];
    let mp = ModelParallel::new(&model, &stages).unwrap();
    let g = mp.place_graph(&graph).unwrap();
    let mut trainer = Trainer::from_model(model, &recipe).unwrap();
    let mut optimizers = mp.optimizers(&recipe).unwrap();
    let mut dropout = recipe.dropout(mp.placements()[0].device());
    for step in 1..=5 {
        let want = trainer.epoch(&graph).unwrap().loss;
        ledger.set_phase(format!("step {step}"));
        let got = mp.train_step(&g, &mut optimizers, &mut dropout).unwrap();
        assert!((want - got).abs() < 1e-4, "step {step}: {want} vs {got}");
        let crossing: Vec<(String, String, u64)> = ledger
            .in_phase(&format!("step {step}"))
            .into_iter()
            .filter(|t| t.what.starts_with("activation"))
            .map(|t| (t.from, t.to, t.bytes))
            .collect();
        let bytes = 2708 * 16 * 4;
        assert_eq!(
            crossing,
            [
                ("cpu".to_string(), gpu.to_string(), bytes),
                (gpu.to_string(), "cpu".to_string(), bytes)
            ]
        );
    }
}
