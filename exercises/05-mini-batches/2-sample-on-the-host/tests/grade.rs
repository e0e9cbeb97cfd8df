//! Graded tests for exercise 05-2 (points in exercise.toml). Do not edit: the grader checks this
//! file against its checksum.
//!
//! Each test is a scenario (the `scenario` crate): it records what it observed, and a teacher's
//! grader compares that with the reference solution's. The grading run's challenge picks the
//! accelerator (`cuda:0`, or a simulated `sim:2` to `sim:7`), the graph (its size and seed) and
//! the loader's seed, so the seeds, the epochs' orders and the batches cannot be written down in
//! advance.

use super::training_loader::training_loader;
use scenario::{Json, Scenario};
use workbook::datasets::{self, CsbmConfig};
use workbook::device::accelerator_or_sim;
use workbook::ledger::Ledger;
use workbook::{Graph, Placement};

/// The accelerator: `cuda:0`, or `sim:2` to `sim:7` as the run's challenge picks.
fn accelerator(s: &Scenario) -> Placement {
    accelerator_or_sim(s.pick("accelerator", 2..8)).placement
}

/// A host graph of 1000 to 2999 nodes, its size and seed the challenge's.
fn host_graph(s: &Scenario) -> Graph {
    let mut config = CsbmConfig::new(s.pick("nodes", 1000..3000));
    config.seed = s.seed("graph");
    datasets::csbm(&config, Placement::cpu()).unwrap()
}

fn training_nodes(graph: &Graph) -> Vec<u32> {
    let mut train = graph.split().unwrap().train.to_vec1::<u32>().unwrap();
    train.sort();
    train
}

#[test]
fn the_loader_builds_from_host_inputs() {
    let s = scenario::start();
    let graph = host_graph(&s);
    let device = accelerator(&s);
    let loader = training_loader(&graph, &device, s.seed("loader"))
        .unwrap_or_else(|e| panic!("training_loader failed: {e}"));
    let mut seeds = loader.seeds().to_vec();
    seeds.sort();
    s.observe("the loader's seeds, sorted", &seeds);
    assert_eq!(
        seeds,
        training_nodes(&graph),
        "the seeds should be the graph's training nodes"
    );
}

#[test]
fn nothing_crosses_to_build_it() {
    // The lesson: the sampler works on the host. Moving the graph to the device and reading
    // the training ids back works too, but copies the graph there and the ids back for nothing.
    let s = scenario::start();
    let graph = host_graph(&s);
    let ledger = Ledger::new();
    let device = accelerator(&s).with_ledger(&ledger);
    let loader = training_loader(&graph, &device, s.seed("loader"))
        .unwrap_or_else(|e| panic!("training_loader failed: {e}"));
    let mut seeds = loader.seeds().to_vec();
    seeds.sort();
    // one record: the copies (none) are the same under every challenge, the seeds are the
    // challenge's graph's
    s.observe(
        "copies made to build it, and the loader's seeds, sorted",
        &(Json(ledger.transfers()), &seeds),
    );
    assert!(
        ledger.transfers().is_empty(),
        "building a loader should copy nothing between host and {device} (it samples on the host):\n{}",
        ledger.table()
    );
    assert_eq!(
        seeds,
        training_nodes(&graph),
        "the seeds should be the graph's training nodes"
    );
}

#[test]
fn settings_are_pygs() {
    let s = scenario::start();
    let graph = host_graph(&s);
    let device = accelerator(&s);
    let seed = s.seed("loader");
    let loader = training_loader(&graph, &device, seed)
        .unwrap_or_else(|e| panic!("training_loader failed: {e}"));
    let c = loader.config();
    s.observe(
        "num_neighbors, batch_size, seed",
        &(c.num_neighbors.clone(), c.batch_size, c.seed),
    );
    let (e1, e2) = (loader.epoch_seeds(1), loader.epoch_seeds(2));
    s.observe("epoch 1's batches of seeds", &e1);
    s.observe("epoch 2's batches of seeds", &e2);
    assert_eq!(c.num_neighbors, vec![10, 10], "num_neighbors");
    assert_eq!(c.batch_size, 32, "batch_size");
    assert_eq!(c.seed, seed, "the seed given");
    assert_ne!(
        e1.concat(),
        e2.concat(),
        "training shuffles: each epoch should visit the seeds in its own order"
    );
}

#[test]
fn its_batches_train_on_the_device() {
    let s = scenario::start();
    let graph = host_graph(&s);
    let device = accelerator(&s);
    let loader = training_loader(&graph, &device, s.seed("loader"))
        .unwrap_or_else(|e| panic!("training_loader failed: {e}"));
    let batch = loader.batch(1, 0).unwrap().to_device(&device).unwrap();
    let on_device = batch.check_on("the device", &device);
    // one record: whether it is on the device is the same under every challenge, its nodes are
    // the challenge's
    s.observe(
        "the first batch's nodes, and whether it is on the device",
        &(batch.n_id_host().to_vec(), on_device.is_ok()),
    );
    assert!(
        on_device.is_ok(),
        "the batch moved to {device} is not all there: {on_device:?}"
    );
    assert_eq!(batch.batch_size(), 32);
}
