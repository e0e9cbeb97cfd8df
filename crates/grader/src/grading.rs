//! A judged grading run (`cargo grade --class`, `--root`, `--wrong`): stage 0 once, then each
//! submission through the stages in order, each in a module of its own:
//!
//! 0. [`crate::handout`]: stage the handout, build it once, record how its exercises compile;
//!    record the reference solutions' observations under a fresh challenge
//!    ([`crate::expected`]);
//! 1. [`crate::submission`]: read the submission's edit files, refusing links and special files;
//! 2. [`crate::slot`]: lay them over the handout in a private slot;
//! 3. [`crate::compile`]: compile each exercise, confined ([`crate::sandbox`]);
//! 4. [`crate::execute`]: run each graded scenario, confined;
//! 5. [`crate::judge`]: compare what it observed with the reference's;
//! 6. [`crate::report`]: the report, with everything the student's process said escaped.
//!
//! ```no_run
//! # fn main() -> anyhow::Result<()> {
//! use grader::grading::{Grading, Settings};
//! let catalog = grader::Catalog::load(std::path::Path::new("."))?;
//! let selected = catalog.select(&grader::catalog::Selection::All)?;
//! let settings = Settings::sandboxed()?;
//! let progress = grader::progress::Progress::live();
//! let grading = Grading::prepare(&catalog, &selected, std::path::Path::new("target"), settings, &progress)?;
//! let alice = grader::submission::read("alice", std::path::Path::new("class/alice"), &catalog, None);
//! let report = grading.grade(&alice, 0, &progress)?;
//! println!("{}/{}", report.points, report.max_points);
//! # Ok(()) }
//! ```

use crate::catalog::{Catalog, Exercise, Variant};
use crate::cgroup::LimitHit;
use crate::compile::{self, Compiled};
use crate::error::{GradeError, Result};
use crate::execute;
use crate::expected::{self, Expected};
use crate::handout::{self, Handout};
use crate::judge;
use crate::progress::Progress;
use crate::python::Python;
use crate::report::Report;
use crate::runner::{ExerciseOutcome, Status, TestOutcome};
use crate::sandbox::{Confinement, Ended, Finished};

/// The signal a process gets when it writes past `RLIMIT_FSIZE`.
#[cfg(unix)]
const SIGXFSZ: i32 = libc::SIGXFSZ;
#[cfg(not(unix))]
const SIGXFSZ: i32 = 25;
use crate::slot::{private_dir, Slot};
use crate::submission::Submission;
use scenario::protocol::Log;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

/// How a judged run grades.
#[derive(Clone, Debug)]
pub struct Settings {
    /// The sandbox (or, with `--unsafe-no-sandbox`, none).
    pub confinement: Confinement,
    /// Overrides every exercise's time limit per test.
    pub time_limit: Option<Duration>,
    /// Time limit of one compiler run.
    pub build_limit: Duration,
    /// Cargo features (`cuda`).
    pub features: Option<String>,
    /// The interpreter tests may run.
    pub python: Option<Python>,
    /// The challenge (drawn at random when `None`).
    pub challenge: Option<u64>,
    /// Expected values recorded earlier (else the reference solutions are graded now).
    pub expected: Option<PathBuf>,
}

impl Settings {
    /// Settings with the bubblewrap sandbox, which must work here.
    pub fn sandboxed() -> Result<Self> {
        Ok(Self::with(Confinement::bubblewrap()?))
    }

    /// Settings with `confinement`.
    pub fn with(confinement: Confinement) -> Self {
        Self {
            confinement,
            time_limit: None,
            build_limit: compile::BUILD_TIME_LIMIT,
            features: None,
            python: None,
            challenge: None,
            expected: None,
        }
    }
}

/// A challenge no one can predict: std's hasher keys are drawn from the operating system's
/// random source for every process.
pub fn random_challenge() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u128(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or_default(),
    );
    h.finish()
}

/// The judge's private folder for builds into `target`: `<temp>/workbook-grade-<hash>/`,
/// readable by this user only. Stable between runs, so the staged handout is copied once.
pub fn work_dir(target: &Path) -> PathBuf {
    use sha2::{Digest, Sha256};
    let hash = Sha256::digest(target.to_string_lossy().as_bytes());
    let hex: String = hash.iter().take(6).map(|b| format!("{b:02x}")).collect();
    std::env::temp_dir().join(format!("workbook-grade-{hex}"))
}

/// What one scenario of a submission came to, before the verdict.
enum Observed {
    /// The exercise (or the program) did not compile.
    NotBuilt(String),
    /// The program was built, which is the test.
    Built,
    /// A `compile_fail` test's two builds ([`crate::refusal`]): the errors of the program as it
    /// is (the control) and of the program with its mistake (`None`: it built).
    Refusal {
        control: Option<String>,
        mistake: Option<String>,
    },
    /// It ran (and ran into this limit of the sandbox's, if any).
    Ran(Finished, Option<LimitHit>),
}

/// A prepared judged run.
pub struct Grading<'a> {
    /// The teacher's exercises.
    pub catalog: &'a Catalog,
    /// Those graded.
    pub selected: Vec<&'a Exercise>,
    /// Stage 0.
    pub handout: Handout,
    /// How.
    pub settings: Settings,
    /// The references' observations under this run's challenge.
    pub expected: Expected,
    /// The judge's private folder.
    pub work: PathBuf,
    /// Held while the run lasts: two runs building into one target folder take turns rather
    /// than share the staged handout and the slots.
    _lock: std::fs::File,
}

impl<'a> Grading<'a> {
    /// Stage 0: stages and builds the handout, then records (or loads) the expected values.
    pub fn prepare(
        catalog: &'a Catalog,
        selected: &[&'a Exercise],
        target: &Path,
        settings: Settings,
        progress: &Progress,
    ) -> Result<Self> {
        let work = work_dir(target);
        private_dir(&work)?;
        let lock_path = work.join("lock");
        let lock = std::fs::File::create(&lock_path).map_err(|e| GradeError::io(&lock_path, e))?;
        if lock.try_lock().is_err() {
            progress.line("another grading run uses this target folder; waiting for it to end");
            lock.lock().map_err(|e| GradeError::io(&lock_path, e))?;
        }
        let handout = handout::prepare(
            catalog,
            selected,
            target,
            &work,
            settings.features.as_deref(),
            progress,
        )?;
        let digest = expected::digest(&handout.tree, selected)?;
        let mut grading = Grading {
            catalog,
            selected: selected.to_vec(),
            handout,
            settings,
            expected: Expected::new(0, digest.clone()),
            work,
            _lock: lock,
        };
        grading.expected = match &grading.settings.expected {
            Some(file) => {
                let loaded = Expected::load(file)?;
                loaded
                    .check_digest(&digest)
                    .map_err(|e| GradeError::Expected(format!("{}: {e}", file.display())))?;
                for exercise in selected {
                    if !loaded.exercises.contains_key(&exercise.id) {
                        return Err(GradeError::Expected(format!(
                            "{} has no expected values for {}: record them with --record-expected",
                            file.display(),
                            exercise.id
                        )));
                    }
                }
                loaded
            }
            None => {
                let challenge = grading.settings.challenge.unwrap_or_else(random_challenge);
                grading.record(challenge, progress)?
            }
        };
        Ok(grading)
    }

    /// Grades the reference solutions under `challenge` and keeps what they observed. Every
    /// scenario must run to its end: otherwise every student would lose those points, so the
    /// run stops with the reason (onnxruntime missing, a machine too slow for the time limit).
    pub fn record(&self, challenge: u64, progress: &Progress) -> Result<Expected> {
        self.record_in(challenge, "reference", progress)
    }

    /// [`Self::record`] in the judge's slot `slot` (a folder name of its own): records under
    /// different challenges can then run at the same time.
    pub fn record_in(&self, challenge: u64, slot: &str, progress: &Progress) -> Result<Expected> {
        let root = &self.catalog.root;
        if !root.join("solutions").is_dir() {
            return Err(GradeError::Expected(format!(
                "{} has no solutions/ to record the expected values from: grade from the teacher's repository, or pass --expected FILE (recorded there with --record-expected FILE)",
                root.display()
            )));
        }
        progress.line(&format!(
            "recording the reference solutions' observations ({} exercises)",
            self.selected.len()
        ));
        let mut files = BTreeMap::new();
        for exercise in &self.selected {
            for file in &exercise.spec.edit {
                let path = exercise.dir(root, Variant::Solutions).join(file);
                let bytes = std::fs::read(&path).map_err(|e| GradeError::io(&path, e))?;
                files.insert(format!("exercises/{}/{file}", exercise.path), bytes);
            }
        }
        let slot = Slot::fill(
            &self.work.join("slots").join(slot),
            &self.handout.tree,
            &files,
        )?;
        let mut expected = Expected::new(challenge, self.expected.digest.clone());
        for exercise in &self.selected {
            let observed = self.observe(&slot, exercise, challenge, true)?;
            let mut logs = BTreeMap::new();
            for (spec, (path, what)) in exercise.spec.tests.iter().zip(observed) {
                let log = match what {
                    Observed::Built => judge::built_log(),
                    Observed::Refusal { control, mistake } => {
                        let (status, why) =
                            refusal_verdict(&slot, exercise, spec, control, mistake);
                        if status != Status::Passed {
                            return Err(GradeError::Reference(format!(
                                "{} {}: the reference solution fails here, so every student would: {why}",
                                exercise.id, spec.name
                            )));
                        }
                        judge::refused_log()
                    }
                    Observed::NotBuilt(errors) => {
                        return Err(GradeError::Reference(format!(
                            "{} {}: the reference solution does not compile here: {}",
                            exercise.id,
                            spec.name,
                            compile::first_error(&errors)
                        )))
                    }
                    Observed::Ran(run, limit) => {
                        let log = Log::parse(&run.log.bytes);
                        if let Some(tampered) = log.tampered() {
                            return Err(GradeError::Reference(format!(
                                "{} {}: the reference solution's log cannot be judged against ({tampered}): a scenario must record each key once, before its end",
                                exercise.id, spec.name
                            )));
                        }
                        if !log.done {
                            let (_, why) = match limit {
                                Some(hit) => (Status::Crashed, hit.describe()),
                                None => judge::verdict(&path, &finished_log(), &run),
                            };
                            return Err(GradeError::Reference(format!(
                                "{} {}: the reference solution fails here, so every student would: {why}",
                                exercise.id, spec.name
                            )));
                        }
                        log
                    }
                };
                if let Some(why) =
                    judge::source_checks(spec, |file| submitted(&slot, exercise, file))
                {
                    return Err(GradeError::Reference(format!(
                        "{} {}: the reference solution fails the judge's own check of its source, so every student would: {why}",
                        exercise.id, spec.name
                    )));
                }
                logs.insert(spec.name.clone(), log);
            }
            progress.line(&format!("  {} recorded", exercise.id));
            expected.exercises.insert(exercise.id.clone(), logs);
        }
        Ok(expected)
    }

    /// Stages 2 to 6 for `submission`, in slot number `slot` (one per submission graded at the
    /// same time).
    pub fn grade(
        &self,
        submission: &Submission,
        slot: usize,
        progress: &Progress,
    ) -> Result<Report> {
        self.grade_some(submission, &self.selected, slot, progress)
    }

    /// [`Grading::grade`] for some of the run's exercises only.
    pub fn grade_some(
        &self,
        submission: &Submission,
        exercises: &[&Exercise],
        slot: usize,
        progress: &Progress,
    ) -> Result<Report> {
        let slot = Slot::fill(
            &self.work.join("slots").join(slot.to_string()),
            &self.handout.tree,
            &submission.files,
        )?;
        let mut outcomes = Vec::new();
        for exercise in exercises {
            outcomes.push(self.grade_exercise(&slot, exercise, submission.reference, progress)?);
        }
        let mut report = Report::new(Variant::Exercises, Path::new(&submission.name), outcomes);
        report.root = submission.name.clone();
        report.ignored_files = submission.ignored.clone();
        report.refused_files = submission.refused.clone();
        report.judged_by = Some(self.judged_by());
        Ok(report)
    }

    /// Who gave the verdicts, for every report.
    pub fn judged_by(&self) -> String {
        if self.settings.confinement.is_sandboxed() {
            let cgroups = crate::sandbox::cgroups();
            let user = if crate::sandbox::as_root() {
                "a user of its own per sandbox"
            } else {
                "the teacher's user in every sandbox"
            };
            format!("the judge: observations compared with the reference solution's, every build and test in a bubblewrap sandbox ({user}; {})", cgroups.describe())
        } else {
            "the judge WITHOUT A SANDBOX (--unsafe-no-sandbox): students' code ran with the grader's permissions; trust these grades only as far as you trust every student".into()
        }
    }

    fn grade_exercise(
        &self,
        slot: &Slot,
        exercise: &Exercise,
        reference: bool,
        progress: &Progress,
    ) -> Result<ExerciseOutcome> {
        let started = Instant::now();
        progress.header(exercise);
        // The source files as submitted, checked before any of the student's code runs (it
        // cannot change the slot, which it sees read-only, but nothing it did could matter here).
        let source_failures: Vec<Option<String>> = exercise
            .spec
            .tests
            .iter()
            .map(|spec| judge::source_checks(spec, |file| submitted(slot, exercise, file)))
            .collect();
        let observed = self.observe(slot, exercise, self.expected.challenge, reference)?;
        let mut tests = Vec::new();
        let mut compile_error = None;
        for ((spec, (path, what)), source_failure) in exercise
            .spec
            .tests
            .iter()
            .zip(observed)
            .zip(source_failures)
        {
            let (status, message, ms) = match what {
                Observed::NotBuilt(errors) => {
                    let first = compile::first_error(&errors);
                    let outcome = if spec.program.is_some() {
                        (
                            Status::Failed,
                            format!(
                                "the program {} does not compile with your code: {first}",
                                spec.program.as_deref().unwrap_or_default()
                            ),
                            0,
                        )
                    } else {
                        (
                            Status::CompileError,
                            format!("does not compile: {first}"),
                            0,
                        )
                    };
                    if spec.program.is_none() {
                        compile_error = Some(errors);
                    }
                    outcome
                }
                Observed::Built => (Status::Passed, String::new(), 0),
                Observed::Refusal { control, mistake } => {
                    let (status, message) = refusal_verdict(slot, exercise, spec, control, mistake);
                    (status, message, 0)
                }
                Observed::Ran(run, limit) => {
                    let reference =
                        self.expected.log(&exercise.id, &spec.name).ok_or_else(|| {
                            GradeError::Expected(format!(
                                "no expected values for {} {}",
                                exercise.id, spec.name
                            ))
                        })?;
                    let (status, message) = match (judge::verdict(&path, reference, &run), limit)
                    {
                        // Killed at (or stopped by) a limit of the sandbox's: said as such, never
                        // as a wrong answer.
                        ((Status::Passed, said), _) => (Status::Passed, said),
                        (_, Some(hit)) => (Status::Crashed, hit.describe()),
                        (_, None) if run.ended == Ended::Signalled(SIGXFSZ) => (
                            Status::Crashed,
                            format!(
                                "wrote a file larger than {} (the sandbox's file size limit) and was killed",
                                crate::cgroup::human_bytes(
                                    crate::sandbox::Limits::for_tests(Duration::ZERO).file_size
                                )
                            ),
                        ),
                        // A hidden test's feedback carries nothing the student's code printed
                        // during it (a panic message could quote the test's own values).
                        ((status, _), None) if spec.hidden => (status, hidden_feedback(status)),
                        (verdict, None) => verdict,
                    };
                    (status, message, run.wall.as_millis() as u64)
                }
            };
            // A source check the judge made itself decides whatever the run recorded.
            let (status, message) = match source_failure {
                Some(why) if status != Status::CompileError => (Status::Failed, why),
                _ => (status, message),
            };
            progress.test_done(&spec.name, status, spec.points, ms);
            tests.push(TestOutcome::of(spec, status, message, ms));
        }
        if let Some(first) = &compile_error {
            progress.compile_failed(exercise, &compile::first_error(first));
        }
        let points = tests.iter().map(|t| t.points).sum();
        Ok(ExerciseOutcome {
            id: exercise.id.clone(),
            path: exercise.path.clone(),
            title: exercise.spec.title.clone(),
            title_zh: exercise.spec.title_zh.clone(),
            package: exercise.package(&self.handout.tree, Variant::Exercises)?,
            variant: Variant::Exercises,
            points,
            max_points: exercise.max_points(),
            points_if_intact: points,
            modified_files: Vec::new(),
            compile_error,
            tests,
            duration_ms: started.elapsed().as_millis() as u64,
        })
    }

    /// Stage 3, once per submission and unit; a reference solution's builds are kept in the
    /// judge's folder and reused while nothing they read changed (the handout, the reference's
    /// files, the compiler run, the toolchain).
    fn compile(
        &self,
        slot: &Slot,
        unit: &crate::cargo::Invocation,
        drop_extern: Option<&str>,
        reference: bool,
    ) -> Result<Compiled> {
        let confinement = &self.settings.confinement;
        let build = self.settings.build_limit;
        if !reference {
            return compile::compile(confinement, &self.handout, slot, unit, drop_extern, build);
        }
        use sha2::{Digest, Sha256};
        let mut hash = Sha256::new();
        for part in [
            self.handout.key.as_str(),
            slot.digest.as_str(),
            &serde_json::to_string(unit).unwrap_or_default(),
            drop_extern.unwrap_or_default(),
            &self.handout.sysroot.to_string_lossy(),
            &format!("{confinement:?}"),
        ] {
            hash.update(part.as_bytes());
            hash.update([0]);
        }
        let key: String = format!("{:x}", hash.finalize()).chars().take(32).collect();
        let dir = self.work.join("compiled").join(key);
        let binary = dir.join("binary");
        if binary.is_file() {
            return Ok(Compiled::Built(binary));
        }
        let built = compile::compile(confinement, &self.handout, slot, unit, drop_extern, build)?;
        if let Compiled::Built(fresh) = &built {
            private_dir(&dir)?;
            let partial = dir.join("binary.partial");
            std::fs::copy(fresh, &partial).map_err(|e| GradeError::io(&partial, e))?;
            std::fs::rename(&partial, &binary).map_err(|e| GradeError::io(&binary, e))?;
        }
        Ok(built)
    }

    /// The harness of `exercise`'s hidden tests on `slot`: the exercise's library compiled
    /// alone (an rlib), then `tests/hidden.rs` (kept in the judge's folder, out of every tree a
    /// student's compilation sees) compiled as a crate of the judge's against it.
    fn compile_hidden(
        &self,
        slot: &Slot,
        exercise: &Exercise,
        units: &crate::handout::Units,
    ) -> Result<Compiled> {
        let confinement = &self.settings.confinement;
        let build = self.settings.build_limit;
        let lib_crate = units
            .test
            .arg("--crate-name")
            .unwrap_or_default()
            .to_string();
        let extra_name = compile::codegen_value(&units.test.args, "extra-filename")
            .unwrap_or_default()
            .to_string();
        let rlib = format!("lib{lib_crate}{extra_name}.rlib");
        let mut library = units.test.clone();
        library.args.retain(|a| a != "--test");
        library.args.extend(["--crate-type".into(), "lib".into()]);
        let built = compile::compile_with(
            confinement,
            &self.handout,
            slot,
            &library,
            None,
            build,
            &compile::Extra {
                mounts: Vec::new(),
                output: Some(rlib.clone()),
            },
        )?;
        if let Compiled::Failed(_) = built {
            return Ok(built);
        }
        let dir = self.handout.hidden.join(&exercise.path);
        let root = dir.join(crate::handout::HIDDEN_ROOT);
        let mut tests = units.test.clone();
        let lib = format!("exercises/{}/src/lib.rs", exercise.path);
        for i in 0..tests.args.len() {
            if tests.args[i] == lib {
                tests.args[i] = root.to_string_lossy().into_owned();
            } else if i > 0 && tests.args[i - 1] == "--crate-name" {
                tests.args[i] = HIDDEN_CRATE.into();
            }
        }
        let out = slot.out.to_string_lossy().into_owned();
        tests.args.extend([
            "--extern".into(),
            format!("{lib_crate}={out}/{rlib}"),
            "-L".into(),
            format!("dependency={out}"),
        ]);
        let extra = compile::Extra {
            mounts: vec![(dir, HIDDEN_INSIDE.into())],
            output: Some(format!("{HIDDEN_CRATE}{extra_name}")),
        };
        // Never cached, not even a reference's: the library it links was just built here.
        compile::compile_with(
            confinement,
            &self.handout,
            slot,
            &tests,
            None,
            build,
            &extra,
        )
    }

    /// Stages 3 and 4 for one exercise on a filled slot: each test's path in the harness and what
    /// it came to, in order.
    fn observe(
        &self,
        slot: &Slot,
        exercise: &Exercise,
        challenge: u64,
        reference: bool,
    ) -> Result<Vec<(String, Observed)>> {
        let units = self.handout.units.get(&exercise.id).ok_or_else(|| {
            GradeError::Handout(format!("{} was not built with the handout", exercise.id))
        })?;
        let confinement = &self.settings.confinement;
        let package = units
            .test
            .var("CARGO_PKG_NAME")
            .unwrap_or_default()
            .to_string();
        let lib_crate = units.test.arg("--crate-name").map(str::to_string);
        // Hidden tests (`tests/hidden.rs`) are compiled into the harness through a crate root of
        // the judge's, which holds the exercise's library as a module: `exercise::grade::*` and
        // `hidden::*`. Nothing of the student's or the handout's files changes.
        let hidden = exercise.spec.tests.iter().any(|t| t.hidden);
        // A submission may not export macros (`#[macro_export]`): they would be in scope where
        // the judge's hidden tests are compiled, and could stand in for what those tests call.
        if hidden && !reference {
            if let Some(file) = exports_macros(&slot.tree, exercise) {
                let why = format!(
                    "error: refused: {file} exports a macro (#[macro_export]); an exercise with hidden tests does not accept exported macros, keep your macros private"
                );
                return Ok(exercise
                    .spec
                    .tests
                    .iter()
                    .map(|spec| (spec.name.clone(), Observed::NotBuilt(why.clone())))
                    .collect());
            }
        }
        let path_of = |spec: &crate::catalog::TestSpec| {
            format!(
                "{}::{}",
                if spec.hidden { "hidden" } else { "grade" },
                spec.name
            )
        };
        // Hidden tests never share a compilation with the student's code: the library alone is
        // compiled first (the student's code, no test of the teacher's), then the hidden tests
        // against it, as another crate, from a folder of the judge's that the student's
        // compilation never sees.
        let hidden_harness = if hidden {
            Some(self.compile_hidden(slot, exercise, units)?)
        } else {
            None
        };
        let harness = self.compile(slot, &units.test, None, reference)?;
        let run_settings = execute::Settings {
            challenge,
            wall: self
                .settings
                .time_limit
                .unwrap_or(Duration::from_secs(exercise.time_limit_secs())),
            python: self.settings.python.clone(),
            // Grading on the GPU (`--features cuda`): its device files pass into the sandbox.
            devices: if self
                .settings
                .features
                .as_deref()
                .is_some_and(|f| f.contains("cuda"))
            {
                crate::sandbox::gpu_devices()
            } else {
                Vec::new()
            },
        };
        let mut programs: BTreeMap<String, Compiled> = BTreeMap::new();
        let mut observed = Vec::new();
        for spec in &exercise.spec.tests {
            let what = match &spec.program {
                None => match if spec.hidden {
                    hidden_harness.as_ref().unwrap_or(&harness)
                } else {
                    &harness
                } {
                    Compiled::Failed(errors) => Observed::NotBuilt(errors.clone()),
                    Compiled::Built(binary) => ran(execute::run(
                        confinement,
                        slot,
                        exercise,
                        &package,
                        binary,
                        &execute::harness_args(&path_of(spec)),
                        &run_settings,
                    )?),
                },
                Some(name) => {
                    let unit = units.programs.get(name).ok_or_else(|| {
                        GradeError::Handout(format!("{}: no program {name}", exercise.id))
                    })?;
                    if !programs.contains_key(name) {
                        let built = self.compile(slot, unit, lib_crate.as_deref(), reference)?;
                        programs.insert(name.clone(), built);
                    }
                    let failed = |built: &Compiled| match built {
                        Compiled::Built(_) => None,
                        Compiled::Failed(errors) => Some(errors.clone()),
                    };
                    if spec.compile_fail.is_some() {
                        // The control is the program as recorded; the mistake, the same compiler
                        // run with its switch on (and only when the control built: a broken
                        // crate's refusal says nothing).
                        let control = failed(&programs[name]);
                        let mistake = match control {
                            Some(_) => None,
                            None => {
                                let mut switched = unit.clone();
                                switched.args.extend(crate::refusal::mistake_args());
                                failed(&self.compile(
                                    slot,
                                    &switched,
                                    lib_crate.as_deref(),
                                    reference,
                                )?)
                            }
                        };
                        observed.push((path_of(spec), Observed::Refusal { control, mistake }));
                        continue;
                    }
                    match (&programs[name], spec.build_only) {
                        (Compiled::Failed(errors), _) => Observed::NotBuilt(errors.clone()),
                        (Compiled::Built(_), true) => Observed::Built,
                        (Compiled::Built(binary), false) => ran(execute::run(
                            confinement,
                            slot,
                            exercise,
                            &package,
                            binary,
                            &[],
                            &run_settings,
                        )?),
                    }
                }
            };
            observed.push((path_of(spec), what));
        }
        Ok(observed)
    }
}

/// The first of `exercise`'s edit files in `tree` that exports a macro.
fn exports_macros(tree: &Path, exercise: &Exercise) -> Option<String> {
    exercise.spec.edit.iter().find_map(|rel| {
        let path = tree.join("exercises").join(&exercise.path).join(rel);
        let text = std::fs::read(&path).ok()?;
        String::from_utf8_lossy(&text)
            .contains("macro_export")
            .then(|| rel.clone())
    })
}

/// The verdict on a `compile_fail` test from its two builds, with the judge's own reading of the
/// submitted files (none may name the mistakes' switch). English, as every judged message.
fn refusal_verdict(
    slot: &Slot,
    exercise: &Exercise,
    spec: &crate::catalog::TestSpec,
    control: Option<String>,
    mistake: Option<String>,
) -> (Status, String) {
    let sources: Vec<(&str, String)> = exercise
        .spec
        .edit
        .iter()
        .map(|file| {
            (
                file.as_str(),
                submitted(slot, exercise, file).unwrap_or_default(),
            )
        })
        .collect();
    let switched =
        crate::refusal::names_the_switch(sources.iter().map(|(f, text)| (*f, text.as_str())));
    crate::refusal::verdict(
        crate::messages::Messages::default(),
        spec.program.as_deref().unwrap_or_default(),
        spec.compile_fail.as_deref().unwrap_or_default(),
        switched,
        control.as_deref(),
        mistake.as_deref(),
    )
}

/// What a student is told of a hidden test that did not pass: its status, never its output.
fn hidden_feedback(status: Status) -> String {
    let what = match status {
        Status::Failed => "its observations differ from the reference solution's",
        Status::TimedOut => "it ran past its time limit",
        Status::Crashed => "the test process died before it finished",
        Status::Exited => "the test process ended before it finished",
        Status::Missing => "it is not in the test binary",
        _ => "it did not pass",
    };
    format!("a hidden test: {what} (what your code printed during a hidden test is not shown)")
}

fn ran((finished, limit): (Finished, Option<LimitHit>)) -> Observed {
    Observed::Ran(finished, limit)
}

/// The crate name of a hidden tests' harness.
const HIDDEN_CRATE: &str = "judge_hidden";
/// Where its folder is mounted in the sandbox.
const HIDDEN_INSIDE: &str = "/judge/hidden";

/// `file` (relative to the exercise crate) as the slot holds it: the submitted file, or the
/// handout's where the submission has none.
fn submitted(slot: &Slot, exercise: &Exercise, file: &str) -> Option<String> {
    let path = slot.tree.join("exercises").join(&exercise.path).join(file);
    std::fs::read_to_string(path).ok()
}

/// A reference log with nothing but the end: what a reference's own run is judged against to
/// explain why it did not finish.
fn finished_log() -> Log {
    Log {
        done: true,
        ..Log::default()
    }
}
