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
    let mut problems = check_devices(model);
    problems.extend(check_dtypes(model));
    problems.extend(check_mode(model, mode));
    problems.extend(check_example(model, example));
    let runnable = !problems
        .iter()
        .any(|p| matches!(p.check, Check::Devices | Check::Example));
    if runnable {
        match check_outputs(model, example) {
            Ok(found) => problems.extend(found),
            Err(e) => problems.push(Problem::new(
                Check::Outputs,
                "logits",
                format!("the forward pass on the example failed: {e}"),
                "fix the model or the example so that model.forward runs",
            )),
        }
    }
    problems
}

/// Every parameter and cached buffer that is not on the model's device (`model.placement()`).
///
/// One `Devices` problem per tensor, named by its full name (`conv1.lin.weight`,
/// `conv1._cached_edge_index`); the fix says `model.to_device(...)`, which moves parameters
/// and buffers together.
pub fn check_devices(model: &Model) -> Vec<Problem> {
    let at = model.placement();
    let mut problems = Vec::new();
    for (name, p) in model.parameter_placements() {
        if p != at {
            problems.push(Problem::new(
                Check::Devices,
                name,
                format!("parameter is on {p} but the model is on {at}"),
                format!("move the whole model with model.to_device({at})"),
            ));
        }
    }
    for (name, p) in model.buffer_placements() {
        if p != at {
            problems.push(Problem::new(
                Check::Devices,
                name,
                format!("cached buffer is on {p} but the model's parameters are on {at}"),
                format!(
                    "move parameters and buffers together with model.to_device({at}) (or model.clear_cache())"
                ),
            ));
        }
    }
    problems
}

/// Every parameter that is not float32.
///
/// One `Dtype` problem per parameter, naming its dtype (`F16`); the fix says
/// `model.to_dtype(DType::F32)` (PyTorch's `model.float()`).
pub fn check_dtypes(model: &Model) -> Vec<Problem> {
    model
        .named_parameters()
        .into_iter()
        .filter(|(_, t)| t.dtype() != DType::F32)
        .map(|(name, t)| {
            Problem::new(
                Check::Dtype,
                name,
                format!("parameter is {:?}; exports are float32", t.dtype()),
                "convert the model back with model.to_dtype(DType::F32) (PyTorch: model.float())",
            )
        })
        .collect()
}

/// Training mode is refused: the export is of the evaluation forward pass.
///
/// One `Mode` problem about `model`, naming the dropout probability
/// (`model.config().dropout`); the fix says to use `Mode::Eval` (PyTorch's `model.eval()`).
pub fn check_mode(model: &Model, mode: Mode) -> Vec<Problem> {
    match mode {
        Mode::Eval => Vec::new(),
        Mode::Train => vec![Problem::new(
            Check::Mode,
            "model",
            format!(
                "the model is in training mode: dropout {} would be exported",
                model.config().dropout
            ),
            "export in evaluation mode, Mode::Eval (PyTorch: model.eval())",
        )],
    }
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
    let mut problems = Vec::new();
    if example.x_at != *at {
        problems.push(Problem::new(
            Check::Example,
            "x",
            format!(
                "example input is on {} but the model is on {at}",
                example.x_at
            ),
            format!("create the example on the model's device: graph.to_device({at})"),
        ));
    }
    if example.edge_index.placement() != at {
        problems.push(Problem::new(
            Check::Example,
            "edge_index",
            format!(
                "example input is on {} but the model is on {at}",
                example.edge_index.placement()
            ),
            format!("move it with edge_index.to_device({at}) (or the whole graph)"),
        ));
    }
    if example.x.dtype() != DType::F32 {
        problems.push(Problem::new(
            Check::Example,
            "x",
            format!(
                "example input is {:?}; the exported model takes float32",
                example.x.dtype()
            ),
            "convert it with x.to_dtype(DType::F32)",
        ));
    }
    let features = model.config().layers[0].in_channels();
    match example.x.dims() {
        &[rows, width] => {
            if width != features {
                problems.push(Problem::new(
                    Check::Example,
                    "x",
                    format!(
                        "example input has {width} features per node but the model takes in_channels = {features}"
                    ),
                    format!("give the example {features} features per node, like the real inputs"),
                ));
            }
            let nodes = example.edge_index.num_nodes();
            if rows != nodes {
                problems.push(Problem::new(
                    Check::Example,
                    "x",
                    format!("example input has {rows} rows but edge_index is for {nodes} nodes"),
                    "build x and edge_index from the same graph",
                ));
            }
        }
        dims => problems.push(Problem::new(
            Check::Example,
            "x",
            format!("example input has shape {dims:?}, not [num_nodes, {features}]"),
            format!("give it the shape [num_nodes, {features}]"),
        )),
    }
    problems
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
    let mut problems = Vec::new();
    for (name, t) in model.named_parameters() {
        let bad = non_finite(&t)?;
        if bad > 0 {
            problems.push(Problem::new(
                Check::Outputs,
                name,
                format!("parameter holds {bad} NaN or infinite value(s)"),
                "reload the weights from a good checkpoint or retrain (a diverged run?)",
            ));
        }
    }
    let logits = model.forward(example.x, example.edge_index, None)?.logits;
    let bad = non_finite(&logits)?;
    if bad > 0 {
        problems.push(Problem::new(
            Check::Outputs,
            "logits",
            format!(
                "the forward pass gave {bad} NaN or infinite logit(s) out of {}",
                logits.elem_count()
            ),
            "find the non-finite parameters or inputs (see the other problems) before exporting",
        ));
    }
    Ok(problems)
}
