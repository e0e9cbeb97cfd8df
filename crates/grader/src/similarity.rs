//! A hint of copying, for the teacher only: per exercise, the pairs of students whose edit files
//! are identical or nearly so once the handout's stub is taken away (as MOSS does with a base
//! file). Lines are compared after removing comments and whitespace; a line the stub already has
//! does not count. The score is the Jaccard index of the two students' remaining lines. A high
//! score is a reason to look, not a verdict: short exercises have few ways to be right.
//!
//! ```
//! use grader::similarity::{lines, score};
//! let stub = lines("fn f() {\n    // TODO: sum\n    0\n}\n");
//! let a = lines("fn f() {\n    a + b // mine\n}\n");
//! let b = lines("fn f() {\n    a+b\n}\n");
//! assert_eq!(score(&a, &b, &stub), Some(1.0));
//! ```

use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};

/// Pairs at or above this score are listed.
pub const THRESHOLD: f64 = 0.9;

/// A pair of students with similar work on an exercise.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Pair {
    /// Exercise id.
    pub exercise: String,
    /// The two students.
    pub students: (String, String),
    /// 1.0 for the same lines.
    pub score: f64,
    /// How many lines of their own (not the stub's) the first student wrote.
    pub lines: usize,
}

/// The normalised lines of a source file: comments dropped, whitespace removed, empty lines
/// dropped.
pub fn lines(source: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let mut in_block = false;
    for line in source.lines() {
        let mut code = String::new();
        let mut rest = line;
        while !rest.is_empty() {
            if in_block {
                match rest.find("*/") {
                    Some(i) => {
                        rest = &rest[i + 2..];
                        in_block = false;
                    }
                    None => rest = "",
                }
            } else if let Some(i) = rest.find("/*").filter(|i| !rest[..*i].contains("//")) {
                code.push_str(&rest[..i]);
                rest = &rest[i + 2..];
                in_block = true;
            } else {
                code.push_str(rest.split("//").next().unwrap_or_default());
                rest = "";
            }
        }
        let squeezed: String = code.chars().filter(|c| !c.is_whitespace()).collect();
        if !squeezed.is_empty() {
            out.insert(squeezed);
        }
    }
    out
}

/// The Jaccard index of `a` and `b` without the `stub`'s lines; `None` when neither wrote
/// anything of their own.
pub fn score(a: &BTreeSet<String>, b: &BTreeSet<String>, stub: &BTreeSet<String>) -> Option<f64> {
    let a: BTreeSet<&String> = a.difference(stub).collect();
    let b: BTreeSet<&String> = b.difference(stub).collect();
    let union = a.union(&b).count();
    if union == 0 {
        return None;
    }
    Some(a.intersection(&b).count() as f64 / union as f64)
}

/// The pairs at or above [`THRESHOLD`], for each exercise: `work[exercise][student]` is the
/// student's edit files joined, `stubs[exercise]` the handout's.
pub fn pairs(
    work: &BTreeMap<String, BTreeMap<String, String>>,
    stubs: &BTreeMap<String, String>,
) -> Vec<Pair> {
    let mut found = Vec::new();
    for (exercise, by_student) in work {
        let stub = lines(stubs.get(exercise).map(String::as_str).unwrap_or_default());
        let normalised: Vec<(&String, BTreeSet<String>)> = by_student
            .iter()
            .map(|(s, text)| (s, lines(text)))
            .collect();
        for (i, (a, la)) in normalised.iter().enumerate() {
            for (b, lb) in &normalised[i + 1..] {
                if let Some(score) = score(la, lb, &stub).filter(|s| *s >= THRESHOLD) {
                    found.push(Pair {
                        exercise: exercise.clone(),
                        students: ((*a).clone(), (*b).clone()),
                        score,
                        lines: la.difference(&stub).count(),
                    });
                }
            }
        }
    }
    found
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_stub_and_formatting_do_not_make_work_similar() {
        let stub = "pub fn f() -> u32 {\n    // TODO\n    0\n}\n";
        let mut work = BTreeMap::new();
        let mut by = BTreeMap::new();
        by.insert(
            "ann".to_string(),
            "pub fn f() -> u32 {\n    let x = 2; /* two */\n    x * 21\n}\n".to_string(),
        );
        by.insert(
            "ben".to_string(),
            "pub fn f()->u32{\n  let x=2;\n  x*21\n}\n".to_string(),
        );
        by.insert(
            "cat".to_string(),
            "pub fn f() -> u32 {\n    42\n}\n".to_string(),
        );
        by.insert("dan".to_string(), stub.to_string());
        work.insert("01-1".to_string(), by);
        let stubs = [("01-1".to_string(), stub.to_string())].into();
        let found = pairs(&work, &stubs);
        assert_eq!(found.len(), 1, "{found:?}");
        assert_eq!(found[0].students, ("ann".into(), "ben".into()));
        assert_eq!(found[0].score, 1.0);
    }
}
