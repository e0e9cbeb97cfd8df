//! Graded tests for exercise 07-1 (points in exercise.toml). Do not edit: the grader checks this
//! file against its checksum.
//!
//! Each test checks one step on its own (the steps before it are done here with the library), so
//! a mistake in one step costs only that step's points.
//!
//! Each test is a scenario (the `scenario` crate): it records what it observed, and a teacher's
//! grader compares that with the reference solution's. The grading run's challenge picks the
//! accelerator (`cuda:0`, or a simulated `sim:2` to `sim:7`), the models' sizes and seeds (the
//! heads and hidden channels always differ, so swapped arguments show), the requests and the
//! number of serving threads, so the values cannot be written down in advance. Every comparison
//! treats a NaN as a difference.

use super::pipeline::{export, load_cora, reload_for_serving, serve, train_gatv2};
use scenario::{Json, Scenario, Shown, Tolerance};
use std::collections::HashMap;
use std::sync::Arc;
use workbook::candle_core::{Device, Tensor};
use workbook::device::accelerator_or_sim;
use workbook::ledger::Ledger;
use workbook::train::{train, TrainConfig};
use workbook::{checkpoint, datasets, Graph, Model, ModelConfig, Placement};
use workbook_lessons::threads::serving::{self, Request};

/// Epochs for the accuracy test: at learning rate 0.02 (seed 0), GATv2 reaches 80.4% test
/// accuracy on Cora after 30 epochs (book chapter 7), in a few seconds.
const EPOCHS: usize = 30;
/// The test accuracy the trained model must reach.
const MIN_TEST_ACCURACY: f32 = 0.75;

/// The accelerator: `cuda:0`, or `sim:2` to `sim:7` as the run's challenge picks.
fn accelerator(s: &Scenario) -> Placement {
    accelerator_or_sim(s.pick("accelerator", 2..8)).placement
}

/// The largest |a - b|, NaN as soon as one difference is NaN (f32::max would skip it).
fn max_diff(a: &[f32], b: &[f32]) -> f32 {
    a.iter()
        .zip(b)
        .map(|(x, y)| (x - y).abs())
        .fold(0f32, |m, d| {
            if d.is_nan() || m.is_nan() {
                f32::NAN
            } else {
                m.max(d)
            }
        })
}

/// A large tensor's digest for the judge (a test's log is capped): the sum, the sum of
/// magnitudes and 64 evenly spaced values, in float64; a NaN anywhere makes the sums NaN.
fn digest(values: &[f32]) -> Vec<f64> {
    let step = (values.len() / 64).max(1);
    let mut out = vec![
        values.iter().map(|&v| f64::from(v)).sum(),
        values.iter().map(|&v| f64::from(v).abs()).sum(),
    ];
    out.extend(values.iter().step_by(step).take(64).map(|&v| f64::from(v)));
    out
}

fn cora(at: &Placement) -> Graph {
    datasets::load("cora", None, at).expect("loading Cora")
}

fn gatv2_config() -> ModelConfig {
    ModelConfig::gatv2(1433, 8, 8, 7)
}

/// A GATv2 briefly trained (3 epochs, the challenge's seed) on Cora on `at`, by the library.
fn briefly_trained(s: &Scenario, at: &Placement) -> Model {
    let recipe = TrainConfig {
        epochs: 3,
        lr: 0.02,
        seed: s.seed("training"),
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
    let s = scenario::start();
    let ledger = Ledger::new();
    let gpu = accelerator(&s).with_ledger(&ledger);
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
    // First a short run of the challenge's size: heads and hidden channels differ, so a model
    // built with the two swapped shows.
    let heads = s.pick("heads", 2..7);
    let hidden = heads + 1 + s.pick("hidden", 0..6); // never equal to heads
    let short = train_gatv2(&graph, heads, hidden, 2)
        .unwrap_or_else(|e| panic!("train_gatv2 failed for {heads} heads x {hidden}: {e}"));
    let short_losses: Vec<f32> = short.history.iter().map(|e| e.loss).collect();
    s.observe(
        format!("{heads} heads x {hidden}: the model's config"),
        &Shown(short.model.config()),
    );
    assert_eq!(
        short.model.config(),
        &ModelConfig::gatv2(1433, hidden, heads, 7),
        "train_gatv2(graph, {heads}, {hidden}, ..) should train a 2-layer GATv2 of {heads} heads x {hidden} hidden channels (ModelConfig::gatv2(in, hidden, heads, classes): mind the order), Cora's 1433 features and 7 classes"
    );
    // Then the chapter's model, PyG's GAT example: 8 heads x 8 hidden channels.
    ledger.set_phase("train");
    let report =
        train_gatv2(&graph, 8, 8, EPOCHS).unwrap_or_else(|e| panic!("train_gatv2 failed: {e}"));
    assert_eq!(
        report.model.placement(),
        &gpu,
        "the model must be trained where the graph is ({gpu})"
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
    // One record: the chapter's run (8 heads x 8, the same under every challenge but the
    // device) and where Cora went, beside the short run's losses (the challenge's sizes).
    s.observe_within(
        format!(
            "{heads} heads x {hidden}: the losses; parts of Cora not on the device; 8 heads x 8: the trained model's device, epochs trained, test accuracy after {EPOCHS} epochs reaches {MIN_TEST_ACCURACY}, copies of Cora's features"
        ),
        &(
            &short_losses,
            &elsewhere,
            (
                report.model.placement().to_string(),
                report.history.len(),
                last.test_accuracy >= MIN_TEST_ACCURACY,
                copies,
            ),
        ),
        Tolerance {
            abs: 1e-4,
            rel: 1e-3,
        },
    );
    assert_eq!(
        copies,
        1,
        "Cora's features should cross to {gpu} exactly once; the ledger shows {copies} copies:\n{}",
        ledger.table()
    );
}

#[test]
fn export_runs_the_preflight_before_writing() {
    let s = scenario::start();
    let gpu = accelerator(&s);
    let model = Model::init(gatv2_config(), s.seed("model"), &gpu)
        .unwrap()
        .0;
    let dir = tempfile::tempdir().unwrap();

    // the example graph on the host, the model on the accelerator: refused, nothing written
    let refused = dir.path().join("refused.safetensors");
    let result = export(&model, &cora(&Placement::cpu()), &refused);
    let refusal = (
        result
            .as_ref()
            .err()
            .map(|e| e.to_string().contains("example input 'x' is on cpu")),
        refused.exists(),
    );
    match result {
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
    // One record: the refusal and the checks passed are the same under every challenge, the
    // saved parameters (the challenge's model) are not.
    s.observe_within(
        format!("example on cpu, model on {gpu}: refused by the pre-flight, written; passed pre-flight checks; the saved parameters"),
        &(refusal, report.checks.len(), back.named_parameters()),
        Tolerance::EXACT,
    );
    for (name, t) in model.named_parameters() {
        assert!(
            host(&t) == host(&saved[&name]),
            "parameter '{name}' differs in the checkpoint"
        );
    }
}

#[test]
fn reloaded_model_matches_on_the_cpu() {
    let s = scenario::start();
    let gpu = accelerator(&s);
    let trained = briefly_trained(&s, &gpu);
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
    // one record: the device (the cpu) is the same under every challenge, the logits are not
    s.observe_within(
        "the reloaded model's device, and its logits on the cpu",
        &(
            served.placement().to_string(),
            digest(&host(&on_cpu.logits)),
        ),
        Tolerance {
            abs: 1e-3,
            rel: 1e-4,
        },
    );
    let (a, b) = (host(&on_cpu.logits), host(&on_gpu.logits));
    let diff = max_diff(&a, &b);
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
    let s = scenario::start();
    let host_cora = cora(&Placement::cpu());
    let model = Arc::new(
        Model::init(gatv2_config(), s.seed("model"), Placement::cpu())
            .unwrap()
            .0,
    );
    let threads = s.pick("threads", 2..6);
    let count = s.pick("requests", 8..20);
    let requests: Arc<[Request]> = serving::mixed_requests(&host_cora, count, s.seed("requests"))
        .unwrap()
        .into();
    let reference = serving::serve_sequential(&model, &requests).unwrap();
    let answers = serve(Arc::clone(&model), Arc::clone(&requests), threads)
        .unwrap_or_else(|e| panic!("serve failed: {e}"));
    // which requests each thread answered (threads numbered by their first request)
    let mut groups: Vec<Vec<usize>> = Vec::new();
    let mut group_of: HashMap<std::thread::ThreadId, usize> = HashMap::new();
    for (i, a) in answers.iter().enumerate() {
        let g = *group_of.entry(a.thread).or_insert_with(|| {
            groups.push(Vec::new());
            groups.len() - 1
        });
        groups[g].push(i);
    }
    let same: Vec<bool> = answers
        .iter()
        .zip(reference.iter())
        .map(|(a, e)| a.response.same_as(e).unwrap_or(false))
        .collect();
    let sums: Vec<f64> = answers
        .iter()
        .map(|a| host(&a.response.logits).iter().map(|&v| f64::from(v)).sum())
        .collect();
    // every thread is done with the model once serve has returned
    let kept = Arc::strong_count(&model);
    s.observe(format!("{count} requests: answers"), &answers.len());
    // One record: which answers equal the sequential ones, whether the caller's thread answered
    // and the references left are the same under every challenge (for a count), the logits are
    // the challenge's.
    s.observe_within(
        "each answer's logits, summed; each answer equal to the sequential one; answered on the caller's thread; references to the model left",
        &(
            &sums,
            &same,
            group_of.contains_key(&std::thread::current().id()),
            kept,
        ),
        Tolerance {
            abs: 1e-3,
            rel: 1e-5,
        },
    );
    s.observe(
        format!("{threads} threads: the requests each answered"),
        &Json(&groups),
    );
    assert_eq!(
        answers.len(),
        requests.len(),
        "one answer per request, in request order"
    );
    for (i, (answer, expected)) in answers.iter().zip(reference.iter()).enumerate() {
        if answer.response.same_as(expected).unwrap_or(false) {
            continue;
        }
        // An answer to another request means the answers are right but out of order.
        let other = (0..reference.len())
            .find(|&j| j != i && answer.response.same_as(&reference[j]).unwrap_or(false));
        match other {
            Some(j) => panic!(
                "answer {i} is the answer to request {j} ('{}'), not to request {i} ('{}'): the answers are out of order. Return them in request order (answer i at index i), not in the order the threads finish",
                requests[j].name, requests[i].name
            ),
            None => panic!(
                "answer {i} ('{}') is not the answer the model gives to that request on its own (serve_sequential): every request must get the logits of a plain forward pass",
                requests[i].name
            ),
        }
    }
    let mut per_thread: HashMap<std::thread::ThreadId, usize> = HashMap::new();
    for a in &answers {
        *per_thread.entry(a.thread).or_default() += 1;
    }
    assert!(
        !per_thread.contains_key(&std::thread::current().id()),
        "the requests must be answered by the serving threads, not by the caller's thread"
    );
    let expected: Vec<Vec<usize>> = (0..threads.min(count))
        .map(|t| (t..count).step_by(threads).collect())
        .collect();
    assert_eq!(
        groups, expected,
        "{threads} threads should share the {count} requests: thread t answers requests t, t + {threads}, t + {}, ...",
        2 * threads
    );
    assert_eq!(
        kept, 1,
        "every thread's Arc clone should be dropped once serving is done"
    );
}

#[test]
fn serving_with_zero_threads_is_an_error() {
    // The README's promise: zero threads is an error, not a hang or a panic (a request left
    // unanswered, `step_by(0)`, a division by zero).
    let s = scenario::start();
    let host_cora = cora(&Placement::cpu());
    let model = Arc::new(
        Model::init(gatv2_config(), s.seed("model"), Placement::cpu())
            .unwrap()
            .0,
    );
    let count = s.pick("requests", 1..6);
    let requests: Arc<[Request]> = serving::mixed_requests(&host_cora, count, s.seed("requests"))
        .unwrap()
        .into();
    let result = serve(Arc::clone(&model), Arc::clone(&requests), 0);
    let answered = result.as_ref().map(|a| a.len()).ok();
    assert!(
        result.is_err(),
        "serve with 0 threads should return an error (there is no thread to answer the {count} request(s)); it returned {} answer(s)",
        answered.unwrap_or(0)
    );
    // and one thread still works, answering every request itself
    let one = serve(Arc::clone(&model), Arc::clone(&requests), 1)
        .unwrap_or_else(|e| panic!("serve with 1 thread failed: {e}"));
    let threads: std::collections::HashSet<_> = one.iter().map(|a| a.thread).collect();
    let sums: Vec<f64> = one
        .iter()
        .map(|a| host(&a.response.logits).iter().map(|&v| f64::from(v)).sum())
        .collect();
    // one record: the counts are the same under many challenges, the logits are the challenge's
    s.observe_within(
        format!("{count} requests, 0 threads: answers; 1 thread: answers, threads; each answer's logits, summed"),
        &(answered, (one.len(), threads.len()), &sums),
        Tolerance {
            abs: 1e-3,
            rel: 1e-5,
        },
    );
    assert!(
        one.len() == count && threads.len() == 1 && !threads.contains(&std::thread::current().id()),
        "serve with 1 thread should answer the {count} request(s) on one new thread"
    );
}
