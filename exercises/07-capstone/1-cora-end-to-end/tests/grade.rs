//! Graded tests for exercise 07-1 (points in exercise.toml). Do not edit: the grader checks this
//! file against its checksum.
//!
//! Each test checks one step on its own (the steps before it are done here with the library), so
//! a mistake in one step costs only that step's points.

use super::pipeline::{export, load_cora, reload_for_serving, serve, train_gatv2, HEADS, HIDDEN};
use std::collections::HashMap;
use std::sync::Arc;
use workbook::candle_core::{Device, Tensor};
use workbook::device::accelerator;
use workbook::ledger::Ledger;
use workbook::train::{train, TrainConfig};
use workbook::{checkpoint, datasets, Graph, Model, ModelConfig, Placement};
use workbook_lessons::threads::serving::{self, Request};

/// Epochs for the accuracy test: at learning rate 0.02 (seed 0), GATv2 reaches 80.4% test
/// accuracy on Cora after 30 epochs (book chapter 7), in a few seconds.
const EPOCHS: usize = 30;
/// The test accuracy the trained model must reach.
const MIN_TEST_ACCURACY: f32 = 0.75;

fn cora(at: &Placement) -> Graph {
    datasets::load("cora", None, at).expect("loading Cora")
}

fn gatv2_config() -> ModelConfig {
    ModelConfig::gatv2(1433, 8, 8, 7)
}

/// A GATv2 briefly trained (3 epochs) on Cora on `at`, by the library.
fn briefly_trained(at: &Placement) -> Model {
    let recipe = TrainConfig {
        epochs: 3,
        lr: 0.02,
        ..TrainConfig::gatv2()
    };
    train(gatv2_config(), &cora(at), &recipe, |_| {})
        .expect("training GATv2 on Cora")
        .model
}

fn host(t: &Tensor) -> Vec<f32> {
    t.to_device(&Device::Cpu)
        .unwrap()
        .flatten_all()
        .unwrap()
        .to_vec1::<f32>()
        .unwrap()
}

#[test]
fn trains_gatv2_on_the_accelerator_moving_cora_once() {
    let ledger = Ledger::new();
    let gpu = accelerator().placement.with_ledger(&ledger);
    ledger.set_phase("load");
    let graph = load_cora(&gpu).unwrap_or_else(|e| panic!("load_cora failed: {e}"));
    let elsewhere: Vec<String> = graph
        .placements()
        .into_iter()
        .filter(|(_, at)| *at != &gpu)
        .map(|(part, at)| format!("{} on {at}", part.name()))
        .collect();
    assert!(
        elsewhere.is_empty(),
        "load_cora must load Cora onto {gpu}, the device it is given; found {}",
        elsewhere.join(", ")
    );
    let report = train_gatv2(&graph, EPOCHS).unwrap_or_else(|e| panic!("train_gatv2 failed: {e}"));
    assert_eq!(
        report.model.placement(),
        &gpu,
        "the model must be trained where the graph is ({gpu})"
    );
    assert_eq!(
        report.model.config(),
        &ModelConfig::gatv2(1433, HIDDEN, HEADS, 7),
        "train a 2-layer GATv2 with HEADS x HIDDEN hidden channels, Cora's 1433 features and 7 classes"
    );
    assert_eq!(
        report.history.len(),
        EPOCHS,
        "train_gatv2 should train for the {EPOCHS} epochs it was asked for"
    );
    let last = report
        .last()
        .expect("the report has the epochs counted above");
    assert!(
        last.test_accuracy >= MIN_TEST_ACCURACY,
        "test accuracy after {EPOCHS} epochs is {:.1}%, below {:.0}%: is the learning rate LR (0.02) and the recipe TrainConfig::gatv2()?",
        100.0 * last.test_accuracy,
        100.0 * MIN_TEST_ACCURACY
    );
    println!(
        "after {EPOCHS} epochs on {gpu}: loss {:.3}, train {:.1}%, val {:.1}%, test {:.1}%",
        last.loss,
        100.0 * last.train_accuracy,
        100.0 * last.val_accuracy,
        100.0 * last.test_accuracy
    );
    let copies = ledger
        .transfers()
        .iter()
        .filter(|t| t.what == "Cora.x")
        .count();
    assert_eq!(
        copies,
        1,
        "Cora's features should cross to {gpu} exactly once; the ledger shows {copies} copies:\n{}",
        ledger.table()
    );
}

#[test]
fn export_runs_the_preflight_before_writing() {
    let gpu = accelerator().placement;
    let model = Model::init(gatv2_config(), 0, &gpu).unwrap().0;
    let dir = tempfile::tempdir().unwrap();

    // the example graph on the host, the model on the accelerator: refused, nothing written
    let refused = dir.path().join("refused.safetensors");
    match export(&model, &cora(&Placement::cpu()), &refused) {
        Ok(_) => panic!(
            "export wrote a checkpoint although the example graph is on cpu and the model on {gpu}: run the pre-flight first"
        ),
        Err(e) => assert!(
            e.to_string().contains("example input 'x' is on cpu"),
            "the error should be the pre-flight's, naming the example on cpu; got: {e}"
        ),
    }
    assert!(
        !refused.exists(),
        "nothing may be written when the pre-flight fails, but {} exists",
        refused.display()
    );

    let path = dir.path().join("cora_gatv2.safetensors");
    let report = export(&model, &cora(&gpu), &path)
        .unwrap_or_else(|e| panic!("export failed with the model and the example on {gpu}: {e}"));
    assert_eq!(
        report.checks.len(),
        5,
        "export should return the pre-flight's report (5 passed checks); got {:?}",
        report.checks
    );
    let back = checkpoint::load(&path, Placement::cpu())
        .unwrap_or_else(|e| panic!("the exported checkpoint does not load: {e}"));
    assert_eq!(
        back.config(),
        model.config(),
        "the checkpoint holds the model's config"
    );
    let saved: HashMap<String, Tensor> = back.named_parameters().into_iter().collect();
    for (name, t) in model.named_parameters() {
        assert!(
            host(&t) == host(&saved[&name]),
            "parameter '{name}' differs in the checkpoint"
        );
    }
}

#[test]
fn reloaded_model_matches_on_the_cpu() {
    let gpu = accelerator().placement;
    let trained = briefly_trained(&gpu);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("cora_gatv2.safetensors");
    checkpoint::save(&trained, &path).unwrap();

    let served =
        reload_for_serving(&path).unwrap_or_else(|e| panic!("reload_for_serving failed: {e}"));
    assert!(
        served.placement().is_cpu(),
        "the serving machine's device is the cpu, but the model was reloaded onto {}",
        served.placement()
    );
    let reloaded: HashMap<String, Tensor> = served.named_parameters().into_iter().collect();
    for (name, t) in trained.named_parameters() {
        assert!(
            host(&t) == host(&reloaded[&name]),
            "parameter '{name}' differs after the reload"
        );
    }
    // requests arrive on the host: the reloaded model answers them; the trained one on the
    // accelerator gave the same logits
    let host_cora = cora(&Placement::cpu());
    let on_cpu = serving::answer(&served, &Request::whole(&host_cora)).unwrap_or_else(|e| {
        panic!("the reloaded model cannot answer a request built on the host: {e}")
    });
    let on_gpu = trained.forward_graph(&cora(&gpu)).unwrap();
    let (a, b) = (host(&on_cpu.logits), host(&on_gpu.logits));
    let diff = a
        .iter()
        .zip(&b)
        .map(|(x, y)| (x - y).abs())
        .fold(0f32, f32::max);
    if gpu.is_sim() {
        assert!(
            diff == 0.0,
            "on the cpu the reloaded model must give exactly the logits the trained one gave on {gpu}; max difference {diff}"
        );
    } else {
        assert!(
            diff <= 1e-4,
            "the reloaded model's logits differ from those on {gpu} by {diff}"
        );
    }
}

#[test]
fn serves_concurrently_like_sequentially() {
    let host_cora = cora(&Placement::cpu());
    let model = Arc::new(Model::init(gatv2_config(), 7, Placement::cpu()).unwrap().0);
    let requests: Arc<[Request]> = serving::mixed_requests(&host_cora, 16, 0).unwrap().into();
    let reference = serving::serve_sequential(&model, &requests).unwrap();
    let answers = serve(Arc::clone(&model), Arc::clone(&requests), 4)
        .unwrap_or_else(|e| panic!("serve failed: {e}"));
    assert_eq!(
        answers.len(),
        requests.len(),
        "one answer per request, in request order"
    );
    for (i, (answer, expected)) in answers.iter().zip(&reference).enumerate() {
        assert!(
            answer.response.same_as(expected).unwrap(),
            "answer {i} ('{}') differs from the sequential answer",
            requests[i].name
        );
    }
    let mut per_thread: HashMap<std::thread::ThreadId, usize> = HashMap::new();
    for a in &answers {
        *per_thread.entry(a.thread).or_default() += 1;
    }
    assert!(
        !per_thread.contains_key(&std::thread::current().id()),
        "the requests must be answered by the serving threads, not by the caller's thread"
    );
    let mut counts: Vec<usize> = per_thread.values().copied().collect();
    counts.sort();
    assert_eq!(
        counts,
        [4, 4, 4, 4],
        "4 threads should answer 4 of the 16 requests each (thread t: requests t, t + 4, ...)"
    );
    assert_eq!(
        Arc::strong_count(&model),
        1,
        "every thread's Arc clone should be dropped once serving is done"
    );
}
