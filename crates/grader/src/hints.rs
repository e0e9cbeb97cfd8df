//! Hints, two levels per exercise (a nudge, then a near-solution), from the `## ` sections
//! (`## Hint N`, `## 提示 N`) of the exercise's `HINTS.md`, or of its translation beside it
//! (`HINTS.zh-CN.md`, with the same levels) when the student reads Chinese ([`file()`]).
//! `cargo grade 01-1 --hint` shows the next level each time it is run; the levels already shown
//! are remembered in `target/grade/hints.json`, whatever the language.
//!
//! ```
//! let hints = grader::hints::parse("# Hints\n\n## Hint 1\n\nLook up.\n\n## Hint 2\n\nUse x.\n");
//! assert_eq!(hints, vec!["Look up.".to_string(), "Use x.".to_string()]);
//! let dir = std::path::Path::new("no/such/exercise");
//! let (path, translated) = grader::hints::file(dir, grader::lang::Lang::ZhCn);
//! assert_eq!((path, translated), (dir.join("HINTS.md"), false)); // no translation: English
//! ```

use crate::error::{GradeError, Result};
use crate::lang::Lang;
use crate::report::write_atomically;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// The hints file of the exercise in `dir` for `lang`, and whether it is in `lang`: the
/// translation when there is one, else `HINTS.md` (false), so a missing translation costs the
/// student the language, never the hint.
pub fn file(dir: &Path, lang: Lang) -> (PathBuf, bool) {
    let wanted = dir.join(lang.hints_file());
    if lang == Lang::En || wanted.is_file() {
        (wanted, true)
    } else {
        (dir.join(Lang::En.hints_file()), false)
    }
}

/// The hint sections of a `HINTS.md`, in order.
pub fn parse(markdown: &str) -> Vec<String> {
    let mut hints: Vec<String> = Vec::new();
    let mut current: Option<String> = None;
    for line in markdown.lines() {
        if line.starts_with("## ") {
            if let Some(h) = current.take() {
                hints.push(h.trim().to_string());
            }
            current = Some(String::new());
        } else if let Some(h) = current.as_mut() {
            h.push_str(line);
            h.push('\n');
        }
    }
    if let Some(h) = current {
        hints.push(h.trim().to_string());
    }
    hints
}

/// Which hint level to show for `id`: `asked` when given, else one past the last shown. Records
/// the level shown in `state` (a JSON file). Returns (level from 1, how many there are, text).
pub fn next(
    hints_md: &Path,
    state: &Path,
    id: &str,
    asked: Option<usize>,
) -> Result<(usize, usize, String)> {
    let text = std::fs::read_to_string(hints_md).map_err(|e| GradeError::io(hints_md, e))?;
    let hints = parse(&text);
    if hints.is_empty() {
        return Err(GradeError::BadSpec {
            path: hints_md.to_path_buf(),
            message: "no '## Hint' sections".into(),
        });
    }
    let mut shown: BTreeMap<String, usize> = std::fs::read_to_string(state)
        .ok()
        .and_then(|s| serde_json::from_str(&s).ok())
        .unwrap_or_default();
    let level = asked
        .unwrap_or_else(|| shown.get(id).copied().unwrap_or(0) + 1)
        .clamp(1, hints.len());
    let seen = shown.entry(id.to_string()).or_default();
    *seen = (*seen).max(level);
    let json = serde_json::to_string_pretty(&shown).expect("a map of counts serialises");
    write_atomically(state, json.as_bytes())?;
    Ok((level, hints.len(), hints[level - 1].clone()))
}
