//! A throw-away repository whose one exercise needs nothing but std, a one-function library and
//! the `scenario` crate (so it builds in seconds), and how to run the grader on it. Shared by
//! the grader's integration tests.

#![allow(dead_code)]

use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::{Mutex, MutexGuard};

pub const GRADE_RS: &str = r#"
use super::demo::*;

#[test]
fn adds() {
    let s = scenario::start();
    let a = s.pick("a", 2..1000) as i32;
    let sum = add(a, 3);
    s.observe("sum", &sum);
    assert_eq!(sum, a + 3, "add({a}, 3) should be {}", a + 3);
}

#[test]
fn finishes_in_time() {
    let s = scenario::start();
    let n = s.pick("n", 1..100) as u32;
    let got = wait(n);
    s.observe("wait", &got);
    assert_eq!(got, n);
}

#[test]
fn does_not_abort() {
    let s = scenario::start();
    let n = s.pick("n", 1..100) as u32;
    let got = careful(n);
    s.observe("careful", &got);
    assert_eq!(got, 7 * n);
}
"#;

pub const STUB: &str = r#"
pub fn add(a: i32, b: i32) -> i32 {
    // TODO: return the sum.
    mathlib::combine(a, b)
}

pub fn wait(n: u32) -> u32 {
    // TODO: stop looping.
    loop {
        std::thread::sleep(std::time::Duration::from_millis(10 * u64::from(n)));
    }
}

pub fn careful(_n: u32) -> u32 {
    // TODO: do not abort.
    std::process::abort()
}
"#;

pub const SOLUTION: &str = r#"
pub fn add(a: i32, b: i32) -> i32 {
    a + b
}

pub fn wait(n: u32) -> u32 {
    n
}

pub fn careful(n: u32) -> u32 {
    7 * n
}
"#;

pub const LIBRARY: &str = "/// `a - b`.\npub fn combine(a: i32, b: i32) -> i32 {\n    a - b\n}\n";

pub const TOML: &str = r#"
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

pub fn write(path: &Path, text: &str) {
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(path, text).unwrap();
}

/// One fake repository at a time per test binary: they share a target folder (so the exercise's
/// dependencies build once), and a repository created while another builds could pass for it
/// (Cargo compares modification times). Hold the guard for the whole test.
pub fn serial() -> MutexGuard<'static, ()> {
    static ONE: Mutex<()> = Mutex::new(());
    ONE.lock().unwrap_or_else(|p| p.into_inner())
}

/// The target folder the fake repositories of this test binary share.
pub fn shared_target(binary: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("fake-repo-{binary}"))
}

/// A repository with one exercise, 01-1, its solution, and checksums of its graded files.
pub fn fake_repo(target: &Path) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path();
    write(
        &root.join("Cargo.toml"),
        "[workspace]\nresolver = \"2\"\nmembers = [\"crates/mathlib\", \"exercises/*/*\", \"solutions/*/*\"]\n",
    );
    // The workspace's lock file: the fake repository resolves the same versions offline.
    let here = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
    std::fs::copy(here.join("../../Cargo.lock"), root.join("Cargo.lock")).unwrap();
    // The "library" the exercise uses: a student who edits it instead of the exercise must not
    // gain points when the teacher grades the clone.
    write(
        &root.join("crates/mathlib/Cargo.toml"),
        "[package]\nname = \"mathlib\"\nversion = \"0.1.0\"\nedition = \"2021\"\n",
    );
    write(&root.join("crates/mathlib/src/lib.rs"), LIBRARY);
    let lib = "pub mod demo;\n#[cfg(test)]\n#[path = \"../../../../exercises/01-basics/1-demo/tests/grade.rs\"]\nmod grade;\n";
    let scenario = here.join("../scenario").canonicalize().unwrap();
    for (tree, name, code) in [
        ("exercises", "ex-demo", STUB),
        ("solutions", "sol-demo", SOLUTION),
    ] {
        let ex = root.join(tree).join("01-basics/1-demo");
        write(
            &ex.join("Cargo.toml"),
            &format!(
                "[package]\nname = \"{name}\"\nversion = \"0.1.0\"\nedition = \"2021\"\nautotests = false\n\n[dependencies]\nmathlib = {{ path = \"../../../crates/mathlib\" }}\n\n[dev-dependencies]\nscenario = {{ path = {:?}, default-features = false }}\n",
                scenario.display().to_string()
            ),
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
    let out = grade(root, target, &["--update-checksums"]);
    assert!(out.status.success(), "{}", text(&out));
    dir
}

/// The grader, run from inside `root`, building into `target`, in English whatever the locale
/// of the machine running the tests (a test that wants Chinese says so).
pub fn grader(root: &Path, target: &Path) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_grade"));
    cmd.current_dir(root)
        .args(["--checksums"])
        .arg(root.join("crates/grader/checksums.txt"))
        .env("CARGO_TARGET_DIR", target)
        .env_remove("CARGO_BUILD_TARGET_DIR")
        .env_remove("WORKBOOK_PYTHON");
    for var in grader::lang::LOCALE_VARS {
        cmd.env_remove(var);
    }
    cmd
}

/// A student's own run on `root` (`--root root`, graded in place).
pub fn grade(root: &Path, target: &Path, args: &[&str]) -> Output {
    grader(root, target)
        .arg("--root")
        .arg(root)
        .args(args)
        .output()
        .unwrap()
}

/// Whether judged runs can use bubblewrap here. Without it, a judged test is skipped with a
/// message, unless `WORKBOOK_REQUIRE_SANDBOX` is set (CI installs bubblewrap and sets it).
pub fn sandbox_or_skip(test: &str) -> bool {
    match grader::sandbox::Confinement::bubblewrap() {
        Ok(_) => true,
        Err(e) if std::env::var_os("WORKBOOK_REQUIRE_SANDBOX").is_some() => {
            panic!("{test}: WORKBOOK_REQUIRE_SANDBOX is set, but {e}")
        }
        Err(e) => {
            eprintln!("SKIPPED {test}: {e}");
            false
        }
    }
}

pub fn text(out: &Output) -> String {
    format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

pub fn report(path: PathBuf) -> Value {
    let text = std::fs::read_to_string(&path)
        .unwrap_or_else(|e| panic!("reading {}: {e}", path.display()));
    serde_json::from_str(&text).unwrap()
}

pub fn test_named<'a>(report: &'a Value, name: &str) -> &'a Value {
    report["exercises"][0]["tests"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == name)
        .unwrap()
}

/// Copies a repository (without `target/`), as a student's clone of it.
pub fn clone_repo(from: &Path, to: &Path) {
    for entry in std::fs::read_dir(from).unwrap() {
        let entry = entry.unwrap();
        let (src, dst) = (entry.path(), to.join(entry.file_name()));
        if entry.file_name() == "target" {
            continue;
        }
        if src.is_dir() {
            clone_repo(&src, &dst);
        } else {
            std::fs::create_dir_all(to).unwrap();
            std::fs::copy(&src, &dst).unwrap();
        }
    }
}

/// A row of a class summary.
pub fn row(summary: &Value, name: &str) -> Value {
    summary["students"]
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["name"] == name)
        .unwrap_or_else(|| panic!("no row for {name}: {summary}"))
        .clone()
}
