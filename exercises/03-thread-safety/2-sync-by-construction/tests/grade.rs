//! Graded tests for exercise 03-2 (points in exercise.toml). Do not edit: the grader checks this
//! file against its checksum.
//!
//! One test is here; the other two are programs (`tests/programs/`, examples of this crate) that
//! include *your* `src/sync_by_construction.rs` in a crate that forbids `unsafe`, because a layer
//! that is not `Send + Sync` must cost those tests' points, not stop the whole exercise from
//! compiling: `is_send_and_sync_by_construction` is that the first program compiles,
//! `shares_one_layer_across_threads` runs the second. `cargo grade 03-2` shows the compiler's
//! first error when one does not build; `cargo build -p ex03-2-sync-by-construction --example
//! send_and_sync` shows all of it.
//!
//! Each test is a scenario (the `scenario` crate): it records what it observed, and a teacher's
//! grader compares that with the reference solution's.

use super::sync_by_construction::CachedGatV2;
use scenario::Scenario;
use workbook::{datasets, Activation, EdgeIndex, GatV2Config, Layer, LayerConfig};
use workbook::{Model, ModelConfig, Placement};
use workbook_lessons::threads::serving::Request;

/// The file under test, from whichever tree (exercises/ or solutions/) is graded.
const SOURCE: &str = include_str!(concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/src/sync_by_construction.rs"
));

/// The code of `text` without comments, as identifier-like words.
fn words(text: &str) -> Vec<String> {
    let mut code = String::new();
    let mut rest = text;
    while !rest.is_empty() {
        if let Some(after) = rest.strip_prefix("//") {
            rest = after.find('\n').map_or("", |i| &after[i..]);
        } else if let Some(after) = rest.strip_prefix("/*") {
            rest = after.find("*/").map_or("", |i| &after[i + 2..]);
            code.push(' ');
        } else {
            let c = rest.chars().next().expect("not empty");
            code.push(c);
            rest = &rest[c.len_utf8()..];
        }
    }
    code.split(|c: char| !(c.is_alphanumeric() || c == '_'))
        .filter(|w| !w.is_empty())
        .map(str::to_string)
        .collect()
}

/// A GATv2 layer (2 heads × 8 channels) on karate's features, seeded by the challenge.
fn layer(s: &Scenario) -> CachedGatV2 {
    let config = ModelConfig {
        layers: vec![LayerConfig::GatV2(GatV2Config::new(34, 8).heads(2))],
        activation: Activation::None,
        dropout: 0.0,
        prefixed: false,
    };
    let (model, _vars) = Model::init(config, s.seed("layer"), Placement::cpu()).unwrap();
    let Layer::GatV2(conv) = &model.layers()[0] else {
        unreachable!("the config has one GATv2 layer")
    };
    CachedGatV2::new(conv.clone())
}

#[test]
fn no_unsafe_impl_of_sync_or_send() {
    // On one thread the layer answers and counts right whatever its fields; what this test
    // looks for is the promise: `unsafe impl Sync` (or `Send`) that nothing backs.
    let s = scenario::start();
    let layer = layer(&s);
    let karate = datasets::karate(Placement::cpu()).unwrap();
    let ei = karate.edge_index();
    let drop_every = s.pick("thinning", 3..8);
    let keep = |ids: &[u32]| -> Vec<i64> {
        (0..ids.len())
            .filter(|i| i % drop_every != 0)
            .map(|i| i64::from(ids[i]))
            .collect()
    };
    let thinned = Request {
        name: format!("karate without every {drop_every}th edge"),
        x: karate.x().clone(),
        edge_index: EdgeIndex::new(
            &keep(ei.sources_host()),
            &keep(ei.targets_host()),
            karate.num_nodes(),
            karate.placement(),
        )
        .unwrap(),
        nodes: None,
    };
    // How many times the one request is answered: served() counts each, so not a constant.
    let repeats = s.pick("repeats", 2..7);
    let mut answers = Vec::new();
    for request in std::iter::repeat_n(&thinned, repeats) {
        let out = layer
            .answer(request)
            .unwrap_or_else(|e| panic!("answer('{}') failed: {e}", request.name));
        answers.push((layer.served(), out.out));
    }
    // One record: the counts are drawn from a few values, the answers of the drawn layer are not.
    s.observe(
        "each answer with served() after it, then served and cached",
        &(answers, (layer.served(), layer.cached())),
    );
    let words = words(SOURCE);
    let lie = words
        .windows(3)
        .find(|w| w[0] == "unsafe" && w[1] == "impl")
        .map(|w| w[2].clone());
    // Whether the file holds an `unsafe impl` is checked by the judge itself on the submitted file
    // (exercise.toml's [[test.source]]), never recorded: a value that is the same under every
    // challenge could be written into the log by anything in this process.
    if let Some(trait_name) = lie {
        panic!(
            "src/sync_by_construction.rs still has `unsafe impl {trait_name}`: delete it, and make the layer {trait_name} because its fields are"
        );
    }
    assert_eq!(
        (layer.served(), layer.cached()),
        (repeats, 1),
        "{repeats} answers to one request: served() counts each, cached() holds one"
    );
}
