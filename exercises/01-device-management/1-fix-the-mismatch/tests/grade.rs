//! Graded tests for exercise 01-1 (points in exercise.toml). Do not edit: the grader checks this
//! file against its checksum.

use super::fix_the_mismatch::{forward_anywhere, karate_predictions};
use workbook::device::accelerator;
use workbook::ledger::Ledger;
use workbook::{datasets, Model, ModelConfig, Placement};

fn gcn_on(at: &Placement) -> Model {
    Model::init(ModelConfig::gcn(34, 16, 4), 0, at)
        .expect("building the GCN")
        .0
}

#[test]
fn runs_a_cpu_graph_on_the_accelerator() {
    let gpu = accelerator().placement;
    let model = gcn_on(&gpu);
    let graph = datasets::karate(Placement::cpu()).unwrap();
    let out = forward_anywhere(&model, &graph)
        .unwrap_or_else(|e| panic!("forward_anywhere failed with the graph on cpu: {e}"));
    assert_eq!(out.logits.dims(), &[34, 4]);
    assert!(
        out.logits.device().same_device(gpu.device()),
        "the logits should be computed where the model is ({})",
        gpu
    );
}

#[test]
fn moves_the_graph_to_wherever_the_model_is() {
    // The model decides where the work runs: the graph goes to the model's device, whichever it
    // is, never to a device written in the code. The ledger on the model's device shows the copy.
    let gpu = accelerator().placement;
    for (model_at, graph_at) in [
        (Placement::cpu(), gpu.clone()),
        (Placement::sim(2), Placement::cpu()),
        (Placement::sim(2), gpu.clone()),
    ] {
        let ledger = Ledger::new();
        let model_at = model_at.with_ledger(&ledger);
        let model = gcn_on(&model_at);
        let graph = datasets::karate(&graph_at).unwrap();
        ledger.clear();
        forward_anywhere(&model, &graph).unwrap_or_else(|e| {
            panic!("forward_anywhere failed with the model on {model_at} and the graph on {graph_at}: {e}")
        });
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
    let model = gcn_on(&at);
    let already_there = datasets::karate(&at).unwrap();
    ledger.clear();
    forward_anywhere(&model, &already_there).unwrap_or_else(|e| {
        panic!("forward_anywhere failed with the model and the graph on {at}: {e}")
    });
    let graph_copies: Vec<_> = ledger
        .transfers()
        .into_iter()
        .filter(|t| t.what.starts_with("karate."))
        .collect();
    assert!(
        graph_copies.is_empty(),
        "the graph was already on {at}, yet it was copied: {graph_copies:?}"
    );
}

#[test]
fn predictions_match_the_cpu_and_come_back_once() {
    let on_cpu = karate_predictions(&Placement::cpu()).expect("predicting on the cpu");
    let ledger = Ledger::new();
    let gpu = accelerator().placement.with_ledger(&ledger);
    let on_gpu = karate_predictions(&gpu)
        .unwrap_or_else(|e| panic!("karate_predictions failed on {gpu}: {e}"));
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
