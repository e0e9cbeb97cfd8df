//! A student's own grade (`cargo grade` in their clone, `--solutions`): compiling an exercise
//! and running its graded tests, one process per test, so that a test that loops, deadlocks,
//! aborts or overflows its stack costs that test's points and nothing else. Here the verdict is
//! the test's own (libtest's report of its assertions): the student is grading themselves. A
//! teacher's grade is the judge's ([`crate::grading`]).
//!
//! Cargo builds the test binary (`cargo test --lib --no-run --message-format=json`, whose
//! compiler errors become every test's message); each test then runs alone with
//! `<binary> grade::<name> --exact` under the exercise's time limit, as a process group that is
//! killed whole at the limit ([`crate::sandbox::Confinement::Unconfined`]). A test that builds a
//! program (`program` in `exercise.toml`) builds that example of the crate with Cargo, and runs
//! it unless building is the test; a `compile_fail` test builds it twice, with and without its
//! mistake ([`crate::refusal`]).
//!
//! ```
//! use grader::runner::failure_message;
//! let out = "---- grade::t stdout ----\n\nthread 'grade::t' panicked at src/x.rs:1:1:\nboom\n\nfailures:\n";
//! assert!(failure_message(out, "grade::t").contains("boom"));
//! let out = "---- grade::t stdout ----\nthread 'grade::t' panicked at a/src/../../a/tests/grade.rs:1:1:\nboom\n";
//! assert!(failure_message(out, "grade::t").contains("panicked at a/tests/grade.rs:1:1:"));
//! ```

use crate::cargo;
use crate::catalog::{Exercise, TestSpec, Variant};
use crate::error::Result;
use crate::integrity::{self, Checksums};
use crate::messages::Messages;
use crate::progress::Progress;
use crate::sandbox::{Confinement, Ended, Finished, Jail, Limits};
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

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
    /// Not run: a teacher's hidden test, in a student's own run (only the judge runs it).
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

impl TestOutcome {
    /// The outcome of graded test `spec`: its points when it passed, none otherwise.
    pub fn of(spec: &TestSpec, status: Status, message: String, duration_ms: u64) -> Self {
        Self {
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
        }
    }
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
    /// Its title in Simplified Chinese, when `exercise.toml` has one (the next steps of a
    /// `--lang zh-CN` run show it; the report's `title` stays English, for machines).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub title_zh: Option<String>,
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
    /// The title in `lang`, English where there is no translation.
    pub fn title_in(&self, lang: crate::lang::Lang) -> &str {
        match (lang, &self.title_zh) {
            (crate::lang::Lang::ZhCn, Some(zh)) => zh,
            _ => &self.title,
        }
    }

    /// Every test passed (those not run aside: a teacher's hidden tests in a student's own run)
    /// and nothing was modified.
    pub fn complete(&self) -> bool {
        self.modified_files.is_empty()
            && self
                .tests
                .iter()
                .all(|t| matches!(t.status, Status::Passed | Status::NotRun))
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
    /// What to print while building and running.
    pub progress: Progress,
    /// The language of the explanations the grader writes into failing tests' messages.
    pub messages: Messages,
}

impl RunOptions {
    /// Options for grading `variant` in place with the shipped checksums.
    pub fn new(variant: Variant, checksums: Checksums) -> Self {
        Self {
            variant,
            time_limit: None,
            features: None,
            checksums,
            progress: Progress::live(),
            messages: Messages::default(),
        }
    }
}

/// Compiles and grades one exercise. Never fails because of the student's code: compile errors,
/// panics, time-outs and crashes are all results. Errs only when the grader cannot work at all
/// (cargo missing, an unreadable exercise folder).
pub fn grade(root: &Path, exercise: &Exercise, options: &RunOptions) -> Result<ExerciseOutcome> {
    let started = Instant::now();
    let package = exercise.package(root, options.variant)?;
    let modified_files = integrity::verify(root, exercise, &options.checksums)?;
    options.progress.header(exercise);
    let build = build(root, &package, None, options)?;
    let limit = options
        .time_limit
        .unwrap_or(Duration::from_secs(exercise.time_limit_secs()));
    let crate_dir = exercise.dir(root, options.variant);

    let mut tests = Vec::new();
    let mut compile_error = None;
    match build {
        Build::Failed(errors) => {
            let first = crate::compile::first_error(&errors);
            for spec in &exercise.spec.tests {
                tests.push(TestOutcome {
                    name: spec.name.clone(),
                    points: 0,
                    max_points: spec.points,
                    status: Status::CompileError,
                    message: options.messages.does_not_compile(&first),
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
            };
            let listed = list_tests(&env, limit)?;
            for spec in &exercise.spec.tests {
                let full = format!("grade::{}", spec.name);
                let (status, message, duration_ms) = if spec.hidden {
                    (Status::NotRun, options.messages.hidden_test(), 0)
                } else if spec.compile_fail.is_some() {
                    refusal(root, exercise, &env, spec, options)?
                } else if spec.program.is_some() {
                    run_program(root, &env, spec, limit, options)?
                } else if listed.contains(&full) {
                    run_test(&env, &full, limit, options)?
                } else {
                    (Status::Missing, options.messages.not_in_binary(&full), 0)
                };
                options
                    .progress
                    .test_done(&spec.name, status, spec.points, duration_ms);
                tests.push(TestOutcome::of(spec, status, message, duration_ms));
            }
        }
    }
    let points_if_intact = tests.iter().map(|t| t.points).sum();
    Ok(ExerciseOutcome {
        id: exercise.id.clone(),
        path: exercise.path.clone(),
        title: exercise.spec.title.clone(),
        title_zh: exercise.spec.title_zh.clone(),
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

/// The test binary of `package`'s library (or, with `example`, that example), or every compiler
/// error. Cargo's own progress is shown as it happens.
fn build(root: &Path, package: &str, example: Option<&str>, options: &RunOptions) -> Result<Build> {
    build_with(root, package, example, &[], options)
}

/// [`build`], with `rustc_args` for the example's own compiler run (`cargo rustc`), such as the
/// switch of a `compile_fail` program's mistake.
fn build_with(
    root: &Path,
    package: &str,
    example: Option<&str>,
    rustc_args: &[String],
    options: &RunOptions,
) -> Result<Build> {
    let mut cmd = cargo::command();
    cmd.current_dir(root);
    match example {
        None => cmd.args(["test", "--lib", "--no-run"]),
        Some(name) if !rustc_args.is_empty() => cmd.args(["rustc", "--example", name]),
        Some(name) => cmd.args(["build", "--example", name]),
    };
    cmd.args(["--message-format=json", "--package", package]);
    if let Some(f) = &options.features {
        cmd.args(["--features", f]);
    }
    if !rustc_args.is_empty() {
        cmd.arg("--").args(rustc_args);
    }
    // A mistake's build is meant to fail: cargo's "could not compile" would read as the
    // student's failure, so it is not shown (the verdict says what the compiler said).
    let quiet = !rustc_args.is_empty();
    let built = cargo::build(
        cmd,
        options.progress.shows_cargo() && !quiet,
        options.progress.cargo_progress_bar().filter(|_| !quiet),
    )?;
    let binary = built
        .executables
        .iter()
        .find(|(_, test)| *test == example.is_none())
        .map(|(path, _)| path.clone());
    match binary {
        Some(b) if built.success => Ok(Build::Built(b)),
        _ => {
            let errors = if built.errors.is_empty() {
                // Not a compiler diagnostic (a bad manifest, a missing package): cargo's stderr.
                vec![crate::escape::text(built.stderr.trim(), 16 * 1024)]
            } else {
                built.errors
            };
            Ok(Build::Failed(errors.join("\n")))
        }
    }
}

/// Where and how a test binary runs.
struct TestEnv<'a> {
    binary: &'a Path,
    crate_dir: &'a Path,
    package: &'a str,
}

impl TestEnv<'_> {
    /// Runs `binary` as `cargo test` would: in the crate's folder, with the crate's
    /// `CARGO_MANIFEST_DIR` and `CARGO_PKG_NAME`, the student's own environment otherwise (it is
    /// their machine), as a process group killed whole at `limit`.
    fn run(
        &self,
        binary: &Path,
        args: &[String],
        limit: Duration,
        notice: Option<&dyn Fn()>,
    ) -> Result<Finished> {
        let mut jail = Jail::new(Limits::for_tests(limit));
        jail.env = std::env::vars()
            .filter(|(k, _)| !cargo::set_by_cargo_run(k))
            .collect();
        jail.env("CARGO_MANIFEST_DIR", self.crate_dir.to_string_lossy())
            .env("CARGO_PKG_NAME", self.package)
            .env("RUST_BACKTRACE", "0");
        jail.cwd = self.crate_dir.to_path_buf();
        let notice = notice.map(|n| (ANNOUNCE_AFTER, n));
        Ok(Confinement::Unconfined.run_with_notice(&jail, binary, args, notice)?)
    }
}

fn list_tests(env: &TestEnv, limit: Duration) -> Result<Vec<String>> {
    let args = ["--list", "--format", "terse"].map(String::from);
    let out = env.run(env.binary, &args, limit, None)?;
    Ok(out
        .stdout
        .text()
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
    options: &RunOptions,
) -> Result<(Status, String, u64)> {
    let progress = &options.progress;
    let args = [name, "--exact", "--test-threads", "1"].map(String::from);
    let short = name.trim_start_matches("grade::");
    let announce = || progress.still_running(short, ANNOUNCE_AFTER, limit);
    let run = env.run(env.binary, &args, limit, Some(&announce))?;
    let ms = run.wall.as_millis() as u64;
    if run.ended == Ended::TimedOut {
        return Ok((
            Status::TimedOut,
            options.messages.timed_out(limit.as_secs()),
            ms,
        ));
    }
    let stdout = crate::escape::text(&run.stdout.text(), 256 * 1024);
    let stderr = crate::escape::text(&run.stderr.text(), 64 * 1024);
    Ok(classify(
        run.ended,
        &stdout,
        &stderr,
        name,
        ms,
        options.messages,
    ))
}

/// Builds (and, unless building is the test, runs) the program of `spec`:
/// (status, message, milliseconds).
fn run_program(
    root: &Path,
    env: &TestEnv,
    spec: &TestSpec,
    limit: Duration,
    options: &RunOptions,
) -> Result<(Status, String, u64)> {
    let name = spec.program.as_deref().unwrap_or_default();
    let binary = match build(root, env.package, Some(name), options)? {
        Build::Failed(errors) => {
            return Ok((
                Status::Failed,
                options
                    .messages
                    .program_does_not_compile(name, &crate::compile::first_error(&errors)),
                0,
            ))
        }
        Build::Built(binary) => binary,
    };
    if spec.build_only {
        return Ok((Status::Passed, String::new(), 0));
    }
    let run = env.run(&binary, &[], limit, None)?;
    let ms = run.wall.as_millis() as u64;
    let stderr = crate::escape::text(&run.stderr.text(), 64 * 1024);
    let tail: Vec<&str> = stderr.lines().rev().take(12).collect();
    let tail = tail.into_iter().rev().collect::<Vec<_>>().join("\n");
    let tail = tail.trim();
    Ok(match run.ended {
        Ended::Exited(0) => (Status::Passed, String::new(), ms),
        Ended::TimedOut => (
            Status::TimedOut,
            options.messages.timed_out(limit.as_secs()),
            ms,
        ),
        Ended::Exited(code) => (
            Status::Failed,
            options.messages.program_failed(name, code, tail),
            ms,
        ),
        Ended::Signalled(signal) => (
            Status::Crashed,
            options.messages.program_died(name, signal, tail),
            ms,
        ),
    })
}

/// A `compile_fail` test ([`crate::refusal`]): the program built as it is, and with its
/// mistake switched on; the verdict is the compiler's, read from cargo's JSON diagnostics.
fn refusal(
    root: &Path,
    exercise: &Exercise,
    env: &TestEnv,
    spec: &TestSpec,
    options: &RunOptions,
) -> Result<(Status, String, u64)> {
    let started = Instant::now();
    let name = spec.program.as_deref().unwrap_or_default();
    let expected = spec.compile_fail.as_deref().unwrap_or_default();
    let sources: Vec<(String, String)> = exercise
        .spec
        .edit
        .iter()
        .map(|file| {
            let text = std::fs::read_to_string(env.crate_dir.join(file)).unwrap_or_default();
            (file.clone(), text)
        })
        .collect();
    let switched = crate::refusal::names_the_switch(
        sources
            .iter()
            .map(|(file, text)| (file.as_str(), text.as_str())),
    );
    let errors = |build: Build| match build {
        Build::Built(_) => None,
        Build::Failed(errors) => Some(errors),
    };
    let control = errors(build(root, env.package, Some(name), options)?);
    let mistake = match control {
        // The mistake's build says nothing more when the right version does not build.
        Some(_) => None,
        None => errors(build_with(
            root,
            env.package,
            Some(name),
            &crate::refusal::mistake_args(),
            options,
        )?),
    };
    let (status, message) = crate::refusal::verdict(
        options.messages,
        name,
        expected,
        switched,
        control.as_deref(),
        mistake.as_deref(),
    );
    Ok((status, message, started.elapsed().as_millis() as u64))
}

/// What a finished test process's exit status and output mean.
fn classify(
    ended: Ended,
    stdout: &str,
    stderr: &str,
    name: &str,
    ms: u64,
    messages: Messages,
) -> (Status, String, u64) {
    // libtest prints `test result:` once the test is over; without it the process ended early.
    let finished = stdout.contains("test result:");
    if ended == Ended::Exited(0) && finished {
        return if stdout.contains("1 passed") {
            (Status::Passed, String::new(), ms)
        } else {
            (Status::Missing, messages.did_not_run(name), ms)
        };
    }
    if stdout.contains(&format!("---- {name} stdout ----")) {
        return (Status::Failed, failure_message(stdout, name), ms);
    }
    let tail: Vec<&str> = stderr.lines().rev().take(8).collect();
    let tail = tail.into_iter().rev().collect::<Vec<_>>().join("\n");
    let tail = tail.trim();
    let said = messages.it_printed(tail);
    match ended {
        // A normal exit, but before libtest could report the test: the code under test ended
        // the process itself.
        Ended::Exited(code) => (Status::Exited, messages.exited_early(code, &said), ms),
        Ended::Signalled(signal) if tail.is_empty() => {
            (Status::Crashed, messages.died_silently(signal), ms)
        }
        Ended::Signalled(signal) => (Status::Crashed, messages.died(signal, tail), ms),
        Ended::TimedOut => (Status::TimedOut, messages.timed_out_short(), ms),
    }
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
