//! Graded tests for exercise 04-2 (points in exercise.toml). Do not edit: the grader checks this
//! file against its checksum.
//!
//! Each test is a scenario (the `scenario` crate): it records what it observed, and a teacher's
//! grader compares that with the reference solution's. The grading run's challenge picks the
//! accelerator (`cuda:0`, or a simulated `sim:2` to `sim:7`), the model (the GCN or the GATv2
//! PyG trained on Cora), the half-precision dtype, and how far a model is scaled out of float16's
//! range. Every comparison here treats a NaN as a difference: a NaN never passes for a value.

use super::float32_for_export::{
    back_to_float32, export_for_pyg, half_precision_cost, predicted_classes, HalfPrecisionCost,
};
use scenario::{Scenario, Tolerance};
use std::collections::HashMap;
use std::path::PathBuf;
use workbook::candle_core::{DType, Device, Tensor};
use workbook::device::accelerator_or_sim;
use workbook::export::precision::{BF16_ACCURACY_TOLERANCE, F16_ACCURACY_TOLERANCE};
use workbook::export::preflight::{self, Example};
use workbook::{checkpoint, datasets, tensor_file, Graph, Model, ModelConfig, Placement, Split};

/// The accelerator: `cuda:0`, or `sim:2` to `sim:7` as the run's challenge picks.
fn accelerator(s: &Scenario) -> Placement {
    accelerator_or_sim(s.pick("accelerator", 2..8)).placement
}

/// Cora (PyG's Planetoid split), embedded in the library.
fn cora(at: &Placement) -> Graph {
    datasets::load("cora", None, at).expect("loading Cora")
}

/// Cora with a test split of 1000 papers the challenge draws among those outside PyG's train and
/// val splits (which stay as they are), on the cpu.
fn cora_with_drawn_test_split(s: &Scenario) -> Graph {
    let cora = cora(&Placement::cpu());
    let n = cora.num_nodes();
    let [train, val, _] = cora.split().unwrap().to_masks(n).unwrap();
    let mut free: Vec<usize> = (0..n).filter(|&i| !train[i] && !val[i]).collect();
    // a Fisher-Yates shuffle driven by the challenge's seed (SplitMix64 steps)
    let mut state = s.seed("test split");
    for i in (1..free.len()).rev() {
        state = state.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = state;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^= z >> 31;
        free.swap(i, (z % (i as u64 + 1)) as usize);
    }
    let mut test = vec![false; n];
    for &i in &free[..1000] {
        test[i] = true;
    }
    let split = Split::from_masks(&train, &val, &test, &Device::Cpu).unwrap();
    let labels = cora.labels_host().unwrap().unwrap();
    Graph::new("Cora", cora.x().clone(), cora.edge_index().clone())
        .unwrap()
        .with_labels(&labels, split)
        .unwrap()
}

/// 64 rows of `logits` the challenge draws (the nodes an observation compares).
fn drawn_rows(s: &Scenario, logits: &Tensor) -> Tensor {
    let n = logits.dims()[0];
    let rows: Vec<u32> = (0..64)
        .map(|k| s.pick(&format!("observed row {k}"), 0..n) as u32)
        .collect();
    let rows = Tensor::new(rows.as_slice(), logits.device()).unwrap();
    logits.index_select(&rows, 0).unwrap()
}

/// `gcn` or `gatv2`, as the challenge picks.
fn model_kind(s: &Scenario) -> &'static str {
    ["gcn", "gatv2"][s.pick("model", 0..2)]
}

/// `F16` or `BF16`, as the challenge picks.
fn half_dtype(s: &Scenario) -> DType {
    [DType::F16, DType::BF16][s.pick("half dtype", 0..2)]
}

/// A model trained on Cora by PyTorch Geometric (the library's test fixtures): float32.
fn trained(model: &str, at: &Placement) -> Model {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("../../../crates/workbook/tests/fixtures/pyg")
        .join(format!("cora_{model}_trained.safetensors"));
    let config = match model {
        "gcn" => ModelConfig::gcn(1433, 16, 7),
        _ => ModelConfig::gatv2(1433, 8, 8, 7),
    };
    let file = tensor_file::read(&path, &Device::Cpu)
        .unwrap_or_else(|e| panic!("reading the PyG-trained Cora {model}: {e}"));
    // the fixture also holds PyG's outputs (`expected.*`); from_tensors takes the parameters
    Model::from_tensors(config, &file.tensors, at)
        .unwrap_or_else(|e| panic!("loading the PyG-trained Cora {model}: {e}"))
}

/// A tensor's values, on the host, as float32.
fn host(t: &Tensor) -> Vec<f32> {
    t.to_device(&Device::Cpu)
        .unwrap()
        .to_dtype(DType::F32)
        .unwrap()
        .flatten_all()
        .unwrap()
        .to_vec1::<f32>()
        .unwrap()
}

/// The largest `|a - b|`, NaN as soon as any difference is NaN (candle's `max` and
/// `f32::max` skip NaN, so a NaN output would pass for a small difference).
fn max_abs_diff(a: &Tensor, b: &Tensor) -> f32 {
    let (a, b) = (host(a), host(b));
    assert_eq!(a.len(), b.len(), "the tensors differ in size");
    let mut worst = 0f32;
    for (x, y) in a.iter().zip(&b) {
        let d = (x - y).abs();
        if d.is_nan() {
            return f32::NAN;
        }
        worst = worst.max(d);
    }
    worst
}

fn not_f32(model: &Model) -> Vec<String> {
    model
        .named_parameters()
        .into_iter()
        .filter(|(_, t)| t.dtype() != DType::F32)
        .map(|(n, t)| format!("{n} ({:?})", t.dtype()))
        .collect()
}

/// Each parameter's name and dtype, sorted by name.
fn dtypes(model: &Model) -> Vec<(String, String)> {
    let mut all: Vec<_> = model
        .named_parameters()
        .into_iter()
        .map(|(n, t)| (n, format!("{:?}", t.dtype())))
        .collect();
    all.sort();
    all
}

#[test]
fn the_float32_copy_passes_the_preflight() {
    let s = scenario::start();
    let gpu = accelerator(&s);
    let graph = cora(&gpu);
    let name = model_kind(&s);
    let dtype = half_dtype(&s);
    let serving = trained(name, &gpu).to_dtype(dtype).unwrap();
    let back = back_to_float32(&serving)
        .unwrap_or_else(|e| panic!("back_to_float32 failed on the {dtype:?} {name}: {e}"));
    s.observe("the copy's device", &back.placement().to_string());
    let logits = back
        .forward_graph(&graph)
        .unwrap_or_else(|e| panic!("the float32 copy cannot run on Cora on {gpu}: {e}"))
        .logits;
    let preflight = preflight::check(&back, &Example::from_graph(&graph));
    // one record: the dtypes and the pre-flight's count are the same under many challenges
    // (they could be written in advance), the drawn rows of the logits are the challenge's
    s.observe_within(
        "dtypes of the copy, passed pre-flight checks, logits of the float32 copy (drawn rows)",
        &(
            dtypes(&back),
            preflight.as_ref().map(|r| r.checks.len()).ok(),
            drawn_rows(&s, &logits),
        ),
        Tolerance {
            abs: 1e-5,
            rel: 1e-5,
        },
    );
    let wrong = not_f32(&back);
    assert!(
        wrong.is_empty(),
        "every parameter of the export copy must be float32; still not: {}",
        wrong.join(", ")
    );
    assert_eq!(
        back.placement(),
        &gpu,
        "the float32 copy should stay on the serving device"
    );
    if let Err(e) = preflight {
        panic!("the float32 copy of the {dtype:?} {name} must pass the export pre-flight: {e}");
    }
}

#[test]
fn the_float32_copy_keeps_the_logits() {
    let s = scenario::start();
    let graph = cora(&Placement::cpu());
    let name = model_kind(&s);
    let dtype = half_dtype(&s);
    let model = trained(name, &Placement::cpu());
    let back = back_to_float32(&model.to_dtype(dtype).unwrap())
        .unwrap_or_else(|e| panic!("back_to_float32 failed: {e}"));
    let out = back
        .forward_graph(&graph)
        .unwrap_or_else(|e| panic!("the float32 copy cannot run on Cora's float32 features: {e}"));
    s.observe_within(
        "logits of the float32 copy, drawn rows",
        &drawn_rows(&s, &out.logits),
        Tolerance {
            abs: 1e-5,
            rel: 1e-5,
        },
    );
    let original = model.forward_graph(&graph).unwrap().logits;
    let diff = max_abs_diff(&out.logits, &original);
    let bound = if dtype == DType::F16 { 1e-2 } else { 1e-1 };
    assert!(
        diff <= bound,
        "the float32 copy's logits are up to {diff} from the original's; {dtype:?} rounding of the weights moves them by less than {bound}"
    );
    let (a, b) = (
        predicted_classes(&original).unwrap(),
        predicted_classes(&out.logits).unwrap(),
    );
    let same = a.iter().zip(&b).filter(|(p, q)| p == q).count();
    assert!(
        same as f64 >= 0.97 * a.len() as f64,
        "only {same} of {} predictions survive the round trip",
        a.len()
    );
    println!(
        "f32 -> {dtype:?} -> f32 ({name}): max |logit diff| {diff:.3e}, {same} of {} predictions unchanged",
        a.len()
    );
}

/// What the test computes itself: the logits of the float32 model and of its `dtype` copy run
/// on `dtype` features, both as float32.
fn both_logits(model: &Model, graph: &Graph, dtype: DType) -> (Tensor, Tensor) {
    let f32_logits = model.forward_graph(graph).unwrap().logits;
    let half = model.to_dtype(dtype).unwrap();
    let x = graph.x().to_dtype(dtype).unwrap();
    let half_logits = half
        .forward(&x, graph.edge_index(), None)
        .unwrap()
        .logits
        .to_dtype(DType::F32)
        .unwrap();
    (f32_logits, half_logits)
}

/// Checks `cost` against what the test computes from the logits, and observes it in one record
/// with `also` (a verdict on it): the difference can be NaN under every challenge (the overflow
/// is the lesson) and a verdict is the same under most, so alone they could be written in
/// advance; the accuracies and the changed nodes come from the challenge's test split.
fn check_cost(
    s: &Scenario,
    label: &str,
    cost: &HalfPrecisionCost,
    model: &Model,
    graph: &Graph,
    also: (&str, bool),
) {
    let dtype = cost.dtype;
    let (f32_logits, half_logits) = both_logits(model, graph, dtype);
    let test: Vec<u32> = graph.split().unwrap().test.to_vec1().unwrap();
    let labels = graph.labels_host().unwrap().unwrap();
    let (a, b) = (
        predicted_classes(&f32_logits).unwrap(),
        predicted_classes(&half_logits).unwrap(),
    );
    let accuracy = |p: &[u32]| {
        test.iter()
            .filter(|&&i| i64::from(p[i as usize]) == labels[i as usize])
            .count() as f64
            / test.len() as f64
    };
    let expected_diff = max_abs_diff(&f32_logits, &half_logits);
    let expected_changed: Vec<u32> = test
        .iter()
        .copied()
        .filter(|&i| a[i as usize] != b[i as usize])
        .collect();
    s.observe(
        format!(
            "{label}: max |logit diff|, accuracies, changed test nodes, {}",
            also.0
        ),
        &(
            cost.max_logit_diff,
            (cost.accuracy_f32, cost.accuracy_half),
            &cost.changed,
            also.1,
        ),
    );
    let same_diff = if expected_diff.is_nan() {
        cost.max_logit_diff.is_nan()
    } else if expected_diff.is_infinite() {
        cost.max_logit_diff == expected_diff
    } else {
        (cost.max_logit_diff - expected_diff).abs() <= 1e-6 * expected_diff.max(1.0)
    };
    assert!(
        same_diff && expected_diff != 0.0,
        "{label}: max |logit diff| should be {expected_diff:.4e} (the {dtype:?} copy run on {dtype:?} features, every node and class, a NaN counted as NaN), got {:.4e}",
        cost.max_logit_diff
    );
    assert_eq!(
        cost.accuracy_f32,
        accuracy(&a),
        "{label}: the float32 test accuracy is off"
    );
    assert_eq!(
        cost.accuracy_half,
        accuracy(&b),
        "{label}: the {dtype:?} test accuracy is off"
    );
    assert_eq!(
        cost.changed, expected_changed,
        "{label}: the test nodes whose predicted class changed, in the split's order"
    );
}

#[test]
fn measures_what_half_precision_costs() {
    let s = scenario::start();
    let graph = cora_with_drawn_test_split(&s);
    let name = model_kind(&s);
    let model = trained(name, &Placement::cpu());
    let mut measured = Vec::new(); // printed once every check has passed
    for (dtype, tolerance) in [
        (DType::F16, F16_ACCURACY_TOLERANCE),
        (DType::BF16, BF16_ACCURACY_TOLERANCE),
    ] {
        let cost = half_precision_cost(&model, &graph, dtype)
            .unwrap_or_else(|e| panic!("half_precision_cost failed for {dtype:?}: {e}"));
        check_cost(
            &s,
            &format!("the {name} in {dtype:?}"),
            &cost,
            &model,
            &graph,
            (
                "the accuracy drop within the tolerance",
                cost.accuracy_drop() <= tolerance,
            ),
        );
        assert!(
            cost.accuracy_drop() <= tolerance,
            "{dtype:?} costs {:.2} accuracy points on Cora, more than the {:.1} allowed",
            100.0 * cost.accuracy_drop(),
            100.0 * tolerance
        );
        measured.push(format!(
            "Cora {name} in {dtype:?}: test accuracy {:.1}% -> {:.1}% (drop {:+.2} points), max |logit diff| {:.3e}, {} test prediction(s) changed",
            100.0 * cost.accuracy_f32,
            100.0 * cost.accuracy_half,
            100.0 * cost.accuracy_drop(),
            cost.max_logit_diff,
            cost.changed.len()
        ));
    }
    println!("{}", measured.join("\n"));
}

/// The trained GCN with the weights of one layer scaled by `2^k`: its float32 logits are fine
/// (below 10^6), but float16 tops out at 65504, so its f16 copy overflows to infinity, and
/// `inf - inf` to NaN, in some of its logits.
fn out_of_f16_range(layer: &str, k: u32) -> Model {
    let model = trained("gcn", &Placement::cpu());
    let mut tensors: HashMap<String, Tensor> = model.named_parameters().into_iter().collect();
    let w = (&tensors[layer] * f64::from(1u32 << k)).unwrap();
    tensors.insert(layer.into(), w);
    Model::from_tensors(model.config().clone(), &tensors, Placement::cpu()).unwrap()
}

#[test]
fn an_overflow_in_half_precision_is_measured_not_hidden() {
    let s = scenario::start();
    let graph = cora_with_drawn_test_split(&s);
    // Scalings (measured) whose f16 logits hold both infinities and NaNs.
    let (layer, k) = [
        ("conv1.lin.weight", 14),
        ("conv1.lin.weight", 15),
        ("conv2.lin.weight", 14),
    ][s.pick("overflow", 0..3)];
    let model = out_of_f16_range(layer, k);
    let cost = half_precision_cost(&model, &graph, DType::F16).unwrap_or_else(|e| {
        panic!("half_precision_cost failed on a model out of F16's range: {e}")
    });
    check_cost(
        &s,
        &format!("the GCN with {layer} scaled by 2^{k}, in F16"),
        &cost,
        &model,
        &graph,
        (
            "the measured difference is NaN",
            cost.max_logit_diff.is_nan(),
        ),
    );
    assert!(
        cost.max_logit_diff.is_nan(),
        "F16 overflows on this model (values beyond 65504 become inf, and inf - inf is NaN in some logits): the measured difference must be NaN, not {}",
        cost.max_logit_diff
    );
}

#[test]
fn exports_float32_for_pyg_from_the_accelerator() {
    let s = scenario::start();
    let gpu = accelerator(&s);
    let name = model_kind(&s);
    let original = trained(name, &gpu);
    let dtype = half_dtype(&s);
    let serving = original.to_dtype(dtype).unwrap(); // served in half precision on the accelerator
    let example = cora(&Placement::cpu()); // the example graph, loaded on the host
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(format!("cora_{name}.safetensors"));
    let report = export_for_pyg(&serving, &example, &path)
        .unwrap_or_else(|e| panic!("export_for_pyg failed: {e}"));
    let passed = report.checks.len();
    assert_eq!(
        report.checks.len(),
        5,
        "the pre-flight should report its 5 passed checks: {:?}",
        report.checks
    );
    let file = tensor_file::read(&path, &Device::Cpu)
        .unwrap_or_else(|e| panic!("no readable export at {}: {e}", path.display()));
    let mut stored: Vec<(String, String)> = file
        .tensors
        .iter()
        .map(|(n, t)| (n.clone(), format!("{:?}", t.dtype())))
        .collect();
    stored.sort();
    let wrong: Vec<String> = stored
        .iter()
        .filter(|(_, d)| d != "F32")
        .map(|(n, d)| format!("{n} ({d})"))
        .collect();
    assert!(
        wrong.is_empty(),
        "the exported weights must all be float32 for PyG; not: {}",
        wrong.join(", ")
    );
    assert_eq!(
        file.tensors.len(),
        original.named_parameters().len(),
        "the export holds the model's {} parameters",
        original.named_parameters().len()
    );
    let config_written = dir.path().join(format!("cora_{name}.json")).is_file();
    assert!(
        config_written,
        "the config should be written beside the weights (cora_{name}.json)"
    );
    let back = checkpoint::load(&path, Placement::cpu()).unwrap();
    let graph = cora(&Placement::cpu());
    let logits = back.forward_graph(&graph).unwrap().logits;
    // one record: the checks passed, the tensors and the config file are the same under many
    // challenges (they could be written in advance), the drawn rows of the logits are the
    // challenge's
    s.observe_within(
        "passed pre-flight checks, exported tensors and dtypes, config written beside the weights, logits of the exported model (drawn rows)",
        &(passed, &stored, config_written, drawn_rows(&s, &logits)),
        Tolerance {
            abs: 1e-5,
            rel: 1e-5,
        },
    );
    let diff = max_abs_diff(
        &logits,
        &original
            .forward_graph(&example.to_device(&gpu).unwrap())
            .unwrap()
            .logits,
    );
    let bound = if dtype == DType::F16 { 1e-2 } else { 1e-1 };
    assert!(
        diff <= bound,
        "the exported model's logits are up to {diff} from the original float32 model's"
    );
}
