//! Graded tests for exercise 01-1 (points in exercise.toml). Do not edit: the grader checks this
//! file against its checksum.
//!
//! Each test is a scenario (the `scenario` crate): it records what it observed, and a teacher's
//! grader compares that with the reference solution's. The accelerator is `cuda:0` on a machine
//! with a GPU, else a simulated device whose number the grading run picks, as it picks the
//! models' seeds (so the logits and the predictions cannot be written down in advance).

use super::fix_the_mismatch::{forward_anywhere, karate_predictions};
use scenario::{Json, Scenario};
use workbook::device::accelerator_or_sim;
use workbook::ledger::Ledger;
use workbook::{datasets, Model, ModelConfig, Placement};

fn gcn_on(at: &Placement, seed: u64) -> Model {
    Model::init(ModelConfig::gcn(34, 16, 4), seed, at)
        .expect("building the GCN")
        .0
}

/// The accelerator: `cuda:0`, or `sim:2` to `sim:7` as the run's challenge picks.
fn accelerator(s: &Scenario) -> Placement {
    accelerator_or_sim(s.pick("accelerator", 2..8)).placement
}

#[test]
fn runs_a_cpu_graph_on_the_accelerator() {
    let s = scenario::start();
    let ledger = Ledger::new();
    let gpu = accelerator(&s).with_ledger(&ledger);
    let model = gcn_on(&gpu, s.seed("model"));
    let graph = datasets::karate(Placement::cpu()).unwrap();
    ledger.clear();
    let out = forward_anywhere(&model, &graph)
        .unwrap_or_else(|e| panic!("forward_anywhere failed with the graph on cpu: {e}"));
    // Every copy the ledger saw (the graph's parts, or the model's parameters if the model was
    // moved instead), in one record with the logits of the challenge's model.
    let copies = ledger.transfers();
    s.observe("the copies and the logits", &(Json(&copies), &out.logits));
    assert_eq!(out.logits.dims(), &[34, 4]);
    // A simulated device is the host's memory underneath, so the logits' candle device cannot
    // tell sim:N from the cpu: the ledger can.
    assert!(
        copies
            .iter()
            .any(|t| t.what == "karate.x" && t.from == "cpu" && t.to == gpu.to_string()),
        "the graph must be copied from cpu to the model's device ({gpu}), where the work runs; the ledger shows:\n{}",
        ledger.table()
    );
    assert!(
        copies.iter().all(|t| t.to == gpu.to_string()),
        "only the graph should move, to the model's device ({gpu}): the model stays where it is; the ledger shows:\n{}",
        ledger.table()
    );
}

#[test]
fn moves_the_graph_to_wherever_the_model_is() {
    // The model decides where the work runs: the graph goes to the model's device, whichever it
    // is, never to a device written in the code. The ledger on the model's device shows the copy.
    let s = scenario::start();
    let gpu = accelerator(&s);
    // another simulated device, never the accelerator's number
    let other = Placement::sim(s.pick("other device", 8..16));
    for (model_at, graph_at) in [
        (Placement::cpu(), gpu.clone()),
        (other.clone(), Placement::cpu()),
        (other.clone(), gpu.clone()),
    ] {
        let ledger = Ledger::new();
        let model_at = model_at.with_ledger(&ledger);
        let model = gcn_on(&model_at, 0);
        let graph = datasets::karate(&graph_at).unwrap();
        ledger.clear();
        forward_anywhere(&model, &graph).unwrap_or_else(|e| {
            panic!("forward_anywhere failed with the model on {model_at} and the graph on {graph_at}: {e}")
        });
        s.observe(
            format!("copies with the model on {model_at} and the graph on {graph_at}"),
            &Json(graph_copies(&ledger)),
        );
        assert!(
            ledger.transfers().iter().any(|t| t.what == "karate.x"
                && t.from == graph_at.to_string()
                && t.to == model_at.to_string()),
            "with the model on {model_at} and the graph on {graph_at}, the graph must be copied from {graph_at} to {model_at} (the model's device, model.placement()); the ledger shows:\n{}",
            ledger.table()
        );
    }
    // A graph that is already where the model is crosses nothing (Graph::to_device copies only
    // the parts that are elsewhere, as PyG's data.to does).
    let ledger = Ledger::new();
    let at = gpu.with_ledger(&ledger);
    let model = gcn_on(&at, s.seed("model"));
    let already_there = datasets::karate(&at).unwrap();
    ledger.clear();
    let out = forward_anywhere(&model, &already_there).unwrap_or_else(|e| {
        panic!("forward_anywhere failed with the model and the graph on {at}: {e}")
    });
    let copies = graph_copies(&ledger);
    // One record: the copies (none) with the logits of the challenge's model, which the judge
    // could not be handed in advance.
    s.observe(
        "with both on the accelerator: the copies and the logits",
        &(Json(&copies), &out.logits),
    );
    assert!(
        copies.is_empty(),
        "the graph was already on {at}, yet it was copied: {copies:?}"
    );
}

/// The copies of the karate graph's parts that the ledger recorded.
fn graph_copies(ledger: &Ledger) -> Vec<workbook::ledger::Transfer> {
    ledger
        .transfers()
        .into_iter()
        .filter(|t| t.what.starts_with("karate."))
        .collect()
}

#[test]
fn predictions_match_the_cpu_and_come_back_once() {
    let s = scenario::start();
    let seed = s.seed("model");
    let on_cpu = karate_predictions(&Placement::cpu(), seed).expect("predicting on the cpu");
    let ledger = Ledger::new();
    let gpu = accelerator(&s).with_ledger(&ledger);
    let on_gpu = karate_predictions(&gpu, seed)
        .unwrap_or_else(|e| panic!("karate_predictions failed on {gpu}: {e}"));
    s.observe("predictions", &on_gpu);
    s.observe("copies", &Json(ledger.transfers()));
    assert_eq!(
        on_gpu, on_cpu,
        "the same model must predict the same on every device"
    );
    let back: Vec<_> = ledger
        .transfers()
        .into_iter()
        .filter(|t| t.to == "cpu")
        .collect();
    assert_eq!(
        back.len(),
        1,
        "expected exactly one recorded copy back to the host (the predictions), got {back:?}"
    );
    assert_eq!(
        back[0].bytes,
        34 * 4,
        "the 34 predictions (u32) should come back, nothing more"
    );
}
