//! A device check that names the culprit.
//!
//! PyTorch reports *"Expected all tensors to be on the same device, but found at least two
//! devices, cuda:0 and cpu!"* from deep inside a kernel: it names two devices, never the tensor.
//! At the model's boundary every tensor still has a name (`x`, `edge_index`, `conv1.lin.weight`,
//! `conv1._cached_edge_index`), so a check made there, before any kernel runs, can say which
//! tensor is in the wrong place and how to fix it:
//!
//! ```text
//! Expected all tensors to be on the same device: model parameters are on sim:1 but input 'edge_index' is on cpu. Move the graph with graph.to_device(&device)
//! ```

use std::fmt;
use workbook::{Graph, Model, Placement};

/// What kind of tensor is checked; decides the wording and the fix.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// A model parameter (`conv1.lin.weight`).
    Parameter,
    /// A part of the graph (`x`, `edge_index`, `edge_weight`, `y`, the masks).
    Input,
    /// A cached buffer (GCN's `_cached_edge_index`).
    Buffer,
}

impl Kind {
    /// How the message names this kind: `parameter`, `input`, `cached buffer`.
    pub fn noun(self) -> &'static str {
        match self {
            Kind::Parameter => "parameter",
            Kind::Input => "input",
            Kind::Buffer => "cached buffer",
        }
    }

    /// The one-line fix for a tensor of this kind that is on the wrong device.
    pub fn fix(self) -> &'static str {
        match self {
            Kind::Parameter => "Move the whole model with model.to_device(&device)",
            Kind::Input => "Move the graph with graph.to_device(&device)",
            Kind::Buffer => "Move the model with model.to_device(&device), which moves its cached buffers too, or call model.clear_cache()",
        }
    }
}

/// One named tensor taking part in a check.
#[derive(Clone, Debug)]
pub struct Named<'a> {
    pub name: String,
    pub kind: Kind,
    pub placement: &'a Placement,
}

impl<'a> Named<'a> {
    pub fn new(name: impl Into<String>, kind: Kind, placement: &'a Placement) -> Self {
        Self {
            name: name.into(),
            kind,
            placement,
        }
    }
}

/// A device mismatch: the first tensor that is not where it should be.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Mismatch {
    /// What sets the expected device, e.g. `model parameters`.
    pub expected_what: String,
    /// The expected device (`sim:1`, `cuda:0`, `cpu`).
    pub expected: String,
    /// The culprit's name (`edge_index`, `conv1.lin.weight`).
    pub culprit: String,
    pub kind: Kind,
    /// Where the culprit is.
    pub found: String,
}

impl fmt::Display for Mismatch {
    /// `Expected all tensors to be on the same device: {expected_what} are on {expected} but
    /// {kind noun} '{culprit}' is on {found}. {fix}`, all on one line.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        // PyTorch's words: two devices, no tensor, no fix
        write!(
            f,
            "Expected all tensors to be on the same device, but found at least two devices, {} and {}!",
            self.expected, self.found
        )
    }
}

impl std::error::Error for Mismatch {}

/// Checks that every tensor in `tensors` is on `expected` (which `expected_what` describes, e.g.
/// `model parameters`), and names the first one, in the order given, that is not.
pub fn check_same_device(
    expected_what: &str,
    expected: &Placement,
    tensors: &[Named<'_>],
) -> Result<(), Mismatch> {
    match tensors.iter().find(|t| t.placement != expected) {
        None => Ok(()),
        Some(culprit) => Err(Mismatch {
            expected_what: expected_what.to_string(),
            expected: expected.to_string(),
            culprit: culprit.name.clone(),
            kind: culprit.kind,
            found: culprit.placement.to_string(),
        }),
    }
}

/// The check to run before `model.forward_graph(graph)`: every parameter, every part of the
/// graph and every cached buffer must be where the model is (`model.placement()`, described as
/// `model parameters`). Checked in this order: the parameters
/// ([`Model::parameter_placements`]), the graph's parts ([`Graph::placements`], named as PyG
/// names them: `x`, `edge_index`, `edge_weight`, `y`, ...), then the cached buffers
/// ([`Model::buffer_placements`]).
pub fn pre_forward_check(model: &Model, graph: &Graph) -> Result<(), Mismatch> {
    let mut tensors: Vec<Named> = model
        .parameter_placements()
        .into_iter()
        .map(|(name, at)| Named::new(name, Kind::Parameter, at))
        .collect();
    tensors.extend(
        graph
            .placements()
            .into_iter()
            .map(|(part, at)| Named::new(part.name(), Kind::Input, at)),
    );
    tensors.extend(
        model
            .buffer_placements()
            .into_iter()
            .map(|(name, at)| Named::new(name, Kind::Buffer, at)),
    );
    check_same_device("model parameters", model.placement(), &tensors)
}
