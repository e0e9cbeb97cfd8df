//! Graded tests for exercise 02-5 (points in exercise.toml). Do not edit: the grader checks this
//! file against its checksum.
//!
//! Each test is a scenario (the `scenario` crate): it records what it observed (the copies in
//! the transfer ledger, where each parameter is and its shape, the optimiser's state, the losses,
//! the trained parameters, the checkpoint's config and logits), and a teacher's grader compares
//! that with the reference solution's. The run's challenge picks the graph (its size, number of
//! classes and, above all, its width, which the lazy layers must find), the hidden width, the
//! model's seed, the number of epochs and the simulated accelerator's number.

use super::lazy_training::{train_lazy, Trained};
use scenario::{Json, Scenario, Tolerance};
use workbook::candle_core::{Device, Tensor};
use workbook::candle_nn;
use workbook::datasets::{self, CsbmConfig};
use workbook::device::accelerator_or_sim;
use workbook::ledger::{Ledger, Transfer};
use workbook::train::Adam;
use workbook::Placement;
use workbook::{checkpoint, tensor_file, GcnConfig, Graph, LayerConfig, Model, ModelConfig};

/// The accelerator: `cuda:0`, or `sim:2` to `sim:7` as the run's challenge picks.
fn accelerator(s: &Scenario) -> Placement {
    accelerator_or_sim(s.pick("accelerator", 2..8)).placement
}

/// Two correct solutions differ by float rounding at most (none on host-backed devices; a GPU
/// may reorder sums).
const SAME: Tolerance = Tolerance {
    abs: 1e-5,
    rel: 1e-5,
};

/// The graph, on the host: a CSBM graph whose width (features per node) the challenge picks, so
/// that no width can be written into the model in advance.
fn host_graph(s: &Scenario) -> Graph {
    let config = CsbmConfig {
        classes: s.pick("classes", 3..6),
        features: s.pick("features", 5..40),
        seed: s.seed("graph"),
        ..CsbmConfig::new(s.pick("nodes", 60..120))
    };
    datasets::csbm(&config, Placement::cpu()).unwrap()
}

/// `GCNConv(-1, hidden)`, `GCNConv(-1, classes)`: both layers lazy, built on the host, never run.
fn lazy_model(s: &Scenario, classes: usize) -> Model {
    let hidden = s.pick("hidden", 4..17);
    let config = ModelConfig::new(vec![
        LayerConfig::lazy(move |i| GcnConfig::new(i, hidden)),
        LayerConfig::lazy(move |i| GcnConfig::new(i, classes)),
    ]);
    Model::init(config, s.seed("model"), Placement::cpu())
        .unwrap()
        .0
}

/// The learning rates a run may draw: none of them a common default (0.01, 0.02, 0.001), so that
/// a training loop that ignores its `lr` shows.
const LEARNING_RATES: [f64; 6] = [0.015, 0.025, 0.03, 0.035, 0.04, 0.045];

/// One run of `train_lazy` on the accelerator, with a ledger attached.
struct Run {
    ledger: Ledger,
    gpu: Placement,
    host: Graph,
    epochs: usize,
    lr: f64,
    trained: Trained,
}

fn run(s: &Scenario) -> Run {
    let ledger = Ledger::new();
    let gpu = accelerator(s).with_ledger(&ledger);
    let host = host_graph(s);
    let model = lazy_model(s, host.num_classes());
    let epochs = s.pick("epochs", 3..9);
    let lr = LEARNING_RATES[s.pick("learning rate", 0..LEARNING_RATES.len())];
    let trained = train_lazy(model, &host, &gpu, epochs, lr)
        .unwrap_or_else(|e| panic!("train_lazy failed on {gpu}: {e}"));
    Run {
        ledger,
        gpu,
        host,
        epochs,
        lr,
        trained,
    }
}

/// A copy the ledger recorded: what, from, to, bytes.
type Row = (String, String, String, u64);

fn rows(transfers: Vec<Transfer>) -> Vec<Row> {
    let mut rows: Vec<Row> = transfers
        .into_iter()
        .map(|t| (t.what, t.from, t.to, t.bytes))
        .collect();
    rows.sort();
    rows
}

/// The copies of the model's parameters (created by the first forward pass, or copied).
fn parameter_copies(ledger: &Ledger, model: &Model) -> Vec<Row> {
    let names: Vec<String> = model.named_parameters().into_iter().map(|p| p.0).collect();
    rows(ledger.transfers())
        .into_iter()
        .filter(|(what, ..)| names.iter().any(|n| what.starts_with(n.as_str())))
        .collect()
}

/// Each layer's input width, as its config says.
fn widths(model: &Model) -> Vec<usize> {
    model
        .config()
        .layers
        .iter()
        .map(|l| l.in_channels())
        .collect()
}

/// Where each parameter is, with its shape.
fn placements(model: &Model) -> Vec<(String, String, Vec<usize>)> {
    let shapes = model.named_parameters();
    model
        .parameter_placements()
        .into_iter()
        .map(|(name, at)| {
            let shape = shapes
                .iter()
                .find(|(n, _)| *n == name)
                .map_or_else(Vec::new, |(_, t)| t.dims().to_vec());
            (name, at.to_string(), shape)
        })
        .collect()
}

/// The same lazy model materialised on the host: the initial values the first forward pass
/// creates (drawn on the host from the model's seed, so the same bits on every device).
fn initial_values(s: &Scenario, host: &Graph) -> Vec<(String, Tensor)> {
    let mut model = lazy_model(s, host.num_classes());
    model.materialize(host).unwrap();
    model.named_parameters()
}

/// The README's training, done here on the host from the same first weights: full-batch
/// cross-entropy on the training nodes, Adam at `lr` without weight decay, one step per epoch.
/// Returns each epoch's loss and the trained parameters.
fn adam_without_decay(
    s: &Scenario,
    host: &Graph,
    epochs: usize,
    lr: f64,
) -> (Vec<f32>, Vec<(String, Tensor)>) {
    let mut model = lazy_model(s, host.num_classes());
    model.materialize(host).unwrap();
    let mut adam = Adam::for_model(&model, lr, |_| 0.0).unwrap();
    let split = host.split().unwrap();
    let y = host.y().unwrap().index_select(&split.train, 0).unwrap();
    let mut losses = Vec::new();
    for _ in 0..epochs {
        let logits = model.forward_graph(host).unwrap().logits;
        let logits = logits.index_select(&split.train, 0).unwrap();
        let loss = candle_nn::loss::cross_entropy(&logits, &y).unwrap();
        losses.push(loss.to_scalar::<f32>().unwrap());
        adam.backward_step(&loss).unwrap();
    }
    (losses, model.named_parameters())
}

fn host_values(t: &Tensor) -> Vec<f32> {
    t.to_device(&Device::Cpu)
        .unwrap()
        .flatten_all()
        .unwrap()
        .to_vec1::<f32>()
        .unwrap()
}

#[test]
fn the_weights_are_born_on_the_device() {
    let s = scenario::start();
    let Run {
        ledger,
        gpu,
        host,
        trained,
        ..
    } = run(&s);
    let model = &trained.model;
    let copies = parameter_copies(&ledger, model);
    s.observe("the parameters' copies", &Json(&copies));
    s.observe("each parameter's placement and shape", &placements(model));
    s.observe("each layer's input width", &widths(model));
    assert!(
        model.is_materialized(),
        "the model returned still has a lazy layer: run its first forward pass (model.materialize(&graph))"
    );
    let gpu_id = gpu.to_string();
    for (name, _) in model.named_parameters() {
        let born = format!("{name} (first forward pass)");
        let born_here = copies
            .iter()
            .filter(|(what, from, to, _)| *what == born && from == "cpu" && *to == gpu_id)
            .count();
        assert_eq!(
            born_here,
            1,
            "'{name}' should be born on {gpu} by the model's first forward pass (one '{born}' upload to {gpu}); move the lazy model to the device *before* that pass. The ledger:\n{}",
            ledger.table()
        );
        let copied: Vec<&Row> = copies
            .iter()
            .filter(|(what, _, to, _)| *what != born && *to == gpu_id)
            .filter(|(what, ..)| what.starts_with(name.as_str()))
            .collect();
        assert!(
            copied.is_empty(),
            "'{name}' was born and then copied to {gpu} ({copied:?}): a weight created on the host and moved is two steps where one does. The ledger:\n{}",
            ledger.table()
        );
    }
    for (name, at) in model.parameter_placements() {
        assert_eq!(at.to_string(), gpu_id, "'{name}' should be on {gpu}");
    }
    assert_eq!(
        model.config().layers[0].in_channels(),
        host.num_features(),
        "after its first forward pass, the first layer's config should hold the graph's width"
    );
}

#[test]
fn the_optimiser_trains_every_parameter() {
    let s = scenario::start();
    let Run {
        gpu,
        host,
        epochs,
        lr,
        trained,
        ..
    } = run(&s);
    let Trained {
        model,
        optimiser,
        losses,
        ..
    } = &trained;
    let held: Vec<String> = optimiser.state().map(|(n, ..)| n.to_string()).collect();
    // One record: the names the optimiser holds are the same under every challenge, and its
    // steps and learning rate are drawn from a few; the losses they give are not.
    s.observe_within(
        "the parameters the optimiser holds, its steps and learning rate, and the losses",
        &(&held, optimiser.steps(), optimiser.lr(), losses),
        SAME,
    );
    for (name, t) in model.named_parameters() {
        s.observe_within(format!("the trained {name}"), &t, SAME);
    }
    let names: Vec<String> = model.named_parameters().into_iter().map(|p| p.0).collect();
    let missing: Vec<&String> = names.iter().filter(|n| !held.contains(n)).collect();
    assert!(
        missing.is_empty(),
        "the optimiser does not hold {missing:?} (it holds {held:?}): an optimiser sees only the parameters that exist when it is built, so build it after the first forward pass"
    );
    assert!(
        optimiser.is_bound_to(model),
        "the optimiser returned should update the returned model's parameters (the same variables)"
    );
    assert_eq!(
        optimiser.steps(),
        epochs as u64,
        "{epochs} epochs should be {epochs} optimiser steps"
    );
    assert_eq!(losses.len(), epochs, "one loss per epoch");
    for (name, before) in initial_values(&s, &host) {
        let after = model
            .named_parameters()
            .into_iter()
            .find(|(n, _)| *n == name)
            .map(|(_, t)| host_values(&t))
            .unwrap_or_default();
        assert!(
            after.len() == before.elem_count() && after != host_values(&before),
            "'{name}' still holds the value its first forward pass gave it: it was not trained"
        );
    }
    assert!(
        optimiser.lr() == lr,
        "train_lazy was given lr = {lr}, but its optimiser's learning rate is {}: use the `lr` argument",
        optimiser.lr()
    );
    // What the README promises, not only a falling loss: Adam at `lr` with no weight decay, from
    // the weights the first forward pass created. A weight decay, another learning rate or
    // another loss gives other losses and other weights.
    let (want_losses, want) = adam_without_decay(&s, &host, epochs, lr);
    let loss_gap = losses
        .iter()
        .zip(&want_losses)
        .map(|(a, b)| (a - b).abs())
        .fold(0.0f32, f32::max);
    let mut weight_gap = (0.0f32, String::new());
    for (name, t) in &want {
        let got = model
            .named_parameters()
            .into_iter()
            .find(|(n, _)| n == name)
            .map(|(_, t)| host_values(&t))
            .unwrap_or_default();
        let gap = got
            .iter()
            .zip(host_values(t))
            .map(|(a, b)| (a - b).abs())
            .fold(0.0f32, f32::max);
        if gap > weight_gap.0 {
            weight_gap = (gap, name.clone());
        }
    }
    // The simulated devices compute on the host, in the same order: the same bits. A GPU may
    // reorder its sums.
    let tolerance = if gpu.is_sim() { 0.0 } else { 1e-4 };
    assert!(
        losses.iter().all(|l| l.is_finite())
            && loss_gap <= tolerance
            && weight_gap.0 <= tolerance,
        "{epochs} epochs of Adam at lr = {lr} without weight decay, from the weights of the first forward pass, give the losses {want_losses:?}; this run's are {losses:?}, and its '{}' differs from that training's by up to {} (README: Adam, learning rate `lr`, no weight decay, the cross-entropy of the training nodes, one step per epoch)",
        weight_gap.1,
        weight_gap.0
    );
}

#[test]
fn the_graph_crosses_once() {
    let s = scenario::start();
    let Run {
        ledger,
        gpu,
        host,
        epochs,
        trained,
        ..
    } = run(&s);
    let prefix = format!("{}.", host.name);
    let graph_copies: Vec<Row> = rows(ledger.transfers())
        .into_iter()
        .filter(|(what, ..)| what.starts_with(&prefix))
        .collect();
    // One record: the copies (their sizes drawn with the graph) and where the graph returned is.
    s.observe(
        "the graph's copies, and the returned graph's placement",
        &(Json(&graph_copies), trained.graph.placement().to_string()),
    );
    for part in ["x", "edge_index", "y", "train_mask/val_mask/test_mask"] {
        let what = format!("{prefix}{part}");
        let times = graph_copies
            .iter()
            .filter(|(w, from, to, _)| *w == what && from == "cpu" && *to == gpu.to_string())
            .count();
        assert_eq!(
            times,
            1,
            "over the first forward pass and {epochs} epochs, {what} should cross from cpu to {gpu} once, not {times} times:\n{}",
            ledger.table()
        );
    }
    assert_eq!(
        trained.graph.placement().to_string(),
        gpu.to_string(),
        "the graph returned should be the one on {gpu}"
    );
}

#[test]
fn a_checkpoint_of_it_needs_no_lazy_layer() {
    let s = scenario::start();
    let Run { host, trained, .. } = run(&s);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("lazy-gcn.safetensors");
    let saved = checkpoint::save(&trained.model, &path);
    if let Err(e) = &saved {
        panic!("checkpoint::save of the trained model failed: {e}");
    }
    let file = tensor_file::read(&path, &Device::Cpu).unwrap();
    let text = file
        .metadata
        .get(checkpoint::CONFIG_KEY)
        .cloned()
        .unwrap_or_default();
    let config = ModelConfig::from_json(&text).unwrap();
    let written: Vec<usize> = config.layers.iter().map(|l| l.in_channels()).collect();
    // A config with widths builds the whole model without any data; with -1 it would be lazy.
    let rebuilt = Model::init(config, 0, Placement::cpu()).unwrap().0;
    // One record: that it saved and that its config alone makes a complete model are the same
    // under every challenge; the widths it holds (the drawn graph's) are not.
    s.observe(
        "the checkpoint is saved; its input widths; a model built from its config alone is complete",
        &(saved.is_ok(), &written, rebuilt.is_materialized()),
    );
    let loaded = checkpoint::load(&path, Placement::cpu()).unwrap();
    let logits = loaded.forward_graph(&host).unwrap().logits;
    s.observe_within("the loaded model's logits", &logits, SAME);
    assert_eq!(
        written[0],
        host.num_features(),
        "the checkpoint's config should give the first layer the graph's width ({}), not {}: save after the first forward pass",
        host.num_features(),
        written[0]
    );
    assert!(
        rebuilt.is_materialized(),
        "a model built from the checkpoint's config alone should need no first forward pass"
    );
    let trained_logits = trained.model.forward_graph(&trained.graph).unwrap().logits;
    let (a, b) = (host_values(&logits), host_values(&trained_logits));
    assert!(
        a.len() == b.len()
            && a.iter()
                .zip(&b)
                .all(|(x, y)| (x - y).abs() <= 1e-5 * (1.0 + y.abs())),
        "the checkpoint, loaded on the host, should give the trained model's logits"
    );
}
