//! The PyG `_alpha` race (issue 8741), made to happen on purpose, every time.
//!
//! Two threads, A and B, share one GATv2 layer and each asks for the attention on its own graph.
//! Real races depend on timing; here channels force the losing interleaving:
//!
//! 1. A runs its forward pass, then tells B it is done;
//! 2. B runs its forward pass, then tells A it is done;
//! 3. each thread reads "its" attention.
//!
//! With the anti-pattern [`StatefulGatV2`] (attention kept in the module, like PyG's
//! `self._alpha`), step 2 overwrites A's attention, so A reads B's. With the stateless
//! [`GatV2Conv`] the attention came back *with* each forward pass, so there is nothing to
//! overwrite and both threads get their own — under exactly the same interleaving.
//!
//! Each answer is identified by comparing it, bit for bit, with the attention computed
//! sequentially for each request; [`RaceReport`] says what each thread asked for and what it got.
//!
//! ```
//! use workbook::threads::{race_demo, serving::Request};
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
//! assert!(demo.stateful.race_detected());    // thread A got B's attention
//! assert!(!demo.stateless.race_detected());  // everyone got their own
//! println!("{demo}");
//! ```

use super::serving::{same_attention, Request};
use super::stateful_gatv2::StatefulGatV2;
use crate::error::{Result, WorkbookError};
use crate::layers::{Attention, GatV2Conv, GatV2Output};
use serde::Serialize;
use std::fmt;
use std::sync::mpsc;

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
}

impl ThreadOutcome {
    /// Whether the thread received the attention of its own request.
    pub fn correct(&self) -> bool {
        self.got.as_deref() == Some(self.asked_for.as_str())
    }
}

/// One variant of the layer run through the interleaving.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct RaceReport {
    /// `StatefulGatV2` (the anti-pattern) or `GatV2Conv` (stateless).
    pub variant: String,
    pub outcomes: Vec<ThreadOutcome>,
}

impl RaceReport {
    /// Whether some thread received attention that is not its own.
    pub fn race_detected(&self) -> bool {
        self.outcomes.iter().any(|o| !o.correct())
    }
}

/// Both variants under the same interleaving.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct RaceDemo {
    /// The anti-pattern: attention in shared state. Always shows the race.
    pub stateful: RaceReport,
    /// The fix: attention returned by `forward`. Never does.
    pub stateless: RaceReport,
}

impl fmt::Display for ThreadOutcome {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let got = match (&self.got, self.edges_received) {
            (Some(name), Some(e)) => format!("the attention of '{name}' ({e} edges)"),
            (None, Some(e)) => format!("attention matching no request ({e} edges)"),
            _ => "no attention at all".to_string(),
        };
        let verdict = if self.correct() {
            "ok"
        } else {
            "WRONG: another thread's attention"
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
            "race demo: threads A and B share one GATv2 layer; A runs forward, then B runs forward, then both read their attention"
        )?;
        for (report, what) in [
            (
                &self.stateful,
                "the anti-pattern: attention kept in the module, like PyG's self._alpha before 2.5 (issue 8741)",
            ),
            (&self.stateless, "stateless: attention returned by forward"),
        ] {
            writeln!(f, "  {}, {what}:", report.variant)?;
            for o in &report.outcomes {
                writeln!(f, "    {o}")?;
            }
        }
        let verdict = match (self.stateful.race_detected(), self.stateless.race_detected()) {
            (true, false) => "the anti-pattern handed a thread another thread's attention; the stateless layer did not",
            (false, false) => "no race observed (unexpected: the two requests may have identical attention)",
            (_, true) => "the stateless layer returned wrong attention (a bug)",
        };
        write!(f, "  outcome: {verdict}")
    }
}

/// A layer variant as the interleaving sees it: a forward pass that yields a ticket, and a way
/// to get the attention for that ticket afterwards.
trait AttentionLayer: Sync {
    type Ticket: Send;
    const NAME: &'static str;
    fn infer(&self, request: &Request) -> Result<Self::Ticket>;
    fn attention(&self, ticket: Self::Ticket) -> Option<Attention>;
}

impl AttentionLayer for StatefulGatV2 {
    /// Nothing: the attention went into the module (PyG: `out = conv(x, edge_index)`).
    type Ticket = ();
    const NAME: &'static str = "StatefulGatV2";
    fn infer(&self, request: &Request) -> Result<()> {
        self.forward(&request.x, &request.edge_index).map(drop)
    }
    /// PyG: `alpha = conv._alpha`, whoever wrote it last.
    fn attention(&self, _: ()) -> Option<Attention> {
        self.last_attention()
    }
}

impl AttentionLayer for GatV2Conv {
    /// The whole output, attention included.
    type Ticket = GatV2Output;
    const NAME: &'static str = "GatV2Conv";
    fn infer(&self, request: &Request) -> Result<GatV2Output> {
        self.forward(&request.x, &request.edge_index)
    }
    fn attention(&self, ticket: GatV2Output) -> Option<Attention> {
        Some(ticket.attention)
    }
}

/// Runs the forced interleaving with `conv` as the anti-pattern and as the stateless layer.
/// `a` and `b` must have different attention (e.g. different edges), or the demo cannot tell
/// whose attention a thread received.
pub fn run(conv: &GatV2Conv, a: &Request, b: &Request) -> Result<RaceDemo> {
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
    Ok(RaceDemo {
        stateful: interleave(&stateful, a, b, &expected)?,
        stateless: interleave(conv, a, b, &expected)?,
    })
}

/// A forward, B forward, both read: enforced with two channels. Each sender moves into its
/// thread, so a thread that fails or panics drops it and its peer gets an error instead of
/// waiting forever.
fn interleave<L: AttentionLayer>(
    layer: &L,
    a: &Request,
    b: &Request,
    expected: &[(String, Attention)],
) -> Result<RaceReport> {
    let (a_ran, a_ran_rx) = mpsc::channel::<()>();
    let (b_ran, b_ran_rx) = mpsc::channel::<()>();
    let lost = |peer: &str| {
        WorkbookError::Thread(format!(
            "race demo: thread {peer} stopped before its forward pass"
        ))
    };
    let (got_a, got_b) = std::thread::scope(|s| {
        let thread_a = s.spawn(move || -> Result<Option<Attention>> {
            let ticket = layer.infer(a);
            let _ = a_ran.send(()); // 1. A has run (if B is gone, B reports why)
            let ticket = ticket?;
            b_ran_rx.recv().map_err(|_| lost("B"))?; // wait for 2.
            Ok(layer.attention(ticket)) // 3.
        });
        let thread_b = s.spawn(move || -> Result<Option<Attention>> {
            a_ran_rx.recv().map_err(|_| lost("A"))?; // wait for 1.
            let ticket = layer.infer(b);
            let _ = b_ran.send(()); // 2. B has run
            Ok(layer.attention(ticket?)) // 3.
        });
        let join = |h: std::thread::ScopedJoinHandle<'_, Result<Option<Attention>>>, t: &str| {
            h.join()
                .map_err(|_| WorkbookError::Thread(format!("race demo: thread {t} panicked")))?
        };
        (join(thread_a, "A"), join(thread_b, "B"))
    });
    let outcome =
        |thread: &str, request: &Request, got: Option<Attention>| -> Result<ThreadOutcome> {
            let owner = match &got {
                None => None,
                Some(att) => {
                    let mut owner = None;
                    for (name, want) in expected {
                        if same_attention(att, want)? {
                            owner = Some(name.clone());
                        }
                    }
                    owner
                }
            };
            Ok(ThreadOutcome {
                thread: thread.into(),
                asked_for: request.name.clone(),
                got: owner,
                edges_received: got.map(|att| att.edge_index.num_edges()),
            })
        };
    Ok(RaceReport {
        variant: L::NAME.into(),
        outcomes: vec![outcome("A", a, got_a?)?, outcome("B", b, got_b?)?],
    })
}
