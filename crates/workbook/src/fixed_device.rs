//! The second witness of a simulated device: tensors made on a device written in the code.
//!
//! A tensor made inside a forward pass on a fixed device (`Tensor::zeros(n, x.dtype(),
//! &Device::Cpu)`, PyTorch's `torch.zeros(n)`) fails on a GPU with candle's own error
//! (`device mismatch in index_add, lhs: Cuda { gpu_id: 0 }, rhs: Cpu`). On `sim:N` it cannot
//! fail: a simulated device keeps its tensors in host memory, and candle's `Device::Cpu` is one
//! value with nothing to tell one host tensor from another, so `Tensor::zeros(n, x.dtype(),
//! &Device::Cpu)` and `Tensor::zeros(n, x.dtype(), x.device())` are the same call with the
//! same result. No run on `sim:N` can see the difference (the float64 shadow pass of
//! [`GraphLayer::apply`](crate::layers::GraphLayer::apply) catches a fixed *dtype*, not a fixed
//! device). What differs is the code, so the witness reads the code: [`find`] lists every
//! place that writes a device down (`Device::Cpu`, `Device::new_cuda(..)`, `Placement::cpu()`,
//! `Placement::sim(n)`, `accelerator()`), by function, line and column; [`check`] reports the
//! first one, outside the functions allowed one, that names another device than the one the
//! code runs on, as the device mismatch a GPU would have raised, with the fix.
//!
//! It reads spellings, not types (a lint, like clippy's): an alias (`use Device::Cpu as Host`)
//! hides a device from it, and a device used only to inspect (`matches!(d, Device::Cpu)`) is
//! reported too. It is a witness for the honest mistake, which is spelled the way the chapter
//! spells it; a real device remains the proof. Tokenising is `proc-macro2`'s, so comments, doc
//! comments and string literals never count.
//!
//! ```
//! use workbook::{fixed_device, Placement};
//! let source = r#"
//!     fn count(x: &Tensor, n: usize) -> Result<Tensor> {
//!         // not `x.device()`: a tensor on the host, wherever x is
//!         Ok(Tensor::zeros((n, 1), x.dtype(), &Device::Cpu)?)
//!     }
//!     fn load() -> Result<Graph> { datasets::karate(Placement::cpu()) }
//! "#;
//! let found = fixed_device::find(source).unwrap();
//! assert_eq!(found.len(), 2);
//! assert_eq!((found[0].written.as_str(), found[0].names.as_str()), ("Device::Cpu", "cpu"));
//! assert_eq!(found[0].function.as_deref(), Some("count"));
//! assert_eq!(found[0].line, 4);
//!
//! // `load` may read from the host; `count` runs wherever its input is (sim:3 here).
//! let err = fixed_device::check("src/count.rs", source, &["load"], "the layer's input", &Placement::sim(3))
//!     .unwrap_err()
//!     .to_string();
//! assert!(err.starts_with("Expected all tensors to be on the same device: the layer's input are on sim:3 but tensor made with 'Device::Cpu (src/count.rs:4, in count)' is on cpu."), "{err}");
//! assert!(err.contains("x.device()"));
//! // On the cpu itself that code computes right: no mismatch to report.
//! assert!(fixed_device::check("src/count.rs", source, &[], "the input", &Placement::cpu()).is_ok());
//! ```

use crate::error::{Found, Result, WorkbookError};
use crate::placement::{Mismatch, Placement, PlacementId, Role};
use proc_macro2::{Delimiter, Spacing, Span, TokenStream, TokenTree};
use std::str::FromStr;

/// One place in Rust source where a device is written down.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct FixedDevice {
    /// The path as written, without spaces or crate prefix: `Device::Cpu`, `Placement::sim`,
    /// `accelerator`.
    pub written: String,
    /// The device it names, as a placement prints it: `cpu`, `cuda:0`, `sim:2`; `cuda` or `sim`
    /// when the number is not a literal; `accelerator` for the lesson's accelerator.
    pub names: String,
    /// The function it is in (the innermost `fn`), if any.
    pub function: Option<String>,
    /// 1-based line.
    pub line: usize,
    /// 1-based column.
    pub column: usize,
}

/// Every place in `source` (the text of a Rust file) that writes a device down, in the order
/// they appear. Errs only when `source` is not Rust tokens (an unclosed bracket or string).
pub fn find(source: &str) -> Result<Vec<FixedDevice>> {
    let tokens = TokenStream::from_str(source).map_err(|e| WorkbookError::Source(e.to_string()))?;
    let mut found = Vec::new();
    walk(tokens, None, &mut found);
    Ok(found)
}

/// The witness: the first device written in `source` (the file `file`), outside the functions
/// named in `allowed`, that is not `runs_on`, reported as the device mismatch it would be on a
/// GPU ([`WorkbookError::DeviceMismatch`]), with what `runs_on` holds (`expected_what`, e.g.
/// `SAGEConv parameters`) and the fix. `Ok` when there is none. A device that *is* `runs_on`
/// mismatches nothing there, and is not reported.
pub fn check(
    file: &str,
    source: &str,
    allowed: &[&str],
    expected_what: &str,
    runs_on: &Placement,
) -> Result<()> {
    let found = mismatching(source, allowed, runs_on)?;
    match found.first() {
        None => Ok(()),
        Some(first) => Err(mismatch(file, first, expected_what, runs_on)),
    }
}

/// What [`check`] reports, all of it: the devices written in `source` outside `allowed` that
/// are not `runs_on`.
pub fn mismatching(
    source: &str,
    allowed: &[&str],
    runs_on: &Placement,
) -> Result<Vec<FixedDevice>> {
    let here = runs_on.to_string();
    Ok(find(source)?
        .into_iter()
        .filter(|f| !f.function.as_deref().is_some_and(|n| allowed.contains(&n)))
        .filter(|f| f.names != here)
        .collect())
}

fn mismatch(
    file: &str,
    at: &FixedDevice,
    expected_what: &str,
    runs_on: &Placement,
) -> WorkbookError {
    let place = match &at.function {
        Some(f) => format!("{file}:{}, in {f}", at.line),
        None => format!("{file}:{}", at.line),
    };
    let seen = if runs_on.is_sim() {
        format!(
            "{runs_on} keeps tensors in host memory, so this ran there and computed the same numbers; on a GPU candle stops it (device mismatch in its first operation with the input). "
        )
    } else {
        String::new()
    };
    WorkbookError::DeviceMismatch(Box::new(Mismatch {
        expected_what: expected_what.to_string(),
        expected: runs_on.id(),
        role: Role::FixedDevice,
        culprit: format!("{} ({place})", at.written),
        found: found(&at.names),
        fix: Some(format!("{seen}{}", Role::FixedDevice.fix())),
    }))
}

/// A device as [`FixedDevice::names`] spells it: a placement when it names one (`cpu`, `cuda:0`,
/// `sim:2`), else the spelling (`cuda`, `accelerator`).
fn found(names: &str) -> Found {
    let numbered = |prefix: &str| names.strip_prefix(prefix).and_then(|n| n.parse().ok());
    match names {
        "cpu" => Found::At(PlacementId::Cpu),
        _ => numbered("cuda:")
            .map(PlacementId::Cuda)
            .or_else(|| numbered("sim:").map(PlacementId::Sim))
            .or_else(|| numbered("metal:").map(PlacementId::Metal))
            .map_or_else(|| Found::Written(names.to_string()), Found::At),
    }
}

/// Visits `tokens` (one level and every group in it), `function` being the innermost `fn`.
fn walk(tokens: TokenStream, function: Option<&str>, found: &mut Vec<FixedDevice>) {
    let tokens: Vec<TokenTree> = tokens.into_iter().collect();
    // `fn name`: the next brace group at this level is its body (`;` ends a bodiless one).
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
                let (segments, start, next) = path_at(&tokens, i);
                if let Some(names) = names_device(&segments, tokens.get(next)) {
                    let at = start.start();
                    let tail = segments.len().saturating_sub(2);
                    let written = if names == "accelerator" {
                        segments[segments.len() - 1].clone()
                    } else {
                        segments[tail..].join("::")
                    };
                    found.push(FixedDevice {
                        written,
                        names,
                        function: function.map(str::to_string),
                        line: at.line,
                        column: at.column + 1,
                    });
                }
                i = next;
            }
            _ => i += 1,
        }
    }
}

/// The path starting at `tokens[i]` (an identifier): its segments, the span of its first, and
/// the index of the token after it.
fn path_at(tokens: &[TokenTree], i: usize) -> (Vec<String>, Span, usize) {
    let mut segments = Vec::new();
    let span = tokens[i].span();
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
            return (segments, span, j + 1);
        }
    }
    (segments, span, j)
}

/// The device a path names, when it names one; `after` is the token that follows it (a call's
/// arguments).
fn names_device(segments: &[String], after: Option<&TokenTree>) -> Option<String> {
    let n = segments.len();
    let last = segments[n - 1].as_str();
    let owner = if n >= 2 { segments[n - 2].as_str() } else { "" };
    let number = || literal_argument(after);
    let numbered = |kind: &str| match number() {
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

/// `(3)` → `3`: a call's single integer literal argument.
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

    fn spelled(source: &str) -> Vec<(String, String, Option<String>)> {
        find(source)
            .unwrap()
            .into_iter()
            .map(|f| (f.written, f.names, f.function))
            .collect()
    }

    fn own(a: &str, b: &str, f: Option<&str>) -> (String, String, Option<String>) {
        (a.into(), b.into(), f.map(str::to_string))
    }

    #[test]
    fn finds_every_spelling_of_a_fixed_device() {
        let source = r#"
            use workbook::candle_core::{Device, Tensor};
            impl GraphLayer for MySage {
                fn forward_layer(&self, input: &LayerInput<'_>) -> Result<LayerOutput> {
                    let a = Tensor::zeros(3, DType::F32, &Device::Cpu)?;
                    let b = Tensor::zeros(3, DType::F32, &candle_core::Device::Cpu)?;
                    let c = Device::new_cuda(1)?;
                    let d = Device::cuda_if_available(0)?;
                    let e = Placement::sim(2);
                    let f = workbook::Placement::cpu();
                    let g = workbook::device::accelerator().placement;
                    let h = accelerator_or_sim(5);
                    let k = Placement::cuda(n)?;
                    let closure = || Tensor::ones(1, DType::F32, &Device::Cpu);
                    todo!()
                }
            }
            fn helper() { let _ = Device::Metal; }
        "#;
        let f = Some("forward_layer");
        assert_eq!(
            spelled(source),
            [
                own("Device::Cpu", "cpu", f),
                own("Device::Cpu", "cpu", f),
                own("Device::new_cuda", "cuda:1", f),
                own("Device::cuda_if_available", "cuda:0", f),
                own("Placement::sim", "sim:2", f),
                own("Placement::cpu", "cpu", f),
                own("accelerator", "accelerator", f),
                own("accelerator_or_sim", "accelerator", f),
                own("Placement::cuda", "cuda", f),
                own("Device::Cpu", "cpu", f),
                own("Device::Metal", "metal", Some("helper")),
            ]
        );
    }

    #[test]
    fn comments_strings_and_devices_taken_from_the_input_do_not_count() {
        let source = r#"
            /// Never `Device::Cpu`: use x.device().
            fn mean(x: &Tensor) -> Result<Tensor> {
                // Tensor::zeros(n, DType::F32, &Device::Cpu) would be wrong here
                /* Placement::cpu() */
                let msg = "Device::Cpu";
                let raw = r"Placement::sim(1)";
                let at = Placement::of(x.device());
                let zeros = Tensor::zeros(x.dims(), x.dtype(), x.device())?;
                let device = Device::Cpu_like; // not a device constructor
                let accelerator = 3; // a variable, not a call
                Ok(x.zeros_like()?)
            }
        "#;
        assert_eq!(spelled(source), []);
    }

    #[test]
    fn reports_the_function_line_and_column() {
        let source = "fn outer() {\n    fn inner() {\n        let d = Device::Cpu;\n    }\n    let p = Placement::sim(4);\n}\ntrait T { fn declared(&self); }\nconst C: fn() = || { Placement::cpu(); };\n";
        let found = find(source).unwrap();
        let at: Vec<_> = found
            .iter()
            .map(|f| (f.function.clone(), f.line, f.column, f.names.clone()))
            .collect();
        assert_eq!(
            at,
            [
                (Some("inner".to_string()), 3, 17, "cpu".to_string()),
                (Some("outer".to_string()), 5, 13, "sim:4".to_string()),
                (None, 8, 22, "cpu".to_string()),
            ]
        );
    }

    #[test]
    fn check_names_the_first_mismatch_outside_the_allowed_functions() {
        let source =
            "fn load() { Placement::cpu(); }\nfn mean() { Device::Cpu; Placement::sim(2); }\n";
        let err = check(
            "src/x.rs",
            source,
            &["load"],
            "SAGEConv parameters",
            &Placement::sim(2),
        )
        .unwrap_err();
        let WorkbookError::DeviceMismatch(m) = &err else {
            panic!("a device mismatch, not {err:?}");
        };
        assert_eq!(m.expected, PlacementId::Sim(2));
        assert_eq!(m.found, Found::At(PlacementId::Cpu));
        assert_eq!(m.role, Role::FixedDevice);
        assert_eq!(m.culprit, "Device::Cpu (src/x.rs:2, in mean)");
        let msg = err.to_string();
        assert!(
            msg.contains("but tensor made with 'Device::Cpu (src/x.rs:2, in mean)' is on cpu.")
                && msg.contains("sim:2 keeps tensors in host memory"),
            "{msg}"
        );
        // The device it runs on is no mismatch; another simulated device is one.
        assert_eq!(
            mismatching(source, &["load"], &Placement::sim(2))
                .unwrap()
                .len(),
            1
        );
        assert_eq!(
            mismatching(source, &[], &Placement::sim(3)).unwrap().len(),
            3
        );
        assert!(check("src/x.rs", "fn f() {}", &[], "it", &Placement::sim(1)).is_ok());
    }

    #[test]
    fn the_librarys_own_layer_passes_its_witness() {
        // `SageConv` is the finished version of exercise 02-4: it draws its initial values on
        // the host (`init`, PyG's seeded initialisation, then moved), and nothing else.
        let source = include_str!("layers/sage_conv.rs");
        let found = find(source).unwrap();
        assert!(found.iter().any(|f| f.function.as_deref() == Some("init")));
        assert!(check(
            "sage_conv.rs",
            source,
            &["init"],
            "SAGEConv parameters",
            &Placement::sim(1)
        )
        .is_ok());
        // ...and the chapter's draft does not.
        let draft = "fn forward(x: &Tensor) -> Result<Tensor> { let (n, f) = x.dims2()?; \
                     Tensor::zeros((n, f), x.dtype(), &Device::Cpu) }";
        assert!(check(
            "draft.rs",
            draft,
            &[],
            "the layer's input",
            &Placement::sim(1)
        )
        .is_err());
    }

    #[test]
    fn text_that_is_not_rust_is_an_error_not_a_panic() {
        for broken in ["fn f() {", "let s = \"unterminated;", "}"] {
            let err = find(broken).unwrap_err().to_string();
            assert!(err.contains("cannot read the code as Rust tokens"), "{err}");
        }
    }
}
