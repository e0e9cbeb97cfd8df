//! `cargo grade --watch`: re-grades an exercise once each time one of the files it owns (its
//! `edit` files, the ones a student writes) is saved, as Rustlings does.
//!
//! Only a save counts: a file event names a path, and the path is one of an exercise's edit
//! files whose modification time, length or content differs from when it was last seen. Grading
//! itself reads those files (cargo, the checksums) and writes elsewhere (`target/`, the
//! reports); neither changes them, so neither starts another grade. Events are debounced (an
//! editor's save is several events), and a save made while a grade runs is graded once, after it.
//!
//! ```
//! use std::path::Path;
//! assert!(grader::watch::relevant(Path::new("exercises/01-device-management/1-x/src/a.rs")));
//! assert!(!grader::watch::relevant(Path::new("target/debug/a.rs")));
//! ```

use crate::catalog::{Catalog, Exercise, Variant};
use crate::error::{GradeError, Result};
use crate::messages::Messages;
use notify_debouncer_mini::{new_debouncer, notify::RecursiveMode};
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::mpsc::RecvTimeoutError;
use std::time::{Duration, Instant, SystemTime};

/// Whether a change to `path` can change a grade: Rust sources and TOML, outside `target/`.
pub fn relevant(path: &Path) -> bool {
    let in_target = path.components().any(|c| c.as_os_str() == "target");
    let ext = path.extension().and_then(|e| e.to_str());
    !in_target && matches!(ext, Some("rs" | "toml"))
}

/// What tells a save from a read: the modification time, the length and the content's hash
/// (`None`: the file is missing).
type Stamp = Option<(Option<SystemTime>, u64, [u8; 32])>;

fn stamp(path: &Path) -> Stamp {
    let meta = std::fs::metadata(path).ok()?;
    let bytes = std::fs::read(path).ok()?;
    Some((
        meta.modified().ok(),
        meta.len(),
        Sha256::digest(&bytes).into(),
    ))
}

/// `path` with its folder made canonical (the file itself may be missing mid-save), so that it
/// compares equal to the paths the watcher reports under a canonical folder.
fn canonical(path: &Path) -> PathBuf {
    match (path.parent(), path.file_name()) {
        (Some(dir), Some(name)) => dir
            .canonicalize()
            .map_or_else(|_| path.to_path_buf(), |d| d.join(name)),
        _ => path.to_path_buf(),
    }
}

/// Watches `dir` and calls `regrade` with the owners (in `owned`'s order, each once) of the
/// files of `owned` that were saved, until `rounds` re-grades happened (forever when `None`) or,
/// when `stop_after` is given, once that long has passed. Returns the number of re-grades.
pub fn watch_files(
    dir: &Path,
    owned: &[(String, PathBuf)],
    rounds: Option<usize>,
    stop_after: Option<Duration>,
    mut regrade: impl FnMut(&[String]) -> Result<()>,
) -> Result<usize> {
    let watch_err = |e: &dyn std::fmt::Display| GradeError::Watch(e.to_string());
    let dir = dir.canonicalize().map_err(|e| watch_err(&e))?;
    let files: Vec<(String, PathBuf)> = owned
        .iter()
        .map(|(id, p)| (id.clone(), canonical(p)))
        .collect();
    let mut seen: BTreeMap<PathBuf, Stamp> =
        files.iter().map(|(_, p)| (p.clone(), stamp(p))).collect();
    let (tx, rx) = std::sync::mpsc::channel();
    let mut debouncer = new_debouncer(Duration::from_millis(300), tx).map_err(|e| watch_err(&e))?;
    debouncer
        .watcher()
        .watch(&dir, RecursiveMode::Recursive)
        .map_err(|e| watch_err(&e))?;
    let started = Instant::now();
    let mut done = 0;
    loop {
        let events = match stop_after {
            None => match rx.recv() {
                Ok(events) => events,
                Err(_) => break,
            },
            Some(limit) => match rx.recv_timeout(limit.saturating_sub(started.elapsed())) {
                Ok(events) => events,
                Err(RecvTimeoutError::Timeout | RecvTimeoutError::Disconnected) => break,
            },
        };
        let events = events.map_err(|e| watch_err(&e))?;
        let named: Vec<PathBuf> = events.iter().map(|e| canonical(&e.path)).collect();
        let mut changed: Vec<String> = Vec::new();
        for (id, path) in &files {
            if !named.contains(path) {
                continue;
            }
            let now = stamp(path);
            if seen.get(path) == Some(&now) {
                continue;
            }
            seen.insert(path.clone(), now);
            if !changed.contains(id) {
                changed.push(id.clone());
            }
        }
        if changed.is_empty() {
            continue;
        }
        regrade(&changed)?;
        done += 1;
        if rounds.is_some_and(|r| done >= r) {
            break;
        }
    }
    Ok(done)
}

/// Watches `variant`'s tree and calls `regrade` with the exercises (among `selected`) whose edit
/// files were saved, until `rounds` re-grades happened (forever when `None`); says so in
/// `messages`' language.
pub fn run(
    catalog: &Catalog,
    variant: Variant,
    selected: &[&Exercise],
    rounds: Option<usize>,
    messages: Messages,
    mut regrade: impl FnMut(&[&Exercise]) -> Result<()>,
) -> Result<()> {
    let dir = catalog.root.join(variant.folder());
    let owned: Vec<(String, PathBuf)> = selected
        .iter()
        .flat_map(|e| {
            let at = e.dir(&catalog.root, variant);
            e.spec.edit.iter().map(move |f| (e.id.clone(), at.join(f)))
        })
        .collect();
    eprintln!("{}", messages.watching(&dir.display().to_string()));
    watch_files(&dir, &owned, rounds, None, |ids| {
        let changed: Vec<&Exercise> = selected
            .iter()
            .copied()
            .filter(|e| ids.contains(&e.id))
            .collect();
        regrade(&changed)
    })?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;

    /// One save, then a grade that reads the saved file and writes a report and build output
    /// beside it (as cargo and the grader do): one grade, not one per event.
    #[test]
    fn one_save_is_one_grade() {
        let dir = tempfile::tempdir().unwrap();
        let ex = dir.path().join("01-x/src");
        std::fs::create_dir_all(&ex).unwrap();
        std::fs::create_dir_all(dir.path().join("01-x/target")).unwrap();
        let edit = ex.join("answer.rs");
        let other = ex.join("lib.rs");
        std::fs::write(&edit, "todo!()").unwrap();
        std::fs::write(&other, "mod answer;").unwrap();
        let owned = vec![("01-x".to_string(), edit.clone())];
        let saver = {
            let edit = edit.clone();
            std::thread::spawn(move || {
                std::thread::sleep(Duration::from_millis(700));
                std::fs::write(&edit, "42").unwrap();
            })
        };
        let grades = Cell::new(0);
        let graded = watch_files(
            dir.path(),
            &owned,
            None,
            Some(Duration::from_secs(6)),
            |ids| {
                assert_eq!(ids, ["01-x"]);
                grades.set(grades.get() + 1);
                // what a grade does to the tree: reads every source, writes build output and a
                // report, touches a file that the exercise does not own
                let _ = std::fs::read(&edit).unwrap();
                let _ = std::fs::read(&other).unwrap();
                let root = dir.path().join("01-x");
                std::fs::write(root.join("target/out.rlib"), grades.get().to_string()).unwrap();
                std::fs::write(root.join("report.json"), "{}").unwrap();
                std::fs::write(&other, format!("mod answer; // {}", grades.get())).unwrap();
                std::thread::sleep(Duration::from_millis(400));
                Ok(())
            },
        )
        .unwrap();
        saver.join().unwrap();
        assert_eq!(graded, 1, "one save, {graded} grades");
        assert_eq!(grades.get(), 1);
    }

    /// Saving the same file again, or another exercise's, re-grades the right one each time.
    #[test]
    fn each_save_grades_its_owner_once() {
        let dir = tempfile::tempdir().unwrap();
        let a = dir.path().join("a.rs");
        let b = dir.path().join("b.rs");
        std::fs::write(&a, "1").unwrap();
        std::fs::write(&b, "1").unwrap();
        let owned = vec![("A".to_string(), a.clone()), ("B".to_string(), b.clone())];
        let saver = std::thread::spawn(move || {
            for (file, text) in [(&a, "2"), (&b, "2"), (&a, "3")] {
                std::thread::sleep(Duration::from_millis(900));
                std::fs::write(file, text).unwrap();
            }
        });
        let mut seen: Vec<Vec<String>> = Vec::new();
        let graded = watch_files(
            dir.path(),
            &owned,
            Some(3),
            Some(Duration::from_secs(10)),
            |ids| {
                seen.push(ids.to_vec());
                Ok(())
            },
        )
        .unwrap();
        saver.join().unwrap();
        assert_eq!(graded, 3);
        assert_eq!(seen, [vec!["A"], vec!["B"], vec!["A"]]);
    }
}
