//! Stage 3 of grading a submission: compiling it, in the sandbox.
//!
//! The compiler run is the one Cargo made for the handout's stub ([`crate::handout`]), replayed
//! on the submission's tree: the same flags, the same compiled dependencies, so nothing but the
//! exercise crate is built. Its paths are moved to the sandbox's (`/workbook` for the tree,
//! `/judge/deps` for the dependencies, `/judge/rust` for the toolchain, `/judge/out` for the
//! output); incremental compilation and coloured diagnostics are turned off. The compiler is not
//! student code, but the student's code steers it (`include_str!` of any path, `#[path]`
//! modules), so it runs confined too: it can read the handout and this submission, nothing else.
//!
//! ```
//! use grader::compile::rewrite_args;
//! let args: Vec<String> = ["--out-dir", "/t/debug/deps", "-C", "incremental=/t/i", "-L",
//!     "dependency=/t/debug/deps", "--json=diagnostic-rendered-ansi", "-C", "debuginfo=2", "--test"]
//!     .map(String::from).to_vec();
//! let moved = rewrite_args(&args, &[("/t/debug/deps".into(), "/judge/deps".into())],
//!     "/judge/out", None);
//! assert_eq!(moved, ["--out-dir", "/judge/out", "-L", "dependency=/judge/deps",
//!     "-C", "debuginfo=0", "-C", "strip=debuginfo", "--test"]);
//! ```

use crate::cargo::Invocation;
use crate::error::Result;
use crate::handout::Handout;
use crate::sandbox::{Confinement, Ended, Jail, Limits};
use crate::slot::Slot;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// Inside the sandbox.
pub const TREE: &str = "/workbook";
const DEPS: &str = "/judge/deps";
const RUST: &str = "/judge/rust";
const OUT: &str = "/judge/out";
const NATIVE: &str = "/judge/native";

/// A compiler run's result.
#[derive(Clone, Debug)]
pub enum Compiled {
    /// The executable, on the host.
    Built(PathBuf),
    /// Every error the compiler reported (escaped), or why it stopped.
    Failed(String),
}

/// How long a compiler run may take, unless the command line says otherwise.
pub const BUILD_TIME_LIMIT: Duration = Duration::from_secs(600);

/// Compiles `unit` (an exercise's test harness or one of its programs) on the tree of `slot`,
/// in `confinement`, into `slot.out`. `drop_extern` names a crate whose `--extern` is removed
/// (a program links the student's file directly, not the exercise's library).
pub fn compile(
    confinement: &Confinement,
    handout: &Handout,
    slot: &Slot,
    unit: &Invocation,
    drop_extern: Option<&str>,
    wall: Duration,
) -> Result<Compiled> {
    compile_with(
        confinement,
        handout,
        slot,
        unit,
        drop_extern,
        wall,
        &Extra::default(),
    )
}

/// What a compiler run of the judge's own (a hidden tests' harness, or the exercise's library
/// alone) adds: folders mounted read-only (host, inside), and the file it makes, when it is not
/// the executable the unit names.
#[derive(Clone, Debug, Default)]
pub struct Extra {
    /// Folders mounted read-only, (host, inside).
    pub mounts: Vec<(PathBuf, String)>,
    /// The file the run makes in the output folder.
    pub output: Option<String>,
}

/// [`compile`] with [`Extra`] mounts and output.
pub fn compile_with(
    confinement: &Confinement,
    handout: &Handout,
    slot: &Slot,
    unit: &Invocation,
    drop_extern: Option<&str>,
    wall: Duration,
    extra: &Extra,
) -> Result<Compiled> {
    let mut jail = Jail::new(Limits::for_builds(wall));
    let sandboxed = confinement.is_sandboxed();
    let place = |host: &Path, inside: &str| -> PathBuf {
        if sandboxed {
            PathBuf::from(inside)
        } else {
            host.to_path_buf()
        }
    };
    let tree = place(&slot.tree, TREE);
    let out = place(&slot.out, OUT);
    let deps = place(&handout.deps, DEPS);
    jail.ro(&slot.tree, TREE)
        .ro(&handout.deps, DEPS)
        .ro(&handout.sysroot, RUST)
        .rw(&slot.out, OUT);
    // Paths in the recorded run, from the most specific: the target's deps folder (the curated
    // copy stands in for it), native library folders, the staged tree.
    let mut moves: Vec<(String, String)> = Vec::new();
    let target_deps = handout.target.join("debug").join("deps");
    for dir in [target_deps, handout.target.join("release").join("deps")] {
        moves.push((path_str(&dir), path_str(&deps)));
    }
    for (i, (dir, view)) in handout.native.iter().enumerate() {
        let inside = format!("{NATIVE}/{i}");
        jail.ro(view, &inside);
        moves.push((path_str(dir), path_str(&place(view, &inside))));
    }
    for (host, inside) in &extra.mounts {
        jail.ro(host, inside);
        moves.push((path_str(host), path_str(&place(host, inside))));
    }
    moves.push((path_str(&slot.out), path_str(&out)));
    moves.push((path_str(&handout.tree), path_str(&tree)));
    let args = rewrite_args(&unit.args, &moves, &path_str(&out), drop_extern);
    for (key, value) in &unit.env {
        if key.starts_with("CARGO_") && key != "CARGO_TARGET_TMPDIR" {
            jail.env(key, rewrite(value, &moves));
        }
    }
    jail.cwd = tree.clone();
    let rustc = place(&handout.sysroot, RUST).join("bin").join("rustc");
    let finished = confinement.run(&jail, &rustc, &args)?;
    let errors = diagnostics(&finished.stderr.text());
    let executable = slot.out.join(extra.output.clone().unwrap_or_else(|| {
        format!(
            "{}{}",
            unit.arg("--crate-name").unwrap_or_default(),
            codegen_value(&unit.args, "extra-filename").unwrap_or_default()
        )
    }));
    Ok(match finished.ended {
        Ended::Exited(0) if executable.is_file() => Compiled::Built(executable),
        Ended::TimedOut => Compiled::Failed(format!(
            "the compiler was stopped after the build time limit of {} s (a macro or a constant that never finishes expanding?)",
            wall.as_secs()
        )),
        ended => Compiled::Failed(if errors.is_empty() {
            let said = crate::escape::text(finished.stderr.text().trim(), 4000);
            format!("the compiler failed ({ended:?}): {said}")
        } else {
            errors.join("\n")
        }),
    })
}

fn path_str(p: &Path) -> String {
    p.to_string_lossy().into_owned()
}

/// The value of `-C key=value` in `args`.
pub fn codegen_value<'a>(args: &'a [String], key: &str) -> Option<&'a str> {
    let prefix = format!("{key}=");
    args.windows(2)
        .find(|w| w[0] == "-C" && w[1].starts_with(&prefix))
        .map(|w| &w[1][prefix.len()..])
}

/// `value` with each `(from, to)` path prefix replaced (the first that applies).
fn rewrite(value: &str, moves: &[(String, String)]) -> String {
    for (from, to) in moves {
        if let Some(pos) = value.find(from.as_str()) {
            let after = &value[pos + from.len()..];
            if after.is_empty() || after.starts_with('/') || after.starts_with(':') {
                return format!("{}{to}{after}", &value[..pos]);
            }
        }
    }
    value.to_string()
}

/// The recorded arguments, replayed elsewhere: paths moved, output to `out`, no incremental
/// cache, plain (uncoloured) diagnostics, no debug information (the judge reads no backtrace,
/// and a test binary with its dependencies' debug information is 200 MB to write and link), and
/// without `--extern drop_extern=...`.
pub fn rewrite_args(
    args: &[String],
    moves: &[(String, String)],
    out: &str,
    drop_extern: Option<&str>,
) -> Vec<String> {
    let mut result = Vec::new();
    let mut i = 0;
    while i < args.len() {
        let a = &args[i];
        let next = args.get(i + 1);
        match a.as_str() {
            "--out-dir" => {
                result.extend(["--out-dir".to_string(), out.to_string()]);
                i += 2;
                continue;
            }
            "-C" if next.is_some_and(|n| n.starts_with("incremental=")) => {
                i += 2;
                continue;
            }
            "-C" if next.is_some_and(|n| n.starts_with("debuginfo=")) => {
                result.extend(["-C", "debuginfo=0", "-C", "strip=debuginfo"].map(String::from));
                i += 2;
                continue;
            }
            "--extern"
                if drop_extern
                    .is_some_and(|d| next.is_some_and(|n| n.split('=').next() == Some(d))) =>
            {
                i += 2;
                continue;
            }
            _ if a.starts_with("--json=") => {
                i += 1;
                continue;
            }
            _ => result.push(rewrite(a, moves)),
        }
        i += 1;
    }
    result
}

/// The rendered text of every error in rustc's JSON diagnostics, escaped.
fn diagnostics(stderr: &str) -> Vec<String> {
    #[derive(serde::Deserialize)]
    struct Diagnostic {
        level: String,
        rendered: Option<String>,
    }
    stderr
        .lines()
        .filter_map(|l| serde_json::from_str::<Diagnostic>(l).ok())
        .filter(|d| d.level == "error")
        .filter_map(|d| d.rendered)
        .map(|r| crate::escape::text(r.trim_end(), 16 * 1024))
        .collect()
}

/// `error[E0308]: mismatched types --> src/x.rs:3:5`: the first error, one line.
pub fn first_error(errors: &str) -> String {
    let mut lines = errors.lines().filter(|l| !l.trim().is_empty());
    let head = lines.next().unwrap_or("unknown error").trim().to_string();
    match lines.next() {
        Some(at) if at.trim_start().starts_with("-->") => format!("{head} {}", at.trim()),
        _ => head,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn paths_move_only_at_component_boundaries() {
        let moves = vec![("/t/deps".to_string(), "/judge/deps".to_string())];
        assert_eq!(
            rewrite("dependency=/t/deps", &moves),
            "dependency=/judge/deps"
        );
        assert_eq!(
            rewrite("workbook=/t/deps/libworkbook-1.rlib", &moves),
            "workbook=/judge/deps/libworkbook-1.rlib"
        );
        assert_eq!(rewrite("/t/depsother/x", &moves), "/t/depsother/x");
    }

    #[test]
    fn externs_of_the_exercise_library_can_be_dropped() {
        let args: Vec<String> = [
            "--extern",
            "ex_a=/t/libex_a.rlib",
            "--extern",
            "workbook=/t/w",
        ]
        .map(String::from)
        .to_vec();
        assert_eq!(
            rewrite_args(&args, &[], "/o", Some("ex_a")),
            ["--extern", "workbook=/t/w"]
        );
    }

    #[test]
    fn diagnostics_keep_errors_only() {
        let stderr = "{\"$message_type\":\"diagnostic\",\"level\":\"warning\",\"rendered\":\"w\"}\n{\"$message_type\":\"diagnostic\",\"level\":\"error\",\"rendered\":\"error[E0277]: x\\n --> src/a.rs:1:1\"}\nnot json\n";
        assert_eq!(diagnostics(stderr), ["error[E0277]: x\n --> src/a.rs:1:1"]);
        assert_eq!(
            first_error("error[E0277]: x\n --> src/a.rs:1:1"),
            "error[E0277]: x --> src/a.rs:1:1"
        );
    }
}
