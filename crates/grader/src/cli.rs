//! The `cargo grade` command line (see `exercises/README.md`): parsing, the grading loop, the
//! table and reports, `--hint`, `--watch`, `--expect`.
//!
//! The binary is `src/bin/grade.rs` (`cargo grade` is an alias for
//! `cargo run --quiet -p grader --bin grade --`). With `--root STUDENT_CLONE` (from inside the
//! teacher's repository) a student's clone is graded in a pristine tree (see [`crate::pristine`]);
//! `--class DIR` grades a folder of clones in parallel (see [`crate::class`]); `--wrong` grades
//! the known-wrong solutions (see [`crate::wrong`]).
//!
//! ```no_run
//! grader::cli::main(); // reads std::env::args and exits with the grade's status
//! ```

use crate::catalog::{find_root, Catalog, Exercise, Selection, Variant};
use crate::report::write_atomically;
use crate::runner::{self, ExerciseOutcome, RunOptions};
use crate::{class, hints, integrity, pristine, wrong, Report};
use anyhow::{bail, Context, Result};
use clap::{Parser, ValueEnum};
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
    /// The repository to grade [default: the one containing the current directory]. Run from
    /// inside another copy of the workbook (the teacher's), DIR is a student's clone: only the
    /// files each exercise.toml lists under `edit` are taken from it and graded in a pristine
    /// copy of the teacher's tree; every other change is listed as ignored, never compiled.
    #[arg(long, value_name = "DIR")]
    root: Option<PathBuf>,
    /// Grade every student's clone in DIR (one folder per student) in pristine trees, in
    /// parallel; writes one report per student and a summary (CSV and JSON).
    #[arg(long, value_name = "DIR", conflicts_with_all = ["root", "watch", "solutions", "wrong"])]
    class: Option<PathBuf>,
    /// With --class: students graded at the same time (their builds take turns).
    #[arg(long, default_value_t = 2, value_name = "N")]
    jobs: usize,
    /// With --root or --class: the tree students started from [default: the repository
    /// containing the current directory]. Its build artefacts are reused.
    #[arg(long, value_name = "DIR")]
    pristine: Option<PathBuf>,
    /// With --class: where the per-student reports and the summary go [default:
    /// target/grade/class].
    #[arg(long, value_name = "DIR")]
    reports: Option<PathBuf>,
    /// Grade the known-wrong solutions (solutions/<chapter>/<exercise>/wrong/<slug>/): each must
    /// fail every test its wrong.toml names. Writes target/grade/wrong.json.
    #[arg(long, conflicts_with_all = ["watch", "solutions", "expect"])]
    wrong: bool,
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
    let cwd = std::env::current_dir().context("reading the current directory")?;
    let here = find_root(&cwd).ok().and_then(|r| r.canonicalize().ok());
    let teacher = match &cli.pristine {
        Some(p) => Some(
            find_root(p)?
                .canonicalize()
                .context("resolving the pristine tree")?,
        ),
        None => here.clone(),
    };
    if let Some(dir) = &cli.class {
        let teacher = teacher.context(
            "--class needs the teacher's repository: run it inside one, or pass --pristine DIR",
        )?;
        let catalog = Catalog::load(&teacher)?;
        let selected = catalog.select(&Selection::parse(&cli.selection))?;
        let reports = cli
            .reports
            .clone()
            .unwrap_or_else(|| teacher.join("target/grade/class"));
        let options = base_options(&cli, Variant::Exercises)?;
        return class::grade_class(&class::ClassJob {
            catalog: &catalog,
            selected: &selected,
            class_dir: dir,
            target: &target_dir(here.as_deref().unwrap_or(&teacher)),
            jobs: cli.jobs.max(1),
            reports: &reports,
            options: &options,
        });
    }
    let root = match &cli.root {
        Some(r) => find_root(r)?
            .canonicalize()
            .context("resolving the repository root")?,
        None => here
            .clone()
            .ok_or_else(|| crate::GradeError::NoRoot(cwd.clone()))?,
    };
    // A student's clone graded from the teacher's repository: in a pristine tree.
    let student_of = teacher.filter(|t| cli.root.is_some() && *t != root);
    let catalog = Catalog::load(student_of.as_deref().unwrap_or(&root))?;
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

    let options = base_options(&cli, variant)?;
    if cli.wrong {
        return wrong::run(&catalog, &selected, &options, &target_dir(&root));
    }
    let (json_path, junit_path) = report_paths(&cli, &root, variant);

    if let Some(teacher) = &student_of {
        if cli.watch {
            bail!("--watch grades your own repository; it cannot be combined with a student's clone (--root {})", root.display());
        }
        let slot = pristine::slot_dir(&target_dir(here.as_deref().unwrap_or(teacher)), "0");
        let report = class::grade_student(&class::StudentJob {
            catalog: &catalog,
            selected: &selected,
            student: &root,
            slot: &slot,
            target: &target_dir(here.as_deref().unwrap_or(teacher)),
            options: &options,
            build_lock: None,
        })?;
        publish_report(&root, &report, &json_path, &junit_path)?;
        return Ok(exit_code(&report, cli.expect));
    }

    if variant == Variant::Exercises {
        warn_about_changes(&root, &catalog);
    }
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

/// The options every mode shares, from the command line.
fn base_options(cli: &Cli, variant: Variant) -> Result<RunOptions> {
    let checksums = match &cli.checksums {
        Some(p) => integrity::parse(
            &std::fs::read_to_string(p).with_context(|| format!("reading {}", p.display()))?,
        ),
        None => integrity::parse(integrity::SHIPPED),
    };
    let mut options = RunOptions::new(variant, checksums);
    options.time_limit = cli.time_limit.map(Duration::from_secs);
    options.features = cli.features.clone();
    Ok(options)
}

/// Cargo's target folder for `root`: `CARGO_TARGET_DIR` when set, else `root/target`.
pub fn target_dir(root: &Path) -> PathBuf {
    match std::env::var_os("CARGO_TARGET_DIR") {
        Some(dir) => {
            let dir = PathBuf::from(dir);
            if dir.is_absolute() {
                dir
            } else {
                std::env::current_dir().unwrap_or_default().join(dir)
            }
        }
        None => root.join("target"),
    }
}

/// A student's own run: warns about changes outside the files the exercises ask them to edit,
/// which a teacher grading the clone ignores (see [`pristine::changed_since_upstream`]).
fn warn_about_changes(root: &Path, catalog: &Catalog) {
    let graded = pristine::edit_files(catalog);
    let changed = pristine::changed_since_upstream(root, &graded);
    if changed.is_empty() {
        return;
    }
    let shown: Vec<&str> = changed.iter().take(8).map(String::as_str).collect();
    let more = changed.len().saturating_sub(shown.len());
    let more = if more > 0 {
        format!(" and {more} more")
    } else {
        String::new()
    };
    eprintln!(
        "warning: you changed {}{more}; only the files each exercise asks you to edit (`edit` in its exercise.toml, e.g. {}) are graded when your teacher grades your clone: other changes are ignored, not compiled",
        shown.join(", "),
        graded.iter().next().map(String::as_str).unwrap_or("exercises/.../src/...")
    );
}

fn grade_each(
    root: &Path,
    exercises: &[&Exercise],
    options: &RunOptions,
) -> crate::Result<Vec<ExerciseOutcome>> {
    let mut outcomes = Vec::new();
    for exercise in exercises {
        outcomes.push(runner::grade(root, exercise, options)?);
    }
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
    publish_report(root, &report, json_path, junit_path)?;
    Ok(report)
}

fn publish_report(root: &Path, report: &Report, json_path: &Path, junit_path: &Path) -> Result<()> {
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
    Ok(())
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
