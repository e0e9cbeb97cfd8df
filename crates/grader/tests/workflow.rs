//! The teacher's whole workflow, end to end, on the throw-away repository: a handout, a class of
//! five (a complete submission, a partial one, none, an archive unpacked one level deep, a late
//! commit) plus a folder the roster does not name, graded with a roster and a deadline, every
//! report and export checked against its format; a regrade of one student; hidden tests
//! released; the judge bundle with Gradescope's entry point, run on a submission of loose files.
//! Needs bubblewrap (skipped with a message without it, unless `WORKBOOK_REQUIRE_SANDBOX`).

mod common;

use common::*;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

fn target() -> PathBuf {
    shared_target("workflow")
}

const HIDDEN_RS: &str = r#"
use super::demo::*;

#[test]
fn adds_negatives() {
    let s = scenario::start();
    let a = -(s.pick("a", 1..1000) as i32);
    let sum = add(a, -4);
    s.observe("sum", &sum);
    assert_eq!(sum, a - 4, "add({a}, -4) should be {}", a - 4);
}
"#;

/// The fake repository with a hidden test.
fn teacher_repo() -> tempfile::TempDir {
    let repo = fake_repo(&target());
    let root = repo.path();
    let ex = root.join("exercises/01-basics/1-demo");
    write(&ex.join("tests/hidden.rs"), HIDDEN_RS);
    let toml = std::fs::read_to_string(ex.join("exercise.toml")).unwrap();
    write(
        &ex.join("exercise.toml"),
        &format!("{toml}\n[[test]]\nname = \"adds_negatives\"\npoints = 3\nhidden = true\n"),
    );
    write(
        &root.join("README.md"),
        "# Demo\n\nSolve 01-1.<!-- teacher-only --> Solutions are in `solutions/`.<!-- /teacher-only -->\n",
    );
    write(
        &ex.join("HINTS.zh-CN.md"),
        "# 提示\n\n## 提示 1\n\n想想加法。\n\n## 提示 2\n\n`a + b`\n",
    );
    write(&root.join(".gitignore"), "/target/\n");
    let out = common::grade(root, &target(), &["--update-checksums"]);
    assert!(out.status.success(), "{}", text(&out));
    repo
}

fn git(dir: &Path, args: &[&str], date: Option<&str>) {
    let mut cmd = Command::new("git");
    cmd.current_dir(dir)
        .args([
            "-c",
            "user.name=s",
            "-c",
            "user.email=s@example.invalid",
            "-c",
            "commit.gpgsign=false",
        ])
        .args(args);
    if let Some(d) = date {
        cmd.env("GIT_COMMITTER_DATE", d).env("GIT_AUTHOR_DATE", d);
    }
    let out = cmd.output().unwrap();
    assert!(out.status.success(), "git {args:?}: {}", text(&out));
}

fn clone(handout: &Path, to: &Path) {
    let out = Command::new("git")
        .args(["clone", "-q"])
        .arg(handout)
        .arg(to)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out));
}

fn demo(dir: &Path) -> PathBuf {
    dir.join("exercises/01-basics/1-demo/src/demo.rs")
}

fn json(path: PathBuf) -> Value {
    report(path)
}

#[test]
fn from_handout_to_gradebook() {
    if !sandbox_or_skip("from_handout_to_gradebook") {
        return;
    }
    let _one = serial();
    let repo = teacher_repo();
    let teacher = repo.path();
    let work = tempfile::tempdir().unwrap();
    let w = work.path();

    // 1. The handout: one commit, no solutions, no hidden test, nothing pointing at solutions/.
    let handout = w.join("handout");
    let out = grader(teacher, &target())
        .arg("--make-handout")
        .arg(&handout)
        .arg("--classroom-workflow")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out));
    assert!(!handout.join("solutions").exists());
    assert!(!handout
        .join("exercises/01-basics/1-demo/tests/hidden.rs")
        .exists());
    let toml =
        std::fs::read_to_string(handout.join("exercises/01-basics/1-demo/exercise.toml")).unwrap();
    assert!(
        !toml.contains("adds_negatives") && !toml.contains("hidden"),
        "{toml}"
    );
    let readme = std::fs::read_to_string(handout.join("README.md")).unwrap();
    assert!(
        readme.contains("Solve 01-1.") && !readme.contains("solutions"),
        "{readme}"
    );
    assert!(!std::fs::read_to_string(handout.join("Cargo.lock"))
        .unwrap()
        .contains("sol-demo"));
    assert!(!std::fs::read_to_string(handout.join("Cargo.toml"))
        .unwrap()
        .contains("solutions"));
    let log = Command::new("git")
        .current_dir(&handout)
        .args(["log", "--oneline"])
        .output()
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&log.stdout).lines().count(),
        1,
        "one commit, no history"
    );
    let workflow =
        std::fs::read_to_string(handout.join(".github/workflows/classroom.yml")).unwrap();
    assert!(workflow.contains("autograding-grading-reporter") && workflow.contains("--expected"));
    if let Ok(check) = Command::new("python3")
        .args(["-c", "import sys, yaml; yaml.safe_load(open(sys.argv[1]))"])
        .arg(handout.join(".github/workflows/classroom.yml"))
        .output()
    {
        assert!(
            check.status.success() || text(&check).contains("No module named"),
            "{}",
            text(&check)
        );
    }
    // A student's own grade in the handout works, and does not see the hidden test.
    let own = Command::new(env!("CARGO_BIN_EXE_grade"))
        .current_dir(&handout)
        .env("CARGO_TARGET_DIR", target())
        .arg("--checksums")
        .arg(handout.join("crates/grader/checksums.txt"))
        .args(["--expect", "fail"])
        .output()
        .unwrap();
    assert!(own.status.success(), "{}", text(&own));
    assert!(!text(&own).contains("adds_negatives"));
    // The Chinese hints travel with the handout.
    let hint = Command::new(env!("CARGO_BIN_EXE_grade"))
        .current_dir(&handout)
        .env("CARGO_TARGET_DIR", target())
        .args(["01-1", "--hint", "1", "--lang", "zh-CN"])
        .output()
        .unwrap();
    assert!(text(&hint).contains("想想加法。"), "{}", text(&hint));

    // 2. The class: clones of the handout, committed as students do.
    let class = w.join("class");
    let deadline = "2026-12-01T12:00:00+00:00";
    let (before, after) = ("2026-12-01T10:00:00+00:00", "2026-12-01T14:00:00+00:00");
    // ana: everything, on time.
    clone(&handout, &class.join("ana"));
    std::fs::write(demo(&class.join("ana")), SOLUTION).unwrap();
    git(
        &class.join("ana"),
        &["commit", "-qam", "done"],
        Some(before),
    );
    // ben: only `add`, on time; an uncommitted fix is not graded.
    clone(&handout, &class.join("ben"));
    std::fs::write(
        demo(&class.join("ben")),
        STUB.replace("mathlib::combine(a, b)", "a + b"),
    )
    .unwrap();
    git(&class.join("ben"), &["commit", "-qam", "add"], Some(before));
    std::fs::write(demo(&class.join("ben")), SOLUTION).unwrap();
    // cat: nothing (in the roster, no folder). dan: a downloaded archive, one level down.
    let dan = class.join("dan/workbook-main");
    clone_repo(&handout, &dan);
    std::fs::remove_dir_all(dan.join(".git")).unwrap();
    std::fs::write(demo(&dan), SOLUTION).unwrap();
    // eve: right before the deadline, then broke it after: graded at the first commit, late.
    clone(&handout, &class.join("eve"));
    std::fs::write(demo(&class.join("eve")), SOLUTION).unwrap();
    git(
        &class.join("eve"),
        &["commit", "-qam", "done"],
        Some(before),
    );
    std::fs::write(demo(&class.join("eve")), STUB).unwrap();
    git(&class.join("eve"), &["commit", "-qam", "oops"], Some(after));
    // zed: not in the roster.
    clone(&handout, &class.join("zed"));
    let roster = w.join("roster.csv");
    std::fs::write(
        &roster,
        "id,name,email,SIS User ID\nana,Ana A,ana@x.org,1001\nben,Ben B,ben@x.org,1002\ncat,Cat C,cat@x.org,1003\ndan,Dan D,dan@x.org,1004\neve,Eve E,eve@x.org,1005\n",
    )
    .unwrap();

    // 3. Grade it.
    let reports = w.join("reports");
    let grade_class = |extra: &[&str]| {
        grader(teacher, &target())
            .arg("--class")
            .arg(&class)
            .arg("--roster")
            .arg(&roster)
            .args(["--deadline", deadline, "--time-limit", "3"])
            .args([
                "--format",
                "gradescope",
                "--format",
                "classroom",
                "--format",
                "lms-csv",
            ])
            .args(["--lms-identity", "SIS User ID"])
            .arg("--reports")
            .arg(&reports)
            .args(extra)
            .output()
            .unwrap()
    };
    let started = Instant::now();
    let out = grade_class(&[]);
    eprintln!(
        "class of 5 graded in {:.1} s",
        started.elapsed().as_secs_f64()
    );
    let shown = text(&out);
    assert_eq!(out.status.code(), Some(0), "{shown}");
    for loud in [
        "no submission: cat",
        "folders the roster does not name, NOT GRADED: zed",
        "deadline",
    ] {
        assert!(shown.contains(loud), "missing warning {loud:?}:\n{shown}");
    }

    // summary.json: every rostered student, by status, with the commit and lateness.
    let summary = json(reports.join("summary.json"));
    let by = |id: &str| {
        summary["students"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["student"]["id"] == id)
            .unwrap_or_else(|| panic!("no {id}: {summary}"))
            .clone()
    };
    assert_eq!(
        summary["students"].as_array().unwrap().len(),
        5,
        "{summary}"
    );
    assert_eq!(summary["unknown_folders"], serde_json::json!(["zed"]));
    assert_eq!(by("ana")["total"], 7, "4 visible + 3 hidden: {summary}");
    assert_eq!(by("ana")["status"], "graded");
    assert!(by("ana")["commit"].as_str().unwrap().len() == 40);
    assert_eq!(by("ana")["late"], false);
    assert_eq!(
        by("ben")["total"],
        5,
        "add is right, so is the hidden test; the uncommitted fix is not graded: {summary}"
    );
    assert_eq!(by("cat")["status"], "no_submission");
    assert_eq!(by("cat")["total"], 0);
    assert_eq!(by("dan")["status"], "graded");
    assert_eq!(by("dan")["total"], 7);
    assert_eq!(by("eve")["late"], true);
    assert_eq!(
        by("eve")["total"],
        7,
        "graded at the commit before the deadline"
    );
    let dan_report = json(reports.join("students/dan.json"));
    assert_eq!(dan_report["submission"]["found_in"], "workbook-main");

    // statistics
    let stats = &summary["statistics"];
    assert_eq!(stats["students"], 5);
    assert_eq!(stats["graded"], 4);
    let ex = &stats["exercises"]["01-1"];
    assert_eq!(ex["full_marks"], 3);
    assert_eq!(ex["max_points"], 7);
    assert_eq!(
        ex["failed_tests"]["finishes_in_time"]["timed_out"], 1,
        "{stats}"
    );
    assert!((ex["mean"].as_f64().unwrap() - 6.5).abs() < 1e-9, "{stats}");

    // summary.csv
    let csv = std::fs::read_to_string(reports.join("summary.csv")).unwrap();
    assert!(
        csv.starts_with("student,name,email,status,01-1,total,max_points,late,commit,"),
        "{csv}"
    );
    assert!(
        csv.contains("\ncat,Cat C,cat@x.org,no_submission,0,0,7,"),
        "{csv}"
    );

    // Feedback: for every student, without the teacher's paths, the hidden test anonymous.
    let teacher_path = teacher.display().to_string();
    for id in ["ana", "ben", "cat", "dan", "eve"] {
        for ext in ["md", "html"] {
            let text =
                std::fs::read_to_string(reports.join(format!("students/{id}.{ext}"))).unwrap();
            assert!(
                !text.contains(&teacher_path),
                "{id}.{ext} shows a teacher's path"
            );
            assert!(
                !text.contains("adds_negatives"),
                "{id}.{ext} names the hidden test"
            );
        }
    }
    let ben_md = std::fs::read_to_string(reports.join("students/ben.md")).unwrap();
    assert!(ben_md.starts_with("# ben: 5/7 points"), "{ben_md}");
    assert!(
        ben_md.contains("01-1 hidden test 4") && ben_md.contains("cargo grade 01-1 --hint"),
        "{ben_md}"
    );
    let eve_md = std::fs::read_to_string(reports.join("students/eve.md")).unwrap();
    assert!(
        eve_md.contains("later commits, after the deadline"),
        "{eve_md}"
    );
    let html = std::fs::read_to_string(reports.join("students/ben.html")).unwrap();
    assert!(html.starts_with("<!doctype html>") && html.contains("<table>"));

    // Gradescope's results.json fields, per student.
    let gs = json(reports.join("students/ben.gradescope.json"));
    assert_eq!(gs["score"], 5.0);
    for t in gs["tests"].as_array().unwrap() {
        for field in ["name", "score", "max_score", "output", "visibility"] {
            assert!(t.get(field).is_some(), "{field} missing: {t}");
        }
        assert!(["visible", "hidden", "after_due_date", "after_published"]
            .contains(&t["visibility"].as_str().unwrap()));
    }
    assert_eq!(gs["tests"][3]["visibility"], "after_published");
    // GitHub Classroom's reporter payload.
    let cr = json(reports.join("students/ben.classroom.json"));
    assert_eq!(cr["version"], 1);
    assert_eq!(cr["status"], "fail");
    assert_eq!(cr["max_score"], 7);
    for t in cr["tests"].as_array().unwrap() {
        assert!(
            ["pass", "fail", "error"].contains(&t["status"].as_str().unwrap()),
            "{t}"
        );
        assert!(t["name"].is_string() && t["score"].is_number() && t["message"].is_string());
    }
    // The gradebook: the chosen identity column, one column per exercise, total, feedback.
    let lms = std::fs::read_to_string(reports.join("lms.csv")).unwrap();
    assert!(
        lms.starts_with("SIS User ID,name,01-1 (max 7),total,feedback\n"),
        "{lms}"
    );
    assert!(lms.contains("\n1003,Cat C,0,0,no submission\n"), "{lms}");
    assert!(
        lms.contains(
            "\n1005,Eve E,7,7,7/7 points; graded at the last commit before the deadline\n"
        ),
        "{lms}"
    );

    // The similarity hint: ana, dan and eve handed in the same file.
    let similar = json(reports.join("similarity.json"));
    let pairs: Vec<String> = similar
        .as_array()
        .unwrap()
        .iter()
        .map(|p| {
            format!(
                "{}-{}",
                p["students"][0].as_str().unwrap(),
                p["students"][1].as_str().unwrap()
            )
        })
        .collect();
    assert!(
        pairs.contains(&"ana-dan".to_string()) && pairs.contains(&"ana-eve".to_string()),
        "{pairs:?}"
    );

    // Reports are shared like any new file: the umask decides (022 here gives 0644).
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(reports.join("summary.csv"))
            .unwrap()
            .permissions()
            .mode()
            & 0o777;
        assert_eq!(mode & 0o600, 0o600);
        assert_ne!(
            mode, 0o600,
            "a report should not be private to the teacher: {mode:o}"
        );
    }

    // 4. Regrade one student: ben commits his fix (before the deadline, say) and is graded again;
    // the summary is rebuilt from every student's report.
    git(&class.join("ben"), &["commit", "-qam", "fix"], Some(before));
    let out = grade_class(&["--student", "ben"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let summary = json(reports.join("summary.json"));
    let total = |id: &str| {
        summary["students"]
            .as_array()
            .unwrap()
            .iter()
            .find(|s| s["student"]["id"] == id)
            .unwrap()["total"]
            .clone()
    };
    assert_eq!(total("ben"), 7);
    assert_eq!(total("ana"), 7);
    assert_eq!(total("eve"), 7);
    assert_eq!(summary["statistics"]["exercises"]["01-1"]["full_marks"], 4);

    // 5. Release the hidden tests' feedback.
    let out = grade_class(&["--student", "ben", "--release-hidden"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let ben_md = std::fs::read_to_string(reports.join("students/ben.md")).unwrap();
    assert!(ben_md.contains("01-1 adds_negatives"), "{ben_md}");
}

#[test]
fn the_judge_bundle_grades_loose_files_as_gradescope_does() {
    if !sandbox_or_skip("the_judge_bundle_grades_loose_files_as_gradescope_does") {
        return;
    }
    let _one = serial();
    let repo = teacher_repo();
    let teacher = repo.path();
    let work = tempfile::tempdir().unwrap();
    let bundle = work.path().join("judge");
    let out = grader(teacher, &target())
        .arg("--make-judge")
        .arg(&bundle)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out));
    assert!(!bundle.join("solutions").exists());
    assert!(
        bundle
            .join("exercises/01-basics/1-demo/tests/hidden.rs")
            .is_file(),
        "the judge keeps hidden tests"
    );
    assert!(bundle.join("expected.json").is_file());
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(bundle.join("expected.json"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o077, 0, "the answer key is private: {mode:o}");
        let run = std::fs::metadata(bundle.join("run_autograder"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(run & 0o111, 0o111);
    }
    // Gradescope's layout: the bundle as /autograder/source, the upload (only the edited file,
    // flat) as /autograder/submission; run_autograder writes /autograder/results/results.json.
    let autograder = work.path().join("autograder");
    std::fs::create_dir_all(autograder.join("submission")).unwrap();
    std::os::unix::fs::symlink(&bundle, autograder.join("source")).unwrap();
    std::fs::write(
        autograder.join("submission/demo.rs"),
        SOLUTION.replace("7 * n", "6 * n"),
    )
    .unwrap();
    let out = Command::new("bash")
        .arg(bundle.join("run_autograder"))
        .env("AUTOGRADER", &autograder)
        .env("CARGO_TARGET_DIR", target())
        .env("GRADE", env!("CARGO_BIN_EXE_grade"))
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out));
    let results = json(autograder.join("results/results.json"));
    assert_eq!(results["score"], 6.0, "all but does_not_abort: {results}");
    let names: Vec<&str> = results["tests"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert!(
        names.contains(&"01-1 adds") && names.contains(&"01-1 hidden test 4"),
        "{names:?}"
    );
}
