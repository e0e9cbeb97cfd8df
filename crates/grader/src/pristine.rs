//! Grading only what a student was asked to edit: a *pristine tree* is a copy of the teacher's
//! repository (its manifests, `.cargo/`, `crates/`, `exercises/`, `solutions/`, `scripts/`,
//! `configs/`, with the same
//! layout, so the tests' relative `#[path]`s still resolve) into which only the files listed under
//! `edit` in each `exercise.toml` are copied from the student's clone. Everything else the student
//! changed (the library, tests, manifests, `.cargo/config.toml`, build scripts) is never compiled;
//! [`changed_files`] lists it for the report.
//!
//! Trees live in the system's temporary folder ([`slot_dir`]) and build into the teacher's target
//! folder, so a
//! student costs one exercise crate's build, not the whole dependency tree: Cargo keys the
//! artefacts of path packages by their path *relative to the workspace root*, and the copy keeps
//! the teacher's modification times, so the library is `Fresh`. Two precautions keep artefacts
//! apart: the exercise crates of a pristine tree get the version `<v>-pristine`, so their test
//! binaries never overwrite (or pass for) the teacher's own; and the edited files are written,
//! with the current time, immediately before each build and under one lock, so Cargo's
//! modification-time check can never take one student's binary for another's.
//!
//! ```
//! assert_eq!(grader::pristine::pristine_version("0.1.0"), "0.1.0-pristine");
//! assert_eq!(grader::pristine::pristine_version("1.0.0-rc1"), "1.0.0-rc1.pristine");
//! ```

use crate::catalog::Catalog;
use crate::error::{GradeError, Result};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::Command;

/// What a pristine tree copies from the teacher's repository (those that exist).
/// `scripts/` and `configs/` because tests use them (04-3 runs `scripts/check_onnx.py`).
const COPIED: [&str; 10] = [
    "Cargo.toml",
    "Cargo.lock",
    "rust-toolchain",
    "rust-toolchain.toml",
    ".cargo",
    "crates",
    "exercises",
    "solutions",
    "scripts",
    "configs",
];

/// The version an exercise crate gets in a pristine tree.
pub fn pristine_version(version: &str) -> String {
    if version.contains('-') {
        format!("{version}.pristine")
    } else {
        format!("{version}-pristine")
    }
}

/// Makes `slot` a pristine copy of `teacher` (see the module's documentation). Files already
/// equal (length and modification time) are left alone, so a second student costs little.
pub fn sync(teacher: &Path, slot: &Path) -> Result<()> {
    std::fs::create_dir_all(slot).map_err(|e| GradeError::io(slot, e))?;
    for name in COPIED {
        let from = teacher.join(name);
        if from.exists() {
            copy_tree(&from, &slot.join(name), Path::new(name))?;
        }
    }
    Ok(())
}

fn copy_tree(from: &Path, to: &Path, rel: &Path) -> Result<()> {
    let meta = std::fs::metadata(from).map_err(|e| GradeError::io(from, e))?;
    if meta.is_dir() {
        std::fs::create_dir_all(to).map_err(|e| GradeError::io(to, e))?;
        for entry in std::fs::read_dir(from).map_err(|e| GradeError::io(from, e))? {
            let entry = entry.map_err(|e| GradeError::io(from, e))?;
            let name = entry.file_name();
            let skip = name == "target" || name == ".git";
            if !skip {
                copy_tree(&entry.path(), &to.join(&name), &rel.join(&name))?;
            }
        }
        return Ok(());
    }
    let modified = meta.modified().map_err(|e| GradeError::io(from, e))?;
    let exercise_manifest = rel.starts_with("exercises") && rel.ends_with("Cargo.toml");
    let bytes = if exercise_manifest {
        Some(renamed_manifest(from)?)
    } else {
        None
    };
    if let Ok(have) = std::fs::metadata(to) {
        let same_len = bytes.as_ref().map_or(meta.len(), |b| b.len() as u64) == have.len();
        if same_len && have.modified().ok() == Some(modified) {
            return Ok(());
        }
    }
    match bytes {
        Some(b) => std::fs::write(to, b).map_err(|e| GradeError::io(to, e))?,
        None => {
            std::fs::copy(from, to).map_err(|e| GradeError::io(to, e))?;
        }
    }
    let file = std::fs::File::options()
        .write(true)
        .open(to)
        .map_err(|e| GradeError::io(to, e))?;
    file.set_modified(modified)
        .map_err(|e| GradeError::io(to, e))?;
    Ok(())
}

/// An exercise's `Cargo.toml` with the version `<v>-pristine` (see the module's documentation).
fn renamed_manifest(path: &Path) -> Result<Vec<u8>> {
    let text = std::fs::read_to_string(path).map_err(|e| GradeError::io(path, e))?;
    let bad = |message: String| GradeError::BadSpec {
        path: path.to_path_buf(),
        message,
    };
    let mut manifest: toml::Table = toml::from_str(&text).map_err(|e| bad(e.to_string()))?;
    let Some(package) = manifest.get_mut("package").and_then(|p| p.as_table_mut()) else {
        return Ok(text.into_bytes());
    };
    let version = package
        .get("version")
        .and_then(|v| v.as_str())
        .unwrap_or("0.0.0")
        .to_string();
    package.insert(
        "version".into(),
        toml::Value::String(pristine_version(&version)),
    );
    let text = toml::to_string(&manifest).map_err(|e| bad(e.to_string()))?;
    Ok(text.into_bytes())
}

/// The files of `dir` that matter: those Git tracks or would track (`git ls-files --cached
/// --others --exclude-standard`) when `dir` is a Git work tree, else every file outside `target/`,
/// `.git/`, Python environments (`.venv/`, `venv/`) and editor settings (`.idea/`, `.vscode/`).
pub fn list_files(dir: &Path) -> Result<BTreeSet<String>> {
    if dir.join(".git").exists() {
        let out = Command::new("git")
            .arg("-C")
            .arg(dir)
            .args([
                "ls-files",
                "-z",
                "--cached",
                "--others",
                "--exclude-standard",
            ])
            .output();
        if let Some(out) = out.ok().filter(|o| o.status.success()) {
            return Ok(out
                .stdout
                .split(|&b| b == 0)
                .filter(|p| !p.is_empty())
                .map(|p| String::from_utf8_lossy(p).into_owned())
                .filter(|p| dir.join(p).is_file())
                .collect());
        }
    }
    let mut files = BTreeSet::new();
    walk(dir, dir, &mut files)?;
    Ok(files)
}

fn walk(root: &Path, dir: &Path, files: &mut BTreeSet<String>) -> Result<()> {
    for entry in std::fs::read_dir(dir).map_err(|e| GradeError::io(dir, e))? {
        let entry = entry.map_err(|e| GradeError::io(dir, e))?;
        let path = entry.path();
        let name = entry.file_name().to_string_lossy().into_owned();
        if path.is_dir() {
            // What a clone without Git holds besides its sources: build output, Git's own
            // folder, Python environments and editor settings.
            let skip = ["target", ".git", ".venv", "venv", ".idea", ".vscode"];
            if !skip.contains(&name.as_str()) {
                walk(root, &path, files)?;
            }
        } else if let Ok(rel) = path.strip_prefix(root) {
            files.insert(rel.to_string_lossy().replace('\\', "/"));
        }
    }
    Ok(())
}

/// Every file an exercise asks students to edit, from the repository root
/// (`exercises/<chapter>/<exercise>/src/x.rs`).
pub fn edit_files(catalog: &Catalog) -> BTreeSet<String> {
    catalog
        .exercises
        .iter()
        .flat_map(|e| {
            e.spec
                .edit
                .iter()
                .map(move |f| format!("exercises/{}/{f}", e.path))
        })
        .collect()
}

/// What the student changed outside the files the exercises ask them to edit, compared file by
/// file (bytes) with the teacher's tree: `path: modified`, `path: added`, `path: deleted`. Files
/// only the teacher has under `solutions/` are not listed (a class's copy has none).
pub fn changed_files(
    teacher: &Path,
    student: &Path,
    graded: &BTreeSet<String>,
) -> Result<Vec<String>> {
    let theirs = list_files(student)?;
    let ours = list_files(teacher)?;
    let mut changes = BTreeMap::new();
    for file in theirs.union(&ours) {
        if graded.contains(file) {
            continue;
        }
        let (s, t) = (student.join(file), teacher.join(file));
        let what = match (theirs.contains(file), ours.contains(file)) {
            (true, true) => {
                let a = std::fs::read(&s).map_err(|e| GradeError::io(&s, e))?;
                let b = std::fs::read(&t).map_err(|e| GradeError::io(&t, e))?;
                (a != b).then_some("modified")
            }
            (true, false) => Some("added"),
            (false, true) if !file.starts_with("solutions/") => Some("deleted"),
            _ => None,
        };
        if let Some(what) = what {
            changes.insert(file.clone(), what);
        }
    }
    Ok(changes
        .into_iter()
        .map(|(f, w)| format!("{f}: {w}"))
        .collect())
}

/// For a student's own run: the files changed outside the exercises' `edit` lists, according to
/// Git, since the commit the student's branch started from (the merge base with its upstream,
/// else `HEAD`), committed or not, plus untracked files. Empty when `root` is not a Git work tree
/// or Git is missing: this is a courtesy warning; the teacher's grading (`--root`, `--class`)
/// is what enforces the rule.
pub fn changed_since_upstream(root: &Path, graded: &BTreeSet<String>) -> Vec<String> {
    let git = |args: &[&str]| -> Option<String> {
        let out = Command::new("git")
            .arg("-C")
            .arg(root)
            .args(args)
            .output()
            .ok()?;
        out.status
            .success()
            .then(|| String::from_utf8_lossy(&out.stdout).into_owned())
    };
    if !root.join(".git").exists() {
        return Vec::new();
    }
    let base = git(&["merge-base", "HEAD", "@{upstream}"])
        .map(|s| s.trim().to_string())
        .unwrap_or_else(|| "HEAD".into());
    let mut files = BTreeSet::new();
    for listing in [
        git(&["diff", "--name-only", &base]),
        git(&["ls-files", "--others", "--exclude-standard"]),
    ]
    .into_iter()
    .flatten()
    {
        files.extend(listing.lines().map(str::to_string));
    }
    files
        .into_iter()
        .filter(|f| !f.is_empty() && !graded.contains(f))
        .collect()
}

/// The pristine tree number `slot` (a number, or `wrong`) for builds into `target`:
/// `<temp>/workbook-grade-<hash of target>/<slot>`. Not inside `target/`: Cargo records the
/// sources it finds under the target folder by their path there, so two trees in it would share
/// one record and one tree's binary could pass for the other's. Stable between runs, so a second
/// run copies little and programs built by tests (trybuild) are reused.
pub fn slot_dir(target: &Path, slot: &str) -> PathBuf {
    use sha2::{Digest, Sha256};
    let hash = Sha256::digest(target.to_string_lossy().as_bytes());
    let hex: String = hash.iter().take(6).map(|b| format!("{b:02x}")).collect();
    std::env::temp_dir()
        .join(format!("workbook-grade-{hex}"))
        .join(slot)
}
