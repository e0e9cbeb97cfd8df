//! Compiling an exercise and running its graded tests, one process per test, so that a test that
//! loops, deadlocks, aborts or overflows its stack costs that test's points and nothing else.
//!
//! Cargo builds the test binary (`cargo test --lib --no-run --message-format=json`, whose
//! compiler errors become every test's message); each test then runs alone with
//! `<binary> grade::<name> --exact` under the exercise's time limit.
//!
//! ```
//! use grader::runner::failure_message;
//! let out = "---- grade::t stdout ----\n\nthread 'grade::t' panicked at src/x.rs:1:1:\nboom\n\nfailures:\n";
//! assert!(failure_message(out, "grade::t").contains("boom"));
//! let out = "---- grade::t stdout ----\nthread 'grade::t' panicked at a/src/../../a/tests/grade.rs:1:1:\nboom\n";
//! assert!(failure_message(out, "grade::t").contains("panicked at a/tests/grade.rs:1:1:"));
//! ```

use crate::catalog::{Exercise, Variant};
use crate::error::{GradeError, Result};
use crate::integrity::{self, Checksums};
use crate::progress::Progress;
use serde::{Deserialize, Serialize};
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};
use wait_timeout::ChildExt;

/// How a graded test ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    /// Passed: full points.
    Passed,
    /// An assertion or a panic failed it.
    Failed,
    /// Ran past the time limit and was killed.
    TimedOut,
    /// The process died (abort, stack overflow, a signal).
    Crashed,
    /// The exercise does not compile.
    CompileError,
    /// The test is not in the test binary (deleted, renamed, or not wired into `src/lib.rs`).
    Missing,
    /// The test process ended normally before the test finished (`std::process::exit` in the
    /// code under test).
    Exited,
    /// Not run: `--wrong` runs only the tests a known-wrong solution must fail.
    NotRun,
}

impl Status {
    /// The word shown in the table.
    pub fn label(self) -> &'static str {
        match self {
            Status::Passed => "pass",
            Status::Failed => "FAIL",
            Status::TimedOut => "TIMEOUT",
            Status::Crashed => "CRASH",
            Status::CompileError => "NO BUILD",
            Status::Missing => "MISSING",
            Status::Exited => "EXITED",
            Status::NotRun => "not run",
        }
    }
}

/// One graded test's result.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct TestOutcome {
    /// The test's name (without the `grade::` module).
    pub name: String,
    /// Points earned.
    pub points: u32,
    /// Points it is worth.
    pub max_points: u32,
    /// How it ended.
    pub status: Status,
    /// The failure's message (the panic message, the compiler's first error, ...); empty when
    /// it passed.
    pub message: String,
    /// Wall time of the test process.
    pub duration_ms: u64,
}

/// One exercise's result.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ExerciseOutcome {
    /// `01-1`.
    pub id: String,
    /// `01-device-management/1-fix-the-mismatch`.
    pub path: String,
    /// The exercise's title.
    pub title: String,
    /// The Cargo package that was graded.
    pub package: String,
    /// Which tree was graded.
    pub variant: Variant,
    /// Points earned; 0 when the graded files were modified.
    pub points: u32,
    /// Points available.
    pub max_points: u32,
    /// Points the tests would have given, had the graded files been intact.
    pub points_if_intact: u32,
    /// Graded files that differ from the grader's checksums (see `integrity`).
    pub modified_files: Vec<String>,
    /// Every compiler error, when the exercise does not compile.
    pub compile_error: Option<String>,
    /// Per-test results, in `exercise.toml`'s order.
    pub tests: Vec<TestOutcome>,
    /// Compiling and running, in all.
    pub duration_ms: u64,
}

impl ExerciseOutcome {
    /// Every test passed and nothing was modified.
    pub fn complete(&self) -> bool {
        self.modified_files.is_empty() && self.tests.iter().all(|t| t.status == Status::Passed)
    }
}

/// How to grade.
#[derive(Clone, Debug)]
pub struct RunOptions {
    /// Which tree to grade.
    pub variant: Variant,
    /// Overrides every exercise's time limit.
    pub time_limit: Option<Duration>,
    /// Passed to cargo as `--features` (e.g. `cuda`).
    pub features: Option<String>,
    /// The checksums graded files are compared with.
    pub checksums: Checksums,
    /// Cargo's target folder for the build and the tests (`CARGO_TARGET_DIR`): the teacher's,
    /// when a student's files are graded in a pristine tree. `None`: cargo's own choice.
    pub target_dir: Option<PathBuf>,
    /// Run only these graded tests (the others are reported as not run); `None`: all of them.
    pub only_tests: Option<Vec<String>>,
    /// Whether to compare the graded files with `checksums` (not in a pristine tree, whose files
    /// are the teacher's by construction).
    pub verify_integrity: bool,
    /// What to print while building and running.
    pub progress: Progress,
    /// Copy the test binary here before running it (a pristine tree's build shares the
    /// teacher's target folder, where the next build overwrites it).
    pub binary_copy: Option<PathBuf>,
    /// Files to write (absolute path, bytes) just before the build, under `build_lock`: a
    /// student's edited files in a pristine tree (see `pristine`).
    pub overlay: Vec<(PathBuf, Vec<u8>)>,
    /// Held while writing `overlay`, building and copying the binary, when several pristine
    /// trees share one target folder.
    pub build_lock: Option<Arc<Mutex<()>>>,
}

impl RunOptions {
    /// Options for grading `variant` in place with the shipped checksums.
    pub fn new(variant: Variant, checksums: Checksums) -> Self {
        Self {
            variant,
            time_limit: None,
            features: None,
            checksums,
            target_dir: None,
            only_tests: None,
            verify_integrity: true,
            progress: Progress::live(),
            binary_copy: None,
            overlay: Vec::new(),
            build_lock: None,
        }
    }
}

/// Compiles and grades one exercise. Never fails because of the student's code: compile errors,
/// panics, time-outs and crashes are all results. Errs only when the grader cannot work at all
/// (cargo missing, an unreadable exercise folder).
pub fn grade(root: &Path, exercise: &Exercise, options: &RunOptions) -> Result<ExerciseOutcome> {
    let started = Instant::now();
    let package = exercise.package(root, options.variant)?;
    let modified_files = if options.verify_integrity {
        integrity::verify(root, exercise, &options.checksums)?
    } else {
        Vec::new()
    };
    options.progress.header(exercise);
    let guard = options
        .build_lock
        .as_ref()
        .map(|l| l.lock().unwrap_or_else(|poisoned| poisoned.into_inner()));
    for (path, bytes) in &options.overlay {
        // Written now, after any earlier build: Cargo sees a newer file and rebuilds.
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir).map_err(|e| GradeError::io(dir, e))?;
        }
        std::fs::write(path, bytes).map_err(|e| GradeError::io(path, e))?;
    }
    let build = match build(root, &package, options)? {
        Build::Built(binary) => match &options.binary_copy {
            Some(copy) => {
                if let Some(dir) = copy.parent() {
                    std::fs::create_dir_all(dir).map_err(|e| GradeError::io(dir, e))?;
                }
                std::fs::copy(&binary, copy).map_err(|e| GradeError::io(copy, e))?;
                Build::Built(copy.clone())
            }
            None => Build::Built(binary),
        },
        failed => failed,
    };
    drop(guard);
    let limit = options
        .time_limit
        .unwrap_or(Duration::from_secs(exercise.time_limit_secs()));
    let crate_dir = exercise.dir(root, options.variant);

    let mut tests = Vec::new();
    let mut compile_error = None;
    match build {
        Build::Failed(errors) => {
            let first = first_error(&errors);
            for spec in &exercise.spec.tests {
                tests.push(TestOutcome {
                    name: spec.name.clone(),
                    points: 0,
                    max_points: spec.points,
                    status: Status::CompileError,
                    message: format!("does not compile: {first}"),
                    duration_ms: 0,
                });
            }
            options.progress.compile_failed(exercise, &first);
            compile_error = Some(errors);
        }
        Build::Built(binary) => {
            let env = TestEnv {
                binary: &binary,
                crate_dir: &crate_dir,
                package: &package,
                target_dir: options.target_dir.as_deref(),
            };
            let listed = list_tests(&env)?;
            for spec in &exercise.spec.tests {
                let full = format!("grade::{}", spec.name);
                let wanted = options
                    .only_tests
                    .as_ref()
                    .is_none_or(|only| only.contains(&spec.name));
                let outcome = if !wanted {
                    (
                        Status::NotRun,
                        "not run (only the named tests were)".into(),
                        0,
                    )
                } else if listed.contains(&full) {
                    run_test(&env, &full, limit, &options.progress)?
                } else {
                    (
                        Status::Missing,
                        format!(
                            "test {full} is not in the test binary: was tests/grade.rs changed, or its `mod grade` removed from src/lib.rs?"
                        ),
                        0,
                    )
                };
                let (status, message, duration_ms) = outcome;
                if status != Status::NotRun {
                    options
                        .progress
                        .test_done(&spec.name, status, spec.points, duration_ms);
                }
                tests.push(TestOutcome {
                    name: spec.name.clone(),
                    points: if status == Status::Passed {
                        spec.points
                    } else {
                        0
                    },
                    max_points: spec.points,
                    status,
                    message,
                    duration_ms,
                });
            }
        }
    }
    let points_if_intact = tests.iter().map(|t| t.points).sum();
    Ok(ExerciseOutcome {
        id: exercise.id.clone(),
        path: exercise.path.clone(),
        title: exercise.spec.title.clone(),
        package,
        variant: options.variant,
        points: if modified_files.is_empty() {
            points_if_intact
        } else {
            0
        },
        max_points: exercise.max_points(),
        points_if_intact,
        modified_files,
        compile_error,
        tests,
        duration_ms: started.elapsed().as_millis() as u64,
    })
}

enum Build {
    Built(PathBuf),
    Failed(String),
}

/// Removes what `cargo run` sets for the program it runs (the grader's own package name,
/// manifest folder, `OUT_DIR`, ...) from an inner cargo's environment. Build scripts that declare
/// `rerun-if-env-changed` on such a variable (ring does) would otherwise see it change between
/// `cargo grade` and a plain `cargo build`, and rebuild, with everything that depends on them, on
/// every grade. What the user set (`CARGO_HOME`, `CARGO_TARGET_DIR`, `CARGO_BUILD_*`,
/// `CARGO_PROFILE_*`, `RUSTFLAGS`, ...) is kept.
pub fn clean_cargo_env(cmd: &mut Command) {
    for (key, _) in std::env::vars_os() {
        let Some(key) = key.to_str() else { continue };
        if set_by_cargo_run(key) {
            cmd.env_remove(key);
        }
    }
}

/// Whether `cargo run` sets `key` for the program it runs (see the Cargo book, "Environment
/// variables Cargo sets for crates").
pub fn set_by_cargo_run(key: &str) -> bool {
    key.starts_with("CARGO_PKG_")
        || key.starts_with("CARGO_BIN_EXE_")
        || matches!(
            key,
            "CARGO_MANIFEST_DIR"
                | "CARGO_MANIFEST_PATH"
                | "CARGO_MANIFEST_LINKS"
                | "CARGO_CRATE_NAME"
                | "CARGO_BIN_NAME"
                | "CARGO_PRIMARY_PACKAGE"
                | "CARGO_TARGET_TMPDIR"
                | "CARGO_RUSTC_CURRENT_DIR"
                | "OUT_DIR"
        )
}

/// The cargo that runs the grader (`CARGO`), or the one on the `PATH`.
fn cargo() -> Command {
    let program = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut cmd = Command::new(program);
    clean_cargo_env(&mut cmd);
    cmd
}

/// The test binary of `package`'s library, or every compiler error. Cargo's own progress
/// (`Compiling ...`, its progress bar on a terminal) is shown as it happens.
fn build(root: &Path, package: &str, options: &RunOptions) -> Result<Build> {
    let mut cmd = cargo();
    cmd.current_dir(root)
        .args([
            "test",
            "--lib",
            "--no-run",
            "--message-format=json",
            "--package",
        ])
        .arg(package);
    if let Some(f) = &options.features {
        cmd.args(["--features", f]);
    }
    if let Some(dir) = &options.target_dir {
        cmd.env("CARGO_TARGET_DIR", dir);
    }
    let tty = options.progress.cargo_progress_bar();
    if let Some(width) = tty {
        // Cargo draws its bar only on a terminal; its stderr is our pipe, which we copy to the
        // terminal, so ask for the bar explicitly.
        cmd.env("CARGO_TERM_PROGRESS_WHEN", "always")
            .env("CARGO_TERM_PROGRESS_WIDTH", width.to_string());
    }
    let mut child = cmd
        .stdin(Stdio::null())
        .stderr(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .map_err(GradeError::Cargo)?;
    let stderr_pipe = child.stderr.take();
    let show = options.progress.shows_cargo();
    let stderr = std::thread::spawn(move || {
        let mut copy = Vec::new();
        if let Some(pipe) = stderr_pipe {
            forward_cargo_stderr(pipe, show, tty.is_some(), &mut copy);
        }
        String::from_utf8_lossy(&copy).into_owned()
    });
    let mut stdout = String::new();
    if let Some(mut pipe) = child.stdout.take() {
        let _ = pipe.read_to_string(&mut stdout);
    }
    let status = child.wait().map_err(GradeError::Cargo)?;
    let stderr = stderr.join().unwrap_or_default();
    #[derive(Deserialize)]
    struct Line {
        reason: String,
        #[serde(default)]
        executable: Option<PathBuf>,
        #[serde(default)]
        profile: Option<Profile>,
        #[serde(default)]
        message: Option<Diagnostic>,
    }
    #[derive(Deserialize)]
    struct Profile {
        test: bool,
    }
    #[derive(Deserialize)]
    struct Diagnostic {
        level: String,
        rendered: Option<String>,
    }
    let mut binary = None;
    let mut errors = Vec::new();
    for line in stdout.lines() {
        let Ok(line) = serde_json::from_str::<Line>(line) else {
            continue;
        };
        match line.reason.as_str() {
            "compiler-artifact" if line.profile.as_ref().is_some_and(|p| p.test) => {
                if let Some(exe) = line.executable {
                    binary = Some(exe);
                }
            }
            "compiler-message" => {
                if let Some(d) = line.message.filter(|d| d.level == "error") {
                    errors.extend(d.rendered);
                }
            }
            _ => {}
        }
    }
    match binary {
        Some(b) if status.success() => Ok(Build::Built(b)),
        _ => {
            if errors.is_empty() {
                // Not a compiler diagnostic (a bad manifest, a missing package): cargo's stderr.
                errors.push(stderr.trim().to_string());
            }
            Ok(Build::Failed(errors.join("\n")))
        }
    }
}

/// Copies cargo's stderr to ours as it comes (when `show`), keeping a copy in `copy`. Lines that
/// say nothing new on every grade (`Finished`, `Executable`, `Fresh`) are not shown. On a
/// terminal each line first clears the one cargo's progress bar drew.
fn forward_cargo_stderr(mut pipe: impl Read, show: bool, tty: bool, copy: &mut Vec<u8>) {
    use std::io::Write;
    let mut buf = [0u8; 4096];
    let mut pending: Vec<u8> = Vec::new();
    let mut drew_bar = false;
    loop {
        let n = match pipe.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        copy.extend_from_slice(&buf[..n]);
        if !show {
            continue;
        }
        pending.extend_from_slice(&buf[..n]);
        let mut err = std::io::stderr().lock();
        while let Some(end) = pending.iter().position(|&b| b == b'\n' || b == b'\r') {
            let segment: Vec<u8> = pending.drain(..=end).collect();
            let newline = segment[end] == b'\n';
            let text = String::from_utf8_lossy(&segment[..end]);
            let word = text.trim_start();
            let quiet = word.is_empty()
                || ["Finished", "Executable", "Fresh", "Blocking"]
                    .iter()
                    .any(|w| word.starts_with(w));
            if quiet && (newline || word.is_empty()) {
                continue;
            }
            if tty {
                let _ = write!(err, "\r\x1b[2K{text}");
                drew_bar = !newline;
                if newline {
                    let _ = writeln!(err);
                }
            } else if newline {
                let _ = writeln!(err, "{text}");
            }
        }
        let _ = err.flush();
    }
    if drew_bar {
        eprint!("\r\x1b[2K");
    }
}

/// `error[E0308]: mismatched types --> src/x.rs:3:5`: the first error, one line.
fn first_error(errors: &str) -> String {
    let mut lines = errors.lines().filter(|l| !l.trim().is_empty());
    let head = lines.next().unwrap_or("unknown error").trim().to_string();
    match lines.next() {
        Some(at) if at.trim_start().starts_with("-->") => format!("{head} {}", at.trim()),
        _ => head,
    }
}

/// Where and how a test binary runs.
struct TestEnv<'a> {
    binary: &'a Path,
    crate_dir: &'a Path,
    package: &'a str,
    target_dir: Option<&'a Path>,
}

impl TestEnv<'_> {
    /// A command running the test binary as `cargo test` would: in the crate's folder, with the
    /// crate's `CARGO_MANIFEST_DIR` and `CARGO_PKG_NAME`, and none of the values `cargo run` set
    /// for the grader's own package.
    fn command(&self) -> Command {
        let mut cmd = Command::new(self.binary);
        clean_cargo_env(&mut cmd);
        cmd.current_dir(self.crate_dir)
            .env("CARGO_MANIFEST_DIR", self.crate_dir)
            .env("CARGO_PKG_NAME", self.package);
        if let Some(dir) = self.target_dir {
            // Tests that build programs themselves (trybuild) reuse the same artefacts.
            cmd.env("CARGO_TARGET_DIR", dir);
        }
        cmd
    }
}

fn list_tests(env: &TestEnv) -> Result<Vec<String>> {
    let out = env
        .command()
        .args(["--list", "--format", "terse"])
        .stdin(Stdio::null())
        .output()
        .map_err(|e| GradeError::io(env.binary, e))?;
    Ok(String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.strip_suffix(": test"))
        .map(str::to_string)
        .collect())
}

/// After this long a running test is announced, with its time limit.
const ANNOUNCE_AFTER: Duration = Duration::from_secs(3);

/// Runs one test alone under `limit`: (status, message, milliseconds).
fn run_test(
    env: &TestEnv,
    name: &str,
    limit: Duration,
    progress: &Progress,
) -> Result<(Status, String, u64)> {
    let started = Instant::now();
    let mut child = env
        .command()
        .args([name, "--exact", "--test-threads", "1"])
        .env("RUST_BACKTRACE", "0")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| GradeError::io(env.binary, e))?;
    // Drain both pipes on threads: a chatty test must not block on a full pipe while we wait.
    let drain = |pipe: Option<Box<dyn Read + Send>>| {
        std::thread::spawn(move || {
            let mut text = String::new();
            if let Some(mut p) = pipe {
                let mut bytes = Vec::new();
                let _ = p.read_to_end(&mut bytes);
                text = String::from_utf8_lossy(&bytes).into_owned();
            }
            text
        })
    };
    let stdout = drain(
        child
            .stdout
            .take()
            .map(|p| Box::new(p) as Box<dyn Read + Send>),
    );
    let stderr = drain(
        child
            .stderr
            .take()
            .map(|p| Box::new(p) as Box<dyn Read + Send>),
    );
    let first = ANNOUNCE_AFTER.min(limit);
    let mut waited = child
        .wait_timeout(first)
        .map_err(|e| GradeError::io(env.binary, e))?;
    if waited.is_none() && limit > first {
        progress.still_running(name.trim_start_matches("grade::"), first, limit);
        waited = child
            .wait_timeout(limit - first)
            .map_err(|e| GradeError::io(env.binary, e))?;
    }
    let status = match waited {
        Some(s) => s,
        None => {
            let _ = child.kill();
            let _ = child.wait();
            let ms = started.elapsed().as_millis() as u64;
            return Ok((
                Status::TimedOut,
                format!(
                    "killed after the time limit of {} s (an endless loop, a deadlock, or far too much work?)",
                    limit.as_secs()
                ),
                ms,
            ));
        }
    };
    let ms = started.elapsed().as_millis() as u64;
    let stdout = stdout.join().unwrap_or_default();
    let stderr = stderr.join().unwrap_or_default();
    Ok(classify(status, &stdout, &stderr, name, ms))
}

/// What a finished test process's exit status and output mean.
fn classify(
    status: std::process::ExitStatus,
    stdout: &str,
    stderr: &str,
    name: &str,
    ms: u64,
) -> (Status, String, u64) {
    // libtest prints `test result:` once the test is over; without it the process ended early.
    let finished = stdout.contains("test result:");
    if status.success() && finished {
        return if stdout.contains("1 passed") {
            (Status::Passed, String::new(), ms)
        } else {
            (Status::Missing, format!("{name} did not run"), ms)
        };
    }
    if stdout.contains(&format!("---- {name} stdout ----")) {
        return (Status::Failed, failure_message(stdout, name), ms);
    }
    let tail: Vec<&str> = stderr.lines().rev().take(8).collect();
    let tail = tail.into_iter().rev().collect::<Vec<_>>().join("\n");
    let tail = tail.trim();
    let said = if tail.is_empty() {
        String::new()
    } else {
        format!("; it printed: {tail}")
    };
    if let Some(code) = status.code() {
        // A normal exit, but before libtest could report the test: the code under test ended the
        // process itself.
        return (
            Status::Exited,
            format!(
                "the test process ended (exit code {code}) before the test finished: your code may have called std::process::exit or abort{said}"
            ),
            ms,
        );
    }
    let message = if tail.is_empty() {
        format!("the test process died ({status}) before the test finished, without a panic message: your code may have called abort, overflowed its stack, or crashed in native code")
    } else {
        format!("the test process died ({status}) before the test finished: {tail}")
    };
    (Status::Crashed, message, ms)
}

/// The failure text libtest printed for `name`, without its boilerplate.
pub fn failure_message(stdout: &str, name: &str) -> String {
    let header = format!("---- {name} stdout ----");
    let Some(start) = stdout.find(&header) else {
        return String::new();
    };
    let body = &stdout[start + header.len()..];
    let end = body.find("\nfailures:").unwrap_or(body.len());
    body[..end]
        .lines()
        .filter(|l| !l.starts_with("note: run with `RUST_BACKTRACE=1`"))
        .map(tidy_panic_location)
        .collect::<Vec<_>>()
        .join("\n")
        .trim()
        .to_string()
}

/// `thread 'grade::t' (123) panicked at ex/src/../../../../exercises/ex/tests/grade.rs:9:5:` →
/// `… panicked at exercises/ex/tests/grade.rs:9:5:`: the tests are compiled through a `#[path]`
/// that climbs out of `src/`, which is noise to a student.
fn tidy_panic_location(line: &str) -> String {
    let Some((head, path)) = line.split_once(" panicked at ") else {
        return line.to_string();
    };
    let mut parts: Vec<&str> = Vec::new();
    for part in path.split('/') {
        match part {
            ".." if parts.last().is_some_and(|p| *p != "..") => {
                parts.pop();
            }
            "." => {}
            _ => parts.push(part),
        }
    }
    // The thread's id (`thread 'grade::t' (4242)`) changes every run; reports should not.
    let head = match head.rsplit_once(" (") {
        Some((name, id)) if id.trim_end_matches(')').chars().all(|c| c.is_ascii_digit()) => name,
        _ => head,
    };
    format!("{head} panicked at {}", parts.join("/"))
}
