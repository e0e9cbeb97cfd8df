//! Each student's feedback from a class run, to hand back: their points per exercise and test,
//! what each failure said, what was not graded and why, and what to do next, in Markdown and in
//! HTML (one self-contained page, written here rather than through a Markdown crate: it is a
//! heading, a few tables and lists, every text escaped). No path of the teacher's machine
//! appears, and hidden tests keep their points but not their names or messages until released.
//!
//! ```
//! let report = grader::Report::new(grader::Variant::Exercises, std::path::Path::new("alice"), vec![]);
//! let md = grader::feedback::markdown("alice", &report, &Default::default(), false);
//! assert!(md.starts_with("# alice: 0/0 points"));
//! assert_eq!(grader::feedback::escape_html("<a & b>"), "&lt;a &amp; b&gt;");
//! ```

use crate::escape;
use crate::exports::{shown_message, shown_name, Hidden};
use crate::report::Report;
use crate::runner::Status;

/// The feedback as Markdown.
pub fn markdown(name: &str, report: &Report, hidden: &Hidden, released: bool) -> String {
    let mut md = format!(
        "# {}: {}/{} points\n\n",
        escape::markdown(name),
        report.points,
        report.max_points
    );
    if let Some(state) = &report.submission {
        md += &format!("{}\n\n", escape::markdown(&state.describe()));
    }
    for ex in &report.exercises {
        md += &format!(
            "## {} {} — {}/{}\n\n| test | points | result |\n|---|---|---|\n",
            ex.id,
            md_cell(&ex.title),
            ex.points,
            ex.max_points
        );
        let mut messages = Vec::new();
        for (i, t) in ex.tests.iter().enumerate() {
            let shown = shown_name(&ex.id, &t.name, i, hidden, released);
            md += &format!(
                "| {} | {}/{} | {} |\n",
                md_cell(&shown),
                t.points,
                t.max_points,
                t.status.label()
            );
            if t.status != Status::Passed && !t.message.is_empty() {
                messages.push((
                    shown,
                    shown_message(&ex.id, &t.name, &t.message, hidden, released),
                ));
            }
        }
        md.push('\n');
        for (test, message) in messages {
            md += &format!(
                "**{}**\n\n```text\n{}\n```\n\n",
                md_cell(&test),
                escape::markdown_block(&message, usize::MAX)
            );
        }
    }
    for (title, list) in not_graded(report) {
        if !list.is_empty() {
            md += &format!("## {title}\n\n");
            for item in list {
                md += &format!("- {}\n", escape::markdown(item));
            }
            md.push('\n');
        }
    }
    md += &format!("## Next\n\n{}\n", next(report));
    md
}

/// The files of the submission that were not read, and those changed but not graded, with the
/// heading each list gets.
fn not_graded(report: &Report) -> [(&'static str, &Vec<String>); 2] {
    [
        (
            "Not read (the stub was graded instead)",
            &report.refused_files,
        ),
        (
            "Changed but not graded (only the files each exercise asks you to edit are)",
            &report.ignored_files,
        ),
    ]
}

/// The first unfinished exercise and how to work on it, as commands in the student's clone.
fn next(report: &Report) -> String {
    match report.exercises.iter().find(|e| !e.complete()) {
        None if report.exercises.is_empty() => "Nothing was graded.".into(),
        None => "Every graded exercise has full marks.".into(),
        Some(ex) => format!(
            "{} {}: read `exercises/{}/README.md`, edit the `TODO:` markers in `exercises/{}/src/`, then `cargo grade {}` (and `cargo grade {} --hint` for a hint).",
            ex.id, ex.title, ex.path, ex.path, ex.id, ex.id
        ),
    }
}

/// A table cell of the teacher's own text (an exercise's title, a test's name).
fn md_cell(text: &str) -> String {
    text.replace('|', "\\|").replace('\n', " ")
}

/// Text made safe inside HTML ([`escape::html`]).
pub fn escape_html(text: &str) -> String {
    escape::html(text)
}

/// The feedback as one HTML page.
pub fn html(name: &str, report: &Report, hidden: &Hidden, released: bool) -> String {
    let e = escape_html;
    let mut body = format!(
        "<h1>{}: {}/{} points</h1>\n",
        e(name),
        report.points,
        report.max_points
    );
    if let Some(state) = &report.submission {
        body += &format!("<p>{}</p>\n", e(&state.describe()));
    }
    for ex in &report.exercises {
        body += &format!(
            "<h2>{} {} — {}/{}</h2>\n<table>\n<tr><th>test</th><th>points</th><th>result</th><th>message</th></tr>\n",
            e(&ex.id),
            e(&ex.title),
            ex.points,
            ex.max_points
        );
        for (i, t) in ex.tests.iter().enumerate() {
            let message = if t.status == Status::Passed {
                String::new()
            } else {
                shown_message(&ex.id, &t.name, &t.message, hidden, released)
            };
            body += &format!(
                "<tr class=\"{}\"><td>{}</td><td>{}/{}</td><td>{}</td><td><pre>{}</pre></td></tr>\n",
                if t.status == Status::Passed { "pass" } else { "fail" },
                e(&shown_name(&ex.id, &t.name, i, hidden, released)),
                t.points,
                t.max_points,
                e(t.status.label()),
                e(&message)
            );
        }
        body += "</table>\n";
    }
    for (title, list) in not_graded(report) {
        if !list.is_empty() {
            body += &format!("<h2>{}</h2>\n<ul>\n", e(title));
            for item in list {
                body += &format!("<li><code>{}</code></li>\n", e(item));
            }
            body += "</ul>\n";
        }
    }
    body += &format!("<h2>Next</h2>\n<p>{}</p>\n", e(&next(report)));
    format!(
        "<!doctype html>\n<html lang=\"en\"><head><meta charset=\"utf-8\"><title>{}</title>\n<style>body{{font-family:sans-serif;max-width:60em;margin:auto}}table{{border-collapse:collapse}}td,th{{border:1px solid #ccc;padding:.2em .5em;vertical-align:top}}tr.pass td:nth-child(3){{color:#070}}tr.fail td:nth-child(3){{color:#a00}}pre{{white-space:pre-wrap;margin:0}}</style></head>\n<body>\n{body}</body></html>\n",
        e(name)
    )
}
