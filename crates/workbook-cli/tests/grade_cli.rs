//! The grader end to end, on a throw-away repository whose exercise needs nothing but std (so it
//! builds in seconds): stub and solution, failing/passing/looping/aborting tests, compile errors,
//! edited tests, missing tests, hints, JSON and JUnit reports, --expect and --watch.

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

const GRADE_RS: &str = r#"
use super::demo::*;

#[test]
fn adds() {
    assert_eq!(add(2, 3), 5, "add(2, 3) should be 5");
}

#[test]
fn finishes_in_time() {
    assert_eq!(wait(), 1);
}

#[test]
fn does_not_abort() {
    assert_eq!(careful(), 7);
}
"#;

const STUB: &str = r#"
pub fn add(a: i32, b: i32) -> i32 {
    // TODO: return the sum.
    a - b
}

pub fn wait() -> u32 {
    // TODO: stop looping.
    loop {
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
}

pub fn careful() -> u32 {
    // TODO: do not abort.
    std::process::abort()
}
"#;

const SOLUTION: &str = r#"
pub fn add(a: i32, b: i32) -> i32 {
    a + b
}

pub fn wait() -> u32 {
    1
}

pub fn careful() -> u32 {
    7
}
"#;

const TOML: &str = r#"
title = "Demo"
objectives = ["add"]
edit = ["src/demo.rs"]
time_limit_secs = 3

[[test]]
name = "adds"
points = 2

[[test]]
name = "finishes_in_time"
points = 1

[[test]]
name = "does_not_abort"
points = 1
"#;

fn write(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

/// A repository with one exercise, 01-1, its solution, and checksums of its graded files.
fn fake_repo() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    write(
        &root.join("Cargo.toml"),
        "[workspace]\nresolver = \"2\"\nmembers = [\"exercises/*/*\", \"solutions/*/*\"]\n",
    );
    let lib = "pub mod demo;\n#[cfg(test)]\n#[path = \"../../../../exercises/01-basics/1-demo/tests/grade.rs\"]\nmod grade;\n";
    for (tree, name, code) in [
        ("exercises", "ex-demo", STUB),
        ("solutions", "sol-demo", SOLUTION),
    ] {
        let ex = root.join(tree).join("01-basics/1-demo");
        write(
            &ex.join("Cargo.toml"),
            &format!("[package]\nname = \"{name}\"\nversion = \"0.1.0\"\nedition = \"2021\"\nautotests = false\n"),
        );
        write(&ex.join("src/lib.rs"), lib);
        write(&ex.join("src/demo.rs"), code);
    }
    let ex = root.join("exercises/01-basics/1-demo");
    write(&ex.join("tests/grade.rs"), GRADE_RS);
    write(&ex.join("exercise.toml"), TOML);
    write(
        &ex.join("HINTS.md"),
        "# Hints\n\n## Hint 1\n\nThink of plus.\n\n## Hint 2\n\n`a + b`\n",
    );
    let out = grade(root, &["--update-checksums"]);
    assert!(out.status.success(), "{}", text(&out));
    dir
}

fn grade(root: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_grade"))
        .arg("--root")
        .arg(root)
        .args(["--checksums"])
        .arg(root.join("crates/grader/checksums.txt"))
        .args(args)
        .env("CARGO_TARGET_DIR", root.join("target"))
        .env_remove("CARGO_BUILD_TARGET_DIR")
        .output()
        .unwrap()
}

fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

fn report(path: PathBuf) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).unwrap()).unwrap()
}

fn test_named<'a>(report: &'a Value, name: &str) -> &'a Value {
    report["exercises"][0]["tests"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == name)
        .unwrap()
}

#[test]
fn grades_a_stub_and_its_solution() {
    let repo = fake_repo();
    let root = repo.path();

    // The stub: every kind of failure, each with its own status and message; nothing stops early.
    let out = grade(root, &["01-1"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let shown = text(&out);
    assert!(shown.contains("0/4 points"), "{shown}");
    assert!(
        shown.contains("cargo grade 01-1 --hint"),
        "next steps: {shown}"
    );
    let r = report(root.join("target/grade/report.json"));
    assert_eq!(r["points"], 0);
    assert_eq!(r["max_points"], 4);
    let adds = test_named(&r, "adds");
    assert_eq!(adds["status"], "failed");
    assert!(adds["message"]
        .as_str()
        .unwrap()
        .contains("add(2, 3) should be 5"));
    assert_eq!(test_named(&r, "finishes_in_time")["status"], "timed_out");
    assert_eq!(test_named(&r, "does_not_abort")["status"], "crashed");
    let junit = std::fs::read_to_string(root.join("target/grade/junit.xml")).unwrap();
    assert!(
        junit.contains("tests=\"3\" failures=\"2\" errors=\"1\""),
        "{junit}"
    );
    assert!(junit.contains("add(2, 3) should be 5"), "{junit}");

    // CI's integrity checks: the stub fails everything; the solution passes everything.
    let out = grade(root, &["--expect", "fail"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let out = grade(root, &["--solutions", "--expect", "pass"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let r = report(root.join("target/grade/solutions.json"));
    assert_eq!(r["points"], 4);
    assert_eq!(r["variant"], "solutions");
    assert!(
        std::fs::read_to_string(root.join("target/grade/solutions-junit.xml"))
            .unwrap()
            .contains("failures=\"0\"")
    );
    let out = grade(root, &["--expect", "pass"]);
    assert_eq!(
        out.status.code(),
        Some(1),
        "the stub must not meet --expect pass"
    );

    // A student who copies the solution in gets full marks.
    std::fs::copy(
        root.join("solutions/01-basics/1-demo/src/demo.rs"),
        root.join("exercises/01-basics/1-demo/src/demo.rs"),
    )
    .unwrap();
    let json = root.join("out/alice.json");
    let junit = root.join("out/alice.xml");
    let out = grade(
        root,
        &[
            "all",
            "--json",
            json.to_str().unwrap(),
            "--junit",
            junit.to_str().unwrap(),
        ],
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert_eq!(report(json)["points"], 4);
    assert!(junit.is_file());
}

#[test]
fn reports_compile_errors_edited_tests_and_missing_tests() {
    let repo = fake_repo();
    let root = repo.path();
    let src = root.join("exercises/01-basics/1-demo/src/demo.rs");

    std::fs::write(&src, SOLUTION.replace("a + b", "a + \"b\"")).unwrap();
    let out = grade(root, &["01"]);
    assert_eq!(out.status.code(), Some(1));
    let r = report(root.join("target/grade/report.json"));
    let adds = test_named(&r, "adds");
    assert_eq!(adds["status"], "compile_error");
    assert!(
        adds["message"].as_str().unwrap().contains("error"),
        "{adds}"
    );
    assert!(r["exercises"][0]["compile_error"]
        .as_str()
        .unwrap()
        .contains("src/demo.rs"));
    assert!(text(&out).contains("does not compile"), "{}", text(&out));

    // Edited graded tests: graded, but flagged and points withheld.
    std::fs::write(&src, SOLUTION).unwrap();
    let tests = root.join("exercises/01-basics/1-demo/tests/grade.rs");
    std::fs::write(
        &tests,
        GRADE_RS.replace("add(2, 3), 5", "add(2, 3), add(2, 3)"),
    )
    .unwrap();
    let out = grade(root, &["1-demo"]);
    assert_eq!(out.status.code(), Some(1));
    let r = report(root.join("target/grade/report.json"));
    assert_eq!(r["points"], 0);
    assert_eq!(r["exercises"][0]["points_if_intact"], 4);
    assert_eq!(
        r["exercises"][0]["modified_files"][0],
        "exercises/01-basics/1-demo/tests/grade.rs: modified"
    );
    assert!(text(&out).contains("MODIFIED"), "{}", text(&out));
    let out = grade(root, &["--expect", "pass"]);
    assert_eq!(out.status.code(), Some(1));

    // A graded test that was deleted is missing, not silently skipped (and the file is flagged).
    std::fs::write(&tests, GRADE_RS.replace("fn adds()", "fn renamed()")).unwrap();
    grade(root, &["01-1"]);
    let r = report(root.join("target/grade/report.json"));
    assert_eq!(test_named(&r, "adds")["status"], "missing");
}

#[test]
fn hints_come_one_level_at_a_time() {
    let repo = fake_repo();
    let root = repo.path();
    let first = text(&grade(root, &["01-1", "--hint"]));
    assert!(
        first.contains("hint 1 of 2") && first.contains("Think of plus."),
        "{first}"
    );
    let second = text(&grade(root, &["01-1", "--hint"]));
    assert!(
        second.contains("hint 2 of 2") && second.contains("`a + b`"),
        "{second}"
    );
    let again = text(&grade(root, &["01-1", "--hint", "1"]));
    assert!(again.contains("hint 1 of 2"), "{again}");
}

#[test]
fn unknown_selections_are_explained() {
    let repo = fake_repo();
    let list = text(&grade(repo.path(), &["--list"]));
    assert!(
        list.contains("01-1") && list.contains("Demo") && list.contains("4 pts"),
        "{list}"
    );
    let out = grade(repo.path(), &["09-9"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(text(&out).contains("no exercise matches '09-9'") && text(&out).contains("01-1"));
}

#[test]
fn watch_regrades_on_save() {
    let repo = fake_repo();
    let root = repo.path().to_path_buf();
    let child = Command::new(env!("CARGO_BIN_EXE_grade"))
        .arg("--root")
        .arg(&root)
        .arg("--checksums")
        .arg(root.join("crates/grader/checksums.txt"))
        .args([
            "01-1",
            "--watch",
            "--watch-rounds",
            "1",
            "--time-limit",
            "1",
        ])
        .env("CARGO_TARGET_DIR", root.join("target"))
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    // Save the solution once the first grading is done (its report exists).
    let report_path = root.join("target/grade/report.json");
    for _ in 0..600 {
        if report_path.is_file() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    std::thread::sleep(std::time::Duration::from_millis(500));
    std::fs::write(
        root.join("exercises/01-basics/1-demo/src/demo.rs"),
        SOLUTION,
    )
    .unwrap();
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let shown = text(&out);
    assert!(
        shown.contains("0/4 points") && shown.contains("4/4 points"),
        "{shown}"
    );
}

/// The sample reports the teachers' page of the book shows (`book/src/generated/grade-*`), from a
/// real run on the throw-away repository with its timings zeroed; refresh with
/// `WORKBOOK_BLESS=1 cargo test -p workbook-cli --test grade_cli`.
#[test]
fn sample_reports_for_the_book() {
    let repo = fake_repo();
    let root = repo.path();
    std::fs::write(
        root.join("exercises/01-basics/1-demo/src/demo.rs"),
        SOLUTION
            .replace("\n    7\n", "\n    std::process::abort()\n")
            .replace("a + b", "a * b"),
    )
    .unwrap();
    grade(root, &["--json", root.join("alice.json").to_str().unwrap()]);
    let mut report: grader::Report =
        serde_json::from_str(&std::fs::read_to_string(root.join("alice.json")).unwrap()).unwrap();
    report.root = "/home/teacher/class/alice".into();
    for ex in &mut report.exercises {
        ex.duration_ms = 0;
        for t in &mut ex.tests {
            t.duration_ms = 0;
        }
    }
    let junit = report.to_junit().unwrap();
    let json = report.to_json();
    let book = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../book/src/generated");
    for (name, text) in [("grade-report.json", json), ("grade-junit.xml", junit)] {
        let path = book.join(name);
        if std::env::var_os("WORKBOOK_BLESS").is_some() {
            grader::report::write_atomically(&path, text.as_bytes()).unwrap();
        } else {
            let on_disk = std::fs::read_to_string(&path).unwrap_or_default();
            assert!(
                on_disk == text,
                "{} is stale: refresh with WORKBOOK_BLESS=1 cargo test -p workbook-cli --test grade_cli\n{text}",
                path.display()
            );
        }
    }
}
