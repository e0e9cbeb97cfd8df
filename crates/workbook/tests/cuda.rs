//! The CUDA path: the same fixtures on the GPU as on the CPU. Runs only in a `cuda` build on a
//! machine with a GPU. Without the feature, `cargo test` lists them as ignored with the reason; in a
//! `cuda` build without a GPU they print `SKIPPED` and why.

mod common;

use workbook::candle_core::{Device, Tensor};

/// The GPU, or `None` after printing why the test is skipped.
fn gpu(test: &str) -> Option<Device> {
    if !cfg!(feature = "cuda") {
        eprintln!("SKIPPED {test}: built without the `cuda` feature (cargo test --features cuda)");
        return None;
    }
    match Device::new_cuda(0) {
        Ok(d) => Some(d),
        Err(e) => {
            eprintln!("SKIPPED {test}: no usable CUDA device ({e})");
            None
        }
    }
}

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
