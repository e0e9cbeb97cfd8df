//! The crate's error types: one per layer, each message saying what is wrong *and* what to do.
//!
//! - [`PickleError`]: the bytes are not a pickle this safe reader accepts (truncated, an unknown or
//!   unsupported opcode, a malformed stack, a limit exceeded). Raised by [`crate::pickle`].
//! - [`DecodeError`]: the pickle is well formed but its content is not the numpy array, SciPy CSR
//!   matrix or graph dictionary that was expected. Raised by [`crate::numpy`],
//!   [`crate::scipy_sparse`] and [`crate::graph_dict`].
//! - [`PlanetoidError`]: everything the dataset loader can report, with the file name in front
//!   (it wraps the two above). This is the type the public loading functions return.
//!
//! ```
//! use planetoid::{PickleError, PlanetoidError};
//! let err = PlanetoidError::Pickle {
//!     file: "ind.cora.graph".into(),
//!     source: PickleError::Truncated { offset: 100, len: 100 },
//! };
//! let msg = err.to_string();
//! assert!(msg.starts_with("ind.cora.graph: truncated pickle (no STOP opcode"));
//! assert!(msg.contains("delete it and download again"));
//! ```

use std::path::PathBuf;

/// Where the Planetoid files can be downloaded from (the files PyTorch Geometric uses).
pub const DOWNLOAD_HINT: &str =
    "download the ind.<name>.* files from https://github.com/kimiyoung/planetoid/tree/master/data";

/// The pickle bytes themselves are unacceptable. Offsets are byte offsets into the file.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum PickleError {
    /// The input is bigger than [`crate::pickle::Limits::max_input_bytes`].
    #[error(
        "the pickle is {size} bytes, over the {limit}-byte limit of this reader; Planetoid files \
         are a few MiB at most, so this is not one — download the original file again"
    )]
    TooLarge {
        /// Size of the input in bytes.
        size: usize,
        /// The limit in bytes.
        limit: usize,
    },

    /// The data ended before the STOP opcode.
    #[error(
        "truncated pickle (no STOP opcode: the data ends at byte {len}, in the opcode starting at \
         offset {offset}); the file is incomplete — delete it and download again"
    )]
    Truncated {
        /// Offset of the opcode that could not be read completely (equals `len` if the data
        /// ended between two opcodes).
        offset: usize,
        /// Length of the input in bytes.
        len: usize,
    },

    /// A byte that is not a pickle opcode at all.
    #[error(
        "unknown pickle opcode 0x{opcode:02x} at offset {offset}; the file is corrupt or not a \
         pickle — delete it and download again"
    )]
    UnknownOpcode {
        /// The offending byte.
        opcode: u8,
        /// Its offset.
        offset: usize,
    },

    /// A real pickle opcode that this safe reader deliberately does not implement.
    #[error(
        "pickle opcode {name} (0x{opcode:02x}) at offset {offset} is not supported by this safe \
         reader (the original Planetoid files never use it); the file is not an original \
         Planetoid file — delete it and download again"
    )]
    UnsupportedOpcode {
        /// The opcode's name as `pickletools` prints it.
        name: &'static str,
        /// The opcode byte.
        opcode: u8,
        /// Its offset.
        offset: usize,
    },

    /// An opcode needed more values (above the last MARK) than were on the stack.
    #[error(
        "malformed pickle: opcode {name} at offset {offset} needs more values than are on the \
         stack; the file is corrupt — delete it and download again"
    )]
    StackUnderflow {
        /// The opcode's name.
        name: &'static str,
        /// Its offset.
        offset: usize,
    },

    /// An opcode that collects items up to a MARK found none.
    #[error(
        "malformed pickle: opcode {name} at offset {offset} has no matching MARK; the file is \
         corrupt — delete it and download again"
    )]
    MissingMark {
        /// The opcode's name.
        name: &'static str,
        /// Its offset.
        offset: usize,
    },

    /// A memo read of an entry that was never written.
    #[error(
        "malformed pickle: {name} at offset {offset} reads memo entry {index}, which was never \
         stored; the file is corrupt — delete it and download again"
    )]
    BadMemoIndex {
        /// The opcode's name.
        name: &'static str,
        /// The memo index.
        index: u64,
        /// Its offset.
        offset: usize,
    },

    /// An opcode's argument is invalid (negative length, bad UTF-8, bad text number, …).
    #[error(
        "malformed pickle: opcode {name} at offset {offset}: {reason}; the file is corrupt — \
         delete it and download again"
    )]
    BadArgument {
        /// The opcode's name.
        name: &'static str,
        /// Its offset.
        offset: usize,
        /// What is wrong.
        reason: String,
    },

    /// An opcode was applied to a value of the wrong kind (e.g. APPEND to a tuple).
    #[error(
        "malformed pickle: opcode {name} at offset {offset} expects {expected} but found \
         {found}; the file is corrupt — delete it and download again"
    )]
    WrongType {
        /// The opcode's name.
        name: &'static str,
        /// Its offset.
        offset: usize,
        /// What the opcode needs.
        expected: &'static str,
        /// What it found.
        found: String,
    },

    /// A safety limit of [`crate::pickle::Limits`] was exceeded.
    #[error(
        "the pickle exceeds this reader's limit on {what} ({limit}) at offset {offset}; the \
         original Planetoid files stay far below it, so this file is corrupt or not a Planetoid \
         file — download it again"
    )]
    LimitExceeded {
        /// Which limit.
        what: &'static str,
        /// The limit's value.
        limit: usize,
        /// Offset of the opcode that hit it.
        offset: usize,
    },

    /// STOP was reached, but the pickle is not cleanly finished.
    #[error(
        "malformed pickle: {reason} (STOP at offset {offset}); the file is corrupt — delete it \
         and download again"
    )]
    BadStop {
        /// Offset of the STOP opcode.
        offset: usize,
        /// What is wrong (values or MARKs left over, bytes after STOP).
        reason: String,
    },
}

/// A well-formed pickle whose content is not what was expected.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
#[non_exhaustive]
pub enum DecodeError {
    /// The pickle names a class or function that is not one of the expected numpy/SciPy types.
    /// Nothing was imported or called: the name is only reported.
    #[error(
        "the pickle refers to `{module}.{name}` where {expected} was expected (nothing was \
         imported or run)"
    )]
    UnexpectedGlobal {
        /// Module of the global.
        module: String,
        /// Name of the global.
        name: String,
        /// What was expected instead.
        expected: String,
    },

    /// A value of the wrong kind.
    #[error("expected {expected} but found {found}")]
    Expected {
        /// What was expected, e.g. "the ndarray state tuple".
        expected: String,
        /// A short description of what was found.
        found: String,
    },

    /// A numpy dtype this reader does not handle.
    #[error(
        "unsupported numpy dtype {0} (supported: little- or big-endian b1, i1-i8, u1-u8, f4, f8)"
    )]
    UnsupportedDtype(String),

    /// The raw data of an array does not have `product(shape) * itemsize` bytes.
    #[error(
        "numpy array of shape {shape:?} and dtype {dtype} needs {expected} bytes of data but has \
         {found}"
    )]
    DataLength {
        /// The declared shape.
        shape: Vec<usize>,
        /// The dtype, e.g. `<f4`.
        dtype: String,
        /// `product(shape) * itemsize`.
        expected: usize,
        /// Actual number of bytes.
        found: usize,
    },

    /// A structural inconsistency (CSR index out of range, non-monotone `indptr`, …).
    #[error("{0}")]
    Invalid(String),
}

/// Everything loading a Planetoid dataset can report.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PlanetoidError {
    /// A dataset name that is not a Planetoid dataset.
    #[error("unknown Planetoid dataset '{0}': use cora or citeseer")]
    UnknownName(String),

    /// A Planetoid dataset that this reader does not support (PubMed).
    #[error(
        "Planetoid dataset '{0}' is not supported: this reader handles only Cora and CiteSeer \
         (use cora or citeseer)"
    )]
    UnsupportedName(String),

    /// One of the eight files is missing.
    #[error("{file} is missing from {}: {DOWNLOAD_HINT} into that directory", dir.display())]
    MissingFile {
        /// The expected file name, e.g. `ind.cora.graph`.
        file: String,
        /// The directory that was searched.
        dir: PathBuf,
    },

    /// A file is larger than this reader accepts.
    #[error(
        "{} is {size} bytes, over the {limit}-byte limit; it is not an original Planetoid file — \
         delete it and download again",
        path.display()
    )]
    FileTooLarge {
        /// The file.
        path: PathBuf,
        /// Its size in bytes.
        size: u64,
        /// The limit in bytes.
        limit: u64,
    },

    /// Reading a file failed.
    #[error("cannot read {}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },

    /// A file is not an acceptable pickle.
    #[error("{file}: {source}")]
    Pickle {
        /// The file name, e.g. `ind.cora.graph`.
        file: String,
        /// What is wrong with it.
        #[source]
        source: PickleError,
    },

    /// A file is a pickle, but not of the expected content.
    #[error(
        "{file}: {source}; this is not an original Planetoid file or it is corrupt — delete it \
         and download again"
    )]
    Decode {
        /// The file name, e.g. `ind.cora.x`.
        file: String,
        /// What is wrong with its content.
        #[source]
        source: DecodeError,
    },

    /// The `test.index` text file has a bad line.
    #[error(
        "{file}: line {line}: {reason}; the file should hold one node id per line — delete it \
         and download again"
    )]
    TestIndex {
        /// The file name, e.g. `ind.cora.test.index`.
        file: String,
        /// 1-based line number.
        line: usize,
        /// What is wrong.
        reason: String,
    },

    /// The files are individually fine but do not fit together.
    #[error(
        "the {dataset} files do not fit together: {reason}; they probably come from different \
         downloads — delete all ind.* files of this dataset and download them again"
    )]
    Inconsistent {
        /// The dataset, e.g. `Cora`.
        dataset: String,
        /// What does not fit.
        reason: String,
    },
}

/// Shorthand for results of this crate.
pub type Result<T, E = PlanetoidError> = std::result::Result<T, E>;
