//! What a scenario hands to the judge, and how the judge compares it with the reference's.
//!
//! A scenario writes one JSON [`Record`] a line. The judge reads a capped number of bytes,
//! whatever the student's process wrote ([`Log::parse`]), and compares it with the log the
//! reference solution wrote under the same challenge ([`compare`]): every key the reference
//! observed must be there with an equal value, under the reference's [`Tolerance`] (a student's
//! record cannot widen it), and the log must end with [`Record::Done`]. A difference is reported
//! by key and position only, never with the reference's value, so feedback cannot leak it.
//!
//! The student's code runs in the process that writes the log, so it can write records too. A
//! log is therefore read strictly: a key recorded twice with two different values (whichever
//! record came first) and any record after the first [`Record::Done`] fail the comparison
//! ([`Mismatch::Duplicate`], [`Mismatch::AfterEnd`]). A forged record before the test's own
//! makes such a duplicate unless the test's own value is the same (and then the forgery changed
//! nothing); one after the end is after the end. The same value recorded again is one
//! observation: a scenario whose keys come from values drawn by the challenge may meet one twice
//! (a spelling drawn in any case can come out as the plain one). A process that silences the test's own records and writes
//! a whole log itself remains possible: it must then produce every value the reference did under
//! a challenge it learns only when it runs, which is why the judge grades only values that
//! depend on the challenge, and checks the student's source files itself, outside the process.
//!
//! ```
//! use scenario::protocol::{compare, Log};
//! let reference = Log::parse(br#"{"observe":{"key":"n","value":3.0,"tolerance":{"abs":0.1,"rel":0.0}}}
//! "done"
//! "#);
//! let close = Log::parse(b"{\"observe\":{\"key\":\"n\",\"value\":3.05}}\n\"done\"\n");
//! let far = Log::parse(b"{\"observe\":{\"key\":\"n\",\"value\":3.5}}\n\"done\"\n");
//! let unfinished = Log::parse(b"{\"observe\":{\"key\":\"n\",\"value\":3.0}}\n");
//! assert!(compare(&reference, &close).is_ok());
//! assert!(compare(&reference, &far).is_err());
//! assert!(compare(&reference, &unfinished).is_err());
//! ```

use serde::{Deserialize, Serialize};
use serde_json::Value;
use std::collections::BTreeMap;

/// One line of a scenario's log.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Record {
    /// A value the scenario observed.
    Observe {
        /// What it is (`"logits"`, `"device of the output"`); unique within a scenario.
        key: String,
        /// The value, as [`crate::Observable`] encodes it.
        value: Value,
        /// How close a number must be to count as equal; [`Tolerance::DEFAULT`] when absent.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        tolerance: Option<Tolerance>,
    },
    /// The scenario ran to its end without a panic.
    Done,
}

impl Record {
    /// The record as one line of JSON (with its newline).
    pub fn to_line(&self) -> String {
        // A record is plain data: serialising it cannot fail.
        serde_json::to_string(self).unwrap_or_default() + "\n"
    }
}

/// How close two numbers must be: `|got - want| <= abs + rel * |want|`. Integers, strings and
/// booleans are always compared exactly.
#[derive(Clone, Copy, Debug, PartialEq, Serialize, Deserialize)]
pub struct Tolerance {
    /// Absolute part.
    pub abs: f64,
    /// Relative part, times the reference's magnitude.
    pub rel: f64,
}

impl Tolerance {
    /// What [`crate::Scenario::observe`] uses: float32 arithmetic done in another order.
    pub const DEFAULT: Tolerance = Tolerance {
        abs: 1e-6,
        rel: 1e-5,
    };
    /// Bit for bit.
    pub const EXACT: Tolerance = Tolerance { abs: 0.0, rel: 0.0 };

    /// An absolute tolerance only.
    pub fn abs(abs: f64) -> Self {
        Self { abs, rel: 0.0 }
    }

    /// Whether `got` is close enough to `want`.
    pub fn accepts(&self, want: f64, got: f64) -> bool {
        // NaN never equals anything here: a NaN is encoded as the string "NaN" (see Observable).
        (got - want).abs() <= self.abs + self.rel * want.abs()
    }
}

impl Default for Tolerance {
    fn default() -> Self {
        Self::DEFAULT
    }
}

/// A parsed log: the observations by key (the first record of a key is kept), whether the
/// scenario finished, and what makes it unacceptable (keys recorded twice with different values,
/// records after the end).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Log {
    /// Key → (value, tolerance), in the order first observed.
    pub observations: Vec<(String, Value, Option<Tolerance>)>,
    /// A [`Record::Done`] was read.
    pub done: bool,
    /// Lines that were not a record (a student's process may write anything).
    pub malformed: usize,
    /// Keys recorded again with another value (or tolerance) than their first record, each named
    /// once, in the order those records came.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub duplicates: Vec<String>,
    /// Records (observations or another end) after the first [`Record::Done`].
    #[serde(default, skip_serializing_if = "is_zero")]
    pub after_done: usize,
}

fn is_zero(n: &usize) -> bool {
    *n == 0
}

impl Log {
    /// Reads a log, skipping lines that are not records. Never fails: what the student's process
    /// wrote is data, not code.
    pub fn parse(bytes: &[u8]) -> Self {
        let mut log = Log::default();
        let mut seen = std::collections::BTreeMap::new();
        for line in bytes.split(|&b| b == b'\n') {
            if line.iter().all(u8::is_ascii_whitespace) {
                continue;
            }
            let record = serde_json::from_slice::<Record>(line);
            if log.done && record.is_ok() {
                log.after_done += 1;
                continue;
            }
            match record {
                Ok(Record::Observe {
                    key,
                    value,
                    tolerance,
                }) => match seen.get(&key) {
                    None => {
                        seen.insert(key.clone(), (value.clone(), tolerance));
                        log.observations.push((key, value, tolerance));
                    }
                    Some(first) if first.0 == value && first.1 == tolerance => {}
                    Some(_) => {
                        if !log.duplicates.contains(&key) {
                            log.duplicates.push(key);
                        }
                    }
                },
                Ok(Record::Done) => log.done = true,
                Err(_) => log.malformed += 1,
            }
        }
        log
    }

    /// The observations by key.
    pub fn by_key(&self) -> BTreeMap<&str, &Value> {
        self.observations
            .iter()
            .map(|(k, v, _)| (k.as_str(), v))
            .collect()
    }

    /// Why this log cannot be trusted as it stands (a key recorded twice with different values,
    /// a record after the end), if it cannot.
    pub fn tampered(&self) -> Option<Mismatch> {
        if let Some(key) = self.duplicates.first() {
            return Some(Mismatch::Duplicate { key: key.clone() });
        }
        (self.after_done > 0).then_some(Mismatch::AfterEnd {
            records: self.after_done,
        })
    }

    /// Keys whose values are the same in this log and `other` (both taken as references, under
    /// two challenges): values that could be written down in advance.
    pub fn same_keys(&self, other: &Log) -> Vec<String> {
        let differing = self.differing_keys(other);
        self.observations
            .iter()
            .map(|(k, _, _)| k.clone())
            .filter(|k| !differing.contains(k))
            .collect()
    }

    /// Keys whose values differ between this log and `other` (both taken as references): used to
    /// check that a scenario's values depend on the challenge.
    pub fn differing_keys(&self, other: &Log) -> Vec<String> {
        let theirs = other.by_key();
        self.observations
            .iter()
            .filter(|(key, value, _)| {
                theirs
                    .get(key.as_str())
                    .is_none_or(|v| diff(value, v, &Tolerance::EXACT).is_some())
            })
            .map(|(k, _, _)| k.clone())
            .collect()
    }

    /// Keys that `other` does not have (their names hold a value drawn from the challenge,
    /// `the error for 'gpu3'`) whose value equals the record at the same position in `other`,
    /// when both logs have as many records: a drawn name is known to code in the process, so
    /// such a value could be written in advance too, although [`Log::same_keys`] cannot see it.
    pub fn same_values_under_drawn_names(&self, other: &Log) -> Vec<String> {
        if self.observations.len() != other.observations.len() {
            return Vec::new();
        }
        let (mine, theirs) = (self.by_key(), other.by_key());
        self.observations
            .iter()
            .zip(&other.observations)
            .filter(|((key, value, _), (their_key, their_value, _))| {
                !theirs.contains_key(key.as_str())
                    && !mine.contains_key(their_key.as_str())
                    && diff(value, their_value, &Tolerance::EXACT).is_none()
            })
            .map(|((k, _, _), _)| k.clone())
            .collect()
    }
}

/// Why a student's log does not match the reference's.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Mismatch {
    /// The scenario did not run to its end (a panic, an early exit, a crash, a time-out).
    Unfinished,
    /// A value the reference observed is missing.
    Missing {
        /// Its key.
        key: String,
    },
    /// A key was recorded more than once: by the test and by something else in its process.
    Duplicate {
        /// The key.
        key: String,
    },
    /// Something was recorded after the scenario's end.
    AfterEnd {
        /// How many records.
        records: usize,
    },
    /// A value differs.
    Differs {
        /// Its key.
        key: String,
        /// Where inside the value (`[3][1]`, `.device`), empty for the whole value.
        at: String,
    },
}

impl std::fmt::Display for Mismatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Mismatch::Unfinished => write!(f, "the scenario did not run to its end"),
            Mismatch::Missing { key } => {
                write!(f, "`{key}` was never observed (the reference observes it)")
            }
            Mismatch::Duplicate { key } => write!(
                f,
                "`{key}` was recorded more than once: a scenario records each value once, so something else in the test's process wrote to the judge's log"
            ),
            Mismatch::AfterEnd { records } => write!(
                f,
                "{records} record(s) came after the scenario's end: something else in the test's process wrote to the judge's log"
            ),
            Mismatch::Differs { key, at } if at.is_empty() => {
                write!(f, "`{key}` differs from the reference solution's")
            }
            Mismatch::Differs { key, at } => {
                write!(f, "`{key}` differs from the reference solution's at {at}")
            }
        }
    }
}

/// Compares a student's log with the reference's: `Ok` when the scenario finished and every
/// observation of the reference is matched; else the first mismatch, in the reference's order.
/// A log with a key recorded twice with different values, or a record after its end, fails,
/// whatever its values.
pub fn compare(reference: &Log, student: &Log) -> Result<(), Mismatch> {
    if let Some(tampered) = student.tampered() {
        return Err(tampered);
    }
    let theirs = student.by_key();
    for (key, want, tolerance) in &reference.observations {
        let Some(got) = theirs.get(key.as_str()) else {
            return Err(if student.done {
                Mismatch::Missing { key: key.clone() }
            } else {
                Mismatch::Unfinished
            });
        };
        if let Some(at) = diff(want, got, &tolerance.unwrap_or_default()) {
            return Err(Mismatch::Differs {
                key: key.clone(),
                at,
            });
        }
    }
    if student.done {
        Ok(())
    } else {
        Err(Mismatch::Unfinished)
    }
}

/// Where `got` differs from `want` (`Some("")` for the whole value), or `None` when equal.
fn diff(want: &Value, got: &Value, tolerance: &Tolerance) -> Option<String> {
    match (want, got) {
        (Value::Number(w), Value::Number(g)) => {
            let exact_ints = (w.is_i64() || w.is_u64()) && (g.is_i64() || g.is_u64());
            let equal = if exact_ints {
                w == g
            } else {
                match (w.as_f64(), g.as_f64()) {
                    (Some(w), Some(g)) => tolerance.accepts(w, g),
                    _ => false,
                }
            };
            (!equal).then(String::new)
        }
        (Value::Array(w), Value::Array(g)) => {
            if w.len() != g.len() {
                return Some(format!(" (length {} instead of the reference's)", g.len()));
            }
            w.iter()
                .zip(g)
                .enumerate()
                .find_map(|(i, (w, g))| diff(w, g, tolerance).map(|at| format!("[{i}]{at}")))
        }
        (Value::Object(w), Value::Object(g)) => {
            if w.len() != g.len() || w.keys().any(|k| !g.contains_key(k)) {
                return Some(String::new());
            }
            w.iter()
                .find_map(|(k, wv)| diff(wv, &g[k], tolerance).map(|at| format!(".{k}{at}")))
        }
        _ => (want != got).then(String::new),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn log(lines: &[Record]) -> Log {
        let text: String = lines.iter().map(Record::to_line).collect();
        Log::parse(text.as_bytes())
    }

    fn obs(key: &str, value: Value) -> Record {
        Record::Observe {
            key: key.into(),
            value,
            tolerance: None,
        }
    }

    #[test]
    fn a_key_recorded_twice_is_named_and_garbage_is_counted() {
        let text = format!(
            "{}not json\n{}{}",
            obs("k", 1.into()).to_line(),
            obs("k", 2.into()).to_line(),
            Record::Done.to_line()
        );
        let parsed = Log::parse(text.as_bytes());
        assert_eq!(parsed.observations.len(), 1);
        assert_eq!(parsed.observations[0].1, Value::from(1));
        assert_eq!(parsed.duplicates, ["k"]);
        assert_eq!(parsed.malformed, 1);
        assert!(parsed.done);
        // the same value again is the same observation, not a duplicate
        let again = format!(
            "{}{}{}",
            obs("k", 1.into()).to_line(),
            obs("k", 1.into()).to_line(),
            Record::Done.to_line()
        );
        let parsed = Log::parse(again.as_bytes());
        assert_eq!(parsed.observations.len(), 1);
        assert!(parsed.duplicates.is_empty(), "{parsed:?}");
        assert!(parsed.tampered().is_none());
    }

    #[test]
    fn forged_records_before_between_and_after_the_tests_own_fail() {
        let reference = log(&[obs("a", 1.into()), obs("b", 2.into()), Record::Done]);
        let own = [obs("a", 1.into()), obs("b", 2.into()), Record::Done];
        assert!(compare(&reference, &log(&own)).is_ok());
        // Before: the right value forged first, the test's own (wrong) value second.
        let before = log(&[
            obs("b", 2.into()),
            obs("a", 1.into()),
            obs("b", 5.into()),
            Record::Done,
        ]);
        assert_eq!(
            compare(&reference, &before),
            Err(Mismatch::Duplicate { key: "b".into() })
        );
        // Between: an early end, then the test's own records.
        let between = log(&[
            obs("a", 1.into()),
            Record::Done,
            obs("b", 2.into()),
            Record::Done,
        ]);
        assert_eq!(
            compare(&reference, &between),
            Err(Mismatch::AfterEnd { records: 2 })
        );
        // After: anything after the end, even a key never seen before.
        let after = log(&[
            obs("a", 1.into()),
            obs("b", 2.into()),
            Record::Done,
            obs("c", 3.into()),
        ]);
        assert_eq!(
            compare(&reference, &after),
            Err(Mismatch::AfterEnd { records: 1 })
        );
        assert!(Mismatch::AfterEnd { records: 1 }
            .to_string()
            .contains("after the scenario's end"));
        // Garbage after the end is not a record: it fails nothing.
        let garbage = format!(
            "{}not a record\n",
            own.iter().map(Record::to_line).collect::<String>()
        );
        assert!(compare(&reference, &Log::parse(garbage.as_bytes())).is_ok());
    }

    #[test]
    fn the_reference_decides_the_tolerance() {
        let reference = log(&[
            Record::Observe {
                key: "x".into(),
                value: 1.0.into(),
                tolerance: Some(Tolerance::EXACT),
            },
            Record::Done,
        ]);
        // The student's record asks for a huge tolerance; it is ignored.
        let student = log(&[
            Record::Observe {
                key: "x".into(),
                value: 1.5.into(),
                tolerance: Some(Tolerance::abs(10.0)),
            },
            Record::Done,
        ]);
        assert_eq!(
            compare(&reference, &student),
            Err(Mismatch::Differs {
                key: "x".into(),
                at: String::new()
            })
        );
    }

    #[test]
    fn nested_differences_name_their_place_but_not_the_value() {
        let reference = log(&[obs(
            "t",
            serde_json::json!({"dims": [2], "values": [1.0, 2.0]}),
        )]);
        let student = log(&[
            obs("t", serde_json::json!({"dims": [2], "values": [1.0, 2.5]})),
            Record::Done,
        ]);
        let err = compare(&reference, &student).unwrap_err();
        assert_eq!(
            err.to_string(),
            "`t` differs from the reference solution's at .values[1]"
        );
        assert!(!err.to_string().contains("2.0"));
    }

    #[test]
    fn integers_are_exact_and_strings_are_not_numbers() {
        let reference = log(&[obs("n", 100_000.into()), Record::Done]);
        assert!(compare(&reference, &log(&[obs("n", 100_001.into()), Record::Done])).is_err());
        assert!(compare(&reference, &log(&[obs("n", "100000".into()), Record::Done])).is_err());
        assert!(compare(&reference, &log(&[obs("n", 100_000.into()), Record::Done])).is_ok());
        let nan = log(&[obs("v", "NaN".into()), Record::Done]);
        assert!(compare(&log(&[obs("v", 0.5.into())]), &nan).is_err());
    }

    #[test]
    fn missing_values_and_unfinished_runs_fail() {
        let reference = log(&[obs("a", 1.into()), obs("b", 2.into()), Record::Done]);
        assert_eq!(
            compare(&reference, &log(&[obs("a", 1.into()), Record::Done])),
            Err(Mismatch::Missing { key: "b".into() })
        );
        assert_eq!(
            compare(&reference, &log(&[obs("a", 1.into()), obs("b", 2.into())])),
            Err(Mismatch::Unfinished)
        );
        // Extra keys are ignored: they cannot make a wrong value right.
        let extra = log(&[
            obs("z", 0.into()),
            obs("a", 1.into()),
            obs("b", 2.into()),
            Record::Done,
        ]);
        assert!(compare(&reference, &extra).is_ok());
    }

    #[test]
    fn differing_keys_lists_what_depends_on_the_challenge() {
        let one = log(&[obs("fixed", 1.into()), obs("seeded", 0.25.into())]);
        let two = log(&[obs("fixed", 1.into()), obs("seeded", 0.75.into())]);
        assert_eq!(one.differing_keys(&two), vec!["seeded".to_string()]);
        assert_eq!(one.same_keys(&two), vec!["fixed".to_string()]);
        // A drawn value in a key's name does not make its value depend on the challenge: the
        // record at the same position is compared (reported apart).
        let one = log(&[
            obs("seeded", 0.25.into()),
            obs("'gpu3' refused", true.into()),
        ]);
        let two = log(&[
            obs("seeded", 0.75.into()),
            obs("'gpu7' refused", true.into()),
        ]);
        assert!(one.same_keys(&two).is_empty());
        assert_eq!(
            one.same_values_under_drawn_names(&two),
            vec!["'gpu3' refused".to_string()]
        );
        let two = log(&[
            obs("seeded", 0.75.into()),
            obs("'gpu7' refused", false.into()),
        ]);
        assert!(one.same_values_under_drawn_names(&two).is_empty());
    }
}
