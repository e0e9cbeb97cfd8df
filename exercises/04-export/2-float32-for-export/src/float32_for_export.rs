//! Half precision for serving, float32 for export.
//!
//! A model converted with `model.to_dtype(DType::F16)` (PyTorch's `model.half()`) serves with
//! half the memory, and on a GPU faster. Exports stay float32: many runtimes reject
//! half-precision weights, and a PyG user loading the file expects `model.float()` weights. So
//! before exporting, the serving copy goes back with `to_dtype(DType::F32)` (PyTorch's
//! `model.float()`); its values keep the half-precision rounding (each weight within a relative
//! 2^-11 of the original for f16), so the exported model is the one that was served.
//!
//! And half precision is not free: measure what it costs on real data before serving it.

use std::path::Path;
use workbook::candle_core::{DType, Tensor, D};
use workbook::export::preflight::{self, Example, PreflightReport};
use workbook::export::safetensors;
use workbook::{Graph, Model, Result, WorkbookError};

/// The float32 copy of a model, for export: PyTorch's `model.float()`.
///
/// The copy stays where the model is (same device).
pub fn back_to_float32(serving: &Model) -> Result<Model> {
    // TODO: return a copy whose parameters are float32: PyTorch's `model.float()`.
    Ok(serving.clone())
}

/// What serving a float32 model in half precision costs on a graph's test split.
#[derive(Clone, Debug)]
pub struct HalfPrecisionCost {
    /// The half-precision dtype measured (`F16` or `BF16`).
    pub dtype: DType,
    /// Test accuracy of the float32 model.
    pub accuracy_f32: f64,
    /// Test accuracy of its `dtype` copy.
    pub accuracy_half: f64,
    /// Largest `|logit_f32 - logit_half|` over every node and class; NaN when any difference is
    /// NaN (an overflow: half precision turned a logit into infinity, and `inf - inf` is NaN).
    pub max_logit_diff: f32,
    /// The test nodes whose predicted class changed, in the split's order.
    pub changed: Vec<u32>,
}

impl HalfPrecisionCost {
    /// Accuracy lost by serving in half precision (negative if the copy did better).
    pub fn accuracy_drop(&self) -> f64 {
        self.accuracy_f32 - self.accuracy_half
    }
}

/// The predicted class of each node (the arg-max of its row), whatever the logits' dtype.
pub fn predicted_classes(logits: &Tensor) -> Result<Vec<u32>> {
    Ok(logits
        .to_dtype(DType::F32)?
        .argmax(D::Minus1)?
        .to_vec1::<u32>()?)
}

/// The fraction of `nodes` whose predicted class is their label.
pub fn accuracy(predicted: &[u32], labels: &[i64], nodes: &[u32]) -> f64 {
    let correct = nodes
        .iter()
        .filter(|&&i| i64::from(predicted[i as usize]) == labels[i as usize])
        .count();
    correct as f64 / nodes.len().max(1) as f64
}

/// Runs the float32 `model` and its `dtype` copy on `graph` and measures the difference on the
/// graph's test split (Cora: the 1000 test papers of PyG's public split).
pub fn half_precision_cost(
    model: &Model,
    graph: &Graph,
    dtype: DType,
) -> Result<HalfPrecisionCost> {
    let (Some(split), Some(labels)) = (graph.split(), graph.labels_host()?) else {
        return Err(WorkbookError::InvalidGraph(format!(
            "'{}' has no labels or no test split to measure accuracy on",
            graph.name
        )));
    };
    let test: Vec<u32> = split.test.to_vec1()?;
    let logits_f32 = model.forward_graph(graph)?.logits;
    // TODO: the logits of the `dtype` copy of the model, as float32 (a half-precision model takes half-precision inputs).
    let logits_half = logits_f32.clone();
    // TODO: the largest |logits_f32 - logits_half| over every node and class, NaN if any difference is NaN.
    let max_logit_diff = 0.0;
    let (a, b) = (
        predicted_classes(&logits_f32)?,
        predicted_classes(&logits_half)?,
    );
    // TODO: the test nodes (`test`, in order) whose predicted class differs between `a` and `b`.
    let changed = Vec::new();
    Ok(HalfPrecisionCost {
        dtype,
        accuracy_f32: accuracy(&a, &labels, &test),
        accuracy_half: accuracy(&b, &labels, &test),
        max_logit_diff,
        changed,
    })
}

/// Exports the model being served (half precision, on its device) for PyTorch Geometric:
/// float32 weights under PyG's names at `path` and the config beside them
/// (`workbook::export::safetensors::export`), after the pre-flight on `example`, which may
/// have been loaded anywhere. Returns the pre-flight's report; writes nothing if it fails.
pub fn export_for_pyg(serving: &Model, example: &Graph, path: &Path) -> Result<PreflightReport> {
    // TODO: exports are float32; this is the half-precision model being served.
    let model = serving;
    // TODO: the pre-flight's example must be where the exported model is, wherever the example was loaded.
    let report = preflight::check(model, &Example::from_graph(example))?;
    safetensors::export(model, path)?;
    Ok(report)
}
