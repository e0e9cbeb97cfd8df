//! Graded tests for exercise 04-2 (points in exercise.toml). Do not edit: the grader checks this
//! file against its checksum.

use super::float32_for_export::{
    back_to_float32, export_for_pyg, half_precision_cost, predicted_classes,
};
use std::path::PathBuf;
use workbook::candle_core::{DType, Device, Tensor};
use workbook::device::accelerator;
use workbook::export::precision::{self, BF16_ACCURACY_TOLERANCE, F16_ACCURACY_TOLERANCE};
use workbook::export::preflight::{self, Example};
use workbook::{checkpoint, datasets, tensor_file, Graph, Model, ModelConfig, Placement};

/// Cora (PyG's Planetoid split), embedded in the library.
fn cora(at: &Placement) -> Graph {
    datasets::load("cora", None, at).expect("loading Cora")
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

fn max_abs_diff(a: &Tensor, b: &Tensor) -> f32 {
    let a = a.to_device(&Device::Cpu).unwrap();
    let b = b.to_device(&Device::Cpu).unwrap();
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

fn not_f32(model: &Model) -> Vec<String> {
    model
        .named_parameters()
        .into_iter()
        .filter(|(_, t)| t.dtype() != DType::F32)
        .map(|(n, t)| format!("{n} ({:?})", t.dtype()))
        .collect()
}

#[test]
fn the_float32_copy_passes_the_preflight() {
    let gpu = accelerator().placement;
    let graph = cora(&gpu);
    for (name, dtype) in [("gcn", DType::F16), ("gatv2", DType::BF16)] {
        let serving = trained(name, &gpu).to_dtype(dtype).unwrap();
        let back = back_to_float32(&serving)
            .unwrap_or_else(|e| panic!("back_to_float32 failed on the {dtype:?} {name}: {e}"));
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
        if let Err(e) = preflight::check(&back, &Example::from_graph(&graph)) {
            panic!("the float32 copy of the {dtype:?} {name} must pass the export pre-flight: {e}");
        }
    }
}

#[test]
fn the_float32_copy_keeps_the_logits() {
    let graph = cora(&Placement::cpu());
    let model = trained("gcn", &Placement::cpu());
    let back = back_to_float32(&model.to_dtype(DType::F16).unwrap())
        .unwrap_or_else(|e| panic!("back_to_float32 failed: {e}"));
    let out = back
        .forward_graph(&graph)
        .unwrap_or_else(|e| panic!("the float32 copy cannot run on Cora's float32 features: {e}"));
    let original = model.forward_graph(&graph).unwrap().logits;
    let diff = max_abs_diff(&out.logits, &original);
    assert!(
        diff <= 1e-2,
        "the float32 copy's logits are up to {diff} from the original's; f16 rounding of the weights moves them by less than 1e-2"
    );
    let (a, b) = (
        predicted_classes(&original).unwrap(),
        predicted_classes(&out.logits).unwrap(),
    );
    let same = a.iter().zip(&b).filter(|(p, q)| p == q).count();
    assert!(
        same as f64 >= 0.99 * a.len() as f64,
        "only {same} of {} predictions survive the round trip",
        a.len()
    );
    println!(
        "f32 -> f16 -> f32: max |logit diff| {diff:.3e}, {same} of {} predictions unchanged",
        a.len()
    );
}

#[test]
fn measures_what_half_precision_costs() {
    let graph = cora(&Placement::cpu());
    let model = trained("gcn", &Placement::cpu());
    let test: Vec<u32> = graph.split().unwrap().test.to_vec1().unwrap();
    let mut measured = Vec::new(); // printed once every check has passed
    for (dtype, tolerance) in [
        (DType::F16, F16_ACCURACY_TOLERANCE),
        (DType::BF16, BF16_ACCURACY_TOLERANCE),
    ] {
        let cost = half_precision_cost(&model, &graph, dtype)
            .unwrap_or_else(|e| panic!("half_precision_cost failed for {dtype:?}: {e}"));
        let reference = precision::compare(&model, &graph, dtype).unwrap();
        assert!(
            cost.max_logit_diff > 0.0
                && (cost.max_logit_diff - reference.max_logit_diff).abs() <= 1e-6,
            "{dtype:?}: max |logit diff| should be {:.4e} (the {dtype:?} copy run on {dtype:?} features), got {:.4e}",
            reference.max_logit_diff,
            cost.max_logit_diff
        );
        assert_eq!(
            cost.accuracy_f32, reference.accuracy_f32,
            "{dtype:?}: the float32 test accuracy is off"
        );
        assert_eq!(
            cost.accuracy_half, reference.accuracy_converted,
            "{dtype:?}: the half-precision test accuracy is off"
        );
        // the test nodes whose prediction changed, computed here independently
        let half = model.to_dtype(dtype).unwrap();
        let x = graph.x().to_dtype(dtype).unwrap();
        let b =
            predicted_classes(&half.forward(&x, graph.edge_index(), None).unwrap().logits).unwrap();
        let a = predicted_classes(&model.forward_graph(&graph).unwrap().logits).unwrap();
        let expected: Vec<u32> = test
            .iter()
            .copied()
            .filter(|&i| a[i as usize] != b[i as usize])
            .collect();
        assert_eq!(
            cost.changed, expected,
            "{dtype:?}: the test nodes whose predicted class changed"
        );
        assert!(
            cost.accuracy_drop() <= tolerance,
            "{dtype:?} costs {:.2} accuracy points on Cora, more than the {:.1} allowed",
            100.0 * cost.accuracy_drop(),
            100.0 * tolerance
        );
        measured.push(format!(
            "Cora GCN in {dtype:?}: test accuracy {:.1}% -> {:.1}% (drop {:+.2} points), max |logit diff| {:.3e}, {} test prediction(s) changed",
            100.0 * cost.accuracy_f32,
            100.0 * cost.accuracy_half,
            100.0 * cost.accuracy_drop(),
            cost.max_logit_diff,
            cost.changed.len()
        ));
    }
    println!("{}", measured.join("\n"));
}

#[test]
fn exports_float32_for_pyg_from_the_accelerator() {
    let gpu = accelerator().placement;
    let original = trained("gcn", &gpu);
    let serving = original.to_dtype(DType::F16).unwrap(); // served in f16 on the accelerator
    let example = cora(&Placement::cpu()); // the example graph, loaded on the host
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("cora_gcn.safetensors");
    let report = export_for_pyg(&serving, &example, &path)
        .unwrap_or_else(|e| panic!("export_for_pyg failed: {e}"));
    assert_eq!(
        report.checks.len(),
        5,
        "the pre-flight should report its 5 passed checks: {:?}",
        report.checks
    );
    let file = tensor_file::read(&path, &Device::Cpu)
        .unwrap_or_else(|e| panic!("no readable export at {}: {e}", path.display()));
    let mut wrong: Vec<String> = file
        .tensors
        .iter()
        .filter(|(_, t)| t.dtype() != DType::F32)
        .map(|(n, t)| format!("{n} ({:?})", t.dtype()))
        .collect();
    wrong.sort();
    assert!(
        wrong.is_empty(),
        "the exported weights must all be float32 for PyG; not: {}",
        wrong.join(", ")
    );
    assert_eq!(file.tensors.len(), 4, "a 2-layer GCN has 4 tensors");
    assert!(
        dir.path().join("cora_gcn.json").is_file(),
        "the config should be written beside the weights (cora_gcn.json)"
    );
    let back = checkpoint::load(&path, Placement::cpu()).unwrap();
    let graph = cora(&Placement::cpu());
    let diff = max_abs_diff(
        &back.forward_graph(&graph).unwrap().logits,
        &original
            .forward_graph(&example.to_device(&gpu).unwrap())
            .unwrap()
            .logits,
    );
    assert!(
        diff <= 1e-2,
        "the exported model's logits are up to {diff} from the original float32 model's"
    );
}
