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
use serde::{Deserialize, Serialize};
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
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
}

/// Compiles and grades one exercise. Never fails because of the student's code: compile errors,
/// panics, time-outs and crashes are all results. Errs only when the grader cannot work at all
/// (cargo missing, an unreadable exercise folder).
pub fn grade(root: &Path, exercise: &Exercise, options: &RunOptions) -> Result<ExerciseOutcome> {
    let started = Instant::now();
    let package = exercise.package(root, options.variant)?;
    let modified_files = integrity::verify(root, exercise, &options.checksums)?;
    let build = build(root, &package, options.features.as_deref())?;
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
            compile_error = Some(errors);
        }
        Build::Built(binary) => {
            let listed = list_tests(&binary, &crate_dir, &package)?;
            for spec in &exercise.spec.tests {
                let full = format!("grade::{}", spec.name);
                let outcome = if listed.contains(&full) {
                    run_test(&binary, &crate_dir, &package, &full, limit)?
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

/// The test binary of `package`'s library, or every compiler error.
fn build(root: &Path, package: &str, features: Option<&str>) -> Result<Build> {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut cmd = Command::new(cargo);
    cmd.current_dir(root)
        .args([
            "test",
            "--lib",
            "--no-run",
            "--message-format=json",
            "--package",
        ])
        .arg(package);
    if let Some(f) = features {
        cmd.args(["--features", f]);
    }
    let out = cmd
        .stdin(Stdio::null())
        .stderr(Stdio::piped())
        .stdout(Stdio::piped())
        .output()
        .map_err(GradeError::Cargo)?;
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
    for line in String::from_utf8_lossy(&out.stdout).lines() {
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
        Some(b) if out.status.success() => Ok(Build::Built(b)),
        _ => {
            if errors.is_empty() {
                // Not a compiler diagnostic (a bad manifest, a missing package): cargo's stderr.
                errors.push(String::from_utf8_lossy(&out.stderr).trim().to_string());
            }
            Ok(Build::Failed(errors.join("\n")))
        }
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

/// A command running the test binary as `cargo test` would: in the crate's folder, with the
/// crate's `CARGO_MANIFEST_DIR` and `CARGO_PKG_NAME` (the grader itself runs under `cargo run`,
/// whose values for the grader's own package it would otherwise pass on).
fn test_command(binary: &Path, crate_dir: &Path, package: &str) -> Command {
    let mut cmd = Command::new(binary);
    cmd.current_dir(crate_dir)
        .env("CARGO_MANIFEST_DIR", crate_dir)
        .env("CARGO_PKG_NAME", package);
    cmd
}

fn list_tests(binary: &Path, crate_dir: &Path, package: &str) -> Result<Vec<String>> {
    let out = test_command(binary, crate_dir, package)
        .args(["--list", "--format", "terse"])
        .stdin(Stdio::null())
        .output()
        .map_err(|e| GradeError::io(binary, e))?;
    Ok(String::from_utf8_lossy(&out.stdout)
        .lines()
        .filter_map(|l| l.strip_suffix(": test"))
        .map(str::to_string)
        .collect())
}

/// Runs one test alone under `limit`: (status, message, milliseconds).
fn run_test(
    binary: &Path,
    crate_dir: &Path,
    package: &str,
    name: &str,
    limit: Duration,
) -> Result<(Status, String, u64)> {
    let started = Instant::now();
    let mut child = test_command(binary, crate_dir, package)
        .args([name, "--exact", "--test-threads", "1"])
        .env("RUST_BACKTRACE", "0")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| GradeError::io(binary, e))?;
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
    let waited = child
        .wait_timeout(limit)
        .map_err(|e| GradeError::io(binary, e))?;
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
    if status.success() {
        return Ok(if stdout.contains("1 passed") {
            (Status::Passed, String::new(), ms)
        } else {
            (Status::Missing, format!("{name} did not run"), ms)
        });
    }
    if stdout.contains(&format!("---- {name} stdout ----")) {
        return Ok((Status::Failed, failure_message(&stdout, name), ms));
    }
    let tail: Vec<&str> = stderr.lines().rev().take(8).collect();
    let tail = tail.into_iter().rev().collect::<Vec<_>>().join("\n");
    let message = if tail.trim().is_empty() {
        format!("the test process died ({status}) without a panic message: an abort, a stack overflow, or a crash in native code")
    } else {
        format!("the test process died ({status}): {}", tail.trim())
    };
    Ok((Status::Crashed, message, ms))
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
