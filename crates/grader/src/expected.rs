//! What the reference solutions observe: the judge's expected values.
//!
//! Recorded by grading the reference solutions (`solutions/`) through the same stages as a
//! student, under the run's challenge ([`crate::grading::Grading::record`]), on the teacher's
//! machine. They never go into a handout: with them a student could write the observations
//! without doing the work. Where grading runs elsewhere (in a student's repository, on a classroom
//! service), the teacher records them once into a file (`cargo grade --record-expected FILE`)
//! and passes it with the judge (`--expected FILE`), kept private like an answer key. The file
//! names the tests it was recorded for (a digest of the graded files), so a file recorded for
//! other tests is refused rather than misused.
//!
//! ```
//! let e = grader::expected::Expected::new(7, "abc".into());
//! assert!(e.check_digest("abc").is_ok());
//! assert!(e.check_digest("abd").is_err());
//! ```

use crate::catalog::Exercise;
use crate::error::{GradeError, Result};
use scenario::protocol::Log;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;
use std::path::Path;

/// Expected logs of a challenge.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Expected {
    /// The challenge they were recorded under.
    pub challenge: u64,
    /// [`digest`] of the graded files they were recorded with.
    pub digest: String,
    /// Exercise id → test name → the reference's log.
    pub exercises: BTreeMap<String, BTreeMap<String, Log>>,
}

impl Expected {
    /// Empty, for `challenge` and the graded files of `digest`.
    pub fn new(challenge: u64, digest: String) -> Self {
        Self {
            challenge,
            digest,
            exercises: BTreeMap::new(),
        }
    }

    /// Refuses logs recorded for other graded files.
    pub fn check_digest(&self, digest: &str) -> Result<()> {
        if self.digest == digest {
            Ok(())
        } else {
            Err(GradeError::Expected(
                "it was recorded for other graded tests than these (the exercises changed since): record it again with --record-expected".into(),
            ))
        }
    }

    /// The reference's log of `test` of exercise `id`.
    pub fn log(&self, id: &str, test: &str) -> Option<&Log> {
        self.exercises.get(id)?.get(test)
    }

    /// Reads a file written by [`Expected::save`].
    pub fn load(path: &Path) -> Result<Self> {
        let text = std::fs::read_to_string(path).map_err(|e| GradeError::io(path, e))?;
        serde_json::from_str(&text).map_err(|e| {
            GradeError::Expected(format!(
                "{} is not an expected-values file: {e}",
                path.display()
            ))
        })
    }

    /// Writes it atomically, readable by its owner only.
    pub fn save(&self, path: &Path) -> Result<()> {
        let json = serde_json::to_string(self).map_err(|e| GradeError::Expected(e.to_string()))?;
        crate::report::write_private(path, json.as_bytes())
    }
}

/// A digest of every graded file (tests, manifests, programs, `exercise.toml`) of `exercises` in
/// the staged handout `root` ([`crate::handout`]): expected values are valid for exactly these.
pub fn digest(root: &Path, exercises: &[&Exercise]) -> Result<String> {
    let mut hash = Sha256::new();
    for exercise in exercises {
        hash.update(exercise.id.as_bytes());
        for file in crate::integrity::graded_files(root, exercise)? {
            let path = root.join(&file);
            let bytes = std::fs::read(&path).map_err(|e| GradeError::io(&path, e))?;
            hash.update(file.as_bytes());
            hash.update(&bytes);
        }
    }
    Ok(format!("{:x}", hash.finalize()))
}
