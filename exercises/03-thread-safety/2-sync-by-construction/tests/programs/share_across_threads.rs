//! Graded program of exercise 03-2 (`shares_one_layer_across_threads`), a scenario: it records
//! what it observed (the counts, every answer), and a teacher's grader compares that with the
//! reference solution's. The run's challenge picks the layer's seed and the number of forced
//! collisions. Do not edit: the grader checks this file against its checksum.
//!
//! Your file is compiled in a crate that forbids `unsafe`, with one difference: the atomic
//! integers it gets from `std::sync::atomic` are the real ones wrapped by `forced` below, whose
//! `load` waits, while the test forces collisions, until a second thread has loaded too. Two
//! threads that increment with `store(load() + 1)` then both read the same count and both write
//! back the same number, every time: the lost update happens by construction, not by luck.
//! `fetch_add` is one atomic operation and never waits.

#![no_std]
#![forbid(unsafe_code)]

#[allow(unused_imports)]
#[macro_use]
extern crate std as real_std;

use real_std::prelude::rust_2021::*;
use real_std::sync::atomic::Ordering;
use real_std::sync::{Arc, Barrier};

/// `std` as your file sees it: the real one, with the atomic integers of `forced`.
#[allow(unused_imports)]
mod fake_std {
    pub use real_std::*;
    pub mod sync {
        pub use real_std::sync::*;
        pub mod atomic {
            pub use crate::forced::{AtomicU32, AtomicU64, AtomicUsize};
            pub use real_std::sync::atomic::*;
        }
    }
}

#[allow(dead_code, unused_imports)]
mod under_test {
    use crate::fake_std as std;
    use real_std::prelude::rust_2021::*;
    include!(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/src/sync_by_construction.rs"
    ));
}

// Every atomic a student might use is offered, so most of it is unused by any one solution.
#[allow(dead_code)]
mod forced {
    use real_std::fmt;
    use real_std::sync::atomic::{self as real, Ordering};
    use real_std::sync::{Condvar, Mutex, PoisonError};
    use real_std::time::Duration;

    /// While set, every `load` of a forced atomic waits for a second thread's `load`.
    pub static COLLIDE: real::AtomicBool = real::AtomicBool::new(false);
    /// (round, threads arrived in this round)
    static MEET: Mutex<(u64, usize)> = Mutex::new((0, 0));
    static TURN: Condvar = Condvar::new();

    /// Two threads meet here after their loads; one that waits half a second alone goes on.
    fn after_load() {
        if !COLLIDE.load(Ordering::SeqCst) {
            return;
        }
        let mut meet = MEET.lock().unwrap_or_else(PoisonError::into_inner);
        let round = meet.0;
        meet.1 += 1;
        if meet.1 == 2 {
            *meet = (round + 1, 0);
            TURN.notify_all();
            return;
        }
        let (mut meet, _) = TURN
            .wait_timeout_while(meet, Duration::from_millis(500), |m| m.0 == round)
            .unwrap_or_else(PoisonError::into_inner);
        if meet.0 == round {
            *meet = (round + 1, 0); // nobody came: a new round for whoever is next
        }
    }

    macro_rules! forced_atomic {
        ($name:ident, $int:ty) => {
            #[derive(Default)]
            pub struct $name(real::$name);

            impl $name {
                pub const fn new(v: $int) -> Self {
                    Self(real::$name::new(v))
                }
                pub fn load(&self, order: Ordering) -> $int {
                    let v = self.0.load(order);
                    after_load();
                    v
                }
                pub fn store(&self, v: $int, order: Ordering) {
                    self.0.store(v, order)
                }
                pub fn swap(&self, v: $int, order: Ordering) -> $int {
                    self.0.swap(v, order)
                }
                pub fn fetch_add(&self, v: $int, order: Ordering) -> $int {
                    self.0.fetch_add(v, order)
                }
                pub fn fetch_sub(&self, v: $int, order: Ordering) -> $int {
                    self.0.fetch_sub(v, order)
                }
                pub fn compare_exchange(
                    &self,
                    current: $int,
                    new: $int,
                    success: Ordering,
                    failure: Ordering,
                ) -> Result<$int, $int> {
                    self.0.compare_exchange(current, new, success, failure)
                }
                pub fn compare_exchange_weak(
                    &self,
                    current: $int,
                    new: $int,
                    success: Ordering,
                    failure: Ordering,
                ) -> Result<$int, $int> {
                    self.0.compare_exchange_weak(current, new, success, failure)
                }
                pub fn fetch_update<F: FnMut($int) -> Option<$int>>(
                    &self,
                    set: Ordering,
                    fetch: Ordering,
                    f: F,
                ) -> Result<$int, $int> {
                    self.0.fetch_update(set, fetch, f)
                }
                pub fn get_mut(&mut self) -> &mut $int {
                    self.0.get_mut()
                }
                pub fn into_inner(self) -> $int {
                    self.0.into_inner()
                }
            }

            impl From<$int> for $name {
                fn from(v: $int) -> Self {
                    Self::new(v)
                }
            }

            impl fmt::Debug for $name {
                fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                    fmt::Debug::fmt(&self.0, f)
                }
            }
        };
    }

    forced_atomic!(AtomicUsize, usize);
    forced_atomic!(AtomicU64, u64);
    forced_atomic!(AtomicU32, u32);
}

use under_test::CachedGatV2;
use workbook::{datasets, Activation, EdgeIndex, GatV2Config, GatV2Output, Graph, Layer};
use workbook::{LayerConfig, Model, ModelConfig, Placement, Result};
use workbook_lessons::threads::serving::Request;

const THREADS: usize = 4;
const PER_THREAD: usize = 25;

/// Karate without every `graphs`-th edge, starting at edge `k`: a different graph for each `k`.
fn thinned(karate: &Graph, k: usize, graphs: usize) -> Result<Request> {
    let ei = karate.edge_index();
    let keep = |i: &usize| i % graphs != k;
    let pick = |ids: &[u32]| -> Vec<i64> {
        (0..ids.len())
            .filter(keep)
            .map(|i| i64::from(ids[i]))
            .collect()
    };
    let (src, dst) = (pick(ei.sources_host()), pick(ei.targets_host()));
    Ok(Request {
        name: format!("karate without edge group {k}"),
        x: karate.x().clone(),
        edge_index: EdgeIndex::new(&src, &dst, karate.num_nodes(), karate.placement())?,
        nodes: None,
    })
}

fn bits(t: &workbook::candle_core::Tensor) -> Result<(Vec<usize>, Vec<u32>)> {
    let values = t.flatten_all()?.to_vec1::<f32>()?;
    Ok((
        t.dims().to_vec(),
        values.iter().map(|v| v.to_bits()).collect(),
    ))
}

fn same(a: &GatV2Output, b: &GatV2Output) -> Result<bool> {
    Ok(bits(&a.out)? == bits(&b.out)?
        && a.attention.edge_index.sources_host() == b.attention.edge_index.sources_host()
        && a.attention.edge_index.targets_host() == b.attention.edge_index.targets_host()
        && bits(&a.attention.weights)? == bits(&b.attention.weights)?)
}

/// Fails the program with `message`, which the grader shows (the end of what it printed). The
/// scenario does not finish: nothing after this is recorded.
fn fail(message: String) -> ! {
    real_std::eprintln!("FAILED: {message}");
    real_std::process::exit(1)
}

fn main() {
    let s = scenario::start();
    if let Err(e) = run(&s) {
        fail(format!("the program failed: {e}"));
    }
    real_std::println!("ok");
}

fn run(s: &scenario::Scenario) -> Result<()> {
    // Rounds in which two threads call `answer` at the same moment.
    let collisions = s.pick("collisions", 12..28);
    // How many distinct requests: what cached() must hold at the end, so not a constant.
    let graphs = s.pick("graphs", 3..8);
    let karate = datasets::karate(Placement::cpu())?;
    let config = ModelConfig {
        layers: vec![LayerConfig::GatV2(GatV2Config::new(34, 8).heads(2))],
        activation: Activation::None,
        dropout: 0.0,
        prefixed: false,
    };
    let (model, _vars) = Model::init(config, s.seed("layer"), Placement::cpu())?;
    let Layer::GatV2(conv) = &model.layers()[0] else {
        unreachable!("the config has one GATv2 layer")
    };
    let requests: Arc<Vec<Request>> = Arc::new(
        (0..graphs)
            .map(|k| thinned(&karate, k, graphs))
            .collect::<Result<_>>()?,
    );
    let expected = requests
        .iter()
        .map(|r| conv.forward(&r.x, &r.edge_index))
        .collect::<Result<Vec<_>>>()?;
    let layer = Arc::new(CachedGatV2::new(conv.clone()));

    // 1. Collisions, forced: two threads answer a cached request at the same moment, `collisions`
    // times, with every counter load waiting for the other thread's.
    layer.answer(&requests[0])?;
    forced::COLLIDE.store(true, Ordering::SeqCst);
    let start = Arc::new(Barrier::new(2));
    let pair: Vec<_> = (0..2)
        .map(|_| {
            let (layer, requests, start) = (
                Arc::clone(&layer),
                Arc::clone(&requests),
                Arc::clone(&start),
            );
            real_std::thread::spawn(move || -> Result<()> {
                for _ in 0..collisions {
                    start.wait();
                    layer.answer(&requests[0])?;
                }
                Ok(())
            })
        })
        .collect();
    for thread in pair {
        thread
            .join()
            .unwrap_or_else(|_| fail("a thread panicked in answer".into()))?;
    }
    forced::COLLIDE.store(false, Ordering::SeqCst);
    let want = 1 + 2 * collisions;
    s.observe("served() after the collisions", &layer.served());
    if layer.served() != want {
        fail(format!(
            "served() counted {} of {want} requests after {collisions} rounds in which two threads called answer at the same moment: both read the count, both wrote back the same number, and one request was lost (a lost update). Make the increment one atomic read-modify-write (fetch_add), not a load and then a store",
            layer.served()
        ));
    }

    // 2. Many threads, many graphs: every answer as the sequential one, every request counted.
    let threads: Vec<_> = (0..THREADS)
        .map(|t| {
            let (layer, requests) = (Arc::clone(&layer), Arc::clone(&requests));
            real_std::thread::spawn(move || -> Result<Vec<(usize, GatV2Output)>> {
                (0..PER_THREAD)
                    .map(|i| {
                        let k = (t + i) % graphs;
                        Ok((k, layer.answer(&requests[k])?))
                    })
                    .collect()
            })
        })
        .collect();
    for (t, thread) in threads.into_iter().enumerate() {
        let answers = thread
            .join()
            .unwrap_or_else(|_| fail("a serving thread panicked".into()))?;
        for (i, (k, got)) in answers.into_iter().enumerate() {
            if i < graphs {
                s.observe(
                    real_std::format!("thread {t}'s answer to graph {k}"),
                    &got.out,
                );
                s.observe(
                    real_std::format!("thread {t}'s attention for graph {k}"),
                    &got.attention.weights,
                );
            }
            if !same(&got, &expected[k])? {
                fail(format!(
                    "the answer to '{}' differs from the sequential answer",
                    requests[k].name
                ));
            }
        }
    }
    let want = want + THREADS * PER_THREAD;
    s.observe(
        "served() and cached() at the end",
        &(layer.served(), layer.cached()),
    );
    if layer.served() != want {
        fail(format!(
            "served() counted {} requests, but {want} were answered (by every thread together)",
            layer.served()
        ));
    }
    if layer.cached() != graphs {
        fail(format!(
            "cached() is {}, but {graphs} distinct requests (names) were answered",
            layer.cached()
        ));
    }
    Ok(())
}
