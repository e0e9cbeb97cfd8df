//! Every `tests/*.rs` and `tests/*/main.rs` of a crate that sets `autotests = false` is a module
//! of its `tests/it.rs` or a `[[test]]` target of its Cargo.toml: cargo would otherwise skip a new
//! one in silence. A module of workbook's and workbook-cli's `it` binaries.

/// Panics naming each file of `dir` that `manifest` (Cargo.toml) and `here` (tests/it.rs) leave out.
pub fn every_test_file_runs(dir: &std::path::Path, manifest: &str, here: &str) {
    let mut missing = Vec::new();
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        let file = if path.extension().is_some_and(|e| e == "rs") {
            name
        } else if path.join("main.rs").is_file() {
            format!("{name}/main.rs")
        } else {
            continue;
        };
        let target = format!("path = \"tests/{file}\"");
        let module = format!("#[path = \"{file}\"]");
        if !manifest.contains(&target) && !here.contains(&module) {
            missing.push(file);
        }
    }
    assert!(
        missing.is_empty(),
        "tests/{missing:?} would never run: add each to tests/it.rs (`#[path = ..] mod ..;`) or as a [[test]] to Cargo.toml"
    );
}
