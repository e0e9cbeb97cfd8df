//! What can stop the grader itself (as opposed to a student's failing test, which is a result).
//!
//! ```
//! let e = grader::GradeError::NoMatch { pattern: "9-9".into(), known: "01-1".into() };
//! assert!(e.to_string().contains("01-1"));
//! ```

use std::path::PathBuf;

/// The grader's errors; each says what to do about it.
#[derive(Debug, thiserror::Error)]
pub enum GradeError {
    /// A file could not be read or written.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// No `exercises/` folder above the current directory.
    #[error("no workbook found at or above {0}: run cargo grade inside the repository, or pass --root <DIR>")]
    NoRoot(PathBuf),
    /// An `exercise.toml` or `Cargo.toml` that does not parse.
    #[error("{path}: {message}")]
    BadSpec {
        /// The file.
        path: PathBuf,
        /// The parser's message.
        message: String,
    },
    /// A selection that names no exercise.
    #[error("no exercise matches '{pattern}'; use a chapter (01), an exercise (01-1), a folder name, or all. Known: {known}")]
    NoMatch {
        /// What the user typed.
        pattern: String,
        /// The exercise ids there are.
        known: String,
    },
    /// The file watcher of `--watch` failed.
    #[error("watching for changes failed: {0}")]
    Watch(String),
    /// Cargo itself could not be started.
    #[error("could not run cargo ({0}); is the Rust toolchain installed?")]
    Cargo(std::io::Error),
    /// The handout (the tree students were given) could not be staged or built.
    #[error("the handout: {0}")]
    Handout(String),
    /// Expected values missing, unreadable, or recorded for other tests.
    #[error("expected values: {0}")]
    Expected(String),
    /// A reference solution does not pass here: grading would fail every student.
    #[error("{0}. Fix the grading machine (or the exercise) first; the reference solutions must score full marks here")]
    Reference(String),
    /// A roster that cannot be read.
    #[error("the roster: {0}")]
    Roster(String),
    /// A submission that cannot be taken (its repository, its archive).
    #[error("the submission: {0}")]
    Submission(String),
    /// The sandbox cannot be used.
    #[error(transparent)]
    Sandbox(#[from] crate::sandbox::SandboxError),
}

impl GradeError {
    /// An I/O error on `path`.
    pub fn io(path: impl Into<PathBuf>, source: std::io::Error) -> Self {
        Self::Io {
            path: path.into(),
            source,
        }
    }
}

/// Results of the grader's own operations.
pub type Result<T> = std::result::Result<T, GradeError>;
