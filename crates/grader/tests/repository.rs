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
        // What both crates compile the same way is written once: the solution's lib.rs is a
        // link to the exercise's.
        let lib = solution.join("src/lib.rs");
        let linked = std::fs::symlink_metadata(&lib).is_ok_and(|m| m.file_type().is_symlink());
        assert!(
            linked,
            "{}: solutions/{}/src/lib.rs should be a link to the exercise's (ln -s ../../../../exercises/{}/src/lib.rs), not a copy",
            ex.id, ex.path, ex.path
        );
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
fn every_hint_has_a_chinese_translation() {
    let catalog = repo();
    for ex in &catalog.exercises {
        let exercise = ex.spec_dir(&catalog.root);
        let english = std::fs::read_to_string(exercise.join("HINTS.md")).unwrap();
        translated_hints_match(&exercise, &english, &ex.id);
    }
}

/// Every exercise's `HINTS.zh-CN.md` exists and has the levels of its `HINTS.md` (so
/// `--hint 2` means the same hint in both languages) with the same code blocks: code is not
/// translated, and a change to the English code must be made in the translation too.
fn translated_hints_match(exercise: &std::path::Path, english: &str, id: &str) {
    let lang = grader::lang::Lang::ZhCn;
    let path = exercise.join(lang.hints_file());
    let chinese = std::fs::read_to_string(&path).unwrap_or_else(|e| {
        panic!(
            "{id}: no {} ({e}): translate HINTS.md with book/po/GLOSSARY.md",
            lang.hints_file()
        )
    });
    paragraphs_are_one_line(&chinese, &format!("{id}/{}", lang.hints_file()));
    let (en, zh) = (hints::parse(english), hints::parse(&chinese));
    assert_eq!(
        zh.len(),
        en.len(),
        "{id}: {} has {} hint levels, HINTS.md {}",
        lang.hints_file(),
        zh.len(),
        en.len()
    );
    for (level, (e, z)) in en.iter().zip(&zh).enumerate() {
        assert_eq!(
            code_blocks(z),
            code_blocks(e),
            "{id}: hint {} of {}: its code blocks differ from HINTS.md's",
            level + 1,
            lang.hints_file()
        );
        // A level that is only code has nothing to translate.
        let has_prose = |text: &str| text.lines().count() > code_lines(text);
        assert!(
            !has_prose(e) || z.chars().any(|c| ('\u{4e00}'..='\u{9fff}').contains(&c)),
            "{id}: hint {} of {} has no Chinese text",
            level + 1,
            lang.hints_file()
        );
    }
}

/// A paragraph of Chinese text is one line: a Markdown renderer turns a line break inside a
/// paragraph into a space, which shows between two Chinese characters (GitHub, GitLab, the
/// notebooks). Lists, tables, headings and code keep their own lines.
fn paragraphs_are_one_line(markdown: &str, what: &str) {
    let full_width =
        |c: char| ('\u{3000}'..='\u{303f}').contains(&c) || ('\u{ff00}'..='\u{ffef}').contains(&c);
    let chinese = |c: char| ('\u{4e00}'..='\u{9fff}').contains(&c) || full_width(c);
    let mut fence = false;
    let mut previous: Option<&str> = None;
    for line in markdown.lines() {
        let t = line.trim();
        if t.starts_with("```") {
            fence = !fence;
            previous = None;
            continue;
        }
        let standalone =
            t.is_empty() || t.starts_with('#') || t.starts_with('|') || t.starts_with("<!--");
        let own_line = standalone
            || t.starts_with("- ")
            || t.starts_with("* ")
            || t.split_once(". ")
                .is_some_and(|(n, _)| n.parse::<u32>().is_ok());
        if let (Some(before), false, false) = (previous, fence, own_line) {
            let last = before.chars().last().unwrap_or(' ');
            let first = t.chars().next().unwrap_or(' ');
            let broken = full_width(last) || (chinese(last) && chinese(first));
            assert!(
                !broken,
                "{what}: a paragraph broken across lines, which renders as a space in Chinese text:\n{before}\n{line}"
            );
        }
        // A heading, a table row or a marker ends what came before; a list item may continue.
        previous = (!fence && !standalone).then_some(t);
    }
}

#[test]
fn every_exercise_has_a_chinese_title_and_objectives() {
    let catalog = repo();
    let lang = grader::lang::Lang::ZhCn;
    let has_chinese = |t: &str| t.chars().any(|c| ('\u{4e00}'..='\u{9fff}').contains(&c));
    for ex in &catalog.exercises {
        let spec = &ex.spec;
        let title = spec.title_zh.as_deref().unwrap_or_else(|| {
            panic!(
                "{}: exercise.toml has no title_zh (the title in Chinese)",
                ex.id
            )
        });
        assert!(has_chinese(title), "{}: title_zh is not Chinese", ex.id);
        assert_eq!(spec.title_in(lang), title);
        let objectives = spec
            .objectives_zh
            .as_ref()
            .unwrap_or_else(|| panic!("{}: exercise.toml has no objectives_zh", ex.id));
        assert_eq!(
            objectives.len(),
            spec.objectives.len(),
            "{}: objectives_zh must translate each objective, one for one",
            ex.id
        );
        assert!(
            objectives.iter().all(|o| has_chinese(o)),
            "{}: an objective of objectives_zh is not Chinese",
            ex.id
        );
        assert_eq!(spec.objectives_in(lang), &objectives[..]);
    }
}

/// Every exercise's task statement exists in Chinese (`README.zh-CN.md`), a full translation:
/// the same headings, the same code blocks byte for byte (commands and outputs are not
/// translated), the teacher-only regions in the same places (so that the handout strips the same
/// parts), each paragraph on one line, and each README links to the other.
#[test]
fn every_readme_has_a_chinese_translation() {
    let catalog = repo();
    let lang = grader::lang::Lang::ZhCn;
    for ex in &catalog.exercises {
        let dir = ex.spec_dir(&catalog.root);
        let english = std::fs::read_to_string(dir.join("README.md")).unwrap();
        let path = dir.join(lang.readme_file());
        let chinese = std::fs::read_to_string(&path).unwrap_or_else(|e| {
            panic!(
                "{}: no {} ({e}): translate README.md with book/po/GLOSSARY.md",
                ex.id,
                lang.readme_file()
            )
        });
        let zh = format!("{}/{}", ex.id, lang.readme_file());
        assert_eq!(
            outline(&chinese),
            outline(&english),
            "{zh}: its headings and teacher-only markers (`H` a heading, `T`/`/T` a marker) differ from README.md's"
        );
        assert_eq!(
            code_blocks(&chinese),
            code_blocks(&english),
            "{zh}: its code blocks differ from README.md's (code is copied, not translated)"
        );
        assert!(
            english.contains(&format!("({})", lang.readme_file())),
            "{}: README.md does not link to {}",
            ex.id,
            lang.readme_file()
        );
        assert!(
            chinese.contains("(README.md)"),
            "{zh}: does not link back to README.md"
        );
        paragraphs_are_one_line(&chinese, &zh);
    }
}

/// The shape of a Markdown text outside its code: `H` per heading, `T` and `/T` per
/// teacher-only marker, in order.
fn outline(markdown: &str) -> Vec<&'static str> {
    let mut fence = false;
    let mut shape = Vec::new();
    for line in markdown.lines() {
        let t = line.trim();
        if t.starts_with("```") {
            fence = !fence;
        } else if !fence && t.starts_with('#') {
            shape.push("H");
        } else if !fence && t == grader::handout_export::OPEN {
            shape.push("T");
        } else if !fence && t == grader::handout_export::CLOSE {
            shape.push("/T");
        }
    }
    shape
}

/// How many lines of a Markdown text are fenced code, fences included.
fn code_lines(markdown: &str) -> usize {
    code_blocks(markdown)
        .iter()
        .map(|b| b.lines().count() + 2)
        .sum()
}

/// The fenced code blocks of a Markdown text, in order.
fn code_blocks(markdown: &str) -> Vec<String> {
    let mut blocks = Vec::new();
    let mut current: Option<String> = None;
    for line in markdown.lines() {
        if line.trim_start().starts_with("```") {
            match current.take() {
                Some(block) => blocks.push(block),
                None => current = Some(String::new()),
            }
        } else if let Some(block) = current.as_mut() {
            block.push_str(line);
            block.push('\n');
        }
    }
    blocks
}

/// The `#[test]` functions of a graded test file, with their bodies.
fn graded_tests(source: &str) -> Vec<(String, String)> {
    let mut tests = Vec::new();
    let mut rest = source;
    while let Some(at) = rest.find("#[test]") {
        rest = &rest[at + "#[test]".len()..];
        let Some(f) = rest.find("fn ") else { break };
        let name: String = rest[f + 3..]
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_')
            .collect();
        let body_end = rest.find("#[test]").unwrap_or(rest.len());
        tests.push((name, rest[..body_end].to_string()));
    }
    tests
}

#[test]
fn exercise_toml_scores_exactly_the_graded_tests() {
    let catalog = repo();
    for ex in &catalog.exercises {
        let dir = ex.spec_dir(&catalog.root);
        let grade_rs = std::fs::read_to_string(dir.join("tests/grade.rs")).unwrap();
        let in_file: BTreeSet<String> = graded_tests(&grade_rs).into_iter().map(|t| t.0).collect();
        let scored: BTreeSet<String> = ex
            .spec
            .tests
            .iter()
            .filter(|t| t.program.is_none() && !t.hidden)
            .map(|t| t.name.clone())
            .collect();
        assert_eq!(
            in_file, scored,
            "{}: exercise.toml must give points to exactly the #[test]s of tests/grade.rs (and to the programs it names)",
            ex.id
        );
        let hidden_rs = std::fs::read_to_string(dir.join("tests/hidden.rs")).unwrap_or_default();
        let in_hidden: BTreeSet<String> =
            graded_tests(&hidden_rs).into_iter().map(|t| t.0).collect();
        let hidden: BTreeSet<String> = ex
            .spec
            .tests
            .iter()
            .filter(|t| t.hidden)
            .map(|t| t.name.clone())
            .collect();
        assert_eq!(
            in_hidden, hidden,
            "{}: the hidden tests of exercise.toml must be exactly the #[test]s of tests/hidden.rs",
            ex.id
        );
        assert!(
            ex.spec.tests.iter().all(|t| t.points > 0),
            "{}: a test worth 0 points",
            ex.id
        );
        for test in ex.spec.tests.iter().filter(|t| t.program.is_some()) {
            let program = test.program.as_deref().unwrap();
            let source = dir.join(format!("tests/programs/{program}.rs"));
            assert!(
                source.is_file(),
                "{} {}: its program has no source at {}",
                ex.id,
                test.name,
                source.display()
            );
            for variant in [Variant::Exercises, Variant::Solutions] {
                let manifest =
                    std::fs::read_to_string(ex.dir(&catalog.root, variant).join("Cargo.toml"))
                        .unwrap();
                assert!(
                    manifest.contains(&format!("name = \"{program}\"")),
                    "{} {}: the {} crate has no [[example]] named {program}",
                    ex.id,
                    test.name,
                    variant.folder()
                );
            }
            let text = std::fs::read_to_string(&source).unwrap();
            assert!(
                test.judged_by_the_compiler() || text.contains("scenario::start()"),
                "{} {}: a program that runs is a scenario: it must call scenario::start()",
                ex.id,
                test.name
            );
            if test.compile_fail.is_some() {
                // Its mistake and its fix, each behind the switch (grader::refusal); and a
                // program of its own, since the mistake's build replaces the program's binary.
                let switch = grader::refusal::MISTAKE_CFG;
                assert!(
                    text.contains(&format!("#[cfg({switch})]"))
                        && text.contains(&format!("#[cfg(not({switch}))]")),
                    "{} {}: a compile_fail program holds its mistake under #[cfg({switch})] and the fix under #[cfg(not({switch}))]",
                    ex.id,
                    test.name
                );
                assert!(
                    !test.build_only
                        && ex
                            .spec
                            .tests
                            .iter()
                            .filter(|t| t.program.as_deref() == Some(program))
                            .count()
                            == 1,
                    "{} {}: a compile_fail test's program is its own (no other test builds it, and it is not build_only)",
                    ex.id,
                    test.name
                );
            }
        }
        assert!(
            !ex.spec
                .tests
                .iter()
                .any(|t| t.judged_by_the_compiler() && t.program.is_none()),
            "{}: build_only and compile_fail need a program",
            ex.id
        );
    }
}

/// A teacher's grade is the judge's: it compares what each graded test observed with the
/// reference solution's, so every graded test must be a scenario that observes something.
#[test]
fn every_graded_test_is_a_scenario() {
    let catalog = repo();
    let mut not = Vec::new();
    for ex in &catalog.exercises {
        let grade_rs =
            std::fs::read_to_string(ex.spec_dir(&catalog.root).join("tests/grade.rs")).unwrap();
        for (name, body) in graded_tests(&grade_rs) {
            // It observes itself, or hands the scenario to a helper that does (`check(&s, ...)`).
            if !(body.contains("scenario::start()")
                && (body.contains(".observe") || body.contains("(&s")))
            {
                not.push(format!("{} {name}", ex.id));
            }
        }
    }
    assert!(
        not.is_empty(),
        "these graded tests do not start a scenario (`let s = scenario::start();`) and observe values with it: {}",
        not.join(", ")
    );
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

/// Copies a repository without `target/` and `.git/`, as a student's clone of it.
fn copy_clone(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let name = entry.file_name();
        if name == "target" || name == ".git" {
            continue;
        }
        let (src, dst) = (entry.path(), to.join(&name));
        if src.is_dir() {
            copy_clone(&src, &dst);
        } else {
            std::fs::copy(&src, &dst).unwrap();
        }
    }
}

/// The issue's scenario on this repository: bob makes the library's `forward_graph` move the
/// graph itself instead of solving 01-1; graded from the teacher's tree he gets 0 and the change
/// is listed. Ignored by default: it builds exercise 01-1 (seconds once the library is built,
/// minutes on a fresh clone). Run with `cargo test -p grader --test repository -- --ignored`.
#[test]
#[ignore = "builds exercise 01-1 against the workbook library"]
fn a_student_who_edits_the_library_gets_nothing_for_it() {
    let catalog = repo();
    let root = &catalog.root;
    let class = tempfile::tempdir().unwrap();
    let (alice, bob) = (class.path().join("alice"), class.path().join("bob"));
    copy_clone(root, &alice);
    copy_clone(root, &bob);
    let file = "01-device-management/1-fix-the-mismatch/src/fix_the_mismatch.rs";
    std::fs::copy(
        root.join("solutions").join(file),
        alice.join("exercises").join(file),
    )
    .unwrap();
    let model = bob.join("crates/workbook/src/model.rs");
    let text = std::fs::read_to_string(&model).unwrap();
    let checked = "graph.check_on(\"model parameters\", self.placement())?;";
    assert!(text.contains(checked), "model.rs changed: update this test");
    std::fs::write(
        &model,
        text.replace(checked, "let graph = graph.to_device(self.placement())?;"),
    )
    .unwrap();
    let reports = class.path().join("reports");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_grade"))
        .current_dir(root)
        .arg("--class")
        .arg(class.path())
        .arg("--reports")
        .arg(&reports)
        .arg("01-1")
        .output()
        .unwrap();
    let shown = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(out.status.code(), Some(0), "{shown}");
    let summary: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(reports.join("summary.json")).unwrap())
            .unwrap();
    let row = |name: &str| {
        summary["students"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["student"] == name)
            .unwrap()
            .clone()
    };
    assert_eq!(row("alice")["points"]["01-1"], 5, "{shown}");
    assert_eq!(row("bob")["points"]["01-1"], 0, "{shown}");
    assert_eq!(
        row("bob")["ignored_files"][0],
        "crates/workbook/src/model.rs: modified",
        "{shown}"
    );
}
