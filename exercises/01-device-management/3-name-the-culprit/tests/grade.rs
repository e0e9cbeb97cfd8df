//! Graded tests for exercise 01-3 (points in exercise.toml). Do not edit: the grader checks this
//! file against its checksum.

use super::device_check::{check_same_device, pre_forward_check, Kind, Mismatch, Named};
use workbook::candle_core::{DType, Tensor};
use workbook::device::accelerator;
use workbook::{datasets, GcnConfig, Graph, GraphPart, LayerConfig, Model, ModelConfig, Placement};

fn gcn_on(at: &Placement) -> Model {
    Model::init(ModelConfig::gcn(34, 16, 4), 0, at)
        .expect("building the GCN")
        .0
}

/// The GCN with `cached=True` in both layers (PyG: `GCNConv(..., cached=True)`).
fn cached_gcn_on(at: &Placement) -> Model {
    let conv = |i, o| {
        let mut c = GcnConfig::new(i, o);
        c.cached = true;
        LayerConfig::Gcn(c)
    };
    let config = ModelConfig {
        layers: vec![conv(34, 16), conv(16, 4)],
        ..ModelConfig::gcn(34, 16, 4)
    };
    Model::init(config, 0, at)
        .expect("building the cached GCN")
        .0
}

/// The error of the pre-forward check, which must find a mismatch here.
fn mismatch(model: &Model, graph: &Graph, situation: &str) -> Mismatch {
    match pre_forward_check(model, graph) {
        Ok(()) => panic!("pre_forward_check passed, but {situation}"),
        Err(m) => m,
    }
}

#[test]
fn names_an_input_culprit() {
    let (sim, cpu) = (Placement::sim(1), Placement::cpu());
    let err = check_same_device(
        "model parameters",
        &sim,
        &[
            Named::new("conv1.lin.weight", Kind::Parameter, &sim),
            Named::new("x", Kind::Input, &sim),
            Named::new("edge_index", Kind::Input, &cpu),
        ],
    )
    .expect_err(
        "check_same_device passed, but 'edge_index' is on cpu and everything else on sim:1",
    );
    assert_eq!(
        (
            err.culprit.as_str(),
            err.kind,
            err.expected.as_str(),
            err.found.as_str()
        ),
        ("edge_index", Kind::Input, "sim:1", "cpu"),
        "the mismatch should name the input 'edge_index', expected on sim:1 and found on cpu"
    );
    assert_eq!(
        err.to_string(),
        "Expected all tensors to be on the same device: model parameters are on sim:1 but input 'edge_index' is on cpu. Move the graph with graph.to_device(&device)",
        "the message should name the culprit, both devices and the fix, in the library's words"
    );
}

#[test]
fn names_the_first_culprit_a_parameter() {
    let (sim, cpu) = (Placement::sim(1), Placement::cpu());
    let err = check_same_device(
        "conv1's parameters",
        &sim,
        &[
            Named::new("conv1.lin.weight", Kind::Parameter, &sim),
            Named::new("conv1.bias", Kind::Parameter, &sim),
            Named::new("conv2.lin.weight", Kind::Parameter, &cpu),
            Named::new("x", Kind::Input, &cpu),
        ],
    )
    .err()
    .unwrap_or_else(|| {
        panic!("check_same_device passed, but 'conv2.lin.weight' and 'x' are on cpu, not sim:1")
    });
    let msg = err.to_string();
    assert_eq!(
        err.culprit, "conv2.lin.weight",
        "the first tensor in the list that is elsewhere is 'conv2.lin.weight'; got '{}' ({msg})",
        err.culprit
    );
    assert_eq!(
        msg,
        "Expected all tensors to be on the same device: conv1's parameters are on sim:1 but parameter 'conv2.lin.weight' is on cpu. Move the whole model with model.to_device(&device)",
        "the message should use expected_what, name the parameter and give the parameter's fix"
    );
    assert!(
        !msg.contains('\n'),
        "the message should be one line, got: {msg}"
    );
}

#[test]
fn checks_the_model_and_the_graph_before_the_forward_pass() {
    let gpu = accelerator().placement;
    let cpu = Placement::cpu();
    let model = gcn_on(&gpu);
    let on_cpu = datasets::karate(&cpu).unwrap();
    let err = mismatch(
        &model,
        &on_cpu,
        &format!("the model is on {gpu} and the graph on cpu"),
    );
    assert_eq!(
        err.to_string(),
        format!("Expected all tensors to be on the same device: model parameters are on {gpu} but input 'x' is on cpu. Move the graph with graph.to_device(&device)"),
        "a graph left on the cpu: the first part checked is 'x'"
    );
    let on_gpu = on_cpu.to_device(&gpu).unwrap();
    for (part, name) in [
        (GraphPart::EdgeIndex, "edge_index"),
        (GraphPart::Labels, "y"),
        (GraphPart::Masks, "train_mask/val_mask/test_mask"),
    ] {
        let partial = on_gpu.move_part(part, &cpu).unwrap();
        let err = mismatch(
            &model,
            &partial,
            &format!("the graph's '{name}' is on cpu and the model on {gpu}"),
        );
        let msg = err.to_string();
        assert!(
            err.culprit == name && err.kind == Kind::Input,
            "only '{name}' was left on cpu, so the culprit is the input '{name}'; got {:?} '{}' ({msg})",
            err.kind,
            err.culprit
        );
        assert!(
            msg.contains(&format!(
                "model parameters are on {gpu} but input '{name}' is on cpu"
            )) && msg.ends_with("graph.to_device(&device)"),
            "the message should name '{name}', both devices and the fix, got: {msg}"
        );
    }
}

#[test]
fn names_a_stray_edge_weight() {
    let gpu = accelerator().placement;
    let cpu = Placement::cpu();
    let host = datasets::karate(&cpu).unwrap();
    let weights = Tensor::ones(host.num_edges(), DType::F32, cpu.device()).unwrap();
    let weighted = host.with_edge_weight(weights).unwrap();
    let model = gcn_on(&gpu);
    let stray = weighted
        .to_device(&gpu)
        .unwrap()
        .move_part(GraphPart::EdgeWeight, &cpu)
        .unwrap();
    let err = mismatch(
        &model,
        &stray,
        &format!("the edge weights are on cpu and the model on {gpu}"),
    );
    assert_eq!(
        err.to_string(),
        format!("Expected all tensors to be on the same device: model parameters are on {gpu} but input 'edge_weight' is on cpu. Move the graph with graph.to_device(&device)"),
        "the edge weights were left behind: the culprit is 'edge_weight'"
    );
}

#[test]
fn names_a_stale_cached_buffer() {
    let gpu = accelerator().placement;
    let cpu = Placement::cpu();
    let graph = datasets::karate(&cpu).unwrap();
    let model = cached_gcn_on(&cpu);
    model.forward_graph(&graph).unwrap(); // fills the cache on the cpu
    let stale = model.parameters_to_device(&gpu).unwrap(); // PyTorch's module.to
    let graph = graph.to_device(&gpu).unwrap();
    let err = mismatch(
        &stale,
        &graph,
        "conv1._cached_edge_index is still on the cpu (check the model's buffer_placements)",
    );
    let msg = err.to_string();
    assert!(
        err.culprit == "conv1._cached_edge_index" && err.kind == Kind::Buffer,
        "the culprit is the cached buffer 'conv1._cached_edge_index'; got {:?} '{}' ({msg})",
        err.kind,
        err.culprit
    );
    assert_eq!(
        msg,
        format!("Expected all tensors to be on the same device: model parameters are on {gpu} but cached buffer 'conv1._cached_edge_index' is on cpu. Move the model with model.to_device(&device), which moves its cached buffers too, or call model.clear_cache()"),
        "the message should name the cached buffer and its fix"
    );
}

#[test]
fn passes_when_everything_is_on_one_device() {
    let cpu = Placement::cpu();
    for at in [cpu.clone(), accelerator().placement] {
        let graph = datasets::karate(&at).unwrap();
        let model = cached_gcn_on(&at);
        model.forward_graph(&graph).unwrap(); // fills the cache where the model is
        assert_eq!(
            model.buffer_placements().len(),
            2,
            "the cached GCN should have its two buffers"
        );
        if let Err(e) = pre_forward_check(&model, &graph) {
            panic!("everything is on {at}, yet pre_forward_check failed: {e}");
        }
        // ...and a check that always passes is no check.
        let elsewhere = if at == cpu {
            Placement::sim(7)
        } else {
            cpu.clone()
        };
        let partial = graph.move_part(GraphPart::X, &elsewhere).unwrap();
        assert!(
            pre_forward_check(&model, &partial).is_err(),
            "pre_forward_check passed with 'x' on {elsewhere} and everything else on {at}"
        );
    }
}
