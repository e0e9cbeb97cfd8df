//! What the core library depends on, and what it must not: the core is tensors, layers,
//! placement, ledger, datasets and files. An HTTP client only behind the `download` feature (off
//! by default), no plotting crate and no demo-only crate at all (those live in
//! `workbook-lessons`). The crate docs (`src/lib.rs`) list the same dependencies, so a new one
//! fails here until it is documented there. `.ci/run` checks the whole tree with `cargo tree`.

use std::collections::BTreeSet;

/// The core's direct dependencies, as `src/lib.rs` documents them.
const CORE: &[&str] = &[
    "candle-core",
    "candle-nn",
    "erased-serde",
    "planetoid",
    "proc-macro2",
    "prost",
    "rand",
    "rand_chacha",
    "rand_distr",
    "rayon",
    "safetensors",
    "serde",
    "serde_json",
    "tempfile",
    "thiserror",
    "workbook-derive",
    "zip",
];

/// Crates that must not be unconditional dependencies of the core.
const NEVER_BY_DEFAULT: &[&str] = &[
    "ureq",
    "reqwest",
    "hyper",
    "curl",
    "isahc",
    "attohttpc",
    "minreq",
    "plotters",
    "plotly",
    "arc-swap",
];

fn manifest() -> toml::Table {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/Cargo.toml");
    std::fs::read_to_string(path).unwrap().parse().unwrap()
}

#[test]
fn the_core_depends_on_tensors_layers_datasets_and_files_only() {
    let manifest = manifest();
    let deps = manifest["dependencies"].as_table().unwrap();
    let required: BTreeSet<&str> = deps
        .iter()
        .filter(|(_, spec)| spec.get("optional").and_then(|o| o.as_bool()) != Some(true))
        .map(|(name, _)| name.as_str())
        .collect();
    assert_eq!(
        required,
        CORE.iter().copied().collect::<BTreeSet<_>>(),
        "the core's required dependencies changed: keep demos and tools in workbook-lessons, put \
         optional parts behind a feature, and update CORE here and the list in src/lib.rs"
    );
    for name in NEVER_BY_DEFAULT {
        assert!(
            !required.contains(name),
            "{name} must not be a required dependency"
        );
    }
}

#[test]
fn downloading_is_an_optional_feature_off_by_default() {
    let manifest = manifest();
    let ureq = &manifest["dependencies"]["ureq"];
    assert_eq!(ureq.get("optional").and_then(|o| o.as_bool()), Some(true));
    let features = manifest["features"].as_table().unwrap();
    let default: Vec<&str> = features["default"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|f| f.as_str())
        .collect();
    assert!(
        !default.contains(&"download"),
        "download must stay off by default: {default:?}"
    );
    assert_eq!(
        features["download"].as_array().unwrap()[0].as_str(),
        Some("dep:ureq")
    );
}

#[test]
fn the_crate_docs_list_every_dependency() {
    let lib = include_str!("../src/lib.rs");
    let section = lib
        .split("## What this crate is, and what it is not")
        .nth(1)
        .expect("src/lib.rs has the section on what the crate depends on");
    for name in CORE {
        // the docs name crate families once: candle for candle-core/candle-nn, rand for rand_*
        let family = name.split(['-', '_']).next().unwrap();
        assert!(
            section.contains(family),
            "src/lib.rs does not mention {name}"
        );
    }
    for feature in ["`download`", "`cuda`"] {
        assert!(
            section.contains(feature),
            "src/lib.rs does not describe {feature}"
        );
    }
}
