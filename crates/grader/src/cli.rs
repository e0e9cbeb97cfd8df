//! The `cargo grade` command line (see `exercises/README.md`): parsing, the grading loop, the
//! table and reports, `--hint`, `--watch`, `--expect`.
//!
//! The binary is `src/bin/grade.rs` (`cargo grade` is an alias for
//! `cargo run --quiet -p grader --bin grade --`). Without options it grades the repository it is
//! run in, by the tests' own assertions: a student grading themselves ([`crate::runner`]). A
//! teacher's modes are judged ([`crate::grading`]: sandboxed, verdicts from observations compared
//! with the reference solutions'): `--root STUDENT_CLONE` (from inside the teacher's repository)
//! grades one submission, `--class DIR` a folder of them in parallel ([`crate::class`]),
//! `--wrong` the references and the known-wrong solutions ([`crate::wrong`]), and
//! `--record-expected FILE` records the reference solutions' observations for grading elsewhere.
//!
//! ```no_run
//! grader::cli::main(); // reads std::env::args and exits with the grade's status
//! ```

use crate::catalog::{find_root, Catalog, Exercise, Selection, Variant};
use crate::grading::{Grading, Settings};
use crate::lang::Lang;
use crate::messages::Messages;
use crate::progress::Progress;
use crate::report::write_atomically;
use crate::runner::{self, ExerciseOutcome, RunOptions};
use crate::sandbox::Confinement;
use crate::{class, hints, integrity, submission, wrong, Report};
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
    /// The language of the hints and of what a student's own run prints: `en` or `zh-CN`
    /// [default: from LC_ALL, LC_MESSAGES or LANG (zh_CN.UTF-8 gives zh-CN), else en]. A
    /// teacher's modes (--class, --root, --wrong, the handout) print English.
    #[arg(long, value_name = "LANG")]
    lang: Option<Lang>,
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
    /// inside another copy of the workbook (the teacher's), DIR is a student's submission,
    /// judged: only the files each exercise.toml lists under `edit` are read from it, built and
    /// run in a sandbox on the teacher's tree, and compared with the reference solutions'
    /// observations; every other change is listed as ignored, never compiled.
    #[arg(long, value_name = "DIR")]
    root: Option<PathBuf>,
    /// Grade every student's submission in DIR (one folder per student), judged as with --root,
    /// in parallel; writes one report per student and a summary (CSV and JSON).
    #[arg(long, value_name = "DIR", conflicts_with_all = ["root", "watch", "solutions", "wrong"])]
    class: Option<PathBuf>,
    /// With --class: students graded at the same time, each in a sandbox of its own; with
    /// --wrong: references and known-wrong solutions graded at the same time.
    #[arg(long, default_value_t = 2, value_name = "N")]
    jobs: usize,
    /// With --root, --class, --wrong, --record-expected: the teacher's tree (its graded tests,
    /// and its solutions/ unless --expected is given) [default: the repository containing the
    /// current directory]. Its build artefacts are reused.
    #[arg(long, value_name = "DIR")]
    pristine: Option<PathBuf>,
    /// With --class: where the per-student reports and the summary go [default:
    /// target/grade/class].
    #[arg(long, value_name = "DIR")]
    reports: Option<PathBuf>,
    /// Grade the reference solutions and the known-wrong solutions
    /// (solutions/<chapter>/<exercise>/wrong/<slug>/) as submissions, judged: each reference
    /// must score full marks, each known-wrong solution must fail every test its wrong.toml
    /// names. Writes target/grade/wrong.json.
    #[arg(long, conflicts_with_all = ["watch", "solutions", "expect"])]
    wrong: bool,
    /// Judged modes: the reference solutions' observations, recorded earlier with
    /// --record-expected (for grading without solutions/, e.g. in a student's repository).
    /// Keep the file private: it is the answer key.
    #[arg(long, value_name = "FILE")]
    expected: Option<PathBuf>,
    /// Record the reference solutions' observations (under a fresh random challenge) into FILE
    /// for --expected, and stop.
    #[arg(long, value_name = "FILE", conflicts_with_all = ["class", "root", "wrong", "expected", "watch"])]
    record_expected: Option<PathBuf>,
    /// Judged modes: run students' code WITHOUT the sandbox (no bubblewrap). Only for students
    /// you trust: their code runs with your permissions. Every report says so.
    #[arg(long)]
    unsafe_no_sandbox: bool,
    /// Judged modes: the time limit of one compiler run, in seconds.
    #[arg(long, value_name = "SECS", default_value_t = 600)]
    build_time_limit: u64,
    /// Judged modes: the challenge (default: drawn at random each run). For reproducing a run.
    #[arg(long, value_name = "N", hide = true)]
    challenge: Option<u64>,
    /// With --class: the class list, a CSV with a header holding `id` (the student's folder
    /// name) and optionally `name`, `email` and any columns an LMS needs. Every rostered student
    /// gets a row (graded, no submission, not a workbook); folders it does not name are listed.
    #[arg(long, value_name = "FILE")]
    roster: Option<PathBuf>,
    /// With --class or --root: grade each repository at its last commit before TIME (RFC 3339,
    /// 2026-12-01T23:59:00+01:00, or @SECONDS), never its uncommitted files; reports record the
    /// commit, its time and whether later commits exist (late). Commit times are the student's.
    #[arg(long, value_name = "TIME")]
    deadline: Option<String>,
    /// With --class: grade only this student (their id) and rebuild the summary from every
    /// student's report.
    #[arg(long, value_name = "ID")]
    student: Option<String>,
    /// With --class or --root: also write `gradescope` (results.json per student),
    /// `classroom` (GitHub Classroom's reporter payload per student) or `lms-csv` (a gradebook
    /// CSV for the class, see --lms-identity). Repeatable.
    #[arg(long, value_name = "FORMAT", value_parser = ["gradescope", "classroom", "lms-csv"])]
    format: Vec<String>,
    /// With --format lms-csv: the roster column that identifies students in the gradebook
    /// (`id`, `email`, or any other column of the roster, e.g. "SIS User ID").
    #[arg(long, value_name = "COLUMN", default_value = "id")]
    lms_identity: String,
    /// Put the names and messages of hidden (teacher-only) tests into the students' feedback
    /// and exports.
    #[arg(long)]
    release_hidden: bool,
    /// With --root: the folder holds only the edited files (as uploaded to Gradescope), not a
    /// copy of the workbook; each edit file is found by its path or its name.
    #[arg(long)]
    loose: bool,
    /// Write the students' handout to DIR (a new folder): a fresh Git repository, one commit, no
    /// solutions/, no hidden tests, no history, its own checksums, CI and lock file.
    #[arg(long, value_name = "DIR", conflicts_with_all = ["class", "root", "wrong", "watch", "record_expected"])]
    make_handout: Option<PathBuf>,
    /// With --make-handout: add GitHub Classroom's autograding workflow
    /// (.github/workflows/classroom.yml), which runs the judge of your private repository.
    #[arg(long, requires = "make_handout")]
    classroom_workflow: bool,
    /// Write the judge bundle to DIR (a new folder; keep it private): the handout with the hidden
    /// tests, expected.json (the reference solutions' observations, recorded now), and
    /// Gradescope's setup.sh and run_autograder. Grade elsewhere from it: a classroom service's
    /// CI, or zip it as Gradescope's autograder.
    #[arg(long, value_name = "DIR", conflicts_with_all = ["class", "root", "wrong", "watch", "record_expected", "make_handout"])]
    make_judge: Option<PathBuf>,
    /// For CI: `fail` checks every stub compiles and fails every test; `pass` checks full marks.
    #[arg(long, value_enum)]
    expect: Option<Expect>,
    /// Compare graded files with this checksum file instead of the shipped one.
    #[arg(long, value_name = "FILE")]
    checksums: Option<PathBuf>,
    /// Maintainers: rewrite crates/grader/checksums.txt from the current exercises.
    #[arg(long)]
    update_checksums: bool,
    /// Maintainers: turn every whole file of the known-wrong solutions into a patch against the
    /// reference solution (`<file>.patch`).
    #[arg(long)]
    wrong_to_patches: bool,
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
                .context("resolving the teacher's tree (--pristine)")?,
        ),
        None => here.clone(),
    };
    if let Some(dest) = &cli.make_handout {
        let teacher = teacher.context("--make-handout needs the teacher's repository: run it inside one, or pass --pristine DIR")?;
        let catalog = Catalog::load(&teacher)?;
        let kind = crate::handout_export::Kind::Handout {
            classroom_workflow: cli.classroom_workflow,
        };
        let made = crate::handout_export::make(&catalog, dest, kind)?;
        println!("{made}");
        return Ok(0);
    }
    if let Some(dest) = &cli.make_judge {
        let teacher = teacher.context("--make-judge needs the teacher's repository: run it inside one, or pass --pristine DIR")?;
        let catalog = Catalog::load(&teacher)?;
        let made = crate::handout_export::make(&catalog, dest, crate::handout_export::Kind::Judge)?;
        // The expected values, recorded from the solutions here; the bundle has none of them.
        let target = target_dir(here.as_deref().unwrap_or(&teacher));
        let selected: Vec<&Exercise> = catalog.exercises.iter().collect();
        let mut settings = Settings::with(confinement(&cli)?);
        settings.time_limit = cli.time_limit.map(Duration::from_secs);
        settings.python = crate::python::Python::from_env(&teacher);
        let grading = Grading::prepare(&catalog, &selected, &target, settings, &Progress::live())?;
        let expected = dest.join("expected.json");
        grading.expected.save(&expected)?;
        println!(
            "{made}\nexpected values: {} (the answer key: keep the bundle private)",
            expected.display()
        );
        return Ok(0);
    }
    let judged = cli.class.is_some() || cli.wrong || cli.record_expected.is_some();
    let student = match &cli.root {
        Some(r) if cli.loose => Some(
            r.canonicalize()
                .with_context(|| format!("--root {}: no such folder", r.display()))?,
        ),
        Some(r) => Some(student_root(r)?),
        None => None,
    };
    let someone_else = student
        .as_ref()
        .is_some_and(|s| teacher.as_ref() != Some(s));
    if judged || someone_else {
        let teacher = teacher.context(
            "grading submissions needs the teacher's repository: run it inside one, or pass --pristine DIR",
        )?;
        let target = target_dir(here.as_deref().unwrap_or(&teacher));
        return judged_run(&cli, &teacher, &target, student.as_deref());
    }
    let root = match student.or(here) {
        Some(root) => root,
        None => return Err(crate::GradeError::NoRoot(cwd).into()),
    };
    let catalog = Catalog::load(&root)?;
    if cli.update_checksums {
        let path = root.join("crates/grader/checksums.txt");
        let sums = integrity::compute(&catalog)?;
        write_atomically(&path, integrity::render(&sums).as_bytes())?;
        println!("wrote {} checksums to {}", sums.len(), path.display());
        return Ok(0);
    }
    let selection = Selection::parse(&cli.selection);
    let selected = catalog.select(&selection)?;
    if cli.wrong_to_patches {
        let made = wrong::to_patches(&root, &selected)?;
        println!("{made} whole wrong files turned into patches against the reference solutions");
        return Ok(0);
    }
    let variant = if cli.solutions {
        Variant::Solutions
    } else {
        Variant::Exercises
    };

    let lang = cli.lang.unwrap_or_else(Lang::from_env);
    if cli.list {
        for ex in &selected {
            println!(
                "{:5} {:>3} pts  exercises/{:50} {}",
                ex.id,
                ex.max_points(),
                ex.path,
                ex.spec.title_in(lang)
            );
        }
        return Ok(0);
    }

    let messages = Messages::new(lang);
    if let Some(level) = cli.hint {
        let exercise = selected[0];
        let state = root.join("target/grade/hints.json");
        let (hints_md, translated) = hints::file(&exercise.spec_dir(&root), lang);
        if !translated {
            println!("{}\n", messages.hints_in_english(lang.hints_file()));
        }
        let asked = (level > 0).then_some(level);
        let (shown, of, text) = hints::next(&hints_md, &state, &exercise.id, asked)?;
        println!(
            "{}\n\n{text}",
            messages.hint_header(&exercise.id, exercise.spec.title_in(lang), shown, of)
        );
        if shown < of {
            println!("\n{}", messages.hint_again(shown + 1));
        }
        return Ok(0);
    }

    let mut options = base_options(&cli, variant)?;
    options.progress = Progress::live_in(lang);
    options.messages = messages;
    let (json_path, junit_path) = report_paths(&cli, &root, variant);
    if variant == Variant::Exercises {
        warn_about_changes(&root, &catalog, messages);
    }
    let mut outcomes = grade_each(&root, &selected, &options)?;
    let report = publish(&root, variant, &outcomes, &json_path, &junit_path, messages)?;
    let mut code = exit_code(&report, cli.expect);

    if cli.watch {
        crate::watch::run(
            &catalog,
            variant,
            &selected,
            cli.watch_rounds,
            messages,
            |changed| {
                let fresh = grade_each(&root, changed, &options)?;
                for f in fresh {
                    if let Some(slot) = outcomes.iter_mut().find(|o| o.id == f.id) {
                        *slot = f;
                    }
                }
                let report = publish(&root, variant, &outcomes, &json_path, &junit_path, messages)
                    .map_err(|e| crate::GradeError::Watch(format!("{e:#}")))?;
                code = exit_code(&report, cli.expect);
                Ok(())
            },
        )?;
    }
    Ok(code)
}

/// `--root DIR`: the folder itself, never a repository above it (an empty or unrelated folder is
/// an error, not the teacher's own tree found further up).
fn student_root(dir: &Path) -> Result<PathBuf> {
    let dir = dir
        .canonicalize()
        .with_context(|| format!("--root {}: no such folder", dir.display()))?;
    if !(dir.join("exercises").is_dir() && dir.join("Cargo.toml").is_file()) {
        bail!(
            "--root {}: not a copy of the workbook (no exercises/ and Cargo.toml in it)",
            dir.display()
        );
    }
    Ok(dir)
}

/// The exports `--format` asks for.
fn formats(cli: &Cli) -> Result<Vec<class::Format>> {
    cli.format
        .iter()
        .map(|f| {
            Ok(match f.as_str() {
                "gradescope" => class::Format::Gradescope,
                "classroom" => class::Format::Classroom,
                _ => class::Format::LmsCsv(cli.lms_identity.parse().map_err(anyhow::Error::msg)?),
            })
        })
        .collect()
}

/// The sandbox the judged modes use: bubblewrap, or none with `--unsafe-no-sandbox`.
fn confinement(cli: &Cli) -> Result<Confinement> {
    if cli.unsafe_no_sandbox {
        eprintln!("warning: --unsafe-no-sandbox: students' code will run with your permissions, unconfined; every report says so");
        return Ok(Confinement::Unconfined);
    }
    Ok(Confinement::bubblewrap()?)
}

/// `--class`, `--root` (a student's submission), `--wrong`, `--record-expected`: judged runs.
fn judged_run(cli: &Cli, teacher: &Path, target: &Path, student: Option<&Path>) -> Result<i32> {
    let catalog = Catalog::load(teacher)?;
    let selected = catalog.select(&Selection::parse(&cli.selection))?;
    let mut settings = Settings::with(confinement(cli)?);
    settings.time_limit = cli.time_limit.map(Duration::from_secs);
    settings.build_limit = Duration::from_secs(cli.build_time_limit.max(1));
    settings.features = cli.features.clone();
    settings.python = crate::python::Python::from_env(teacher);
    if let (Some(python), true) = (
        &settings.python,
        settings.confinement.is_sandboxed() && crate::sandbox::as_root(),
    ) {
        if let Some(closed) = python.closed_to_others() {
            anyhow::bail!(
                "{} ({}) is reached through {}, which other users cannot enter; as root, every sandbox runs as a user of its own, so its tests could not start it. Make a virtual environment from an interpreter they can reach, e.g. `/usr/bin/python3 -m venv /opt/workbook-py && /opt/workbook-py/bin/pip install onnxruntime numpy`, and pass {}=/opt/workbook-py/bin/python",
                crate::python::PYTHON_ENV,
                python.executable.display(),
                closed.display(),
                crate::python::PYTHON_ENV
            );
        }
    }
    settings.challenge = cli.challenge;
    settings.expected = cli.expected.clone();
    let progress = Progress::live();
    let grading = Grading::prepare(&catalog, &selected, target, settings, &progress)?;
    if let Some(file) = &cli.record_expected {
        grading.expected.save(file)?;
        println!(
            "recorded the reference solutions' observations of {} exercises into {} (keep it private: it is the answer key); grade with --expected {}",
            selected.len(),
            file.display(),
            file.display()
        );
        return Ok(0);
    }
    if cli.wrong {
        return wrong::run(
            &grading,
            &target.join("grade/wrong.json"),
            cli.jobs.max(1),
            &progress,
        );
    }
    let deadline = cli
        .deadline
        .as_deref()
        .map(crate::snapshot::parse_deadline)
        .transpose()
        .map_err(anyhow::Error::msg)?;
    let formats = formats(cli)?;
    if let Some(dir) = &cli.class {
        let reports = cli
            .reports
            .clone()
            .unwrap_or_else(|| target.join("grade/class"));
        let roster = cli
            .roster
            .as_deref()
            .map(crate::roster::Roster::load)
            .transpose()?;
        return class::grade_class(&class::ClassJob {
            grading: &grading,
            class_dir: dir,
            jobs: cli.jobs.max(1),
            reports: &reports,
            roster: roster.as_ref(),
            deadline,
            only: cli.student.as_deref(),
            formats: &formats,
            release_hidden: cli.release_hidden,
        });
    }
    let student = student.context("nothing to grade")?;
    let name = submission::safe_name(
        &student
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_else(|| "student".into()),
    );
    let (submission, snapshot) = if cli.loose {
        (submission::read_loose(&name, student, &catalog), None)
    } else {
        let checkout = grading.work.join("checkouts").join("root");
        let (tree, snapshot) =
            crate::snapshot::take(&grading.settings.confinement, student, deadline, &checkout)?;
        (
            submission::read(&name, &tree, &catalog, Some(&catalog.root)),
            Some(snapshot),
        )
    };
    let mut report = grading.grade(&submission, 0, &progress)?;
    report.submission = Some(crate::report::SubmissionState {
        status: crate::report::SubmissionStatus::Graded,
        found_in: None,
        snapshot,
    });
    let json = cli
        .json
        .clone()
        .unwrap_or_else(|| target.join(format!("grade/{name}.json")));
    let junit = cli
        .junit
        .clone()
        .unwrap_or_else(|| json.with_extension("xml"));
    // A teacher's run: English.
    publish_report(teacher, &report, &json, &junit, Messages::default())?;
    let hidden = class::hidden_tests(&grading);
    for format in &formats {
        let (suffix, value) = match format {
            class::Format::Gradescope => (
                "gradescope",
                crate::exports::gradescope(&report, &hidden, cli.release_hidden),
            ),
            class::Format::Classroom => (
                "classroom",
                crate::exports::classroom(&report, &hidden, cli.release_hidden),
            ),
            class::Format::LmsCsv(_) => bail!("--format lms-csv is for a class (--class)"),
        };
        let path = json.with_extension(format!("{suffix}.json"));
        write_atomically(
            &path,
            (serde_json::to_string_pretty(&value)? + "\n").as_bytes(),
        )?;
        println!("{suffix}: {}", path.display());
    }
    Ok(exit_code(&report, cli.expect))
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
/// which a teacher grading the clone ignores (see [`crate::own_changes`]).
fn warn_about_changes(root: &Path, catalog: &Catalog, messages: Messages) {
    let graded = submission::edit_files(catalog);
    let changed = crate::own_changes::changed_since_upstream(root, &graded);
    if changed.is_empty() {
        return;
    }
    let shown: Vec<&str> = changed.iter().take(8).map(String::as_str).collect();
    let more = changed.len().saturating_sub(shown.len());
    let more = if more > 0 {
        messages.and_more(more)
    } else {
        String::new()
    };
    eprintln!(
        "{}",
        messages.changes_ignored(
            &format!("{}{more}", shown.join(messages.list_separator())),
            graded
                .iter()
                .next()
                .map(String::as_str)
                .unwrap_or("exercises/.../src/...")
        )
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
    messages: Messages,
) -> Result<Report> {
    let report = Report::new(variant, root, outcomes.to_vec());
    publish_report(root, &report, json_path, junit_path, messages)?;
    Ok(report)
}

fn publish_report(
    root: &Path,
    report: &Report,
    json_path: &Path,
    junit_path: &Path,
    messages: Messages,
) -> Result<()> {
    println!(
        "{}",
        report.table(std::io::stdout().is_terminal(), messages)
    );
    println!("{}", report.summary(messages));
    write_atomically(json_path, report.to_json().as_bytes())?;
    let junit = report.to_junit().context("writing the JUnit report")?;
    write_atomically(junit_path, junit.as_bytes())?;
    println!(
        "{}",
        messages.reports(&shown(root, json_path), &shown(root, junit_path))
    );
    println!("\n{}", report.next_steps(messages));
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
