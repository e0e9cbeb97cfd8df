//! Training while serving: why `Send + Sync` is not enough, and immutable snapshots.
//!
//! candle's optimisers update parameters **in place**: a step ends with one `Var::set` per
//! parameter, one after the other (our [`Adam`] does it, and so do candle-nn's `SGD` and
//! `AdamW`). Each `set` holds a write lock on that one tensor, so no single tensor is ever
//! half-written — but nothing spans the loop. A model built on those `Var`s (as
//! [`Model::init`] builds it) is `Send + Sync` and can be served from other threads, and a reader
//! that runs while the optimiser is half-way through a step sees layer 1 after the step and
//! layer 2 before it: a model that never existed. [`torn_read_demo`] pauses a step half-way
//! (channels, no sleeps) and shows exactly that.
//!
//! The fix: serve from an immutable [`Snapshot`] (a deep copy of every parameter, tagged with
//! its step) and, after each optimiser step, swap in a new one atomically ([`SnapshotServer`],
//! an [`arc_swap::ArcSwap`]). A reader takes one `Arc<Snapshot>` per request and keeps it for
//! the whole request, so every answer comes from exactly one step; readers never wait for the
//! trainer, and an old snapshot lives until its last reader drops it. The cost is one copy of
//! the parameters per published step, small for GNNs.
//!
//! [`StepHistory`] records a fingerprint of every parameter after each step, so any read can be
//! *tagged*: which step each parameter came from, and whether one step explains them all.
//!
//! ```
//! use workbook_lessons::threads::snapshot::{Snapshot, SnapshotServer};
//! use workbook::{datasets, Model, ModelConfig};
//! let graph = datasets::karate(&workbook::candle_core::Device::Cpu).unwrap();
//! let config = ModelConfig::gcn(graph.num_features(), 16, graph.num_classes());
//! let (live, _vars) = Model::init(config, 0, graph.device()).unwrap();   // what the optimiser updates
//! let server = SnapshotServer::new(Snapshot::capture(0, &live).unwrap());
//! // ... an optimiser step on `live` ...
//! server.publish(Snapshot::capture(1, &live).unwrap());                   // one atomic swap
//! let (step, out) = server.forward(graph.x(), graph.edge_index(), None).unwrap();
//! assert_eq!(step, 1);
//! assert_eq!(out.logits.dims(), &[34, 4]);
//! ```
//!
//! [`Adam`]: workbook::train::Adam

use arc_swap::ArcSwap;
use candle_core::{Tensor, Var};
use candle_nn::VarMap;
use serde::Serialize;
use std::collections::hash_map::DefaultHasher;
use std::collections::{BTreeSet, HashMap};
use std::fmt;
use std::hash::{Hash, Hasher};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use workbook::edge_index::EdgeIndex;
use workbook::error::{Result, WorkbookError};
use workbook::graph::Graph;
use workbook::model::{Model, ModelConfig, ModelOutput};
use workbook::train::{Adam, Dropout, TrainConfig};

/// An immutable copy of a model's parameters after optimiser step `step`.
#[derive(Clone, Debug)]
pub struct Snapshot {
    step: u64,
    model: Model,
}

impl Snapshot {
    /// Deep-copies every parameter of `model` (new storage, detached from autograd), so later
    /// in-place updates of `model`'s `Var`s cannot reach the snapshot. Call it between optimiser
    /// steps, on the training thread.
    pub fn capture(step: u64, model: &Model) -> Result<Self> {
        // `copy` first: a tensor that *is* a `Var` would otherwise be adopted as the snapshot's
        // parameter, storage and all, and the next optimiser step would write into it.
        let tensors = model
            .named_parameters()
            .into_iter()
            .map(|(name, t)| Ok((name, t.copy()?.detach())))
            .collect::<Result<HashMap<_, _>>>()?;
        Ok(Self {
            step,
            model: Model::from_tensors(model.config().clone(), &tensors, model.placement())?,
        })
    }

    /// The optimiser step these parameters come from (the tag).
    pub fn step(&self) -> u64 {
        self.step
    }

    /// The frozen model.
    pub fn model(&self) -> &Model {
        &self.model
    }
}

/// Serves the latest published [`Snapshot`]; publishing is one atomic pointer swap.
///
/// Meant for one publisher (the training loop) and any number of readers.
#[derive(Debug)]
pub struct SnapshotServer {
    current: ArcSwap<Snapshot>,
}

impl SnapshotServer {
    /// A server answering from `first` until something else is published.
    pub fn new(first: Snapshot) -> Self {
        Self {
            current: ArcSwap::from_pointee(first),
        }
    }

    /// Makes `next` the snapshot new requests see; returns the one it replaced. Requests already
    /// running keep theirs.
    pub fn publish(&self, next: Snapshot) -> Arc<Snapshot> {
        self.current.swap(Arc::new(next))
    }

    /// The current snapshot. Hold on to it for a whole request.
    pub fn current(&self) -> Arc<Snapshot> {
        self.current.load_full()
    }

    /// Answers one request from one snapshot; returns the snapshot's step with the output.
    pub fn forward(
        &self,
        x: &Tensor,
        edge_index: &EdgeIndex,
        edge_weight: Option<&Tensor>,
    ) -> Result<(u64, ModelOutput)> {
        let snapshot = self.current();
        let out = snapshot.model().forward(x, edge_index, edge_weight)?;
        Ok((snapshot.step(), out))
    }
}

/// A fingerprint of a tensor's shape and exact values (a hash of the `f32` bits).
pub fn fingerprint(t: &Tensor) -> Result<u64> {
    let mut h = DefaultHasher::new();
    t.dims().hash(&mut h);
    for v in t.flatten_all()?.to_vec1::<f32>()? {
        v.to_bits().hash(&mut h);
    }
    Ok(h.finish())
}

/// Parameter fingerprints, by name, in the model's order.
pub fn parameter_fingerprints(model: &Model) -> Result<Vec<(String, u64)>> {
    model
        .named_parameters()
        .into_iter()
        .map(|(name, t)| Ok((name, fingerprint(&t)?)))
        .collect()
}

/// The fingerprint of every parameter after each recorded step (step 0: initial values).
#[derive(Clone, Debug, Default)]
pub struct StepHistory {
    steps: Vec<HashMap<String, u64>>,
}

/// Which step(s) each parameter of one read came from.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ReadTag {
    /// Each parameter with the recorded steps its values match (empty: none).
    pub parameters: Vec<(String, Vec<u64>)>,
    /// The steps that explain *every* parameter (several only if a step changed nothing);
    /// empty when the read mixes steps.
    pub steps: Vec<u64>,
}

impl ReadTag {
    /// The earliest step that explains every parameter; `None` when the read mixes steps.
    pub fn step(&self) -> Option<u64> {
        self.steps.first().copied()
    }

    /// Whether the parameters come from different steps (or from no recorded step).
    pub fn mixed(&self) -> bool {
        self.steps.is_empty()
    }
}

impl fmt::Display for ReadTag {
    /// `every parameter from step 0`, or, for a mixed read, runs of consecutive parameters from
    /// the same step: `MIXED: 6 parameter(s) from step 1 (conv1.lin_l.weight .. conv1.bias), ...`.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(step) = self.step() {
            return write!(f, "every parameter from step {step}");
        }
        let mut runs: Vec<(&[u64], &str, &str, usize)> = Vec::new();
        for (name, steps) in &self.parameters {
            match runs.last_mut() {
                Some((s, _, last, n)) if *s == steps.as_slice() => {
                    *last = name;
                    *n += 1;
                }
                _ => runs.push((steps, name, name, 1)),
            }
        }
        let parts: Vec<String> = runs
            .into_iter()
            .map(|(steps, first, last, n)| {
                let from = match steps {
                    [] => "no recorded step".to_string(),
                    [s] => format!("step {s}"),
                    many => format!("steps {many:?}"),
                };
                let names = if n == 1 {
                    first.to_string()
                } else {
                    format!("{first} .. {last}")
                };
                format!("{n} parameter(s) from {from} ({names})")
            })
            .collect();
        write!(f, "MIXED: {}", parts.join(", "))
    }
}

impl StepHistory {
    /// Records `model`'s current parameters as the next step and returns its number.
    pub fn record(&mut self, model: &Model) -> Result<u64> {
        self.record_fingerprints(parameter_fingerprints(model)?)
    }

    /// Records already computed fingerprints as the next step and returns its number.
    pub fn record_fingerprints(&mut self, fingerprints: Vec<(String, u64)>) -> Result<u64> {
        self.steps.push(fingerprints.into_iter().collect());
        Ok(self.steps.len() as u64 - 1)
    }

    /// Number of recorded steps.
    pub fn len(&self) -> usize {
        self.steps.len()
    }

    /// Whether nothing was recorded yet.
    pub fn is_empty(&self) -> bool {
        self.steps.is_empty()
    }

    /// Tags a read: for each parameter, the recorded steps whose values it matches.
    pub fn tag(&self, read: &[(String, u64)]) -> ReadTag {
        let mut common: Option<BTreeSet<u64>> = None;
        let parameters = read
            .iter()
            .map(|(name, fp)| {
                let steps: Vec<u64> = (0..self.steps.len() as u64)
                    .filter(|&s| self.steps[s as usize].get(name) == Some(fp))
                    .collect();
                let set: BTreeSet<u64> = steps.iter().copied().collect();
                common = Some(match common.take() {
                    None => set,
                    Some(c) => c.intersection(&set).copied().collect(),
                });
                (name.clone(), steps)
            })
            .collect();
        ReadTag {
            parameters,
            steps: common.map_or_else(Vec::new, |c| c.into_iter().collect()),
        }
    }
}

/// The model's `Var`s in [`Model::named_parameters`] order, taken from the `VarMap` that
/// [`Model::init`] returned with it.
pub fn model_vars(model: &Model, vars: &VarMap) -> Result<Vec<(String, Var)>> {
    let map = vars
        .data()
        .lock()
        .map_err(|_| WorkbookError::Thread("the VarMap's lock is poisoned".into()))?;
    model
        .named_parameters()
        .into_iter()
        .map(|(name, _)| match map.get(&name) {
            Some(v) => Ok((name, v.clone())),
            None => Err(WorkbookError::InvalidConfig(format!(
                "parameter '{name}' is not in the VarMap (build the model with Model::init)"
            ))),
        })
        .collect()
}

/// Writes `values` into `vars` in place, one `Var::set` per parameter — the loop every candle
/// optimiser ends with — calling `after_each(k, name)` after parameter `k` is written. The
/// callback is where [`torn_read_demo`] pauses the step.
pub fn set_in_place(
    vars: &[(String, Var)],
    values: &[Tensor],
    mut after_each: impl FnMut(usize, &str) -> Result<()>,
) -> Result<()> {
    if vars.len() != values.len() {
        return Err(WorkbookError::InvalidConfig(format!(
            "{} parameters but {} new values",
            vars.len(),
            values.len()
        )));
    }
    for (k, ((name, var), value)) in vars.iter().zip(values).enumerate() {
        var.set(value)?;
        after_each(k, name)?;
    }
    Ok(())
}

/// Cross-entropy on the training nodes (evaluation-mode forward pass).
fn training_loss(model: &Model, graph: &Graph, dropout: Option<&mut Dropout>) -> Result<Tensor> {
    let (Some(y), Some(split)) = (graph.y(), graph.split()) else {
        return Err(WorkbookError::InvalidGraph(format!(
            "graph '{}' has no labels or split; training needs y and train/val/test masks",
            graph.name
        )));
    };
    let out = model.forward_t(graph.x(), graph.edge_index(), graph.edge_weight(), dropout)?;
    Ok(candle_nn::loss::cross_entropy(
        &out.logits.index_select(&split.train, 0)?,
        &y.index_select(&split.train, 0)?,
    )?)
}

fn logits_fingerprint(model: &Model, graph: &Graph) -> Result<u64> {
    fingerprint(
        &model
            .forward(graph.x(), graph.edge_index(), graph.edge_weight())?
            .logits,
    )
}

/// The steps (indices) whose fingerprint is `fp`.
fn steps_matching(by_step: &[u64], fp: u64) -> Vec<u64> {
    (0..by_step.len() as u64)
        .filter(|&s| by_step[s as usize] == fp)
        .collect()
}

/// What one reader saw.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ReadOutcome {
    /// Who read and when.
    pub reader: String,
    /// The step the snapshot said it was (`None` for the live model, which has no tag).
    pub claimed_step: Option<u64>,
    /// Which step each parameter actually came from.
    pub tag: ReadTag,
    /// The steps whose model gives exactly these logits (empty: no step does).
    pub logits_steps: Vec<u64>,
}

impl ReadOutcome {
    /// One step explains every parameter and the logits, and it is the step claimed (if any).
    pub fn consistent(&self) -> bool {
        match self.claimed_step {
            Some(c) => self.tag.steps.contains(&c) && self.logits_steps.contains(&c),
            None => self.tag.steps.iter().any(|s| self.logits_steps.contains(s)),
        }
    }
}

/// The deterministic torn-read demonstration: one gradient step paused half-way.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct TornReadDemo {
    /// Parameters, in update order.
    pub parameters: Vec<String>,
    /// How many of them the step had written when it paused.
    pub written_before_pause: usize,
    /// A reader using the live model (the optimiser's `Var`s) during the pause.
    pub live: ReadOutcome,
    /// A reader using the snapshot server during the pause.
    pub snapshot: ReadOutcome,
    /// A reader using the snapshot server after the step was published.
    pub snapshot_after: ReadOutcome,
}

impl TornReadDemo {
    /// The live reader saw parameters from two steps.
    pub fn hazard_shown(&self) -> bool {
        self.live.tag.mixed()
    }

    /// The snapshot readers saw exactly step 0 during the pause and step 1 after it.
    pub fn snapshots_consistent(&self) -> bool {
        self.snapshot.consistent()
            && self.snapshot.claimed_step == Some(0)
            && self.snapshot_after.consistent()
            && self.snapshot_after.claimed_step == Some(1)
    }
}

impl fmt::Display for TornReadDemo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let written = &self.parameters[..self.written_before_pause.min(self.parameters.len())];
        let written = match written {
            [] => String::new(),
            [one] => format!(" ({one})"),
            [first, .., last] => format!(" ({first} .. {last})"),
        };
        writeln!(
            f,
            "training while serving: an optimiser step writes {} parameters in place, one by one; paused after {}{written}",
            self.parameters.len(),
            self.written_before_pause,
        )?;
        for read in [&self.live, &self.snapshot, &self.snapshot_after] {
            let logits = match read.logits_steps.first() {
                Some(s) => format!("logits = step {s}'s exactly"),
                None => "logits match no step: a model that never existed".into(),
            };
            writeln!(f, "  {}: {}; {logits}", read.reader, read.tag)?;
        }
        let verdict = match (self.hazard_shown(), self.snapshots_consistent()) {
            (true, true) => "the live model served a mix of two steps; snapshots never did",
            (false, true) => "the live read happened not to mix steps (unexpected)",
            (_, false) => "a snapshot read was inconsistent (a bug)",
        };
        write!(f, "  outcome: {verdict}")
    }
}

/// Pauses one gradient step (`θ ← θ − lr·∇θ`, written with [`set_in_place`]) after half of the
/// parameters, lets a reader run a forward pass on the live model and one on a
/// [`SnapshotServer`], then finishes the step, publishes it, and reads once more. Deterministic:
/// the interleaving is forced with channels. `graph` needs labels and a split.
pub fn torn_read_demo(
    graph: &Graph,
    config: ModelConfig,
    seed: u64,
    lr: f64,
) -> Result<TornReadDemo> {
    let (live, varmap) = Model::init(config, seed, graph.placement())?;
    let vars = model_vars(&live, &varmap)?;
    let mut history = StepHistory::default();
    history.record(&live)?;
    let mut logits_by_step = vec![logits_fingerprint(&live, graph)?];
    let server = SnapshotServer::new(Snapshot::capture(0, &live)?);

    let grads = training_loss(&live, graph, None)?.backward()?;
    let new_values = vars
        .iter()
        .map(|(_, var)| {
            let theta = var.as_tensor();
            Ok(match grads.get(theta) {
                Some(g) => (theta - (g * lr)?)?.detach(),
                None => theta.copy()?.detach(),
            })
        })
        .collect::<Result<Vec<_>>>()?;
    let names: Vec<String> = vars.iter().map(|(n, _)| n.clone()).collect();
    let pause_after = (vars.len() / 2).max(1);

    let (paused, paused_rx) = mpsc::channel::<()>();
    let (resume, resume_rx) = mpsc::channel::<()>();
    let (published, published_rx) = mpsc::channel::<()>();
    let lost = |who: &str| WorkbookError::Thread(format!("torn-read demo: the {who} stopped"));
    let (live_ref, server_ref) = (&live, &server);
    let read = |reader: &str, model: &Model, claimed_step: Option<u64>| -> Result<_> {
        Ok((
            reader.to_string(),
            claimed_step,
            parameter_fingerprints(model)?,
            logits_fingerprint(model, graph)?,
        ))
    };
    let (trained, reads) = std::thread::scope(|s| {
        let trainer = s.spawn(move || -> Result<()> {
            set_in_place(&vars, &new_values, |k, _| {
                if k + 1 == pause_after {
                    let _ = paused.send(()); // a gone peer reports its own error
                    resume_rx.recv().map_err(|_| lost("reader"))?;
                }
                Ok(())
            })?;
            server_ref.publish(Snapshot::capture(1, live_ref)?);
            let _ = published.send(());
            Ok(())
        });
        let reader = s.spawn(move || -> Result<Vec<_>> {
            paused_rx.recv().map_err(|_| lost("trainer"))?;
            let live_read = read(
                "live model (the optimiser's Vars), mid-step",
                live_ref,
                None,
            );
            let snap = server_ref.current();
            let snap_read = read("snapshot server, mid-step", snap.model(), Some(snap.step()));
            let _ = resume.send(());
            let (live_read, snap_read) = (live_read?, snap_read?);
            published_rx.recv().map_err(|_| lost("trainer"))?;
            let snap = server_ref.current();
            let after = read(
                "snapshot server, after publish",
                snap.model(),
                Some(snap.step()),
            )?;
            Ok(vec![live_read, snap_read, after])
        });
        let trained = trainer
            .join()
            .map_err(|_| WorkbookError::Thread("torn-read demo: the trainer panicked".into()));
        let reads = reader
            .join()
            .map_err(|_| WorkbookError::Thread("torn-read demo: the reader panicked".into()));
        (trained, reads)
    });
    trained??;
    history.record(&live)?;
    logits_by_step.push(logits_fingerprint(&live, graph)?);
    let mut outcomes = reads??
        .into_iter()
        .map(|(reader, claimed_step, params, logits)| ReadOutcome {
            reader,
            claimed_step,
            tag: history.tag(&params),
            logits_steps: steps_matching(&logits_by_step, logits),
        });
    let mut next = || {
        outcomes
            .next()
            .ok_or_else(|| WorkbookError::Thread("torn-read demo: a read is missing".into()))
    };
    Ok(TornReadDemo {
        parameters: names,
        written_before_pause: pause_after,
        live: next()?,
        snapshot: next()?,
        snapshot_after: next()?,
    })
}

/// The outcome of [`serve_while_training`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ServeWhileTraining {
    /// Optimiser steps taken (Adam).
    pub steps: u64,
    pub readers: usize,
    /// Requests answered from snapshots while (and just after) training ran.
    pub reads: usize,
    /// Reads whose parameters came from more than one step, or from none (must be 0).
    pub mixed_reads: usize,
    /// Reads whose snapshot tag, parameters and logits do not all name the same step (must be 0).
    pub inconsistent_reads: usize,
    /// The distinct steps readers were served, ascending.
    pub steps_seen: Vec<u64>,
}

impl fmt::Display for ServeWhileTraining {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} Adam steps while {} readers answered {} requests from snapshots: {} mixed, {} inconsistent; {} distinct steps served",
            self.steps,
            self.readers,
            self.reads,
            self.mixed_reads,
            self.inconsistent_reads,
            self.steps_seen.len()
        )
    }
}

/// Sets a flag when dropped, even while unwinding from a panic, so readers always stop.
struct SetOnDrop<'a>(&'a AtomicBool);

impl Drop for SetOnDrop<'_> {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Release);
    }
}

/// Most reads one reader makes in [`serve_while_training`], whatever the trainer does.
const MAX_READS_PER_READER: usize = 100_000;

/// Free-running training and serving: one thread takes `train.epochs` real Adam steps on the live
/// model and publishes a [`Snapshot`] after each; `readers` threads answer requests on `graph`
/// from the [`SnapshotServer`] until training is over (at least `min_reads` each). Afterwards,
/// every read is tagged against the recorded history: its parameters must all come from the step
/// the snapshot claims, and its logits must be that step's. No timing is assumed: whatever the
/// scheduler does, a correct server has zero mixed or inconsistent reads.
pub fn serve_while_training(
    graph: &Graph,
    config: ModelConfig,
    train: &TrainConfig,
    readers: usize,
    min_reads: usize,
) -> Result<ServeWhileTraining> {
    if readers == 0 || train.epochs == 0 {
        return Err(WorkbookError::InvalidConfig(
            "serve_while_training needs at least 1 reader and 1 step".into(),
        ));
    }
    workbook::limits::check_threads("readers", readers)?;
    workbook::limits::check_count("training steps", train.epochs, 1)?;
    workbook::limits::check_count("reads per reader", min_reads, 0)?;
    let (live, varmap) = Model::init(config, train.seed, graph.placement())?;
    let vars = model_vars(&live, &varmap)?;
    let params = vars
        .iter()
        .map(|(name, var)| (name.clone(), var.clone(), train.weight_decay))
        .collect();
    let mut opt = Adam::new(params, train.lr)?;
    let mut dropout = Dropout::new(train.seed.wrapping_add(1), graph.device());
    let mut history = StepHistory::default();
    history.record(&live)?;
    let mut logits_by_step = vec![logits_fingerprint(&live, graph)?];
    let server = SnapshotServer::new(Snapshot::capture(0, &live)?);
    let done = AtomicBool::new(false);
    let steps = train.epochs as u64;

    type Read = (u64, Vec<(String, u64)>, u64);
    let (trained, reads) = std::thread::scope(|s| {
        let (server, done, live) = (&server, &done, &live);
        let history = &mut history;
        let logits_by_step = &mut logits_by_step;
        let trainer = s.spawn(move || -> Result<()> {
            let _stop_readers = SetOnDrop(done);
            for step in 1..=steps {
                opt.backward_step(&training_loss(live, graph, Some(&mut dropout))?)?;
                history.record(live)?;
                logits_by_step.push(logits_fingerprint(live, graph)?);
                server.publish(Snapshot::capture(step, live)?);
            }
            Ok(())
        });
        let readers: Vec<_> = (0..readers)
            .map(|_| {
                s.spawn(move || -> Result<Vec<Read>> {
                    let mut reads = Vec::new();
                    loop {
                        // Seen before the read: once training is over, one more read is
                        // guaranteed to get the final step.
                        let training_over = done.load(Ordering::Acquire);
                        let snap = server.current();
                        let logits = logits_fingerprint(snap.model(), graph)?;
                        reads.push((snap.step(), parameter_fingerprints(snap.model())?, logits));
                        if (training_over && reads.len() >= min_reads)
                            || reads.len() >= MAX_READS_PER_READER
                        {
                            return Ok(reads);
                        }
                    }
                })
            })
            .collect();
        let trained = trainer
            .join()
            .map_err(|_| WorkbookError::Thread("the trainer panicked".into()));
        let reads: Vec<Result<Vec<Read>>> = readers
            .into_iter()
            .map(|h| {
                h.join()
                    .map_err(|_| WorkbookError::Thread("a reader panicked".into()))?
            })
            .collect();
        (trained, reads)
    });
    trained??;
    let mut report = ServeWhileTraining {
        steps,
        readers,
        reads: 0,
        mixed_reads: 0,
        inconsistent_reads: 0,
        steps_seen: Vec::new(),
    };
    let mut seen = BTreeSet::new();
    for reader in reads {
        for (claimed, params, logits) in reader? {
            let tag = history.tag(&params);
            let outcome = ReadOutcome {
                reader: String::new(),
                claimed_step: Some(claimed),
                logits_steps: steps_matching(&logits_by_step, logits),
                tag,
            };
            report.reads += 1;
            report.mixed_reads += usize::from(outcome.tag.mixed());
            report.inconsistent_reads += usize::from(!outcome.consistent());
            seen.insert(claimed);
        }
    }
    report.steps_seen = seen.into_iter().collect();
    Ok(report)
}
