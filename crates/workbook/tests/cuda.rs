//! The CUDA path: the same fixtures on the GPU as on the CPU. Runs only in a `cuda` build on a
//! machine with a GPU. Without the feature, `cargo test` lists them as ignored with the reason; in a
//! `cuda` build without a GPU they print `SKIPPED` and why.

use crate::common;

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
                assert_eq!(
                    (m.culprit.as_str(), m.found.to_string().as_str()),
                    (part.name(), "cpu")
                );
                assert_eq!(m.expected.to_string(), "cuda:0");
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
    // With RUST_BACKTRACE set, candle wraps every error with its backtrace.
    let inner = match &err {
        workbook::candle_core::Error::WithBacktrace { inner, .. } => inner.as_ref(),
        e => e,
    };
    assert!(
        matches!(
            inner,
            workbook::candle_core::Error::DeviceMismatchBinaryOp { .. }
        ),
        "{err:?}"
    );
    println!("candle's own error: {inner}");
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
    let (model, _) = Model::init(config.clone(), 0, Placement::cpu()).unwrap();
    // The reference trains its own copy: ModelParallel shares a layer that is already on its
    // stage's device (conv1 here, on the host), as PyTorch's `.to` does.
    let (reference, _) = Model::init(config, 0, Placement::cpu()).unwrap();
    let ledger = Ledger::new();
    let stages = [
        Placement::cpu().with_ledger(&ledger),
        gpu.clone().with_ledger(&ledger),
    ];
    let mp = ModelParallel::new(&model, &stages).unwrap();
    let g = mp.place_graph(&graph).unwrap();
    let mut trainer = Trainer::from_model(reference, &recipe).unwrap();
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

/// A random graph for the kernel comparisons: `e` random edges among the first `n - 3` nodes
/// (the last three stay isolated), a hub that receives `hub` extra edges (one long CSR row), a
/// duplicate of the first edge and two self-loops.
fn kernel_graph(seed: u64, n: usize, e: usize, hub: usize) -> (Vec<u32>, Vec<u32>) {
    use rand::{Rng, SeedableRng};
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(seed);
    let live = (n - 3) as u32;
    let mut src: Vec<u32> = (0..e).map(|_| rng.random_range(0..live)).collect();
    let mut dst: Vec<u32> = (0..e).map(|_| rng.random_range(0..live)).collect();
    src.extend((0..hub).map(|_| rng.random_range(0..live)));
    dst.extend(std::iter::repeat_n(0, hub));
    src.extend([src[0], 1, 2]);
    dst.extend([dst[0], 1, 2]);
    (src, dst)
}

/// `max |a - b| / max(1, max |b|)`, both read back to the host.
fn relative_diff(a: &Tensor, b: &Tensor) -> f32 {
    let a = a.to_device(&Device::Cpu).unwrap();
    let b = b.to_device(&Device::Cpu).unwrap();
    let scale = common::max_abs(&b).max(1.0);
    common::max_abs_diff(&a, &b) / scale
}

/// Every custom kernel (segment max, GATv2 scores, CSR softmax, CSR sparse-dense product) on
/// the GPU against the CPU path on the same f32 inputs, values and gradients: a small graph with
/// isolated nodes, a duplicate edge, self-loops and 8 heads, and a graph of 10⁶ edges with a hub
/// of 5,000 in-edges. The differences are printed so a run records them.
#[test]
#[cfg_attr(
    not(feature = "cuda"),
    ignore = "needs a GPU: cargo test --features cuda"
)]
fn custom_kernels_on_gpu_match_the_cpu_with_gradients() {
    use std::sync::Arc;
    use workbook::candle_core::Var;
    use workbook::ops::{csr_softmax, csr_spmm, gat_scores, segment_max, Csr};
    let Some(gpu) = gpu("custom_kernels_on_gpu_match_the_cpu_with_gradients") else {
        return;
    };
    let cpu = Device::Cpu;
    for (name, n, e, hub, heads, channels) in [
        ("small graph, 8 heads", 200, 1_500, 40, 8, 8),
        ("10^6 edges, 8 heads", 100_000, 1_000_000, 5_000, 8, 8),
        (
            "10^6 edges, 1 head, 64 channels",
            100_000,
            1_000_000,
            5_000,
            1,
            64,
        ),
    ] {
        let (src, dst) = kernel_graph(7, n, e, hub);
        let edges = src.len();
        let on = |d: &Device| Arc::new(Csr::new(&src, &dst, n, d).unwrap());
        let (csr_c, csr_g) = (on(&cpu), on(&gpu));
        // The same values on both devices: drawn on the host, copied to the GPU.
        let leaf = |shape: &[usize]| {
            let t = Tensor::randn(0f32, 1.0, shape, &cpu).unwrap();
            (
                Var::from_tensor(&t).unwrap(),
                Var::from_tensor(&t.to_device(&gpu).unwrap()).unwrap(),
            )
        };
        let (xl_c, xl_g) = leaf(&[n, heads, channels]);
        let (xr_c, xr_g) = leaf(&[n, heads, channels]);
        let (att_c, att_g) = leaf(&[1, heads, channels]);
        let (w_c, w_g) = leaf(&[edges, heads]);
        let r = Tensor::randn(0f32, 1.0, (n, heads, channels), &cpu).unwrap();
        let r_g = r.to_device(&gpu).unwrap();
        let mut report = Vec::new();
        let mut check = |what: &str, got: &Tensor, want: &Tensor, tol: f32| {
            let d = relative_diff(got, want);
            report.push(format!("{what} {d:.1e}"));
            assert!(
                d <= tol,
                "{name}: {what} differs by {d:e} (relative) on the GPU"
            );
        };

        // GATv2's pipeline, the three kernels chained (scores, softmax, weighted sum), a plain
        // weighted sum, and the segment max of the scores by destination.
        let run = |xl: &Var, xr: &Var, att: &Var, w: &Var, csr: &Arc<Csr>, r: &Tensor| {
            let s = gat_scores(xl.as_tensor(), xr.as_tensor(), att.as_tensor(), csr, 0.2).unwrap();
            let a = csr_softmax(&s, csr).unwrap();
            let out = csr_spmm(xl.as_tensor(), &a, csr).unwrap();
            let plain = csr_spmm(xr.as_tensor(), w.as_tensor(), csr).unwrap();
            let loss = ((&out * r).unwrap().sum_all().unwrap()
                + (&plain * r).unwrap().sum_all().unwrap())
            .unwrap();
            let grads = loss.backward().unwrap();
            (s, a, out, plain, grads)
        };
        let c = run(&xl_c, &xr_c, &att_c, &w_c, &csr_c, &r);
        let g = run(&xl_g, &xr_g, &att_g, &w_g, &csr_g, &r_g);
        // The segment max of the same scores (the CPU's) on both devices: exact.
        let seg = |d: &Device| {
            let index = Tensor::new(dst.as_slice(), d).unwrap();
            segment_max(&c.0.to_device(d).unwrap(), &index, n).unwrap()
        };
        check("segment_max", &seg(&gpu), &seg(&cpu), 0.0);
        check("gat_scores", &g.0, &c.0, 1e-5);
        check("csr_softmax", &g.1, &c.1, 1e-5);
        check("csr_spmm(attention)", &g.2, &c.2, 1e-5);
        check("csr_spmm(weights)", &g.3, &c.3, 1e-5);
        for (what, vc, vg) in [
            ("d x_l", &xl_c, &xl_g),
            ("d x_r", &xr_c, &xr_g),
            ("d att", &att_c, &att_g),
            ("d w", &w_c, &w_g),
        ] {
            let (gc, gg) = (c.4.get(vc).unwrap(), g.4.get(vg).unwrap());
            check(what, gg, gc, 1e-4);
        }
        println!("{name} ({edges} edges): {}", report.join(", "));
    }
}
