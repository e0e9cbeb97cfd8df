//! The library's one error type.
//!
//! Every failure a user can cause (a bad graph, a corrupt file, a mismatched checkpoint) gets a
//! variant whose message says what is wrong *and* how to fix it. Candle's own errors pass through
//! as [`WorkbookError::Candle`] so `?` works on tensor code.
//!
//! ```
//! use workbook::WorkbookError;
//! let err = WorkbookError::InvalidGraph("edge_index has shape [3, 4]".into());
//! assert!(err.to_string().contains("[3, 4]"));
//! ```

use std::path::PathBuf;

/// Errors returned by the workbook library.
#[derive(Debug, thiserror::Error)]
pub enum WorkbookError {
    /// The graph (features, edge index, weights, labels) is malformed.
    #[error("invalid graph: {0}")]
    InvalidGraph(String),

    /// A layer or model configuration is not usable.
    #[error("invalid configuration: {0}")]
    InvalidConfig(String),

    /// A weights file does not fit the model it is loaded into. Every problem is listed.
    #[error("weights do not fit the model ({} problem(s)):\n  - {}", .0.len(), .0.join("\n  - "))]
    WeightsMismatch(Vec<String>),

    /// Every parameter a model expects is in the weights, but under a wrapper's prefix:
    /// PyTorch's `DataParallel` and `DistributedDataParallel` save `module.conv1.lin.weight`
    /// for `conv1.lin.weight` (`torch.compile` saves `_orig_mod.`). Names the prefix, an
    /// example and both fixes.
    #[error("{origin}: the weights were saved from a wrapped model: every parameter name starts with '{prefix}' ('{example}' where the model expects '{expected}'); {} saves names that way. Save the unwrapped model instead ({}), or strip the prefix when loading: checkpoint::load_stripping_prefix(path, config, map_location, \"{prefix}\") (PyTorch: {{k.removeprefix(\"{prefix}\"): v for k, v in state_dict.items()}})", crate::checkpoint::wrapper_of(.prefix).0, crate::checkpoint::wrapper_of(.prefix).1)]
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

    /// A file could not be read or parsed.
    #[error("{path}: {message}")]
    File { path: PathBuf, message: String },

    /// A dataset name or spec was not understood.
    #[error("unknown dataset '{0}': use karate, cora, citeseer or csbm:<nodes> (e.g. csbm:10000)")]
    UnknownDataset(String),

    /// Reading a Planetoid dataset failed.
    #[error(transparent)]
    Planetoid(#[from] planetoid::PlanetoidError),

    /// Downloading a dataset failed.
    #[error("download of {url} failed: {message}")]
    Download { url: String, message: String },

    /// Tensors that must be on one device are not. Names the tensor, both devices and the fix.
    #[error(transparent)]
    DeviceMismatch(Box<crate::placement::Mismatch>),

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
        found: Vec<crate::non_finite::Found>,
    },

    /// The training loss became NaN or infinite; training stopped at that epoch.
    #[error("training stopped at epoch {epoch}: the loss is {loss}; likely cause: {cause}")]
    NonFiniteLoss {
        epoch: usize,
        loss: f32,
        cause: String,
    },

    /// An I/O error with the path it concerns.
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
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
