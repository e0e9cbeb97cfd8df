//! What the grader prints while it works, on stderr, so that a long first build or a slow test
//! never looks like a hang: cargo's own progress (its bar on a terminal, `Compiling ...` lines
//! otherwise), each test's result as it finishes, and a test that runs long announced with its
//! time limit. The table and the summary come at the end, on stdout.
//!
//! ```
//! use grader::progress::Progress;
//! let quiet = Progress::Quiet;
//! assert!(!quiet.shows_cargo());
//! assert!(Progress::live().shows_cargo());
//! ```

use crate::catalog::Exercise;
use crate::lang::Lang;
use crate::messages::{pad, Messages};
use crate::runner::Status;
use std::io::IsTerminal;
use std::time::Duration;

/// How much to show while grading.
#[derive(Clone, Debug)]
pub enum Progress {
    /// Everything, as it happens (one student, in a terminal or a CI log).
    Live {
        /// Whether stderr is a terminal: cargo's progress bar, colours.
        tty: bool,
        /// Put before every line (`alice: `), empty for a student's own run.
        prefix: String,
        /// The language of the lines (a student's own run can ask for zh-CN).
        lang: Lang,
    },
    /// Nothing: a class is graded in parallel and prints one line per student instead.
    Quiet,
}

impl Progress {
    /// Live progress on this process's stderr, in English.
    pub fn live() -> Self {
        Self::live_in(Lang::En)
    }

    /// Live progress on this process's stderr, in `lang`.
    pub fn live_in(lang: Lang) -> Self {
        Progress::Live {
            tty: std::io::stderr().is_terminal(),
            prefix: String::new(),
            lang,
        }
    }

    /// The texts of the lines.
    fn messages(&self) -> Messages {
        match self {
            Progress::Live { lang, .. } => Messages::new(*lang),
            Progress::Quiet => Messages::default(),
        }
    }

    /// Whether cargo's output is copied to stderr.
    pub fn shows_cargo(&self) -> bool {
        matches!(self, Progress::Live { .. })
    }

    /// The width for cargo's progress bar, when stderr is a terminal.
    pub fn cargo_progress_bar(&self) -> Option<usize> {
        match self {
            Progress::Live { tty: true, .. } => Some(
                comfy_table::Table::new()
                    .width()
                    .map_or(80, usize::from)
                    .max(40),
            ),
            _ => None,
        }
    }

    /// A line of progress (with the prefix).
    pub fn line(&self, text: &str) {
        if let Progress::Live { prefix, .. } = self {
            eprintln!("{prefix}{text}");
        }
    }

    /// `grading 01-1 Fix the mismatch`, before its build starts.
    pub fn header(&self, exercise: &Exercise) {
        let messages = self.messages();
        self.line(&messages.grading(&exercise.id, exercise.spec.title_in(messages.lang)));
    }

    /// The build failed.
    pub fn compile_failed(&self, exercise: &Exercise, first_error: &str) {
        self.line(
            &self
                .messages()
                .exercise_does_not_compile(&exercise.id, first_error),
        );
    }

    /// A test is still running after `after`; it is killed at `limit`.
    pub fn still_running(&self, name: &str, after: Duration, limit: Duration) {
        self.line(
            &self
                .messages()
                .still_running(name, after.as_secs(), limit.as_secs()),
        );
    }

    /// A test finished.
    pub fn test_done(&self, name: &str, status: Status, points: u32, ms: u64) {
        let earned = if status == Status::Passed { points } else { 0 };
        self.line(&format!(
            "  {} {earned}/{points}  {name} ({:.1} s)",
            pad(self.messages().status(status), 8),
            ms as f64 / 1000.0
        ));
    }
}
