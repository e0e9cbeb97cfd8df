//! The book's pages as a learner meets them (issue 43): structure, glossary links, links and
//! anchors in both editions, and no listing lost.
//!
//! Each check reads `book/src/SUMMARY.md` and every page it lists, expands `{{#include ...}}` as
//! mdBook 0.5 does (whole files, `:anchor`, `:start:end` line ranges, nested includes relative to
//! the including file), and collects every problem, each naming its page, before failing once
//! with the whole list. Nothing here runs mdBook: the whole file takes well under a second.
//!
//! Definitions the checks share:
//! - **word**: a run of non-whitespace characters holding at least one letter or digit, counted
//!   over the page after include expansion, without HTML comments, HTML tags, link targets
//!   (`](...)`) and the hidden `# ` lines of Rust blocks (what the reader sees: prose, listings
//!   and outputs).
//! - **prose**: the page outside fenced code blocks, headings, formulas (`\\( \\)`, `\\[ \\]`),
//!   HTML tags and comments, inline code (except for the `sim:N` forms, which count inside it)
//!   and the text of links that do not point at the glossary.
//! - **anchor** of a page: the id mdBook 0.5 gives each heading (its text without markup,
//!   lower-cased, spaces to `-`, every character but letters, digits, `-` and `_` dropped, `-1`,
//!   `-2`... on repeats), an explicit `{#id}` on a heading, and every `id="..."` in its HTML.
//!
//! - **speaker notes** (issue 48): the page's last block, `<div class="speaker-notes">` ...
//!   `</div>` on lines of their own, for whoever teaches from the book; hidden from readers
//!   (book/theme/speaker-notes.css, shown by the presenter's toggle), so they are not part of
//!   what the checks below call the page: they count toward no word total, reading time, section
//!   or first use of a glossary term (their links are checked with the rest).
//!
//! The page structure a learner needs (`every_page_is_one_a_learner_can_finish`, the conventions
//! of issues 43 and 48), on every page but the glossary:
//! - speaker notes at the end of the page (nothing after them), one block, holding the bullets
//!   [`NOTES_LABELS`] in that order, each with at least [`NOTES_MIN_WORDS`] words after its label;
//! - at most [`MAX_WORDS`] words;
//! - the first line `# Title`, the next non-blank line `*Reading time: about N minutes.*` with N
//!   within a minute (or a fifth, whichever is more) of ceil(words / [`WORDS_PER_MINUTE`]);
//! - the first `##` section is `## Before you start`, with bullets starting `- **Builds on:**`,
//!   `- **Rust you will meet:**`, `- **Afterwards you can:**`, in that order;
//! - `## Key ideas` with 4 to 6 bullets (`- ` or `* ` at the start of a line), before
//!   `## Check your understanding` with 3 to 5 numbered questions (`1. ` at the start of a line),
//!   each followed, before the next, by `<details><summary>Answer</summary>` ... `</details>`;
//! - the first use in prose of each glossary term (a form of [`TERMS`], case-insensitive, whole
//!   words, a space matching any whitespace) is a link to `glossary.md#id`.
//!
//! It is `#[ignore]`d until the split book lands (issue 43): remove the attribute then, and
//! `cargo test -p workbook --test book` runs it with the rest.

use serde_json::Value;
use std::collections::{BTreeMap, BTreeSet, HashMap, HashSet};
use std::path::{Component, Path, PathBuf};

/// The glossary's terms: id in `glossary.md` (`{#id}`) and the forms that count as a use
/// (case-insensitive, whole words). The one list: the table of issue 43's book conventions;
/// `the_glossary_defines_every_term` keeps `glossary.md` in step with it.
const TERMS: &[(&str, &[&str])] = &[
    ("placement", &["placement", "placements"]),
    ("sim-n", &["sim:N", "sim:1", "sim:2", "sim:3", "sim:4"]),
    ("host", &["host"]),
    ("device", &["device", "devices"]),
    ("ledger", &["ledger", "transfer ledger"]),
    ("phase", &["phase", "phases"]),
    ("kernel", &["kernel", "kernels"]),
    ("stream", &["stream", "streams"]),
    ("pinned-memory", &["pinned memory", "pinned"]),
    ("csr", &["CSR"]),
    ("scatter", &["scatter"]),
    ("gather", &["gather"]),
    ("seed", &["seed", "seeds"]),
    ("fan-out", &["fan-out"]),
    ("batch", &["batch", "batches", "mini-batch", "mini-batches"]),
    ("replica", &["replica", "replicas"]),
    ("rank", &["rank", "ranks"]),
    ("world-size", &["world size"]),
    ("collective", &["collective", "collectives"]),
    ("all-reduce", &["all-reduce", "all-reduces"]),
    ("ring", &["ring"]),
    ("barrier", &["barrier", "barriers"]),
    ("shard", &["shard", "shards"]),
    ("bucket", &["bucket", "buckets"]),
    ("nccl", &["NCCL"]),
    ("gloo", &["gloo"]),
    ("mpi", &["MPI"]),
    ("epoch", &["epoch", "epochs"]),
    ("stub", &["stub", "stubs"]),
    ("move", &["move", "moves", "moved", "moving"]),
    ("copy", &["copy", "copies"]),
    ("gamma", &["γ"]),
    ("aggregate", &["⊕"]),
    ("phi", &["φ"]),
];

/// The glossary term whose forms count inside inline code too.
const CODE_TERM: &str = "sim-n";

/// The longest page, in words (BOOK-CONVENTIONS: "at most about 3,000 rendered words").
const MAX_WORDS: usize = 3000;
/// Reading speed behind the reading-time line: N = ceil(words / 180).
const WORDS_PER_MINUTE: usize = 180;

/// A page's speaker notes (issue 48): the block's first and last lines.
const NOTES_OPEN: &str = "<div class=\"speaker-notes\">";
const NOTES_CLOSE: &str = "</div>";
/// The bullets of a page's speaker notes, in order: what to say, what to put on screen, the
/// question students ask there (with its answer), what can go wrong in the room and what to do.
const NOTES_LABELS: [&str; 4] = [
    "**Say:**",
    "**Show:**",
    "**Students ask:**",
    "**If it goes wrong:**",
];
/// The fewest words after each label: a bullet that says something.
const NOTES_MIN_WORDS: usize = 8;

const GLOSSARY: &str = "glossary.md";
/// The mark of the students' handout's note that stands for the teachers' pages
/// (`cargo grade --make-handout`, crates/grader/src/handout_export.rs): a note, not a learner's
/// page, and any anchor into it is accepted (the teacher's copy has the headings).
const HANDOUT_NOTE: &str = "<!-- handout-note -->";
/// What [`anchors`] gives a handout note: every anchor.
const ANY_ANCHOR: &str = "*";

fn repo() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn src() -> PathBuf {
    repo().join("book/src")
}

fn fail_on(what: &str, problems: &[String]) {
    assert!(
        problems.is_empty(),
        "{} problem(s) with {what}:\n{}",
        problems.len(),
        problems.join("\n")
    );
}

// ---------------------------------------------------------------------------------------------
// Reading the book

/// The pages SUMMARY.md lists, in its order (file names relative to book/src).
fn summary_pages() -> Vec<String> {
    let text = std::fs::read_to_string(src().join("SUMMARY.md"))
        .expect("book/src/SUMMARY.md");
    let mut pages = Vec::new();
    for line in text.lines() {
        if let Some(at) = line.find("](") {
            let rest = &line[at + 2..];
            if let Some(end) = rest.find(')') {
                let target = rest[..end].trim();
                if !target.is_empty() && !pages.iter().any(|p| p == target) {
                    pages.push(target.to_string());
                }
            }
        }
    }
    assert!(!pages.is_empty(), "SUMMARY.md lists no page");
    pages
}

/// One page of the book, read and expanded.
struct Page {
    name: String,
    /// After include expansion, as mdBook renders it.
    text: String,
    /// Every include, as `path:anchor` (anchored) or `path` (whole file or lines), `path`
    /// relative to book/src.
    includes: Vec<String>,
}

fn read_page(name: &str, problems: &mut Vec<String>) -> Option<Page> {
    let path = src().join(name);
    let Ok(raw) = std::fs::read_to_string(&path) else {
        problems.push(format!(
            "{name}: listed in SUMMARY.md but there is no such file"
        ));
        return None;
    };
    let mut includes = Vec::new();
    let text =
        expand_includes(&raw, Path::new(""), name, 0, &mut includes, problems);
    Some(Page {
        name: name.to_string(),
        text,
        includes,
    })
}

/// Expands `{{#include ...}}` as mdBook's `links` preprocessor does; `dir` is the including
/// file's folder relative to book/src (nested includes are relative to their own file).
fn expand_includes(
    text: &str,
    dir: &Path,
    page: &str,
    depth: usize,
    includes: &mut Vec<String>,
    problems: &mut Vec<String>,
) -> String {
    const OPEN: &str = "{{#include ";
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = rest.find(OPEN) {
        // `\{{#include` is mdBook's escape: kept as written, minus the backslash.
        if rest[..at].ends_with('\\') {
            out.push_str(&rest[..at - 1]);
            out.push_str(OPEN);
            rest = &rest[at + OPEN.len()..];
            continue;
        }
        out.push_str(&rest[..at]);
        let after = &rest[at + OPEN.len()..];
        let Some(end) = after.find("}}") else {
            problems.push(format!("{page}: an unclosed {{{{#include"));
            out.push_str(&rest[at..]);
            return out;
        };
        let spec = after[..end].trim();
        rest = &after[end + 2..];
        let (file, selector) = match spec.split_once(':') {
            Some((f, s)) => (f, Some(s)),
            None => (spec, None),
        };
        let rel = normalize(&dir.join(file));
        let rel_name = rel.to_string_lossy().replace('\\', "/");
        let Ok(body) = std::fs::read_to_string(src().join(&rel)) else {
            problems.push(format!("{page}: {{{{#include {spec}}}}}: no such file"));
            continue;
        };
        // mdBook: an anchor unless what comes before a second ':' is empty or a number.
        let anchored = selector.is_some_and(|s| {
            let first = s.split(':').next().unwrap_or("");
            !first.is_empty() && first.parse::<usize>().is_err()
        });
        let content = match selector {
            Some(anchor) if anchored => {
                includes.push(format!("{rel_name}:{anchor}"));
                take_anchored(&body, anchor)
            }
            _ => {
                includes.push(rel_name);
                take_lines(&body, selector.unwrap_or(""))
            }
        };
        if depth < 10 {
            let sub = rel.parent().unwrap_or(Path::new("")).to_path_buf();
            out.push_str(&expand_includes(
                &content,
                &sub,
                page,
                depth + 1,
                includes,
                problems,
            ));
        } else {
            out.push_str(&content);
        }
    }
    out.push_str(rest);
    out
}

/// mdBook's line selection: `a:b` lines a to b (1-based, inclusive), `a:` from a, `:b` to b,
/// `a` line a alone, nothing the whole file.
fn take_lines(body: &str, selector: &str) -> String {
    let mut parts = selector.splitn(2, ':');
    let start = parts.next().and_then(|s| s.parse::<usize>().ok());
    let end = parts.next().map(|s| s.parse::<usize>());
    let lines: Vec<&str> = body.lines().collect();
    let (from, to) = match (start, end) {
        (Some(s), Some(Ok(e))) => (s.saturating_sub(1), e),
        (Some(s), Some(Err(_))) => (s.saturating_sub(1), lines.len()),
        (Some(s), None) => (s.saturating_sub(1), s),
        (None, Some(Ok(e))) => (0, e),
        (None, _) => (0, lines.len()),
    };
    let to = to.min(lines.len());
    lines.get(from.min(to)..to).unwrap_or(&[]).join("\n")
}

/// mdBook's anchored selection: the lines between `ANCHOR: name` and `ANCHOR_END: name`, without
/// the lines of any other anchor's markers.
fn take_anchored(body: &str, anchor: &str) -> String {
    let marker = |line: &str, tag: &str| -> Option<String> {
        let at = line.find(tag)?;
        let name: String = line[at + tag.len()..]
            .trim_start()
            .chars()
            .take_while(|c| c.is_alphanumeric() || *c == '_' || *c == '-')
            .collect();
        Some(name)
    };
    let mut kept = Vec::new();
    let mut inside = false;
    for line in body.lines() {
        if inside {
            match marker(line, "ANCHOR_END:") {
                Some(name) if name == anchor => break,
                Some(_) => {}
                None if marker(line, "ANCHOR:").is_none() => kept.push(line),
                None => {}
            }
        } else if marker(line, "ANCHOR:").as_deref() == Some(anchor) {
            inside = true;
        }
    }
    kept.join("\n")
}

/// `a/../b/./c` -> `b/c`, without touching the file system.
fn normalize(path: &Path) -> PathBuf {
    let mut out: Vec<Component> = Vec::new();
    for c in path.components() {
        match c {
            Component::CurDir => {}
            Component::ParentDir => match out.last() {
                Some(Component::Normal(_)) => {
                    out.pop();
                }
                _ => out.push(c),
            },
            _ => out.push(c),
        }
    }
    out.iter().collect()
}

// ---------------------------------------------------------------------------------------------
// Markdown, as far as the checks need it

/// The page with every fenced code block blanked (its lines kept empty, so line numbers hold).
fn blank_code(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut fence: Option<String> = None;
    for line in text.lines() {
        let trimmed = line.trim_start();
        let ticks: String = trimmed
            .chars()
            .take_while(|&c| c == '`' || c == '~')
            .collect();
        let is_fence = ticks.len() >= 3
            && ticks.chars().all(|c| c == ticks.chars().next().unwrap());
        match &fence {
            Some(open) => {
                if is_fence
                    && ticks.starts_with(open.as_str())
                    && trimmed[ticks.len()..].trim().is_empty()
                {
                    fence = None;
                }
                out.push('\n');
            }
            None if is_fence => {
                fence = Some(ticks);
                out.push('\n');
            }
            None => {
                out.push_str(line);
                out.push('\n');
            }
        }
    }
    out
}

/// Replaces every character of `text[from..to]` but newlines with spaces.
fn blank_range(text: &mut String, from: usize, to: usize) {
    let blanked: String = text[from..to]
        .chars()
        .map(|c| if c == '\n' { '\n' } else { ' ' })
        .collect();
    text.replace_range(from..to, &blanked);
}

/// Blanks everything between `open` and `close` (both included).
fn blank_between(text: &mut String, open: &str, close: &str) {
    let mut from = 0;
    while let Some(at) = text[from..].find(open) {
        let start = from + at;
        let end = match text[start + open.len()..].find(close) {
            Some(e) => start + open.len() + e + close.len(),
            None => text.len(),
        };
        blank_range(text, start, end);
        from = end;
    }
}

/// A heading line: its level, its text (without `{#id}`) and its explicit id.
fn heading(line: &str) -> Option<(usize, String, Option<String>)> {
    let level = line.chars().take_while(|&c| c == '#').count();
    if level == 0 || level > 6 || !line[level..].starts_with(' ') {
        return None;
    }
    let mut text = line[level..]
        .trim()
        .trim_end_matches('#')
        .trim()
        .to_string();
    let mut id = None;
    if text.ends_with('}') {
        if let Some(at) = text.rfind("{#") {
            let attrs = text[at + 2..text.len() - 1].to_string();
            id = attrs.split_whitespace().next().map(str::to_string);
            text = text[..at].trim_end().to_string();
        }
    }
    Some((level, text, id))
}

/// mdBook 0.5's id for a heading (`id_from_content` on the heading's text without markup).
fn slug(heading_text: &str) -> String {
    let mut plain = String::new();
    for seg in segments(heading_text) {
        match seg.kind {
            Kind::Text(t) | Kind::Code(t) => plain.push_str(&t),
            Kind::Link { text, .. } => plain.push_str(&text),
            Kind::Tag { .. } => {}
        }
    }
    plain
        .replace('*', "")
        .trim()
        .to_lowercase()
        .chars()
        .filter_map(|c| {
            if c.is_alphanumeric() || c == '_' || c == '-' {
                Some(c)
            } else if c.is_whitespace() {
                Some('-')
            } else {
                None
            }
        })
        .collect()
}

/// Every anchor of a page (module docs), given its text outside code, with each heading's text
/// passed through `translate` first (the zh-CN edition's headings are translated).
fn anchors(
    outside_code: &str,
    translate: &dyn Fn(&str) -> String,
) -> HashSet<String> {
    let mut ids = HashSet::new();
    let mut generated = HashSet::new();
    for line in outside_code.lines() {
        if let Some((_, text, id)) = heading(line) {
            match id {
                Some(id) => {
                    ids.insert(id);
                }
                None => {
                    let base = slug(&translate(&text));
                    let mut id = base.clone();
                    let mut n = 0;
                    while !generated.insert(id.clone()) {
                        n += 1;
                        id = format!("{base}-{n}");
                    }
                    ids.insert(id);
                }
            }
        }
    }
    for seg in segments(outside_code) {
        if let Kind::Tag { id: Some(id), .. } = seg.kind {
            ids.insert(id);
        }
    }
    ids
}

#[derive(Debug)]
enum Kind {
    Text(String),
    Code(String),
    /// A link or an image: its text (markup kept) and target.
    Link {
        text: String,
        target: String,
    },
    /// An HTML tag, with its `href` and `id` attributes.
    Tag {
        href: Option<String>,
        id: Option<String>,
    },
}

#[derive(Debug)]
struct Segment {
    /// Byte offset in the text the segments come from.
    at: usize,
    kind: Kind,
}

/// The inline structure of markdown text (code spans, links, images, HTML tags, text).
fn segments(text: &str) -> Vec<Segment> {
    let bytes = text.as_bytes();
    let mut out = Vec::new();
    let mut plain = String::new();
    let mut plain_at = 0;
    let mut i = 0;
    let flush = |plain: &mut String, plain_at: usize, out: &mut Vec<Segment>| {
        if !plain.is_empty() {
            out.push(Segment {
                at: plain_at,
                kind: Kind::Text(std::mem::take(plain)),
            });
        }
    };
    while i < text.len() {
        let c = bytes[i];
        if c == b'\\' && i + 1 < text.len() && bytes[i + 1].is_ascii_punctuation() {
            if plain.is_empty() {
                plain_at = i;
            }
            plain.push(bytes[i + 1] as char);
            i += 2;
            continue;
        }
        if c == b'`' {
            let run = text[i..].bytes().take_while(|&b| b == b'`').count();
            let ticks = &text[i..i + run];
            if let Some(end) = find_code_end(&text[i + run..], ticks) {
                flush(&mut plain, plain_at, &mut out);
                out.push(Segment {
                    at: i,
                    kind: Kind::Code(text[i + run..i + run + end].to_string()),
                });
                i += run + end + run;
                continue;
            }
        }
        let image = c == b'!' && text[i + 1..].starts_with('[');
        if c == b'[' || image {
            let open = if image { i + 1 } else { i };
            if let Some((label_end, target_end)) = link_at(text, open) {
                flush(&mut plain, plain_at, &mut out);
                let target = text[label_end + 2..target_end].trim();
                // A title (`(url "title")`) is not part of the target.
                let target = target.split_whitespace().next().unwrap_or("");
                out.push(Segment {
                    at: i,
                    kind: Kind::Link {
                        text: text[open + 1..label_end].to_string(),
                        target: target.trim_matches(['<', '>']).to_string(),
                    },
                });
                i = target_end + 1;
                continue;
            }
        }
        if c == b'<'
            && text[i + 1..].starts_with(|n: char| {
                n.is_ascii_alphabetic() || n == '/' || n == '!'
            })
        {
            if let Some(end) = text[i..].find('>') {
                let tag = &text[i..i + end + 1];
                flush(&mut plain, plain_at, &mut out);
                out.push(Segment {
                    at: i,
                    kind: Kind::Tag {
                        href: attribute(tag, "href"),
                        id: attribute(tag, "id"),
                    },
                });
                i += end + 1;
                continue;
            }
        }
        if plain.is_empty() {
            plain_at = i;
        }
        let ch = text[i..].chars().next().unwrap();
        plain.push(ch);
        i += ch.len_utf8();
    }
    flush(&mut plain, plain_at, &mut out);
    out
}

/// Where a code span opened by `ticks` closes: the next run of exactly as many backticks.
fn find_code_end(rest: &str, ticks: &str) -> Option<usize> {
    let mut from = 0;
    while let Some(at) = rest[from..].find(ticks) {
        let start = from + at;
        let run = rest[start..].bytes().take_while(|&b| b == b'`').count();
        if run == ticks.len() {
            return Some(start);
        }
        from = start + run;
    }
    None
}

/// A link whose `[` is at `open`: the offsets of its `]` and of the `)` closing its target.
fn link_at(text: &str, open: usize) -> Option<(usize, usize)> {
    let bytes = text.as_bytes();
    let (mut depth, mut i) = (0usize, open);
    let label_end = loop {
        match bytes.get(i)? {
            b'\\' => i += 1,
            b'`' => {
                let run = text[i..].bytes().take_while(|&b| b == b'`').count();
                i +=
                    run + find_code_end(&text[i + run..], &text[i..i + run])? + run
                        - 1;
            }
            b'[' => depth += 1,
            b']' => {
                depth -= 1;
                if depth == 0 {
                    break i;
                }
            }
            _ => {}
        }
        i += 1;
    };
    if bytes.get(label_end + 1) != Some(&b'(') {
        return None;
    }
    let mut parens = 0usize;
    for (k, &b) in bytes.iter().enumerate().skip(label_end + 1) {
        match b {
            b'(' => parens += 1,
            b')' => {
                parens -= 1;
                if parens == 0 {
                    return Some((label_end, k));
                }
            }
            b'\n' if bytes.get(k + 1) == Some(&b'\n') => return None,
            _ => {}
        }
    }
    None
}

fn attribute(tag: &str, name: &str) -> Option<String> {
    let mut from = 0;
    while let Some(at) = tag[from..].find(name) {
        let start = from + at;
        let before = tag[..start].chars().last();
        let rest = tag[start + name.len()..].trim_start();
        if before.is_some_and(char::is_whitespace) && rest.starts_with('=') {
            let value = rest[1..].trim_start();
            let quote = value.chars().next()?;
            if quote == '"' || quote == '\'' {
                return value[1..]
                    .find(quote)
                    .map(|end| value[1..1 + end].to_string());
            }
        }
        from = start + name.len();
    }
    None
}

fn line_of(text: &str, at: usize) -> usize {
    text[..at.min(text.len())].matches('\n').count() + 1
}

// ---------------------------------------------------------------------------------------------
// Words, structure, glossary

/// Words as the module docs define them.
fn word_count(text: &str) -> usize {
    let mut seen = String::with_capacity(text.len());
    let mut in_rust = false;
    let mut fence: Option<String> = None;
    for line in text.lines() {
        let trimmed = line.trim_start();
        let ticks: String = trimmed
            .chars()
            .take_while(|&c| c == '`' || c == '~')
            .collect();
        if ticks.len() >= 3 {
            match &fence {
                Some(open) if ticks.starts_with(open.as_str()) => fence = None,
                Some(_) => {}
                None => {
                    let info = trimmed[ticks.len()..].trim();
                    in_rust = info.is_empty() || info.starts_with("rust");
                    fence = Some(ticks);
                }
            }
            continue;
        }
        // mdBook hides `# ` lines (and a lone `#`) of Rust blocks.
        if fence.is_some()
            && in_rust
            && (trimmed.starts_with("# ") || trimmed == "#")
        {
            continue;
        }
        seen.push_str(line);
        seen.push('\n');
    }
    blank_between(&mut seen, "<!--", "-->");
    let mut visible = String::with_capacity(seen.len());
    for seg in segments(&seen) {
        match seg.kind {
            Kind::Text(t) | Kind::Code(t) => visible.push_str(&t),
            Kind::Link { text, .. } => visible.push_str(&text),
            Kind::Tag { .. } => visible.push(' '),
        }
        visible.push(' ');
    }
    visible
        .split_whitespace()
        .filter(|w| w.chars().any(char::is_alphanumeric))
        .count()
}

/// The page's prose (module docs), offsets kept.
fn prose(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for line in blank_code(text).lines() {
        if heading(line).is_none() {
            out.push_str(line);
        }
        out.push('\n');
    }
    blank_between(&mut out, "<!--", "-->");
    blank_between(&mut out, "\\\\(", "\\\\)");
    blank_between(&mut out, "\\\\[", "\\\\]");
    out
}

/// Where `form` occurs in `text` (lower-cased), as a whole word (a space in the form matches any
/// run of whitespace), or None.
fn find_form(text: &str, form: &str) -> Option<usize> {
    let words: Vec<&str> = form.split(' ').collect();
    let is_word = |c: char| c.is_alphanumeric() || c == '_';
    let mut from = 0;
    while let Some(at) = text[from..].find(words[0]) {
        let start = from + at;
        let mut end = start + words[0].len();
        let mut ok = true;
        for w in &words[1..] {
            let gap = text[end..]
                .chars()
                .take_while(|c| c.is_whitespace())
                .map(char::len_utf8)
                .sum::<usize>();
            if gap == 0 || !text[end + gap..].starts_with(w) {
                ok = false;
                break;
            }
            end += gap + w.len();
        }
        let before_ok = !text[..start].chars().last().is_some_and(is_word);
        let after_ok = !text[end..].chars().next().is_some_and(is_word);
        if ok && before_ok && after_ok {
            return Some(start);
        }
        from = start + words[0].len();
    }
    None
}

/// The glossary terms whose first use in the page's prose is not a link to the glossary:
/// `(id, form as written, line)`.
fn unlinked_first_uses(text: &str) -> Vec<(String, String, usize)> {
    let prose = prose(text);
    let mut settled: HashSet<&str> = HashSet::new();
    let mut problems = Vec::new();
    for seg in segments(&prose) {
        let (hay, only_code) = match &seg.kind {
            Kind::Text(t) => (t.to_lowercase(), false),
            Kind::Code(c) => (c.to_lowercase(), true),
            Kind::Link { target, .. } => {
                if let Some(id) = target.strip_prefix(&format!("{GLOSSARY}#")) {
                    if let Some((term, _)) = TERMS.iter().find(|(t, _)| *t == id) {
                        settled.insert(term);
                    }
                }
                continue;
            }
            Kind::Tag { .. } => continue,
        };
        // The terms first met in this segment, in the order they occur.
        let mut found: Vec<(usize, &str, &str)> = Vec::new();
        for (id, forms) in TERMS {
            if settled.contains(id) || (only_code && *id != CODE_TERM) {
                continue;
            }
            // The earliest use; at one place, the longest form ("pinned memory", not "pinned").
            if let Some((at, _, form)) = forms
                .iter()
                .filter_map(|f| {
                    find_form(&hay, &f.to_lowercase())
                        .map(|at| (at, std::cmp::Reverse(f.len()), *f))
                })
                .min()
            {
                found.push((at, id, form));
            }
        }
        for (at, id, form) in found {
            settled.insert(id);
            problems.push((
                id.to_string(),
                form.to_string(),
                line_of(&prose, seg.at + at),
            ));
        }
    }
    problems
}

/// The sections of a page: `(level, heading text, body)`, the body up to the next heading of the
/// same or a higher level.
fn sections(text: &str) -> Vec<(usize, String, String)> {
    let outside = blank_code(text);
    let lines: Vec<&str> = text.lines().collect();
    let heads: Vec<(usize, usize, String)> = outside
        .lines()
        .enumerate()
        .filter_map(|(n, l)| heading(l).map(|(level, t, _)| (n, level, t)))
        .collect();
    heads
        .iter()
        .enumerate()
        .map(|(k, (n, level, t))| {
            let end = heads[k + 1..]
                .iter()
                .find(|(_, l, _)| l <= level)
                .map_or(lines.len(), |(m, _, _)| *m);
            (*level, t.clone(), lines[n + 1..end.max(n + 1)].join("\n"))
        })
        .collect()
}

/// A page's text split into what a reader sees (the speaker notes' lines blanked, so that line
/// numbers stay) and the body of each block of speaker notes, with the line it starts on (1-based)
/// and whether it was closed.
fn split_notes(text: &str) -> (String, Vec<(usize, String, bool)>) {
    let outside = blank_code(text);
    let mut reader = String::with_capacity(text.len());
    let mut notes: Vec<(usize, String, bool)> = Vec::new();
    let mut open = false;
    for (n, (line, plain)) in text.lines().zip(outside.lines()).enumerate() {
        if !open && plain.trim() == NOTES_OPEN {
            open = true;
            notes.push((n + 1, String::new(), false));
        } else if open && plain.trim() == NOTES_CLOSE {
            open = false;
            notes.last_mut().expect("opened").2 = true;
        } else if open {
            let body = &mut notes.last_mut().expect("opened").1;
            body.push_str(line);
            body.push('\n');
        } else {
            reader.push_str(line);
        }
        reader.push('\n');
    }
    (reader, notes)
}

/// What is wrong with a page's speaker notes: there must be one block, last on the page, with
/// the four [`NOTES_LABELS`] bullets in order, each saying something.
fn notes_problems(name: &str, text: &str) -> Vec<String> {
    let (_, notes) = split_notes(text);
    let mut problems = Vec::new();
    let Some((line, body, closed)) = notes.first() else {
        return vec![format!(
            "{name}: no speaker notes: end the page with `{NOTES_OPEN}` ... `{NOTES_CLOSE}` \
             (blank lines around the markdown inside) holding the bullets {NOTES_LABELS:?}"
        )];
    };
    if notes.len() > 1 {
        problems.push(format!(
            "{name}: {} blocks of speaker notes (lines {:?}): one, at the end of the page",
            notes.len(),
            notes.iter().map(|(l, ..)| *l).collect::<Vec<_>>()
        ));
    }
    if !closed {
        problems.push(format!(
            "{name}: the speaker notes (line {line}) have no `{NOTES_CLOSE}` on a line of its own"
        ));
    }
    let after = text
        .lines()
        .skip(*line)
        .skip_while(|l| l.trim() != NOTES_CLOSE)
        .skip(1)
        .any(|l| !l.trim().is_empty());
    if *closed && notes.len() == 1 && after {
        problems.push(format!(
            "{name}: the page goes on after its speaker notes (line {line}): they come last"
        ));
    }
    let bullets: Vec<&str> =
        body.lines().filter_map(|l| l.strip_prefix("- ")).collect();
    let mut from = 0;
    for label in NOTES_LABELS {
        match bullets[from..].iter().position(|b| b.starts_with(label)) {
            None => problems.push(format!(
                "{name}: the speaker notes (line {line}) lack the bullet `- {label}` \
                 (in the order {NOTES_LABELS:?})"
            )),
            Some(k) => {
                from += k;
                // The bullet runs on over its continuation lines, up to the next bullet.
                let start = body
                    .lines()
                    .position(|l| l.strip_prefix("- ") == Some(bullets[from]))
                    .expect("a bullet of the body");
                let rest: String = std::iter::once(&bullets[from][label.len()..])
                    .chain(
                        body.lines()
                            .skip(start + 1)
                            .take_while(|l| !l.starts_with("- "))
                            .map(|l| l as &str),
                    )
                    .collect::<Vec<&str>>()
                    .join("\n");
                let words = word_count(&rest);
                if words < NOTES_MIN_WORDS {
                    problems.push(format!(
                        "{name}: the speaker notes' `{label}` says {words} word(s): \
                         at least {NOTES_MIN_WORDS}"
                    ));
                }
                from += 1;
            }
        }
    }
    problems
}

/// The learner's structure of one page (BOOK-CONVENTIONS, "Pages"), as problems; the speaker
/// notes are checked here, and left out of everything else.
fn structure_problems(page: &Page) -> Vec<String> {
    let name = &page.name;
    let mut problems = notes_problems(name, &page.text);
    let (reader, _) = split_notes(&page.text);
    let page = &Page {
        name: page.name.clone(),
        text: reader,
        includes: Vec::new(),
    };
    let words = word_count(&page.text);
    if words > MAX_WORDS {
        problems.push(format!(
            "{name}: {words} rendered words, more than {MAX_WORDS}: split the page"
        ));
    }
    let mut lines = page.text.lines().filter(|l| !l.trim().is_empty());
    let title = lines.next().and_then(heading);
    if title.is_none_or(|(level, ..)| level != 1) {
        problems.push(format!("{name}: the first line is not a `# Title`"));
    }
    let minutes = words.div_ceil(WORDS_PER_MINUTE);
    match lines.next().and_then(reading_time) {
        None => problems.push(format!(
            "{name}: no `*Reading time: about {minutes} minutes.*` right under the title"
        )),
        // The words move with every listing; a minute or a fifth either way is the same promise.
        Some(n) if n.abs_diff(minutes) > 1.max(minutes / 5) => problems.push(format!(
            "{name}: the reading time says {n} minutes, but {words} words are about {minutes}"
        )),
        Some(_) => {}
    }
    let all = sections(&page.text);
    let h2: Vec<&(usize, String, String)> =
        all.iter().filter(|(l, ..)| *l == 2).collect();
    match h2.first() {
        Some((_, t, body)) if t == "Before you start" => {
            let labels = [
                "**Builds on:**",
                "**Rust you will meet:**",
                "**Afterwards you can:**",
            ];
            let bullets: Vec<&str> = body
                .lines()
                .filter_map(|l| l.strip_prefix("- "))
                .filter(|l| l.starts_with("**"))
                .collect();
            let order: Vec<&str> = labels
                .iter()
                .copied()
                .filter(|label| bullets.iter().any(|b| b.starts_with(label)))
                .collect();
            if order.len() != 3 {
                problems.push(format!(
                    "{name}: `## Before you start` lacks the bullet(s) {:?}",
                    labels
                        .iter()
                        .filter(|l| !order.contains(l))
                        .collect::<Vec<_>>()
                ));
            } else {
                let positions: Vec<usize> = labels
                    .iter()
                    .map(|label| {
                        bullets.iter().position(|b| b.starts_with(label)).unwrap()
                    })
                    .collect();
                if !positions.windows(2).all(|w| w[0] < w[1]) {
                    problems.push(format!(
                        "{name}: `## Before you start`'s bullets are not in the order {labels:?}"
                    ));
                }
            }
        }
        _ => problems.push(format!(
            "{name}: the first `##` section is not `## Before you start`"
        )),
    }
    let key = h2.iter().position(|(_, t, _)| t == "Key ideas");
    let check = h2
        .iter()
        .position(|(_, t, _)| t == "Check your understanding");
    match key {
        None => problems.push(format!("{name}: no `## Key ideas`")),
        Some(k) => {
            let bullets = blank_code(&h2[k].2)
                .lines()
                .filter(|l| l.starts_with("- ") || l.starts_with("* "))
                .count();
            if !(4..=6).contains(&bullets) {
                problems.push(format!(
                    "{name}: `## Key ideas` has {bullets} bullet(s), not 4 to 6"
                ));
            }
        }
    }
    match check {
        None => problems.push(format!("{name}: no `## Check your understanding`")),
        Some(c) => {
            if key.is_some_and(|k| k > c) {
                problems.push(format!(
                    "{name}: `## Key ideas` comes after `## Check your understanding`"
                ));
            }
            problems.extend(question_problems(name, &h2[c].2));
        }
    }
    problems
}

/// `*Reading time: about N minutes.*` -> N.
fn reading_time(line: &str) -> Option<usize> {
    let n = line
        .trim()
        .strip_prefix("*Reading time: about ")?
        .strip_suffix(" minutes.*")
        .or_else(|| {
            line.trim()
                .strip_prefix("*Reading time: about ")?
                .strip_suffix(" minute.*")
        })?;
    n.parse().ok()
}

/// 3 to 5 numbered questions, each followed by a collapsed answer.
fn question_problems(name: &str, body: &str) -> Vec<String> {
    let mut problems = Vec::new();
    let outside = blank_code(body);
    let lines: Vec<&str> = outside.lines().collect();
    let starts: Vec<usize> = lines
        .iter()
        .enumerate()
        .filter(|(_, l)| {
            let digits = l.chars().take_while(char::is_ascii_digit).count();
            digits > 0 && l[digits..].starts_with(". ")
        })
        .map(|(n, _)| n)
        .collect();
    if !(3..=5).contains(&starts.len()) {
        problems.push(format!(
            "{name}: `## Check your understanding` has {} numbered question(s), not 3 to 5",
            starts.len()
        ));
    }
    for (k, &start) in starts.iter().enumerate() {
        let end = starts.get(k + 1).copied().unwrap_or(lines.len());
        let answer = lines[start..end].join("\n");
        let open = answer.find("<details><summary>Answer</summary>");
        let close = answer.find("</details>");
        if !matches!((open, close), (Some(o), Some(c)) if o < c) {
            problems.push(format!(
                "{name}: question {} has no `<details><summary>Answer</summary>` ... `</details>` \
                 before the next question",
                k + 1
            ));
        }
    }
    problems
}

// ---------------------------------------------------------------------------------------------
// Links

/// A link's target split into its path and anchor (`page.md#x` -> ("page.md", Some("x"))).
fn split_target(target: &str) -> (&str, Option<&str>) {
    match target.split_once('#') {
        Some((p, a)) => (p, Some(a)),
        None => (target, None),
    }
}

fn is_external(target: &str) -> bool {
    let scheme = target.split_once(':').map(|(s, _)| s);
    scheme.is_some_and(|s| {
        !s.is_empty()
            && s.chars()
                .all(|c| c.is_ascii_alphanumeric() || "+.-".contains(c))
    })
}

/// Every link target of some markdown, outside code: `(byte offset, target)`.
fn link_targets(outside_code: &str) -> Vec<(usize, String)> {
    let mut out = Vec::new();
    let mut todo = vec![(0usize, outside_code.to_string())];
    while let Some((base, text)) = todo.pop() {
        for seg in segments(&text) {
            match seg.kind {
                Kind::Link {
                    text: label,
                    target,
                } => {
                    out.push((base + seg.at, target));
                    // An image inside a link's text: `[![alt](img)](target)`.
                    todo.push((base + seg.at, label));
                }
                Kind::Tag { href: Some(h), .. } => out.push((base + seg.at, h)),
                _ => {}
            }
        }
    }
    out
}

/// The book as the link checks see it: each SUMMARY page's anchors.
struct Book {
    pages: Vec<Page>,
    anchors: HashMap<String, HashSet<String>>,
}

fn read_book(problems: &mut Vec<String>) -> Book {
    let pages: Vec<Page> = summary_pages()
        .iter()
        .filter_map(|name| read_page(name, problems))
        .collect();
    let anchors = pages
        .iter()
        .map(|p| {
            let mut ids = anchors(&blank_code(&p.text), &|t| t.to_string());
            if is_handout_note(p) {
                ids.insert(ANY_ANCHOR.to_string());
            }
            (p.name.clone(), ids)
        })
        .collect();
    Book { pages, anchors }
}

/// A page the students' handout replaced by its note.
fn is_handout_note(page: &Page) -> bool {
    page.text.contains(HANDOUT_NOTE)
}

/// Checks one link target found in `from` (a file whose folder is `dir`, relative to the repo).
/// `anchors` are the book's pages' anchors, by name relative to book/src.
fn check_target(
    from: &str,
    dir: &Path,
    target: &str,
    anchors: &HashMap<String, HashSet<String>>,
    in_book: bool,
    problems: &mut Vec<String>,
) {
    if is_external(target) || target.is_empty() {
        return;
    }
    let (path, anchor) = split_target(target);
    let page = if path.is_empty() {
        from.strip_prefix("book/src/").map(str::to_string)
    } else {
        let rel = normalize(&dir.join(path));
        let rel_s = rel.to_string_lossy().replace('\\', "/");
        let into_book = rel_s.strip_prefix("book/src/").map(str::to_string);
        if !repo().join(&rel).exists() {
            problems
                .push(format!("{from}: link to {target}: no such file ({rel_s})"));
            return;
        }
        match into_book {
            Some(p) if p.ends_with(".md") => Some(p),
            // A figure or another file of the book: it exists; nothing more to check.
            _ => {
                if !in_book || !path.ends_with(".md") {
                    return;
                }
                None
            }
        }
    };
    let Some(page) = page else { return };
    let Some(ids) = anchors.get(&page) else {
        if page != "SUMMARY.md" {
            problems.push(format!(
                "{from}: link to {target}: {page} is not in SUMMARY.md"
            ));
        }
        return;
    };
    if let Some(anchor) = anchor.filter(|a| !a.is_empty()) {
        if !ids.contains(anchor) && !ids.contains(ANY_ANCHOR) {
            problems.push(format!(
                "{from}: link to {target}: {page} has no anchor #{anchor}"
            ));
        }
    }
}

/// The files outside the book that link into it: `(path relative to the repo, markdown)`. A
/// notebook's markdown is its markdown cells' source, one cell after another.
fn outside_files() -> Vec<(String, String)> {
    let root = repo();
    let mut files: Vec<PathBuf> = Vec::new();
    let list = |dir: &Path| -> Vec<PathBuf> {
        let mut v: Vec<PathBuf> = std::fs::read_dir(dir)
            .map(|d| d.filter_map(|e| e.ok().map(|e| e.path())).collect())
            .unwrap_or_default();
        v.sort();
        v
    };
    files.push(root.join("README.md"));
    for dir in ["notebooks", "notebooks/zh-CN", "docs"] {
        files.extend(
            list(&root.join(dir)).into_iter().filter(|p| {
                p.extension().is_some_and(|e| e == "md" || e == "ipynb")
            }),
        );
    }
    let mut todo = vec![root.join("exercises")];
    while let Some(dir) = todo.pop() {
        for p in list(&dir) {
            let name = p.file_name().unwrap().to_string_lossy().into_owned();
            if p.is_dir() {
                todo.push(p);
            } else if (name.starts_with("README") || name.starts_with("HINTS"))
                && name.ends_with(".md")
            {
                files.push(p);
            }
        }
    }
    let mut out = Vec::new();
    for path in files {
        let rel = path
            .strip_prefix(&root)
            .unwrap()
            .to_string_lossy()
            .replace('\\', "/");
        let text =
            std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{rel}: {e}"));
        if rel.ends_with(".ipynb") {
            let nb: Value = serde_json::from_str(&text)
                .unwrap_or_else(|e| panic!("{rel}: {e}"));
            let mut md = String::new();
            for cell in nb["cells"].as_array().into_iter().flatten() {
                if cell["cell_type"] == "markdown" {
                    match &cell["source"] {
                        Value::Array(lines) => lines
                            .iter()
                            .filter_map(Value::as_str)
                            .for_each(|l| md.push_str(l)),
                        Value::String(s) => md.push_str(s),
                        _ => {}
                    }
                    md.push_str("\n\n");
                }
            }
            out.push((rel, md));
        } else {
            out.push((rel, text));
        }
    }
    out
}

// ---------------------------------------------------------------------------------------------
// The zh-CN catalogue

struct Message {
    refs: Vec<String>,
    msgid: String,
    msgstr: String,
    fuzzy: bool,
}

/// The live messages of a PO file (obsolete `#~` ones left out).
fn read_po(text: &str) -> Vec<Message> {
    fn unquote(line: &str) -> String {
        let inner = line.trim().trim_start_matches('"').trim_end_matches('"');
        let mut out = String::new();
        let mut chars = inner.chars();
        while let Some(c) = chars.next() {
            if c == '\\' {
                match chars.next() {
                    Some('n') => out.push('\n'),
                    Some('t') => out.push('\t'),
                    Some(o) => out.push(o),
                    None => {}
                }
            } else {
                out.push(c);
            }
        }
        out
    }
    let mut out = Vec::new();
    let mut cur = Message {
        refs: Vec::new(),
        msgid: String::new(),
        msgstr: String::new(),
        fuzzy: false,
    };
    let mut field = 0; // 1 msgid, 2 msgstr
    let mut push = |cur: &mut Message, field: &mut usize| {
        if *field == 2 {
            out.push(std::mem::replace(
                cur,
                Message {
                    refs: Vec::new(),
                    msgid: String::new(),
                    msgstr: String::new(),
                    fuzzy: false,
                },
            ));
        }
        *field = 0;
    };
    for line in text.lines() {
        if line.starts_with("#~") {
            continue;
        }
        if let Some(refs) = line.strip_prefix("#:") {
            push(&mut cur, &mut field);
            cur.refs.extend(
                refs.split_whitespace()
                    .map(|r| r.split(':').next().unwrap().to_string()),
            );
        } else if line.starts_with("#,") {
            push(&mut cur, &mut field);
            cur.fuzzy |= line.contains("fuzzy");
        } else if let Some(rest) = line.strip_prefix("msgid ") {
            push(&mut cur, &mut field);
            cur.msgid = unquote(rest);
            field = 1;
        } else if let Some(rest) = line.strip_prefix("msgstr ") {
            cur.msgstr = unquote(rest);
            field = 2;
        } else if line.starts_with('"') {
            match field {
                1 => cur.msgid.push_str(&unquote(line)),
                2 => cur.msgstr.push_str(&unquote(line)),
                _ => {}
            }
        }
    }
    push(&mut cur, &mut field);
    out
}

/// Explicit heading ids (`{#id}`) in some markdown.
fn explicit_ids(text: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let mut rest = text;
    while let Some(at) = rest.find("{#") {
        let after = &rest[at + 2..];
        let id: String = after
            .chars()
            .take_while(|c| !c.is_whitespace() && *c != '}')
            .collect();
        if !id.is_empty() {
            out.insert(id);
        }
        rest = after;
    }
    out
}

// ---------------------------------------------------------------------------------------------
// The tests

/// Every page (the glossary excepted) is a page a learner can finish: at most [`MAX_WORDS`]
/// words, its reading time, `## Before you start` with its three labels, `## Key ideas` (4 to 6
/// bullets), `## Check your understanding` (3 to 5 questions with collapsed answers), and every
/// glossary term linked to the glossary at its first use in prose.
#[test]
fn every_page_is_one_a_learner_can_finish() {
    let mut problems = Vec::new();
    let book = read_book(&mut problems);
    for page in book
        .pages
        .iter()
        .filter(|p| p.name != GLOSSARY && !is_handout_note(p))
    {
        problems.extend(structure_problems(page));
        let lines: Vec<&str> = page.text.lines().collect();
        // The speaker notes are not prose the reader meets: the first use is in the page.
        let (reader, _) = split_notes(&page.text);
        for (id, form, line) in unlinked_first_uses(&reader) {
            // Line numbers count the page with its includes expanded: quote the line too.
            let quote: String = lines
                .get(line - 1)
                .map_or("", |l| l.trim())
                .chars()
                .take(70)
                .collect();
            problems.push(format!(
                "{}: the first use of '{form}' is not a link to {GLOSSARY}#{id} \
                 (expanded line {line}: \"{quote}\")",
                page.name
            ));
        }
    }
    fail_on("the pages' structure", &problems);
}

/// The glossary is in SUMMARY.md, and has a heading with the explicit id of every term and no
/// id the table does not know.
#[test]
fn the_glossary_defines_every_term() {
    let mut problems = Vec::new();
    let pages = summary_pages();
    if !pages.iter().any(|p| p == GLOSSARY) {
        problems.push(format!("SUMMARY.md does not list {GLOSSARY}"));
    }
    let text = std::fs::read_to_string(src().join(GLOSSARY)).unwrap_or_default();
    let ids: BTreeSet<String> = blank_code(&text)
        .lines()
        .filter_map(heading)
        .filter_map(|(_, _, id)| id)
        .collect();
    for (id, _) in TERMS {
        if !ids.contains(*id) {
            problems.push(format!("{GLOSSARY}: no heading with {{#{id}}}"));
        }
    }
    for id in &ids {
        if !TERMS.iter().any(|(t, _)| t == id) {
            problems.push(format!(
                "{GLOSSARY}: {{#{id}}} is not a term of pages.rs' TERMS"
            ));
        }
    }
    fail_on("the glossary", &problems);
}

/// Every link of every page, and every link into the book from the notebooks, the exercises'
/// READMEs and hints, docs/ and README.md, reaches a file; a link to a page reaches a page
/// SUMMARY.md lists, and its `#anchor` one of that page's anchors.
#[test]
fn every_link_into_and_inside_the_book_resolves() {
    let mut problems = Vec::new();
    let book = read_book(&mut problems);
    for page in &book.pages {
        let outside = blank_code(&page.text);
        let from = format!("book/src/{}", page.name);
        for (at, target) in link_targets(&outside) {
            let mut found = Vec::new();
            check_target(
                &from,
                Path::new("book/src"),
                &target,
                &book.anchors,
                true,
                &mut found,
            );
            problems.extend(found.into_iter().map(|p| {
                p.replacen(&from, &format!("{from}:{}", line_of(&outside, at)), 1)
            }));
        }
    }
    let mut outside_links = 0;
    for (file, text) in outside_files() {
        let dir = Path::new(&file).parent().unwrap().to_path_buf();
        let outside = blank_code(&text);
        for (_, target) in link_targets(&outside) {
            let (path, _) = split_target(&target);
            if is_external(&target) || path.is_empty() {
                continue;
            }
            let rel = normalize(&dir.join(path));
            if rel.starts_with("book/src") {
                outside_links += 1;
                check_target(
                    &file,
                    &dir,
                    &target,
                    &book.anchors,
                    false,
                    &mut problems,
                );
            }
        }
    }
    assert!(
        outside_links > 20,
        "only {outside_links} link(s) into the book found outside it"
    );
    fail_on("links", &problems);
}

/// The zh-CN catalogue keeps every link of the English text: each translated message has the
/// link targets and `{#id}`s of its msgid (a link whose anchor the translation changes must
/// reach an anchor of the zh-CN build), and no translated link names an anchor the zh-CN build
/// lacks (a heading's slug there is the translated heading's).
#[test]
fn zh_cn_translations_keep_links_and_ids() {
    let po_path = repo().join("book/po/zh-CN.po");
    let po = read_po(&std::fs::read_to_string(&po_path).expect("book/po/zh-CN.po"));
    assert!(
        po.len() > 100,
        "only {} messages in {}",
        po.len(),
        po_path.display()
    );
    let translation: HashMap<&str, &str> = po
        .iter()
        .filter(|m| !m.msgstr.is_empty() && !m.fuzzy)
        .map(|m| (m.msgid.as_str(), m.msgstr.as_str()))
        .collect();
    let mut problems = Vec::new();
    let book = read_book(&mut problems);
    // The zh-CN build's anchors: headings translated, then slugged as mdBook does.
    let translate =
        |t: &str| translation.get(t).map_or(t.to_string(), |s| s.to_string());
    let mut zh_anchors: HashMap<String, HashSet<String>> = book
        .pages
        .iter()
        .map(|p| {
            let mut ids = anchors(&blank_code(&p.text), &translate);
            if is_handout_note(p) {
                ids.insert(ANY_ANCHOR.to_string());
            }
            (p.name.clone(), ids)
        })
        .collect();
    for m in &po {
        for id in segments(&m.msgstr)
            .into_iter()
            .filter_map(|s| match s.kind {
                Kind::Tag { id, .. } => id,
                _ => None,
            })
        {
            for r in &m.refs {
                if let Some(ids) = zh_anchors.get_mut(r.trim_start_matches("src/"))
                {
                    ids.insert(id.clone());
                }
            }
        }
    }
    for m in po.iter().filter(|m| !m.msgstr.is_empty()) {
        let what = format!(
            "book/po/zh-CN.po ({}) msgid {:?}",
            m.refs.join(" "),
            m.msgid.chars().take(60).collect::<String>()
        );
        let english: Vec<String> =
            link_targets(&m.msgid).into_iter().map(|(_, t)| t).collect();
        let chinese: Vec<String> = link_targets(&m.msgstr)
            .into_iter()
            .map(|(_, t)| t)
            .collect();
        for t in &english {
            let (path, _) = split_target(t);
            if !chinese.iter().any(|c| c == t || split_target(c).0 == path) {
                problems
                    .push(format!("{what}: the translation drops the link to {t}"));
            }
        }
        for id in explicit_ids(&m.msgid).difference(&explicit_ids(&m.msgstr)) {
            problems.push(format!("{what}: the translation drops {{#{id}}}"));
        }
        for t in &chinese {
            let (path, anchor) = split_target(t);
            let Some(anchor) = anchor.filter(|a| !a.is_empty()) else {
                continue;
            };
            if is_external(t) {
                continue;
            }
            let pages: Vec<String> = if path.is_empty() {
                m.refs
                    .iter()
                    .map(|r| r.trim_start_matches("src/").to_string())
                    .collect()
            } else {
                vec![normalize(Path::new(path)).to_string_lossy().into_owned()]
            };
            for page in pages {
                // Links out of the book (notebooks, exercises) are the English link check's.
                if let Some(ids) = zh_anchors.get(&page) {
                    if !ids.contains(anchor) && !ids.contains(ANY_ANCHOR) {
                        problems.push(format!(
                            "{what}: link to {t}: the zh-CN {page} has no anchor #{anchor} \
                             (give the heading an explicit {{#id}})"
                        ));
                    }
                }
            }
        }
    }
    fail_on("the zh-CN catalogue's links", &problems);
}

/// Nothing lost: every listing and output in book/listings.txt (today's includes, when issue 43
/// began) is still included by a page, or the list says where it went and why.
#[test]
fn no_listing_or_output_is_lost() {
    let list_path = repo().join("book/listings.txt");
    let list = std::fs::read_to_string(&list_path).expect("book/listings.txt");
    let mut problems = Vec::new();
    let book = read_book(&mut problems);
    let included: BTreeSet<&str> = book
        .pages
        .iter()
        .flat_map(|p| p.includes.iter().map(String::as_str))
        .collect();
    // In the students' handout the teachers' pages are a note: their listings are not there.
    let handout = book.pages.iter().any(is_handout_note);
    let mut entries = BTreeMap::new();
    let mut teachers_section = false;
    for (n, line) in list.lines().enumerate() {
        let line = line.trim();
        if let Some(section) = line.strip_prefix('#') {
            teachers_section = section.trim().starts_with("teachers");
            continue;
        }
        if line.is_empty() || (handout && teachers_section) {
            continue;
        }
        let (key, note) = match line.split_once(" | ") {
            Some((k, note)) => (k.trim(), Some(note.trim())),
            None => (line, None),
        };
        if entries.insert(key, note).is_some() {
            problems.push(format!(
                "book/listings.txt:{}: {key} is listed twice",
                n + 1
            ));
        }
        match note {
            None if !included.contains(key) => problems.push(format!(
                "{key}: no page includes it any more (include it, or mark it in \
                 book/listings.txt as `{key} | merged into OTHER: why` or `| removed: why`)"
            )),
            Some(note)
                if !(note.starts_with("merged into ") || note.starts_with("removed: "))
                    || !note.contains(':') =>
            {
                problems.push(format!(
                    "book/listings.txt:{}: '{note}' is neither `merged into OTHER: why` nor \
                     `removed: why`",
                    n + 1
                ))
            }
            Some(note) => {
                if let Some(other) = note.strip_prefix("merged into ").and_then(|r| r.split(':').next()) {
                    if !included.contains(other.trim()) {
                        problems.push(format!(
                            "{key} is merged into {other}, which no page includes"
                        ));
                    }
                }
            }
            None => {}
        }
    }
    assert!(
        entries.len() > 100,
        "only {} entries in book/listings.txt",
        entries.len()
    );
    fail_on("listings and outputs", &problems);
}

// The checks' own parts, on text made to fail them: a check that cannot fail is no check.

#[test]
fn includes_expand_as_mdbook_does() {
    let body = "a\n// ANCHOR: one\nb\n// ANCHOR: two\nc\n// ANCHOR_END: two\n// ANCHOR_END: one\nd";
    assert_eq!(take_anchored(body, "one"), "b\nc");
    assert_eq!(take_anchored(body, "two"), "c");
    assert_eq!(take_anchored(body, "three"), "");
    assert_eq!(take_lines("1\n2\n3\n4", "2:3"), "2\n3");
    assert_eq!(take_lines("1\n2\n3\n4", ":2"), "1\n2");
    assert_eq!(take_lines("1\n2\n3\n4", "3:"), "3\n4");
    assert_eq!(take_lines("1\n2\n3\n4", "3"), "3");
    assert_eq!(take_lines("1\n2\n3\n4", ""), "1\n2\n3\n4");
}

#[test]
fn slugs_are_mdbooks() {
    assert_eq!(
        slug("Lazy layers: a weight that does not exist yet"),
        "lazy-layers-a-weight-that-does-not-exist-yet"
    );
    assert_eq!(
        slug("The `to_device` call, [linked](x.md)"),
        "the-to_device-call-linked"
    );
    assert_eq!(slug("惰性层：还不存在的权重"), "惰性层还不存在的权重");
    let ids = anchors(
        "# A\n## Same\n## Same\n### B {#bee}\n<span id=\"old\"></span>\n",
        &|t| t.to_string(),
    );
    let want: HashSet<String> = ["a", "same", "same-1", "bee", "old"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    assert_eq!(ids, want);
}

#[test]
fn the_first_use_of_a_term_must_be_a_link() {
    let page = "# T {#t}\n\nA [placement](glossary.md#placement) and a placement, then a \
                Device.\n\n```rust\nlet host = 1;\n```\n\nThe `sim:1` box, [the host page](x.md), \
                \\\\( \\gamma \\\\), pinned\n  memory, `host`.\n";
    let found: Vec<(String, String)> = unlinked_first_uses(page)
        .into_iter()
        .map(|(id, form, _)| (id, form))
        .collect();
    let want: Vec<(String, String)> = [
        ("device", "device"),
        ("sim-n", "sim:1"),
        ("pinned-memory", "pinned memory"),
    ]
    .iter()
    .map(|(a, b)| (a.to_string(), b.to_string()))
    .collect();
    assert_eq!(found, want);
}

#[test]
fn the_structure_check_finds_what_is_missing() {
    let good = "# 1.1 Page\n\n*Reading time: about 1 minutes.*\n\n## Before you start\n\n\
                - **Builds on:** nothing.\n- **Rust you will meet:** nothing.\n\
                - **Afterwards you can:** read.\n\n## Content\n\nText.\n\n## Key ideas\n\n\
                - one\n- two\n- three\n- four\n\n## Check your understanding\n\n\
                1. Why?\n\n<details><summary>Answer</summary>\n\nBecause.\n\n</details>\n\n\
                2. How?\n\n<details><summary>Answer</summary>\n\nSo.\n\n</details>\n\n\
                3. What?\n\n<details><summary>Answer</summary>\n\nThat.\n\n</details>\n\n\
                <div class=\"speaker-notes\">\n\n\
                - **Say:** the one sentence that carries this page, said out loud.\n\
                - **Show:** listing 1.1 and its output, then run the test live.\n\
                - **Students ask:** \"Why?\" Because the page says so, in its second\n  section.\n\
                - **If it goes wrong:** with no network, show the saved output instead.\n\n\
                </div>\n";
    let page = |text: &str| Page {
        name: "p.md".into(),
        text: text.into(),
        includes: Vec::new(),
    };
    assert_eq!(structure_problems(&page(good)), Vec::<String>::new());
    let bad = good
        .replace("- **Rust you will meet:** nothing.\n", "")
        .replace("- four\n", "")
        .replace("3. What?\n\n<details><summary>Answer</summary>\n\nThat.\n\n</details>\n", "3. What?\n")
        .replace("about 1 minutes", "about 9 minutes");
    let problems = structure_problems(&page(&bad));
    assert_eq!(problems.len(), 4, "{problems:#?}");
    let long = good.replace("Text.", &"word ".repeat(MAX_WORDS));
    assert!(structure_problems(&page(&long))
        .iter()
        .any(|p| p.contains("rendered words")));
}

/// Speaker notes are required, last, complete, and hidden from every count a reader's page makes.
#[test]
fn speaker_notes_are_required_and_count_for_nothing() {
    let notes = "<div class=\"speaker-notes\">\n\n\
                 - **Say:** the device is part of the value, and a mismatch names its culprit.\n\
                 - **Show:** listing 1.1 and its output; run `cargo test` live in the room.\n\
                 - **Students ask:** \"Is a placement a device?\" No: a placement names\n  \
                 where a tensor lives.\n\
                 - **If it goes wrong:** no GPU in the room: every example runs on `sim:1`.\n\n\
                 </div>\n";
    let body = "# 1.1 Page\n\nA device here.\n\n";
    let with = format!("{body}{notes}");
    assert_eq!(notes_problems("p.md", &with), Vec::<String>::new());
    let (reader, found) = split_notes(&with);
    assert_eq!(found.len(), 1);
    assert_eq!(word_count(&reader), word_count(body));
    // "placement" in the notes is not a first use in prose: only the page's "device" is.
    let uses: Vec<String> = unlinked_first_uses(&reader)
        .into_iter()
        .map(|(id, ..)| id)
        .collect();
    assert_eq!(uses, vec!["device".to_string()]);

    let missing = notes_problems("p.md", body);
    assert!(
        missing.len() == 1 && missing[0].starts_with("p.md: no speaker notes"),
        "{missing:?}"
    );
    let not_last = notes_problems("p.md", &format!("{with}\nMore text.\n"));
    assert!(
        not_last.iter().any(|p| p.contains("goes on after")),
        "{not_last:?}"
    );
    let unclosed = notes_problems("p.md", &with.replace("</div>", ""));
    assert!(
        unclosed.iter().any(|p| p.contains("no `</div>`")),
        "{unclosed:?}"
    );
    let thin = notes_problems(
        "p.md",
        &with.replace("- **Show:** listing 1.1 and its output; run `cargo test` live in the room.", "- **Show:** the listing."),
    );
    assert!(
        thin.len() == 1 && thin[0].contains("`**Show:**` says 2 word(s)"),
        "{thin:?}"
    );
    let unordered = notes_problems("p.md", &with.replace("**Say:**", "**Tell:**"));
    assert!(
        unordered.len() == 1
            && unordered[0].contains("lack the bullet `- **Say:**`"),
        "{unordered:?}"
    );
    // A notes block shown as code (a listing about the markup) is not the page's notes.
    let quoted = format!("{body}```markdown\n{notes}```\n");
    assert!(notes_problems("p.md", &quoted)[0].contains("no speaker notes"));
}

#[test]
fn word_count_sees_what_the_reader_sees() {
    let text = "# Title\n\nTwo [words](https://example.com/a/b) here. <!-- not seen -->\n\n\
                ```rust\n# use hidden::Line;\nlet x = 1;\n```\n\n```text\n# shown\n```\n";
    // Title, Two, words, here., let, x, =? no: '=' has no letter; 1, #? no; shown.
    assert_eq!(word_count(text), 8);
}

#[test]
fn po_messages_are_read_with_their_pages() {
    let po = "#: src/a.md:3 src/b.md\n#, fuzzy\nmsgid \"\"\n\"Two \\\"lines\\\"\\n\"\n\"more\"\n\
              msgstr \"两行\"\n\n#~ msgid \"old\"\n#~ msgstr \"旧\"\n\nmsgid \"x\"\nmsgstr \"\"\n";
    let messages = read_po(po);
    assert_eq!(messages.len(), 2);
    assert_eq!(messages[0].refs, vec!["src/a.md", "src/b.md"]);
    assert_eq!(messages[0].msgid, "Two \"lines\"\nmore");
    assert!(messages[0].fuzzy && !messages[1].fuzzy);
    assert_eq!(messages[1].msgstr, "");
}
