//! What every command checks about the paths a user gives it, before any work: a `--data-dir`
//! that cannot be used, and an output that is one of the inputs.
//!
//! `--data-dir`, when given, is the data: it must be a folder holding every `ind.<name>.*` file
//! of the Planetoid dataset asked for (`workbook::datasets::planetoid::check_folder` names each
//! one missing); the embedded Cora, and downloads into the default folder, are used only when
//! it is not given. An output that is the same file as an input (through any path, symbolic or
//! hard link) is refused before anything is written (`workbook::atomic_write::refuse_overwriting`).

use anyhow::{Context, Result};
use std::path::{Path, PathBuf};
use workbook::datasets::planetoid;
use workbook::{datasets, Graph, Placement};

/// `cora` or `citeseer` when `name` is a Planetoid dataset (as `datasets::load` reads names).
fn planetoid_name(name: &str) -> Option<String> {
    let lower = name.trim().to_ascii_lowercase();
    matches!(lower.as_str(), "cora" | "citeseer").then_some(lower)
}

/// Loads the dataset `name` onto `at`; a `data_dir` given must hold its files.
pub fn load_dataset(
    name: &str,
    data_dir: Option<&Path>,
    at: impl Into<Placement>,
) -> Result<Graph> {
    if let (Some(dir), Some(p)) = (data_dir, planetoid_name(name)) {
        planetoid::check_folder(&p, dir).context("--data-dir cannot be used")?;
    }
    datasets::load(name, data_dir, at).with_context(|| format!("loading dataset '{name}'"))
}

/// The files a dataset is read from when `data_dir` is given (none for the others): inputs an
/// output must not overwrite.
pub fn dataset_files(name: &str, data_dir: Option<&Path>) -> Vec<PathBuf> {
    match (data_dir, planetoid_name(name)) {
        (Some(dir), Some(p)) => planetoid::data_files(&p, dir).unwrap_or_default(),
        _ => Vec::new(),
    }
}

/// Refuses the output `flag` = `out` when it is the same file as one of `inputs`.
pub fn refuse_overwriting(flag: &str, out: &Path, inputs: &[(&str, &Path)]) -> Result<()> {
    Ok(workbook::atomic_write::refuse_overwriting(
        flag, out, inputs,
    )?)
}

/// Refuses the output `flag` = `out` when it is one of the files of the dataset.
pub fn refuse_overwriting_dataset(
    flag: &str,
    out: &Path,
    name: &str,
    data_dir: Option<&Path>,
) -> Result<()> {
    let files = dataset_files(name, data_dir);
    let inputs: Vec<(&str, &Path)> = files.iter().map(|f| ("--data-dir", f.as_path())).collect();
    refuse_overwriting(flag, out, &inputs)
}
