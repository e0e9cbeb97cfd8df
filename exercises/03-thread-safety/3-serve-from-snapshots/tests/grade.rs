//! Graded tests for exercise 03-3 (points in exercise.toml). Do not edit: the grader checks this
//! file against its checksum.
//!
//! Every read is *tagged*: each parameter it was served is matched, bit for bit, against the
//! parameters recorded after every optimiser step (`workbook_lessons::threads::snapshot::StepHistory`).
//! Optimiser steps are paused half-way with channels, never with sleeps, so a server that reads
//! the live model is caught every time.
//!
//! Each test is a scenario (the `scenario` crate): it records what every read was (the step it
//! claimed, the steps its parameters match, its logits), and a teacher's grader compares that
//! with the reference solution's. The run's challenge picks the model's seed, where each step
//! pauses and how many steps there are.

use super::serve_from_snapshots::{Served, TrainAndServe};
use scenario::{Scenario, Shown, Tolerance};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc;
use workbook::candle_core::Tensor;
use workbook::{datasets, Graph, Model, ModelConfig, Placement, Result};
use workbook_lessons::threads::snapshot::{
    fingerprint, parameter_fingerprints, ReadTag, StepHistory,
};

const LR: f64 = 0.05;

fn karate() -> Graph {
    datasets::karate(Placement::cpu()).unwrap()
}

/// A 2-layer GATv2 (12 parameters) on karate's CPU placement, seeded by the challenge.
fn service(s: &Scenario, graph: &Graph) -> TrainAndServe {
    let config = ModelConfig::gatv2(graph.num_features(), 4, 2, graph.num_classes());
    TrainAndServe::new(config, s.seed("model"), graph.placement()).expect("building the service")
}

/// After which parameter a step pauses (the challenge picks it, never the first or the last).
fn pause_after(s: &Scenario, service: &TrainAndServe) -> usize {
    s.pick("pause after", 1..service.live().named_parameters().len())
}

fn logits_of(model: &Model, graph: &Graph) -> Tensor {
    model
        .forward(graph.x(), graph.edge_index(), None)
        .unwrap()
        .logits
}

fn logits(model: &Model, graph: &Graph) -> u64 {
    fingerprint(&logits_of(model, graph)).unwrap()
}

/// Logits of two correct services differ by float rounding only.
const SAME_LOGITS: Tolerance = Tolerance {
    abs: 1e-5,
    rel: 1e-5,
};

/// The parameters and logits recorded after every step, from the live model.
#[derive(Default)]
struct Steps {
    parameters: StepHistory,
    logits: Vec<u64>,
}

impl Steps {
    fn record(&mut self, service: &TrainAndServe, graph: &Graph) {
        self.parameters.record(service.live()).unwrap();
        self.logits.push(logits(service.live(), graph));
    }
}

/// What a reader saw: the step it was told, its parameters and its logits.
struct Read {
    claimed: u64,
    parameters: Vec<(String, u64)>,
    logits: u64,
    out: Tensor,
}

impl Read {
    fn of(served: &Served, graph: &Graph) -> Self {
        let out = logits_of(&served.model, graph);
        Read {
            claimed: served.step,
            parameters: parameter_fingerprints(&served.model).unwrap(),
            logits: fingerprint(&out).unwrap(),
            out,
        }
    }

    /// Records the read: the step it claimed, the steps its parameters match (none when it
    /// mixes steps), and its logits, in one record (the steps are the same under every
    /// challenge; the logits of the drawn model are not).
    fn observe(&self, s: &Scenario, what: &str, steps: &Steps) {
        s.observe_within(
            format!("{what}: step claimed, steps matched, and logits"),
            &self.seen(steps),
            SAME_LOGITS,
        );
    }

    /// The read as observed: the step it claimed, the steps its parameters match, its logits.
    fn seen<'a>(&'a self, steps: &Steps) -> (Shown<(u64, Vec<u64>)>, &'a Tensor) {
        let tag = steps.parameters.tag(&self.parameters);
        (Shown((self.claimed, tag.steps.clone())), &self.out)
    }

    /// `None` when the read is exactly the step it claims; else what is wrong with it.
    fn problem(&self, steps: &Steps) -> Option<String> {
        let tag: ReadTag = steps.parameters.tag(&self.parameters);
        if tag.mixed() {
            return Some(format!(
                "it mixed two steps, a model that never existed ({tag})"
            ));
        }
        if !tag.steps.contains(&self.claimed) {
            return Some(format!(
                "it said step {} but its parameters are step {}'s",
                self.claimed, tag.steps[0]
            ));
        }
        if steps.logits.get(self.claimed as usize) != Some(&self.logits) {
            return Some(format!("its logits are not step {}'s", self.claimed));
        }
        None
    }
}

#[test]
fn a_read_mid_step_sees_one_whole_step() {
    let s = scenario::start();
    let graph = karate();
    let service = service(&s, &graph);
    let mut steps = Steps::default();
    steps.record(&service, &graph);
    let half = pause_after(&s, &service);

    let (paused, paused_rx) = mpsc::channel::<()>();
    let (resume, resume_rx) = mpsc::channel::<()>();
    let (trained, during) = std::thread::scope(|s| {
        let (service, graph) = (&service, &graph);
        let trainer = s.spawn(move || {
            service.train_step(graph, LR, |k, _| {
                if k + 1 == half {
                    let _ = paused.send(()); // half of the parameters are written
                    let _ = resume_rx.recv();
                }
                Ok(())
            })
        });
        let reader = s.spawn(move || {
            paused_rx.recv().ok()?;
            let read = Read::of(&service.read(), graph); // while the step is paused
            let _ = resume.send(());
            Some(read)
        });
        (trainer.join(), reader.join())
    });
    let step = trained
        .expect("the trainer panicked")
        .unwrap_or_else(|e| panic!("train_step failed: {e}"));
    assert_eq!(step, 1, "the first train_step should return step 1");
    assert_eq!(
        service.steps(),
        1,
        "after one train_step, steps() should count it"
    );
    steps.record(&service, &graph);
    let during = during.expect("the reader panicked").expect(
        "train_step never paused half-way (it must write with set_in_place and after_each)",
    );
    during.observe(&s, "the read while step 1 was half written", &steps);
    let after = Read::of(&service.read(), &graph);
    after.observe(&s, "the read after step 1", &steps);
    if let Some(problem) = during.problem(&steps) {
        panic!("a request served while step 1 was half written was wrong: {problem}");
    }
    assert_eq!(
        during.claimed, 0,
        "while step 1 is half written, requests must still get step 0"
    );
    if let Some(problem) = after.problem(&steps) {
        panic!("a request served after step 1 was wrong: {problem}");
    }
    assert_eq!(
        after.claimed, 1,
        "once step 1 is finished, new requests must get it (publish a snapshot after each step)"
    );
}

#[test]
fn a_request_keeps_the_step_it_started_with() {
    let s = scenario::start();
    let graph = karate();
    let service = service(&s, &graph);
    let mut steps = Steps::default();
    steps.record(&service, &graph);
    let held = service.read(); // a request starts...
    service.train_step(&graph, LR, |_, _| Ok(())).unwrap(); // ...a whole step happens...
    steps.record(&service, &graph);
    let read = Read::of(&held, &graph); // ...and the request runs its forward pass
    read.observe(&s, "the request held over step 1", &steps);
    if let Some(problem) = read.problem(&steps) {
        panic!(
            "a request that started on step {} and ran after step 1 was wrong: {problem}; what it holds must not change under it",
            held.step
        );
    }
    assert_eq!(held.step, 0, "the request started before step 1");
}

/// Sets the flag when dropped, even while unwinding, so readers always stop.
struct SetOnDrop<'a>(&'a AtomicBool);

impl Drop for SetOnDrop<'_> {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Release);
    }
}

#[test]
fn readers_never_see_a_mixed_step_while_training() {
    let s = scenario::start();
    const FREE_READERS: usize = 2;
    const MAX_READS: usize = 2_000;
    let total_steps = s.pick("steps", 5..11) as u64;
    let graph = karate();
    let service = service(&s, &graph);
    let half = pause_after(&s, &service);
    let done = AtomicBool::new(false);

    // One trainer; one probe that reads during every step, half-way through (forced); free
    // readers that read as fast as they can, whenever the scheduler lets them.
    let (paused, paused_rx) = mpsc::channel::<u64>();
    let (resume, resume_rx) = mpsc::channel::<()>();
    let (trained, probe_reads, free_reads) = std::thread::scope(|s| {
        let (service, graph, done) = (&service, &graph, &done);
        let trainer = s.spawn(move || -> Result<Steps> {
            let _stop_readers = SetOnDrop(done);
            let mut steps = Steps::default();
            steps.record(service, graph);
            for step in 1..=total_steps {
                service.train_step(graph, LR, |k, _| {
                    if k + 1 == half {
                        let _ = paused.send(step);
                        let _ = resume_rx.recv();
                    }
                    Ok(())
                })?;
                steps.record(service, graph);
            }
            Ok(steps)
        });
        let probe = s.spawn(move || {
            let mut reads = Vec::new();
            while let Ok(step) = paused_rx.recv() {
                reads.push((step, Read::of(&service.read(), graph)));
                let _ = resume.send(());
            }
            reads
        });
        let free: Vec<_> = (0..FREE_READERS)
            .map(|_| {
                s.spawn(move || {
                    let mut reads = Vec::new();
                    while !done.load(Ordering::Acquire) && reads.len() < MAX_READS {
                        reads.push(Read::of(&service.read(), graph));
                    }
                    reads
                })
            })
            .collect();
        let free_reads: Vec<Read> = free
            .into_iter()
            .flat_map(|h| h.join().expect("a reader panicked"))
            .collect();
        (
            trainer.join(),
            probe.join().expect("the probe reader panicked"),
            free_reads,
        )
    });
    let steps = trained
        .expect("the trainer panicked")
        .unwrap_or_else(|e| panic!("train_step failed: {e}"));
    assert_eq!(
        probe_reads.len() as u64,
        total_steps,
        "every train_step must pause half-way (write with set_in_place and after_each)"
    );
    assert_eq!(
        service.steps(),
        total_steps,
        "after {total_steps} train_steps, steps() should count {total_steps}"
    );

    let mut problems = Vec::new();
    for (step, read) in &probe_reads {
        if let Some(problem) = read.problem(&steps) {
            problems.push(format!("half-way through step {step}, {problem}"));
        }
    }
    let free_problems = free_reads
        .iter()
        .filter(|r| r.problem(&steps).is_some())
        .count();
    // One record: the counts are the same under every challenge, or drawn from a few; the
    // logits each read gave are not.
    s.observe_within(
        "half-way through each step: step claimed, steps matched, and logits; steps() after training; wrong reads by the free readers (any number of reads)",
        &(
            probe_reads
                .iter()
                .map(|(_, read)| read.seen(&steps))
                .collect::<Vec<_>>(),
            service.steps(),
            free_problems,
        ),
        SAME_LOGITS,
    );
    assert!(
        problems.is_empty() && free_problems == 0,
        "{} of {} reads during training were wrong; {}",
        problems.len() + free_problems,
        probe_reads.len() + free_reads.len(),
        problems.first().map_or("(free readers)", String::as_str)
    );
    for (step, read) in &probe_reads {
        assert_eq!(
            read.claimed,
            step - 1,
            "half-way through step {step}, requests must get step {}",
            step - 1
        );
    }
}
