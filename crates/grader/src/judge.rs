//! Stage 5 of grading a submission: the verdict, by the judge, from what the student's run
//! observed, never from what it said.
//!
//! A test passes when its scenario's log ([`scenario::protocol`]) holds every value the
//! reference solution observed under the same challenge, equal within the reference's
//! tolerance, and says the scenario ran to its end. The exit status, stdout and stderr of the
//! student's process decide nothing: they only explain a failure (the student's own assertion
//! message, escaped) and tell a crash from a time-out. A test that builds a program passes when
//! the compiler, confined but not the student's code, built it; one that must be refused, when
//! the compiler refused its mistake as expected ([`crate::refusal`]).
//!
//! ```
//! use grader::judge::verdict;
//! use grader::sandbox::{Captured, Ended, Finished};
//! use scenario::protocol::Log;
//! let reference = Log::parse(b"{\"observe\":{\"key\":\"n\",\"value\":3}}\n\"done\"\n");
//! // A forged libtest line and a clean exit, but no observation: a failure.
//! let forged = Finished {
//!     ended: Ended::Exited(0),
//!     stdout: Captured { bytes: b"test result: ok. 1 passed; 0 failed".to_vec(), dropped: 0 },
//!     stderr: Captured::default(),
//!     log: Captured::default(),
//!     wall: std::time::Duration::ZERO,
//! };
//! let (status, message) = verdict("grade::adds", &reference, &forged);
//! assert_eq!(status, grader::Status::Exited);
//! assert!(message.contains("before the scenario finished"));
//! ```

use crate::runner::{failure_message, Status};
use crate::sandbox::{Ended, Finished};
use scenario::protocol::{compare, Log, Mismatch};

/// How much of a student's own message a verdict quotes.
const QUOTED: usize = 4000;

/// The verdict on graded test `name` (its full path in the harness, `grade::adds`) from its
/// run, against the reference's log.
pub fn verdict(name: &str, reference: &Log, run: &Finished) -> (Status, String) {
    let log = Log::parse(&run.log.bytes);
    let said = student_said(name, run);
    match (compare(reference, &log), run.ended) {
        (Ok(()), _) => (Status::Passed, String::new()),
        // The log was cut at its cap: what is missing was written, then dropped, so neither an
        // early exit nor a missing value explains it.
        (Err(Mismatch::Unfinished | Mismatch::Missing { .. }), _) if run.log.dropped > 0 => (
            Status::Failed,
            format!(
                "the scenario's log passed its limit of {} bytes ({} more were dropped), so its end was lost: the test observes too much (observe a digest of large tensors){}",
                run.log.bytes.len(),
                run.log.dropped,
                quoted(&said)
            ),
        ),
        (Err(_), Ended::TimedOut) => (
            Status::TimedOut,
            format!(
                "killed after the time limit of {} s, with everything it started (an endless loop, a deadlock, or far too much work?)",
                run.wall.as_secs()
            ),
        ),
        (Err(Mismatch::Unfinished), Ended::Signalled(signal)) => (
            Status::Crashed,
            format!(
                "the test process died (signal {signal}) before the scenario finished: an abort, a stack overflow, a memory limit, or a crash in native code{}",
                quoted(&said)
            ),
        ),
        // Forged records: whatever the values, the log cannot be trusted.
        (Err(tampered @ (Mismatch::Duplicate { .. } | Mismatch::AfterEnd { .. })), _) => {
            (Status::Failed, format!("{tampered}{}", quoted(&said)))
        }
        (Err(Mismatch::Unfinished), Ended::Exited(101)) if !said.is_empty() => {
            (Status::Failed, said)
        }
        (Err(Mismatch::Unfinished), Ended::Exited(code)) => (
            Status::Exited,
            format!(
                "the test process ended (exit status {code}) before the scenario finished: your code may have called std::process::exit or ended the process another way{}",
                quoted(&said)
            ),
        ),
        (Err(mismatch), _) => (
            Status::Failed,
            format!(
                "{mismatch}: the values your code produced are not the reference solution's{}",
                quoted(&said)
            ),
        ),
    }
}

fn quoted(said: &str) -> String {
    if said.is_empty() {
        String::new()
    } else {
        format!("\nyour test run said:\n{said}")
    }
}

/// What the student's process said about `name` (its assertion message), escaped; the last lines
/// of stderr when there is none. Shown, never believed.
fn student_said(name: &str, run: &Finished) -> String {
    let stdout = run.stdout.text();
    let message = failure_message(&stdout, name);
    let raw = if message.is_empty() {
        let stderr = run.stderr.text();
        let tail: Vec<&str> = stderr.lines().rev().take(8).collect();
        tail.into_iter().rev().collect::<Vec<_>>().join("\n")
    } else {
        message
    };
    crate::escape::text(raw.trim(), QUOTED)
}

/// The judge's own checks of the submitted source files that `spec` requires: the first that
/// fails, as its message; `None` when all hold. `read` gives a file of the exercise crate (its
/// path relative to the crate) as submitted, `None` when it cannot be read (which fails).
pub fn source_checks(
    spec: &crate::catalog::TestSpec,
    read: impl Fn(&str) -> Option<String>,
) -> Option<String> {
    spec.source
        .iter()
        .find_map(|check| match read(&check.file) {
            None => Some(format!(
                "{} could not be read to check it (a file the judge checks itself)",
                check.file
            )),
            Some(text) => check.run(&text).err(),
        })
}

/// The log a test that builds a program is judged against: it built.
pub fn built_log() -> Log {
    let mut log = Log::default();
    log.observations
        .push(("builds".into(), serde_json::Value::Bool(true), None));
    log.done = true;
    log
}

/// The log a `compile_fail` test is judged against: the compiler refused the mistake
/// ([`crate::refusal`]; the verdict is made from the builds, not from this log).
pub fn refused_log() -> Log {
    let mut log = Log::default();
    log.observations
        .push(("refused".into(), serde_json::Value::Bool(true), None));
    log.done = true;
    log
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sandbox::Captured;
    use std::time::Duration;

    fn run(ended: Ended, log: &str, stdout: &str) -> Finished {
        Finished {
            ended,
            stdout: Captured {
                bytes: stdout.as_bytes().to_vec(),
                dropped: 0,
            },
            stderr: Captured::default(),
            log: Captured {
                bytes: log.as_bytes().to_vec(),
                dropped: 0,
            },
            wall: Duration::from_secs(2),
        }
    }

    fn reference() -> Log {
        Log::parse(b"{\"observe\":{\"key\":\"logits\",\"value\":[0.5,1.5]}}\n\"done\"\n")
    }

    #[test]
    fn matching_values_pass_whatever_the_exit() {
        let log = "{\"observe\":{\"key\":\"logits\",\"value\":[0.5,1.5]}}\n\"done\"\n";
        assert_eq!(
            verdict("t", &reference(), &run(Ended::Exited(0), log, "")).0,
            Status::Passed
        );
        assert_eq!(
            verdict("t", &reference(), &run(Ended::Signalled(6), log, "")).0,
            Status::Passed
        );
    }

    #[test]
    fn a_forged_pass_with_wrong_values_fails_and_quotes_the_student_escaped() {
        let log = "{\"observe\":{\"key\":\"logits\",\"value\":[0.5,2.5]}}\n\"done\"\n";
        let (status, message) = verdict(
            "t",
            &reference(),
            &run(Ended::Exited(0), log, "test result: ok. 1 passed\x1b[2J"),
        );
        assert_eq!(status, Status::Failed);
        assert!(message.contains("`logits` differs"), "{message}");
        assert!(
            !message.contains("1.5"),
            "the reference's value leaked: {message}"
        );
        assert!(!message.contains('\x1b'));
    }

    #[test]
    fn a_panic_is_a_failure_with_the_students_message() {
        let stdout = "---- grade::t stdout ----\nthread 'grade::t' panicked at x.rs:1:1:\nthe logits should be on sim:1\n\nfailures:\n";
        let (status, message) = verdict(
            "grade::t",
            &reference(),
            &run(Ended::Exited(101), "", stdout),
        );
        assert_eq!(status, Status::Failed);
        assert!(message.contains("the logits should be on sim:1"));
    }

    #[test]
    fn a_log_cut_at_its_cap_is_named_not_blamed_on_an_exit() {
        let mut cut = run(
            Ended::Exited(0),
            "{\"observe\":{\"key\":\"other\",\"value\":1}}\n",
            "",
        );
        cut.log.dropped = 4096;
        let (status, message) = verdict("t", &reference(), &cut);
        assert_eq!(status, Status::Failed);
        assert!(message.contains("passed its limit"), "{message}");
        assert!(message.contains("4096 more were dropped"), "{message}");
    }

    #[test]
    fn a_forged_record_fails_even_with_the_right_values() {
        let right = "{\"observe\":{\"key\":\"logits\",\"value\":[0.5,1.5]}}\n";
        let wrong = "{\"observe\":{\"key\":\"logits\",\"value\":[9.5,1.5]}}\n";
        // The same value twice is one observation (nothing forged changed it); the right value
        // forged before the test's own wrong one, or anything after the end, fails.
        let (status, _) = verdict(
            "t",
            &reference(),
            &run(Ended::Exited(0), &format!("{right}{right}\"done\"\n"), ""),
        );
        assert_eq!(status, Status::Passed);
        for forged in [
            format!("{right}{wrong}\"done\"\n"),
            format!("{right}\"done\"\n{right}"),
            format!("{right}\"done\"\n\"done\"\n"),
        ] {
            let (status, message) = verdict("t", &reference(), &run(Ended::Exited(0), &forged, ""));
            assert_eq!(status, Status::Failed, "{forged}");
            assert!(
                message.contains("something else in the test's process"),
                "{message}"
            );
        }
    }

    #[test]
    fn time_outs_and_crashes_are_named() {
        assert_eq!(
            verdict("t", &reference(), &run(Ended::TimedOut, "", "")).0,
            Status::TimedOut
        );
        assert_eq!(
            verdict("t", &reference(), &run(Ended::Signalled(11), "", "")).0,
            Status::Crashed
        );
    }
}
