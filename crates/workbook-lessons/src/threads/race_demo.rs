//! The PyG `_alpha` race (issue 8741), made to happen on purpose, every time, with both of its
//! symptoms.
//!
//! Two threads, A and B, share one GATv2 layer and each asks for the attention on its own graph.
//! PyG's `GATv2Conv` before 2.5 split every forward pass into a **write** (`message()` stores the
//! attention in `self._alpha`) and a **read** (`forward()` reads it, asserts it is not `None` and
//! clears it). Real races depend on timing; here channels force the two losing orders:
//!
//! - [`Schedule::AReadsFirst`]: A writes, B writes (over A's), A reads, B reads. A silently gets
//!   B's attention and clears the slot; B finds it empty and fails the assertion.
//! - [`Schedule::BReadsFirst`]: A writes, B writes, B reads, A reads. B gets its own attention
//!   (B's write was the last one); A finds the slot empty and fails.
//!
//! With the anti-pattern [`StatefulGatV2`] that is what happens, every time; its failed assertion
//! is an error value ([`WorkbookError::SharedStateRace`]) recorded in the thread's outcome, as
//! PyG's `AssertionError` was, not a panic that would end the demo. With the stateless
//! [`GatV2Conv`] the attention came back *with* each forward pass ("write" is the forward pass,
//! "read" just looks at its own result), so both threads get their own, in both orders.
//!
//! Each answer is identified by comparing it, bit for bit, with the attention computed
//! sequentially for each request; [`RaceReport`] says what each thread asked for and what it got.
//!
//! ```
//! use workbook_lessons::threads::{race_demo, serving::Request};
//! use workbook::candle_core::{DType, Device, Tensor};
//! use workbook::candle_nn::{VarBuilder, VarMap};
//! use workbook::{EdgeIndex, GatV2Config, GatV2Conv};
//! let dev = Device::Cpu;
//! let varmap = VarMap::new();
//! let conv = GatV2Conv::new(GatV2Config::new(4, 3).heads(2), VarBuilder::from_varmap(&varmap, DType::F32, &dev)).unwrap();
//! let x = Tensor::randn(0f32, 1.0, (4, 4), &dev).unwrap();
//! let request = |name: &str, src: &[i64], dst: &[i64]| Request {
//!     name: name.into(), x: x.clone(), edge_index: EdgeIndex::new(src, dst, 4, &dev).unwrap(), nodes: None,
//! };
//! let demo = race_demo::run(&conv, &request("path", &[0, 1, 2], &[1, 2, 3]), &request("star", &[1, 2, 3], &[0, 0, 0])).unwrap();
//! assert!(demo.a_reads_first.stateful.wrong_attention());   // thread A got B's attention
//! assert!(demo.a_reads_first.stateful.assertion_failed());  // and B found the slot empty
//! assert!(demo.b_reads_first.stateful.assertion_failed());  // here A did
//! assert!(demo.stateless_always_correct());                 // everyone got their own
//! println!("{demo}");
//! ```

use super::serving::{same_attention, Request};
use super::stateful_gatv2::StatefulGatV2;
use serde::Serialize;
use std::fmt;
use std::sync::mpsc::{self, Receiver, Sender};
use workbook::error::{Result, WorkbookError};
use workbook::layers::{Attention, GatV2Conv, GatV2Output};

/// The order in which the two threads' writes and reads run. Both orders start "A writes, B
/// writes": the write that lands between another thread's write and read is the race.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum Schedule {
    /// A writes, B writes, A reads, B reads.
    AReadsFirst,
    /// A writes, B writes, B reads, A reads.
    BReadsFirst,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Who {
    A,
    B,
}

impl Schedule {
    /// Both orders, as [`run`] runs them.
    pub const ALL: [Schedule; 2] = [Schedule::AReadsFirst, Schedule::BReadsFirst];

    /// Whose step comes next: each thread's first step is its write, its second its read.
    fn steps(self) -> [Who; 4] {
        match self {
            Schedule::AReadsFirst => [Who::A, Who::B, Who::A, Who::B],
            Schedule::BReadsFirst => [Who::A, Who::B, Who::B, Who::A],
        }
    }
}

impl fmt::Display for Schedule {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Schedule::AReadsFirst => "A writes, B writes, A reads, B reads",
            Schedule::BReadsFirst => "A writes, B writes, B reads, A reads",
        })
    }
}

/// What one thread asked for and what it got.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ThreadOutcome {
    /// `A` or `B`.
    pub thread: String,
    /// The name of the request the thread ran.
    pub asked_for: String,
    /// The request whose attention the thread received (`None`: none, or one matching no
    /// request).
    pub got: Option<String>,
    /// Number of edges (after self-loops) in the attention it received.
    pub edges_received: Option<usize>,
    /// The error its read returned instead of attention: the anti-pattern's failed
    /// `assert alpha is not None` (PyG's `AssertionError`).
    pub error: Option<String>,
}

impl ThreadOutcome {
    /// Whether the thread received the attention of its own request.
    pub fn correct(&self) -> bool {
        self.error.is_none() && self.got.as_deref() == Some(self.asked_for.as_str())
    }

    /// Whether the thread received attention, without an error, that is not its own: the
    /// silent symptom.
    pub fn wrong_attention(&self) -> bool {
        self.error.is_none() && self.edges_received.is_some() && !self.correct()
    }
}

/// One variant of the layer run through one interleaving.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct RaceReport {
    /// `StatefulGatV2` (the anti-pattern) or `GatV2Conv` (stateless).
    pub variant: String,
    pub outcomes: Vec<ThreadOutcome>,
}

impl RaceReport {
    /// Whether some thread did not receive its own attention (wrong, or none at all).
    pub fn race_detected(&self) -> bool {
        self.outcomes.iter().any(|o| !o.correct())
    }

    /// Whether some thread silently received another thread's attention.
    pub fn wrong_attention(&self) -> bool {
        self.outcomes.iter().any(ThreadOutcome::wrong_attention)
    }

    /// Whether some thread's read failed (PyG's `AssertionError`).
    pub fn assertion_failed(&self) -> bool {
        self.outcomes.iter().any(|o| o.error.is_some())
    }
}

/// Both variants under one interleaving.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Interleaving {
    pub schedule: Schedule,
    /// The anti-pattern: attention passed through shared state. Always shows the race.
    pub stateful: RaceReport,
    /// The fix: attention returned by `forward`. Never does.
    pub stateless: RaceReport,
}

/// Both interleavings.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct RaceDemo {
    /// A writes, B writes, A reads, B reads: A silently gets B's attention, B fails.
    pub a_reads_first: Interleaving,
    /// A writes, B writes, B reads, A reads: B gets its own, A fails.
    pub b_reads_first: Interleaving,
}

impl RaceDemo {
    /// The two interleavings, in [`Schedule::ALL`] order.
    pub fn interleavings(&self) -> [&Interleaving; 2] {
        [&self.a_reads_first, &self.b_reads_first]
    }

    /// Whether the anti-pattern showed both symptoms: a thread silently given another thread's
    /// attention, and a thread whose assertion failed.
    pub fn anti_pattern_shows_both_symptoms(&self) -> bool {
        let all = self.interleavings();
        all.iter().any(|i| i.stateful.wrong_attention())
            && all.iter().any(|i| i.stateful.assertion_failed())
    }

    /// Whether the stateless layer gave every thread its own attention in every interleaving.
    pub fn stateless_always_correct(&self) -> bool {
        self.interleavings()
            .iter()
            .all(|i| !i.stateless.race_detected())
    }
}

impl fmt::Display for ThreadOutcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let got = match (&self.got, self.edges_received) {
            (Some(name), Some(e)) => format!("the attention of '{name}' ({e} edges)"),
            (None, Some(e)) => format!("attention matching no request ({e} edges)"),
            _ => "no attention".to_string(),
        };
        let verdict = if self.error.is_some() {
            "FAILED: assert alpha is not None (PyG: AssertionError)"
        } else if self.correct() {
            "ok"
        } else {
            "WRONG, silently: another thread's attention"
        };
        write!(
            f,
            "thread {} asked for '{}' and got {got}: {verdict}",
            self.thread, self.asked_for
        )
    }
}

impl fmt::Display for RaceDemo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "race demo: threads A and B share one GATv2 layer; each forward pass writes its attention, then reads it back"
        )?;
        for interleaving in self.interleavings() {
            writeln!(f, "  {}:", interleaving.schedule)?;
            for (report, what) in [
                (
                    &interleaving.stateful,
                    "the anti-pattern: message() writes self._alpha, forward() reads, asserts and clears it, like PyG before 2.5 (issue 8741)",
                ),
                (
                    &interleaving.stateless,
                    "stateless: attention returned by forward",
                ),
            ] {
                writeln!(f, "    {}, {what}:", report.variant)?;
                for o in &report.outcomes {
                    writeln!(f, "      {o}")?;
                }
            }
        }
        let verdict = if !self.stateless_always_correct() {
            "the stateless layer returned wrong attention (a bug)"
        } else if self.anti_pattern_shows_both_symptoms() {
            "the anti-pattern handed a thread another thread's attention and failed another thread's assertion; the stateless layer gave every thread its own, in both orders"
        } else {
            "the anti-pattern did not show both symptoms (unexpected: the two requests may have identical attention)"
        };
        write!(f, "  outcome: {verdict}")
    }
}

/// A layer variant as the interleaving sees it: the write half of a forward pass, which yields
/// a ticket, and the read half, which turns the ticket into attention.
trait AttentionLayer: Sync {
    type Ticket: Send;
    const NAME: &'static str;
    fn write(&self, request: &Request) -> Result<Self::Ticket>;
    fn read(&self, ticket: Self::Ticket) -> Result<Attention>;
}

impl AttentionLayer for StatefulGatV2 {
    /// Nothing: the attention went into the module (PyG: `message()` sets `self._alpha`).
    type Ticket = ();
    const NAME: &'static str = "StatefulGatV2";
    fn write(&self, request: &Request) -> Result<()> {
        self.propagate(&request.x, &request.edge_index).map(drop)
    }
    /// PyG: `alpha = self._alpha; assert alpha is not None; self._alpha = None`, whoever wrote
    /// it last.
    fn read(&self, _: ()) -> Result<Attention> {
        self.take_alpha()
    }
}

impl AttentionLayer for GatV2Conv {
    /// The whole output, attention included.
    type Ticket = GatV2Output;
    const NAME: &'static str = "GatV2Conv";
    fn write(&self, request: &Request) -> Result<GatV2Output> {
        self.forward(&request.x, &request.edge_index)
    }
    fn read(&self, ticket: GatV2Output) -> Result<Attention> {
        Ok(ticket.attention)
    }
}

/// Runs both interleavings with `conv` as the anti-pattern and as the stateless layer. `a` and
/// `b` must have different attention (e.g. different edges), or the demo cannot tell whose
/// attention a thread received.
pub fn run(conv: &GatV2Conv, a: &Request, b: &Request) -> Result<RaceDemo> {
    Ok(RaceDemo {
        a_reads_first: run_schedule(conv, a, b, Schedule::AReadsFirst)?,
        b_reads_first: run_schedule(conv, a, b, Schedule::BReadsFirst)?,
    })
}

/// Runs one interleaving with `conv` as the anti-pattern (a fresh one, its slot empty) and as
/// the stateless layer.
pub fn run_schedule(
    conv: &GatV2Conv,
    a: &Request,
    b: &Request,
    schedule: Schedule,
) -> Result<Interleaving> {
    let expected = [
        (a.name.clone(), conv.forward(&a.x, &a.edge_index)?.attention),
        (b.name.clone(), conv.forward(&b.x, &b.edge_index)?.attention),
    ];
    if a.name == b.name || same_attention(&expected[0].1, &expected[1].1)? {
        return Err(WorkbookError::InvalidConfig(format!(
            "the race demo needs two requests with different names and different attention ('{}' and '{}')",
            a.name, b.name
        )));
    }
    let stateful = StatefulGatV2::new(conv.clone());
    Ok(Interleaving {
        schedule,
        stateful: interleave(&stateful, a, b, schedule, &expected)?,
        stateless: interleave(conv, a, b, schedule, &expected)?,
    })
}

/// Why a demo thread stopped without an outcome: its own error, or its peer's disappearance
/// (which is only ever a consequence of the peer's own error or panic).
enum Stop {
    Failed(WorkbookError),
    LostPeer(WorkbookError),
}

/// What a demo thread ends with: its read (attention, or the anti-pattern's failed assertion),
/// or why it stopped without one.
type Played = std::result::Result<Result<Attention>, Stop>;

/// One thread's part of the schedule: its write, then its read, each when its turn comes. The
/// thread waits on `my_turn` when the previous step was the peer's, and signals `peer` when the
/// next step is the peer's. Each sender moves into its thread, so a thread that fails or panics
/// drops it and its peer gets an error instead of waiting forever.
fn play<L: AttentionLayer>(
    layer: &L,
    request: &Request,
    me: Who,
    schedule: Schedule,
    my_turn: Receiver<()>,
    peer: Sender<()>,
) -> Played {
    let steps = schedule.steps();
    let mut ticket = None;
    let mut read = None;
    for (k, &who) in steps.iter().enumerate() {
        if who != me {
            continue;
        }
        if k > 0 && steps[k - 1] != me {
            my_turn.recv().map_err(|_| {
                Stop::LostPeer(WorkbookError::Thread(format!(
                    "race demo: the peer of thread {me:?} stopped before its step"
                )))
            })?;
        }
        match ticket.take() {
            None => ticket = Some(layer.write(request).map_err(Stop::Failed)?),
            Some(t) => read = Some(layer.read(t)),
        }
        if steps.get(k + 1).is_some_and(|&next| next != me) {
            let _ = peer.send(()); // if the peer is gone, it reports why
        }
    }
    read.ok_or_else(|| {
        Stop::Failed(WorkbookError::Thread(format!(
            "race demo: thread {me:?} has no read step in {schedule}"
        )))
    })
}

/// Runs `schedule` with two threads, enforced with two channels, and identifies what each read.
fn interleave<L: AttentionLayer>(
    layer: &L,
    a: &Request,
    b: &Request,
    schedule: Schedule,
    expected: &[(String, Attention)],
) -> Result<RaceReport> {
    let (to_a, a_turn) = mpsc::channel::<()>();
    let (to_b, b_turn) = mpsc::channel::<()>();
    let (got_a, got_b) = std::thread::scope(|s| {
        let thread_a = s.spawn(move || play(layer, a, Who::A, schedule, a_turn, to_b));
        let thread_b = s.spawn(move || play(layer, b, Who::B, schedule, b_turn, to_a));
        let join = |h: std::thread::ScopedJoinHandle<'_, Played>, t: &str| -> Played {
            h.join().unwrap_or_else(|_| {
                Err(Stop::Failed(WorkbookError::Thread(format!(
                    "race demo: thread {t} panicked"
                ))))
            })
        };
        (join(thread_a, "A"), join(thread_b, "B"))
    });
    // Report the root cause: a thread's own failure before its peer's "lost my peer".
    let (got_a, got_b) = match (got_a, got_b) {
        (Ok(a), Ok(b)) => (a, b),
        (Err(Stop::Failed(e)), _) | (_, Err(Stop::Failed(e))) => return Err(e),
        (Err(Stop::LostPeer(e)), _) | (_, Err(Stop::LostPeer(e))) => return Err(e),
    };
    let outcome =
        |thread: &str, request: &Request, read: Result<Attention>| -> Result<ThreadOutcome> {
            let (got, error) = match read {
                Ok(att) => (Some(att), None),
                // The race's second symptom is an outcome to report, not a failure of the demo.
                Err(WorkbookError::SharedStateRace(msg)) => (None, Some(msg)),
                Err(e) => return Err(e),
            };
            let mut owner = None;
            if let Some(att) = &got {
                for (name, want) in expected {
                    if same_attention(att, want)? {
                        owner = Some(name.clone());
                    }
                }
            }
            Ok(ThreadOutcome {
                thread: thread.into(),
                asked_for: request.name.clone(),
                got: owner,
                edges_received: got.map(|att| att.edge_index.num_edges()),
                error,
            })
        };
    Ok(RaceReport {
        variant: L::NAME.into(),
        outcomes: vec![outcome("A", a, got_a)?, outcome("B", b, got_b)?],
    })
}
