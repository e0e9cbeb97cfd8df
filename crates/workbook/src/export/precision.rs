//! Half precision for inference, float32 for export: what the conversion costs on a real graph.
//!
//! [`Model::to_dtype`] converts every parameter (PyTorch's `model.half()` / `model.float()`);
//! the layers then compute in that dtype (candle's CPU and CUDA ops for f16/bf16; the fused
//! f32 kernels are used for f32 only). [`compare`] runs the float32 model and its converted copy
//! on the same graph and reports accuracy, prediction agreement and the largest logit
//! difference. Exports are float32: convert back with `to_dtype(DType::F32)` first (the values
//! keep the half-precision rounding, so the round trip f32 → f16 → f32 changes each weight by
//! at most its f16 rounding error, a relative 2^-11).
//!
//! ```
//! use workbook::{datasets, Model, ModelConfig, Placement};
//! use workbook::candle_core::DType;
//! use workbook::export::precision::compare;
//! let graph = datasets::karate(&Placement::cpu()).unwrap();
//! let (model, _) = Model::init(ModelConfig::gcn(34, 8, 4), 0, &Placement::cpu()).unwrap();
//! let r = compare(&model, &graph, DType::F16).unwrap();
//! assert!(r.max_logit_diff < 0.05 && r.agreement > 0.9);
//! assert_eq!(model.to_dtype(DType::F16).unwrap().dtype(), DType::F16);
//! ```

use crate::error::Result;
use crate::graph::Graph;
use crate::model::Model;
use candle_core::{DType, Tensor, D};

/// Accuracy (on the test split) may drop by at most this much in f16 on Cora; the tests hold
/// the trained PyG models to it.
pub const F16_ACCURACY_TOLERANCE: f64 = 0.005;
/// The same for bf16 (8 mantissa bits instead of 11).
pub const BF16_ACCURACY_TOLERANCE: f64 = 0.01;

/// Float32 against a converted copy on one graph.
#[derive(Clone, Debug)]
pub struct PrecisionReport {
    pub dtype: DType,
    /// Accuracy of the float32 model on the test split (all labelled nodes without a split).
    pub accuracy_f32: f64,
    /// Accuracy of the converted model on the same nodes.
    pub accuracy_converted: f64,
    /// Fraction of all nodes whose predicted class is the same.
    pub agreement: f64,
    /// Largest |logit_f32 - logit_converted| over all nodes and classes.
    pub max_logit_diff: f32,
    /// Nodes the accuracy is over.
    pub nodes: usize,
}

fn argmax(logits: &Tensor) -> Result<Vec<u32>> {
    Ok(logits
        .to_dtype(DType::F32)?
        .argmax(D::Minus1)?
        .to_vec1::<u32>()?)
}

/// Runs `model` (float32) and `model.to_dtype(dtype)` on `graph` and compares them.
pub fn compare(model: &Model, graph: &Graph, dtype: DType) -> Result<PrecisionReport> {
    model.require_float32("the comparison is against")?;
    let f32_out = model.forward_graph(graph)?.logits;
    let converted = model.to_dtype(dtype)?;
    let x = graph.x().to_dtype(dtype)?;
    let half_out = converted.forward(&x, graph.edge_index(), None)?.logits;
    let half32 = half_out.to_dtype(DType::F32)?;
    let max_logit_diff = (&f32_out - &half32)?
        .abs()?
        .flatten_all()?
        .max(0)?
        .to_scalar::<f32>()?;
    let (a, b) = (argmax(&f32_out)?, argmax(&half32)?);
    let agreement = a.iter().zip(&b).filter(|(p, q)| p == q).count() as f64 / a.len().max(1) as f64;
    let labels = graph.labels_host()?;
    let nodes: Vec<usize> = match (graph.split(), &labels) {
        (Some(split), _) => split
            .test
            .to_vec1::<u32>()?
            .into_iter()
            .map(|i| i as usize)
            .collect(),
        (None, Some(y)) => (0..y.len()).collect(),
        (None, None) => Vec::new(),
    };
    let accuracy = |pred: &[u32]| -> f64 {
        match &labels {
            Some(y) if !nodes.is_empty() => {
                nodes.iter().filter(|&&i| pred[i] as i64 == y[i]).count() as f64
                    / nodes.len() as f64
            }
            _ => f64::NAN,
        }
    };
    Ok(PrecisionReport {
        dtype,
        accuracy_f32: accuracy(&a),
        accuracy_converted: accuracy(&b),
        agreement,
        max_logit_diff,
        nodes: nodes.len(),
    })
}
