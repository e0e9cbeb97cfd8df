//! A running scenario: the challenge it was given, and the log it writes.
//!
//! The judge passes the challenge in one environment variable, [`CHALLENGE_ENV`] (a number), and
//! the log as an inherited file descriptor, [`LOG_FD`] (a pipe the judge opened and reads). The
//! descriptor's number is this crate's constant, not a path in the environment. Without the
//! variable, in a student's own run, the challenge is 0 and records are dropped (descriptor 3
//! is then whatever the process inherited, Cargo's jobserver for one, and is never written).
//!
//! Nothing here is secret from the student's code: it runs in the same process, so it can write
//! to the descriptor, or replace it, as this crate does. What keeps that from earning points is
//! the judge's side ([`crate::protocol`]): a key recorded twice or a record after the end fails
//! the test, and only values that depend on the challenge are graded from a log.
//!
//! ```
//! let s = scenario::start();
//! assert_eq!(s.seed("model"), s.seed("model"));
//! assert_ne!(s.seed("model"), s.seed("graph"));
//! ```

use crate::observable::Observable;
use crate::protocol::{Record, Tolerance};
use std::fs::File;
use std::io::Write;
use std::sync::{Mutex, OnceLock};

/// The challenge: a number the judge draws for a grading run (`0` when not judged).
pub const CHALLENGE_ENV: &str = "WORKBOOK_JUDGE_CHALLENGE";
/// The file descriptor on which a judged scenario finds the judge's log (a pipe).
pub const LOG_FD: i32 = 3;

fn sink() -> &'static Option<Mutex<File>> {
    static SINK: OnceLock<Option<Mutex<File>>> = OnceLock::new();
    SINK.get_or_init(|| {
        // Judged only: elsewhere descriptor 3 may be anything the process inherited.
        std::env::var_os(CHALLENGE_ENV)?;
        // Through /proc rather than adopting the raw descriptor: no `unsafe`, and a descriptor
        // that is not open simply means no log.
        let file = std::fs::OpenOptions::new()
            .append(true)
            .open(format!("/proc/self/fd/{LOG_FD}"))
            .ok()?;
        Some(Mutex::new(file))
    })
}

fn write(record: &Record) {
    if let Some(file) = sink() {
        let mut file = file.lock().unwrap_or_else(|p| p.into_inner());
        // One write per record, under the lock: threads' records never interleave.
        let _ = file.write_all(record.to_line().as_bytes());
        let _ = file.flush();
    }
}

/// A graded scenario in progress; see the crate's documentation. When dropped without a panic
/// it records that the scenario ran to its end.
#[derive(Debug)]
pub struct Scenario {
    challenge: u64,
}

/// Starts the scenario of the current test.
pub fn start() -> Scenario {
    let challenge = std::env::var(CHALLENGE_ENV)
        .ok()
        .and_then(|c| c.trim().parse().ok())
        .unwrap_or(0);
    Scenario { challenge }
}

/// 64-bit FNV-1a, then SplitMix64's finaliser: a stable mix of the challenge and a label (the
/// reference and the student must derive the same numbers; `std`'s hasher may change between
/// Rust releases). Hand-written: eight lines, not worth a dependency.
fn mix(challenge: u64, label: &str) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325 ^ challenge;
    for b in label.bytes() {
        h ^= u64::from(b);
        h = h.wrapping_mul(0x0100_0000_01b3);
    }
    h = (h ^ (h >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    h = (h ^ (h >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    h ^ (h >> 31)
}

impl Scenario {
    /// The challenge this run was given.
    pub fn challenge(&self) -> u64 {
        self.challenge
    }

    /// A seed for `label` (a model's initialisation, a random graph), fixed by the challenge.
    pub fn seed(&self, label: &str) -> u64 {
        mix(self.challenge, label)
    }

    /// A number in `range` for `label`, fixed by the challenge; `range.start` when it is empty.
    pub fn pick(&self, label: &str, range: std::ops::Range<usize>) -> usize {
        let span = range.end.saturating_sub(range.start) as u64;
        if span == 0 {
            return range.start;
        }
        range.start + (self.seed(label) % span) as usize
    }

    /// Records `value` under `key`; the judge compares it with the reference's (numbers within
    /// [`Tolerance::DEFAULT`]).
    pub fn observe(&self, key: impl std::fmt::Display, value: &(impl Observable + ?Sized)) {
        self.record(key, value, None);
    }

    /// Records `value` under `key`, numbers compared within `tolerance` (which the reference's
    /// record decides).
    pub fn observe_within(
        &self,
        key: impl std::fmt::Display,
        value: &(impl Observable + ?Sized),
        tolerance: Tolerance,
    ) {
        self.record(key, value, Some(tolerance));
    }

    fn record(
        &self,
        key: impl std::fmt::Display,
        value: &(impl Observable + ?Sized),
        tolerance: Option<Tolerance>,
    ) {
        write(&Record::Observe {
            key: key.to_string(),
            value: value.observation(),
            tolerance,
        });
    }
}

impl Drop for Scenario {
    fn drop(&mut self) {
        if !std::thread::panicking() {
            write(&Record::Done);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mixing_is_stable_across_runs_and_releases() {
        // Fixed values: the reference and the student must agree, in any build.
        assert_eq!(mix(0, ""), mix(0, ""));
        assert_ne!(mix(1, "model"), mix(2, "model"));
        let s = Scenario { challenge: 7 };
        assert!((5..9).contains(&s.pick("x", 5..9)));
        assert_eq!(s.pick("x", 3..3), 3);
        let spread: std::collections::BTreeSet<_> = (0..64)
            .map(|c| Scenario { challenge: c }.pick("d", 1..5))
            .collect();
        assert_eq!(spread.len(), 4, "every value of a small range is reachable");
    }
}
