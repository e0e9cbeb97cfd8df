//! Tests whose verdict is a refusal by the compiler (`compile_fail` in `exercise.toml`): a
//! program that makes a known mistake against the student's API must not compile, and must be
//! refused for that mistake.
//!
//! The program's source holds the mistake under `#[cfg(grade_mistake)]`, beside the right line
//! under `#[cfg(not(grade_mistake))]`. The grader compiles it twice: as it is (the *control*,
//! which must build: a crate broken elsewhere, by a syntax error or an unrelated type error, is
//! not a refusal), and with `--cfg grade_mistake`, which must fail with an error whose first line
//! contains the expected text (an error code, or words of rustc's message) and whose location is
//! in the program. The two builds differ in that line only, so the refusal is the mistake's.
//! Both are the compiler's verdicts, read from its JSON diagnostics by the grader; in a judged
//! run the compiler runs in the sandbox and no process of the student's runs at all. Since the
//! switch reaches every file of the crate, a submitted file that names it (and so could break
//! only the mistake's build, on purpose) fails every such test, by the judge's reading of the
//! file.
//!
//! ```
//! use grader::refusal::{refused_as_expected, verdict};
//! use grader::{messages::Messages, Status};
//! let errors = "error: lifetime may not live long enough\n --> exercises/x/tests/programs/mix.rs:9:21\n  |";
//! assert!(refused_as_expected(errors, "lifetime may not live long enough", "mix"));
//! assert!(!refused_as_expected(errors, "E0277", "mix"));
//! let (status, _) = verdict(Messages::default(), "mix", "E0277", None, None, Some(errors));
//! assert_eq!(status, Status::Failed); // refused, but not for the expected reason
//! let (status, _) = verdict(Messages::default(), "mix", "lifetime may not", None, None, Some(errors));
//! assert_eq!(status, Status::Passed);
//! ```

use crate::messages::Messages;
use crate::runner::Status;

/// The configuration flag that turns a program's mistake on.
pub const MISTAKE_CFG: &str = "grade_mistake";

/// The compiler arguments that turn a program's mistake on.
pub fn mistake_args() -> [String; 2] {
    ["--cfg".to_string(), MISTAKE_CFG.to_string()]
}

/// One error of the compiler's rendered errors (as [`crate::compile`] and [`crate::cargo`] keep
/// them, one after the other): its first line and its first location (`--> file:line:col`).
fn errors(rendered: &str) -> Vec<(&str, &str)> {
    let mut found: Vec<(&str, &str)> = Vec::new();
    for line in rendered.lines() {
        if line.starts_with("error") {
            found.push((line, ""));
        } else if let Some(last) = found.last_mut() {
            if last.1.is_empty() {
                if let Some(at) = line.trim_start().strip_prefix("-->") {
                    last.1 = at.trim();
                }
            }
        }
    }
    found
}

/// Whether one of the compiler's `rendered` errors has `expected` in its first line and points
/// into the source of `program` (`tests/programs/<program>.rs`).
pub fn refused_as_expected(rendered: &str, expected: &str, program: &str) -> bool {
    let source = format!("tests/programs/{program}.rs");
    errors(rendered)
        .iter()
        .any(|(head, at)| head.contains(expected) && at.contains(&source))
}

/// The first of `files` (name, contents) that names the switch of the mistakes.
pub fn names_the_switch<'a>(
    files: impl IntoIterator<Item = (&'a str, &'a str)>,
) -> Option<&'a str> {
    files
        .into_iter()
        .find(|(_, text)| text.contains(MISTAKE_CFG))
        .map(|(name, _)| name)
}

/// The verdict on a `compile_fail` test of `program`, from the compiler's results: `control`
/// and `mistake` are the errors of each build (`None`: it built); `switched` is a submitted file
/// that names the switch.
pub fn verdict(
    messages: Messages,
    program: &str,
    expected: &str,
    switched: Option<&str>,
    control: Option<&str>,
    mistake: Option<&str>,
) -> (Status, String) {
    if let Some(file) = switched {
        return (Status::Failed, messages.names_the_switch(file, MISTAKE_CFG));
    }
    if let Some(errors) = control {
        return (
            Status::Failed,
            messages.control_does_not_compile(program, &crate::compile::first_error(errors)),
        );
    }
    match mistake {
        None => (Status::Failed, messages.mistake_compiles(program, expected)),
        Some(errors) if refused_as_expected(errors, expected, program) => {
            (Status::Passed, String::new())
        }
        Some(errors) => (
            Status::Failed,
            messages.refused_otherwise(program, expected, &crate::compile::first_error(errors)),
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const LIFETIME: &str = "error: lifetime may not live long enough\n --> /workbook/exercises/a/b/tests/programs/mix.rs:9:21\n  |\n9 |   a.add(&b)\n  = note: requirement occurs because of the type `Tensor<'_>`";

    #[test]
    fn the_expected_error_must_be_in_the_program() {
        assert!(refused_as_expected(LIFETIME, "lifetime may not", "mix"));
        assert!(!refused_as_expected(LIFETIME, "lifetime may not", "other"));
        // The same words, but in the student's own file: not the program's mistake.
        let elsewhere = "error: lifetime may not live long enough\n --> src/branded.rs:3:1";
        assert!(!refused_as_expected(elsewhere, "lifetime may not", "mix"));
        // Words of a note are not the error.
        assert!(!refused_as_expected(LIFETIME, "requirement occurs", "mix"));
        let coded = "error[E0277]: `X` is not branded\n  --> tests/programs/mix.rs:2:2\n";
        assert!(refused_as_expected(
            &format!("{LIFETIME}\n{coded}"),
            "E0277",
            "mix"
        ));
    }

    #[test]
    fn a_refusal_passes_only_for_its_mistake_with_a_control_that_builds() {
        let m = Messages::default();
        let syntax =
            "error: expected one of `;` or `}`, found `let`\n --> tests/programs/mix.rs:4:5";
        let pass = verdict(m, "mix", "lifetime may not", None, None, Some(LIFETIME));
        assert_eq!(pass, (Status::Passed, String::new()));
        // It compiles with its mistake: the API accepts it.
        let (status, message) = verdict(m, "mix", "lifetime may not", None, None, None);
        assert_eq!(status, Status::Failed);
        assert!(message.contains("compiles with its mistake"), "{message}");
        // Refused for another reason.
        let (status, message) = verdict(m, "mix", "lifetime may not", None, None, Some(syntax));
        assert_eq!(status, Status::Failed);
        assert!(message.contains("not for the expected reason"), "{message}");
        // The right version does not build either: a broken crate, not a refusal.
        let (status, message) = verdict(
            m,
            "mix",
            "lifetime may not",
            None,
            Some(syntax),
            Some(LIFETIME),
        );
        assert_eq!(status, Status::Failed);
        assert!(message.contains("even without its mistake"), "{message}");
        // A file that tests for the switch.
        let (status, message) = verdict(
            m,
            "mix",
            "lifetime may not",
            Some("src/branded.rs"),
            None,
            Some(LIFETIME),
        );
        assert_eq!(status, Status::Failed);
        assert!(message.contains("grade_mistake"), "{message}");
        assert_eq!(
            names_the_switch([("a.rs", "fn a() {}"), ("b.rs", "#[cfg(grade_mistake)]")]),
            Some("b.rs")
        );
    }
}
