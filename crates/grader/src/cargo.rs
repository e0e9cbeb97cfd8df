//! Running Cargo for the grader: with a clean environment, its progress shown as it comes, its
//! JSON messages read (compiler errors, built artefacts), and its verbose `Running` lines read
//! back as the exact compiler invocations (which the judge replays in a sandbox, see
//! [`crate::compile`]).
//!
//! ```
//! let line = "     Running `CARGO_PKG_NAME=ex CARGO_MANIFEST_DIR=/w/ex /t/bin/rustc --crate-name ex 'a b'`";
//! let run = grader::cargo::Invocation::parse(line).unwrap();
//! assert_eq!(run.program, "/t/bin/rustc");
//! assert_eq!(run.args, ["--crate-name", "ex", "a b"]);
//! assert_eq!(run.var("CARGO_PKG_NAME"), Some("ex"));
//! ```

use crate::error::{GradeError, Result};
use serde::{Deserialize, Serialize};
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

/// Removes what `cargo run` sets for the program it runs (the grader's own package name,
/// manifest folder, `OUT_DIR`, ...) from an inner cargo's environment. Build scripts that declare
/// `rerun-if-env-changed` on such a variable (ring does) would otherwise see it change between
/// `cargo grade` and a plain `cargo build`, and rebuild, with everything that depends on them, on
/// every grade. What the user set (`CARGO_HOME`, `CARGO_TARGET_DIR`, `CARGO_BUILD_*`,
/// `CARGO_PROFILE_*`, `RUSTFLAGS`, ...) is kept.
pub fn clean_cargo_env(cmd: &mut Command) {
    for (key, _) in std::env::vars_os() {
        let Some(key) = key.to_str() else { continue };
        if set_by_cargo_run(key) {
            cmd.env_remove(key);
        }
    }
}

/// Whether `cargo run` sets `key` for the program it runs (see the Cargo book, "Environment
/// variables Cargo sets for crates").
pub fn set_by_cargo_run(key: &str) -> bool {
    key.starts_with("CARGO_PKG_")
        || key.starts_with("CARGO_BIN_EXE_")
        || matches!(
            key,
            "CARGO_MANIFEST_DIR"
                | "CARGO_MANIFEST_PATH"
                | "CARGO_MANIFEST_LINKS"
                | "CARGO_CRATE_NAME"
                | "CARGO_BIN_NAME"
                | "CARGO_PRIMARY_PACKAGE"
                | "CARGO_TARGET_TMPDIR"
                | "CARGO_RUSTC_CURRENT_DIR"
                | "OUT_DIR"
        )
}

/// The cargo that runs the grader (`CARGO`), or the one on the `PATH`, with a clean environment.
pub fn command() -> Command {
    let program = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let mut cmd = Command::new(program);
    clean_cargo_env(&mut cmd);
    cmd
}

/// One compiler run, as Cargo's `-vv` prints it: the variables it sets, the program, the
/// arguments.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Invocation {
    /// `KEY=value` set for the run.
    pub env: Vec<(String, String)>,
    /// The compiler.
    pub program: String,
    /// Its arguments.
    pub args: Vec<String>,
}

impl Invocation {
    /// Reads a `Running `...`` line of `cargo -vv`; `None` for any other line.
    pub fn parse(line: &str) -> Option<Self> {
        let inner = line.trim().strip_prefix("Running `")?.strip_suffix('`')?;
        let words = shlex::split(inner)?;
        let mut env = Vec::new();
        let mut rest = words.into_iter().peekable();
        while let Some(word) = rest.peek() {
            match word.split_once('=') {
                Some((key, value))
                    if !key.is_empty()
                        && key
                            .bytes()
                            .all(|b| b.is_ascii_uppercase() || b.is_ascii_digit() || b == b'_') =>
                {
                    env.push((key.to_string(), value.to_string()));
                    rest.next();
                }
                _ => break,
            }
        }
        let mut program = rest.next()?;
        // A `RUSTC_WRAPPER` (sccache) runs the compiler it is given: the compiler is the program.
        let is_rustc = |p: &str| Path::new(p).file_name().is_some_and(|n| n == "rustc");
        if !is_rustc(&program) && rest.peek().is_some_and(|next| is_rustc(next)) {
            program = rest.next()?;
        }
        Some(Self {
            env,
            program,
            args: rest.collect(),
        })
    }

    /// The value of `key` in the run's environment.
    pub fn var(&self, key: &str) -> Option<&str> {
        self.env
            .iter()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    /// The value after `flag` (`--crate-name x` or `--crate-name=x`).
    pub fn arg(&self, flag: &str) -> Option<&str> {
        let prefixed = format!("{flag}=");
        self.args.iter().enumerate().find_map(|(i, a)| {
            if a == flag {
                self.args.get(i + 1).map(String::as_str)
            } else {
                a.strip_prefix(&prefixed)
            }
        })
    }
}

/// What a cargo build produced.
#[derive(Debug, Default)]
pub struct Built {
    /// Cargo's exit status was success.
    pub success: bool,
    /// Executables it reported (`compiler-artifact` with an `executable`), with whether each is
    /// a test harness.
    pub executables: Vec<(PathBuf, bool)>,
    /// Every compiler error, rendered without colours.
    pub errors: Vec<String>,
    /// Cargo's own stderr, when it failed before the compiler could say anything.
    pub stderr: String,
    /// The compiler invocations it printed (with `-vv`).
    pub invocations: Vec<Invocation>,
}

/// Runs `cmd` (a cargo command with `--message-format=json`), copying its progress to stderr
/// when `show`, and reads what it built.
pub fn build(mut cmd: Command, show: bool, tty_width: Option<usize>) -> Result<Built> {
    if let Some(width) = tty_width {
        // Cargo draws its bar only on a terminal; its stderr is our pipe, which we copy to the
        // terminal, so ask for the bar explicitly.
        cmd.env("CARGO_TERM_PROGRESS_WHEN", "always")
            .env("CARGO_TERM_PROGRESS_WIDTH", width.to_string());
    }
    let mut child = cmd
        .stdin(Stdio::null())
        .stderr(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .map_err(GradeError::Cargo)?;
    let stderr_pipe = child.stderr.take();
    let stderr = std::thread::spawn(move || {
        let mut copy = Vec::new();
        if let Some(pipe) = stderr_pipe {
            forward_stderr(pipe, show, tty_width.is_some(), &mut copy);
        }
        String::from_utf8_lossy(&copy).into_owned()
    });
    let mut stdout = String::new();
    if let Some(mut pipe) = child.stdout.take() {
        let _ = pipe.read_to_string(&mut stdout);
    }
    let status = child.wait().map_err(GradeError::Cargo)?;
    let stderr = stderr.join().unwrap_or_default();
    #[derive(Deserialize)]
    struct Line {
        reason: String,
        #[serde(default)]
        executable: Option<PathBuf>,
        #[serde(default)]
        profile: Option<Profile>,
        #[serde(default)]
        message: Option<Diagnostic>,
    }
    #[derive(Deserialize)]
    struct Profile {
        test: bool,
    }
    #[derive(Deserialize)]
    struct Diagnostic {
        level: String,
        rendered: Option<String>,
    }
    let mut built = Built {
        success: status.success(),
        invocations: stderr.lines().filter_map(Invocation::parse).collect(),
        ..Default::default()
    };
    for line in stdout.lines() {
        let Ok(line) = serde_json::from_str::<Line>(line) else {
            continue;
        };
        match line.reason.as_str() {
            "compiler-artifact" => {
                if let Some(exe) = line.executable {
                    built
                        .executables
                        .push((exe, line.profile.is_some_and(|p| p.test)));
                }
            }
            "compiler-message" => {
                if let Some(d) = line.message.filter(|d| d.level == "error") {
                    built
                        .errors
                        .extend(d.rendered.map(|r| crate::escape::text(&r, 64 * 1024)));
                }
            }
            _ => {}
        }
    }
    built.stderr = stderr;
    Ok(built)
}

/// Copies cargo's stderr to ours as it comes (when `show`), keeping a copy in `copy`. Lines that
/// say nothing new on every grade (`Finished`, `Executable`, `Fresh`, `Running` with `-vv`) are
/// not shown. On a terminal each line first clears the one cargo's progress bar drew.
fn forward_stderr(mut pipe: impl Read, show: bool, tty: bool, copy: &mut Vec<u8>) {
    use std::io::Write;
    let mut buf = [0u8; 4096];
    let mut pending: Vec<u8> = Vec::new();
    let mut drew_bar = false;
    loop {
        let n = match pipe.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        copy.extend_from_slice(&buf[..n]);
        if !show {
            continue;
        }
        pending.extend_from_slice(&buf[..n]);
        let mut err = std::io::stderr().lock();
        while let Some(end) = pending.iter().position(|&b| b == b'\n' || b == b'\r') {
            let segment: Vec<u8> = pending.drain(..=end).collect();
            let newline = segment[end] == b'\n';
            let text = String::from_utf8_lossy(&segment[..end]);
            let word = text.trim_start();
            let quiet = word.is_empty()
                || [
                    "Finished",
                    "Executable",
                    "Fresh",
                    "Blocking",
                    "Running",
                    "Dirty",
                    "[",
                ]
                .iter()
                .any(|w| word.starts_with(w));
            if quiet && (newline || word.is_empty()) {
                continue;
            }
            if tty {
                let _ = write!(err, "\r\x1b[2K{text}");
                drew_bar = !newline;
                if newline {
                    let _ = writeln!(err);
                }
            } else if newline {
                let _ = writeln!(err, "{text}");
            }
        }
        let _ = err.flush();
    }
    if drew_bar {
        eprint!("\r\x1b[2K");
    }
}

/// The toolchain folder (`rustc --print sysroot`) of the compiler `program`.
pub fn sysroot(program: &str, cwd: &Path) -> Result<PathBuf> {
    let out = Command::new(program)
        .args(["--print", "sysroot"])
        .current_dir(cwd)
        .output()
        .map_err(GradeError::Cargo)?;
    let text = String::from_utf8_lossy(&out.stdout).trim().to_string();
    if !out.status.success() || text.is_empty() {
        return Err(GradeError::Cargo(std::io::Error::other(format!(
            "`{program} --print sysroot` failed"
        ))));
    }
    Ok(PathBuf::from(text))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verbose_lines_parse_with_quoted_arguments() {
        let line = r#"     Running `CARGO=/c CARGO_PKG_DESCRIPTION='Exercise 01-1: fix' LD_LIBRARY_PATH='/t/deps:/r/lib' /r/bin/rustc --crate-name ex01_1 --check-cfg 'cfg(feature, values("cuda"))' --test -C metadata=ce5a --extern workbook=/t/deps/libworkbook-7c.rlib`"#;
        let run = Invocation::parse(line).unwrap();
        assert_eq!(run.var("CARGO_PKG_DESCRIPTION"), Some("Exercise 01-1: fix"));
        assert_eq!(run.program, "/r/bin/rustc");
        assert_eq!(run.arg("--crate-name"), Some("ex01_1"));
        assert!(run
            .args
            .contains(&r#"cfg(feature, values("cuda"))"#.to_string()));
        assert_eq!(Invocation::parse("   Compiling workbook v0.1.0"), None);
    }
}
