//! Names of a `state_dict` as the model sees them: a file saved from a *wrapped* model
//! (PyTorch's `DataParallel` saves `module.conv1.lin.weight` for `conv1.lin.weight`) is told
//! apart from an ordinary mismatch, so the error names the wrapper and both fixes
//! ([`WorkbookError::WrappedWeights`]).
//!
//! ```
//! use workbook::model::state_dict::wrapped;
//! let expected = vec!["conv1.bias".to_string()];
//! let saved = vec!["module.conv1.bias".to_string()];
//! let err = wrapped("f.safetensors", &expected, &saved.iter().collect::<Vec<_>>()).unwrap();
//! assert!(err.to_string().contains("every parameter name starts with 'module.'"));
//! ```

use crate::error::WorkbookError;

/// If every expected name that is missing from `names` is there under one prefix ending in
/// `.` (`module.conv1.lin.weight` for `conv1.lin.weight`), the error that says so.
pub fn wrapped(origin: &str, expected: &[String], names: &[&String]) -> Option<WorkbookError> {
    let present = |n: &str| names.iter().any(|k| k.as_str() == n);
    let missing: Vec<&String> = expected.iter().filter(|n| !present(n)).collect();
    let first = missing.first()?;
    let mut candidates: Vec<&str> = names
        .iter()
        .filter(|k| k.len() > first.len() && k.ends_with(first.as_str()))
        .map(|k| &k[..k.len() - first.len()])
        .filter(|p| p.ends_with('.'))
        .collect();
    candidates.sort();
    let prefix = candidates
        .into_iter()
        .find(|p| missing.iter().all(|m| present(&format!("{p}{m}"))))?;
    Some(WorkbookError::WrappedWeights {
        origin: origin.to_string(),
        prefix: prefix.to_string(),
        example: format!("{prefix}{first}"),
        expected: first.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(list: &[&str]) -> Vec<String> {
        list.iter().map(|s| s.to_string()).collect()
    }

    #[test]
    fn wrapper_prefixes_are_found_and_named() {
        let expected = names(&["conv1.lin.weight", "conv1.bias"]);
        // torch.compile's prefix, beside a stray entry that is not a parameter
        let file = names(&[
            "_orig_mod.conv1.lin.weight",
            "_orig_mod.conv1.bias",
            "epoch",
        ]);
        let refs: Vec<&String> = file.iter().collect();
        let err = wrapped("f.safetensors", &expected, &refs)
            .unwrap()
            .to_string();
        assert!(
            err.contains("'_orig_mod.conv1.lin.weight' where the model expects 'conv1.lin.weight'"),
            "{err}"
        );
        assert!(err.contains("torch.compile saves names that way"), "{err}");
        // DataParallel inside DataParallel: the whole prefix
        let file = names(&["module.module.conv1.lin.weight", "module.module.conv1.bias"]);
        let refs: Vec<&String> = file.iter().collect();
        let err = wrapped("f", &expected, &refs).unwrap();
        assert!(
            matches!(&err, WorkbookError::WrappedWeights { prefix, .. } if prefix == "module.module."),
            "{err}"
        );
        // only some names under the prefix: an ordinary mismatch, not a wrapper
        let file = names(&["module.conv1.lin.weight", "conv9.bias"]);
        let refs: Vec<&String> = file.iter().collect();
        assert!(wrapped("f", &expected, &refs).is_none());
        // nothing missing: nothing to say
        let refs: Vec<&String> = expected.iter().collect();
        assert!(wrapped("f", &expected, &refs).is_none());
    }
}
