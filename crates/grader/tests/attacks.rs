//! A hostile class: each attack a student can try on the teacher's grading, performed for real
//! on the throw-away repository, and what the judge makes of it. Every cheat scores 0 (or is
//! refused and reported), honest classmates keep full marks, and nothing outside the sandbox
//! changes. Needs bubblewrap (skipped with a message without it, unless
//! `WORKBOOK_REQUIRE_SANDBOX` is set, as in CI).

mod common;

use common::*;
use std::path::{Path, PathBuf};
use std::process::Output;
use std::time::{Duration, Instant};

fn target() -> PathBuf {
    shared_target("attacks")
}

/// The solution with one function's body replaced.
fn solution_with(function: &str, body: &str) -> String {
    let start = SOLUTION.find(&format!("pub fn {function}")).unwrap();
    let open = start + SOLUTION[start..].find('{').unwrap();
    let close = open + SOLUTION[open..].find("\n}").unwrap();
    format!("{}{{\n{body}\n{}", &SOLUTION[..open], &SOLUTION[close..])
}

/// Every function prints libtest's success line and exits with status 0.
const FORGED_EXIT: &str = r#"
fn forge() -> ! {
    println!("test grade::adds ... ok\n\ntest result: ok. 1 passed; 0 failed; 0 ignored; 0 measured; 0 filtered out");
    std::process::exit(0)
}
pub fn add(_a: i32, _b: i32) -> i32 { forge() }
pub fn wait(_n: u32) -> u32 { forge() }
pub fn careful(_n: u32) -> u32 { forge() }
"#;

/// The same from a constructor that runs before `main`.
const INIT_ARRAY: &str = r#"
#[used]
#[link_section = ".init_array"]
static FORGE: extern "C" fn() = {
    extern "C" fn forge() {
        println!("test result: ok. 1 passed; 0 failed; 0 ignored; 0 measured; 0 filtered out");
        std::process::exit(0)
    }
    forge
};
pub fn add(a: i32, b: i32) -> i32 { a - b }
pub fn wait(_n: u32) -> u32 { 0 }
pub fn careful(_n: u32) -> u32 { 0 }
"#;

/// The teacher's solution, pulled in at compile time through a relative `#[path]`.
const PATH_INTO_SOLUTIONS: &str = r#"
#[path = "../../../../solutions/01-basics/1-demo/src/demo.rs"]
mod reference;
pub use reference::*;
"#;

/// Writes the judge's log by hand, with made-up values and "done", then exits.
const FORGED_LOG: &str = r#"
fn forge(key: &str) -> ! {
    use std::io::Write;
    let mut log = std::fs::OpenOptions::new().append(true).open("/proc/self/fd/3").unwrap();
    let line = format!("{{\"observe\":{{\"key\":\"{key}\",\"value\":999999}}}}\n\"done\"\n");
    log.write_all(line.as_bytes()).unwrap();
    println!("test result: ok. 1 passed; 0 failed");
    std::process::exit(0)
}
pub fn add(_a: i32, _b: i32) -> i32 { forge("sum") }
pub fn wait(_n: u32) -> u32 { forge("wait") }
pub fn careful(_n: u32) -> u32 { forge("careful") }
"#;

/// A correct solution that, while its tests run, tries to break a classmate's file, rewrite the
/// class summary now and, from a detached process, after the grader has finished.
fn vandal(victim: &Path, reports: &Path, marker: &str) -> String {
    let attack = format!(
        r#"
    let _ = std::fs::write({victim:?}, "pub fn add(a: i32, b: i32) -> i32 {{ a - b }}");
    let _ = std::fs::write({summary:?}, "pwned");
    let _ = std::process::Command::new("sh")
        .args(["-c", "sleep 3; echo pwned > {summary}; echo {marker}"])
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn();
    a + b"#,
        summary = reports.join("summary.csv").display().to_string(),
    );
    solution_with("add", &attack)
}

/// The teacher's secrets and the terminal: prints the environment and escape sequences, and
/// fails with a message full of them.
const ENV_AND_ESCAPES: &str = r#"
pub fn add(_a: i32, _b: i32) -> i32 {
    for (k, v) in std::env::vars() {
        println!("{k}={v}");
    }
    let token = std::env::var("TEACHER_TOKEN").unwrap_or_default();
    panic!("\x1b]0;owned\x07\x1b[2J\x1b[31mtoken={token}\x1b[0m \u{202e}reversed");
}
pub fn wait(n: u32) -> u32 { n }
pub fn careful(n: u32) -> u32 { 7 * n }
"#;

/// Reads the teacher's files at run time.
fn snoop(solution: &Path) -> String {
    solution_with(
        "add",
        &format!(
            "    let reference = std::fs::read_to_string({solution:?}).expect(\"reading the teacher's solution\");\n    a + b + reference.len() as i32 * 0"
        ),
    )
}

/// A test that leaves a child holding the output pipe and never returns.
const SLEEPER: &str = r#"
pub fn add(a: i32, b: i32) -> i32 { a + b }
pub fn wait(_n: u32) -> u32 {
    let _child = std::process::Command::new("sleep").arg("1000").spawn();
    loop {
        std::thread::sleep(std::time::Duration::from_millis(100));
    }
}
pub fn careful(n: u32) -> u32 { 7 * n }
"#;

/// Hundreds of megabytes of output, then the right answer.
const FLOOD: &str = r#"
pub fn add(a: i32, b: i32) -> i32 {
    use std::io::Write;
    let line = vec![b'x'; 1 << 20];
    let mut out = std::io::stdout().lock();
    for _ in 0..300 {
        let _ = out.write_all(&line);
    }
    a + b
}
pub fn wait(n: u32) -> u32 { n }
pub fn careful(n: u32) -> u32 { 7 * n }
"#;

/// Asks for far more memory than the sandbox allows (its address space is capped).
const HOG: &str = r#"
pub fn add(a: i32, b: i32) -> i32 {
    let hog = vec![1u8; 64 << 30];
    a + b + i32::from(hog[hog.len() - 1]) - 1
}
pub fn wait(n: u32) -> u32 { n }
pub fn careful(n: u32) -> u32 { 7 * n }
"#;

/// A constant whose evaluation never ends (rustc's lint against it allowed): the compiler runs
/// until the build time limit.
const ENDLESS_BUILD: &str = r#"
#[allow(long_running_const_eval)]
pub const SPIN: u64 = {
    let mut i: u64 = 0;
    loop {
        i = i.wrapping_add(1);
        if i == u64::MAX { break i; }
    }
};
pub fn add(a: i32, b: i32) -> i32 { a + b + (SPIN as i32 & 0) }
pub fn wait(n: u32) -> u32 { n }
pub fn careful(n: u32) -> u32 { 7 * n }
"#;

fn student(class: &Path, name: &str, teacher: &Path, demo: Option<&str>) -> PathBuf {
    let dir = class.join(name);
    clone_repo(teacher, &dir);
    // A class's copy has no solutions (nor their line in the workspace).
    std::fs::remove_dir_all(dir.join("solutions")).unwrap();
    let manifest = dir.join("Cargo.toml");
    let text = std::fs::read_to_string(&manifest).unwrap();
    std::fs::write(&manifest, text.replace(", \"solutions/*/*\"", "")).unwrap();
    if let Some(code) = demo {
        std::fs::write(dir.join("exercises/01-basics/1-demo/src/demo.rs"), code).unwrap();
    }
    dir
}

fn processes_mentioning(marker: &str) -> usize {
    let mut found = 0;
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        if let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) {
            if String::from_utf8_lossy(&cmdline).contains(marker) {
                found += 1;
            }
        }
    }
    found
}

#[test]
fn a_hostile_class_gains_nothing_and_harms_no_one() {
    if !sandbox_or_skip("a_hostile_class_gains_nothing_and_harms_no_one") {
        return;
    }
    let _one = serial();
    let repo = fake_repo(&target());
    let teacher = repo.path();
    let outside = tempfile::tempdir().unwrap();
    let class = outside.path().join("class");
    let reports = outside.path().join("reports");
    let solution = teacher.join("solutions/01-basics/1-demo/src/demo.rs");
    let marker = format!("pwned-{}", std::process::id());
    let fsmonitor_marker = outside.path().join("fsmonitor-ran");

    student(&class, "alice", teacher, Some(SOLUTION));
    let zed = student(&class, "zed", teacher, Some(SOLUTION));
    let zed_file = zed.join("exercises/01-basics/1-demo/src/demo.rs");
    student(&class, "summary", teacher, Some(SOLUTION));
    student(&class, "m-forged-exit", teacher, Some(FORGED_EXIT));
    student(&class, "m-init-array", teacher, Some(INIT_ARRAY));
    student(
        &class,
        "m-path-solutions",
        teacher,
        Some(PATH_INTO_SOLUTIONS),
    );
    student(&class, "m-forged-log", teacher, Some(FORGED_LOG));
    student(
        &class,
        "m-vandal",
        teacher,
        Some(&vandal(&zed_file, &reports, &marker)),
    );
    student(&class, "m-env", teacher, Some(ENV_AND_ESCAPES));
    student(&class, "m-snoop", teacher, Some(&snoop(&solution)));
    student(&class, "m-sleeper", teacher, Some(SLEEPER));
    student(&class, "m-flood", teacher, Some(FLOOD));
    student(&class, "m-hog", teacher, Some(HOG));
    let link = student(&class, "m-symlink", teacher, None);
    let edit = link.join("exercises/01-basics/1-demo/src/demo.rs");
    std::fs::remove_file(&edit).unwrap();
    std::os::unix::fs::symlink(
        "../../../../../../solutions/01-basics/1-demo/src/demo.rs",
        &edit,
    )
    .unwrap();
    let git = student(&class, "m-fsmonitor", teacher, Some(SOLUTION));
    std::fs::create_dir_all(git.join(".git/hooks")).unwrap();
    write(
        &git.join(".git/config"),
        &format!(
            "[core]\n\trepositoryformatversion = 0\n\tfsmonitor = \"touch {}\"\n\thooksPath = hooks\n",
            fsmonitor_marker.display()
        ),
    );
    write(&git.join(".git/HEAD"), "ref: refs/heads/main\n");

    let started = Instant::now();
    let out: Output = grader(teacher, &target())
        .arg("--class")
        .arg(&class)
        .arg("--reports")
        .arg(&reports)
        .args(["--jobs", "2", "--time-limit", "3"])
        .env("TEACHER_TOKEN", "hunter2-secret")
        .output()
        .unwrap();
    let took = started.elapsed();
    let shown = text(&out);
    assert_eq!(out.status.code(), Some(0), "{shown}");
    // Never hangs: 15 students, two at a time, the sleeper killed at its 3-second limit.
    assert!(took < Duration::from_secs(240), "took {took:?}");

    let summary = report(reports.join("summary.json"));
    let points = |name: &str| row(&summary, name)["total"].as_u64().unwrap();
    // The honest students, including the one whose folder is named "summary", keep full marks.
    for honest in ["alice", "zed", "summary", "m-fsmonitor"] {
        assert_eq!(points(honest), 4, "{honest}: {summary}");
    }
    // Every forgery scores 0.
    for cheat in [
        "m-forged-exit",
        "m-init-array",
        "m-path-solutions",
        "m-forged-log",
        "m-symlink",
    ] {
        assert_eq!(points(cheat), 0, "{cheat}: {summary}");
    }
    let status = |name: &str, test: &str| {
        let r = report(reports.join(format!("students/{name}.json")));
        test_named(&r, test)["status"].as_str().unwrap().to_string()
    };
    assert_eq!(status("m-forged-exit", "adds"), "exited");
    assert_eq!(status("m-init-array", "does_not_abort"), "exited");
    assert_eq!(status("m-path-solutions", "adds"), "compile_error");
    assert_eq!(status("m-forged-log", "adds"), "failed");
    // The link into the teacher's solutions was refused, and said so; the stub was graded.
    let refused = row(&summary, "m-symlink")["refused_files"].to_string();
    assert!(refused.contains("a symbolic link, refused"), "{refused}");

    // The vandal's own (correct) work counts; its attacks touched nothing.
    assert_eq!(points("m-vandal"), 4, "{summary}");
    assert_eq!(std::fs::read_to_string(&zed_file).unwrap(), SOLUTION);
    std::thread::sleep(Duration::from_secs(4));
    let csv = std::fs::read_to_string(reports.join("summary.csv")).unwrap();
    assert!(
        !csv.contains("pwned") && csv.starts_with("student,"),
        "{csv}"
    );
    assert_eq!(
        processes_mentioning(&marker),
        0,
        "a student's process outlived the grader"
    );
    // Git was never run in a student's folder.
    assert!(!fsmonitor_marker.exists(), "core.fsmonitor ran");

    // Snooping: the teacher's files are not there to read.
    assert_eq!(points("m-snoop"), 2, "{summary}");
    let snoop_report = report(reports.join("students/m-snoop.json"));
    let said = test_named(&snoop_report, "adds")["message"]
        .as_str()
        .unwrap();
    assert!(said.contains("No such file or directory"), "{said}");

    // The sleeper is killed at the limit with its child; the flood is cut, not stored.
    assert_eq!(status("m-sleeper", "finishes_in_time"), "timed_out");
    assert_eq!(points("m-sleeper"), 3, "{summary}");
    assert_eq!(points("m-flood"), 4, "{summary}");
    // The memory hog dies at the address-space limit (an allocation failure aborts it).
    assert_eq!(status("m-hog", "adds"), "crashed");
    assert_eq!(points("m-hog"), 2, "{summary}");
    let flood_json = std::fs::metadata(reports.join("students/m-flood.json")).unwrap();
    assert!(flood_json.len() < 100_000, "{} bytes", flood_json.len());

    // No environment value of the teacher's, no escape sequence, anywhere a person reads.
    let mut everything = shown.clone();
    for entry in std::fs::read_dir(reports.join("students")).unwrap() {
        everything += &std::fs::read_to_string(entry.unwrap().path()).unwrap();
    }
    everything += &std::fs::read_to_string(reports.join("summary.json")).unwrap();
    everything += &csv;
    assert!(
        !everything.contains("hunter2"),
        "the teacher's token leaked"
    );
    assert!(
        !everything.contains('\x1b'),
        "an escape sequence got through"
    );
    assert!(
        !everything.contains('\u{202e}'),
        "a bidi override got through"
    );
    let env_said = test_named(&report(reports.join("students/m-env.json")), "adds")["message"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        env_said.contains("token=") && env_said.contains("\\u{202e}"),
        "{env_said}"
    );
    // The reserved names stay the grader's.
    assert!(reports.join("students/summary.json").is_file());
    assert_eq!(
        report(reports.join("summary.json"))["students"]
            .as_array()
            .unwrap()
            .len(),
        15
    );
}

#[test]
fn tests_replaced_in_the_students_own_repository_do_not_count() {
    if !sandbox_or_skip("tests_replaced_in_the_students_own_repository_do_not_count") {
        return;
    }
    let _one = serial();
    let repo = fake_repo(&target());
    let teacher = repo.path();
    let class = tempfile::tempdir().unwrap();
    // The classroom-service set-up: grading runs in the student's repository. The student empties
    // the graded tests and refreshes the checksums there; the untouched stub then passes.
    let own = student(class.path(), "mallory", teacher, None);
    let tests = own.join("exercises/01-basics/1-demo/tests/grade.rs");
    std::fs::write(
        &tests,
        "#[test]\nfn adds() {}\n#[test]\nfn finishes_in_time() {}\n#[test]\nfn does_not_abort() {}\n",
    )
    .unwrap();
    std::fs::create_dir_all(own.join("crates/grader")).unwrap();
    let out = grade(&own, &target(), &["--update-checksums"]);
    assert!(out.status.success(), "{}", text(&out));
    let out = grade(
        &own,
        &target(),
        &["--json", own.join("own.json").to_str().unwrap()],
    );
    assert_eq!(
        out.status.code(),
        Some(0),
        "in their own run: {}",
        text(&out)
    );
    assert_eq!(report(own.join("own.json"))["points"], 4);

    // The judge and the expected values come from the teacher: recorded once...
    let expected = class.path().join("expected.json");
    let out = grader(teacher, &target())
        .arg("--record-expected")
        .arg(&expected)
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out));
    // ...then used from a tree without solutions (the teacher's judge bundle), on the student's
    // repository: the stub scores 0 and the replaced tests are listed as ignored.
    let bundle = class.path().join("bundle");
    clone_repo(teacher, &bundle);
    std::fs::remove_dir_all(bundle.join("solutions")).unwrap();
    let json = class.path().join("mallory.json");
    let out = grader(&bundle, &target())
        .arg("--expected")
        .arg(&expected)
        .arg("--root")
        .arg(&own)
        .arg("--json")
        .arg(&json)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let r = report(json);
    assert_eq!(r["points"], 0, "{r}");
    assert!(
        r["ignored_files"]
            .to_string()
            .contains("exercises/01-basics/1-demo/tests/grade.rs: modified"),
        "{r}"
    );
    // Without solutions and without --expected, there is nothing to judge against: refused.
    let out = grader(&bundle, &target())
        .arg("--root")
        .arg(&own)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    assert!(text(&out).contains("--expected"), "{}", text(&out));
}

#[test]
fn a_build_that_never_ends_is_stopped_at_the_build_time_limit() {
    if !sandbox_or_skip("a_build_that_never_ends_is_stopped_at_the_build_time_limit") {
        return;
    }
    let _one = serial();
    let repo = fake_repo(&target());
    let teacher = repo.path();
    let class = tempfile::tempdir().unwrap();
    let spin = student(class.path(), "spin", teacher, Some(ENDLESS_BUILD));
    let json = class.path().join("spin.json");
    let started = Instant::now();
    let out = grader(teacher, &target())
        .arg("--root")
        .arg(&spin)
        .args(["--build-time-limit", "5", "--json"])
        .arg(&json)
        .output()
        .unwrap();
    assert!(
        started.elapsed() < Duration::from_secs(120),
        "{}",
        text(&out)
    );
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let r = report(json);
    assert_eq!(r["points"], 0);
    let adds = test_named(&r, "adds");
    assert_eq!(adds["status"], "compile_error");
    assert!(
        adds["message"]
            .as_str()
            .unwrap()
            .contains("build time limit of 5 s"),
        "{adds}"
    );
}

#[test]
fn without_a_sandbox_class_grading_refuses_unless_told_otherwise() {
    let _one = serial();
    let repo = fake_repo(&target());
    let teacher = repo.path();
    let class = tempfile::tempdir().unwrap();
    student(class.path(), "alice", teacher, Some(SOLUTION));
    let reports = class.path().join("reports");
    let run = |extra: &[&str]| {
        grader(teacher, &target())
            .arg("--class")
            .arg(class.path())
            .arg("--reports")
            .arg(&reports)
            .args(extra)
            .env("WORKBOOK_BWRAP", "/nonexistent/bwrap")
            .output()
            .unwrap()
    };
    let out = run(&[]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    let said = text(&out);
    assert!(
        said.contains("no sandbox") && said.contains("apt-get install bubblewrap"),
        "{said}"
    );
    assert!(said.contains("--unsafe-no-sandbox"), "{said}");
    assert!(!reports.join("summary.json").exists());

    let out = run(&["--unsafe-no-sandbox", "--time-limit", "3"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let summary = report(reports.join("summary.json"));
    assert_eq!(row(&summary, "alice")["total"], 4, "{summary}");
    assert!(
        summary["judged_by"]
            .as_str()
            .unwrap()
            .contains("WITHOUT A SANDBOX"),
        "{summary}"
    );
    let alice = report(reports.join("students/alice.json"));
    assert!(alice["judged_by"]
        .as_str()
        .unwrap()
        .contains("WITHOUT A SANDBOX"));
}

/// A panic message carrying `what`: it ends up in the student's own feedback.
fn leak(what: &str) -> String {
    format!(
        r#"
pub fn add(_a: i32, _b: i32) -> i32 {{
    let leaked: String = {what};
    panic!("LEAK[{{leaked}}]");
}}
pub fn wait(n: u32) -> u32 {{ n }}
pub fn careful(n: u32) -> u32 {{ 7 * n }}
"#
    )
}

/// Every environment a process of the sandbox can read through /proc.
const ENVIRONS: &str = r#"{
        let mut all = String::new();
        for entry in std::fs::read_dir("/proc").unwrap().flatten() {
            for file in ["environ", "task/1/environ"] {
                if let Ok(bytes) = std::fs::read(entry.path().join(file)) {
                    all += &String::from_utf8_lossy(&bytes).replace('\0', " ");
                }
            }
        }
        all += &String::from_utf8_lossy(&std::fs::read("/proc/self/environ").unwrap_or_default());
        let parent = std::os::unix::process::parent_id();
        all += &String::from_utf8_lossy(&std::fs::read(format!("/proc/{parent}/environ")).unwrap_or_default());
        all
    }"#;

/// Starts processes until the system refuses, each named by `marker`.
fn fork_bomb(marker: &str) -> String {
    format!(
        r#"
pub fn add(a: i32, b: i32) -> i32 {{
    let mut children = Vec::new();
    for _ in 0..5000 {{
        children.push(std::process::Command::new("sh").args(["-c", "sleep 1000", "{marker}"]).spawn().expect("fork"));
    }}
    a + b + children.len() as i32 * 0
}}
pub fn wait(n: u32) -> u32 {{ n }}
pub fn careful(n: u32) -> u32 {{ 7 * n }}
"#
    )
}

/// 3 GiB to /dev/shm, 1 GiB to /, 400 MiB to /tmp, then 3 GiB of touched memory.
const MEMORY_HOG: &str = r#"
pub fn add(a: i32, b: i32) -> i32 {
    use std::io::Write;
    let chunk = vec![7u8; 1 << 20];
    for (path, mib) in [("/dev/shm/hog", 3072), ("/hog", 1024), ("/tmp/hog1", 200), ("/tmp/hog2", 200)] {
        if let Ok(mut f) = std::fs::File::create(path) {
            for _ in 0..mib {
                if f.write_all(&chunk).is_err() { break; }
            }
        }
    }
    let mut hog = vec![1u8; 3 << 30];
    for i in (0..hog.len()).step_by(4096) { hog[i] = 2; }
    a + b + i32::from(hog[hog.len() - 1]) - 1
}
pub fn wait(n: u32) -> u32 { n }
pub fn careful(n: u32) -> u32 { 7 * n }
"#;

#[test]
fn the_sandbox_sees_the_handout_and_limits_each_student() {
    if !sandbox_or_skip("the_sandbox_sees_the_handout_and_limits_each_student") {
        return;
    }
    let _one = serial();
    let repo = fake_repo(&target());
    let teacher = repo.path();
    // Teacher-only material in the teacher's tree: a script and a passage of a README.
    write(
        &teacher.join("scripts/mutants.sh"),
        "#!/bin/sh\n# teacher-only: left out of the handout\necho TEACHER-SCRIPT-BODY\n",
    );
    write(
        &teacher.join("exercises/01-basics/1-demo/README.md"),
        "# Demo\n\nAdd.\n\n<!-- teacher-only -->\nTEACHER-PASSAGE: the answer is a + b\n<!-- /teacher-only -->\n",
    );
    // A hidden test, which calls `add` too.
    let ex = teacher.join("exercises/01-basics/1-demo");
    write(
        &ex.join("tests/hidden.rs"),
        "// HIDDEN-TEST-SOURCE\nuse super::demo::*;\n\n#[test]\nfn adds_negatives() {\n    let s = scenario::start();\n    let a = -(s.pick(\"a\", 1..1000) as i32);\n    let sum = add(a, -4);\n    s.observe(\"sum\", &sum);\n    assert_eq!(sum, a - 4);\n}\n",
    );
    let toml = std::fs::read_to_string(ex.join("exercise.toml")).unwrap();
    write(
        &ex.join("exercise.toml"),
        &format!("{toml}\n[[test]]\nname = \"adds_negatives\"\npoints = 3\nhidden = true\n"),
    );
    let out = grade(teacher, &target(), &["--update-checksums"]);
    assert!(out.status.success(), "{}", text(&out));
    let outside = tempfile::tempdir().unwrap();
    let class = outside.path().join("class");
    let reports = outside.path().join("reports");
    let marker = format!("bomb-{}", std::process::id());

    student(&class, "alice", teacher, Some(SOLUTION));
    student(&class, "bob", teacher, Some(SOLUTION));
    student(
        &class,
        "m-readme",
        teacher,
        Some(&leak(r#"include_str!("../README.md").to_string()"#)),
    );
    student(
        &class,
        "m-script",
        teacher,
        Some(&leak(
            r#"include_str!("../../../../scripts/mutants.sh").to_string()"#,
        )),
    );
    student(
        &class,
        "m-listing",
        teacher,
        Some(&leak(
            r#"std::fs::read_dir("../../../scripts").map(|d| d.flatten().map(|e| e.file_name().to_string_lossy().into_owned()).collect::<Vec<_>>().join(",")).unwrap_or_else(|e| e.to_string())"#,
        )),
    );
    student(
        &class,
        "m-mountinfo",
        teacher,
        Some(&leak(
            r#"std::fs::read_to_string("/proc/self/mountinfo").unwrap()"#,
        )),
    );
    student(&class, "m-environ", teacher, Some(&leak(ENVIRONS)));
    student(
        &class,
        "m-hidden-source",
        teacher,
        Some(&leak(r#"include_str!("../tests/hidden.rs").to_string()"#)),
    );
    student(
        &class,
        "m-macro",
        teacher,
        Some(&format!(
            "{SOLUTION}\n#[macro_export]\nmacro_rules! assert_eq {{ ($($t:tt)*) => {{}} }}\n"
        )),
    );
    student(&class, "m-fork-bomb", teacher, Some(&fork_bomb(&marker)));
    student(&class, "m-memory-hog", teacher, Some(MEMORY_HOG));

    let out: Output = grader(teacher, &target())
        .arg("--class")
        .arg(&class)
        .arg("--reports")
        .arg(&reports)
        .args(["--jobs", "2", "--time-limit", "20"])
        .env("TEACHER_SECRET", "s3cr3t-of-the-teacher")
        .output()
        .unwrap();
    let shown = text(&out);
    assert_eq!(out.status.code(), Some(0), "{shown}");
    let summary = report(reports.join("summary.json"));
    let points = |name: &str| row(&summary, name)["total"].as_u64().unwrap();
    let said = |name: &str| {
        test_named(
            &report(reports.join(format!("students/{name}.json"))),
            "adds",
        )["message"]
            .as_str()
            .unwrap()
            .to_string()
    };
    let status = |name: &str| {
        test_named(
            &report(reports.join(format!("students/{name}.json"))),
            "adds",
        )["status"]
            .as_str()
            .unwrap()
            .to_string()
    };
    // The honest classmates beside the fork bomb and the memory hog keep full marks.
    assert_eq!(points("alice"), 7, "{summary}");
    assert_eq!(points("bob"), 7, "{summary}");
    // A hidden test's feedback shows nothing the student's code printed during it.
    let hidden = test_named(
        &report(reports.join("students/m-environ.json")),
        "adds_negatives",
    )["message"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        hidden.contains("hidden test") && !hidden.contains("LEAK"),
        "{hidden}"
    );
    // A submission that exports macros into the harness of hidden tests is refused.
    assert_eq!(points("m-macro"), 0, "{summary}");
    assert_eq!(status("m-macro"), "compile_error");
    assert!(
        said("m-macro").contains("macro_export"),
        "{}",
        said("m-macro")
    );
    // The handout's README is there, without its teacher-only passage; the teacher-only script is
    // not there at all (so the submission does not compile).
    assert!(
        said("m-readme").contains("LEAK[# Demo"),
        "{}",
        said("m-readme")
    );
    assert_eq!(points("m-readme"), 2, "{summary}");
    assert_eq!(status("m-script"), "compile_error");
    // Hidden tests are not in the tree the student's code is compiled in.
    assert_eq!(status("m-hidden-source"), "compile_error");
    assert_eq!(points("m-hidden-source"), 0, "{summary}");
    assert!(
        !said("m-listing").contains("mutants"),
        "{}",
        said("m-listing")
    );
    // The mount table names no folder of the teacher's.
    let mounts = said("m-mountinfo");
    assert!(mounts.contains("LEAK["), "{mounts}");
    let teacher_path = teacher.display().to_string();
    let target_path = target().display().to_string();
    for private in [
        teacher_path.as_str(),
        target_path.as_str(),
        "/root",
        "rustup",
        "target/",
    ] {
        assert!(!mounts.contains(private), "{private} in {mounts}");
    }
    // No variable of the teacher's can be read from inside, by any path.
    let environ = said("m-environ");
    assert!(
        environ.contains("LEAK[") && environ.contains("PATH="),
        "{environ}"
    );

    // Limits per student, named in the report, never a wrong answer.
    let cgroups = grader::sandbox::cgroups().available();
    if cgroups {
        assert_eq!(status("m-fork-bomb"), "crashed", "{}", said("m-fork-bomb"));
        assert!(
            said("m-fork-bomb").contains("more than 512 processes"),
            "{}",
            said("m-fork-bomb")
        );
        assert_eq!(
            status("m-memory-hog"),
            "crashed",
            "{}",
            said("m-memory-hog")
        );
        assert!(
            said("m-memory-hog").contains("more than 2 GiB"),
            "{}",
            said("m-memory-hog")
        );
        assert!(shown.contains("cgroup"), "{shown}");
        assert_eq!(points("m-memory-hog"), 2, "{summary}");
    } else {
        // A normal user without a delegated cgroup (as on a machine with only cgroup v1): the
        // per-process limits hold (16 GiB of address space, the tmpfs sizes), so the hog's
        // 3 GiB are allowed and its sum may be right; what must hold is that the grader says
        // so, at the start and in the hog's own report, and that the classmates beside it
        // kept full marks (above).
        assert!(shown.contains("NO CGROUPS"), "{shown}");
        let hog = std::fs::read_to_string(reports.join("students/m-memory-hog.json")).unwrap();
        assert!(hog.contains("NO CGROUPS"), "{hog}");
    }
    assert_eq!(points("m-fork-bomb"), 2, "{summary}");
    std::thread::sleep(Duration::from_secs(1));
    assert_eq!(
        processes_mentioning(&marker),
        0,
        "a fork bomb's process outlived its run"
    );

    // Nothing of the teacher's in anything a person reads.
    let mut everything = shown.clone();
    for entry in std::fs::read_dir(reports.join("students")).unwrap() {
        everything += &std::fs::read_to_string(entry.unwrap().path()).unwrap();
    }
    everything += &std::fs::read_to_string(reports.join("summary.json")).unwrap();
    // (The compiler's error names `scripts/mutants.sh`, the path the student wrote; its body is
    // the teacher's.)
    for secret in [
        "s3cr3t-of-the-teacher",
        "TEACHER-PASSAGE",
        "TEACHER-SCRIPT-BODY",
        "HIDDEN-TEST-SOURCE",
    ] {
        assert!(!everything.contains(secret), "{secret} leaked");
    }
}

#[test]
fn without_cgroups_the_grader_says_so_and_a_fork_bomb_still_stops() {
    if !sandbox_or_skip("without_cgroups_the_grader_says_so_and_a_fork_bomb_still_stops") {
        return;
    }
    let _one = serial();
    let repo = fake_repo(&target());
    let teacher = repo.path();
    let outside = tempfile::tempdir().unwrap();
    let class = outside.path().join("class");
    let reports = outside.path().join("reports");
    let marker = format!("nocg-bomb-{}", std::process::id());
    student(&class, "alice", teacher, Some(SOLUTION));
    student(&class, "m-fork-bomb", teacher, Some(&fork_bomb(&marker)));
    let out: Output = grader(teacher, &target())
        .arg("--class")
        .arg(&class)
        .arg("--reports")
        .arg(&reports)
        .args(["--jobs", "2", "--time-limit", "20"])
        .env(grader::cgroup::NO_CGROUPS_ENV, "none")
        .output()
        .unwrap();
    let shown = text(&out);
    assert_eq!(out.status.code(), Some(0), "{shown}");
    assert!(
        shown.contains("warning: sandboxes") && shown.contains("NO CGROUPS"),
        "{shown}"
    );
    let summary = report(reports.join("summary.json"));
    assert!(
        summary["judged_by"].to_string().contains("NO CGROUPS"),
        "{summary}"
    );
    let student = report(reports.join("students/m-fork-bomb.json"));
    assert!(
        student["judged_by"].to_string().contains("NO CGROUPS"),
        "{student}"
    );
    assert_eq!(row(&summary, "alice")["total"], 4, "{summary}");
    assert_eq!(row(&summary, "m-fork-bomb")["total"], 2, "{summary}");
    if grader::sandbox::as_root() {
        // Its own user's process limit stopped it (it cannot tell which limit: `failed`).
        let said = test_named(&student, "adds")["message"].to_string();
        assert!(said.contains("Resource temporarily unavailable"), "{said}");
    }
    std::thread::sleep(Duration::from_secs(1));
    assert_eq!(
        processes_mentioning(&marker),
        0,
        "a process outlived its run"
    );
}

/// A file's name, hostile for each place a name goes: the terminal (a window title, a screen
/// cleared, the cursor sent to the table's first row), Markdown and HTML (a raw HTML block and a
/// heading of its own), a spreadsheet (a formula at the start of a cell).
const TERMINAL_NAME: &str = "z\x1b]0;pwned-title\x07\x1b[2J\x1b[1;1Hrow.rs";
const MARKDOWN_NAME: &str = "notes\n\n<div>raw html</div>\n\n# You got full marks\n.md";
const FORMULA_NAME: &str = "+cmd|' /C calc'!A0.txt";

#[test]
fn hostile_names_reach_every_report_escaped() {
    if !sandbox_or_skip("hostile_names_reach_every_report_escaped") {
        return;
    }
    let _one = serial();
    let repo = fake_repo(&target());
    let teacher = repo.path();
    let outside = tempfile::tempdir().unwrap();
    let class = outside.path().join("class");
    let reports = outside.path().join("reports");
    student(&class, "alice", teacher, Some(SOLUTION));
    // Files never compiled, only listed as changed.
    let mallory = student(&class, "mallory", teacher, Some(SOLUTION));
    for name in [TERMINAL_NAME, MARKDOWN_NAME, FORMULA_NAME] {
        write(&mallory.join(name), "x");
    }
    // A folder name that is a formula: the id in summary.csv.
    student(&class, "=HYPERLINK(x)", teacher, Some(SOLUTION));

    let out = grader(teacher, &target())
        .arg("--class")
        .arg(&class)
        .arg("--reports")
        .arg(&reports)
        .args(["--jobs", "2", "--time-limit", "5"])
        .output()
        .unwrap();
    let shown = text(&out);
    assert_eq!(out.status.code(), Some(0), "{shown}");
    // The terminal: no escape sequence, no bell, every name on its own line of the table.
    assert!(
        !shown.contains('\x1b') && !shown.contains('\x07'),
        "{shown:?}"
    );
    assert!(shown.contains("zrow.rs"), "{shown}");
    assert!(
        !shown
            .lines()
            .any(|l| l.starts_with("# You got") || l.starts_with("<div>")),
        "{shown}"
    );

    let summary = report(reports.join("summary.json"));
    for name in ["alice", "mallory", "_HYPERLINK_x_"] {
        assert_eq!(row(&summary, name)["total"], 4, "{name}: {summary}");
    }
    // JSON keeps the names exactly, escaped by its own rules.
    let ignored = row(&summary, "mallory")["ignored_files"].to_string();
    assert!(ignored.contains("# You got full marks"), "{ignored}");
    assert!(ignored.contains("\\u001b]0;pwned-title"), "{ignored}");

    // Markdown: the name is text, not a heading or an HTML block.
    let md = std::fs::read_to_string(reports.join("students/mallory.md")).unwrap();
    assert!(md.starts_with("# mallory: 4/4 points"), "{md}");
    let headings: Vec<&str> = md.lines().filter(|l| l.starts_with("# ")).collect();
    assert_eq!(headings, ["# mallory: 4/4 points"], "{md}");
    assert!(
        !md.lines().any(|l| l.trim_start().starts_with("# You got")),
        "{md}"
    );
    assert!(!md.contains("<div>") && !md.contains('\x1b'), "{md}");
    assert!(md.contains("You got full marks"), "{md}");
    // HTML: escaped.
    let html = std::fs::read_to_string(reports.join("students/mallory.html")).unwrap();
    assert!(
        !html.contains("<div>raw") && !html.contains('\x1b'),
        "{html}"
    );
    assert!(html.contains("&lt;div&gt;raw html&lt;/div&gt;"), "{html}");

    // CSV: no cell starts a formula (the ignored files' cell starts with the `+` file's name).
    let csv = std::fs::read_to_string(reports.join("summary.csv")).unwrap();
    assert!(!csv.contains('\x1b'), "{csv:?}");
    let cells: Vec<&str> = csv
        .lines()
        .flat_map(|l| l.split(','))
        .map(|c| c.trim_start_matches('"'))
        .collect();
    assert!(
        !cells
            .iter()
            .any(|c| c.starts_with(['=', '+', '-', '@', '\t', '\r'])),
        "{csv}"
    );
    assert!(csv.contains("'=HYPERLINK(x)"), "{csv}");
    assert!(csv.contains("'+cmd|"), "{csv}");
}

#[test]
fn folders_that_make_the_same_name_are_refused_with_both() {
    let _one = serial();
    let repo = fake_repo(&target());
    let teacher = repo.path();
    let outside = tempfile::tempdir().unwrap();
    let class = outside.path().join("class");
    let reports = outside.path().join("reports");
    student(&class, "bob smith", teacher, Some(SOLUTION));
    student(&class, "bob_smith", teacher, Some(STUB));
    let out = grader(teacher, &target())
        .arg("--class")
        .arg(&class)
        .arg("--reports")
        .arg(&reports)
        .args(["--unsafe-no-sandbox", "--time-limit", "3"])
        .output()
        .unwrap();
    let shown = text(&out);
    assert_ne!(out.status.code(), Some(0), "{shown}");
    assert!(
        shown.contains("\"bob smith\"") && shown.contains("\"bob_smith\""),
        "{shown}"
    );
    // Nobody graded, nobody renamed: no feedback that could go to the wrong student.
    assert!(!reports.join("students").exists(), "{shown}");
}

/// The demo's `adds` observing two values (so that a record can be forged between the test's
/// own), and a check of the source the judge makes itself: the library's `combine` is the
/// answer, not to be called.
fn with_two_sums_and_a_source_check(teacher: &Path) {
    let ex = teacher.join("exercises/01-basics/1-demo");
    write(
        &ex.join("tests/grade.rs"),
        &GRADE_RS.replace(
            "    s.observe(\"sum\", &sum);\n",
            "    s.observe(\"sum\", &sum);\n    let more = add(a, 4);\n    s.observe(\"sum with 4\", &more);\n",
        ),
    );
    write(
        &ex.join("exercise.toml"),
        &TOML.replace(
            "name = \"adds\"\npoints = 2\n",
            "name = \"adds\"\npoints = 2\n\n[[test.source]]\nfile = \"src/demo.rs\"\nforbid = { names = [\"combine\"] }\nmessage = \"{file} calls the library's {found}: write the sum yourself\"\n",
        ),
    );
    let out = grade(teacher, &target(), &["--update-checksums"]);
    assert!(out.status.success(), "{}", text(&out));
}

/// Appends `lines` to the judge's log, wherever the process finds it (descriptor 3: the
/// protocol's number is public).
const WRITE_LOG: &str = r#"
fn write_log(lines: &str) {
    use std::io::Write;
    if let Ok(mut log) = std::fs::OpenOptions::new().append(true).open("/proc/self/fd/3") {
        let _ = log.write_all(lines.as_bytes());
    }
}
pub fn wait(n: u32) -> u32 { n }
pub fn careful(n: u32) -> u32 { 7 * n }
"#;

/// The issue's attack: right values from the forbidden library call, and, before the test
/// records anything, the value a source check used to record and the end marker.
const FORGED_SOURCE_KEY: &str = r#"
pub fn add(a: i32, b: i32) -> i32 {
    write_log("{\"observe\":{\"key\":\"library calls in src/demo.rs\",\"value\":[]}}\n\"done\"\n");
    mathlib::combine(a, -b)
}
"#;

/// The right sum forged before the test records its own (wrong) one.
const FORGED_BEFORE: &str = r#"
pub fn add(a: i32, b: i32) -> i32 {
    let key = if b == 3 { "sum" } else { "sum with 4" };
    write_log(&format!("{{\"observe\":{{\"key\":\"{key}\",\"value\":{}}}}}\n", a + b));
    a - b
}
"#;

/// Honest for the first value; the second forged between the test's own records.
const FORGED_BETWEEN: &str = r#"
pub fn add(a: i32, b: i32) -> i32 {
    if b == 3 {
        return a + b;
    }
    write_log(&format!("{{\"observe\":{{\"key\":\"sum with 4\",\"value\":{}}}}}\n", a + b));
    a * b
}
"#;

/// Right sums, then records written after the scenario's end, from a function that runs when
/// the process exits (after the test has recorded everything and its end): a judge that took
/// the last record of a key would let them rewrite the test's.
const FORGED_AFTER: &str = r#"
static RIGHT: std::sync::Mutex<Vec<(&str, i32)>> = std::sync::Mutex::new(Vec::new());
pub fn add(a: i32, b: i32) -> i32 {
    let key = if b == 3 { "sum" } else { "sum with 4" };
    RIGHT.lock().unwrap().push((key, a + b));
    a + b
}
#[used]
#[link_section = ".fini_array"]
static FIX: extern "C" fn() = {
    extern "C" fn fix() {
        let right = RIGHT.lock().map(|r| r.clone()).unwrap_or_default();
        for (key, value) in right {
            write_log(&format!("{{\"observe\":{{\"key\":\"{key}\",\"value\":{value}}}}}\n"));
        }
    }
    fix
};
"#;

#[test]
fn records_forged_in_the_tests_process_gain_nothing() {
    if !sandbox_or_skip("records_forged_in_the_tests_process_gain_nothing") {
        return;
    }
    let _one = serial();
    let repo = fake_repo(&target());
    let teacher = repo.path();
    with_two_sums_and_a_source_check(teacher);
    let outside = tempfile::tempdir().unwrap();
    let class = outside.path().join("class");
    let reports = outside.path().join("reports");
    student(&class, "alice", teacher, Some(SOLUTION));
    let forged = |code: &str| format!("{WRITE_LOG}{code}");
    student(
        &class,
        "m-source-key",
        teacher,
        Some(&forged(FORGED_SOURCE_KEY)),
    );
    student(
        &class,
        "m-library",
        teacher,
        Some(&forged(
            "pub fn add(a: i32, b: i32) -> i32 { mathlib::combine(a, -b) }\n",
        )),
    );
    student(&class, "m-before", teacher, Some(&forged(FORGED_BEFORE)));
    student(&class, "m-between", teacher, Some(&forged(FORGED_BETWEEN)));
    student(&class, "m-after", teacher, Some(&forged(FORGED_AFTER)));
    let out = grader(teacher, &target())
        .arg("--class")
        .arg(&class)
        .arg("--reports")
        .arg(&reports)
        .args(["--jobs", "2", "--time-limit", "10"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let summary = report(reports.join("summary.json"));
    let points = |name: &str| row(&summary, name)["total"].as_u64().unwrap();
    let adds = |name: &str| {
        let r = report(reports.join(format!("students/{name}.json")));
        let t = test_named(&r, "adds");
        (
            t["status"].as_str().unwrap().to_string(),
            t["message"].as_str().unwrap().to_string(),
        )
    };
    // The honest classmate keeps full marks under the judge's source check.
    assert_eq!(points("alice"), 4, "{summary}");
    // Each forger keeps what its honest functions earn (wait, careful) and loses `adds`.
    for (cheat, why) in [
        ("m-source-key", "calls the library's combine"),
        ("m-library", "calls the library's combine"),
        ("m-before", "`sum` was recorded more than once"),
        ("m-between", "`sum with 4` was recorded more than once"),
        ("m-after", "came after the scenario's end"),
    ] {
        assert_eq!(points(cheat), 2, "{cheat}: {summary}");
        let (status, message) = adds(cheat);
        assert_eq!(status, "failed", "{cheat}: {message}");
        assert!(message.contains(why), "{cheat}: {message}");
    }
}

/// Runs Git in `dir` as the student would, with none of the machine's configuration, committing
/// at `date`.
fn student_git(dir: &Path, args: &[&str], date: &str) {
    let out = std::process::Command::new("git")
        .current_dir(dir)
        .args([
            "-c",
            "user.name=s",
            "-c",
            "user.email=s@example.invalid",
            "-c",
            "commit.gpgsign=false",
        ])
        .args(args)
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_COMMITTER_DATE", date)
        .env("GIT_AUTHOR_DATE", date)
        .output()
        .unwrap();
    assert!(out.status.success(), "git {args:?}: {}", text(&out));
}

#[test]
fn a_filter_of_the_students_repository_cannot_pass_a_late_file_for_a_committed_one() {
    if !sandbox_or_skip(
        "a_filter_of_the_students_repository_cannot_pass_a_late_file_for_a_committed_one",
    ) {
        return;
    }
    let _one = serial();
    let repo = fake_repo(&target());
    let teacher = repo.path();
    let outside = tempfile::tempdir().unwrap();
    let class = outside.path().join("class");
    let reports = outside.path().join("reports");
    let before = "2026-12-01T11:00:00+00:00";
    let deadline = "2026-12-01T12:00:00+00:00";
    let edit = "exercises/01-basics/1-demo/src/demo.rs";
    // The honest classmate committed the solution before the deadline.
    let alice = student(&class, "alice", teacher, Some(SOLUTION));
    student_git(&alice, &["init", "-q"], before);
    student_git(&alice, &["add", "-A"], before);
    student_git(&alice, &["commit", "-q", "-m", "done"], before);
    // Each attacker committed the stub before the deadline, wrote the solution afterwards and
    // never committed it, and declared a filter that prints the working-tree file in place of
    // the committed one: in `.git/info/attributes`, or in a file `.git/config` names.
    for (name, attributes_in_config) in [("m-filter-info", false), ("m-filter-config", true)] {
        let dir = student(&class, name, teacher, None);
        student_git(&dir, &["init", "-q"], before);
        student_git(&dir, &["add", "-A"], before);
        student_git(&dir, &["commit", "-q", "-m", "stub"], before);
        std::fs::write(dir.join(edit), SOLUTION).unwrap();
        let late = dir.join(".late");
        std::fs::write(&late, SOLUTION).unwrap();
        let assign = format!("{edit} filter=late diff=late\n");
        let mut config = std::fs::read_to_string(dir.join(".git/config")).unwrap();
        config += &format!(
            "[filter \"late\"]\n\tsmudge = cat {late}\n\tclean = cat\n\trequired = true\n[diff \"late\"]\n\ttextconv = cat {late}\n",
            late = late.display()
        );
        if attributes_in_config {
            let file = dir.join(".git/late-attributes");
            std::fs::write(&file, &assign).unwrap();
            config += &format!("[core]\n\tattributesFile = {}\n", file.display());
        } else {
            write(&dir.join(".git/info/attributes"), &assign);
        }
        std::fs::write(dir.join(".git/config"), config).unwrap();
        // The filter works: Git itself hands out the late file as the committed one.
        let out = std::process::Command::new("git")
            .current_dir(&dir)
            .args(["archive", "--format=tar", "HEAD", edit])
            .env("GIT_CONFIG_NOSYSTEM", "1")
            .env("GIT_CONFIG_GLOBAL", "/dev/null")
            .output()
            .unwrap();
        assert!(
            String::from_utf8_lossy(&out.stdout).contains("a + b"),
            "{name}: the attack's filter did not apply, so this test would prove nothing"
        );
    }
    let out = grader(teacher, &target())
        .arg("--class")
        .arg(&class)
        .arg("--reports")
        .arg(&reports)
        .args(["--deadline", deadline, "--jobs", "2", "--time-limit", "3"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out));
    let summary = report(reports.join("summary.json"));
    let points = |name: &str| row(&summary, name)["total"].as_u64().unwrap();
    assert_eq!(points("alice"), 4, "{summary}");
    for cheat in ["m-filter-info", "m-filter-config"] {
        // The stub, as committed: nothing.
        assert_eq!(points(cheat), 0, "{cheat}: {summary}");
        let r = report(reports.join(format!("students/{cheat}.json")));
        assert!(
            r.to_string()
                .contains("the last commit before the deadline"),
            "{cheat}: {r}"
        );
    }
}
