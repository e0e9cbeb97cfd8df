//! Pre-flight validation before any export: every problem found at once, each with its fix.
//!
//! The export failures PyTorch users meet, checked before a file is written:
//!
//! * **devices** — every parameter and cached buffer on one device (PyTorch: *"Expected all
//!   tensors to be on the same device"* during tracing), and the example inputs on it (the
//!   dummy input must be on the model's device). A model-parallel model, whose layers sit on
//!   several devices ([`crate::parallel::model_parallel`]), is named as such with the fix:
//!   `model_parallel.into_model(&Placement::cpu())` first;
//! * **float32** — parameters in float32; a model converted to f16/bf16 for inference must be
//!   converted back with [`Model::to_dtype`] (PyTorch: `model.float()`);
//! * **eval mode** — dropout off: the export is of the evaluation forward pass (PyTorch:
//!   `model.eval()`);
//! * **example inputs** — `x` float32 `[N, in_channels]`, an edge index for the same `N`;
//! * **a forward pass** on the example succeeds and gives finite logits of the right shape.
//!
//! A checkpoint loaded without choosing its device cannot happen here: `checkpoint::load`
//! always takes the device (PyTorch's `map_location`). Graph size is never baked into the
//! exported ONNX file (`num_nodes`, `num_edges` are symbolic).
//!
//! ```
//! use workbook::{datasets, Model, ModelConfig, Placement};
//! use workbook::export::preflight::{Example, Preflight};
//! let graph = datasets::karate(&Placement::cpu()).unwrap();
//! let (model, _) = Model::init(ModelConfig::gcn(34, 8, 4), 0, &Placement::sim(1)).unwrap();
//! let err = Preflight::new(&model).check(&Example::from_graph(&graph)).unwrap_err().to_string();
//! assert!(err.contains("example input 'x' is on cpu but the model is on sim:1"));
//! let model = model.to_device(&Placement::cpu()).unwrap();
//! let report = Preflight::new(&model).check(&Example::from_graph(&graph)).unwrap();
//! assert!(report.checks.len() >= 5);
//! ```

use crate::edge_index::EdgeIndex;
use crate::error::{Result, WorkbookError};
use crate::graph::{Graph, GraphPart};
use crate::model::Model;
use crate::placement::{inherit, Placement};
use candle_core::{DType, Tensor};

/// The example inputs an export is checked with (PyTorch's dummy input).
#[derive(Clone, Debug)]
pub struct Example<'a> {
    pub x: &'a Tensor,
    /// Where `x` is (a bare tensor cannot say `sim`; see [`Example::new`]).
    pub x_at: Placement,
    pub edge_index: &'a EdgeIndex,
}

impl<'a> Example<'a> {
    /// `x` takes the edge index's placement when both are on one candle device.
    pub fn new(x: &'a Tensor, edge_index: &'a EdgeIndex) -> Self {
        Self {
            x,
            x_at: inherit(x, edge_index.placement()),
            edge_index,
        }
    }

    /// A graph's features and edges, with their placements.
    pub fn from_graph(graph: &'a Graph) -> Self {
        let x_at = graph
            .placements()
            .into_iter()
            .find(|(p, _)| *p == GraphPart::X)
            .map(|(_, at)| at.clone())
            .unwrap_or_else(|| graph.placement().clone());
        Self {
            x: graph.x(),
            x_at,
            edge_index: graph.edge_index(),
        }
    }
}

/// What passed: one line per check, for the CLI to print.
#[derive(Clone, Debug)]
pub struct PreflightReport {
    pub checks: Vec<String>,
}

/// The pre-flight of one model.
#[derive(Clone, Debug)]
pub struct Preflight<'m> {
    model: &'m Model,
    training: bool,
}

impl<'m> Preflight<'m> {
    /// Pre-flight of `model` in evaluation mode.
    pub fn new(model: &'m Model) -> Self {
        Self {
            model,
            training: false,
        }
    }

    /// Declares the mode the model is in (true while it is being trained with dropout);
    /// exporting in training mode is refused, as `model.eval()` is forgotten in PyTorch.
    pub fn training(mut self, training: bool) -> Self {
        self.training = training;
        self
    }

    /// Runs every check, reporting all problems at once as [`WorkbookError::Preflight`].
    pub fn check(&self, example: &Example) -> Result<PreflightReport> {
        // Every other check reads the parameters; a lazy layer has none to read yet.
        self.model.check_materialized("the export pre-flight")?;
        let model = self.model;
        let at = model.placement();
        let mut problems = Vec::new();
        let mut checks = Vec::new();

        // 1. one device for parameters and buffers: first the layers (a model-parallel model's
        // are split), then each tensor against its own layer's placement
        let mut before = problems.len();
        if let Some(split) = split_problem(model) {
            problems.push(split);
        }
        let layer_at = |name: &str| layer_placement(model, name).unwrap_or(at);
        let placements = model.parameter_placements();
        for (name, p) in &placements {
            let home = layer_at(name);
            if *p != home {
                problems.push(format!(
                    "parameter '{name}' is on {p} but the model is on {home}; move the whole model with model.to_device(...)"
                ));
            }
        }
        for ((name, t), (_, p)) in model.named_parameters().iter().zip(&placements) {
            if !t.device().same_device(p.device()) {
                problems.push(format!(
                    "parameter '{name}' lives on {:?} but the model claims {p}; rebuild it with model.to_device(...)",
                    t.device().location()
                ));
            }
        }
        for (name, p) in model.buffer_placements() {
            let home = layer_at(&name);
            if p != home {
                problems.push(format!(
                    "buffer '{name}' is on {p} but the model is on {home}; use model.to_device(...) (moves buffers too) or model.clear_cache()"
                ));
            }
        }
        if problems.len() == before {
            checks.push(format!(
                "devices: {} parameter(s) and {} buffer(s) all on {at}",
                model.named_parameters().len(),
                model.buffer_placements().len()
            ));
        }

        // 2. float32
        before = problems.len();
        problems.extend(
            model
                .float32_problems("exports are")
                .iter()
                .map(ToString::to_string),
        );
        if problems.len() == before {
            checks.push("dtype: every parameter is float32".into());
        }

        // 3. eval mode
        if self.training {
            problems.push(format!(
                "the model is in training mode (dropout {} on inputs{}); export the evaluation forward pass (PyTorch: model.eval())",
                model.config().dropout,
                if model.layers().iter().any(|l| l.as_graph_layer().layer_type() == "GATv2Conv") {
                    " and attention"
                } else {
                    ""
                }
            ));
        } else {
            checks.push(format!(
                "mode: eval (dropout {} is training-only and not exported)",
                model.config().dropout
            ));
        }

        // 4. example inputs
        before = problems.len();
        if example.x_at != *at {
            problems.push(format!(
                "example input 'x' is on {} but the model is on {at}; create the example on the model's device (x.to_device)",
                example.x_at
            ));
        }
        if example.edge_index.placement() != at {
            problems.push(format!(
                "example input 'edge_index' is on {} but the model is on {at}; move it with edge_index.to_device(...)",
                example.edge_index.placement()
            ));
        }
        if example.x.dtype() != DType::F32 {
            problems.push(format!(
                "example input 'x' is {:?}; the exported model takes float32 (x.to_dtype(DType::F32))",
                example.x.dtype()
            ));
        }
        let features = model.config().layers[0].in_channels();
        match example.x.dims() {
            [n, f] => {
                if *f != features {
                    problems.push(format!(
                        "example input 'x' has {f} features per node but the model takes in_channels = {features}"
                    ));
                }
                if *n != example.edge_index.num_nodes() {
                    problems.push(format!(
                        "example input 'x' has {n} rows but edge_index is for {} nodes",
                        example.edge_index.num_nodes()
                    ));
                }
            }
            dims => problems.push(format!(
                "example input 'x' must be [num_nodes, {features}], got shape {dims:?}"
            )),
        }
        if problems.len() == before {
            checks.push(format!(
                "example: x f32 {:?} and edge_index [2, {}] on {at} (exported as int64; num_nodes and num_edges stay dynamic)",
                example.x.dims(),
                example.edge_index.num_edges()
            ));
        }

        // 5. a forward pass
        if problems.is_empty() {
            match model.forward(example.x, example.edge_index, None) {
                Ok(out) => {
                    let classes = model.config().layers.last().map(|l| l.output_width());
                    let dims = out.logits.dims().to_vec();
                    let finite = out
                        .logits
                        .to_dtype(DType::F32)
                        .and_then(|t| t.flatten_all()?.to_vec1::<f32>())
                        .map(|v| v.iter().all(|x| x.is_finite()))
                        .unwrap_or(false);
                    if dims != [example.x.dims()[0], classes.unwrap_or(0)] {
                        problems.push(format!("forward pass gave logits of shape {dims:?}"));
                    } else if !finite {
                        problems.push(
                            "forward pass on the example gave non-finite logits (NaN or inf); check the weights".into(),
                        );
                    } else {
                        checks.push(format!("forward pass: logits {dims:?}, all finite"));
                    }
                }
                Err(e) => problems.push(format!("forward pass on the example failed: {e}")),
            }
        } else {
            problems.push("forward pass not attempted until the problems above are fixed".into());
        }

        if problems.is_empty() {
            Ok(PreflightReport { checks })
        } else {
            Err(WorkbookError::Preflight(problems))
        }
    }
}

/// The placement of the layer that owns the tensor `name` (`conv2.lin.weight` belongs to
/// `conv2`; a bare single layer owns every name).
fn layer_placement<'m>(model: &'m Model, name: &str) -> Option<&'m Placement> {
    let config = model.config();
    model.layers().iter().enumerate().find_map(|(k, l)| {
        name.starts_with(&config.prefix(k))
            .then(|| l.as_graph_layer().placement())
    })
}

/// The problem of a model whose layers sit on several devices (a model-parallel model, see
/// [`crate::parallel::model_parallel`]), naming the first parameter off the first layer's
/// device, both devices and the fix; `None` for a model on one device.
pub fn split_problem(model: &Model) -> Option<String> {
    let at = model.placement();
    let layers = model.layer_placements();
    let (k, (layer, elsewhere)) = layers.iter().enumerate().find(|(_, (_, p))| *p != at)?;
    let tensor = model.layers()[k]
        .as_graph_layer()
        .named_parameters()
        .into_iter()
        .next()
        .map(|(n, _)| format!("parameter '{}{n}'", model.config().prefix(k)))
        .unwrap_or_else(|| format!("layer '{layer}'"));
    let all: Vec<String> = layers.iter().map(|(n, p)| format!("{n} on {p}")).collect();
    Some(format!(
        "{tensor} is on {elsewhere} but the model's first layer is on {at}: its layers are split across devices ({}), as a model-parallel model leaves them; put the whole model on one device first: model_parallel.into_model(&Placement::cpu()) (or model.to_device(&Placement::cpu()))",
        all.join(", ")
    ))
}

/// [`Preflight::check`] in evaluation mode.
pub fn check(model: &Model, example: &Example) -> Result<PreflightReport> {
    Preflight::new(model).check(example)
}
