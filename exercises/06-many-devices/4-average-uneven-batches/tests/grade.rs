//! Graded tests for exercise 06-4 (points in exercise.toml). Do not edit: the grader checks this
//! file against its checksum.
//!
//! Each test is a scenario (the `scenario` crate): it records what it observed, and a teacher's
//! grader compares that with the reference solution's. The grading run's challenge picks the
//! simulated devices' numbers, the root, how many replicas there are and how many seeds each
//! had, the gradients' shapes and values, and the model and seeds of the real step, so the
//! averages and copies cannot be written down in advance. Averages are compared within float
//! tolerance (two correct solutions may add in another order), and a NaN never passes for a
//! value.
//!
//! The tests run on simulated devices in every build (two GPUs are rare). A tensor made on a
//! device written in the code (`Tensor::zeros(.., &Device::Cpu)`) computes the same on `sim:N`
//! and stops on a GPU; the code's witness (`workbook::fixed_device`) reads `src/average.rs` for
//! it.

use super::average::{average_gradients, ReplicaGradients};
use scenario::{Json, Scenario, Tolerance};
use workbook::candle_core::Tensor;
use workbook::ledger::Ledger;
use workbook::{datasets, fixed_device, Graph, Model, ModelConfig, Placement};

/// The file under test, from whichever tree (exercises/ or solutions/) is graded.
const SOURCE: &str = include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/src/average.rs"));

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

/// `n` simulated devices with consecutive numbers from one the challenge picks (1 to 49).
fn sims(s: &Scenario, n: usize, ledger: &Ledger) -> Vec<Placement> {
    let first = s.pick("first device", 1..50);
    (first..first + n)
        .map(|k| Placement::sim(k).with_ledger(ledger))
        .collect()
}

/// Uneven seed counts for `n` replicas, from the challenge (1 to 63 each, never all equal).
fn uneven_seeds(s: &Scenario, n: usize) -> Vec<usize> {
    let mut seeds: Vec<usize> = (0..n)
        .map(|k| s.pick(&format!("seeds of replica {k}"), 1..64))
        .collect();
    if seeds.iter().all(|&x| x == seeds[0]) {
        seeds[n - 1] = seeds[0] % 63 + 1;
    }
    seeds
}

/// Parameters of the challenge's shapes: (name, dims).
fn parameter_shapes(s: &Scenario) -> Vec<(String, Vec<usize>)> {
    let count = s.pick("parameters", 2..5);
    (0..count)
        .map(|p| {
            let rows = s.pick(&format!("rows of parameter {p}"), 1..9);
            let cols = s.pick(&format!("columns of parameter {p}"), 1..9);
            (format!("conv{}.lin.weight", p + 1), vec![rows, cols])
        })
        .collect()
}

/// A gradient of the challenge's values (multiples of 1/64 in -8..8).
fn drawn(s: &Scenario, label: &str, dims: &[usize]) -> Vec<f32> {
    let n: usize = dims.iter().product();
    (0..n)
        .map(|i| (s.pick(&format!("{label}[{i}]"), 0..1024) as f32 - 512.0) / 64.0)
        .collect()
}

/// What a replica without seeds computes: the gradient of a mean over nothing, NaN.
fn nan_like(dims: &[usize]) -> Vec<f32> {
    vec![f32::NAN; dims.iter().product()]
}

/// Replicas on `devices` with `seeds` each and gradients drawn from the challenge (NaN for a
/// replica without seeds), the values also returned on the host.
fn replicas(
    s: &Scenario,
    devices: &[Placement],
    seeds: &[usize],
    shapes: &[(String, Vec<usize>)],
) -> (Vec<ReplicaGradients>, Vec<Vec<Vec<f32>>>) {
    let mut host = Vec::new();
    let replicas = devices
        .iter()
        .zip(seeds)
        .enumerate()
        .map(|(k, (device, &n))| {
            let mut mine = Vec::new();
            let grads = shapes
                .iter()
                .map(|(name, dims)| {
                    let v = if n == 0 {
                        nan_like(dims)
                    } else {
                        drawn(s, &format!("replica {k} {name}"), dims)
                    };
                    mine.push(v.clone());
                    let t = Tensor::from_vec(v, dims.as_slice(), device.device()).unwrap();
                    (name.clone(), t)
                })
                .collect();
            host.push(mine);
            ReplicaGradients {
                device: device.clone(),
                seeds: n,
                grads,
            }
        })
        .collect();
    (replicas, host)
}

/// The weighted mean, computed here in float64 from the host values.
fn expected_average(seeds: &[usize], host: &[Vec<Vec<f32>>], p: usize) -> Vec<f32> {
    let total: usize = seeds.iter().sum();
    let len = host[0][p].len();
    (0..len)
        .map(|i| {
            seeds
                .iter()
                .zip(host)
                .filter(|(&n, _)| n > 0)
                .map(|(&n, g)| n as f64 / total as f64 * f64::from(g[p][i]))
                .sum::<f64>() as f32
        })
        .collect()
}

fn values(t: &Tensor) -> Vec<f32> {
    t.flatten_all().unwrap().to_vec1::<f32>().unwrap()
}

/// Where `got` differs from `want` by more than float rounding (a NaN always differs).
fn differs(got: &[f32], want: &[f32]) -> Option<String> {
    if got.len() != want.len() {
        return Some(format!("{} values instead of {}", got.len(), want.len()));
    }
    got.iter().zip(want).enumerate().find_map(|(i, (g, w))| {
        let close = (g - w).abs() <= 1e-6 + 1e-5 * w.abs();
        (!close).then(|| format!("value {i} is {g}, not {w}"))
    })
}

/// Checks and observes an average against the one computed here, in one record with `also`
/// (counts the test made of the same call): the parameters' names and such counts are the same
/// under many challenges, the averages are the challenge's.
fn check_average(
    s: &Scenario,
    label: &str,
    got: &[(String, Tensor)],
    shapes: &[(String, Vec<usize>)],
    also: &[(&str, usize)],
    want: impl Fn(usize) -> Vec<f32>,
) {
    let names: Vec<&str> = got.iter().map(|(n, _)| n.as_str()).collect();
    let averages: Vec<(&str, Vec<f64>)> = got
        .iter()
        .map(|(name, t)| (name.as_str(), digest(&values(t))))
        .collect();
    let also_labels: String = also.iter().map(|(l, _)| format!("; {l}")).collect();
    s.observe_within(
        format!("{label}: the parameters and their averages{also_labels}"),
        &(averages, also.iter().map(|(_, n)| *n).collect::<Vec<_>>()),
        SAME_DIGEST,
    );
    let expected_names: Vec<&str> = shapes.iter().map(|(n, _)| n.as_str()).collect();
    assert_eq!(
        names, expected_names,
        "{label}: one averaged gradient per parameter, in the replicas' order"
    );
    for (p, (name, t)) in got.iter().enumerate() {
        assert_eq!(
            t.dims(),
            shapes[p].1.as_slice(),
            "{label}: the average of {name} keeps its shape"
        );
        if let Some(problem) = differs(&values(t), &want(p)) {
            panic!("{label}: the average of {name} is not Σ_k (s_k / S) · g_k over the replicas with seeds: {problem}");
        }
    }
}

#[test]
fn weighs_each_replica_by_its_seeds() {
    let s = scenario::start();
    let n = s.pick("replicas", 2..6);
    let ledger = Ledger::new();
    let devices = sims(&s, n, &ledger);
    let seeds = uneven_seeds(&s, n);
    let shapes = parameter_shapes(&s);
    let (given, host) = replicas(&s, &devices, &seeds, &shapes);
    let root = devices[s.pick("root", 0..n)].clone();
    let got = average_gradients(&given, &root)
        .unwrap_or_else(|e| panic!("average_gradients failed for seeds {seeds:?}: {e}"));
    check_average(
        &s,
        &format!("seeds {seeds:?} onto {root}"),
        &got,
        &shapes,
        &[],
        |p| expected_average(&seeds, &host, p),
    );
}

/// A GCN of the challenge's size and seed, for Cora.
fn gcn(s: &Scenario, g: &Graph, at: &Placement) -> Model {
    let config = ModelConfig::gcn(g.num_features(), s.pick("hidden", 4..24), g.num_classes());
    Model::init(config, s.seed("model"), at).unwrap().0
}

/// The gradient of the mean cross-entropy over `seeds` (full-graph forward, evaluation mode),
/// per parameter, on the model's device: what one replica computes.
fn mean_loss_gradients(model: &Model, graph: &Graph, seeds: &[u32]) -> Vec<(String, Tensor)> {
    let vars = model.vars().unwrap();
    let logits = model.forward_graph(graph).unwrap().logits;
    let ids = Tensor::new(seeds, logits.device()).unwrap();
    let y = graph.y().unwrap().index_select(&ids, 0).unwrap();
    let ce = workbook::candle_nn::loss::cross_entropy(&logits.index_select(&ids, 0).unwrap(), &y)
        .unwrap();
    let grads = ce.backward().unwrap();
    vars.iter()
        .map(|(name, v)| (name.clone(), grads.get(v.as_tensor()).unwrap().clone()))
        .collect()
}

#[test]
fn matches_one_device_on_all_the_seeds() {
    // The lesson on a real step: Cora's 140 training nodes split unevenly over the replicas;
    // the average of their gradients must be the gradient one device computes on all of them.
    let s = scenario::start();
    let g = datasets::load("cora", None, Placement::cpu()).expect("loading Cora");
    let n = s.pick("replicas", 2..5);
    let devices = sims(&s, n, &Ledger::new());
    let train: Vec<u32> = g.split().unwrap().train.to_vec1().unwrap();
    // n - 1 distinct cut points in 1..140, from the challenge
    let mut cuts: Vec<usize> = Vec::new();
    let mut k = 0;
    while cuts.len() < n - 1 {
        let c = s.pick(&format!("cut {k}"), 1..train.len());
        if !cuts.contains(&c) {
            cuts.push(c);
        }
        k += 1;
    }
    cuts.sort();
    let bounds: Vec<usize> = std::iter::once(0)
        .chain(cuts.iter().copied())
        .chain(std::iter::once(train.len()))
        .collect();
    let model = gcn(&s, &g, &Placement::cpu());
    let mut given = Vec::new();
    let mut seeds = Vec::new();
    for (k, at) in devices.iter().enumerate() {
        let mine = &train[bounds[k]..bounds[k + 1]];
        let replica = model.to_device(at).unwrap();
        let graph = g.to_device(at).unwrap();
        seeds.push(mine.len());
        given.push(ReplicaGradients {
            device: at.clone(),
            seeds: mine.len(),
            grads: mean_loss_gradients(&replica, &graph, mine),
        });
    }
    let root = devices[0].clone();
    let got = average_gradients(&given, &root)
        .unwrap_or_else(|e| panic!("average_gradients failed for seeds {seeds:?}: {e}"));
    let one_device = mean_loss_gradients(
        &model.to_device(&root).unwrap(),
        &g.to_device(&root).unwrap(),
        &train,
    );
    let shapes: Vec<(String, Vec<usize>)> = one_device
        .iter()
        .map(|(n, t)| (n.clone(), t.dims().to_vec()))
        .collect();
    check_average(
        &s,
        &format!("Cora's training nodes split {seeds:?}"),
        &got,
        &shapes,
        &[],
        |p| values(&one_device[p].1),
    );
}

#[test]
fn a_replica_without_seeds_adds_nothing() {
    // More devices than batches left: one replica got no batch. Its mean over no seeds is
    // 0 / 0, a NaN gradient; weighed by zero it is still NaN (0 · NaN = NaN).
    let s = scenario::start();
    let n = s.pick("replicas", 3..6);
    let ledger = Ledger::new();
    let devices = sims(&s, n, &ledger);
    let mut seeds = uneven_seeds(&s, n);
    let idle = s.pick("idle replica", 1..n);
    seeds[idle] = 0;
    let shapes = parameter_shapes(&s);
    let (given, host) = replicas(&s, &devices, &seeds, &shapes);
    let got = average_gradients(&given, &devices[0])
        .unwrap_or_else(|e| panic!("average_gradients failed for seeds {seeds:?}: {e}"));
    let from_idle = ledger
        .transfers()
        .iter()
        .filter(|t| t.from == devices[idle].to_string())
        .count();
    check_average(
        &s,
        &format!("seeds {seeds:?}"),
        &got,
        &shapes,
        &[("copies from the replica without seeds", from_idle)],
        |p| expected_average(&seeds, &host, p),
    );
    assert_eq!(
        from_idle,
        0,
        "replica {idle} had no seeds: nothing of it should be copied:\n{}",
        ledger.table()
    );
}

#[test]
fn each_gradient_crosses_once_to_the_root() {
    let s = scenario::start();
    let n = s.pick("replicas", 3..6);
    let ledger = Ledger::new();
    let devices = sims(&s, n, &ledger);
    let mut seeds = uneven_seeds(&s, n);
    let r = s.pick("root", 0..n);
    // one replica without seeds, never the root
    let idle = (r + 1 + s.pick("idle replica", 0..n - 1)) % n;
    seeds[idle] = 0;
    let shapes = parameter_shapes(&s);
    let (given, _) = replicas(&s, &devices, &seeds, &shapes);
    let root = &devices[r];
    ledger.clear();
    average_gradients(&given, root)
        .unwrap_or_else(|e| panic!("average_gradients failed for seeds {seeds:?}: {e}"));
    let mut got: Vec<(String, String, u64, String)> = ledger
        .transfers()
        .into_iter()
        .map(|t| (t.from, t.to, t.bytes, t.what))
        .collect();
    got.sort();
    s.observe("the copies", &Json(&got));
    let mut want: Vec<(String, String, u64, String)> = Vec::new();
    for (k, at) in devices.iter().enumerate() {
        if k == r || seeds[k] == 0 {
            continue;
        }
        for (name, dims) in &shapes {
            let bytes = 4 * dims.iter().product::<usize>() as u64;
            want.push((
                at.to_string(),
                root.to_string(),
                bytes,
                format!("reduce grad[{name}]"),
            ));
        }
    }
    want.sort();
    let missing: Vec<_> = want.iter().filter(|w| !got.contains(w)).collect();
    let extra: Vec<_> = got.iter().filter(|g| !want.contains(g)).collect();
    assert!(
        missing.is_empty() && extra.is_empty(),
        "with seeds {seeds:?} and the root {root}, every gradient of every other replica with seeds crosses once, straight to the root, recorded as 'reduce grad[NAME]' (nothing from the root itself, nothing from a replica without seeds, nothing through the host); missing {missing:?}, unexpected {extra:?}\n{}",
        ledger.table()
    );
    assert_eq!(got, want, "each copy once");
}

#[test]
fn no_tensor_is_made_on_a_fixed_device() {
    let s = scenario::start();
    let n = s.pick("replicas", 2..5);
    let devices = sims(&s, n, &Ledger::new());
    let seeds = uneven_seeds(&s, n);
    let shapes = parameter_shapes(&s);
    let (given, host) = replicas(&s, &devices, &seeds, &shapes);
    let root = devices[0].clone();
    // the code under test runs (a witness of an empty function would prove nothing)...
    let got = average_gradients(&given, &root)
        .unwrap_or_else(|e| panic!("average_gradients failed for seeds {seeds:?}: {e}"));
    check_average(&s, &format!("seeds {seeds:?}"), &got, &shapes, &[], |p| {
        expected_average(&seeds, &host, p)
    });
    // ...and makes no tensor on a device written in it
    // Whether the file holds a device written in the code is checked by the judge itself on the submitted file
    // (exercise.toml's [[test.source]]), never recorded: a value that is the same under every
    // challenge could be written into the log by anything in this process.
    if let Err(e) = fixed_device::check("src/average.rs", SOURCE, &[], "the gradients", &root) {
        panic!("{e}");
    }
}

#[test]
fn replicas_that_disagree_are_an_error() {
    let s = scenario::start();
    let n = s.pick("replicas", 2..5);
    let devices = sims(&s, n, &Ledger::new());
    let seeds = uneven_seeds(&s, n);
    let shapes = parameter_shapes(&s);
    let (given, _) = replicas(&s, &devices, &seeds, &shapes);
    let odd = s.pick("odd replica", 1..n);
    let mut outcomes = Vec::new();
    // a parameter renamed
    let mut renamed = given.clone();
    let p = s.pick("renamed parameter", 0..shapes.len());
    let new_name = format!("conv{}.bias", 10 + s.pick("new name", 0..90));
    renamed[odd].grads[p].0 = new_name.clone();
    let result = average_gradients(&renamed, &devices[0]);
    let named = result.as_ref().err().map(|e| {
        let msg = e.to_string();
        msg.contains(&new_name) || msg.contains(&shapes[p].0)
    });
    outcomes.push(("a parameter renamed, the error naming it", named));
    // a parameter missing
    let mut missing = given.clone();
    missing[odd].grads.pop();
    let result = average_gradients(&missing, &devices[0]);
    outcomes.push(("a parameter missing", result.err().map(|_| true)));
    // no seeds at all, and no replicas at all
    let mut idle = given.clone();
    for r in &mut idle {
        r.seeds = 0;
    }
    outcomes.push((
        "no seeds at all",
        average_gradients(&idle, &devices[0]).err().map(|_| true),
    ));
    outcomes.push((
        "no replicas",
        average_gradients(&[], &devices[0]).err().map(|_| true),
    ));
    s.observe(
        format!("replica {odd} of {n} disagreeing, then nothing to average: errors"),
        &Json(&outcomes),
    );
    for (case, outcome) in &outcomes {
        assert!(
            *outcome == Some(true),
            "{case}: average_gradients should return an error{} (replica {odd} of {n}, '{}' renamed '{new_name}'); it returned a result",
            if case.contains("naming") { " naming the parameter" } else { "" },
            shapes[p].0
        );
    }
}
