//! Graded tests for exercise 06-1 (points in exercise.toml). Do not edit: the grader checks this
//! file against its checksum.
//!
//! Each test is a scenario (the `scenario` crate): it records what it observed, and a teacher's
//! grader compares that with the reference solution's. The grading run's challenge picks the
//! simulated devices' numbers and the models' seeds, so the copies, placements and values cannot
//! be written down in advance. The tests run on simulated devices in every build (two GPUs are
//! rare); every check, copy and ledger entry is the same on `sim:N` as on `cuda:N`.

use super::replicate::replicate;
use scenario::{Json, Scenario, Tolerance};
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

/// `n` simulated devices with consecutive numbers from one the challenge picks (1 to 49).
fn sims(s: &Scenario, n: usize, ledger: &Ledger) -> Vec<Placement> {
    let first = s.pick("first device", 1..50);
    (first..first + n)
        .map(|k| Placement::sim(k).with_ledger(ledger))
        .collect()
}

/// A GCN built with `cached = true` (PyG's transductive setting) on `at`, whose first forward
/// pass over the whole graph there has filled each layer's `_cached_edge_index` on `at`.
fn cached_gcn(graph: &Graph, at: &Placement, seed: u64) -> Model {
    let mut config = ModelConfig::gcn(graph.num_features(), 16, graph.num_classes());
    for layer in &mut config.layers {
        if let LayerConfig::Gcn(c) = layer {
            c.cached = true;
        }
    }
    let (model, _) = Model::init(config, seed, at).unwrap();
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

/// How close two digests of the same values computed in another order are.
const SAME_DIGEST: Tolerance = Tolerance {
    abs: 1e-5,
    rel: 1e-5,
};

fn key(t: &Transfer) -> (String, String, u64, String) {
    (t.from.clone(), t.to.clone(), t.bytes, t.what.clone())
}

/// Every replica's tensors: (replica, name, kind, device), what the judge compares.
fn placements(replicas: &[Model]) -> Vec<(usize, String, String, String)> {
    replicas
        .iter()
        .enumerate()
        .flat_map(|(k, r)| {
            r.tensor_placements()
                .into_iter()
                .map(move |(n, kind, p)| (k, n, kind.as_str().to_string(), p.to_string()))
        })
        .collect()
}

/// The copies the ledger holds, sorted (two correct solutions may copy in another order).
fn sorted_copies(ledger: &Ledger) -> Vec<(String, String, u64, String)> {
    let mut all: Vec<_> = ledger.transfers().iter().map(key).collect();
    all.sort();
    all
}

#[test]
fn every_replica_reads_from_its_own_device() {
    let s = scenario::start();
    let g = cora();
    let ledger = Ledger::new();
    let devices = sims(&s, 3, &ledger);
    let model = cached_gcn(&g, &devices[0], s.seed("model"));
    let replicas = replicas_of(&model, &devices);
    let placed = placements(&replicas);
    assert_each_on_its_device(&model, &replicas, &devices);
    let expected = model
        .forward_graph(&g.to_device(&devices[0]).unwrap())
        .unwrap();
    for (k, (replica, at)) in replicas.iter().zip(&devices).enumerate() {
        let out = replica
            .forward_graph(&g.to_device(at).unwrap())
            .unwrap_or_else(|e| panic!("replica {k}'s forward pass on {at} failed: {e}"));
        s.observe_within(
            format!("replica {k}'s logits"),
            &digest(&values(&out.logits)),
            SAME_DIGEST,
        );
        assert_eq!(
            values(&out.logits),
            values(&expected.logits),
            "replica {k} on {at} should compute what the model computes"
        );
    }
    let accepted = DataParallel::from_replicas(replicas, &devices, &TrainConfig::gcn());
    // one record: that DataParallel accepts them is the same under every challenge, the
    // replicas' devices are the challenge's
    s.observe(
        "every replica's tensors, and whether DataParallel::from_replicas accepts them",
        &(&placed, accepted.is_ok()),
    );
    accepted.unwrap_or_else(|e| panic!("DataParallel::from_replicas refused the replicas: {e}"));
}

#[test]
fn a_model_on_the_host_is_copied_to_every_device() {
    let s = scenario::start();
    let g = cora();
    let ledger = Ledger::new();
    let devices = sims(&s, 2, &ledger);
    let model = cached_gcn(&g, &Placement::cpu(), s.seed("model"));
    ledger.clear();
    let replicas = replicas_of(&model, &devices);
    let placed = placements(&replicas);
    s.observe("the copies", &sorted_copies(&ledger));
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
    let accepted = DataParallel::from_replicas(replicas, &devices, &TrainConfig::gcn());
    // one record: that DataParallel accepts them is the same under every challenge, the
    // replicas' devices are the challenge's
    s.observe(
        "every replica's tensors, and whether DataParallel::from_replicas accepts them",
        &(&placed, accepted.is_ok()),
    );
    accepted.unwrap_or_else(|e| panic!("DataParallel::from_replicas refused the replicas: {e}"));
}

#[test]
fn the_ledger_holds_one_copy_of_each_tensor_per_other_device() {
    // The lesson's accounting: each tensor crosses once per other device, straight from the
    // model's device, never through the host, and nothing for the device the model is on.
    let s = scenario::start();
    let g = cora();
    let ledger = Ledger::new();
    let devices = sims(&s, 3, &ledger);
    let first = devices[0].to_string();
    let model = cached_gcn(&g, &devices[0], s.seed("model"));
    ledger.clear();
    let _replicas = replicas_of(&model, &devices);
    s.observe("the copies", &sorted_copies(&ledger));
    let ours = ledger.transfers();
    for t in &ours {
        assert_ne!(
            t.to, first,
            "the model is on {first} already: its replica there needs no copy, but {t:?} was recorded"
        );
        assert!(
            t.from != "cpu" && t.to != "cpu",
            "replicas are copied from device to device, never through the host: {t:?}\n{}",
            ledger.table()
        );
    }
    for at in &devices[1..] {
        for (name, t) in model.named_parameters() {
            let copies: Vec<_> = ours
                .iter()
                .filter(|x| x.what == name && x.to == at.to_string())
                .collect();
            assert!(
                copies.len() == 1 && copies[0].bytes == bytes_of(&t) && copies[0].from == first,
                "'{name}' ({} bytes) should be copied from {first} to {at} once; recorded: {copies:?}\n{}",
                bytes_of(&t),
                ledger.table()
            );
        }
    }
    // Buffers too: exactly the copies the library's DataParallel::new makes.
    let reference = Ledger::new();
    let _dp = DataParallel::new(&model, &sims(&s, 3, &reference), &TrainConfig::gcn()).unwrap();
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
    let s = scenario::start();
    let g = cora();
    let devices = sims(&s, 3, &Ledger::new());
    let model = cached_gcn(&g, &devices[0], s.seed("model"));
    let replicas = replicas_of(&model, &devices);
    let first = |m: &Model| values(&m.named_parameters()[0].1);
    let mut unchanged = Vec::new();
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
            unchanged.push((k, who.clone(), first(other) == *before));
        }
        // One key per replica changed: a scenario records each key once. One record with the
        // changed parameter (the challenge's model): whether the others stayed unchanged is the
        // same under every challenge.
        s.observe_within(
            format!(
                "replica {k}'s changed parameter, and whether the others' first parameter stayed"
            ),
            &(digest(&first(&replicas[k])), Json(&unchanged)),
            SAME_DIGEST,
        );
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
    let s = scenario::start();
    let g = cora();
    let devices = sims(&s, 2, &Ledger::new());
    let fresh = || {
        let config = ModelConfig::gcn(g.num_features(), 16, g.num_classes());
        Model::init(config, s.seed("model"), &devices[0]).unwrap().0
    };
    let (ours, theirs) = (fresh(), fresh());
    let train = TrainConfig::gcn();
    let mut ours = DataParallel::from_replicas(replicas_of(&ours, &devices), &devices, &train)
        .unwrap_or_else(|e| panic!("DataParallel::from_replicas refused the replicas: {e}"));
    let mut theirs = DataParallel::new(&theirs, &devices, &train).unwrap();
    let loader = NeighborLoader::new(&g, LoaderConfig::new(&[5, 5], 32)).unwrap();
    let batches: Vec<Batch> = loader.batches(1).take(6).collect::<Result<_, _>>().unwrap();
    let mut losses = Vec::new();
    let mut in_sync = Vec::new();
    for (step, pair) in batches.chunks(2).enumerate() {
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
        let sync = ours.check_in_sync().unwrap();
        losses.push(a);
        in_sync.push(sync.in_sync);
        // one record: in sync is the same under every challenge, the losses are the challenge's
        s.observe(
            format!("losses and in sync to step {step}"),
            &(&losses, &in_sync),
        );
        assert_eq!(
            a.to_bits(),
            b.to_bits(),
            "step {step}: loss {a} with your replicas, {b} with DataParallel::new's"
        );
        assert!(
            sync.in_sync,
            "after step {step} the replicas differ: {:?}",
            sync.differences
        );
    }
}
