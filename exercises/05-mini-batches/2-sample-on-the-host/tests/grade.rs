//! Graded tests for exercise 05-2 (points in exercise.toml). Do not edit: the grader checks this
//! file against its checksum.

use super::training_loader::training_loader;
use workbook::datasets::{self, CsbmConfig};
use workbook::device::accelerator;
use workbook::ledger::Ledger;
use workbook::{Graph, Placement};

fn host_graph() -> Graph {
    datasets::csbm(&CsbmConfig::new(2_000), Placement::cpu()).unwrap()
}

#[test]
fn the_loader_builds_from_host_inputs() {
    let graph = host_graph();
    let device = accelerator().placement;
    let loader = training_loader(&graph, &device, 0)
        .unwrap_or_else(|e| panic!("training_loader failed: {e}"));
    let mut seeds = loader.seeds().to_vec();
    seeds.sort();
    let mut train = graph.split().unwrap().train.to_vec1::<u32>().unwrap();
    train.sort();
    assert_eq!(
        seeds, train,
        "the seeds should be the graph's training nodes"
    );
}

#[test]
fn nothing_crosses_to_build_it() {
    let graph = host_graph();
    let ledger = Ledger::new();
    let device = accelerator().placement.with_ledger(&ledger);
    training_loader(&graph, &device, 0).unwrap_or_else(|e| panic!("training_loader failed: {e}"));
    assert!(
        ledger.transfers().is_empty(),
        "building a loader should copy nothing between host and {device} (it samples on the host):\n{}",
        ledger.table()
    );
}

#[test]
fn settings_are_pygs() {
    let graph = host_graph();
    let device = accelerator().placement;
    let loader = training_loader(&graph, &device, 7)
        .unwrap_or_else(|e| panic!("training_loader failed: {e}"));
    let c = loader.config();
    assert_eq!(c.num_neighbors, vec![10, 10], "num_neighbors");
    assert_eq!(c.batch_size, 32, "batch_size");
    assert_eq!(c.seed, 7, "the seed given");
    let (e1, e2) = (
        loader.epoch_seeds(1).concat(),
        loader.epoch_seeds(2).concat(),
    );
    assert_ne!(
        e1, e2,
        "training shuffles: each epoch should visit the seeds in its own order"
    );
}

#[test]
fn its_batches_train_on_the_device() {
    let graph = host_graph();
    let device = accelerator().placement;
    let loader = training_loader(&graph, &device, 0)
        .unwrap_or_else(|e| panic!("training_loader failed: {e}"));
    let batch = loader.batch(1, 0).unwrap().to_device(&device).unwrap();
    assert!(batch.check_on("the device", &device).is_ok());
    assert_eq!(batch.batch_size(), 32);
}
