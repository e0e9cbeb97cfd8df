//! Chapter 3, thread safety: concurrent serving equals sequential serving exactly, the PyG
//! `_alpha` race is reproduced every time with both of its symptoms (another thread's attention,
//! and the failed `assert alpha is not None`), never with the stateless layer, and a model
//! served while training never mixes two optimiser steps. No sleeps: every interleaving that
//! matters is forced with channels.

mod common;

use common::gpu;
use std::sync::Arc;
use workbook::candle_core::Device;
use workbook::train::TrainConfig;
use workbook::{datasets, GatV2Conv, Graph, Layer, Model, ModelConfig, WorkbookError};
use workbook_lessons::threads::serving::{self, Request};
use workbook_lessons::threads::snapshot::{self, Snapshot, SnapshotServer};
use workbook_lessons::threads::{race_demo, Schedule, StatefulGatV2};

fn karate() -> Graph {
    datasets::karate(&Device::Cpu).unwrap()
}

/// PyG's example GATv2 (8 heads × 8 hidden), freshly initialised.
fn gatv2(graph: &Graph) -> Model {
    let config = ModelConfig::gatv2(graph.num_features(), 8, 8, graph.num_classes());
    Model::init(config, 3, graph.device()).unwrap().0
}

fn first_gatv2_layer(model: &Model) -> GatV2Conv {
    match &model.layers()[0] {
        Layer::GatV2(conv) => conv.clone(),
        _ => unreachable!("the model starts with GATv2"),
    }
}

/// Two requests whose attention differs: the whole graph and a copy with 80% of its edges.
fn two_graphs(graph: &Graph) -> (Request, Request) {
    let requests = serving::mixed_requests(graph, 3, 0).unwrap();
    assert_ne!(
        requests[0].edge_index.num_edges(),
        requests[2].edge_index.num_edges()
    );
    (requests[0].clone(), requests[2].clone())
}

#[test]
fn eight_threads_times_1000_requests_equal_the_sequential_answers() {
    let graph = karate();
    let model = Arc::new(gatv2(&graph));
    let requests: Arc<[Request]> = serving::mixed_requests(&graph, 8 * 1000, 7).unwrap().into();
    let reference = serving::serve_sequential(&model, &requests).unwrap();
    let got = serving::serve(Arc::clone(&model), Arc::clone(&requests), 8).unwrap();

    assert_eq!(got.len(), 8000);
    assert_eq!(serving::count_mismatches(&got, &reference).unwrap(), 0);
    for (request, response) in requests.iter().zip(&got) {
        let rows = request.nodes.as_ref().map_or(graph.num_nodes(), Vec::len);
        assert_eq!(response.logits.dims(), &[rows, graph.num_classes()]);
        assert_eq!(response.attention.len(), 2, "both GATv2 layers report");
    }
    // The comparison can fail: answers to different requests do differ.
    assert!(serving::count_mismatches(&got[1..], &reference[..7999]).unwrap() > 7000);
}

#[test]
fn sweep_reports_every_thread_count_without_mismatches() {
    let graph = karate();
    let requests: Arc<[Request]> = serving::mixed_requests(&graph, 64, 1).unwrap().into();
    let runs = serving::sweep(Arc::new(gatv2(&graph)), requests, &[1, 2, 3]).unwrap();
    assert_eq!(
        runs.iter().map(|r| r.threads).collect::<Vec<_>>(),
        [1, 2, 3]
    );
    for run in runs {
        assert_eq!((run.requests, run.mismatches), (64, 0));
        assert!(run.requests_per_second > 0.0);
    }
}

#[test]
fn a_reads_first_a_gets_bs_attention_silently_and_b_fails_its_assertion_every_time() {
    let graph = karate();
    let conv = first_gatv2_layer(&gatv2(&graph));
    let (a, b) = two_graphs(&graph);
    for run in 0..50 {
        let demo = race_demo::run_schedule(&conv, &a, &b, Schedule::AReadsFirst).unwrap();
        let [thread_a, thread_b] = &demo.stateful.outcomes[..] else {
            panic!("two threads")
        };
        // A wrote, B overwrote the shared slot, A read B's attention and cleared the slot...
        assert_eq!(thread_a.asked_for, a.name);
        assert_eq!(thread_a.got.as_deref(), Some(b.name.as_str()), "run {run}");
        assert_eq!(
            thread_a.edges_received,
            Some(b.edge_index.num_edges() + graph.num_nodes())
        );
        assert!(thread_a.error.is_none() && thread_a.wrong_attention());
        // ...so B found it empty: PyG's AssertionError, as a value.
        assert_eq!(
            (thread_b.got.as_ref(), thread_b.edges_received),
            (None, None)
        );
        let error = thread_b.error.as_deref().unwrap_or_default();
        assert!(
            error.contains("assert alpha is not None"),
            "run {run}: {error}"
        );
        assert!(!thread_b.correct() && !thread_b.wrong_attention());
        assert!(demo.stateful.wrong_attention() && demo.stateful.assertion_failed());
        // Same interleaving, stateless layer: everyone gets their own.
        assert!(
            demo.stateless.outcomes.iter().all(|o| o.correct()),
            "run {run}:\n{demo:?}"
        );
        assert!(!demo.stateless.race_detected());
    }
}

#[test]
fn b_reads_first_b_gets_its_own_and_a_fails_its_assertion_every_time() {
    let graph = karate();
    let conv = first_gatv2_layer(&gatv2(&graph));
    let (a, b) = two_graphs(&graph);
    for run in 0..50 {
        let demo = race_demo::run_schedule(&conv, &a, &b, Schedule::BReadsFirst).unwrap();
        let [thread_a, thread_b] = &demo.stateful.outcomes[..] else {
            panic!("two threads")
        };
        // B's write was the last, so B reads its own and clears; A finds nothing.
        assert!(thread_b.correct(), "run {run}: {thread_b}");
        assert!(
            thread_a.error.is_some() && thread_a.got.is_none(),
            "run {run}: {thread_a}"
        );
        assert!(!demo.stateful.wrong_attention() && demo.stateful.assertion_failed());
        assert!(!demo.stateless.race_detected(), "run {run}:\n{demo:?}");
    }
}

#[test]
fn the_demo_runs_both_orders_and_prints_both_symptoms() {
    let graph = karate();
    let conv = first_gatv2_layer(&gatv2(&graph));
    let (a, b) = two_graphs(&graph);
    let demo = race_demo::run(&conv, &a, &b).unwrap();
    assert_eq!(demo.a_reads_first.schedule, Schedule::AReadsFirst);
    assert_eq!(demo.b_reads_first.schedule, Schedule::BReadsFirst);
    assert!(demo.anti_pattern_shows_both_symptoms() && demo.stateless_always_correct());
    let text = demo.to_string();
    assert!(text.contains("WRONG, silently"), "{text}");
    assert_eq!(
        text.matches("FAILED: assert alpha is not None").count(),
        2,
        "{text}"
    );
    assert!(text.contains("in both orders"), "{text}");
}

#[test]
fn a_lock_across_the_whole_pass_makes_the_anti_pattern_correct() {
    // The alternative fix the book mentions: serialise whole forward passes. Correct, because
    // no write can land between another call's write and read; one pass at a time.
    let graph = karate();
    let conv = first_gatv2_layer(&gatv2(&graph));
    let (a, b) = two_graphs(&graph);
    let layer = StatefulGatV2::new(conv.clone());
    std::thread::scope(|s| {
        for (k, request) in [&a, &b].into_iter().cycle().take(8).enumerate() {
            let (layer, conv) = (&layer, &conv);
            s.spawn(move || {
                for _ in 0..20 {
                    let got = layer
                        .forward_serialised(&request.x, &request.edge_index)
                        .unwrap();
                    let want = conv.forward(&request.x, &request.edge_index).unwrap();
                    assert_eq!(
                        got.attention.weights.to_vec2::<f32>().unwrap(),
                        want.attention.weights.to_vec2::<f32>().unwrap(),
                        "thread {k}"
                    );
                }
            });
        }
    });
}

#[test]
fn the_anti_pattern_is_right_on_one_thread() {
    // The bug needs two threads: alone, "write then read" returns your own attention.
    let graph = karate();
    let conv = first_gatv2_layer(&gatv2(&graph));
    let (a, b) = two_graphs(&graph);
    let layer = StatefulGatV2::new(conv.clone());
    let empty = layer.take_alpha().unwrap_err();
    assert!(
        matches!(empty, WorkbookError::SharedStateRace(_)),
        "{empty}"
    );
    for request in [&a, &b] {
        let got = layer.forward(&request.x, &request.edge_index).unwrap();
        let want = conv.forward(&request.x, &request.edge_index).unwrap();
        assert_eq!(
            got.attention.edge_index.num_edges(),
            want.attention.edge_index.num_edges()
        );
        assert_eq!(
            got.attention.weights.to_vec2::<f32>().unwrap(),
            want.attention.weights.to_vec2::<f32>().unwrap()
        );
        assert_eq!(
            got.out.to_vec2::<f32>().unwrap(),
            want.out.to_vec2::<f32>().unwrap()
        );
        // forward cleared the slot, as PyG's did.
        assert!(layer.take_alpha().is_err());
    }
}

#[test]
fn the_race_demo_rejects_requests_it_cannot_tell_apart() {
    let graph = karate();
    let conv = first_gatv2_layer(&gatv2(&graph));
    let a = Request::whole(&graph);
    let err = race_demo::run(&conv, &a, &a.clone()).unwrap_err();
    assert!(matches!(err, WorkbookError::InvalidConfig(_)), "{err}");
}

#[test]
fn live_vars_serve_a_mix_of_two_steps_and_snapshots_never_do() {
    let graph = karate();
    for seed in 0..20 {
        let config = ModelConfig::gcn(graph.num_features(), 16, graph.num_classes());
        let demo = snapshot::torn_read_demo(&graph, config, seed, 0.05).unwrap();
        // The hazard, every time: the first half of the parameters is from step 1, the rest
        // from step 0, and the logits belong to no step at all.
        assert!(demo.hazard_shown(), "seed {seed}:\n{demo}");
        let half = demo.written_before_pause;
        for (k, (name, steps)) in demo.live.tag.parameters.iter().enumerate() {
            let want: &[u64] = if k < half { &[1] } else { &[0] };
            assert_eq!(steps, want, "seed {seed}: {name}");
        }
        assert!(demo.live.logits_steps.is_empty(), "seed {seed}:\n{demo}");
        // The fix, every time: mid-step readers get step 0 whole, then step 1 whole.
        assert!(demo.snapshots_consistent(), "seed {seed}:\n{demo}");
        assert_eq!(demo.snapshot.tag.step(), Some(0));
        assert_eq!(demo.snapshot_after.tag.step(), Some(1));
    }
}

#[test]
fn the_snapshot_server_never_serves_two_steps_while_training() {
    let graph = karate();
    let config = ModelConfig::gatv2(graph.num_features(), 4, 2, graph.num_classes());
    let train = TrainConfig {
        epochs: 30,
        ..TrainConfig::gatv2()
    };
    let report = snapshot::serve_while_training(&graph, config, &train, 3, 40).unwrap();
    assert_eq!(report.mixed_reads, 0, "{report}");
    assert_eq!(report.inconsistent_reads, 0, "{report}");
    assert!(report.reads >= 3 * 40, "{report}");
    // Readers keep reading until training is over, so the last step is always served.
    assert_eq!(report.steps_seen.last(), Some(&30), "{report}");
}

#[test]
fn a_snapshot_is_a_copy_that_later_optimiser_steps_cannot_reach() {
    let graph = karate();
    let config = ModelConfig::gcn(graph.num_features(), 16, graph.num_classes());
    let (live, vars) = Model::init(config, 0, graph.device()).unwrap();
    let server = SnapshotServer::new(Snapshot::capture(0, &live).unwrap());
    let before = snapshot::parameter_fingerprints(server.current().model()).unwrap();
    // Overwrite every live parameter in place, as an optimiser does.
    let live_vars = snapshot::model_vars(&live, &vars).unwrap();
    let zeros: Vec<_> = live_vars
        .iter()
        .map(|(_, v)| v.as_tensor().zeros_like().unwrap())
        .collect();
    snapshot::set_in_place(&live_vars, &zeros, |_, _| Ok(())).unwrap();
    assert_ne!(snapshot::parameter_fingerprints(&live).unwrap(), before);
    assert_eq!(
        snapshot::parameter_fingerprints(server.current().model()).unwrap(),
        before
    );
    let replaced = server.publish(Snapshot::capture(1, &live).unwrap());
    assert_eq!((replaced.step(), server.current().step()), (0, 1));
}

#[test]
fn every_model_type_is_send_and_sync() {
    // The real proof is a compile-time constant in workbook_lessons::threads::send_sync; this repeats
    // it for the types a server shares, and checks that the list covers them.
    fn assert_send_sync<T: Send + Sync>() {}
    assert_send_sync::<Model>();
    assert_send_sync::<Arc<Model>>();
    assert_send_sync::<GatV2Conv>();
    assert_send_sync::<SnapshotServer>();
    for name in [
        "Model",
        "Layer",
        "GatV2Conv",
        "GcnConv",
        "Graph",
        "SnapshotServer",
    ] {
        assert!(
            workbook_lessons::threads::send_sync::CHECKED.contains(&name),
            "{name}"
        );
    }
}

#[test]
fn bad_serving_input_is_an_error_not_a_panic() {
    let graph = karate();
    let model = Arc::new(gatv2(&graph));
    let requests: Arc<[Request]> = vec![Request::for_nodes(&graph, vec![0, 34])].into();
    let err = serving::serve(Arc::clone(&model), Arc::clone(&requests), 2).unwrap_err();
    assert!(err.to_string().contains("node 34"), "{err}");
    let err = serving::serve(model, requests, 0).unwrap_err();
    assert!(err.to_string().contains("at least 1 thread"), "{err}");
    let unlabelled = Graph::new("bare", graph.x().clone(), graph.edge_index().clone()).unwrap();
    let config = ModelConfig::gcn(graph.num_features(), 4, graph.num_classes());
    let err = snapshot::torn_read_demo(&unlabelled, config, 0, 0.1).unwrap_err();
    assert!(err.to_string().contains("no labels"), "{err}");
}

#[test]
#[cfg_attr(
    not(feature = "cuda"),
    ignore = "needs a GPU: cargo test --features cuda"
)]
fn serving_on_the_gpu_equals_sequential_and_snapshots_hold() {
    let Some(gpu) = gpu("serving_on_the_gpu_equals_sequential_and_snapshots_hold") else {
        return;
    };
    let graph = datasets::karate(&gpu).unwrap();
    let model = Arc::new(gatv2(&graph));
    let requests: Arc<[Request]> = serving::mixed_requests(&graph, 4 * 200, 7).unwrap().into();
    let run = serving::check(model, requests, 4).unwrap();
    assert_eq!(run.mismatches, 0);
    let config = ModelConfig::gcn(graph.num_features(), 16, graph.num_classes());
    let demo = snapshot::torn_read_demo(&graph, config, 0, 0.05).unwrap();
    assert!(demo.hazard_shown() && demo.snapshots_consistent(), "{demo}");
}
