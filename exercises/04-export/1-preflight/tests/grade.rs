//! Graded tests for exercise 04-1 (points in exercise.toml). Do not edit: the grader checks this
//! file against its checksum.

use super::preflight::{
    check_devices, check_dtypes, check_example, check_mode, check_outputs, preflight, Check, Mode,
    Problem,
};
use std::collections::HashMap;
use workbook::candle_core::{DType, Device, Tensor};
use workbook::device::accelerator;
use workbook::export::preflight::Example;
use workbook::{datasets, Graph, LayerConfig, Model, ModelConfig, Placement};

fn karate(at: &Placement) -> Graph {
    datasets::karate(at).expect("loading the karate club")
}

fn gcn(at: &Placement) -> Model {
    Model::init(ModelConfig::gcn(34, 16, 4), 0, at)
        .expect("building the GCN")
        .0
}

/// The problems as one line each, for assertion messages.
fn listed(problems: &[Problem]) -> String {
    if problems.is_empty() {
        return "no problems".into();
    }
    problems
        .iter()
        .map(|p| format!("[{:?}] {p}", p.check))
        .collect::<Vec<_>>()
        .join(" | ")
}

fn about<'a>(problems: &'a [Problem], tensor: &str) -> Vec<&'a Problem> {
    problems.iter().filter(|p| p.tensor == tensor).collect()
}

/// A karate GCN on the cpu whose `conv2.lin.weight` holds a NaN (a diverged run).
fn gcn_with_nan() -> Model {
    let clean = gcn(&Placement::cpu());
    let mut tensors: HashMap<String, Tensor> = clean.named_parameters().into_iter().collect();
    let w = &tensors["conv2.lin.weight"];
    let mut values = w.flatten_all().unwrap().to_vec1::<f32>().unwrap();
    values[0] = f32::NAN;
    let poisoned = Tensor::from_vec(values, w.dims(), &Device::Cpu).unwrap();
    tensors.insert("conv2.lin.weight".into(), poisoned);
    Model::from_tensors(clean.config().clone(), &tensors, Placement::cpu()).unwrap()
}

#[test]
fn a_clean_model_passes() {
    let gpu = accelerator().placement;
    let graph = karate(&gpu);
    let example = Example::from_graph(&graph);
    let problems = preflight(&gcn(&gpu), Mode::Eval, &example);
    assert!(
        problems.is_empty(),
        "a float32 GCN in eval mode on {gpu}, with the example on {gpu}, must pass; got {}",
        listed(&problems)
    );
    let config = ModelConfig::gatv2(34, 8, 2, 4);
    let gat = Model::init(config, 1, &gpu).unwrap().0;
    let problems = preflight(&gat, Mode::Eval, &example);
    assert!(
        problems.is_empty(),
        "a clean GATv2 on {gpu} must pass; got {}",
        listed(&problems)
    );
}

#[test]
fn buffers_left_on_another_device_are_named() {
    let gpu = accelerator().placement;
    // GCN with `cached=True`: the first forward pass stores `_cached_edge_index` on the cpu;
    // moving only the parameters leaves it there (PyTorch's `module.to` does the same to PyG).
    let mut config = ModelConfig::gcn(34, 16, 4);
    for layer in &mut config.layers {
        if let LayerConfig::Gcn(c) = layer {
            c.cached = true;
        }
    }
    let cached = Model::init(config, 0, Placement::cpu()).unwrap().0;
    cached.forward_graph(&karate(&Placement::cpu())).unwrap();
    let stale = cached.parameters_to_device(&gpu).unwrap();
    let problems = check_devices(&stale);
    for buffer in ["conv1._cached_edge_index", "conv2._cached_edge_index"] {
        let found = about(&problems, buffer);
        assert!(
            found.len() == 1 && found[0].check == Check::Devices,
            "the buffer '{buffer}' is on cpu while the parameters are on {gpu}: expected one Devices problem naming it; got {}",
            listed(&problems)
        );
        assert!(
            found[0].fix.contains("to_device"),
            "the fix for '{buffer}' should say model.to_device(...); got '{}'",
            found[0].fix
        );
    }
    assert_eq!(
        problems.len(),
        2,
        "only the two stale buffers are elsewhere (every parameter is on {gpu}); got {}",
        listed(&problems)
    );
    let moved = cached.to_device(&gpu).unwrap();
    let problems = check_devices(&moved);
    assert!(
        problems.is_empty(),
        "model.to_device moves parameters and buffers together, so nothing is elsewhere; got {}",
        listed(&problems)
    );
}

#[test]
fn half_precision_parameters_are_named() {
    let model = gcn(&Placement::cpu());
    assert!(
        check_dtypes(&model).is_empty(),
        "a float32 model has no dtype problem; got {}",
        listed(&check_dtypes(&model))
    );
    for dtype in [DType::F16, DType::BF16] {
        let half = model.to_dtype(dtype).unwrap();
        let problems = check_dtypes(&half);
        for (name, _) in half.named_parameters() {
            let found = about(&problems, &name);
            assert!(
                found.len() == 1 && found[0].check == Check::Dtype,
                "parameter '{name}' is {dtype:?}: expected one Dtype problem naming it; got {}",
                listed(&problems)
            );
            assert!(
                found[0].problem.contains(&format!("{dtype:?}")),
                "the problem for '{name}' should say it is {dtype:?}; got '{}'",
                found[0].problem
            );
            assert!(
                found[0].fix.contains("to_dtype(DType::F32)"),
                "the fix for '{name}' should say model.to_dtype(DType::F32); got '{}'",
                found[0].fix
            );
        }
        assert_eq!(
            problems.len(),
            4,
            "one problem per parameter; got {}",
            listed(&problems)
        );
    }
}

#[test]
fn training_mode_is_refused() {
    let config = ModelConfig::gatv2(34, 8, 2, 4); // dropout 0.6
    let model = Model::init(config, 0, Placement::cpu()).unwrap().0;
    assert!(
        check_mode(&model, Mode::Eval).is_empty(),
        "evaluation mode is what is exported: no problem; got {}",
        listed(&check_mode(&model, Mode::Eval))
    );
    let problems = check_mode(&model, Mode::Train);
    assert!(
        problems.len() == 1 && problems[0].check == Check::Mode && problems[0].tensor == "model",
        "training mode must give one Mode problem about 'model'; got {}",
        listed(&problems)
    );
    assert!(
        problems[0].problem.contains("0.6"),
        "the problem should name the dropout that would be exported (0.6); got '{}'",
        problems[0].problem
    );
    assert!(
        problems[0].fix.contains("eval") || problems[0].fix.contains("Eval"),
        "the fix should say to export in evaluation mode (model.eval()); got '{}'",
        problems[0].fix
    );
}

#[test]
fn a_bad_example_is_named() {
    let gpu = accelerator().placement;
    let model = gcn(&gpu);
    let on_cpu = karate(&Placement::cpu());
    // the dummy input on the cpu, the model on the accelerator
    let problems = check_example(&model, &Example::from_graph(&on_cpu));
    for input in ["x", "edge_index"] {
        let found = about(&problems, input);
        assert!(
            found.len() == 1 && found[0].check == Check::Example,
            "example input '{input}' is on cpu but the model on {gpu}: expected one Example problem naming it; got {}",
            listed(&problems)
        );
        assert!(
            found[0].fix.contains("to_device"),
            "the fix for '{input}' should say to_device; got '{}'",
            found[0].fix
        );
    }
    assert_eq!(
        problems.len(),
        2,
        "only the devices are wrong; got {}",
        listed(&problems)
    );
    assert!(
        check_example(&model, &Example::from_graph(&karate(&gpu))).is_empty(),
        "the karate graph on {gpu} is a good example for this model; got {}",
        listed(&check_example(&model, &Example::from_graph(&karate(&gpu))))
    );

    // the wrong feature width, then the wrong dtype, on the cpu
    let model = gcn(&Placement::cpu());
    let x_wide = Tensor::zeros((34, 35), DType::F32, &Device::Cpu).unwrap();
    let problems = check_example(&model, &Example::new(&x_wide, on_cpu.edge_index()));
    assert!(
        problems.len() == 1
            && problems[0].tensor == "x"
            && problems[0].problem.contains("35")
            && problems[0].problem.contains("34"),
        "x has 35 features but the model takes in_channels = 34: expected one problem about 'x' naming both numbers; got {}",
        listed(&problems)
    );
    let x16 = on_cpu.x().to_dtype(DType::F16).unwrap();
    let problems = check_example(&model, &Example::new(&x16, on_cpu.edge_index()));
    assert!(
        problems.len() == 1
            && problems[0].tensor == "x"
            && problems[0].fix.contains("to_dtype(DType::F32)"),
        "x is F16: expected one problem about 'x' whose fix says to_dtype(DType::F32); got {}",
        listed(&problems)
    );
    let x_short = Tensor::zeros((30, 34), DType::F32, &Device::Cpu).unwrap();
    let problems = check_example(&model, &Example::new(&x_short, on_cpu.edge_index()));
    assert!(
        problems.len() == 1
            && problems[0].tensor == "x"
            && problems[0].problem.contains("30")
            && problems[0].problem.contains("34"),
        "x has 30 rows but edge_index is for 34 nodes: expected one problem about 'x' naming both numbers; got {}",
        listed(&problems)
    );
}

#[test]
fn non_finite_outputs_are_reported() {
    let graph = karate(&Placement::cpu());
    let example = Example::from_graph(&graph);
    let clean = check_outputs(&gcn(&Placement::cpu()), &example)
        .unwrap_or_else(|e| panic!("check_outputs failed on a clean model: {e}"));
    assert!(
        clean.is_empty(),
        "a clean model gives finite logits; got {}",
        listed(&clean)
    );
    let problems = check_outputs(&gcn_with_nan(), &example)
        .unwrap_or_else(|e| panic!("check_outputs failed: {e}"));
    for tensor in ["conv2.lin.weight", "logits"] {
        assert!(
            about(&problems, tensor)
                .iter()
                .any(|p| p.check == Check::Outputs && !p.fix.is_empty()),
            "conv2.lin.weight holds a NaN, so it and the logits need an Outputs problem (with a fix) naming '{tensor}'; got {}",
            listed(&problems)
        );
    }
    assert_eq!(
        problems.len(),
        2,
        "only conv2.lin.weight and the logits are non-finite; got {}",
        listed(&problems)
    );
}

#[test]
fn every_problem_is_reported_at_once() {
    let gpu = accelerator().placement;
    // half precision, training mode, and the dummy input on the cpu: three kinds at once
    let half = gcn(&gpu).to_dtype(DType::F16).unwrap();
    let on_cpu = karate(&Placement::cpu());
    let problems = preflight(&half, Mode::Train, &Example::from_graph(&on_cpu));
    for (check, tensor) in [
        (Check::Dtype, "conv1.lin.weight"),
        (Check::Dtype, "conv2.bias"),
        (Check::Mode, "model"),
        (Check::Example, "x"),
        (Check::Example, "edge_index"),
    ] {
        assert!(
            problems.iter().any(|p| p.check == check && p.tensor == tensor),
            "a half-precision model in training mode with the example on cpu: expected a {check:?} problem about '{tensor}' among all the others; got {}",
            listed(&problems)
        );
    }
    assert!(
        problems.iter().all(|p| p.check != Check::Outputs),
        "with the example on another device the forward pass cannot run, so it must not be attempted; got {}",
        listed(&problems)
    );
    assert_eq!(
        problems.len(),
        4 + 1 + 2,
        "4 parameters in F16, the mode, 2 example inputs; got {}",
        listed(&problems)
    );

    // the forward pass runs in spite of dtype and mode problems, and its findings are added
    let nan_half = gcn_with_nan().to_dtype(DType::F16).unwrap();
    let problems = preflight(&nan_half, Mode::Train, &Example::from_graph(&on_cpu));
    for (check, tensor) in [
        (Check::Dtype, "conv1.lin.weight"),
        (Check::Mode, "model"),
        (Check::Outputs, "conv2.lin.weight"),
        (Check::Outputs, "logits"),
    ] {
        assert!(
            problems.iter().any(|p| p.check == check && p.tensor == tensor),
            "a half-precision model with a NaN weight, in training mode: expected a {check:?} problem about '{tensor}' (run the forward pass with x in the model's dtype); got {}",
            listed(&problems)
        );
    }
}
