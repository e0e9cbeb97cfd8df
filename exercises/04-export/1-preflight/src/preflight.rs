//! An export pre-flight that reports every problem at once, each with its fix.
//!
//! `torch.onnx.export` shows its failures one at a time: fix the device of the dummy input, run
//! again, meet the half-precision weights, run again, find out dropout was traced... A pre-flight
//! looks at everything before anything is written and lists every problem together, each naming
//! the tensor at fault and saying how to fix it:
//!
//! * **devices**: every parameter and every cached buffer (GCN's `_cached_edge_index`) on the
//!   model's device;
//! * **dtype**: every parameter float32 (a model converted with `to_dtype(DType::F16)` for
//!   serving goes back with `to_dtype(DType::F32)`, PyTorch's `model.float()`);
//! * **mode**: evaluation, not training (dropout is training-only; PyTorch's `model.eval()`);
//! * **example**: the example graph (PyTorch's dummy input) on the model's device, with float32
//!   features `x [num_nodes, in_channels]`;
//! * **outputs**: a forward pass on the example gives finite logits, and no parameter holds NaN
//!   or infinity.

use std::fmt;
use workbook::candle_core::{DType, Tensor};
use workbook::export::preflight::Example;
use workbook::{Model, Result};

/// Which check found a problem.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Check {
    Devices,
    Dtype,
    Mode,
    Example,
    Outputs,
}

/// What the model is doing: PyTorch's `model.train()` / `model.eval()`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Training: dropout is on.
    Train,
    /// Evaluation: what is exported.
    Eval,
}

/// One problem: the check that found it, the tensor at fault, what is wrong, and the fix.
#[derive(Clone, Debug, PartialEq)]
pub struct Problem {
    pub check: Check,
    /// The tensor at fault, by name: a parameter (`conv1.lin.weight`), a cached buffer
    /// (`conv1._cached_edge_index`), an example input (`x`, `edge_index`), the output
    /// (`logits`); `model` for the mode.
    pub tensor: String,
    /// What is wrong, with the values involved (devices, dtypes, sizes).
    pub problem: String,
    /// How to fix it: the call to make.
    pub fix: String,
}

impl Problem {
    pub fn new(
        check: Check,
        tensor: impl Into<String>,
        problem: impl Into<String>,
        fix: impl Into<String>,
    ) -> Self {
        Self {
            check,
            tensor: tensor.into(),
            problem: problem.into(),
            fix: fix.into(),
        }
    }
}

impl fmt::Display for Problem {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}; fix: {}", self.tensor, self.problem, self.fix)
    }
}

/// Every problem that stands between `model` and an export, all at once (empty: ready).
///
/// Runs every check. The forward pass ([`check_outputs`]) runs only when no `Devices` or
/// `Example` problem was found (it could not run); an error from it becomes an `Outputs`
/// problem about `logits`.
pub fn preflight(model: &Model, mode: Mode, example: &Example) -> Vec<Problem> {
    // TODO: run every check and return all their problems together instead of stopping at the first failing check; run `check_outputs` only when no Devices or Example problem was found, and turn an error from it into a Check::Outputs problem about `logits`.
    let problems = check_devices(model);
    if !problems.is_empty() {
        return problems;
    }
    let problems = check_dtypes(model);
    if !problems.is_empty() {
        return problems;
    }
    let problems = check_mode(model, mode);
    if !problems.is_empty() {
        return problems;
    }
    let problems = check_example(model, example);
    if !problems.is_empty() {
        return problems;
    }
    check_outputs(model, example).unwrap_or_default()
}

/// Every parameter and cached buffer that is not on the model's device (`model.placement()`).
///
/// One `Devices` problem per tensor, named by its full name (`conv1.lin.weight`,
/// `conv1._cached_edge_index`); the fix says `model.to_device(...)`, which moves parameters
/// and buffers together.
pub fn check_devices(model: &Model) -> Vec<Problem> {
    let at = model.placement();
    // TODO: return one Check::Devices problem for every parameter (`model.parameter_placements()`) and every cached buffer (`model.buffer_placements()`) that is not on `at`, with a fix that says `model.to_device(...)`.
    todo!("check_devices: compare every parameter and cached buffer with {at}")
}

/// Every parameter that is not float32.
///
/// One `Dtype` problem per parameter, naming its dtype (`F16`); the fix says
/// `model.to_dtype(DType::F32)` (PyTorch's `model.float()`).
pub fn check_dtypes(model: &Model) -> Vec<Problem> {
    // TODO: return one Check::Dtype problem for every parameter (`model.named_parameters()`) that is not DType::F32, naming its dtype, with a fix that says `model.to_dtype(DType::F32)`.
    todo!(
        "check_dtypes: look at the dtype of each of the {} parameters",
        model.named_parameters().len()
    )
}

/// Training mode is refused: the export is of the evaluation forward pass.
///
/// One `Mode` problem about `model`, naming the dropout probability
/// (`model.config().dropout`); the fix says to use `Mode::Eval` (PyTorch's `model.eval()`).
pub fn check_mode(model: &Model, mode: Mode) -> Vec<Problem> {
    // TODO: refuse Mode::Train with one Check::Mode problem about "model" that names the dropout (`model.config().dropout`) and whose fix says to export in Mode::Eval (PyTorch: model.eval()).
    todo!(
        "check_mode: {mode:?} with dropout {}",
        model.config().dropout
    )
}

/// The example inputs: on the model's device, `x` float32 `[num_nodes, in_channels]`.
///
/// `Example` problems: `x` on another device than the model (`example.x_at`), `edge_index` on
/// another device (`example.edge_index.placement()`), both with a fix saying `to_device`;
/// `x` not float32 (fix: `to_dtype(DType::F32)`); `x` with a number of features other than the
/// first layer's `in_channels` (`model.config().layers[0].in_channels()`), or a number of rows
/// other than the edge index's `num_nodes()`, each naming both numbers.
pub fn check_example(model: &Model, example: &Example) -> Vec<Problem> {
    let at = model.placement();
    // TODO: return a Check::Example problem for each thing wrong with the example: `x` or `edge_index` not on `at` (fix: `to_device`), `x` not float32 (fix: `to_dtype(DType::F32)`), `x`'s width other than `model.config().layers[0].in_channels()` or its rows other than `example.edge_index.num_nodes()` (naming both numbers).
    todo!(
        "check_example: x {:?} on {} and edge_index on {}, for a model on {at}",
        example.x.dims(),
        example.x_at,
        example.edge_index.placement()
    )
}

/// How many values of `t` are NaN or infinite (any float dtype, any device).
pub fn non_finite(t: &Tensor) -> Result<usize> {
    let values = t.to_dtype(DType::F32)?.flatten_all()?.to_vec1::<f32>()?;
    Ok(values.iter().filter(|v| !v.is_finite()).count())
}

/// The forward pass on the example, and what it gives.
///
/// Runs `model.forward` (evaluation mode) on the example, with `x` converted to the model's
/// dtype so that a half-precision model runs too. `Outputs` problems: every parameter holding
/// NaN or infinity (named by the parameter, with how many values), and `logits` if the output
/// holds any (with how many). Check the parameters even when the logits look fine: a NaN in the
/// first layer can vanish before the output (the ReLU between the layers turns it into 0).
pub fn check_outputs(model: &Model, example: &Example) -> Result<Vec<Problem>> {
    // TODO: push a Check::Outputs problem for every parameter holding NaN or infinity (`non_finite(&t)?` counts them), then run `model.forward` on the example with `x` converted to the model's dtype (`model.dtype()`) and push one about "logits" when the logits hold NaN or infinity.
    todo!(
        "check_outputs: look for NaN/inf in the {} parameters and in the logits of the {} example nodes",
        model.named_parameters().len(),
        example.edge_index.num_nodes()
    )
}
