//! The grader end to end, on a throw-away repository whose exercise needs nothing but std, a
//! one-function library and the scenario crate (so it builds in seconds): stub and solution,
//! failing/passing/looping/aborting/exiting tests, compile errors, edited tests, missing tests,
//! hints, JSON and JUnit reports, --expect and --watch, a class graded by the judge in sandboxes,
//! and known-wrong solutions (--wrong). The attacks of a hostile student are in `attacks.rs`.

mod common;

use common::*;
use std::path::{Path, PathBuf};
use std::process::Command;

fn target() -> PathBuf {
    shared_target("grade_cli")
}

fn grade(root: &Path, args: &[&str]) -> std::process::Output {
    common::grade(root, &target(), args)
}

#[test]
fn grades_a_stub_and_its_solution() {
    let _one = serial();
    let repo = fake_repo(&target());
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
    let message = adds["message"].as_str().unwrap();
    assert!(
        message.contains("add(") && message.contains("should be"),
        "{message}"
    );
    assert_eq!(test_named(&r, "finishes_in_time")["status"], "timed_out");
    assert_eq!(test_named(&r, "does_not_abort")["status"], "crashed");
    let junit = std::fs::read_to_string(root.join("target/grade/junit.xml")).unwrap();
    assert!(
        junit.contains("tests=\"3\" failures=\"2\" errors=\"1\""),
        "{junit}"
    );
    assert!(junit.contains("should be"), "{junit}");

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
    let _one = serial();
    let repo = fake_repo(&target());
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
        GRADE_RS.replace("assert_eq!(sum, a + 3,", "assert_eq!(sum, sum,"),
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
    let _one = serial();
    let repo = fake_repo(&target());
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

/// `--lang zh-CN` (or a Chinese locale): Chinese hints from HINTS.zh-CN.md, English ones with a
/// note while there is none, and the grader's own texts in Chinese, the test's panic message and
/// the reports' fields as they were. English stays the default.
#[test]
fn chinese_hints_and_messages() {
    let _one = serial();
    let repo = fake_repo(&target());
    let root = repo.path();

    // No translation yet: the English hint, and a note saying why.
    let fallback = text(&grade(root, &["01-1", "--hint", "1", "--lang", "zh-CN"]));
    assert!(
        fallback.contains("HINTS.zh-CN.md")
            && fallback.contains("第 1 条提示（共 2 条）")
            && fallback.contains("Think of plus."),
        "{fallback}"
    );
    write(
        &root.join("exercises/01-basics/1-demo/HINTS.zh-CN.md"),
        "# 提示\n\n## 提示 1\n\n想想加法。\n\n## 提示 2\n\n`a + b`\n",
    );
    let zh = text(&grade(root, &["01-1", "--hint", "1", "--lang", "zh-CN"]));
    assert!(
        zh.contains("Demo：第 1 条提示（共 2 条）")
            && zh.contains("想想加法。")
            && zh.contains("再运行一次可看第 2 条提示")
            && !zh.contains("Think of plus.")
            && !zh.contains("HINTS.zh-CN.md"),
        "{zh}"
    );
    // The locale asks for Chinese as well; LC_ALL=C takes it back; --lang beats the locale.
    let from_locale = |pairs: &[(&str, &str)], extra: &[&str]| {
        let mut cmd = grader(root, &target());
        cmd.arg("--root").arg(root).args(["01-1", "--hint", "1"]);
        cmd.args(extra).envs(pairs.iter().copied());
        text(&cmd.output().unwrap())
    };
    let by_lang = from_locale(&[("LANG", "zh_CN.UTF-8")], &[]);
    assert!(by_lang.contains("想想加法。"), "{by_lang}");
    let by_c = from_locale(&[("LANG", "zh_CN.UTF-8"), ("LC_ALL", "C")], &[]);
    assert!(
        by_c.contains("hint 1 of 2") && by_c.contains("Think of plus."),
        "{by_c}"
    );
    let by_flag = from_locale(&[("LANG", "zh_CN.UTF-8")], &["--lang", "en"]);
    assert!(by_flag.contains("Think of plus."), "{by_flag}");
    // English by default.
    let default = text(&grade(root, &["01-1", "--hint", "1"]));
    assert!(
        default.contains("hint 1 of 2") && default.contains("Think of plus."),
        "{default}"
    );

    // The exercise's title and task in Chinese too (exercise.toml's `title_zh`, README.zh-CN.md).
    let toml = root.join("exercises/01-basics/1-demo/exercise.toml");
    let english_toml = std::fs::read_to_string(&toml).unwrap();
    write(
        &toml,
        &english_toml.replacen(
            "objectives = [\"add\"]",
            "objectives = [\"add\"]\ntitle_zh = \"演示\"\nobjectives_zh = [\"加法\"]",
            1,
        ),
    );
    write(
        &root.join("exercises/01-basics/1-demo/README.zh-CN.md"),
        "# 01-1 · 演示\n",
    );
    let refreshed = grade(root, &["--update-checksums"]);
    assert_eq!(refreshed.status.code(), Some(0), "{}", text(&refreshed));

    // A failing grade: the grader's words in Chinese, the test's own assertion as written.
    let out = grade(root, &["01-1", "--lang", "zh-CN"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let shown = text(&out);
    for chinese in [
        "正在评分 01-1 演示",             // progress, with the Chinese title
        "练习",                           // the table's headings
        "失败",                           // adds: its status
        "超过了 3 秒的时间限制",          // finishes_in_time: the grader's explanation
        "测试进程在测试结束之前异常终止", // does_not_abort
        "0/4 分（0%）",                   // the summary
        "通过 0/3 个测试",
        "下一步：01-1 演示（0/4 分）", // next steps
        "exercises/01-basics/1-demo/README.zh-CN.md",
        "cargo grade 01-1 --hint --lang zh-CN",
    ] {
        assert!(shown.contains(chinese), "no '{chinese}' in:\n{shown}");
    }
    // Every command it suggests keeps the language: run as printed, it answers in Chinese.
    let suggested: Vec<&str> = shown
        .lines()
        .filter_map(|l| l.split_once("cargo grade").map(|(_, rest)| rest))
        .collect();
    assert!(suggested.len() >= 2, "{shown}");
    for command in &suggested {
        let command = command.split('（').next().unwrap_or_default();
        assert!(
            command.contains("--lang zh-CN"),
            "'cargo grade{command}' drops --lang zh-CN:\n{shown}"
        );
    }
    assert!(
        shown.contains("should be"),
        "the test's own message stays: {shown}"
    );
    for english in ["points (", "Next:", "killed after", "tests passed"] {
        assert!(
            !shown.contains(english),
            "'{english}' left in English:\n{shown}"
        );
    }
    // Reports are for machines: the same statuses whatever the language.
    let r = report(root.join("target/grade/report.json"));
    assert_eq!(test_named(&r, "finishes_in_time")["status"], "timed_out");

    let out = grade(root, &["01-1"]);
    let shown = text(&out);
    assert!(
        shown.contains("0/4 points (0%)")
            && shown.contains("Next: 01-1 Demo")
            && shown.contains("exercises/01-basics/1-demo/README.md")
            && !shown.contains("演示")
            && shown.contains("killed after the time limit of 3 s")
            && !shown.contains("下一步"),
        "English by default: {shown}"
    );
}

#[test]
fn unknown_languages_are_refused() {
    let _one = serial();
    let repo = fake_repo(&target());
    let out = grade(repo.path(), &["01-1", "--hint", "--lang", "fr"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out).contains("unknown language 'fr'") && text(&out).contains("en and zh-CN"),
        "{}",
        text(&out)
    );
}

#[test]
fn unknown_selections_are_explained() {
    let _one = serial();
    let repo = fake_repo(&target());
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
    let _one = serial();
    let repo = fake_repo(&target());
    let root = repo.path().to_path_buf();
    let child = Command::new(env!("CARGO_BIN_EXE_grade"))
        .current_dir(&root)
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
        .env("CARGO_TARGET_DIR", target())
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

/// One save, one re-grade: the grade's own reads (cargo reading every source) and writes (the
/// build output, the reports) are not saves. Counted by the report's rewrites: before the fix,
/// one save of 01-4 re-graded 47 times in 25 s.
#[test]
fn watch_grades_once_per_save() {
    let _one = serial();
    let repo = fake_repo(&target());
    let root = repo.path().to_path_buf();
    let mut child = Command::new(env!("CARGO_BIN_EXE_grade"))
        .current_dir(&root)
        .arg("--root")
        .arg(&root)
        .arg("--checksums")
        .arg(root.join("crates/grader/checksums.txt"))
        .args(["--watch", "--time-limit", "1"])
        .env("CARGO_TARGET_DIR", target())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let report_path = root.join("target/grade/report.json");
    let written = || {
        std::fs::metadata(&report_path)
            .and_then(|m| m.modified())
            .ok()
    };
    for _ in 0..600 {
        if written().is_some() {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
    std::thread::sleep(std::time::Duration::from_millis(800));
    let first = written();
    assert!(first.is_some(), "the first grade wrote no report");
    std::fs::write(
        root.join("exercises/01-basics/1-demo/src/demo.rs"),
        SOLUTION,
    )
    .unwrap();
    // Every rewrite of the report over the next seconds is one grade.
    let mut seen = vec![first];
    let until = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while std::time::Instant::now() < until {
        let now = written();
        if seen.last() != Some(&now) {
            seen.push(now);
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    child.kill().unwrap();
    child.wait().unwrap();
    assert_eq!(
        seen.len(),
        2,
        "one save should be one re-grade, the report was written {} times after it",
        seen.len() - 1
    );
    let graded = report(report_path);
    assert_eq!(graded["points"], 4, "{graded}");
}

/// The sample reports the teachers' page of the book shows (`book/src/generated/grade-*`), from a
/// real run on the throw-away repository with its timings zeroed; refresh with
/// `WORKBOOK_BLESS=1 cargo test -p grader --test grade_cli`.
#[test]
fn sample_reports_for_the_book() {
    let _one = serial();
    let repo = fake_repo(&target());
    let root = repo.path();
    std::fs::write(
        root.join("exercises/01-basics/1-demo/src/demo.rs"),
        SOLUTION
            .replace("\n    7 * n\n", "\n    std::process::abort()\n")
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
                "{} is stale: refresh with WORKBOOK_BLESS=1 cargo test -p grader --test grade_cli\n{text}",
                path.display()
            );
        }
    }
}

#[test]
fn an_early_exit_is_blamed_on_the_code_not_the_grader() {
    let _one = serial();
    let repo = fake_repo(&target());
    let root = repo.path();
    std::fs::write(
        root.join("exercises/01-basics/1-demo/src/demo.rs"),
        SOLUTION.replace("\n    7 * n\n", "\n    std::process::exit(0)\n"),
    )
    .unwrap();
    let out = grade(root, &["01-1"]);
    let shown = text(&out);
    let r = report(root.join("target/grade/report.json"));
    let early = test_named(&r, "does_not_abort");
    assert_eq!(early["status"], "exited", "{shown}");
    let message = early["message"].as_str().unwrap();
    assert!(
        message.contains("ended")
            && message.contains("before the test finished")
            && message.contains("exit"),
        "{message}"
    );
    assert!(!shown.contains("did not run"), "{shown}");
    // Progress: each test's result as it finishes, on stderr.
    let progress = String::from_utf8_lossy(&out.stderr);
    assert!(progress.contains("grading 01-1 Demo"), "{progress}");
    assert!(
        progress.contains("pass") && progress.contains("adds"),
        "{progress}"
    );
}

#[test]
fn the_table_shows_whole_messages_and_whole_test_names() {
    let _one = serial();
    let repo = fake_repo(&target());
    let root = repo.path();
    let long = "the sum is wrong: write a temporary file in the same folder, then rename it over the old one, so that a reader never sees half a file (this sentence is long on purpose)";
    let tests = GRADE_RS.replace(
        "\"add({a}, 3) should be {}\", a + 3",
        &format!("\"{long}\""),
    );
    std::fs::write(
        root.join("exercises/01-basics/1-demo/tests/grade.rs"),
        tests,
    )
    .unwrap();
    let out = grade(root, &["01-1", "--time-limit", "1"]);
    let table: String = String::from_utf8_lossy(&out.stdout).into_owned();
    // Wrapped, so join the lines back and look for every word of the message, in order.
    let words: Vec<&str> = table
        .split(|c: char| c.is_whitespace() || c == '│')
        .filter(|w| !w.is_empty())
        .collect();
    let flat = words.join(" ");
    assert!(flat.contains(long), "the message was cut:\n{table}");
    assert!(!table.contains('…'), "{table}");
    for name in ["finishes_in_time", "does_not_abort"] {
        assert!(table.contains(name), "{name} split:\n{table}");
    }
}

#[test]
fn a_class_is_graded_from_the_edited_files_only() {
    if !sandbox_or_skip("a_class_is_graded_from_the_edited_files_only") {
        return;
    }
    let _one = serial();
    let repo = fake_repo(&target());
    let teacher = repo.path();
    let class = tempfile::tempdir().unwrap();
    // alice solved the exercise; bob edited the library (and added a cargo config) instead.
    let alice = class.path().join("alice");
    let bob = class.path().join("bob");
    clone_repo(teacher, &alice);
    clone_repo(teacher, &bob);
    std::fs::write(
        alice.join("exercises/01-basics/1-demo/src/demo.rs"),
        SOLUTION,
    )
    .unwrap();
    std::fs::write(
        bob.join("crates/mathlib/src/lib.rs"),
        LIBRARY.replace("    a - b", "    a + b"),
    )
    .unwrap();
    write(
        &bob.join(".cargo/config.toml"),
        "[build]\nrustflags = [\"--cfg\", \"cheat\"]\n",
    );

    // In his own clone, bob's library change earns the first test...
    let own = grade(&bob, &["01-1", "--time-limit", "1"]);
    let r = report(bob.join("target/grade/report.json"));
    assert_eq!(test_named(&r, "adds")["status"], "passed", "{}", text(&own));

    // ...but graded by the teacher's judge it is ignored, never compiled.
    let reports = class.path().join("reports");
    let out = grader(teacher, &target())
        .arg("--class")
        .arg(class.path())
        .arg("--reports")
        .arg(&reports)
        .args(["--jobs", "2", "--time-limit", "2"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let summary = report(reports.join("summary.json"));
    assert!(
        summary["judged_by"]
            .as_str()
            .unwrap()
            .contains("bubblewrap sandbox"),
        "{summary}"
    );
    assert_eq!(row(&summary, "alice")["points"]["01-1"], 4, "{summary}");
    assert_eq!(
        row(&summary, "alice")["ignored_files"]
            .as_array()
            .unwrap()
            .len(),
        0,
        "{summary}"
    );
    assert_eq!(row(&summary, "bob")["points"]["01-1"], 0, "{summary}");
    let ignored: Vec<String> = row(&summary, "bob")["ignored_files"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f.as_str().unwrap().to_string())
        .collect();
    assert!(
        ignored.contains(&"crates/mathlib/src/lib.rs: modified".to_string()),
        "{ignored:?}"
    );
    assert!(
        ignored.contains(&".cargo/config.toml: added".to_string()),
        "{ignored:?}"
    );
    let csv = std::fs::read_to_string(reports.join("summary.csv")).unwrap();
    assert!(
        csv.starts_with(
            "student,name,email,status,01-1,total,max_points,late,commit,ignored_files,refused_files,error\n"
        ),
        "{csv}"
    );
    assert!(csv.contains("\nalice,,,graded,4,4,4,,,,,\n"), "{csv}");
    let bob_report = report(reports.join("students/bob.json"));
    assert_eq!(test_named(&bob_report, "adds")["status"], "failed");
    // The stub's own assertion is quoted, as the student's words, not the verdict.
    let said = test_named(&bob_report, "adds")["message"].as_str().unwrap();
    assert!(
        said.contains("your test run said") && said.contains("should be"),
        "{said}"
    );
    assert_eq!(
        test_named(&bob_report, "finishes_in_time")["status"],
        "timed_out"
    );
    assert_eq!(
        test_named(&bob_report, "does_not_abort")["status"],
        "crashed",
        "{bob_report}"
    );
    assert!(reports.join("students/bob.xml").is_file());
    // The teacher's tree is untouched, and still grades as the stub.
    assert_eq!(
        std::fs::read_to_string(teacher.join("crates/mathlib/src/lib.rs")).unwrap(),
        LIBRARY
    );
    let own = grade(teacher, &["--expect", "fail"]);
    assert_eq!(own.status.code(), Some(0), "{}", text(&own));

    // One student's clone, as the teachers' page shows it: `--root CLONE` from the teacher's tree.
    let out = grader(teacher, &target())
        .arg("--root")
        .arg(&bob)
        .args(["--time-limit", "1", "--json"])
        .arg(teacher.join("bob.json"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    assert!(
        text(&out).contains("crates/mathlib/src/lib.rs: modified"),
        "{}",
        text(&out)
    );
    assert_eq!(report(teacher.join("bob.json"))["points"], 0);
    // `--root` never walks up: an empty folder inside the teacher's tree is an error, not the
    // teacher's own tree.
    let empty = teacher.join("empty");
    std::fs::create_dir_all(&empty).unwrap();
    let out = grader(teacher, &target())
        .arg("--root")
        .arg(&empty)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(
        text(&out).contains("not a copy of the workbook"),
        "{}",
        text(&out)
    );
}

#[test]
fn a_student_is_warned_about_changes_that_are_not_graded() {
    let _one = serial();
    let repo = fake_repo(&target());
    let root = repo.path();
    let git = |args: &[&str]| {
        let out = Command::new("git")
            .current_dir(root)
            .args(["-c", "user.name=t", "-c", "user.email=t@example.invalid"])
            .args(args)
            .output()
            .unwrap();
        assert!(out.status.success(), "{}", text(&out));
    };
    write(&root.join(".gitignore"), "/target/\n");
    git(&["init", "-q"]);
    git(&["add", "-A"]);
    git(&["commit", "-q", "-m", "handout"]);
    std::fs::write(
        root.join("crates/mathlib/src/lib.rs"),
        LIBRARY.replace("a - b", "a + b"),
    )
    .unwrap();
    std::fs::write(
        root.join("exercises/01-basics/1-demo/src/demo.rs"),
        SOLUTION,
    )
    .unwrap();
    let out = grade(root, &["01-1"]);
    let warning = String::from_utf8_lossy(&out.stderr);
    assert!(
        warning.contains("warning: you changed crates/mathlib/src/lib.rs;")
            && warning.contains("exercises/01-basics/1-demo/src/demo.rs"),
        "{warning}"
    );
    assert!(!warning.contains("you changed exercises/"), "{warning}");
}

#[test]
fn known_wrong_solutions_must_fail_the_tests_they_name() {
    if !sandbox_or_skip("known_wrong_solutions_must_fail_the_tests_they_name") {
        return;
    }
    let _one = serial();
    let repo = fake_repo(&target());
    let root = repo.path();
    let wrong = root.join("solutions/01-basics/1-demo/wrong");
    // Subtracting is caught by `adds`; it still passes the other two tests.
    write(
        &wrong.join("subtracts/wrong.toml"),
        "why = \"subtracts instead of adding\"\nmust_fail = [\"adds\"]\n",
    );
    write(
        &wrong.join("subtracts/src/demo.rs"),
        &SOLUTION.replace("a + b", "a - b"),
    );
    let wrong_json = target().join("grade/wrong.json");
    let out = grade(root, &["--wrong"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let r = report(wrong_json.clone());
    let rows = r["rows"].as_array().unwrap();
    assert_eq!(rows[0]["variant"], "(reference)");
    assert_eq!(rows[0]["points"], 4, "{r}");
    assert_eq!(rows[1]["variant"], "subtracts");
    assert_eq!(rows[1]["caught"], true);
    assert_eq!(rows[1]["must_fail"][0]["status"], "failed");
    assert_eq!(
        rows[1]["other_tests_lost"].as_array().unwrap().len(),
        0,
        "{r}"
    );
    assert_eq!(
        r["challenge_independent"].as_array().unwrap().len(),
        0,
        "{r}"
    );
    assert!(
        text(&out).contains("subtracts instead of adding"),
        "{}",
        text(&out)
    );
    // The working tree is never modified.
    assert_eq!(
        std::fs::read_to_string(root.join("exercises/01-basics/1-demo/src/demo.rs")).unwrap(),
        STUB
    );

    // Kept as a patch against the reference solution, the mistake is graded the same.
    let out = grade(root, &["--wrong-to-patches"]);
    assert!(out.status.success(), "{}", text(&out));
    let patch = wrong.join("subtracts/src/demo.rs.patch");
    assert!(!wrong.join("subtracts/src/demo.rs").exists());
    let patch_text = std::fs::read_to_string(&patch).unwrap();
    assert!(
        patch_text.contains("-    a + b") && patch_text.contains("+    a - b"),
        "{patch_text}"
    );
    let out = grade(root, &["--wrong"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    assert_eq!(report(wrong_json.clone())["rows"][1]["caught"], true);
    // A patch that no longer applies to the reference is the variant's error, not a silent pass.
    std::fs::write(&patch, patch_text.replace("-    a + b", "-    a + c")).unwrap();
    let out = grade(root, &["--wrong"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let error = report(wrong_json.clone())["rows"][1]["error"].to_string();
    assert!(error.contains("no longer applies"), "{error}");
    std::fs::write(&patch, &patch_text).unwrap();

    // A mistake the named test does not catch fails the run; so do a bad variant and one that
    // does not compile.
    write(
        &wrong.join("uncaught/wrong.toml"),
        "why = \"multiplies\"\nmust_fail = [\"finishes_in_time\"]\n",
    );
    write(
        &wrong.join("uncaught/src/demo.rs"),
        &SOLUTION.replace("a + b", "a * b"),
    );
    write(
        &wrong.join("bad/wrong.toml"),
        "why = \"x\"\nmust_fail = [\"no_such_test\"]\n",
    );
    write(&wrong.join("bad/src/lib.rs"), "");
    write(
        &wrong.join("broken/wrong.toml"),
        "why = \"x\"\nmust_fail = [\"adds\"]\n",
    );
    write(&wrong.join("broken/src/demo.rs"), "pub fn add(");
    let out = grade(root, &["--wrong", "01-1"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let r = report(wrong_json);
    let by = |slug: &str| {
        r["rows"]
            .as_array()
            .unwrap()
            .iter()
            .find(|v| v["variant"] == slug)
            .unwrap()
            .clone()
    };
    assert_eq!(by("subtracts")["caught"], true);
    assert_eq!(by("uncaught")["caught"], false);
    assert_eq!(by("uncaught")["must_fail"][0]["status"], "passed");
    assert_eq!(by("uncaught")["other_tests_lost"][0], "adds");
    let bad = by("bad")["error"].as_str().unwrap().to_string();
    assert!(
        bad.contains("no_such_test") && bad.contains("src/lib.rs is not a file students edit"),
        "{bad}"
    );
    assert!(by("broken")["error"]
        .as_str()
        .unwrap()
        .contains("does not compile"));

    // A test whose values never depend on the challenge could be forged whole: --wrong names
    // each such test and fails.
    std::fs::remove_dir_all(&wrong).unwrap();
    let tests = root.join("exercises/01-basics/1-demo/tests/grade.rs");
    std::fs::write(
        &tests,
        GRADE_RS.replace("let n = s.pick(\"n\", 1..100) as u32;", "let n = 3;"),
    )
    .unwrap();
    let out = grade(root, &["--update-checksums"]);
    assert!(out.status.success(), "{}", text(&out));
    let out = grade(root, &["--wrong"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let r = report(target().join("grade/wrong.json"));
    assert_eq!(
        r["challenge_independent"],
        serde_json::json!(["01-1 finishes_in_time", "01-1 does_not_abort"]),
        "{r}"
    );
    // One constant value beside values that depend on the challenge is named and fails too: a
    // student whose `add` is wrong only for (1, 2) would write "3" in advance.
    std::fs::write(
        &tests,
        GRADE_RS.replace(
            "    s.observe(\"sum\", &sum);",
            "    s.observe(\"sum\", &sum);\n    s.observe(\"one and two\", &add(1, 2));",
        ),
    )
    .unwrap();
    let out = grade(root, &["--update-checksums"]);
    assert!(out.status.success(), "{}", text(&out));
    let out = grade(root, &["--wrong"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let r = report(target().join("grade/wrong.json"));
    assert_eq!(r["challenge_independent"], serde_json::json!([]), "{r}");
    assert_eq!(
        r["constant_keys"],
        serde_json::json!(["01-1 adds: one and two"]),
        "{r}"
    );
    assert!(
        text(&out).contains("01-1 adds: one and two"),
        "{}",
        text(&out)
    );
}

/// A program that makes a known mistake against the student's API, for a `compile_fail` test.
const NEGATIVE_HALF: &str = r#"#![allow(unexpected_cfgs)]
#[allow(dead_code)]
mod under_test {
    include!(concat!(env!("CARGO_MANIFEST_DIR"), "/src/demo.rs"));
}

fn main() {
    #[cfg(grade_mistake)]
    let half = under_test::halve(-4);
    #[cfg(not(grade_mistake))]
    let half = under_test::halve(4);
    println!("{half}");
}
"#;

/// `halve` as the reference solution has it: of a `u32`, so `halve(-4)` is refused (E0600).
const HALVE_U32: &str = "\npub fn halve(n: u32) -> u32 {\n    n / 2\n}\n";

/// The fake repository with a `compile_fail` test, `refuses_a_negative`: the stub's `halve`
/// takes an `i64` (the mistake compiles), the solution's a `u32`.
fn repo_with_a_refusal() -> tempfile::TempDir {
    let repo = fake_repo(&target());
    let root = repo.path();
    for (tree, code, halve) in [
        (
            "exercises",
            STUB,
            "\npub fn halve(n: i64) -> i64 {\n    n / 2\n}\n",
        ),
        ("solutions", SOLUTION, HALVE_U32),
    ] {
        let ex = root.join(tree).join("01-basics/1-demo");
        write(&ex.join("src/demo.rs"), &format!("{code}{halve}"));
        let manifest = std::fs::read_to_string(ex.join("Cargo.toml")).unwrap();
        write(
            &ex.join("Cargo.toml"),
            &format!("{manifest}\n[[example]]\nname = \"negative_half\"\npath = \"../../../exercises/01-basics/1-demo/tests/programs/negative_half.rs\"\n"),
        );
    }
    let ex = root.join("exercises/01-basics/1-demo");
    write(&ex.join("tests/programs/negative_half.rs"), NEGATIVE_HALF);
    write(
        &ex.join("exercise.toml"),
        &format!("{TOML}\n[[test]]\nname = \"refuses_a_negative\"\npoints = 2\nprogram = \"negative_half\"\ncompile_fail = \"E0600\"\n"),
    );
    let out = grade(root, &["--update-checksums"]);
    assert!(out.status.success(), "{}", text(&out));
    repo
}

/// `compile_fail`: the program's mistake must be refused with the expected error, in the
/// program, while the program without its mistake builds; a program that compiles, a crate
/// broken for another reason, another error, or a file that tests for the mistake's switch
/// fails. In a student's own run and in the judge's (`--wrong`, in the sandbox).
#[test]
fn a_program_must_be_refused_for_its_mistake() {
    let _one = serial();
    let repo = repo_with_a_refusal();
    let root = repo.path();
    let refusal = |args: &[&str]| {
        let out = grade(root, args);
        let r = report(root.join("target/grade/report.json"));
        let t = test_named(&r, "refuses_a_negative").clone();
        (out, t)
    };
    // The stub's API accepts the mistake.
    let (out, t) = refusal(&["01-1"]);
    assert_eq!(t["status"], "failed", "{}", text(&out));
    let message = t["message"].as_str().unwrap();
    assert!(
        message.contains("compiles with its mistake") && message.contains("E0600"),
        "{message}"
    );
    let out = grade(root, &["--expect", "fail"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let out = grade(root, &["--solutions", "--expect", "pass"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));

    let file = root.join("exercises/01-basics/1-demo/src/demo.rs");
    // Refused, and the right version builds: passes (in Chinese too, nothing to explain).
    write(&file, &format!("{SOLUTION}{HALVE_U32}"));
    let (out, t) = refusal(&["01-1", "--lang", "zh-CN"]);
    assert_eq!(t["status"], "passed", "{}", text(&out));
    // Broken elsewhere: the mistake is refused (E0600 among the errors), but so is the fix.
    write(
        &file,
        &format!("{SOLUTION}\npub fn halve(n: u32, by: u32) -> u32 {{\n    n / by\n}}\n"),
    );
    let (out, t) = refusal(&["01-1"]);
    assert_eq!(t["status"], "failed", "{}", text(&out));
    let message = t["message"].as_str().unwrap();
    assert!(
        message.contains("even without its mistake") && message.contains("E0061"),
        "{message}"
    );
    let (_, t) = refusal(&["01-1", "--lang", "zh-CN"]);
    assert!(
        t["message"].as_str().unwrap().contains("即使不带它的错误"),
        "{t}"
    );
    // A file that switches its API with the mistake: the program is refused exactly as
    // expected, but the file names the switch.
    let switching = format!(
        "{SOLUTION}\n#[cfg(grade_mistake)]\npub fn halve(n: u32) -> u32 {{\n    n / 2\n}}\n#[cfg(not(grade_mistake))]\npub fn halve(n: i64) -> i64 {{\n    n / 2\n}}\n"
    );
    write(&file, &switching);
    let (out, t) = refusal(&["01-1"]);
    assert_eq!(t["status"], "failed", "{}", text(&out));
    assert!(
        t["message"]
            .as_str()
            .unwrap()
            .contains("names `grade_mistake`"),
        "{t}"
    );

    // The judge: the same verdicts from the sandboxed compiler; never observed values.
    if sandbox_or_skip("a_program_must_be_refused_for_its_mistake") {
        let wrong = root.join("solutions/01-basics/1-demo/wrong");
        write(
            &wrong.join("accepts-negatives/wrong.toml"),
            "why = \"halves an i64\"\nmust_fail = [\"refuses_a_negative\"]\n",
        );
        write(
            &wrong.join("accepts-negatives/src/demo.rs"),
            &format!("{SOLUTION}\npub fn halve(n: i64) -> i64 {{\n    n / 2\n}}\n"),
        );
        write(
            &wrong.join("switches/wrong.toml"),
            "why = \"tests for the mistake's switch\"\nmust_fail = [\"refuses_a_negative\"]\n",
        );
        write(&wrong.join("switches/src/demo.rs"), &switching);
        let out = grade(root, &["--wrong"]);
        assert_eq!(out.status.code(), Some(0), "{}", text(&out));
        let r = report(target().join("grade/wrong.json"));
        let rows = r["rows"].as_array().unwrap();
        assert_eq!(rows[0]["points"], 6, "{r}");
        for row in &rows[1..] {
            assert_eq!(row["caught"], true, "{r}");
            assert_eq!(row["must_fail"][0]["status"], "failed", "{r}");
        }
        // A verdict of the compiler is no value a student's process could forge.
        assert_eq!(r["challenge_independent"], serde_json::json!([]), "{r}");
        assert_eq!(r["constant_keys"], serde_json::json!([]), "{r}");
        std::fs::remove_dir_all(&wrong).unwrap();
    }

    // Refused for another reason than the one expected: fails; a reference refused so fails
    // every student, so the judge stops.
    write(&file, &format!("{SOLUTION}{HALVE_U32}"));
    let toml = root.join("exercises/01-basics/1-demo/exercise.toml");
    let text_of_toml = std::fs::read_to_string(&toml).unwrap();
    write(&toml, &text_of_toml.replace("\"E0600\"", "\"E0277\""));
    let out = grade(root, &["--update-checksums"]);
    assert!(out.status.success(), "{}", text(&out));
    let (out, t) = refusal(&["01-1"]);
    assert_eq!(t["status"], "failed", "{}", text(&out));
    let message = t["message"].as_str().unwrap();
    assert!(
        message.contains("not for the expected reason") && message.contains("E0600"),
        "{message}"
    );
}
