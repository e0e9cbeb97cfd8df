//! The transfer ledger: every copy between devices made through this library, with its size,
//! what it was and when.
//!
//! "Move the data once, not every step" is the first performance lesson of GPU training, and
//! the hardest to check: a stray `.cpu()` in a loop costs time but raises no error. A [`Ledger`]
//! attached to a [`Placement`](crate::placement::Placement) records every transfer our API makes
//! to or from that device (graph and model moves, checkpoint loads, metrics read back), labelled
//! with a *phase* the program sets (`load`, `epoch 3`, `export`). Tests and exercises assert on
//! it, and it works the same for a simulated device `sim:N` as for `cuda:N`.
//!
//! Steps move nothing, so they leave no row; a trainer *marks* the ledger where each step begins
//! ([`Ledger::mark`]), so that a test can tell which copies came before which step (a batch
//! copied just before its step, or every batch copied before the first), not only how many.
//!
//! ```
//! use workbook::{ledger::Ledger, placement::Placement, candle_core::Tensor};
//! let ledger = Ledger::new();
//! let sim = Placement::sim(1).with_ledger(&ledger);
//! let x = Tensor::zeros((4, 2), workbook::candle_core::DType::F32, Placement::cpu().device()).unwrap();
//! ledger.set_phase("load");
//! let on_sim = sim.move_tensor(&x, &Placement::cpu(), "x").unwrap();
//! let t = &ledger.transfers()[0];
//! assert_eq!((t.from.as_str(), t.to.as_str(), t.bytes, t.what.as_str()), ("cpu", "sim:1", 32, "x"));
//! assert_eq!(t.phase, "load");
//! # let _ = on_sim;
//! ```

use serde::Serialize;
use std::fmt::Write as _;
use std::sync::{Arc, Mutex, MutexGuard};

/// One copy between devices.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Transfer {
    /// Where the data came from (`cpu`, `sim:1`, `cuda:0`).
    pub from: String,
    /// Where it went.
    pub to: String,
    /// Payload size in bytes.
    pub bytes: u64,
    /// What was copied (`graph.x`, `conv1.lin.weight`, `metrics`, ...).
    pub what: String,
    /// The phase the program was in (see [`Ledger::set_phase`]).
    pub phase: String,
}

/// A point in the record where something that copies nothing happened (a training step), and how
/// many transfers came before it: the order of copies and steps, which counts cannot show.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Mark {
    /// What happened (`mini-batch step`, `data-parallel step`).
    pub label: String,
    /// How many transfers had been recorded when it happened.
    pub after: usize,
}

/// Totals for one phase, in order of first appearance.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct PhaseTotal {
    pub phase: String,
    pub transfers: usize,
    pub bytes: u64,
}

#[derive(Debug, Default)]
struct Inner {
    phase: String,
    transfers: Vec<Transfer>,
    marks: Vec<Mark>,
}

/// A shared, thread-safe record of transfers. Clones share the same record.
#[derive(Clone, Debug, Default)]
pub struct Ledger {
    inner: Arc<Mutex<Inner>>,
}

impl Ledger {
    /// An empty ledger in phase `""`.
    pub fn new() -> Self {
        Self::default()
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        // A panic while holding the lock cannot leave the Vec half-written, so the data stays
        // usable after poisoning.
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Labels the transfers recorded from now on (`"load"`, `"epoch 3"`, `"export"`).
    pub fn set_phase(&self, phase: impl Into<String>) {
        self.lock().phase = phase.into();
    }

    /// The current phase label.
    pub fn phase(&self) -> String {
        self.lock().phase.clone()
    }

    /// Records one transfer in the current phase.
    pub fn record(&self, from: &str, to: &str, bytes: u64, what: &str) {
        let mut inner = self.lock();
        let phase = inner.phase.clone();
        inner.transfers.push(Transfer {
            from: from.into(),
            to: to.into(),
            bytes,
            what: what.into(),
            phase,
        });
    }

    /// Marks the record where `label` happened (a step, which copies nothing itself).
    pub fn mark(&self, label: impl Into<String>) {
        let mut inner = self.lock();
        let after = inner.transfers.len();
        inner.marks.push(Mark {
            label: label.into(),
            after,
        });
    }

    /// Every mark so far, oldest first.
    pub fn marks(&self) -> Vec<Mark> {
        self.lock().marks.clone()
    }

    /// For each mark labelled `label`, in order, the transfers recorded since the previous one
    /// (since the start for the first): what was copied before each step. The transfers after
    /// the last mark are not included.
    ///
    /// ```
    /// use workbook::ledger::Ledger;
    /// let ledger = Ledger::new();
    /// ledger.record("cpu", "sim:1", 8, "batch.x");
    /// ledger.mark("step");
    /// ledger.mark("step"); // nothing copied for this one
    /// ledger.record("sim:1", "cpu", 4, "loss");
    /// let before: Vec<usize> = ledger.before_each("step").iter().map(Vec::len).collect();
    /// assert_eq!(before, [1, 0]);
    /// ```
    pub fn before_each(&self, label: &str) -> Vec<Vec<Transfer>> {
        let inner = self.lock();
        let mut start = 0;
        let mut out = Vec::new();
        for m in inner.marks.iter().filter(|m| m.label == label) {
            let end = m.after.min(inner.transfers.len());
            out.push(inner.transfers[start.min(end)..end].to_vec());
            start = end;
        }
        out
    }

    /// Every transfer so far, oldest first.
    pub fn transfers(&self) -> Vec<Transfer> {
        self.lock().transfers.clone()
    }

    /// The transfers recorded in `phase`.
    pub fn in_phase(&self, phase: &str) -> Vec<Transfer> {
        self.lock()
            .transfers
            .iter()
            .filter(|t| t.phase == phase)
            .cloned()
            .collect()
    }

    /// Forgets every transfer and mark (the phase is kept).
    pub fn clear(&self) {
        let mut inner = self.lock();
        inner.transfers.clear();
        inner.marks.clear();
    }

    /// Whether `self` and `other` share one record.
    pub fn same(&self, other: &Ledger) -> bool {
        Arc::ptr_eq(&self.inner, &other.inner)
    }

    /// Transfers and bytes per phase, in order of first appearance.
    pub fn totals(&self) -> Vec<PhaseTotal> {
        let mut out: Vec<PhaseTotal> = Vec::new();
        for t in &self.lock().transfers {
            match out.iter_mut().find(|p| p.phase == t.phase) {
                Some(p) => {
                    p.transfers += 1;
                    p.bytes += t.bytes;
                }
                None => out.push(PhaseTotal {
                    phase: t.phase.clone(),
                    transfers: 1,
                    bytes: t.bytes,
                }),
            }
        }
        out
    }

    /// A plain-text table, one row per kind of transfer, then the total. Transfers of the same
    /// thing in the same direction and size within a phase are counted in one row, and the
    /// phases `epoch N` fold into `epoch *`, so a 200-epoch run stays readable.
    pub fn table(&self) -> String {
        let transfers = self.transfers();
        let mut rows: Vec<(String, String, String, u64, usize)> = Vec::new();
        for t in &transfers {
            // "epoch 1", "epoch 2", ... fold into "epoch *" so per-epoch traffic shows as a count.
            let key = (
                phase_group(&t.phase),
                t.what.clone(),
                format!("{} -> {}", t.from, t.to),
                t.bytes,
            );
            match rows
                .iter_mut()
                .find(|r| (&r.0, &r.1, &r.2, r.3) == (&key.0, &key.1, &key.2, key.3))
            {
                Some(r) => r.4 += 1,
                None => rows.push((key.0, key.1, key.2, key.3, 1)),
            }
        }
        let w_phase = rows.iter().map(|r| r.0.len()).max().unwrap_or(0).max(5);
        let w_what = rows.iter().map(|r| r.1.len()).max().unwrap_or(0).max(4);
        let w_dir = rows.iter().map(|r| r.2.len()).max().unwrap_or(0).max(10);
        let mut out = String::new();
        let _ = writeln!(
            out,
            "{:<w_phase$}  {:<w_what$}  {:<w_dir$}  {:>10}  {:>5}",
            "phase", "what", "from -> to", "bytes each", "times"
        );
        for (phase, what, dir, bytes, n) in rows {
            let _ = writeln!(
                out,
                "{phase:<w_phase$}  {what:<w_what$}  {dir:<w_dir$}  {bytes:>10}  {n:>5}"
            );
        }
        let total_bytes: u64 = transfers.iter().map(|t| t.bytes).sum();
        let _ = writeln!(
            out,
            "{} transfer(s), {} byte(s) in all",
            transfers.len(),
            total_bytes
        );
        out
    }
}

/// `epoch 1`, `epoch 2`, ... all fold into `epoch *`.
fn phase_group(phase: &str) -> String {
    if is_epoch_phase(phase) {
        "epoch *".into()
    } else {
        phase.into()
    }
}

/// Whether `phase` is a training epoch's label: `epoch 1`, `epoch 2`, ...
pub(crate) fn is_epoch_phase(phase: &str) -> bool {
    phase
        .strip_prefix("epoch ")
        .is_some_and(|n| !n.is_empty() && n.chars().all(|c| c.is_ascii_digit()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn totals_and_table_group_phases() {
        let l = Ledger::new();
        l.set_phase("load");
        l.record("cpu", "sim:1", 100, "graph.x");
        for e in 1..=3 {
            l.set_phase(format!("epoch {e}"));
            l.record("sim:1", "cpu", 16, "metrics");
        }
        let totals = l.totals();
        assert_eq!(totals.len(), 4);
        assert_eq!(totals[0].bytes, 100);
        let table = l.table();
        assert!(table.contains("epoch *"), "{table}");
        assert!(
            table
                .lines()
                .any(|l| l.starts_with("epoch *") && l.ends_with(" 3")),
            "{table}"
        );
        assert!(table.contains("4 transfer(s), 148 byte(s)"), "{table}");
        assert_eq!(l.in_phase("epoch 2").len(), 1);
    }

    #[test]
    fn marks_order_copies_and_steps() {
        let l = Ledger::new();
        l.record("cpu", "sim:1", 8, "batch.x");
        l.mark("step");
        l.record("cpu", "sim:1", 8, "batch.x");
        l.record("cpu", "sim:1", 4, "batch.y");
        l.mark("eval");
        l.mark("step");
        l.record("sim:1", "cpu", 4, "loss");
        assert_eq!(
            l.marks()
                .iter()
                .map(|m| (m.label.as_str(), m.after))
                .collect::<Vec<_>>(),
            [("step", 1), ("eval", 3), ("step", 3)]
        );
        let before = l.before_each("step");
        assert_eq!(before.len(), 2);
        assert_eq!(before[0][0].what, "batch.x");
        assert_eq!(
            before[1]
                .iter()
                .map(|t| t.what.as_str())
                .collect::<Vec<_>>(),
            ["batch.x", "batch.y"]
        );
        assert!(l.table().contains("4 transfer(s)"), "marks are not rows");
        l.clear();
        assert!(l.marks().is_empty() && l.before_each("step").is_empty());
    }
}
