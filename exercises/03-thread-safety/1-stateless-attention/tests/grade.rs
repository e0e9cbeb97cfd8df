//! Graded tests for exercise 03-1 (points in exercise.toml). Do not edit: the grader checks this
//! file against its checksum.
//!
//! No sleeps and no luck: channels and a barrier pause threads inside `forward_paused` to force
//! the interleavings that lose, so a layer that keeps attention in shared state fails every time.
//!
//! Each test is a scenario (the `scenario` crate): it records the attention every thread got,
//! and a teacher's grader compares it with the reference solution's. The run's challenge picks
//! the layer's seed and the graphs, so the attention cannot be written down in advance.

use super::stateless_attention::SharedGatV2;
use scenario::Scenario;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Condvar, Mutex, PoisonError};
use std::time::Duration;
use workbook::datasets::{self, CsbmConfig};
use workbook::{Activation, EdgeIndex, GatV2Config, GatV2Conv, GatV2Output, Graph, Layer};
use workbook::{LayerConfig, Model, ModelConfig, Placement};
use workbook_lessons::threads::serving::Request;

/// A single GATv2 layer (2 heads × 8 channels) taking `in_channels` features, seeded by the
/// challenge.
fn gatv2(s: &Scenario, in_channels: usize) -> GatV2Conv {
    let config = ModelConfig {
        layers: vec![LayerConfig::GatV2(
            GatV2Config::new(in_channels, 8).heads(2),
        )],
        activation: Activation::None,
        dropout: 0.0,
        prefixed: false,
    };
    let (model, _vars) =
        Model::init(config, s.seed("layer"), Placement::cpu()).expect("building the layer");
    match &model.layers()[0] {
        Layer::GatV2(conv) => conv.clone(),
        _ => unreachable!("the config has one GATv2 layer"),
    }
}

/// `graph` without every `k`-th edge (`k` picked by the challenge): a different graph on the
/// same nodes.
fn thinned(s: &Scenario, graph: &Graph) -> Request {
    let k = s.pick("thinning", 3..8);
    let first = s.pick("first edge dropped", 0..k);
    let ei = graph.edge_index();
    let keep = |ids: &[u32]| -> Vec<i64> {
        (0..ids.len())
            .filter(|i| i % k != first)
            .map(|i| i64::from(ids[i]))
            .collect()
    };
    let (src, dst) = (keep(ei.sources_host()), keep(ei.targets_host()));
    Request {
        name: format!("{} without every {k}th edge", graph.name),
        x: graph.x().clone(),
        edge_index: EdgeIndex::new(&src, &dst, graph.num_nodes(), graph.placement()).unwrap(),
        nodes: None,
    }
}

fn bits(t: &workbook::candle_core::Tensor) -> (Vec<usize>, Vec<u32>) {
    let values = t.flatten_all().unwrap().to_vec1::<f32>().unwrap();
    (
        t.dims().to_vec(),
        values.iter().map(|v| v.to_bits()).collect(),
    )
}

/// Bit-for-bit the same attention: the same edges and the same weights.
fn same_attention(a: &GatV2Output, b: &GatV2Output) -> bool {
    a.attention.edge_index.sources_host() == b.attention.edge_index.sources_host()
        && a.attention.edge_index.targets_host() == b.attention.edge_index.targets_host()
        && bits(&a.attention.weights) == bits(&b.attention.weights)
}

/// How long a paused thread waits for the others before it concludes that they cannot run: a
/// layer that holds a lock across its whole forward pass lets only one caller in at a time, and
/// this keeps such a layer from hanging the test. (The interleavings themselves are forced with
/// channels and a barrier, never by waiting.)
const PATIENCE: Duration = Duration::from_secs(10);

fn edges(out: &GatV2Output) -> usize {
    out.attention.edge_index.num_edges()
}

/// The attention a thread got, to observe: its edges and its weights, in one record (a whole
/// graph's edges are the same under every challenge; the weights of the drawn layer are not).
fn attention(out: &GatV2Output) -> ((Vec<u32>, Vec<u32>), &workbook::candle_core::Tensor) {
    let ei = &out.attention.edge_index;
    (
        (ei.sources_host().to_vec(), ei.targets_host().to_vec()),
        &out.attention.weights,
    )
}

#[test]
fn each_thread_gets_its_own_attention_under_the_race() {
    let s = scenario::start();
    let karate = datasets::karate(Placement::cpu()).unwrap();
    let (a, b) = (Request::whole(&karate), thinned(&s, &karate));
    let layer = SharedGatV2::new(gatv2(&s, karate.num_features()));
    let want_a = layer.conv().forward(&a.x, &a.edge_index).unwrap();
    let want_b = layer.conv().forward(&b.x, &b.edge_index).unwrap();

    // The interleaving of PyG issue 8741: A computes its attention; B runs a whole forward pass;
    // only then does A's forward pass return.
    let (a_computed, a_computed_rx) = mpsc::channel::<()>();
    let (b_done, b_done_rx) = mpsc::channel::<()>();
    let b_ran = AtomicBool::new(false);
    let (got_a, got_b) = std::thread::scope(|s| {
        let (layer, a, b, b_ran_meanwhile) = (&layer, &a, &b, &b_ran);
        let thread_a = s.spawn(move || {
            layer.forward_paused(&a.x, &a.edge_index, move || {
                let _ = a_computed.send(()); // 1. A has computed its attention
                                             // 3. wait until B is done
                if b_done_rx.recv_timeout(PATIENCE).is_ok() {
                    b_ran_meanwhile.store(true, Ordering::SeqCst);
                }
            })
        });
        let thread_b = s.spawn(move || {
            if a_computed_rx.recv().is_err() {
                return None; // A never paused: nothing to interleave with
            }
            let out = layer.forward(&b.x, &b.edge_index); // 2. B's whole forward pass
            let _ = b_done.send(());
            Some(out)
        });
        (thread_a.join(), thread_b.join())
    });
    let got_a = got_a
        .expect("thread A panicked in forward_paused")
        .unwrap_or_else(|e| panic!("thread A's forward_paused failed: {e}"));
    let got_b = got_b
        .expect("thread B panicked in forward")
        .expect(
            "forward_paused never called `pause`: call it once, after the attention is computed",
        )
        .unwrap_or_else(|e| panic!("thread B's forward failed: {e}"));
    let b_ran = b_ran.load(Ordering::SeqCst);
    // Storing and reading back before `pause` would dodge this interleaving and still race:
    // the layer must hold its parameters (the GatV2Conv) and nothing else.
    let extra = std::mem::size_of::<SharedGatV2>() - std::mem::size_of::<GatV2Conv>();
    // One record: whether B ran meanwhile and the bytes kept are the same under every
    // challenge; the attention the threads got is not.
    s.observe(
        "thread A's and thread B's attention (edges and weights), whether B ran a whole forward pass while A was paused, and the bytes the layer keeps besides its GatV2Conv",
        &(attention(&got_a), attention(&got_b), b_ran, extra),
    );
    assert!(
        same_attention(&got_b, &want_b),
        "thread B did not get the attention of its own graph '{}'",
        b.name
    );
    if same_attention(&got_a, &want_b) {
        panic!(
            "thread A asked for '{}' ({} attention edges) and got thread B's attention for '{}' ({} edges): the layer stored it, B's forward pass overwrote it, and A read B's back (PyG issue 8741)",
            a.name,
            edges(&want_a),
            b.name,
            edges(&got_a)
        );
    }
    assert!(
        b_ran,
        "thread B could not run its forward pass while thread A was paused inside forward_paused (it waited {} s): the layer lets only one forward pass run at a time (a lock held across the call?); keep the attention in the call instead",
        PATIENCE.as_secs()
    );
    assert!(
        same_attention(&got_a, &want_a),
        "thread A did not get the attention of its own graph '{}' ({} edges); it got {} edges",
        a.name,
        edges(&want_a),
        edges(&got_a)
    );
    assert_eq!(
        extra, 0,
        "SharedGatV2 still keeps {extra} bytes of state besides its GatV2Conv: delete the last_attention field"
    );
}

/// A barrier that the test cannot get stuck in: a thread whose `pause` is dropped without being
/// called (its forward pass failed, or never pauses), or that stops early, breaks it, and every
/// waiting thread goes on.
struct Lockstep {
    threads: usize,
    /// (arrived in this round, round, broken)
    state: Mutex<(usize, u64, bool)>,
    turn: Condvar,
}

impl Lockstep {
    fn new(threads: usize) -> Self {
        Self {
            threads,
            state: Mutex::new((0, 0, false)),
            turn: Condvar::new(),
        }
    }

    fn wait(&self) {
        let mut state = self.state.lock().unwrap_or_else(PoisonError::into_inner);
        if state.2 {
            return;
        }
        let round = state.1;
        state.0 += 1;
        if state.0 == self.threads {
            *state = (0, round + 1, false);
            self.turn.notify_all();
            return;
        }
        // A thread that cannot arrive (blocked on a lock another waiting thread holds) would
        // hang the round: after PATIENCE it is broken up, and every thread goes on.
        let (mut state, waited) = self
            .turn
            .wait_timeout_while(state, PATIENCE, |st| st.1 == round && !st.2)
            .unwrap_or_else(PoisonError::into_inner);
        if waited.timed_out() {
            state.2 = true;
            self.turn.notify_all();
        }
    }

    fn break_up(&self) {
        self.state.lock().unwrap_or_else(PoisonError::into_inner).2 = true;
        self.turn.notify_all();
    }
}

/// One thread's arrival at the lockstep; dropped without arriving, it breaks the lockstep.
struct Arrival<'a>(&'a Lockstep);

impl Arrival<'_> {
    fn arrive(self) {
        let at = self.0;
        std::mem::forget(self);
        at.wait();
    }
}

impl Drop for Arrival<'_> {
    fn drop(&mut self) {
        self.0.break_up();
    }
}

#[test]
fn many_threads_on_different_graphs_match_sequential() {
    let s = scenario::start();
    const THREADS: usize = 4;
    const ROUNDS: usize = 6;
    // A different graph for every thread and round: CSBM graphs of different sizes and seeds.
    let graphs: Vec<Vec<Graph>> = (0..THREADS)
        .map(|t| {
            (0..ROUNDS)
                .map(|r| {
                    let config = CsbmConfig {
                        seed: s.seed(&format!("graph of thread {t}, round {r}")),
                        ..CsbmConfig::new(30 + 7 * t + r)
                    };
                    datasets::csbm(&config, Placement::cpu()).unwrap()
                })
                .collect()
        })
        .collect();
    let layer = SharedGatV2::new(gatv2(&s, graphs[0][0].num_features()));
    let sequential: Vec<Vec<GatV2Output>> = graphs
        .iter()
        .map(|row| {
            row.iter()
                .map(|g| layer.conv().forward(g.x(), g.edge_index()).unwrap())
                .collect()
        })
        .collect();

    // Every round, each thread computes, waits until all have computed, then returns: the
    // window between computing and returning is where stored attention gets overwritten.
    let lockstep = Lockstep::new(THREADS);
    let results: Vec<Vec<_>> = std::thread::scope(|s| {
        let handles: Vec<_> = graphs
            .iter()
            .map(|row| {
                let (layer, lockstep) = (&layer, &lockstep);
                s.spawn(move || {
                    let _leaving = Arrival(lockstep); // also if the thread panics
                    row.iter()
                        .map(|g| {
                            let arrival = Arrival(lockstep);
                            layer.forward_paused(g.x(), g.edge_index(), move || arrival.arrive())
                        })
                        .collect()
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| h.join().expect("a serving thread panicked"))
            .collect()
    });

    let mut wrong = Vec::new();
    for (t, row) in results.iter().enumerate() {
        for (r, got) in row.iter().enumerate() {
            let got = got
                .as_ref()
                .unwrap_or_else(|e| panic!("thread {t}, round {r}: forward_paused failed: {e}"));
            let want = &sequential[t][r];
            s.observe(
                format!("thread {t}, round {r}: attention edges and weights, and output"),
                &(attention(got), &got.out),
            );
            if !same_attention(got, want) || bits(&got.out) != bits(&want.out) {
                wrong.push(format!(
                    "thread {t} round {r} ({} edges wanted, {} received)",
                    edges(want),
                    edges(got)
                ));
            }
        }
    }
    assert!(
        wrong.is_empty(),
        "{} of {} concurrent answers differ from the sequential ones (another thread's attention): {}{}",
        wrong.len(),
        THREADS * ROUNDS,
        wrong[..wrong.len().min(3)].join(", "),
        if wrong.len() > 3 { ", ..." } else { "" }
    );
}
