//! Known-wrong solutions, graded: the mistakes students make, kept beside each reference
//! solution, each of which the graded tests must catch.
//!
//! A variant is a folder `solutions/<chapter>/<exercise>/wrong/<slug>/` with a `wrong.toml`
//!
//! ```toml
//! why = "copies the graph even when it is already on the device"
//! must_fail = ["copies_the_graph_only_when_it_is_elsewhere"]
//! ```
//!
//! and, for each `edit` file it changes (a path of the exercise crate, `src/fix_the_mismatch.rs`),
//! a unified diff against the reference solution's file (`src/fix_the_mismatch.rs.patch`: the
//! mistake is a few lines of a file that is otherwise the solution, and stays readable as such),
//! or the whole wrong file. `cargo grade --wrong-to-patches` turns whole files into patches. `cargo grade --wrong` grades the
//! exercise as a teacher grades a student who submitted it, the reference solution with exactly
//! those files replaced, through the judged stages ([`crate::grading`]: the sandbox, the
//! observations compared with the reference's), and checks that every `must_fail` test fails. A
//! variant that does not compile fails nothing: it is an error, as are an empty `must_fail`, a
//! file not in `edit` and an unknown test name. The reference solution itself is graded the same
//! way first, as a student, and must score full marks.
//!
//! ```
//! let spec: grader::wrong::WrongSpec =
//!     toml::from_str("why = \"no-op\"\nmust_fail = [\"adds\"]\n").unwrap();
//! assert_eq!(spec.must_fail, ["adds"]);
//! ```

use crate::catalog::{Exercise, Variant};
use crate::error::{GradeError, Result};
use crate::grading::Grading;
use crate::progress::Progress;
use crate::report::write_atomically;
use crate::runner::Status;
use crate::submission::Submission;
use serde::{Deserialize, Serialize};
use std::path::{Path, PathBuf};

/// `wrong.toml`.
#[derive(Clone, Debug, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct WrongSpec {
    /// The mistake, in one line.
    pub why: String,
    /// Graded tests that must fail on it.
    pub must_fail: Vec<String>,
}

/// A known-wrong solution found on disk.
#[derive(Clone, Debug)]
pub struct WrongVariant {
    /// The exercise's id (`01-1`).
    pub exercise: String,
    /// The folder name under `wrong/`.
    pub slug: String,
    /// Its folder.
    pub dir: PathBuf,
    /// Its `wrong.toml`, when it parsed.
    pub spec: Option<WrongSpec>,
    /// The edit files it replaces, relative to the exercise crate, `/`-separated.
    pub files: Vec<String>,
    /// Those of `files` given as a patch against the reference solution (`<file>.patch`).
    pub patched: Vec<String>,
    /// What is wrong with the variant itself (an empty `must_fail`, a file not in `edit`, an
    /// unknown test, a `wrong.toml` that does not parse); empty when it can be graded.
    pub problems: Vec<String>,
}

/// Every variant of `exercises` (those of `solutions/<path>/wrong/*/`), checked for problems.
pub fn discover(root: &Path, exercises: &[&Exercise]) -> Result<Vec<WrongVariant>> {
    discover_in(root, exercises)
}

fn discover_in(root: &Path, exercises: &[&Exercise]) -> Result<Vec<WrongVariant>> {
    let mut found = Vec::new();
    for exercise in exercises {
        let base = exercise.dir(root, Variant::Solutions).join("wrong");
        let Ok(entries) = std::fs::read_dir(&base) else {
            continue;
        };
        let mut dirs: Vec<PathBuf> = entries
            .filter_map(|e| e.ok().map(|e| e.path()))
            .filter(|p| p.is_dir())
            .collect();
        dirs.sort();
        for dir in dirs {
            found.push(check(root, exercise, &dir)?);
        }
    }
    Ok(found)
}

fn check(root: &Path, exercise: &Exercise, dir: &Path) -> Result<WrongVariant> {
    let slug = dir
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let mut problems = Vec::new();
    let toml_path = dir.join("wrong.toml");
    let spec = match std::fs::read_to_string(&toml_path) {
        Err(e) => {
            problems.push(format!("{}: {e}", toml_path.display()));
            None
        }
        Ok(text) => match toml::from_str::<WrongSpec>(&text) {
            Err(e) => {
                problems.push(format!("{}: {e}", toml_path.display()));
                None
            }
            Ok(spec) => Some(spec),
        },
    };
    if let Some(spec) = &spec {
        if spec.must_fail.is_empty() {
            problems.push("must_fail is empty: name the tests this mistake must fail".into());
        }
        for name in &spec.must_fail {
            if !exercise.spec.tests.iter().any(|t| &t.name == name) {
                problems.push(format!(
                    "must_fail names {name}, which is not a graded test of {} (exercise.toml)",
                    exercise.id
                ));
            }
        }
    }
    let mut found = Vec::new();
    collect(dir, dir, &mut found)?;
    found.retain(|f| f != "wrong.toml");
    if found.is_empty() {
        problems.push(
            "no replacement files: add a patch (or the wrong version) of a file the student edits"
                .into(),
        );
    }
    let mut files = Vec::new();
    let mut patched = Vec::new();
    for file in &found {
        let target = file.strip_suffix(".patch").unwrap_or(file).to_string();
        if !exercise.spec.edit.contains(&target) {
            problems.push(format!(
                "{file} is not a file students edit (edit = {:?} in exercise.toml)",
                exercise.spec.edit
            ));
            continue;
        }
        if target != *file {
            patched.push(target.clone());
        }
        files.push(target);
    }
    let mut variant = WrongVariant {
        exercise: exercise.id.clone(),
        slug,
        dir: dir.to_path_buf(),
        spec,
        files,
        patched,
        problems,
    };
    for file in variant.patched.clone() {
        if let Err(why) = variant_file(root, exercise, &variant, &file) {
            variant.problems.push(why);
        }
    }
    Ok(variant)
}

/// The reference solution's `file` of `exercise` (an edit file), as `variant` has it: its patch
/// applied, its whole file, or the reference's own when it does not change it.
pub fn variant_file(
    root: &Path,
    exercise: &Exercise,
    variant: &WrongVariant,
    file: &str,
) -> std::result::Result<Vec<u8>, String> {
    let reference = exercise.dir(root, Variant::Solutions).join(file);
    let read = |p: &Path| std::fs::read(p).map_err(|e| format!("{}: {e}", p.display()));
    if variant.patched.iter().any(|f| f == file) {
        let patch_path = variant.dir.join(format!("{file}.patch"));
        let patch_text = String::from_utf8(read(&patch_path)?)
            .map_err(|_| format!("{}: not UTF-8", patch_path.display()))?;
        let base = String::from_utf8(read(&reference)?)
            .map_err(|_| format!("{}: not UTF-8", reference.display()))?;
        let patch = diffy::Patch::from_str(&patch_text)
            .map_err(|e| format!("{}: not a unified diff ({e})", patch_path.display()))?;
        return diffy::apply(&base, &patch).map(String::into_bytes).map_err(|e| {
            format!(
                "{} no longer applies to the reference solution ({e}): fix the patch, or write the whole wrong file and run cargo grade --wrong-to-patches",
                patch_path.display()
            )
        });
    }
    if variant.files.iter().any(|f| f == file) {
        return read(&variant.dir.join(file));
    }
    read(&reference)
}

/// Turns every whole wrong file of `exercises`' variants into a patch against the reference
/// solution (`<file>.patch`, the whole file removed); returns how many.
pub fn to_patches(root: &Path, exercises: &[&Exercise]) -> Result<usize> {
    let mut made = 0;
    for variant in discover_in(root, exercises)? {
        let Some(exercise) = exercises.iter().find(|e| e.id == variant.exercise) else {
            continue;
        };
        for file in variant
            .files
            .iter()
            .filter(|f| !variant.patched.contains(f))
        {
            let whole = variant.dir.join(file);
            let reference = exercise.dir(root, Variant::Solutions).join(file);
            let (Ok(wrong), Ok(base)) = (
                std::fs::read_to_string(&whole),
                std::fs::read_to_string(&reference),
            ) else {
                continue;
            };
            let patch = diffy::create_patch(&base, &wrong).to_string();
            write_atomically(&variant.dir.join(format!("{file}.patch")), patch.as_bytes())?;
            std::fs::remove_file(&whole).map_err(|e| GradeError::io(&whole, e))?;
            made += 1;
        }
    }
    Ok(made)
}

fn collect(base: &Path, dir: &Path, out: &mut Vec<String>) -> Result<()> {
    for entry in std::fs::read_dir(dir).map_err(|e| GradeError::io(dir, e))? {
        let path = entry.map_err(|e| GradeError::io(dir, e))?.path();
        if path.is_dir() {
            collect(base, &path, out)?;
        } else if let Ok(rel) = path.strip_prefix(base) {
            out.push(rel.to_string_lossy().replace('\\', "/"));
        }
    }
    out.sort();
    Ok(())
}

/// One `must_fail` test's result.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct MustFail {
    /// The test.
    pub name: String,
    /// How it ended on the variant (`failed`, `timed_out`, ... is what is wanted).
    pub status: Option<Status>,
}

/// One variant's result, as in `target/grade/wrong.json`.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct WrongOutcome {
    /// `01-1`.
    pub exercise: String,
    /// The variant's folder name.
    pub variant: String,
    /// The mistake.
    pub why: String,
    /// The tests it must fail, with their results.
    pub must_fail: Vec<MustFail>,
    /// Other graded tests that failed on it too.
    pub other_tests_lost: Vec<String>,
    /// Points the variant scored, of how many.
    pub points: u32,
    /// Points available.
    pub max_points: u32,
    /// It failed every test it names.
    pub caught: bool,
    /// Why it could not be graded properly (a problem with the variant, a compile error).
    pub error: Option<String>,
}

/// Grades the reference solution and every variant of the run's exercises as submissions,
/// prints the table and writes `report`; exit status 0 iff every reference scores full marks and
/// every variant fails every test it names.
pub fn run(
    grading: &Grading,
    report: &Path,
    jobs: usize,
    progress: &Progress,
) -> anyhow::Result<i32> {
    let root = &grading.catalog.root;
    let variants = discover(root, &grading.selected)?;
    // Each row is a submission of its own: `jobs` of them graded at a time, each in a slot and
    // sandbox of its own, as a class's students are; the rows keep this order.
    let rows: Vec<Row<'_>> = grading
        .selected
        .iter()
        .map(|&exercise| Row::Reference(exercise))
        .chain(variants.iter().map(|variant| {
            let exercise = grading
                .selected
                .iter()
                .find(|e| e.id == variant.exercise)
                .expect("discovered from the selection");
            Row::Variant(exercise, variant)
        }))
        .collect();
    let outcomes = crate::slots_at_once::each(&rows, jobs, |row, slot| match *row {
        Row::Reference(exercise) => grade_reference(grading, exercise, slot, progress),
        Row::Variant(exercise, variant) => {
            grade_variant(grading, exercise, variant, slot, progress)
        }
    })
    .into_iter()
    .collect::<anyhow::Result<Vec<_>>>()?;
    let (forgeable, constant_keys, under_drawn_names) =
        challenge_independent(grading, jobs, progress)?;
    let json = serde_json::to_string_pretty(&WrongReport {
        rows: outcomes.clone(),
        challenge_independent: forgeable.clone(),
        constant_keys: constant_keys.clone(),
        constant_values_under_drawn_names: under_drawn_names.clone(),
    })? + "\n";
    write_atomically(report, json.as_bytes())?;
    println!("{}", table(&outcomes));
    let caught = outcomes.iter().filter(|o| o.caught).count();
    println!(
        "{caught}/{} rows as they must be (references full marks, known-wrong solutions failing every test they name); {}; report: {}",
        outcomes.len(),
        grading.judged_by(),
        report.display()
    );
    if !forgeable.is_empty() {
        println!(
            "{} graded tests observe only values that are the same under two challenges, so a student's code could write their whole log without doing the work (make a value depend on the challenge, or check the source in exercise.toml's [[test.source]]): {}",
            forgeable.len(),
            forgeable.join(", ")
        );
    }
    if !constant_keys.is_empty() {
        println!(
            "{} graded values are the same under two challenges, so they could be written down in advance and forged into the judge's log by a student's code that is wrong exactly there (make each depend on the challenge through the student's code's output, merge it into a value that does, or check the source in exercise.toml's [[test.source]]): {}",
            constant_keys.len(),
            constant_keys.join(", ")
        );
    }
    if !under_drawn_names.is_empty() {
        println!(
            "note: {} graded values have a drawn value in their key's name but are themselves the same under two challenges (verdicts about a drawn input: refused, nothing written, which parts a finding is about): they rest on the honesty of the test's process, as the teachers' page says; merge a new one into a value the student's code computes from drawn input where the exercise has one: {}",
            under_drawn_names.len(),
            under_drawn_names.join(", ")
        );
    }
    Ok(i32::from(
        caught != outcomes.len() || !forgeable.is_empty() || !constant_keys.is_empty(),
    ))
}

/// One row of `--wrong`: a reference solution, or a known-wrong solution of that exercise.
enum Row<'a> {
    Reference(&'a Exercise),
    Variant(&'a Exercise, &'a WrongVariant),
}

/// The reference solution of `exercise`, graded as a student: it must score full marks.
fn grade_reference(
    grading: &Grading,
    exercise: &Exercise,
    slot: usize,
    progress: &Progress,
) -> anyhow::Result<WrongOutcome> {
    let files = solution_files(&grading.catalog.root, exercise, None)?;
    let graded = grade_files(grading, exercise, "reference", files, true, slot, progress)?;
    let outcome = &graded.exercises[0];
    let lost: Vec<String> = outcome
        .tests
        .iter()
        .filter(|t| t.status != Status::Passed)
        .map(|t| format!("{}: {}", t.name, crate::escape::text(&t.message, 300)))
        .collect();
    Ok(WrongOutcome {
        exercise: exercise.id.clone(),
        variant: "(reference)".into(),
        why: "the reference solution, graded as a student: full marks".into(),
        must_fail: Vec::new(),
        other_tests_lost: lost.clone(),
        points: outcome.points,
        max_points: outcome.max_points,
        caught: lost.is_empty(),
        error: (!lost.is_empty()).then(|| "the reference solution loses points".into()),
    })
}

/// `target/grade/wrong.json`.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct WrongReport {
    /// The references, then the known-wrong solutions.
    pub rows: Vec<WrongOutcome>,
    /// Graded values (`01-1 name: key`) whose reference observations are the same under the two
    /// challenges of [`CHECK_CHALLENGES`]: they could be written down in advance, and a student's
    /// code in the test's process can write them into the judge's log. Tests judged by the
    /// compiler (`build_only`, `compile_fail`: the judge reads the compiler's verdict, outside
    /// any process of the student's) are not listed, nor checks of the source (`[[test.source]]`),
    /// which the judge makes itself. A test listed here is a failure of `--wrong`: its whole log
    /// could be written in advance.
    pub challenge_independent: Vec<String>,
    /// Single graded values (`01-1 name: key`) that are the same under both challenges, in tests
    /// that also observe values that differ: a failure of `--wrong` too (a student's code that
    /// is wrong exactly there writes the value in advance and silences the test's own record).
    #[serde(default)]
    pub constant_keys: Vec<String>,
    /// Graded values whose key names hold a drawn value (so the keys differ between the two
    /// challenges) but whose values are the same at the same position: reported, not a failure.
    /// They are verdicts about a drawn input (refused, nothing written, which parts a finding is
    /// about, every seed taken once): their right value is the same whatever was drawn, so only
    /// a judge outside the process could check them against code that tampers with its own
    /// process (teachers' page 2, "What a record proves", says so). Eleven today, in 04-3,
    /// 06-3, 06-4 and 06-5.
    #[serde(default)]
    pub constant_values_under_drawn_names: Vec<String>,
}

/// The two challenges under which every graded test's observations must differ. Fixed, so that
/// the check gives the same answer on every run: a test whose values depend on the challenge
/// only a little (one of four choices) would otherwise pass or fail it by chance.
pub const CHECK_CHALLENGES: (u64, u64) = (1, 2);

/// Records the references under [`CHECK_CHALLENGES`]: the graded tests all of whose values are
/// the same under both (a failure: the whole log could be written in advance), and the single
/// graded values (test and key) that are the same under both in the other tests (also a failure;
/// see [`scenario::protocol`] for what a student's code can write into a log); and, reported
/// only, the values whose key names hold a drawn value but which are themselves the same under
/// both ([`scenario::protocol::Log::same_values_under_drawn_names`]).
fn challenge_independent(
    grading: &Grading,
    jobs: usize,
    progress: &Progress,
) -> anyhow::Result<(Vec<String>, Vec<String>, Vec<String>)> {
    let challenges = [CHECK_CHALLENGES.0, CHECK_CHALLENGES.1];
    let mut recorded = crate::slots_at_once::each(&challenges, jobs, |&challenge, slot| {
        grading.record_in(challenge, &format!("reference-{slot}"), progress)
    })
    .into_iter();
    let (Some(one), Some(other)) = (recorded.next(), recorded.next()) else {
        unreachable!("one record per challenge")
    };
    let (one, other) = (one?, other?);
    let mut tests = Vec::new();
    let mut same = Vec::new();
    let mut under_drawn_names = Vec::new();
    for exercise in &grading.selected {
        for spec in exercise
            .spec
            .tests
            .iter()
            .filter(|t| !t.judged_by_the_compiler())
        {
            let (Some(a), Some(b)) = (
                one.log(&exercise.id, &spec.name),
                other.log(&exercise.id, &spec.name),
            ) else {
                continue;
            };
            for key in a.same_values_under_drawn_names(b) {
                under_drawn_names.push(format!("{} {}: {key}", exercise.id, spec.name));
            }
            let keys = a.same_keys(b);
            if !keys.is_empty() && keys.len() == a.observations.len() {
                tests.push(format!("{} {}", exercise.id, spec.name));
            } else {
                for key in keys {
                    same.push(format!("{} {}: {key}", exercise.id, spec.name));
                }
            }
        }
    }
    Ok((tests, same, under_drawn_names))
}

/// The reference solution's edit files of `exercise`, with `variant`'s replacements, by path
/// from the repository root.
fn solution_files(
    root: &Path,
    exercise: &Exercise,
    variant: Option<&WrongVariant>,
) -> Result<std::collections::BTreeMap<String, Vec<u8>>> {
    let mut files = std::collections::BTreeMap::new();
    for file in &exercise.spec.edit {
        let bytes = match variant {
            Some(v) => variant_file(root, exercise, v, file).map_err(GradeError::Handout)?,
            None => {
                let source = exercise.dir(root, Variant::Solutions).join(file);
                std::fs::read(&source).map_err(|e| GradeError::io(&source, e))?
            }
        };
        files.insert(format!("exercises/{}/{file}", exercise.path), bytes);
    }
    Ok(files)
}

/// Grades `files` as a submission for `exercise` alone.
fn grade_files(
    grading: &Grading,
    exercise: &Exercise,
    name: &str,
    files: std::collections::BTreeMap<String, Vec<u8>>,
    reference: bool,
    slot: usize,
    progress: &Progress,
) -> anyhow::Result<crate::Report> {
    let submission = Submission {
        name: format!("{} {name}", exercise.id),
        files,
        reference,
        ..Default::default()
    };
    let progress = match progress {
        Progress::Live { tty, lang, .. } => Progress::Live {
            tty: *tty,
            lang: *lang,
            prefix: format!("[{} {name}] ", exercise.id),
        },
        Progress::Quiet => Progress::Quiet,
    };
    Ok(grading.grade_some(&submission, &[exercise], slot, &progress)?)
}

fn grade_variant(
    grading: &Grading,
    exercise: &Exercise,
    variant: &WrongVariant,
    slot: usize,
    progress: &Progress,
) -> anyhow::Result<WrongOutcome> {
    let why = variant
        .spec
        .as_ref()
        .map(|s| s.why.clone())
        .unwrap_or_default();
    let names = variant
        .spec
        .as_ref()
        .map(|s| s.must_fail.clone())
        .unwrap_or_default();
    if !variant.problems.is_empty() {
        return Ok(WrongOutcome {
            exercise: variant.exercise.clone(),
            variant: variant.slug.clone(),
            why,
            must_fail: names
                .into_iter()
                .map(|name| MustFail { name, status: None })
                .collect(),
            other_tests_lost: Vec::new(),
            points: 0,
            max_points: exercise.max_points(),
            caught: false,
            error: Some(variant.problems.join("; ")),
        });
    }
    let files = solution_files(&grading.catalog.root, exercise, Some(variant))?;
    let report = grade_files(
        grading,
        exercise,
        &variant.slug,
        files,
        false,
        slot,
        progress,
    )?;
    let outcome = &report.exercises[0];
    let status_of = |name: &str| {
        outcome
            .tests
            .iter()
            .find(|t| t.name == name)
            .map(|t| t.status)
    };
    let must_fail: Vec<MustFail> = names
        .iter()
        .map(|name| MustFail {
            name: name.clone(),
            status: status_of(name),
        })
        .collect();
    let other_tests_lost = outcome
        .tests
        .iter()
        .filter(|t| !names.contains(&t.name) && t.status != Status::Passed)
        .map(|t| t.name.clone())
        .collect();
    let error = outcome.compile_error.as_ref().map(|e| {
        format!(
            "does not compile, so it fails nothing: {}",
            e.lines().find(|l| !l.trim().is_empty()).unwrap_or_default()
        )
    });
    let caught = error.is_none()
        && must_fail
            .iter()
            .all(|m| m.status.is_some_and(|s| s != Status::Passed));
    Ok(WrongOutcome {
        exercise: variant.exercise.clone(),
        variant: variant.slug.clone(),
        why,
        must_fail,
        other_tests_lost,
        points: outcome.points,
        max_points: outcome.max_points,
        caught,
        error,
    })
}

fn table(outcomes: &[WrongOutcome]) -> String {
    use comfy_table::{presets, ContentArrangement, Table};
    let mut table = Table::new();
    table
        .load_preset(presets::UTF8_BORDERS_ONLY)
        .set_content_arrangement(ContentArrangement::Dynamic)
        .set_header([
            "exercise",
            "variant",
            "why",
            "must fail",
            "other tests lost",
            "verdict",
        ]);
    // Not a terminal (CI logs, files): wide enough that no column is squeezed to a letter.
    if table.width().is_none() {
        table.set_width(200);
    }
    // The identifying columns and the must-fail test names are never split (each width includes
    // one space of padding each side); "why" and the other tests lost wrap into what is left.
    let widest = |lengths: &mut dyn Iterator<Item = usize>, cap: usize| {
        lengths.max().unwrap_or(8).clamp(8, cap) as u16 + 2
    };
    let bounds = [
        (
            0,
            widest(&mut outcomes.iter().map(|o| o.exercise.len()), 12),
        ),
        (1, widest(&mut outcomes.iter().map(|o| o.variant.len()), 40)),
        (
            3,
            widest(
                &mut outcomes
                    .iter()
                    .flat_map(|o| o.must_fail.iter().map(|m| m.name.len() + 10)),
                80,
            ),
        ),
        (5, 24),
    ];
    for (column, width) in bounds {
        if let Some(c) = table.column_mut(column) {
            c.set_constraint(comfy_table::ColumnConstraint::LowerBoundary(
                comfy_table::Width::Fixed(width),
            ));
        }
    }
    for o in outcomes {
        let must: Vec<String> = o
            .must_fail
            .iter()
            .map(|m| format!("{}: {}", m.name, m.status.map_or("-", |s| s.label())))
            .collect();
        let verdict = match (&o.error, o.caught) {
            (Some(e), _) => format!("ERROR: {e}"),
            (None, true) if o.must_fail.is_empty() => {
                format!("full marks ({}/{} points)", o.points, o.max_points)
            }
            (None, true) => format!("caught ({}/{} points)", o.points, o.max_points),
            (None, false) => format!(
                "NOT CAUGHT: scores {}/{}; a test it names passes",
                o.points, o.max_points
            ),
        };
        table.add_row(vec![
            o.exercise.clone(),
            o.variant.clone(),
            o.why.clone(),
            must.join("\n"),
            o.other_tests_lost.join("\n"),
            verdict,
        ]);
    }
    table.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    /// As CI prints it (not a terminal): every identifying cell and must-fail test name whole,
    /// on one line. A first version gave the long test names all the width and squeezed the
    /// exercise and variant columns to one letter per line.
    #[test]
    fn the_table_keeps_names_whole_when_test_names_are_long() {
        let outcome = |exercise: &str, variant: &str, test: &str| {
            WrongOutcome {
            exercise: exercise.into(),
            variant: variant.into(),
            why: "reads the whole graph back to the host after every prediction, then copies it again"
                .into(),
            must_fail: vec![MustFail {
                name: test.into(),
                status: Some(Status::Failed),
            }],
            other_tests_lost: vec![
                "a_second_rather_long_test_name_that_also_failed".into(),
                "moves_the_graph_to_wherever_the_model_is".into(),
            ],
            points: 3,
            max_points: 8,
            caught: true,
            error: None,
        }
        };
        let outcomes = [
            outcome(
                "01-1",
                "fetches-the-whole-logits-back",
                "predictions_match_the_cpu_and_come_back_once",
            ),
            outcome(
                "03-2",
                "load-then-store",
                "shares_one_layer_across_threads_without_losing_a_request",
            ),
        ];
        let rendered = table(&outcomes);
        for whole in [
            "01-1",
            "fetches-the-whole-logits-back",
            "predictions_match_the_cpu_and_come_back_once: FAIL",
            "shares_one_layer_across_threads_without_losing_a_request: FAIL",
            "load-then-store",
            "exercise",
            "variant",
            "caught (3/8 points)",
        ] {
            assert!(rendered.contains(whole), "{whole:?} split:\n{rendered}");
        }
    }
}
