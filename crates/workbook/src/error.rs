//! The library's one error type.
//!
//! Every failure a user can cause (a bad graph, a corrupt file, a mismatched checkpoint) gets a
//! variant whose message says what is wrong *and* how to fix it. Candle's own errors pass through
//! as [`WorkbookError::Candle`] so `?` works on tensor code.
//!
//! Variants carry what they are about as values (a [`Mismatch`] holds the two
//! [`PlacementId`]s and the culprit's [`Role`]; [`WorkbookError::Float32`] the dtype it found)
//! and compose their message in `Display`, so a program can match on them and a person reads
//! one sentence. This module sits at the bottom of the crate's stack: it imports only
//! [`crate::ids`].
//!
//! ```
//! use workbook::WorkbookError;
//! let err = WorkbookError::InvalidGraph("edge_index has shape [3, 4]".into());
//! assert!(err.to_string().contains("[3, 4]"));
//! ```

use crate::ids::{PlacementId, Role};
use candle_core::DType;
use std::fmt;
use std::path::PathBuf;

/// Errors returned by the workbook library.
#[derive(Debug, thiserror::Error)]
pub enum WorkbookError {
    /// A collective call across processes (ranks) failed: it timed out because another rank
    /// never reached it, the ranks called different collectives, or they disagree on a value
    /// they must share (the config). The message names the call, this rank and the fix.
    #[error("distributed run, rank {rank} of {world_size}: {message}")]
    Distributed {
        /// This process's rank.
        rank: usize,
        /// How many ranks the run has.
        world_size: usize,
        /// What went wrong and how to fix it.
        message: String,
    },

    /// The graph (features, edge index, weights, labels) is malformed.
    #[error("invalid graph: {0}")]
    InvalidGraph(String),

    /// A configuration is not usable: a model or layer config, a device spelling, a count or
    /// size typed by a user.
    #[error("invalid configuration: {0}")]
    InvalidConfig(String),

    /// Arguments that are each fine but do not fit together (one replica per device, one
    /// optimiser per stage, a graph placed for another model).
    #[error("{0}")]
    Mismatched(String),

    /// What is asked is outside what this library does (an ONNX export of a layer without a
    /// lowering, edge weights for a layer that takes none); the message says what to do instead.
    #[error("{0}")]
    Unsupported(String),

    /// A config names a layer kind that no registry entry builds.
    #[error("unknown layer '{kind}': the layers this registry builds are {}; register your own with LayerRegistry::builtin().with::<YourConfig>(\"{kind}\") and load with it (checkpoint::load_with, ModelConfig::from_json_with)", .known.join(", "))]
    UnknownLayer {
        /// The `"layer"` value of the config.
        kind: String,
        /// The kinds the registry knows.
        known: Vec<String>,
    },

    /// A model's parameter is a plain tensor where a trainable variable is needed.
    #[error("parameter '{0}' is not trainable (built from plain tensors); build the model with Model::init or Model::from_tensors")]
    NotTrainable(String),

    /// A parameter that is not float32 where float32 is the rule (every export, and the
    /// reference side of [`crate::export::precision::compare`]); one rule, one message.
    #[error("parameter '{tensor}' is {found:?}; {needs} float32: convert with model.to_dtype(DType::F32) (PyTorch: model.float())")]
    Float32 {
        /// The parameter.
        tensor: String,
        found: DType,
        /// What takes float32: `exports are`, `the comparison is against`.
        needs: String,
    },

    /// A weights file does not fit the model it is loaded into. Every problem is listed.
    /// Entries in parentheses (the file's path, added by the loaders) are notes, not problems:
    /// they are neither counted nor bulleted.
    #[error("weights do not fit the model {}", problem_list(.0))]
    WeightsMismatch(Vec<String>),

    /// Every parameter a model expects is in the weights, but under a wrapper's prefix:
    /// PyTorch's `DataParallel` and `DistributedDataParallel` save `module.conv1.lin.weight`
    /// for `conv1.lin.weight` (`torch.compile` saves `_orig_mod.`). Names the prefix, an
    /// example and both fixes.
    #[error("{origin}: the weights were saved from a wrapped model: every parameter name starts with '{prefix}' ('{example}' where the model expects '{expected}'); {} saves names that way. Save the unwrapped model instead ({}), or strip the prefix when loading: checkpoint::load_stripping_prefix(path, config, map_location, \"{prefix}\") (PyTorch: {{k.removeprefix(\"{prefix}\"): v for k, v in state_dict.items()}})", wrapper_of(.prefix).0, wrapper_of(.prefix).1)]
    WrappedWeights {
        /// The file (or `state_dict`) the weights came from.
        origin: String,
        /// The wrapper's prefix, `module.` for DataParallel.
        prefix: String,
        /// One name as the file has it.
        example: String,
        /// The same name as the model expects it.
        expected: String,
    },

    /// Source code could not be read as Rust tokens ([`crate::fixed_device`]).
    #[error("cannot read the code as Rust tokens ({0}); does it compile?")]
    Source(String),

    /// A file could not be read or parsed.
    #[error("{path}: {message}")]
    File { path: PathBuf, message: String },

    /// A node order that is not a permutation, or that does not fit what it is applied to
    /// ([`crate::reorder`]).
    #[error(transparent)]
    Permutation(#[from] PermutationError),

    /// A dataset name or spec was not understood.
    #[error("unknown dataset '{0}': use karate, cora, citeseer, csbm:<nodes> or knn:<nodes> (e.g. csbm:10000), optionally followed by @rcm or @rabbit for a node order (knn:100000@rcm)")]
    UnknownDataset(String),

    /// Reading a Planetoid dataset failed.
    #[error(transparent)]
    Planetoid(#[from] planetoid::PlanetoidError),

    /// Downloading a dataset failed.
    #[error("download of {url} failed: {message}")]
    Download { url: String, message: String },

    /// Tensors that must be on one device are not. Names the tensor, both devices and the fix.
    #[error(transparent)]
    DeviceMismatch(Box<Mismatch>),

    /// A layer's forward pass made a tensor that does not follow its input (the shadow pass
    /// of [`GraphLayer::apply`](crate::layers::GraphLayer::apply) on `sim:N`). Names the layer
    /// and the fix.
    #[error("intermediate tensor on the wrong device: {0}")]
    IntermediateTensor(String),
    /// A neighbour sampler was given device-side data. This loader samples and gathers on the
    /// host and copies nothing implicitly, so it refuses what PyG 2.4 and later accept (they
    /// copy the sampler's inputs to the CPU themselves, PR 7572, and can gather features that
    /// live on the GPU); PyG 2.3 died on `input_nodes` on the GPU (issue 7691).
    #[error("NeighborLoader samples and gathers on the host, but {what} is on {found}. (PyG 2.4 and later accept this: they copy the sampler's inputs to the CPU themselves and can gather features on the GPU. This loader copies nothing behind your back and gathers each batch's rows on the host, so every copy is one you wrote and the ledger shows.) Build the loader from the graph on the cpu (before graph.to_device) with host-side input_nodes, and move each batch with batch.to_device(&device) inside the loop")]
    SamplerInputOnDevice { what: String, found: String },

    /// An error from candle (tensor maths, devices, dtypes).
    #[error(transparent)]
    Candle(#[from] candle_core::Error),

    /// The anti-pattern `workbook_lessons::threads::StatefulGatV2` found its shared
    /// attention slot empty, because another thread's forward pass took it: PyG's
    /// `AssertionError` from `GATv2Conv` before 2.5 (issue 8741).
    #[error("shared-state race: {0}")]
    SharedStateRace(String),

    /// A worker thread (serving, the race demonstration) stopped with a panic or lost its peer.
    #[error("worker thread failed: {0}")]
    Thread(String),

    /// Export pre-flight found problems (devices, dtypes, mode, example inputs); every one is
    /// listed with its fix.
    #[error("export pre-flight failed ({} problem(s)):\n  - {}", .0.len(), .0.join("\n  - "))]
    Preflight(Vec<String>),

    /// A loaded model or graph holds NaN or infinite values: every tensor with them, and how
    /// many (see [`crate::non_finite`]).
    #[error("{origin}: {} tensor(s) hold NaN or infinite values: {}; a model or graph with them predicts NaN. Fix the file (for weights: save them from a run whose loss stayed finite), or pass --allow-non-finite to use it anyway", .found.len(), .found.iter().map(ToString::to_string).collect::<Vec<_>>().join(", "))]
    NonFinite {
        origin: String,
        found: Vec<NonFiniteValues>,
    },

    /// The training loss became NaN or infinite; training stopped at that epoch.
    #[error("training stopped at epoch {epoch}: the loss is {loss}; likely cause: {cause}")]
    NonFiniteLoss {
        epoch: usize,
        loss: f32,
        cause: String,
    },

    /// A lazy layer (`in_channels = -1`) whose parameters do not exist yet, met by something
    /// that needs them (an optimiser, a checkpoint, an export, a `&self` forward pass). PyTorch:
    /// "Attempted to use an uninitialized parameter ... Call `forward` with a dummy batch to
    /// initialize the parameters" (see [`crate::layers::lazy`]).
    #[error("{action}: layer {layer} ({kind}) was built with in_channels = -1 and its parameters do not exist yet: a lazy layer creates them in its first forward pass, from the input's width, on the layer's placement ({placement}). Run one forward pass first: model.materialize(&graph) (or model.materialize_input(&x, &edge_index, edge_weight)), then {action} sees every parameter. (PyTorch, where it cannot go on without the weight, an ONNX export for one, says \"Attempted to use an uninitialized parameter\" and gives the same fix: call forward with a dummy batch.)")]
    Uninitialized {
        /// What needed the parameters (`"Adam::for_model"`, `"checkpoint::save"`).
        action: String,
        /// The layer's name in the model (`conv1`, or its kind for a bare layer).
        layer: String,
        /// Its kind (`GCNConv`).
        kind: String,
        /// Where its parameters will be created.
        placement: PlacementId,
    },

    /// A PyTorch checkpoint whose storages were saved on a device this machine does not have,
    /// loaded without a map location ([`crate::torch_file`]); PyTorch's `torch.load` fails the
    /// same way.
    #[error("{origin}: tensor '{tensor}' was saved on {location} (torch.save records the device of every tensor), and {location} cannot be opened here: {reason}. PyTorch fails the same way: \"Attempting to deserialize object on a CUDA device but torch.cuda.is_available() is False. If you are running on a CPU-only machine, please use torch.load with map_location=torch.device('cpu')\". Say where the tensors should go instead: --map-location cpu (or a device of this machine, or sim:N to rehearse on a simulated device; --map-location {location}=cpu maps only that device), in Rust MapLocation::To(Placement::cpu())")]
    SavedOnMissingDevice {
        /// The file.
        origin: String,
        /// The first tensor saved there.
        tensor: String,
        /// The location `torch.save` recorded: `cuda:0`.
        location: String,
        /// Why it cannot be opened.
        reason: String,
    },

    /// A `torch.save` file that names Python code (a class or function other than the few a
    /// `state_dict` uses): a pickled module, `torch.save(model)`, is code to run, not weights
    /// ([`crate::torch_file`]).
    #[error("{origin}: refused: the file names the Python global '{first}'{}, so it is not a state_dict but a pickled Python object (torch.save(model) writes one). Loading it means importing and running that code, which this reader never does; PyTorch >= 2.6 refuses it too by default (weights_only=True: \"Weights only load failed\"). On the machine that wrote it, with the model's code, save the weights alone: torch.save(model.state_dict(), 'model.pt')", if *.count > 1 { format!(" and {} more", .count - 1) } else { String::new() })]
    PickledCode {
        /// The file.
        origin: String,
        /// The first global that is not a state_dict's.
        first: String,
        /// How many such globals it names.
        count: usize,
    },

    /// An index read by a kernel that trusts its indices ([`crate::ops::raw_index`]) is out of
    /// range, reported at once: on the CPU, and on a simulated device in its default
    /// (synchronous) mode. PyTorch on the CPU: "IndexError: index out of range in self".
    #[error("index out of range in {0}. (PyTorch on the CPU: \"IndexError: index out of range in self\".) If the index is a row of an edge_index, an id is not a node of the graph: check the graph before any kernel runs with Graph::validate(&data) (PyG: data.validate())")]
    IndexOutOfRange(Box<KernelFault>),

    /// A simulated device's kernel failed (see [`crate::sim_device`]). Asynchronous mode
    /// (`cause` is `None`): reported by a later operation that waits for the device, which
    /// may not be the cause, as CUDA's "device-side assert triggered" is. Blocking mode
    /// (`WORKBOOK_LAUNCH_BLOCKING=1`): reported by the faulting kernel, named with the index.
    #[error("{}", device_assert(*.device, .reported_by, .cause.as_deref()))]
    DeviceAssert {
        device: PlacementId,
        /// The operation that reported the fault.
        reported_by: String,
        /// The fault itself, known only to the blocking mode.
        cause: Option<Box<KernelFault>>,
    },

    /// An operation on a simulated device after a kernel fault was reported there: the error
    /// is sticky, as CUDA's is, until the device is reset.
    #[error("{device} is unusable: a device-side assert was reported there earlier (by {first_reported_by}), and every later operation on the device fails ({reported_by} here), as every CUDA call does after one. Find the cause with WORKBOOK_LAUNCH_BLOCKING=1 or Graph::validate(&data), then call placement.reset_device() or use a fresh device (Placement::sim_with); on CUDA, restart the process")]
    DeviceFailed {
        device: PlacementId,
        /// The operation that reported the fault first.
        first_reported_by: String,
        /// The operation that failed now.
        reported_by: String,
    },

    /// [`Graph::validate`](crate::graph::Graph::validate) found an edge whose id is not a
    /// node, before any kernel could meet it. Quotes PyG's `Data.validate()`.
    #[error("edge_index[{row}][{edge}] = {id} is not a node id: the graph has {num_nodes} nodes, so ids must be in 0..{num_nodes} (edges with an id outside it: {count} of {num_edges}; this is the first). Graph::validate caught it before any kernel ran; PyG's data.validate() says \"{}\". Usual causes: ids counted from 1 (subtract 1), or a subgraph's edges kept with the whole graph's ids (relabel them; PyG: subgraph(subset, edge_index, relabel_nodes=True))", pyg_validate(*.num_nodes, *.min, *.max))]
    NodeIdOutOfRange {
        /// 0: the source row, 1: the target row.
        row: usize,
        /// The first offending edge.
        edge: usize,
        /// Its id.
        id: i64,
        num_nodes: usize,
        /// How many edges name an id outside `0..num_nodes`.
        count: usize,
        num_edges: usize,
        /// The smallest and largest id of the whole edge index (what PyG reports).
        min: i64,
        max: i64,
    },

    /// An I/O error with the path it concerns.
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
}

/// What is wrong with a node permutation ([`crate::reorder::Permutation`]): each variant names
/// the values, and its message says how to fix the call.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PermutationError {
    /// A permutation of `expected` ids was applied to `what`, which has `found` rows or ids.
    #[error("the permutation is over {expected} nodes but {what} has {found}: a node order maps the nodes of the graph it was made for; apply it to that graph's tensors (rows in node order) only")]
    WrongLength {
        /// What the permutation met (`x`, `the tensor's rows`, `the other permutation`).
        what: String,
        expected: usize,
        found: usize,
    },
    /// Entry `position` is `id`, which is not below the length `len`.
    #[error("entry {position} of the permutation is {id}, but a permutation of {len} nodes holds the ids 0..{len}, each once")]
    OutOfRange {
        position: usize,
        id: u64,
        len: usize,
    },
    /// The id `id` appears at `first` and again at `second` (so some other id is missing).
    #[error("node {id} appears twice in the permutation (entries {first} and {second}), so another node is missing: a permutation holds each id 0..{len} exactly once")]
    Repeated {
        id: u32,
        first: usize,
        second: usize,
        len: usize,
    },
    /// A node id given to be mapped is not below the permutation's length.
    #[error("node id {id} is not a node of the permuted graph ({len} nodes, ids 0..{len})")]
    NoSuchNode { id: u64, len: usize },
}

/// Shorthand for results of this crate.
pub type Result<T, E = WorkbookError> = std::result::Result<T, E>;

impl WorkbookError {
    /// An I/O error about `path` (for crates built on this one, like `workbook-lessons`).
    pub fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        WorkbookError::Io {
            path: path.into(),
            source,
        }
    }

    /// A file problem: `path` and what is wrong with it.
    pub fn file(path: impl Into<PathBuf>, message: impl Into<String>) -> Self {
        WorkbookError::File {
            path: path.into(),
            message: message.into(),
        }
    }
}

/// A device mismatch: the tensor that is elsewhere, where it is and where it should be.
///
/// ```
/// use workbook::error::{Found, Mismatch};
/// use workbook::placement::{PlacementId, Role};
/// let m = Mismatch::new("model parameters", PlacementId::Sim(1), Role::Input, "x", PlacementId::Cpu);
/// assert_eq!(m.to_string(), "Expected all tensors to be on the same device: model parameters are on sim:1 but input 'x' is on cpu. Move the graph with graph.to_device(&device)");
/// assert_eq!(m.found, Found::At(PlacementId::Cpu));
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Mismatch {
    /// What sets the expected device ("model parameters").
    pub expected_what: String,
    pub expected: PlacementId,
    /// What the culprit is to its owner: decides the wording and the usual fix.
    pub role: Role,
    /// The tensor's name (`edge_index`, `conv1.lin.weight`).
    pub culprit: String,
    /// Where the culprit is.
    pub found: Found,
    /// The fix when it is not the role's usual one ([`Role::fix`]).
    pub fix: Option<String>,
}

/// Where the culprit of a [`Mismatch`] is.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Found {
    /// On a placement.
    At(PlacementId),
    /// On a device as the code writes it (`cuda`, when the number is not a literal; see
    /// [`crate::fixed_device`]).
    Written(String),
}

impl fmt::Display for Found {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Found::At(id) => id.fmt(f),
            Found::Written(s) => f.write_str(s),
        }
    }
}

impl Mismatch {
    /// The mismatch of `culprit` (a `role`) on `found` where `expected_what` is on `expected`,
    /// with the role's usual fix.
    pub fn new(
        expected_what: impl Into<String>,
        expected: PlacementId,
        role: Role,
        culprit: impl Into<String>,
        found: PlacementId,
    ) -> Self {
        Self {
            expected_what: expected_what.into(),
            expected,
            role,
            culprit: culprit.into(),
            found: Found::At(found),
            fix: None,
        }
    }

    /// The same mismatch with a fix of its own.
    pub fn with_fix(mut self, fix: impl Into<String>) -> Self {
        self.fix = Some(fix.into());
        self
    }
}

impl fmt::Display for Mismatch {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "Expected all tensors to be on the same device: {} are on {} but {} '{}' is on {}. {}",
            self.expected_what,
            self.expected,
            self.role.noun(),
            self.culprit,
            self.found,
            self.fix.as_deref().unwrap_or(self.role.fix())
        )
    }
}

impl std::error::Error for Mismatch {}

/// An index a kernel found out of range: which kernel, on what, where, and the bound.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct KernelFault {
    /// The kernel (`gather_rows`).
    pub op: String,
    /// What it was computing, as the caller named it (`x[edge_index[0]]`).
    pub what: String,
    pub device: PlacementId,
    /// Where in the index the first bad value is.
    pub position: usize,
    /// The bad value.
    pub index: i64,
    /// The number of rows the index selects from or scatters into.
    pub bound: usize,
    /// How many values of the index are out of range.
    pub count: usize,
    /// How many values the index has.
    pub len: usize,
}

impl fmt::Display for KernelFault {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} '{}' on {}: index {} at position {} is out of range for {} rows (valid: 0..{}; out-of-range indices: {} of {})",
            self.op, self.what, self.device, self.index, self.position, self.bound, self.bound, self.count, self.len
        )
    }
}

/// The text of [`WorkbookError::DeviceAssert`]: CUDA's, with the fix.
fn device_assert(device: PlacementId, reported_by: &str, cause: Option<&KernelFault>) -> String {
    let unusable = format!(
        "{device} is now unusable: every later operation on it fails, as every CUDA call does after a device-side assert, until placement.reset_device() (on CUDA: restart the process)"
    );
    match cause {
        None => format!(
            "device-side assert triggered on {device}, reported by {reported_by}. A kernel launched earlier on {device} failed; on an asynchronous device (CUDA, or sim:N with WORKBOOK_SIM_ASYNC=1) a kernel's error is reported by some later operation that waits for the device, so this operation may not be the cause. For debugging, rerun with WORKBOOK_LAUNCH_BLOCKING=1 (PyTorch: CUDA_LAUNCH_BLOCKING=1), which reports the error at the operation that caused it, or check the graph before any kernel runs with Graph::validate(&data). {unusable}"
        ),
        Some(fault) => format!(
            "device-side assert triggered in {fault}; reported by the operation that caused it (WORKBOOK_LAUNCH_BLOCKING=1). If the index is a row of an edge_index, check the graph before any kernel runs with Graph::validate(&data) (PyG: data.validate()). {unusable}"
        ),
    }
}

/// What PyG's `Data.validate()` raises for an edge index with ids from `min` to `max` on
/// `num_nodes` nodes (it checks negative ids first), for [`WorkbookError::NodeIdOutOfRange`].
fn pyg_validate(num_nodes: usize, min: i64, max: i64) -> String {
    if min < 0 {
        format!("ValueError: 'edge_index' contains negative indices in 'Data' (found {min})")
    } else {
        format!("ValueError: 'edge_index' contains larger indices than the number of nodes ({num_nodes}) in 'Data' (found {max})")
    }
}

/// One tensor's NaN and infinite values (see [`crate::non_finite`], which calls it `Found`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NonFiniteValues {
    pub name: String,
    /// NaN, +inf and -inf values.
    pub count: usize,
    /// All its values.
    pub total: usize,
}

impl fmt::Display for NonFiniteValues {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({} of {} values)", self.name, self.count, self.total)
    }
}

/// The wrapper that saves parameter names with `prefix`, and how to save without it (for
/// [`WorkbookError::WrappedWeights`]).
pub fn wrapper_of(prefix: &str) -> (&'static str, &'static str) {
    match prefix {
        "module." => (
            "torch.nn.DataParallel (or DistributedDataParallel)",
            "in PyTorch, save model.module.state_dict()",
        ),
        "_orig_mod." => (
            "torch.compile",
            "in PyTorch, save model._orig_mod.state_dict()",
        ),
        _ => (
            "a wrapping module",
            "in PyTorch, save the inner module's state_dict()",
        ),
    }
}

/// `(N problem(s)):` and one bulleted line per problem, then the notes (entries that start with
/// `(`), unbulleted: a note such as the file's path is not one more problem.
fn problem_list(entries: &[String]) -> String {
    let (notes, problems): (Vec<&String>, Vec<&String>) =
        entries.iter().partition(|e| e.starts_with('('));
    let mut text = format!("({} problem(s)):", problems.len());
    for p in problems {
        text.push_str("\n  - ");
        text.push_str(p);
    }
    for n in notes {
        text.push_str("\n  ");
        text.push_str(n);
    }
    text
}

#[cfg(test)]
mod problem_list_tests {
    use super::WorkbookError;

    #[test]
    fn a_note_in_parentheses_is_neither_counted_nor_bulleted() {
        let err = WorkbookError::WeightsMismatch(vec![
            "'a' has shape [2] but the config needs [3]".into(),
            "unexpected 'b' (the config has no such parameter)".into(),
            "(checkpoint: gcn.safetensors)".into(),
        ]);
        assert_eq!(
            err.to_string(),
            "weights do not fit the model (2 problem(s)):\n  - 'a' has shape [2] but the config needs [3]\n  - unexpected 'b' (the config has no such parameter)\n  (checkpoint: gcn.safetensors)"
        );
    }
}
