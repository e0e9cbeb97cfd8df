//! Graded tests for exercise 05-3 (points in exercise.toml). Do not edit: the grader checks this
//! file against its checksum.
//!
//! Each test is a scenario (the `scenario` crate): it records what it observed, and a teacher's
//! grader compares that with the reference solution's. The grading run's challenge picks the
//! number of items, the depth, the items themselves, where the loop stops early and where
//! `prepare` panics, and for the training, the accelerator (`cuda:0`, or a simulated `sim:2` to
//! `sim:7`), the graph and the batch size.
//!
//! Who prepared an item, and when, is recorded by the test's own `prepare` (the thread it ran
//! on and the moment it started and ended, in one log with the loop's own events), never by the
//! code under test; overlap and the bound are read from the order of those events, which any
//! correct design guarantees, never from wall time. Where the loop waits for the prefetcher to
//! do something, it waits for the event itself (with a generous time-out), so a slow machine
//! slows the test down but does not fail a correct solution.

// The prefetcher is dropped on purpose at set points (a design may or may not implement Drop).
#![allow(clippy::drop_non_drop)]

use super::prefetch_epoch::{train_epoch_prefetched, Prefetcher};
use scenario::{Json, Scenario, Tolerance};
use std::num::NonZeroUsize;
use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::ThreadId;
use std::time::{Duration, Instant};
use workbook::datasets::{self, CsbmConfig};
use workbook::device::accelerator_or_sim;
use workbook::ledger::{Ledger, Transfer};
use workbook::train::minibatch::{Eval, MiniBatchConfig, MiniBatchTrainer, STEP_MARK};
use workbook::train::TrainConfig;
use workbook::{Graph, ModelConfig, Placement};

/// How long the loop waits for an event a correct prefetcher makes happen at once: long enough
/// for a loaded machine, and spent only when the prefetcher does not do it.
const PATIENCE: Duration = Duration::from_secs(10);

/// What happened, in the order it happened (one lock orders every event).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Event {
    /// `prepare(k)` began, on this thread.
    Start(usize, ThreadId),
    /// `prepare(k)` returned.
    End(usize),
    /// The loop asked for item `k` (called `next`).
    Ask(usize),
    /// The loop had item `k` in hand.
    Got(usize),
}

/// The events of one run, shared by the test's `prepare` and its loop.
#[derive(Clone, Default)]
struct Log {
    inner: Arc<(Mutex<Vec<Event>>, Condvar)>,
}

impl Log {
    fn push(&self, e: Event) {
        let (events, changed) = &*self.inner;
        events.lock().unwrap_or_else(|p| p.into_inner()).push(e);
        changed.notify_all();
    }

    fn events(&self) -> Vec<Event> {
        self.inner
            .0
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Waits until an event satisfies `wanted` (true), or [`PATIENCE`] passes (false).
    fn wait_for(&self, wanted: impl Fn(&Event) -> bool) -> bool {
        let (events, changed) = &*self.inner;
        let deadline = Instant::now() + PATIENCE;
        let mut guard = events.lock().unwrap_or_else(|p| p.into_inner());
        loop {
            if guard.iter().any(&wanted) {
                return true;
            }
            let now = Instant::now();
            if now >= deadline {
                return false;
            }
            guard = changed
                .wait_timeout(guard, deadline - now)
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
    }
}

/// Item `k` of a run: a number derived from the challenge, so that no list can be written down.
fn item(seed: u64, k: usize) -> u64 {
    let mut z = seed ^ (k as u64).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// The test's `prepare`: logs its start (with its thread) and end around making item `k`.
fn logged_prepare(log: &Log, seed: u64) -> impl FnMut(usize) -> u64 + Send + 'static {
    let log = log.clone();
    move |k| {
        log.push(Event::Start(k, std::thread::current().id()));
        let v = item(seed, k);
        log.push(Event::End(k));
        v
    }
}

/// The run's sizes: 20 to 59 items, depth 1 to 4.
fn sizes(s: &Scenario) -> (usize, NonZeroUsize) {
    let n = s.pick("items", 20..60);
    let depth = NonZeroUsize::new(s.pick("depth", 1..5)).unwrap();
    (n, depth)
}

/// Takes the next item, logging the ask and the receipt.
fn take(log: &Log, it: &mut Prefetcher<u64>, k: usize) -> Option<u64> {
    log.push(Event::Ask(k));
    let got = it.next();
    if got.is_some() {
        log.push(Event::Got(k));
    }
    got
}

#[test]
fn yields_every_item_once_in_order() {
    let s = scenario::start();
    let (n, depth) = sizes(&s);
    let seed = s.seed("items");
    let log = Log::default();
    let mut it = Prefetcher::new(n, depth, logged_prepare(&log, seed));
    let mut got = Vec::new();
    while let Some(v) = take(&log, &mut it, got.len()) {
        got.push(v);
        assert!(
            got.len() <= n,
            "the prefetcher yields more than the {n} items prepare makes"
        );
    }
    let again = it.next();
    drop(it);
    let prepared: Vec<usize> = log
        .events()
        .iter()
        .filter_map(|e| match e {
            Event::Start(k, _) => Some(*k),
            _ => None,
        })
        .collect();
    s.observe("prepare called for", &prepared);
    // one record: next() after the end (None) is the same under every challenge, the items are
    // the challenge's
    s.observe("items yielded, then next() after the end", &(&got, again));
    let expected: Vec<u64> = (0..n).map(|k| item(seed, k)).collect();
    assert_eq!(
        got,
        expected,
        "the prefetcher should yield prepare(0), ..., prepare({}) in that order",
        n - 1
    );
    assert_eq!(
        prepared,
        (0..n).collect::<Vec<_>>(),
        "prepare should be called once for each of 0..{n}, in order"
    );
    assert!(again.is_none(), "after the last item, next() is None");
}

#[test]
fn prepares_ahead_on_its_own_thread_while_the_loop_computes() {
    // While the loop is busy with item k (here: it waits), the prefetcher must already be
    // preparing item k + 1, on a thread that is not the loop's.
    let s = scenario::start();
    let (n, depth) = sizes(&s);
    let seed = s.seed("items");
    let log = Log::default();
    let mut it = Prefetcher::new(n, depth, logged_prepare(&log, seed));
    let mut overlapped = 0;
    let mut gave_up = None;
    for k in 0..n {
        let v = take(&log, &mut it, k)
            .unwrap_or_else(|| panic!("the prefetcher ended after {k} of {n} items"));
        assert_eq!(v, item(seed, k), "item {k} is not prepare({k})'s");
        if k + 1 < n && gave_up.is_none() {
            // the step: it ends only once prepare(k + 1) has begun
            if log.wait_for(|e| matches!(e, Event::Start(j, _) if *j == k + 1)) {
                overlapped += 1;
            } else {
                gave_up = Some(k);
            }
        }
    }
    drop(it);
    let me = std::thread::current().id();
    let elsewhere = log
        .events()
        .iter()
        .filter(|e| matches!(e, Event::Start(_, t) if *t != me))
        .count();
    s.observe("items", &n);
    s.observe(
        "steps during which the next item's preparation began",
        &overlapped,
    );
    s.observe("items prepared off the loop's thread", &elsewhere);
    if let Some(k) = gave_up {
        panic!(
            "during step {k} (the loop holding item {k}), prepare({}) did not begin within {} s: the items must be prepared ahead, on the prefetcher's thread, while the loop computes",
            k + 1,
            PATIENCE.as_secs()
        );
    }
    assert_eq!(
        elsewhere, n,
        "every item should be prepared on the prefetcher's thread, not the loop's ({} of {n} were)",
        elsewhere
    );
}

#[test]
fn never_more_than_depth_items_ahead() {
    // At most `depth` finished items wait. While the loop holds item 0, the prefetcher fills up
    // to `depth` items ahead (1..=depth finished); and item k can only begin once the loop has
    // asked for item k - depth - 1 (with depth waiting and one being handed over, the one
    // before could not be taken yet). Both are orders the bound guarantees.
    let s = scenario::start();
    let (n, depth) = sizes(&s);
    let d = depth.get();
    let seed = s.seed("items");
    let log = Log::default();
    let mut it = Prefetcher::new(n, depth, logged_prepare(&log, seed));
    let mut got = Vec::new();
    let first = take(&log, &mut it, 0).expect("the prefetcher yielded nothing");
    got.push(first);
    // step 0: wait until `depth` items ahead are finished, then give a runaway one time to show
    let filled = log.wait_for(|e| matches!(e, Event::End(j) if *j == d));
    std::thread::sleep(Duration::from_millis(300));
    while let Some(v) = take(&log, &mut it, got.len()) {
        got.push(v);
    }
    drop(it);
    let events = log.events();
    let asked = |j: usize, before: usize| {
        events[..before]
            .iter()
            .any(|e| matches!(e, Event::Ask(i) if *i == j))
    };
    let mut too_early = Vec::new();
    for (at, e) in events.iter().enumerate() {
        if let Event::Start(k, _) = e {
            if *k > d && !asked(k - d - 1, at) {
                too_early.push(*k);
            }
        }
    }
    // one record: whether it filled up and the items begun too early (none) are the same under
    // every challenge, the items yielded are the challenge's
    s.observe(
        format!(
            "{n} items, depth {d}: filled up to depth while the loop held item 0, items begun more than depth ahead, items yielded"
        ),
        &(filled, &too_early, &got),
    );
    assert!(
        filled,
        "while the loop held item 0, the prefetcher should have finished items 1 to {d} (depth {d}) within {} s; it did not prepare ahead",
        PATIENCE.as_secs()
    );
    assert!(
        too_early.is_empty(),
        "with depth {d}, item k may begin only after the loop asked for item k - {}; items {too_early:?} began earlier: more than {d} finished items waited (an unbounded queue?)",
        d + 1
    );
    assert_eq!(got.len(), n, "every item should be yielded");
}

/// Sets its flag when dropped: tells when the prefetcher let go of `prepare`.
struct DroppedFlag(Arc<AtomicBool>);

impl Drop for DroppedFlag {
    fn drop(&mut self) {
        self.0.store(true, Ordering::SeqCst);
    }
}

#[test]
fn dropping_it_early_stops_the_thread() {
    let s = scenario::start();
    let n = s.pick("items", 2000..4000);
    let depth = NonZeroUsize::new(s.pick("depth", 1..5)).unwrap();
    let taken = s.pick("taken", 1..20);
    let seed = s.seed("items");
    let log = Log::default();
    let released = Arc::new(AtomicBool::new(false));
    let flag = DroppedFlag(Arc::clone(&released));
    let mut prepare = logged_prepare(&log, seed);
    let mut it = Prefetcher::new(n, depth, move |k| {
        let _keep = &flag; // dropped with the closure
        prepare(k)
    });
    let mut got = Vec::new();
    for k in 0..taken {
        got.push(take(&log, &mut it, k).expect("the prefetcher ended early"));
    }
    drop(it);
    // The thread lets go of `prepare` when it stops: at once, or after the item in hand.
    let deadline = Instant::now() + PATIENCE;
    while !released.load(Ordering::SeqCst) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(5));
    }
    let stopped = released.load(Ordering::SeqCst);
    let begun = log
        .events()
        .iter()
        .filter(|e| matches!(e, Event::Start(..)))
        .count();
    let bounded = begun <= taken + depth.get() + 1;
    // one record: the two verdicts are the same under every challenge, the items are the
    // challenge's
    s.observe(
        "items taken, the thread stopped and let go of prepare, items begun within the bound",
        &(&got, stopped, bounded),
    );
    assert!(
        stopped,
        "the loop took {taken} of {n} items and dropped the prefetcher: its thread should stop (and drop prepare) within {} s",
        PATIENCE.as_secs()
    );
    assert!(
        bounded,
        "after {taken} items taken with depth {depth}, at most {} items can have begun; {begun} did: the thread ran on after the prefetcher was dropped",
        taken + depth.get() + 1
    );
}

#[test]
fn a_panic_in_prepare_reaches_the_loop() {
    let s = scenario::start();
    let (n, depth) = sizes(&s);
    let fails_at = s.pick("panics at", 1..n);
    let seed = s.seed("items");
    let log = Log::default();
    let mut prepare = logged_prepare(&log, seed);
    let mut it = Prefetcher::new(n, depth, move |k| {
        if k == fails_at {
            panic!("prepare({k}) failed (as a sampler can)");
        }
        prepare(k)
    });
    let mut got = Vec::new();
    let outcome = catch_unwind(AssertUnwindSafe(|| {
        while let Some(v) = take(&log, &mut it, got.len()) {
            got.push(v);
        }
    }));
    let panicked = outcome.is_err();
    // the prefetcher may panic again when dropped after a panic: that is not the test's concern
    let _ = catch_unwind(AssertUnwindSafe(move || drop(it)));
    // one record: that the loop saw the panic is the same under every challenge, the items are
    // the challenge's
    s.observe(
        "items yielded before the panic, and whether the loop saw it",
        &(&got, panicked),
    );
    let expected: Vec<u64> = (0..fails_at).map(|k| item(seed, k)).collect();
    assert_eq!(
        got, expected,
        "prepare({fails_at}) panicked: the {fails_at} items prepared before it should still reach the loop, in order"
    );
    assert!(
        panicked,
        "prepare({fails_at}) panicked, but the loop saw a shorter run end normally ({} of {n} items): the panic must reach the loop (std::panic::resume_unwind), or the epoch silently loses its last batches",
        got.len()
    );
}

fn graph(s: &Scenario) -> Graph {
    let mut config = CsbmConfig::new(s.pick("nodes", 1500..3500));
    config.seed = s.seed("graph");
    datasets::csbm(&config, Placement::cpu()).unwrap()
}

/// GCN, [5, 5] neighbours, 8 to 15 seeds a batch, on `device`.
fn trainer(s: &Scenario, graph: &Graph, device: &Placement) -> MiniBatchTrainer {
    let config = ModelConfig::gcn(graph.num_features(), 16, graph.num_classes());
    let mb = MiniBatchConfig {
        eval: Eval::FullGraph,
        ..MiniBatchConfig::new(&[5, 5], s.pick("batch size", 8..16))
    };
    let train = TrainConfig {
        seed: s.seed("model"),
        ..TrainConfig::gcn()
    };
    MiniBatchTrainer::new(config, graph, &train, mb, device).unwrap()
}

fn row(t: &Transfer) -> (String, String, String, u64) {
    (t.what.clone(), t.from.clone(), t.to.clone(), t.bytes)
}

#[test]
fn the_same_training_as_without_prefetch() {
    let s = scenario::start();
    let g = graph(&s);
    let ledger = Ledger::new();
    let device = accelerator_or_sim(s.pick("accelerator", 2..8))
        .placement
        .with_ledger(&ledger);
    let depth = NonZeroUsize::new(s.pick("depth", 1..5)).unwrap();
    let mut ours = trainer(&s, &g, &device);
    ledger.clear();
    let steps = train_epoch_prefetched(&mut ours, &device, 1, depth)
        .unwrap_or_else(|e| panic!("train_epoch_prefetched failed on {device}: {e}"));
    // what crossed before each step (the library marks the ledger where a step begins)
    let per_step: Vec<Vec<(String, String, String, u64)>> = ledger
        .before_each(STEP_MARK)
        .iter()
        .map(|copies| {
            let mut rows: Vec<_> = copies
                .iter()
                .filter(|t| t.what.starts_with("batch."))
                .map(row)
                .collect();
            rows.sort();
            rows
        })
        .collect();
    s.observe("steps", &steps);
    s.observe("batch copies before each step", &Json(&per_step));
    // the library's epoch on the same device (without the ledger, whose record is ours)
    let same_device = accelerator_or_sim(s.pick("accelerator", 2..8)).placement;
    let mut theirs = trainer(&s, &g, &same_device);
    theirs.epoch().unwrap(); // the library's epoch 1, without prefetch
    let expected: std::collections::HashMap<_, _> =
        theirs.model().named_parameters().into_iter().collect();
    assert_eq!(
        steps,
        ours.loader().len(),
        "one step per batch of the epoch"
    );
    for (k, rows) in per_step.iter().enumerate() {
        assert_eq!(
            rows.len(),
            5,
            "just before step {k}, exactly its batch's five parts should cross to {device} (the copy stays in the loop, one batch on the device at a time); the ledger shows {rows:?} there"
        );
    }
    for (name, a) in ours.model().named_parameters() {
        s.observe_within(
            format!("{name} after one epoch"),
            &a,
            Tolerance {
                abs: 1e-5,
                rel: 1e-5,
            },
        );
        let a = a.flatten_all().unwrap().to_vec1::<f32>().unwrap();
        let b = expected[&name]
            .flatten_all()
            .unwrap()
            .to_vec1::<f32>()
            .unwrap();
        // NaN-aware: a NaN differs from everything (f32::max would skip it)
        let worst = a
            .iter()
            .zip(&b)
            .map(|(x, y)| (x - y).abs())
            .fold(0f32, |m, d| {
                if d.is_nan() || m.is_nan() {
                    f32::NAN
                } else {
                    m.max(d)
                }
            });
        assert!(
            worst <= 1e-5,
            "after one epoch, {name} should match MiniBatchTrainer::epoch's (max difference {worst}): the same batches, in the same order"
        );
    }
}
