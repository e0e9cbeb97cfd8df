//! Graded tests for exercise 06-5 (points in exercise.toml). Do not edit: the grader checks this
//! file against its checksum.
//!
//! Each test is a scenario (the `scenario` crate): it records what it observed, and a teacher's
//! grader compares that with the reference solution's. The grading run's challenge picks the
//! world sizes, the seeds and epochs, which ranks have no batch, the gradients' values, the
//! models and the simulated devices, so nothing can be written down in advance. The shards are
//! judged by what must hold of any right answer (every seed once, balanced, another order each
//! epoch), not by one shuffle; averages within float tolerance.
//!
//! The ranks run as threads of the test (`ThreadGroup`): the grader's sandbox cannot start
//! `mpirun`, and a rank's code is the same over threads as over MPI. Every collective has a
//! short time limit, so a rank that skips one costs the test, never a hang. The group each rank
//! gets is watched: the test counts its collective calls.

use super::each_rank::{average_gradients, save_if_main, shard, LocalGradients};
use scenario::{Scenario, Tolerance};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;
use workbook::candle_core::Tensor;
use workbook::ledger::Ledger;
use workbook::parallel::{DistributedSampler, ProcessGroup, ThreadGroup, World};
use workbook::{checkpoint, datasets, Graph, Model, ModelConfig, Placement, Result};

/// The file under test, from whichever tree (exercises/ or solutions/) is graded.
const SOURCE: &str = include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/src/each_rank.rs"));

/// Each collective's time limit: ample for these small calls, short enough that a rank that
/// never comes costs seconds.
const TIME_LIMIT: Duration = Duration::from_secs(10);

/// A rank's process group, watched: its calls counted, and (for the checkpoint) whether a file
/// existed when each call began.
struct Watched {
    inner: ThreadGroup,
    sums: AtomicUsize,
    calls: AtomicUsize,
    file: Option<PathBuf>,
    file_at_calls: Mutex<Vec<bool>>,
}

impl Watched {
    fn new(inner: ThreadGroup, file: Option<PathBuf>) -> Arc<Self> {
        Arc::new(Self {
            inner,
            sums: AtomicUsize::new(0),
            calls: AtomicUsize::new(0),
            file,
            file_at_calls: Mutex::new(Vec::new()),
        })
    }

    fn note(&self) {
        self.calls.fetch_add(1, Ordering::SeqCst);
        if let Some(f) = &self.file {
            self.file_at_calls.lock().unwrap().push(f.is_file());
        }
    }

    /// The world a rank's code is given.
    fn world(self: &Arc<Self>) -> World {
        World::new(self.clone()).with_timeout(TIME_LIMIT)
    }
}

impl ProcessGroup for Watched {
    fn rank(&self) -> usize {
        self.inner.rank()
    }
    fn world_size(&self) -> usize {
        self.inner.world_size()
    }
    fn backend(&self) -> &'static str {
        self.inner.backend()
    }
    fn all_reduce_sum(&self, data: &mut [f32], timeout: Duration) -> Result<()> {
        self.note();
        self.sums.fetch_add(1, Ordering::SeqCst);
        self.inner.all_reduce_sum(data, timeout)
    }
    fn all_reduce_max(&self, data: &mut [u64], timeout: Duration) -> Result<()> {
        self.note();
        self.inner.all_reduce_max(data, timeout)
    }
    fn broadcast(&self, data: &mut [f32], root: usize, timeout: Duration) -> Result<()> {
        self.note();
        self.inner.broadcast(data, root, timeout)
    }
    fn barrier(&self, timeout: Duration) -> Result<()> {
        self.note();
        self.inner.barrier(timeout)
    }
}

/// The words of the code, comments left out.
fn code_words(text: &str) -> Vec<String> {
    let mut code = String::new();
    let mut rest = text;
    while !rest.is_empty() {
        if let Some(after) = rest.strip_prefix("//") {
            rest = after.find('\n').map_or("", |i| &after[i..]);
        } else if let Some(after) = rest.strip_prefix("/*") {
            rest = after.find("*/").map_or("", |i| &after[i + 2..]);
            code.push(' ');
        } else {
            let c = rest.chars().next().expect("not empty");
            code.push(c);
            rest = &rest[c.len_utf8()..];
        }
    }
    code.split(|c: char| !(c.is_alphanumeric() || c == '_'))
        .filter(|w| !w.is_empty())
        .map(str::to_string)
        .collect()
}

/// Fails when `shard` is the library's sampler called, not written: this exercise is that
/// sampler.
fn assert_written_not_called() {
    let words = code_words(SOURCE);
    let called: Vec<&str> = ["DistributedSampler", "distributed_sampler", "epoch_order"]
        .into_iter()
        .filter(|w| words.iter().any(|x| x == w))
        .collect();
    // Whether the file holds the library's sampler is checked by the judge itself on the submitted file
    // (exercise.toml's [[test.source]]), never recorded: a value that is the same under every
    // challenge could be written into the log by anything in this process.
    assert!(
        called.is_empty(),
        "src/each_rank.rs uses the library's sampler ({called:?}): that is this exercise's answer, to be written, not called (workbook::rand gives the shuffle)"
    );
}

/// `count` distinct node ids from 0..2708 (Cora's), in the challenge's order.
fn node_ids(s: &Scenario, label: &str, count: usize) -> Vec<u32> {
    let mut ids = Vec::with_capacity(count);
    let mut k = 0;
    while ids.len() < count {
        let id = s.pick(&format!("{label} {k}"), 0..2708) as u32;
        if !ids.contains(&id) {
            ids.push(id);
        }
        k += 1;
    }
    ids
}

#[test]
fn shards_cover_every_seed_once() {
    let s = scenario::start();
    assert_written_not_called();
    // Not a multiple of 12, so that some world size of 2 to 4 does not divide it: there the
    // shards cannot all be as long, and padding them would show.
    let mut count = s.pick("how many seeds", 20..200);
    if count.is_multiple_of(12) {
        count += 1;
    }
    let seeds = node_ids(&s, "seed", count);
    let epoch = s.pick("epoch", 0..1000) as u64;
    let run_seed = s.seed("run");
    // every world size's record, observed as one with the errors: the counts of seeds taken
    // twice, never or not given (none) and the errors are the same under every challenge, the
    // shard sizes are the challenge's
    let mut per_world_size = Vec::new();
    for world_size in 1..=4 {
        let shards: Vec<Vec<u32>> = (0..world_size)
            .map(|rank| {
                shard(&seeds, rank, world_size, epoch, run_seed).unwrap_or_else(|e| {
                    panic!("shard(rank {rank} of {world_size}, epoch {epoch}) failed: {e}")
                })
            })
            .collect();
        let mut sizes: Vec<usize> = shards.iter().map(Vec::len).collect();
        sizes.sort_unstable();
        let times = |id: u32| shards.iter().flatten().filter(|&&x| x == id).count();
        let twice: Vec<u32> = seeds.iter().copied().filter(|&id| times(id) > 1).collect();
        let never: Vec<u32> = seeds.iter().copied().filter(|&id| times(id) == 0).collect();
        let strangers: Vec<u32> = shards
            .iter()
            .flatten()
            .copied()
            .filter(|id| !seeds.contains(id))
            .collect();
        per_world_size.push((sizes.clone(), (twice.len(), never.len(), strangers.len())));
        assert!(
            twice.is_empty() && never.is_empty() && strangers.is_empty(),
            "{} seeds over {world_size} rank(s), epoch {epoch}: every seed must be in exactly one rank's shard (nothing repeated to even them out); taken more than once: {twice:?}, in no shard: {never:?}, not among the seeds: {strangers:?}",
            seeds.len()
        );
        assert!(
            sizes[world_size - 1] - sizes[0] <= 1,
            "{} seeds over {world_size} rank(s): the shards must differ in size by at most one seed, they are {sizes:?}",
            seeds.len()
        );
    }
    let refused: Vec<bool> = [(0, 0), (2, 2), (5, 3)]
        .iter()
        .map(|&(rank, world_size)| shard(&seeds, rank, world_size, epoch, run_seed).is_err())
        .collect();
    s.observe(
        "1 to 4 ranks: shard sizes (smallest first) and seeds taken twice or more, never, not given; rank 0 of 0, rank 2 of 2, rank 5 of 3: errors",
        &(&per_world_size, &refused),
    );
    assert!(
        refused.iter().all(|&r| r),
        "a world of 0 ranks and a rank not below the world size are errors, not shards (rank 0 of 0, 2 of 2, 5 of 3: {refused:?})"
    );
}

/// Every rank's shard of `epoch`, in rank order, one after the other.
fn epoch_layout(seeds: &[u32], world_size: usize, epoch: u64, run_seed: u64) -> Vec<u32> {
    (0..world_size)
        .flat_map(|rank| {
            shard(seeds, rank, world_size, epoch, run_seed).unwrap_or_else(|e| {
                panic!("shard(rank {rank} of {world_size}, epoch {epoch}) failed: {e}")
            })
        })
        .collect()
}

#[test]
fn each_epoch_shuffles_anew() {
    // PyTorch's `sampler.set_epoch(epoch)`: without it every epoch repeats the first one's
    // order. With at least 20 seeds, two right shuffles coincide with probability below 1/20!.
    let s = scenario::start();
    assert_written_not_called();
    let seeds = node_ids(&s, "seed", s.pick("how many seeds", 20..200));
    let world_size = s.pick("world size", 2..5);
    let first = s.pick("first epoch", 0..1000) as u64;
    let run_seed = s.seed("run");
    let layouts: Vec<Vec<u32>> = (first..first + 4)
        .map(|e| epoch_layout(&seeds, world_size, e, run_seed))
        .collect();
    let anew: Vec<bool> = layouts.windows(2).map(|w| w[0] != w[1]).collect();
    let again = epoch_layout(&seeds, world_size, first + 2, run_seed) == layouts[2];
    let other_run = epoch_layout(&seeds, world_size, first, run_seed ^ 0x5eed) != layouts[0];
    // One record: the verdicts are the same under every challenge; the seeds the first epoch's
    // shards hold, sorted, are the challenge's (any right shuffle holds them all, so only their
    // sorted list is compared, never their order).
    let mut held = layouts[0].clone();
    held.sort_unstable();
    s.observe(
        format!(
            "epochs {first} to {}: each unlike the one before; the same epoch, the same shards; another run seed, other shards; the first epoch's seeds, sorted",
            first + 3
        ),
        &(&anew, again, other_run, &held),
    );
    let repeats: Vec<String> = anew
        .iter()
        .zip(first + 1..)
        .filter(|(a, _)| !**a)
        .map(|(_, e)| format!("epoch {e} repeats epoch {}", e - 1))
        .collect();
    assert!(
        repeats.is_empty(),
        "over {world_size} ranks, {}: every rank got the same seeds in the same order as the epoch before, so every epoch trains on the same batches. Each epoch's shards must come from a new shuffle: the epoch goes into it (PyTorch's sampler.set_epoch(epoch))",
        repeats.join(", ")
    );
    assert!(
        again,
        "the same seeds, rank, epoch and run seed must give the same shard: every rank computes its own, and they must fit together"
    );
    assert!(
        other_run,
        "another run seed must shuffle otherwise (the run seed goes into the shuffle)"
    );
}

/// The gradient of seed `id`'s loss for element `i` of parameter `p`: a value of the challenge
/// (`key`; a multiple of 1/64 in -8..8), so that a batch's gradient tells which seeds it holds.
fn seed_gradient(key: u64, id: u32, p: usize, i: usize) -> f32 {
    let mut x = key ^ (u64::from(id) << 32) ^ ((p as u64) << 24) ^ i as u64;
    x = x.wrapping_add(0x9E37_79B9_7F4A_7C15);
    x = (x ^ (x >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    x = (x ^ (x >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    x ^= x >> 31;
    ((x % 1024) as f32 - 512.0) / 64.0
}

#[test]
fn two_epochs_step_by_step() {
    // What the section promises, run the way a training loop runs it: each rank takes its shard
    // of the epoch, steps through it in batches and averages every step's gradients with the
    // other ranks'; near the end of an epoch a rank may have no batch left. Every step's average
    // must be the gradient over that step's seeds of all ranks (idle ranks included), and the
    // second epoch's batches must not be the first's (without the epoch in the shuffle,
    // PyTorch's forgotten set_epoch, every epoch trains on the same batches). Only what holds
    // of any right shuffle is observed: whether each epoch holds every seed once, the number of
    // steps, and the epoch's averages weighted by their steps' seeds, summed (the gradient of
    // all the seeds).
    let s = scenario::start();
    assert_written_not_called();
    let model = small_model(&s);
    let n = s.pick("world size", 2..5);
    let batch = s.pick("batch size", 3..9);
    // Shards of `full` batches and, for some ranks, one seed more: every right split leaves the
    // last step with ranks that have no batch.
    let full = s.pick("full batches per shard", 3..7);
    let count = n * full * batch + s.pick("shards with one seed more", 1..n);
    let seeds = node_ids(&s, "seed", count);
    let first = s.pick("first epoch", 0..1000) as u64;
    let run_seed = s.seed("run");
    let key = s.seed("each seed's gradient");
    let device = first_device(&s);
    let replicas: Vec<Model> = (0..n)
        .map(|rank| model.to_device(Placement::sim(device + rank)).unwrap())
        .collect();
    let sizes: Vec<usize> = model
        .named_parameters()
        .iter()
        .map(|(_, p)| p.elem_count())
        .collect();
    let shapes: Vec<Vec<usize>> = model
        .named_parameters()
        .iter()
        .map(|(_, p)| p.dims().to_vec())
        .collect();
    // A batch's summed-loss gradient, on the host, per parameter.
    let batch_sum = |ids: &[u32]| -> Vec<Vec<f32>> {
        (0..sizes.len())
            .map(|p| {
                (0..sizes[p])
                    .map(|i| ids.iter().map(|&id| seed_gradient(key, id, p, i)).sum())
                    .collect()
            })
            .collect()
    };
    let mut all_sorted = seeds.clone();
    all_sorted.sort_unstable();
    let mut epochs_batches: Vec<Vec<Vec<Vec<u32>>>> = Vec::new();
    let mut epochs_sums: Vec<Digests> = Vec::new();
    for epoch in [first, first + 1] {
        let shards: Vec<Vec<u32>> = (0..n)
            .map(|rank| {
                shard(&seeds, rank, n, epoch, run_seed).unwrap_or_else(|e| {
                    panic!("shard(rank {rank} of {n}, epoch {epoch}) failed: {e}")
                })
            })
            .collect();
        let mut taken = shards.concat();
        taken.sort_unstable();
        let once = taken == all_sorted;
        s.observe(
            format!("epoch {epoch}: every seed in one shard, once"),
            &once,
        );
        assert!(
            once,
            "epoch {epoch}: the {n} ranks' shards of {count} seeds must hold every seed exactly once"
        );
        let steps = shards
            .iter()
            .map(|sh| sh.len().div_ceil(batch))
            .max()
            .unwrap_or(0);
        s.observe(format!("epoch {epoch}: steps of {batch} seeds"), &steps);
        let mut weighted: Vec<Vec<f64>> = sizes.iter().map(|&k| vec![0.0; k]).collect();
        let mut batches_of_epoch = Vec::new();
        for step in 0..steps {
            let batches: Vec<Vec<u32>> = shards
                .iter()
                .map(|sh| sh.iter().skip(step * batch).take(batch).copied().collect())
                .collect();
            let mut locals = Vec::new();
            let mut host: Vec<HostGradients> = Vec::new();
            for (rank, ids) in batches.iter().enumerate() {
                if ids.is_empty() {
                    locals.push(None);
                    host.push(None);
                    continue;
                }
                let summed = batch_sum(ids);
                let at = Placement::sim(device + rank);
                let grads = model
                    .named_parameters()
                    .iter()
                    .zip(&summed)
                    .zip(&shapes)
                    .map(|(((name, _), v), shape)| {
                        let t = Tensor::from_vec(v.clone(), shape.as_slice(), at.device());
                        (name.clone(), t.unwrap())
                    })
                    .collect();
                locals.push(Some(LocalGradients {
                    seeds: ids.len(),
                    grads,
                }));
                host.push(Some((ids.len(), summed)));
            }
            let outcomes = run_ranks(&replicas, &locals);
            let step_seeds: usize = batches.iter().map(Vec::len).sum();
            let label = format!(
                "epoch {epoch}, step {step} (batches of {:?} seeds)",
                batches.iter().map(Vec::len).collect::<Vec<_>>()
            );
            for (rank, outcome) in outcomes.iter().enumerate() {
                let got = match &outcome.result {
                    Ok(got) => got,
                    Err(e) => panic!("{label}: rank {rank}'s average_gradients failed: {e} (a rank without a batch must still join the all-reduce)"),
                };
                assert_eq!(
                    got.len(),
                    sizes.len(),
                    "{label}: rank {rank} must return one gradient per parameter"
                );
                for (p, (name, t)) in got.iter().enumerate() {
                    let v = values(t);
                    if let Some(problem) = differs(&v, &expected(&host, p)) {
                        panic!("{label}: rank {rank}'s average of {name} is not the step's gradients summed over the ranks and divided by the step's {step_seeds} seeds: {problem}");
                    }
                    if rank == 0 {
                        for (w, x) in weighted[p].iter_mut().zip(&v) {
                            *w += f64::from(*x) * step_seeds as f64;
                        }
                    }
                }
            }
            batches_of_epoch.push(
                batches
                    .into_iter()
                    .map(|mut b| {
                        b.sort_unstable();
                        b
                    })
                    .collect(),
            );
        }
        let mut sums = Vec::new();
        for (p, (name, _)) in model.named_parameters().iter().enumerate() {
            let w: Vec<f32> = weighted[p].iter().map(|&x| x as f32).collect();
            sums.push((name.clone(), digest(&w)));
        }
        epochs_sums.push(sums);
        epochs_batches.push(batches_of_epoch);
    }
    let same = epochs_batches[0] == epochs_batches[1];
    // One record: whether the batches repeat is the same under every challenge, the steps'
    // averages are the challenge's.
    s.observe_within(
        format!(
            "epochs {first} and {}: each parameter's steps' averages times their seeds, summed; the second epoch's batches are the first's",
            first + 1
        ),
        &(&epochs_sums, same),
        SAME_DIGEST,
    );
    assert!(
        !same,
        "epochs {first} and {}: every rank's batches are the same in both, step by step, so every epoch trains on the same batches. The epoch must go into the shuffle (PyTorch's sampler.set_epoch(epoch))",
        first + 1
    );
}

/// A small GCN of the challenge's sizes.
fn small_model(s: &Scenario) -> Model {
    let config = ModelConfig::gcn(
        s.pick("features", 2..9),
        s.pick("hidden", 2..9),
        s.pick("classes", 2..6),
    );
    Model::init(config, s.seed("model"), Placement::cpu())
        .unwrap()
        .0
}

/// The first of `n` simulated devices with consecutive numbers, from the challenge.
fn first_device(s: &Scenario) -> usize {
    s.pick("first device", 1..50)
}

/// Rank `rank`'s gradients: values of the challenge (multiples of 1/64 in -8..8) in the
/// parameters' shapes, on `at`, and the same on the host.
fn drawn_gradients(
    s: &Scenario,
    model: &Model,
    rank: usize,
    seeds: usize,
    at: &Placement,
) -> (LocalGradients, Vec<Vec<f32>>) {
    let mut host = Vec::new();
    let grads = model
        .named_parameters()
        .iter()
        .map(|(name, p)| {
            let v: Vec<f32> = (0..p.elem_count())
                .map(|i| {
                    (s.pick(&format!("rank {rank} {name}[{i}]"), 0..1024) as f32 - 512.0) / 64.0
                })
                .collect();
            host.push(v.clone());
            let t = Tensor::from_vec(v, p.dims(), at.device()).unwrap();
            (name.clone(), t)
        })
        .collect();
    (LocalGradients { seeds, grads }, host)
}

/// A rank's seed count and gradients on the host (`None`: it had no batch).
type HostGradients = Option<(usize, Vec<Vec<f32>>)>;

/// Σ_r g_r / S over the ranks with a batch, in float64.
fn expected(locals: &[HostGradients], p: usize) -> Vec<f32> {
    let total: usize = locals.iter().flatten().map(|(n, _)| n).sum();
    let len = locals.iter().flatten().next().unwrap().1[p].len();
    (0..len)
        .map(|i| {
            let sum: f64 = locals
                .iter()
                .flatten()
                .map(|(_, g)| f64::from(g[p][i]))
                .sum();
            (sum / total as f64) as f32
        })
        .collect()
}

fn values(t: &Tensor) -> Vec<f32> {
    t.flatten_all().unwrap().to_vec1::<f32>().unwrap()
}

/// A large tensor's digest for the judge: the sum, the sum of magnitudes and 64 evenly spaced
/// values, in float64; a NaN anywhere makes the sums NaN.
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

/// What one rank's call gave: the averaged gradients, or the error, and the group's counts.
struct RankOutcome {
    result: std::result::Result<Vec<(String, Tensor)>, String>,
    sums: usize,
}

/// Runs `average_gradients` on `world_size` ranks as threads, rank `r` with `models[r]` and
/// `locals[r]`.
fn run_ranks(models: &[Model], locals: &[Option<LocalGradients>]) -> Vec<RankOutcome> {
    ThreadGroup::run(models.len(), |g| {
        let rank = g.rank();
        let watched = Watched::new(g, None);
        let world = watched.world();
        let result = average_gradients(&world, &models[rank], locals[rank].as_ref())
            .map_err(|e| e.to_string());
        Ok(RankOutcome {
            result,
            sums: watched.sums.load(Ordering::SeqCst),
        })
    })
    .into_iter()
    .enumerate()
    .map(|(rank, r)| {
        r.unwrap_or_else(|e| RankOutcome {
            result: Err(format!("rank {rank} did not finish: {e}")),
            sums: 0,
        })
    })
    .collect()
}

/// Each parameter's name and digest.
type Digests = Vec<(String, Vec<f64>)>;

/// Whether each rank returned, and the digests of what it returned (nothing for an error): what
/// the judge compares of a run of the ranks, observed by the caller in one record with what
/// else the test learnt of the same run (whether a rank returned is the same under every
/// challenge, the averages are the challenge's).
fn rank_results(outcomes: &[RankOutcome]) -> Vec<(bool, Digests)> {
    outcomes
        .iter()
        .map(|o| match &o.result {
            Ok(got) => (
                true,
                got.iter()
                    .map(|(name, t)| (name.clone(), digest(&values(t))))
                    .collect(),
            ),
            Err(_) => (false, Vec::new()),
        })
        .collect()
}

/// Checks every rank's average against the one computed here (the caller observes
/// [`rank_results`]).
fn check_every_rank(
    label: &str,
    model: &Model,
    outcomes: &[RankOutcome],
    want: impl Fn(usize) -> Vec<f32>,
) {
    let names: Vec<String> = model
        .named_parameters()
        .into_iter()
        .map(|(n, _)| n)
        .collect();
    let returned: Vec<usize> = (0..outcomes.len())
        .filter(|&r| outcomes[r].result.is_ok())
        .collect();
    if let Some((rank, Err(e))) = outcomes
        .iter()
        .map(|o| &o.result)
        .enumerate()
        .find(|(_, r)| r.is_err())
    {
        let others = if returned.is_empty() {
            String::new()
        } else {
            format!(" while rank(s) {returned:?} returned (a rank that returns without joining the all-reduce leaves the others waiting)")
        };
        panic!("{label}: rank {rank}'s average_gradients failed{others}: {e}");
    }
    for (rank, outcome) in outcomes.iter().enumerate() {
        let Ok(got) = &outcome.result else {
            unreachable!("every rank returned")
        };
        let got_names: Vec<&str> = got.iter().map(|(n, _)| n.as_str()).collect();
        assert_eq!(
            got_names, names,
            "{label}: rank {rank} must return one gradient per parameter, in the model's order"
        );
        for (p, (name, t)) in got.iter().enumerate() {
            if let Some(problem) = differs(&values(t), &want(p)) {
                panic!("{label}: rank {rank}'s average of {name} is not the ranks' gradients summed and divided by the seeds of all ranks: {problem}");
            }
        }
    }
}

/// `n` ranks on consecutive simulated devices, each with `model` and gradients drawn for its
/// seeds (`None`: no batch).
fn drawn_ranks(
    s: &Scenario,
    model: &Model,
    seeds: &[Option<usize>],
) -> (Vec<Model>, Vec<Option<LocalGradients>>, Vec<HostGradients>) {
    let first = first_device(s);
    let mut models = Vec::new();
    let mut locals = Vec::new();
    let mut host = Vec::new();
    for (rank, n) in seeds.iter().enumerate() {
        let at = Placement::sim(first + rank);
        let replica = model.to_device(&at).unwrap();
        match n {
            Some(n) => {
                let (local, values) = drawn_gradients(s, &replica, rank, *n, &at);
                locals.push(Some(local));
                host.push(Some((*n, values)));
            }
            None => {
                locals.push(None);
                host.push(None);
            }
        }
        models.push(replica);
    }
    (models, locals, host)
}

/// Seed counts for `n` ranks (1 to 63 each), never all equal.
fn uneven_seeds(s: &Scenario, n: usize) -> Vec<usize> {
    let mut seeds: Vec<usize> = (0..n)
        .map(|k| s.pick(&format!("seeds of rank {k}"), 1..64))
        .collect();
    if seeds.iter().all(|&x| x == seeds[0]) {
        seeds[n - 1] = seeds[0] % 63 + 1;
    }
    seeds
}

#[test]
fn divides_the_sum_by_every_ranks_seeds() {
    let s = scenario::start();
    let model = small_model(&s);
    let n = s.pick("world size", 2..6);
    let seeds = uneven_seeds(&s, n);
    s.observe("each rank's seeds", &seeds);
    let (models, locals, host) = drawn_ranks(
        &s,
        &model,
        &seeds.iter().map(|&k| Some(k)).collect::<Vec<_>>(),
    );
    let outcomes = run_ranks(&models, &locals);
    let label = format!("seeds {seeds:?}");
    s.observe_within(
        format!("{label}: each rank returned, and its averages"),
        &rank_results(&outcomes),
        SAME_DIGEST,
    );
    check_every_rank(&label, &model, &outcomes, |p| expected(&host, p));
}

/// The gradient of the summed cross-entropy over `seeds` (full-graph forward, evaluation
/// mode), per parameter, on the model's device: what one rank's backward gives.
fn summed_loss_gradients(model: &Model, graph: &Graph, seeds: &[u32]) -> Vec<(String, Tensor)> {
    let vars = model.vars().unwrap();
    let logits = model.forward_graph(graph).unwrap().logits;
    let ids = Tensor::new(seeds, logits.device()).unwrap();
    let y = graph.y().unwrap().index_select(&ids, 0).unwrap();
    let ce = workbook::candle_nn::loss::cross_entropy(&logits.index_select(&ids, 0).unwrap(), &y)
        .unwrap();
    let sum = (ce * seeds.len() as f64).unwrap();
    let grads = sum.backward().unwrap();
    // in the order of the model's parameters, which average_gradients is given and returns
    model
        .named_parameters()
        .into_iter()
        .map(|(name, _)| {
            let (_, v) = vars.iter().find(|(n, _)| *n == name).unwrap();
            let g = grads.get(v.as_tensor()).unwrap().clone();
            (name, g)
        })
        .collect()
}

#[test]
fn matches_one_process_on_all_the_seeds() {
    // The lesson on a real step: Cora's training nodes sharded over the ranks (the library's
    // sampler), each rank's backward on its summed loss; the average must be the gradient one
    // process computes on the mean loss over all of them.
    let s = scenario::start();
    let g = datasets::load("cora", None, Placement::cpu()).expect("loading Cora");
    let train: Vec<u32> = g.split().unwrap().train.to_vec1().unwrap();
    let n = s.pick("world size", 2..5);
    let epoch = s.pick("epoch", 0..100) as u64;
    let config = ModelConfig::gcn(g.num_features(), s.pick("hidden", 4..24), g.num_classes());
    let model = Model::init(config, s.seed("model"), Placement::cpu())
        .unwrap()
        .0;
    let first = first_device(&s);
    let mut models = Vec::new();
    let mut locals = Vec::new();
    let mut sizes = Vec::new();
    for rank in 0..n {
        let at = Placement::sim(first + rank);
        let mine = DistributedSampler::new(n, rank, s.seed("run"))
            .unwrap()
            .shard(&train, epoch);
        let replica = model.to_device(&at).unwrap();
        let grads = summed_loss_gradients(&replica, &g.to_device(&at).unwrap(), &mine);
        sizes.push(mine.len());
        locals.push(Some(LocalGradients {
            seeds: mine.len(),
            grads,
        }));
        models.push(replica);
    }
    let outcomes = run_ranks(&models, &locals);
    let one_process = summed_loss_gradients(&model, &g, &train);
    let label = format!(
        "Cora's {} training nodes in shards of {sizes:?}",
        train.len()
    );
    // one record: the shards' sizes (the library's) are the same under many challenges, the
    // averages are the challenge's
    s.observe_within(
        format!("{label}: each rank's shard size; each rank returned, and its averages"),
        &(&sizes, rank_results(&outcomes)),
        SAME_DIGEST,
    );
    check_every_rank(&label, &model, &outcomes, |p| {
        values(&one_process[p].1)
            .iter()
            .map(|v| v / train.len() as f32)
            .collect()
    });
}

#[test]
fn a_rank_without_a_batch_still_joins() {
    // The last step of an epoch: some ranks' shards have no batch left. They must still call
    // the all-reduce (with nothing to add), or the others wait for them until the time limit;
    // and they need the average too, to take the same optimiser step.
    let s = scenario::start();
    let model = small_model(&s);
    let n = s.pick("world size", 3..6);
    let mut seeds: Vec<Option<usize>> = uneven_seeds(&s, n).into_iter().map(Some).collect();
    let idle = s.pick("idle rank", 0..n);
    seeds[idle] = None;
    if s.pick("a second idle rank", 0..2) == 1 {
        seeds[(idle + 1) % n] = None;
    }
    // More seeds than ranks, so that dividing by the world size cannot be right by chance.
    let total: usize = seeds.iter().flatten().sum();
    if total <= n {
        let busy = seeds.iter().position(Option::is_some).unwrap();
        seeds[busy] = seeds[busy].map(|k| k + n);
    }
    let (models, locals, host) = drawn_ranks(&s, &model, &seeds);
    let outcomes = run_ranks(&models, &locals);
    let label = format!("seeds {seeds:?} (None: no batch)");
    let results = rank_results(&outcomes);
    check_every_rank(&label, &model, &outcomes, |p| expected(&host, p));
    // No rank with a batch: every rank must say so, promptly (not a NaN, not a wait).
    let nobody: Vec<Option<LocalGradients>> = vec![None; n];
    let outcomes = run_ranks(&models, &nobody);
    let refused: Vec<bool> = outcomes.iter().map(|o| o.result.is_err()).collect();
    // one record: the errors are the same under every challenge, the averages are not
    s.observe_within(
        format!("{label}: each rank returned, and its averages; no rank with a batch: each rank's error"),
        &(&results, &refused),
        SAME_DIGEST,
    );
    assert!(
        refused.iter().all(|&r| r),
        "when no rank has a batch, the mean over no seeds is 0/0: every rank must return an error, not gradients (errors: {refused:?})"
    );
}

#[test]
fn one_all_reduce_per_step() {
    // A collective costs a round trip whatever its size (MPI, NCCL): the gradients and the
    // seed count travel in one bucket, as DDP's do.
    let s = scenario::start();
    let model = small_model(&s);
    let n = s.pick("world size", 2..5);
    let mut seeds: Vec<Option<usize>> = uneven_seeds(&s, n).into_iter().map(Some).collect();
    seeds[s.pick("idle rank", 0..n)] = None;
    let (models, locals, host) = drawn_ranks(&s, &model, &seeds);
    let outcomes = run_ranks(&models, &locals);
    let sums: Vec<usize> = outcomes.iter().map(|o| o.sums).collect();
    let label = format!("seeds {seeds:?}");
    // one record: the calls (one each) are the same under every challenge, the averages are not
    s.observe_within(
        format!("{label}: each rank returned, and its averages; all-reduce calls of each rank"),
        &(rank_results(&outcomes), &sums),
        SAME_DIGEST,
    );
    check_every_rank(&label, &model, &outcomes, |p| expected(&host, p));
    assert!(
        sums.iter().all(|&k| k == 1),
        "each rank must make one all-reduce per step (every gradient and the seed count in one bucket), they made {sums:?} ({} parameters)",
        model.named_parameters().len()
    );
}

/// What each rank saw of the checkpoint: its result, its collective calls, the file's
/// existence when each of its calls began and when it returned.
struct Saved {
    result: std::result::Result<(), String>,
    calls: usize,
    file_at_calls: Vec<bool>,
    file_on_return: bool,
}

/// Every rank calls `save_if_main` with its own model (made to differ, so that the file tells
/// whose was written; in a real run they are equal), rank 0 after `delay`.
fn save_on_ranks(models: &[Model], path: &Path, delay: Duration) -> Vec<Saved> {
    ThreadGroup::run(models.len(), |g| {
        let rank = g.rank();
        let watched = Watched::new(g, Some(path.to_path_buf()));
        let world = watched.world();
        if rank == 0 {
            std::thread::sleep(delay);
        }
        let result = save_if_main(&world, &models[rank], path).map_err(|e| e.to_string());
        let file_on_return = path.is_file();
        let file_at_calls = watched.file_at_calls.lock().unwrap().clone();
        Ok(Saved {
            result,
            calls: watched.calls.load(Ordering::SeqCst),
            file_at_calls,
            file_on_return,
        })
    })
    .into_iter()
    .enumerate()
    .map(|(rank, r)| {
        r.unwrap_or_else(|e| Saved {
            result: Err(format!("rank {rank} did not finish: {e}")),
            calls: 0,
            file_at_calls: Vec::new(),
            file_on_return: false,
        })
    })
    .collect()
}

/// A model per rank, each initialised with its own seed, on its own simulated device with its
/// own ledger.
fn rank_models(s: &Scenario, n: usize) -> (Vec<Model>, Vec<Ledger>) {
    let config = ModelConfig::gcn(
        s.pick("features", 2..9),
        s.pick("hidden", 2..9),
        s.pick("classes", 2..6),
    );
    let first = first_device(s);
    let seed = s.seed("models");
    (0..n)
        .map(|rank| {
            let ledger = Ledger::new();
            let at = Placement::sim(first + rank).with_ledger(&ledger);
            let model = Model::init(config.clone(), seed.wrapping_add(rank as u64), &at)
                .unwrap()
                .0;
            ledger.clear();
            (model, ledger)
        })
        .unzip()
}

#[test]
fn only_rank_0_writes_the_checkpoint() {
    let s = scenario::start();
    let n = s.pick("world size", 2..5);
    let (models, ledgers) = rank_models(&s, n);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("gcn.safetensors");
    let outcomes = save_on_ranks(&models, &path, Duration::ZERO);
    let returned: Vec<bool> = outcomes.iter().map(|o| o.result.is_ok()).collect();
    for (rank, o) in outcomes.iter().enumerate() {
        if let Err(e) = &o.result {
            panic!("rank {rank}'s save_if_main failed: {e}");
        }
    }
    // Who copied its parameters to the host to write them: rank 0 alone.
    let writers: Vec<bool> = ledgers.iter().map(|l| !l.transfers().is_empty()).collect();
    assert!(
        path.is_file(),
        "no checkpoint at {} after every rank returned",
        path.display()
    );
    // It loads in a one-process run as it is, and holds rank 0's parameters under their names.
    let back = checkpoint::load(&path, Placement::cpu())
        .unwrap_or_else(|e| panic!("the checkpoint does not load in a one-process run: {e}"));
    let saved = back.named_parameters();
    let names: Vec<&str> = saved.iter().map(|(n, _)| n.as_str()).collect();
    // One record: whether each rank returned, who copied to the host and the names are the same
    // under every challenge (for a world size); the saved values are the challenge's.
    let contents: Vec<(&str, Vec<f64>)> = saved
        .iter()
        .map(|(name, t)| (name.as_str(), digest(&values(t))))
        .collect();
    s.observe_within(
        "each rank returned; the ranks that copied their parameters to the host; the checkpoint's names and values",
        &(&returned, &writers, &contents),
        SAME_DIGEST,
    );
    let rank0: Vec<(String, Vec<f32>)> = models[0]
        .named_parameters()
        .iter()
        .map(|(n, t)| (n.clone(), values(t)))
        .collect();
    let got: Vec<(String, Vec<f32>)> = saved.iter().map(|(n, t)| (n.clone(), values(t))).collect();
    assert!(
        writers[0] && writers[1..].iter().all(|&w| !w),
        "rank 0, and only rank 0, writes the checkpoint: the ranks that copied their parameters to the host to write them are {:?}",
        writers
            .iter()
            .enumerate()
            .filter(|(_, w)| **w)
            .map(|(r, _)| r)
            .collect::<Vec<_>>()
    );
    assert!(
        got == rank0,
        "the checkpoint must hold rank 0's model, under its own names (no `module.` prefix): it holds {names:?}"
    );
}

#[test]
fn the_others_wait_until_it_is_written() {
    // PyTorch's DDP tutorial: "use a barrier() to make sure that process 1 loads the model
    // after process 0 saves it". Rank 0 comes late here; the other ranks must not return
    // before its file is there.
    let s = scenario::start();
    let n = s.pick("world size", 2..5);
    let (models, _) = rank_models(&s, n);
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("gcn.safetensors");
    let outcomes = save_on_ranks(&models, &path, Duration::from_millis(500));
    let returned: Vec<bool> = outcomes.iter().map(|o| o.result.is_ok()).collect();
    for (rank, o) in outcomes.iter().enumerate() {
        if let Err(e) = &o.result {
            panic!("rank {rank}'s save_if_main failed: {e}");
        }
    }
    let rank0_last_after_write = outcomes[0].file_at_calls.last() == Some(&true);
    let others: Vec<(bool, bool)> = outcomes[1..]
        .iter()
        .map(|o| (o.calls > 0, o.file_on_return))
        .collect();
    // One record with what the file holds (the challenge's model of rank 0, as the other test
    // checks): the orders observed are the same under every challenge.
    let written: Option<Digests> = checkpoint::load(&path, Placement::cpu()).ok().map(|m| {
        m.named_parameters()
            .iter()
            .map(|(name, t)| (name.clone(), digest(&values(t))))
            .collect()
    });
    s.observe_within(
        "each rank returned; rank 0's last collective call came after its write; ranks 1..: joined a collective, found the file on return; what the file holds",
        &(&returned, rank0_last_after_write, &others, &written),
        SAME_DIGEST,
    );
    assert!(
        others.iter().all(|&(joined, _)| joined),
        "the other ranks must wait for rank 0 in a collective (a barrier) before going on; ranks 1.. joined one: {:?}",
        others.iter().map(|o| o.0).collect::<Vec<_>>()
    );
    assert!(
        rank0_last_after_write,
        "rank 0 must join that collective after writing the file, not before: its calls saw the file {:?}",
        outcomes[0].file_at_calls
    );
    assert!(
        others.iter().all(|&(_, found)| found),
        "every rank must find the checkpoint when save_if_main returns: {:?}",
        others.iter().map(|o| o.1).collect::<Vec<_>>()
    );
}
