//! Edited tests are reported, not silently graded: every file of an exercise that a student does
//! not edit (the graded tests, `exercise.toml`, `Cargo.toml`, `src/lib.rs`) is checked against
//! SHA-256 checksums shipped inside the grader (`crates/grader/checksums.txt`).
//!
//! Maintainers refresh that file with `cargo grade --update-checksums` after changing a test;
//! the grader's own tests fail while it is stale.
//!
//! ```
//! let sums = grader::integrity::parse("abc  exercises/x/tests/grade.rs\n");
//! assert_eq!(sums["exercises/x/tests/grade.rs"], "abc");
//! ```

use crate::catalog::{Catalog, Exercise};
use crate::error::{GradeError, Result};
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;
use std::path::Path;

/// The checksums this grader was built with.
pub const SHIPPED: &str = include_str!("../checksums.txt");

/// Path (relative to the repository root, `/`-separated) → hex SHA-256.
pub type Checksums = BTreeMap<String, String>;

/// Reads `sha256  path` lines (the format of `sha256sum`).
pub fn parse(text: &str) -> Checksums {
    text.lines()
        .filter_map(|l| l.split_once("  "))
        .map(|(sum, path)| (path.trim().to_string(), sum.trim().to_string()))
        .collect()
}

/// Writes checksums in the format [`parse`] reads.
pub fn render(sums: &Checksums) -> String {
    sums.iter().map(|(p, s)| format!("{s}  {p}\n")).collect()
}

/// The hex SHA-256 of a file's bytes.
pub fn digest(path: &Path) -> Result<String> {
    let bytes = std::fs::read(path).map_err(|e| GradeError::io(path, e))?;
    Ok(format!("{:x}", Sha256::digest(&bytes)))
}

/// The files of `exercise` that are graded as shipped: everything in its `exercises/` folder
/// except the files the student edits, Markdown (README, hints) and build output.
pub fn graded_files(root: &Path, exercise: &Exercise) -> Result<Vec<String>> {
    let dir = exercise.spec_dir(root);
    let mut files = Vec::new();
    walk(&dir, &mut |path| {
        let rel = path.strip_prefix(&dir).unwrap_or(path);
        let rel_str = rel.to_string_lossy().replace('\\', "/");
        let editable = exercise.spec.edit.contains(&rel_str);
        let markdown = rel_str.ends_with(".md");
        if !editable && !markdown {
            let from_root = path.strip_prefix(root).unwrap_or(path);
            files.push(from_root.to_string_lossy().replace('\\', "/"));
        }
    })?;
    files.sort();
    Ok(files)
}

/// Checksums of every graded file of every exercise (what `--update-checksums` writes).
pub fn compute(catalog: &Catalog) -> Result<Checksums> {
    let mut sums = Checksums::new();
    for exercise in &catalog.exercises {
        for file in graded_files(&catalog.root, exercise)? {
            let sum = digest(&catalog.root.join(&file))?;
            sums.insert(file, sum);
        }
    }
    Ok(sums)
}

/// What differs between `exercise`'s graded files and `shipped`: one line per file.
pub fn verify(root: &Path, exercise: &Exercise, shipped: &Checksums) -> Result<Vec<String>> {
    let prefix = format!("exercises/{}/", exercise.path);
    let mut problems = Vec::new();
    let present = graded_files(root, exercise)?;
    for (file, sum) in shipped.range(prefix.clone()..) {
        if !file.starts_with(&prefix) {
            break;
        }
        let path = root.join(file);
        if !path.is_file() {
            problems.push(format!("{file}: missing"));
        } else if digest(&path)? != *sum {
            problems.push(format!("{file}: modified"));
        }
    }
    for file in present {
        let under_tests = file[prefix.len().min(file.len())..].starts_with("tests/");
        if under_tests && !shipped.contains_key(&file) {
            problems.push(format!("{file}: added (not part of the shipped tests)"));
        }
    }
    Ok(problems)
}

fn walk(dir: &Path, visit: &mut dyn FnMut(&Path)) -> Result<()> {
    let entries = std::fs::read_dir(dir).map_err(|e| GradeError::io(dir, e))?;
    for entry in entries {
        let entry = entry.map_err(|e| GradeError::io(dir, e))?;
        let path = entry.path();
        let name = entry.file_name();
        if path.is_dir() {
            if name != "target" && !name.to_string_lossy().starts_with('.') {
                walk(&path, visit)?;
            }
        } else if !name.to_string_lossy().starts_with('.') {
            visit(&path);
        }
    }
    Ok(())
}
