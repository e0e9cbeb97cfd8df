//! Stage 4 of grading a submission: running one graded scenario in the sandbox.
//!
//! A scenario is a test of the exercise's harness (`grade::<name>`, alone, on one thread) or a
//! program the exercise builds. It runs where `cargo test` would run it (the exercise's folder,
//! with `CARGO_MANIFEST_DIR` and `CARGO_PKG_NAME` set), with the run's challenge
//! ([`scenario::CHALLENGE_ENV`]) and the judge's log on file descriptor [`scenario::LOG_FD`]
//! (inherited: no path to it is in the environment). Its tree is the slot's, read-only; it may write in its private
//! `/tmp` only. The environment is exactly that: no variable of the teacher's reaches it.
//!
//! ```
//! assert_eq!(grader::execute::harness_args("grade::adds"), ["grade::adds", "--exact", "--test-threads", "1"]);
//! ```

use crate::catalog::Exercise;
use crate::cgroup::LimitHit;
use crate::compile::TREE;
use crate::error::Result;
use crate::python::{Python, PYTHON_ENV};
use crate::sandbox::{Confinement, Finished, Jail, Limits};
use crate::slot::Slot;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Inside the sandbox, the binary under test.
const BIN: &str = "/judge/bin";

/// How a scenario is run.
#[derive(Clone, Debug)]
pub struct Settings {
    /// The run's challenge.
    pub challenge: u64,
    /// Wall-clock limit.
    pub wall: Duration,
    /// The interpreter tests may run, if the teacher named one.
    pub python: Option<Python>,
    /// Device files the tests may use (a GPU's).
    pub devices: Vec<PathBuf>,
}

/// The arguments that run the test at `path` of a harness (`grade::adds`) alone.
pub fn harness_args(path: &str) -> Vec<String> {
    vec![
        path.to_string(),
        "--exact".into(),
        "--test-threads".into(),
        "1".into(),
    ]
}

/// Runs `binary` (on the host) with `args`, as `package` of `exercise` on the tree of `slot`.
pub fn run(
    confinement: &Confinement,
    slot: &Slot,
    exercise: &Exercise,
    package: &str,
    binary: &Path,
    args: &[String],
    settings: &Settings,
) -> Result<(Finished, Option<LimitHit>)> {
    let sandboxed = confinement.is_sandboxed();
    let mut jail = Jail::new(Limits::for_tests(settings.wall));
    let name = binary
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "test".into());
    let (tree, program) = if sandboxed {
        (PathBuf::from(TREE), Path::new(BIN).join(&name))
    } else {
        (slot.tree.clone(), binary.to_path_buf())
    };
    jail.ro(&slot.tree, TREE)
        .ro(binary, Path::new(BIN).join(&name));
    let crate_dir = tree.join("exercises").join(&exercise.path);
    jail.env("CARGO_MANIFEST_DIR", crate_dir.to_string_lossy())
        .env("CARGO_PKG_NAME", package)
        .env("RUST_BACKTRACE", "0")
        .env(scenario::CHALLENGE_ENV, settings.challenge.to_string());
    if let Some(python) = &settings.python {
        for dir in &python.mounts {
            jail.ro(dir, dir);
        }
        jail.env(PYTHON_ENV, python.executable.to_string_lossy());
    }
    jail.devices = settings.devices.clone();
    jail.cwd = crate_dir;
    Ok(confinement.run_limited(&jail, &program, args, None)?)
}
