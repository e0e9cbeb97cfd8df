//! The `cargo grade` command line (see `exercises/README.md`): parsing, the grading loop, the
//! table and reports, `--hint`, `--watch`, `--expect`.
//!
//! The binary itself is `crates/workbook-cli/src/bin/grade.rs`, which calls [`main`]: with a
//! second package owning a binary, a plain `cargo run` at the root would no longer know which
//! program is the main job.
//!
//! ```no_run
//! grader::cli::main(); // reads std::env::args and exits with the grade's status
//! ```

use crate::catalog::{find_root, Catalog, Exercise, Selection, Variant};
use crate::report::write_atomically;
use crate::runner::{self, ExerciseOutcome, RunOptions};
use crate::{hints, integrity, Report};
use anyhow::{bail, Context, Result};
use clap::{Parser, ValueEnum};
use indicatif::{ProgressBar, ProgressStyle};
use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Grades the workbook's exercises: one (`01-1`), a chapter (`01`) or all (no argument).
///
/// Prints a table with points and each failing test's message, and writes a JSON and a JUnit XML
/// report. Exit status: 0 when every selected test passed, 1 when some did not (or, with
/// --expect, when the expectation failed), 2 when grading itself was impossible.
#[derive(Parser, Debug)]
#[command(name = "cargo grade", version)]
struct Cli {
    /// Exercises to grade: an id (01-1), a chapter (01 or 01-device-management), a folder name
    /// (1-fix-the-mismatch), or all. Default: all.
    selection: Vec<String>,
    /// Show the next hint for the (first) selected exercise instead of grading; `--hint 2`
    /// shows a given level.
    #[arg(long, num_args = 0..=1, default_missing_value = "0", value_name = "LEVEL")]
    hint: Option<usize>,
    /// List the selected exercises (id, points, title, folder) without grading.
    #[arg(long)]
    list: bool,
    /// After grading, re-grade an exercise whenever one of its files is saved.
    #[arg(long)]
    watch: bool,
    /// Grade the reference solutions (`solutions/`) with the same tests.
    #[arg(long)]
    solutions: bool,
    /// Where to write the JSON report [default: target/grade/report.json, or
    /// target/grade/solutions.json with --solutions].
    #[arg(long, value_name = "FILE")]
    json: Option<PathBuf>,
    /// Where to write the JUnit XML report [default: beside the JSON, junit.xml or
    /// solutions-junit.xml].
    #[arg(long, value_name = "FILE")]
    junit: Option<PathBuf>,
    /// Time limit per test in seconds, overriding each exercise's own (exercise.toml).
    #[arg(long, value_name = "SECS")]
    time_limit: Option<u64>,
    /// Cargo features for the exercise crates, e.g. `cuda` to grade on a GPU.
    #[arg(long)]
    features: Option<String>,
    /// The repository to grade [default: the one containing the current directory].
    #[arg(long, value_name = "DIR")]
    root: Option<PathBuf>,
    /// For CI: `fail` checks every stub compiles and fails every test; `pass` checks full marks.
    #[arg(long, value_enum)]
    expect: Option<Expect>,
    /// Compare graded files with this checksum file instead of the shipped one.
    #[arg(long, value_name = "FILE")]
    checksums: Option<PathBuf>,
    /// Maintainers: rewrite crates/grader/checksums.txt from the current exercises.
    #[arg(long)]
    update_checksums: bool,
    /// With --watch: stop after this many re-grades (for tests).
    #[arg(long, hide = true)]
    watch_rounds: Option<usize>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
enum Expect {
    /// Every graded test passes and no graded file is modified.
    Pass,
    /// Every exercise compiles and every graded test fails.
    Fail,
}

/// Runs the grader on this process's arguments and exits: 0 when every selected test passed, 1
/// when some did not (or `--expect` was not met), 2 when grading was impossible.
pub fn main() {
    let cli = Cli::parse();
    match run(cli) {
        Ok(code) => std::process::exit(code),
        Err(e) => {
            eprintln!("error: {e:#}");
            std::process::exit(2);
        }
    }
}

fn run(cli: Cli) -> Result<i32> {
    let start = match &cli.root {
        Some(r) => r.clone(),
        None => std::env::current_dir().context("reading the current directory")?,
    };
    let root = find_root(&start)?
        .canonicalize()
        .context("resolving the repository root")?;
    let catalog = Catalog::load(&root)?;
    if catalog.exercises.is_empty() {
        bail!("no exercises under {}/exercises", root.display());
    }
    if cli.update_checksums {
        let path = root.join("crates/grader/checksums.txt");
        let sums = integrity::compute(&catalog)?;
        write_atomically(&path, integrity::render(&sums).as_bytes())?;
        println!("wrote {} checksums to {}", sums.len(), path.display());
        return Ok(0);
    }
    let selection = Selection::parse(&cli.selection);
    let selected = catalog.select(&selection)?;
    let variant = if cli.solutions {
        Variant::Solutions
    } else {
        Variant::Exercises
    };

    if cli.list {
        for ex in &selected {
            println!(
                "{:5} {:>3} pts  exercises/{:50} {}",
                ex.id,
                ex.max_points(),
                ex.path,
                ex.spec.title
            );
        }
        return Ok(0);
    }

    if let Some(level) = cli.hint {
        let exercise = selected[0];
        let state = root.join("target/grade/hints.json");
        let hints_md = exercise.spec_dir(&root).join("HINTS.md");
        let asked = (level > 0).then_some(level);
        let (shown, of, text) = hints::next(&hints_md, &state, &exercise.id, asked)?;
        println!(
            "{} {}: hint {shown} of {of}\n\n{text}",
            exercise.id, exercise.spec.title
        );
        if shown < of {
            println!("\n(run it again for hint {})", shown + 1);
        }
        return Ok(0);
    }

    let checksums = match &cli.checksums {
        Some(p) => integrity::parse(
            &std::fs::read_to_string(p).with_context(|| format!("reading {}", p.display()))?,
        ),
        None => integrity::parse(integrity::SHIPPED),
    };
    let options = RunOptions {
        variant,
        time_limit: cli.time_limit.map(Duration::from_secs),
        features: cli.features.clone(),
        checksums,
    };
    let (json_path, junit_path) = report_paths(&cli, &root, variant);

    let mut outcomes = grade_each(&root, &selected, &options)?;
    let report = publish(&root, variant, &outcomes, &json_path, &junit_path)?;
    let mut code = exit_code(&report, cli.expect);

    if cli.watch {
        crate::watch::run(&catalog, variant, &selected, cli.watch_rounds, |changed| {
            let fresh = grade_each(&root, changed, &options)?;
            for f in fresh {
                if let Some(slot) = outcomes.iter_mut().find(|o| o.id == f.id) {
                    *slot = f;
                }
            }
            let report = publish(&root, variant, &outcomes, &json_path, &junit_path)
                .map_err(|e| crate::GradeError::Watch(format!("{e:#}")))?;
            code = exit_code(&report, cli.expect);
            Ok(())
        })?;
    }
    Ok(code)
}

fn report_paths(cli: &Cli, root: &Path, variant: Variant) -> (PathBuf, PathBuf) {
    let dir = root.join("target/grade");
    let (json, junit) = match variant {
        Variant::Exercises => ("report.json", "junit.xml"),
        Variant::Solutions => ("solutions.json", "solutions-junit.xml"),
    };
    let json = cli.json.clone().unwrap_or_else(|| dir.join(json));
    let junit = cli.junit.clone().unwrap_or_else(|| {
        json.parent()
            .map(|p| p.join(junit))
            .unwrap_or_else(|| dir.join(junit))
    });
    (json, junit)
}

fn grade_each(
    root: &Path,
    exercises: &[&Exercise],
    options: &RunOptions,
) -> crate::Result<Vec<ExerciseOutcome>> {
    let bar = if std::io::stderr().is_terminal() {
        ProgressBar::new(exercises.len() as u64)
    } else {
        ProgressBar::hidden()
    };
    bar.set_style(
        ProgressStyle::with_template("{spinner} grading [{bar:20}] {pos}/{len} {msg}")
            .expect("a valid template")
            .progress_chars("#>-"),
    );
    bar.enable_steady_tick(Duration::from_millis(120));
    let mut outcomes = Vec::new();
    for exercise in exercises {
        bar.set_message(format!("{} {}", exercise.id, exercise.spec.title));
        outcomes.push(runner::grade(root, exercise, options)?);
        bar.inc(1);
    }
    bar.finish_and_clear();
    Ok(outcomes)
}

fn publish(
    root: &Path,
    variant: Variant,
    outcomes: &[ExerciseOutcome],
    json_path: &Path,
    junit_path: &Path,
) -> Result<Report> {
    let report = Report::new(variant, root, outcomes.to_vec());
    println!("{}", report.table(std::io::stdout().is_terminal()));
    println!("{}", report.summary());
    write_atomically(json_path, report.to_json().as_bytes())?;
    let junit = report.to_junit().context("writing the JUnit report")?;
    write_atomically(junit_path, junit.as_bytes())?;
    println!(
        "reports: {} and {}",
        shown(root, json_path),
        shown(root, junit_path)
    );
    println!("\n{}", report.next_steps());
    Ok(report)
}

fn shown(root: &Path, path: &Path) -> String {
    path.strip_prefix(root)
        .unwrap_or(path)
        .display()
        .to_string()
}

fn exit_code(report: &Report, expect: Option<Expect>) -> i32 {
    use crate::Status;
    match expect {
        None | Some(Expect::Pass) => {
            let ok = report.exercises.iter().all(|e| e.complete());
            if !ok && expect.is_some() {
                eprintln!("expected every test to pass");
            }
            i32::from(!ok)
        }
        Some(Expect::Fail) => {
            let mut bad = Vec::new();
            for ex in &report.exercises {
                if ex.compile_error.is_some() {
                    bad.push(format!("{}: the stub does not compile", ex.id));
                }
                if !ex.modified_files.is_empty() {
                    bad.push(format!("{}: graded files modified", ex.id));
                }
                for t in &ex.tests {
                    if t.status == Status::Passed {
                        bad.push(format!("{}: {} passes on the stub", ex.id, t.name));
                    }
                    if t.status == Status::Missing {
                        bad.push(format!("{}: {} is missing", ex.id, t.name));
                    }
                }
            }
            for b in &bad {
                eprintln!("expected the stub to fail: {b}");
            }
            i32::from(!bad.is_empty())
        }
    }
}
