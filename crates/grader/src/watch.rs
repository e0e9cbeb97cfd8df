//! `cargo grade --watch`: re-grades an exercise each time one of its files is saved, as
//! Rustlings does. Build output (`target/`) and editor droppings are ignored.
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
use std::path::Path;
use std::time::Duration;

/// Whether a change to `path` can change a grade: Rust sources and TOML, outside `target/`.
pub fn relevant(path: &Path) -> bool {
    let in_target = path.components().any(|c| c.as_os_str() == "target");
    let ext = path.extension().and_then(|e| e.to_str());
    !in_target && matches!(ext, Some("rs" | "toml"))
}

/// Watches `variant`'s tree and calls `regrade` with the exercises (among `selected`) whose files
/// changed, until `rounds` re-grades happened (forever when `None`); says so in `messages`' language.
pub fn run(
    catalog: &Catalog,
    variant: Variant,
    selected: &[&Exercise],
    rounds: Option<usize>,
    messages: Messages,
    mut regrade: impl FnMut(&[&Exercise]) -> Result<()>,
) -> Result<()> {
    let (tx, rx) = std::sync::mpsc::channel();
    let mut debouncer = new_debouncer(Duration::from_millis(300), tx)
        .map_err(|e| GradeError::Watch(e.to_string()))?;
    let dir = catalog.root.join(variant.folder());
    debouncer
        .watcher()
        .watch(&dir, RecursiveMode::Recursive)
        .map_err(|e| GradeError::Watch(e.to_string()))?;
    eprintln!("{}", messages.watching(&dir.display().to_string()));
    let mut done = 0;
    for events in rx {
        let events = events.map_err(|e| GradeError::Watch(e.to_string()))?;
        let mut changed: Vec<&Exercise> = Vec::new();
        for event in &events {
            if !relevant(&event.path) {
                continue;
            }
            if let Some(owner) = catalog.owner_of(&event.path) {
                let chosen = selected.iter().find(|e| e.id == owner.id);
                if let Some(e) = chosen {
                    if !changed.iter().any(|c| c.id == e.id) {
                        changed.push(e);
                    }
                }
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
    Ok(())
}
