//! Checks of a student's *source* file, made by the judge on the submitted file, outside the
//! student's process (`crates/grader`), and by the graded tests in a student's own run.
//!
//! A value a test records about its own source file (no `unsafe impl`, the library's sampler not
//! called, no device written in the code) is the same under every challenge: a student's code
//! running in the test's process could write it down in advance. So an exercise declares such
//! checks in its `exercise.toml` (`[[test.source]]`, see [`SourceCheck`]), the judge makes them
//! on the file it graded, and a test passes only when its scenario matches the reference's *and*
//! every one of its source checks holds.
//!
//! ```
//! use scenario::source::{Forbid, SourceCheck};
//! let check = SourceCheck {
//!     file: "src/layer.rs".into(),
//!     forbid: Forbid::UnsafeImpl,
//!     functions: vec![],
//!     allowed: vec![],
//!     message: "{file} still has `unsafe impl {found}`".into(),
//! };
//! assert!(check.run("// unsafe impl Sync for L {}\nstruct L;").is_ok());
//! let err = check.run("struct L;\nunsafe impl Sync for L {}").unwrap_err();
//! assert_eq!(err, "src/layer.rs still has `unsafe impl Sync`");
//! ```

use proc_macro2::{Delimiter, Spacing, TokenStream, TokenTree};
use serde::{Deserialize, Serialize};
use std::str::FromStr;

/// What a source check forbids.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Forbid {
    /// `unsafe impl TRAIT` anywhere in the code (comments left out); `{found}` is the trait.
    UnsafeImpl,
    /// Any of these identifiers in the code (a library's function or type that is this
    /// exercise's answer); `{found}` lists those used.
    Names(Vec<String>),
    /// A device written down in the code (`Device::Cpu`, `Placement::sim(2)`, `accelerator()`,
    /// ...), as `workbook::fixed_device` finds them; `{found}` is the first, with its line.
    FixedDevice,
}

/// One check of one submitted file, as declared in `exercise.toml`:
///
/// ```toml
/// [[test.source]]
/// file = "src/each_rank.rs"
/// forbid = { names = ["DistributedSampler", "epoch_order"] }
/// message = "{file} uses the library's sampler ({found}): write it"
/// ```
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SourceCheck {
    /// The file, relative to the exercise crate (one of its `edit` files).
    pub file: String,
    /// What it must not contain.
    pub forbid: Forbid,
    /// [`Forbid::FixedDevice`] only: look in these functions only (all of the file when empty).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub functions: Vec<String>,
    /// [`Forbid::FixedDevice`] only: functions allowed to write a device (loading from the host).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub allowed: Vec<String>,
    /// The failure message; `{file}` and `{found}` are replaced.
    pub message: String,
}

impl SourceCheck {
    /// Checks `source` (the file's text): `Err(message)` when it holds what is forbidden.
    pub fn run(&self, source: &str) -> Result<(), String> {
        let found = match &self.forbid {
            Forbid::UnsafeImpl => words(source)
                .windows(3)
                .find(|w| w[0] == "unsafe" && w[1] == "impl")
                .map(|w| w[2].clone()),
            Forbid::Names(names) => {
                let words = words(source);
                let used: Vec<&str> = names
                    .iter()
                    .filter(|n| words.contains(n))
                    .map(String::as_str)
                    .collect();
                (!used.is_empty()).then(|| used.join(", "))
            }
            Forbid::FixedDevice => match fixed_devices(source) {
                Err(e) => Some(format!("(the file is not Rust tokens: {e})")),
                Ok(found) => found
                    .into_iter()
                    .find(|f| {
                        let function = f.function.as_deref().unwrap_or_default();
                        (self.functions.is_empty() || self.functions.iter().any(|n| n == function))
                            && !self.allowed.iter().any(|n| n == function)
                    })
                    .map(|f| match &f.function {
                        Some(function) => {
                            format!("{} ({}:{}, in {function})", f.written, self.file, f.line)
                        }
                        None => format!("{} ({}:{})", f.written, self.file, f.line),
                    }),
            },
        };
        match found {
            None => Ok(()),
            Some(found) => Err(self
                .message
                .replace("{file}", &self.file)
                .replace("{found}", &found)),
        }
    }
}

/// The code of `text` without comments, as identifier-like words (string contents included:
/// a forbidden name hidden in a string is still reported, which a student can read and avoid).
pub fn words(text: &str) -> Vec<String> {
    let mut code = String::new();
    let mut rest = text;
    while !rest.is_empty() {
        if let Some(after) = rest.strip_prefix("//") {
            rest = after.find('\n').map_or("", |i| &after[i..]);
        } else if let Some(after) = rest.strip_prefix("/*") {
            rest = after.find("*/").map_or("", |i| &after[i + 2..]);
            code.push(' ');
        } else {
            let Some(c) = rest.chars().next() else { break };
            code.push(c);
            rest = &rest[c.len_utf8()..];
        }
    }
    code.split(|c: char| !(c.is_alphanumeric() || c == '_'))
        .filter(|w| !w.is_empty())
        .map(str::to_string)
        .collect()
}

/// One place where a device is written down (as `workbook::fixed_device::FixedDevice`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Written {
    /// The path as written, without crate prefix: `Device::Cpu`, `accelerator`.
    pub written: String,
    /// The device it names: `cpu`, `cuda:0`, `sim:2`, `cuda`, `accelerator`.
    pub names: String,
    /// The innermost `fn` it is in.
    pub function: Option<String>,
    /// 1-based line.
    pub line: usize,
}

/// Every place in `source` that writes a device down, in order: the same spellings as
/// `workbook::fixed_device::find` (comments and string literals never count). Errs when the text
/// is not Rust tokens.
pub fn fixed_devices(source: &str) -> Result<Vec<Written>, String> {
    let tokens = TokenStream::from_str(source).map_err(|e| e.to_string())?;
    let mut found = Vec::new();
    walk(tokens, None, &mut found);
    Ok(found)
}

fn walk(tokens: TokenStream, function: Option<&str>, found: &mut Vec<Written>) {
    let tokens: Vec<TokenTree> = tokens.into_iter().collect();
    let mut pending_fn: Option<String> = None;
    let mut i = 0;
    while i < tokens.len() {
        match &tokens[i] {
            TokenTree::Group(g) => {
                let body_of = match (g.delimiter(), &pending_fn) {
                    (Delimiter::Brace, Some(_)) => pending_fn.take(),
                    _ => None,
                };
                walk(g.stream(), body_of.as_deref().or(function), found);
                i += 1;
            }
            TokenTree::Punct(p) if p.as_char() == ';' => {
                pending_fn = None;
                i += 1;
            }
            TokenTree::Ident(id) if id == "fn" => {
                if let Some(TokenTree::Ident(name)) = tokens.get(i + 1) {
                    pending_fn = Some(name.to_string());
                }
                i += 1;
            }
            TokenTree::Ident(_) => {
                let (segments, line, next) = path_at(&tokens, i);
                if let Some(names) = names_device(&segments, tokens.get(next)) {
                    let tail = segments.len().saturating_sub(2);
                    let written = if names == "accelerator" {
                        segments[segments.len() - 1].clone()
                    } else {
                        segments[tail..].join("::")
                    };
                    found.push(Written {
                        written,
                        names,
                        function: function.map(str::to_string),
                        line,
                    });
                }
                i = next;
            }
            _ => i += 1,
        }
    }
}

fn path_at(tokens: &[TokenTree], i: usize) -> (Vec<String>, usize, usize) {
    let mut segments = Vec::new();
    let line = tokens[i].span().start().line;
    let mut j = i;
    while let Some(TokenTree::Ident(id)) = tokens.get(j) {
        segments.push(id.to_string());
        let colons = matches!(
            (tokens.get(j + 1), tokens.get(j + 2)),
            (Some(TokenTree::Punct(a)), Some(TokenTree::Punct(b)))
                if a.as_char() == ':' && a.spacing() == Spacing::Joint && b.as_char() == ':'
        );
        if colons && matches!(tokens.get(j + 3), Some(TokenTree::Ident(_))) {
            j += 3;
        } else {
            return (segments, line, j + 1);
        }
    }
    (segments, line, j)
}

fn names_device(segments: &[String], after: Option<&TokenTree>) -> Option<String> {
    let n = segments.len();
    let last = segments[n - 1].as_str();
    let owner = if n >= 2 { segments[n - 2].as_str() } else { "" };
    let numbered = |kind: &str| match literal_argument(after) {
        Some(k) => format!("{kind}:{k}"),
        None => kind.to_string(),
    };
    let called =
        matches!(after, Some(TokenTree::Group(g)) if g.delimiter() == Delimiter::Parenthesis);
    match (owner, last) {
        ("Device", "Cpu") | ("Placement", "cpu") => Some("cpu".into()),
        ("Device", "new_cuda" | "cuda_if_available" | "new_cuda_with_stream")
        | ("Placement", "cuda") => Some(numbered("cuda")),
        ("Device", "Cuda") => Some("cuda".into()),
        ("Device", "new_metal" | "metal_if_available") => Some(numbered("metal")),
        ("Device", "Metal") => Some("metal".into()),
        ("Placement", "sim") => Some(numbered("sim")),
        (_, "accelerator" | "accelerator_or_sim") if called => Some("accelerator".into()),
        _ => None,
    }
}

fn literal_argument(after: Option<&TokenTree>) -> Option<u64> {
    let Some(TokenTree::Group(g)) = after else {
        return None;
    };
    let inner: Vec<TokenTree> = g.stream().into_iter().collect();
    match inner.as_slice() {
        [TokenTree::Literal(l)] => {
            let text = l.to_string().replace('_', "");
            let digits = text.trim_end_matches(|c: char| c.is_ascii_alphabetic());
            digits.parse().ok()
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check(forbid: Forbid, functions: &[&str], allowed: &[&str]) -> SourceCheck {
        SourceCheck {
            file: "src/x.rs".into(),
            forbid,
            functions: functions.iter().map(|s| s.to_string()).collect(),
            allowed: allowed.iter().map(|s| s.to_string()).collect(),
            message: "{file}: {found}".into(),
        }
    }

    #[test]
    fn names_are_found_in_code_not_in_comments() {
        let c = check(
            Forbid::Names(vec!["epoch_order".into(), "DistributedSampler".into()]),
            &[],
            &[],
        );
        assert!(c
            .run("// DistributedSampler\n/* epoch_order */ fn f() {}")
            .is_ok());
        assert_eq!(
            c.run("fn f() { let o = sampler::epoch_order(3); }"),
            Err("src/x.rs: epoch_order".into())
        );
    }

    #[test]
    fn fixed_devices_are_found_in_the_named_functions_only() {
        let source = "fn load() { Placement::cpu(); }\n/// Device::Cpu\nfn reduce_sum() { let s = \"Device::Cpu\"; }\nfn broadcast() {\n    Tensor::zeros(1, DType::F32, &Device::Cpu);\n}\n";
        assert_eq!(
            check(Forbid::FixedDevice, &[], &["load"]).run(source),
            Err("src/x.rs: Device::Cpu (src/x.rs:5, in broadcast)".into())
        );
        assert!(check(Forbid::FixedDevice, &["reduce_sum"], &[])
            .run(source)
            .is_ok());
        assert!(check(Forbid::FixedDevice, &[], &["load", "broadcast"])
            .run(source)
            .is_ok());
        let sim = fixed_devices("fn f() { accelerator_or_sim(5); Placement::sim(2); }").unwrap();
        let names: Vec<_> = sim.iter().map(|w| w.names.as_str()).collect();
        assert_eq!(names, ["accelerator", "sim:2"]);
    }

    #[test]
    fn text_that_is_not_rust_fails_the_check_without_a_panic() {
        let err = check(Forbid::FixedDevice, &[], &[])
            .run("fn f() {")
            .unwrap_err();
        assert!(err.contains("not Rust tokens"), "{err}");
    }
}
