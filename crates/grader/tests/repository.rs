//! The shipped exercises are consistent: checksums are fresh, every exercise mirrors its
//! solution file for file (`src/` and `Cargo.toml`; a solution's `wrong/` folder of known-wrong
//! variants is not part of the mirror), exercise.toml scores exactly the tests in tests/grade.rs,
//! and every known-wrong solution is well formed.
//! (Whether each stub fails and each solution passes is checked by `.ci/run` with the grader.)

use grader::catalog::{Catalog, Variant};
use grader::{hints, integrity};
use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

fn repo() -> Catalog {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
    let root = root.canonicalize().unwrap();
    Catalog::load(&root).unwrap()
}

fn files(dir: &Path) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            let sub = path.file_name().unwrap().to_string_lossy().into_owned();
            out.extend(files(&path).into_iter().map(|f| format!("{sub}/{f}")));
        } else {
            out.insert(path.file_name().unwrap().to_string_lossy().into_owned());
        }
    }
    out
}

#[test]
fn shipped_checksums_are_fresh() {
    let catalog = repo();
    let fresh = integrity::compute(&catalog).unwrap();
    let shipped = integrity::parse(integrity::SHIPPED);
    assert!(
        fresh == shipped,
        "crates/grader/checksums.txt is stale: run `cargo grade --update-checksums` after changing graded files.\nfresh:\n{}",
        integrity::render(&fresh)
    );
}

#[test]
fn every_exercise_mirrors_its_solution() {
    let catalog = repo();
    if !catalog.root.join("solutions").is_dir() {
        // A class's copy without the solutions (see the book's teachers' page); CI grades the
        // solutions of this repository, so they cannot go missing unnoticed here.
        eprintln!("SKIPPED: no solutions/ folder, so there is no mirror to check");
        return;
    }
    assert!(!catalog.exercises.is_empty());
    for ex in &catalog.exercises {
        let exercise = ex.dir(&catalog.root, Variant::Exercises);
        let solution = ex.dir(&catalog.root, Variant::Solutions);
        assert!(
            solution.is_dir(),
            "{}: no solution at {}",
            ex.id,
            solution.display()
        );
        assert_eq!(
            files(&exercise.join("src")),
            files(&solution.join("src")),
            "{}: src/ must have the same files in exercises/ and solutions/",
            ex.id
        );
        for file in files(&exercise.join("src")) {
            let rel = format!("src/{file}");
            let stub = std::fs::read_to_string(exercise.join(&rel)).unwrap();
            let solved = std::fs::read_to_string(solution.join(&rel)).unwrap();
            if ex.spec.edit.contains(&rel) {
                assert!(
                    stub.contains("// TODO: "),
                    "{}: {rel} is for the student to edit but has no `// TODO: ` marker",
                    ex.id
                );
                assert!(
                    !solved.contains("TODO"),
                    "{}: the solution's {rel} still has a TODO",
                    ex.id
                );
            } else {
                assert_eq!(
                    stub, solved,
                    "{}: {rel} is not edited by students, so it must be identical in the solution",
                    ex.id
                );
            }
        }
        let manifest = |dir: &Path| -> Vec<String> {
            std::fs::read_to_string(dir.join("Cargo.toml"))
                .unwrap()
                .lines()
                .filter(|l| !l.starts_with("name =") && !l.starts_with("description ="))
                .map(str::to_string)
                .collect()
        };
        assert_eq!(
            manifest(&exercise),
            manifest(&solution),
            "{}: Cargo.toml differs beyond name and description",
            ex.id
        );
        assert!(
            exercise.join("README.md").is_file(),
            "{}: no README.md",
            ex.id
        );
        let hint_text = std::fs::read_to_string(exercise.join("HINTS.md")).unwrap();
        assert_eq!(
            hints::parse(&hint_text).len(),
            2,
            "{}: HINTS.md needs `## Hint 1` (a nudge) and `## Hint 2` (a near-solution)",
            ex.id
        );
    }
}

#[test]
fn exercise_toml_scores_exactly_the_graded_tests() {
    let catalog = repo();
    for ex in &catalog.exercises {
        let grade_rs =
            std::fs::read_to_string(ex.spec_dir(&catalog.root).join("tests/grade.rs")).unwrap();
        let mut in_file = BTreeSet::new();
        let mut lines = grade_rs.lines().map(str::trim);
        while let Some(line) = lines.next() {
            if line == "#[test]" {
                let f = lines.find(|l| l.contains("fn ")).unwrap();
                let name = f.split("fn ").nth(1).unwrap().split('(').next().unwrap();
                in_file.insert(name.to_string());
            }
        }
        let scored: BTreeSet<String> = ex.spec.tests.iter().map(|t| t.name.clone()).collect();
        assert_eq!(
            in_file, scored,
            "{}: exercise.toml must give points to exactly the #[test]s of tests/grade.rs",
            ex.id
        );
        assert!(
            ex.spec.tests.iter().all(|t| t.points > 0),
            "{}: a test worth 0 points",
            ex.id
        );
    }
}

#[test]
fn known_wrong_solutions_are_well_formed() {
    // `cargo grade --wrong` (CI) grades them; this checks, without building anything, that each
    // names tests that exist and replaces only files students edit.
    let catalog = repo();
    let all: Vec<_> = catalog.exercises.iter().collect();
    for variant in grader::wrong::discover(&catalog.root, &all).unwrap() {
        assert!(
            variant.problems.is_empty(),
            "{} wrong/{}: {}",
            variant.exercise,
            variant.slug,
            variant.problems.join("; ")
        );
    }
}
