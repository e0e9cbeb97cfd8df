//! Graded tests for exercise 06-1 (points in exercise.toml). Do not edit: the grader checks this
//! file against its checksum.

use super::replicate::replicate;
use workbook::datasets;
use workbook::ledger::{Ledger, Transfer};
use workbook::loader::{Batch, LoaderConfig, NeighborLoader};
use workbook::module::{Kind, Module};
use workbook::parallel::DataParallel;
use workbook::placement::{bytes_of, Placement};
use workbook::train::TrainConfig;
use workbook::{Graph, LayerConfig, Model, ModelConfig};

fn cora() -> Graph {
    datasets::load("cora", None, Placement::cpu()).expect("loading Cora")
}

fn sims(n: usize, ledger: &Ledger) -> Vec<Placement> {
    (1..=n)
        .map(|k| Placement::sim(k).with_ledger(ledger))
        .collect()
}

/// A GCN built with `cached = true` (PyG's transductive setting) on `at`, whose first forward
/// pass over the whole graph there has filled each layer's `_cached_edge_index` on `at`.
fn cached_gcn(graph: &Graph, at: &Placement) -> Model {
    let mut config = ModelConfig::gcn(graph.num_features(), 16, graph.num_classes());
    for layer in &mut config.layers {
        if let LayerConfig::Gcn(c) = layer {
            c.cached = true;
        }
    }
    let (model, _) = Model::init(config, 0, at).unwrap();
    model.forward_graph(&graph.to_device(at).unwrap()).unwrap();
    assert!(
        !model.buffer_placements().is_empty(),
        "the cache should be filled"
    );
    model
}

fn replicas_of(model: &Model, devices: &[Placement]) -> Vec<Model> {
    let replicas = replicate(model, devices).unwrap_or_else(|e| panic!("replicate failed: {e}"));
    assert_eq!(
        replicas.len(),
        devices.len(),
        "one replica per device ({} devices)",
        devices.len()
    );
    replicas
}

fn names(m: &Model) -> Vec<(String, Kind)> {
    m.tensor_placements()
        .into_iter()
        .map(|(n, k, _)| (n, k))
        .collect()
}

/// Every parameter and buffer of every replica on that replica's device, none missing.
fn assert_each_on_its_device(model: &Model, replicas: &[Model], devices: &[Placement]) {
    for (k, (replica, at)) in replicas.iter().zip(devices).enumerate() {
        assert_eq!(
            names(replica),
            names(model),
            "replica {k} must hold every parameter and buffer of the model (the cached _cached_edge_index too)"
        );
        for (name, kind, p) in replica.tensor_placements() {
            assert_eq!(
                &p,
                at,
                "replica {k} (for {at}) reads its {} '{name}' from {p}: each replica needs its own copy on its own device",
                kind.as_str()
            );
        }
        assert_eq!(replica.placement(), at, "replica {k}'s placement");
    }
}

fn values(t: &workbook::candle_core::Tensor) -> Vec<f32> {
    t.flatten_all().unwrap().to_vec1::<f32>().unwrap()
}

fn key(t: &Transfer) -> (String, String, u64, String) {
    (t.from.clone(), t.to.clone(), t.bytes, t.what.clone())
}

#[test]
fn every_replica_reads_from_its_own_device() {
    let g = cora();
    let ledger = Ledger::new();
    let devices = sims(3, &ledger);
    let model = cached_gcn(&g, &devices[0]);
    let replicas = replicas_of(&model, &devices);
    assert_each_on_its_device(&model, &replicas, &devices);
    let expected = model
        .forward_graph(&g.to_device(&devices[0]).unwrap())
        .unwrap();
    for (k, (replica, at)) in replicas.iter().zip(&devices).enumerate() {
        let out = replica
            .forward_graph(&g.to_device(at).unwrap())
            .unwrap_or_else(|e| panic!("replica {k}'s forward pass on {at} failed: {e}"));
        assert_eq!(
            values(&out.logits),
            values(&expected.logits),
            "replica {k} on {at} should compute what the model computes"
        );
    }
    DataParallel::from_replicas(replicas, &devices, &TrainConfig::gcn())
        .unwrap_or_else(|e| panic!("DataParallel::from_replicas refused the replicas: {e}"));
}

#[test]
fn a_model_on_the_host_is_copied_to_every_device() {
    let g = cora();
    let ledger = Ledger::new();
    let devices = sims(2, &ledger);
    let model = cached_gcn(&g, &Placement::cpu());
    ledger.clear();
    let replicas = replicas_of(&model, &devices);
    assert_each_on_its_device(&model, &replicas, &devices);
    let transfers = ledger.transfers();
    for at in &devices {
        for (name, t) in model.named_parameters() {
            let n = transfers
                .iter()
                .filter(|x| x.what == name && x.from == "cpu" && x.to == at.to_string())
                .count();
            assert_eq!(
                n,
                1,
                "'{name}' should be copied from cpu to {at} once, not {n} times ({} bytes):\n{}",
                bytes_of(&t),
                ledger.table()
            );
        }
    }
    DataParallel::from_replicas(replicas, &devices, &TrainConfig::gcn())
        .unwrap_or_else(|e| panic!("DataParallel::from_replicas refused the replicas: {e}"));
}

#[test]
fn the_ledger_holds_one_copy_of_each_tensor_per_other_device() {
    let g = cora();
    let ledger = Ledger::new();
    let devices = sims(3, &ledger);
    let model = cached_gcn(&g, &devices[0]);
    ledger.clear();
    let _replicas = replicas_of(&model, &devices);
    let ours = ledger.transfers();
    for t in &ours {
        assert_ne!(
            t.to, "sim:1",
            "the model is on sim:1 already: its replica there needs no copy, but {t:?} was recorded"
        );
    }
    for at in &devices[1..] {
        for (name, t) in model.named_parameters() {
            let copies: Vec<_> = ours
                .iter()
                .filter(|x| x.what == name && x.to == at.to_string())
                .collect();
            assert!(
                copies.len() == 1 && copies[0].bytes == bytes_of(&t) && copies[0].from == "sim:1",
                "'{name}' ({} bytes) should be copied from sim:1 to {at} once; recorded: {copies:?}\n{}",
                bytes_of(&t),
                ledger.table()
            );
        }
    }
    // Buffers too: exactly the copies the library's DataParallel::new makes.
    let reference = Ledger::new();
    let _dp = DataParallel::new(&model, &sims(3, &reference), &TrainConfig::gcn()).unwrap();
    let mut expected: Vec<_> = reference
        .transfers()
        .iter()
        .filter(|t| t.phase.starts_with("replicate to"))
        .map(key)
        .collect();
    let mut got: Vec<_> = ours.iter().map(key).collect();
    expected.sort();
    got.sort();
    let missing: Vec<_> = expected.iter().filter(|e| !got.contains(e)).collect();
    let extra: Vec<_> = got.iter().filter(|e| !expected.contains(e)).collect();
    assert!(
        missing.is_empty() && extra.is_empty(),
        "the copies (from, to, bytes, what) should be one per parameter and buffer per other device; missing {missing:?}, unexpected {extra:?}"
    );
    assert_eq!(got, expected, "each copy once");
}

#[test]
fn replicas_are_copies_not_aliases() {
    let g = cora();
    let devices = [Placement::sim(1), Placement::sim(2), Placement::sim(3)];
    let model = cached_gcn(&g, &devices[0]);
    let replicas = replicas_of(&model, &devices);
    let first = |m: &Model| values(&m.named_parameters()[0].1);
    for k in 1..replicas.len() {
        let mut others: Vec<(String, &Model)> = vec![("the model".into(), &model)];
        for (j, r) in replicas.iter().enumerate() {
            if j != k {
                others.push((format!("replica {j}"), r));
            }
        }
        let before: Vec<Vec<f32>> = others.iter().map(|(_, m)| first(m)).collect();
        let (name, var) = replicas[k]
            .vars()
            .unwrap_or_else(|e| panic!("replica {k}'s parameters must be trainable: {e}"))
            .remove(0);
        var.set(&(var.as_tensor() + 1.0).unwrap()).unwrap();
        for ((who, other), before) in others.iter().zip(&before) {
            assert!(
                first(other) == *before,
                "changing replica {k}'s '{name}' changed {who}'s too: they share storage (a clone, not a copy)"
            );
        }
    }
}

#[test]
fn training_keeps_the_replicas_in_sync() {
    let g = cora();
    let devices = [Placement::sim(1), Placement::sim(2)];
    let fresh = || {
        let config = ModelConfig::gcn(g.num_features(), 16, g.num_classes());
        Model::init(config, 0, &devices[0]).unwrap().0
    };
    let (ours, theirs) = (fresh(), fresh());
    let train = TrainConfig::gcn();
    let mut ours = DataParallel::from_replicas(replicas_of(&ours, &devices), &devices, &train)
        .unwrap_or_else(|e| panic!("DataParallel::from_replicas refused the replicas: {e}"));
    let mut theirs = DataParallel::new(&theirs, &devices, &train).unwrap();
    let loader = NeighborLoader::new(&g, LoaderConfig::new(&[5, 5], 32)).unwrap();
    let batches: Vec<Batch> = loader.batches(1).take(6).collect::<Result<_, _>>().unwrap();
    for (s, pair) in batches.chunks(2).enumerate() {
        let a = ours
            .step(&ours.scatter(pair).unwrap())
            .unwrap()
            .loss()
            .unwrap();
        let b = theirs
            .step(&theirs.scatter(pair).unwrap())
            .unwrap()
            .loss()
            .unwrap();
        assert_eq!(
            a.to_bits(),
            b.to_bits(),
            "step {s}: loss {a} with your replicas, {b} with DataParallel::new's"
        );
        let sync = ours.check_in_sync().unwrap();
        assert!(
            sync.in_sync,
            "after step {s} the replicas differ: {:?}",
            sync.differences
        );
    }
}
