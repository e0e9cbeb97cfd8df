//! Stage 0, once per grading run: the handout, as the judge builds every submission on it.
//!
//! The teacher's repository is trusted; its `solutions/` are not for students' eyes. So the
//! judge stages a copy of the tree students were given: the workspace's manifests, `.cargo/`,
//! `crates/`, `exercises/`, `scripts/` and `configs/`, without `solutions/` (and without it in
//! the workspace's `members`), without hidden tests (kept apart in [`Handout::hidden`], compiled
//! against a submission's library, never with it), and without what `--make-handout` keeps from
//! students (teacher-only files and passages): the sandbox sees what students were handed. The copy keeps the teacher's modification times, so that built
//! into the teacher's target folder the library and its dependencies are fresh: Cargo keys path
//! packages by their path relative to the workspace root. Its exercise crates get the version
//! `<v>-pristine`, so their artefacts never overwrite (or pass for) the teacher's own.
//!
//! Cargo then builds the selected exercises' stubs once, with `-vv`, which prints every
//! compiler invocation in full: the judge keeps those of the exercise crates (the graded test
//! harness, and the `programs` some tests build) and replays them for each submission in a
//! sandbox ([`crate::compile`]), so a student costs one compiler run per exercise and nothing
//! is rebuilt. The compiled dependencies those invocations name are hard-linked into a folder of
//! their own ([`Handout::deps`]): the sandbox sees them, and not the teacher's target folder,
//! whose test binaries include the reference solutions.
//!
//! ```
//! assert_eq!(grader::handout::pristine_version("0.1.0"), "0.1.0-pristine");
//! assert_eq!(grader::handout::pristine_version("1.0.0-rc1"), "1.0.0-rc1.pristine");
//! ```

use crate::cargo::{self, Invocation};
use crate::catalog::{Catalog, Exercise};
use crate::error::{GradeError, Result};
use crate::progress::Progress;
use serde::{Deserialize, Serialize};
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// What the staged tree copies from the teacher's repository (those that exist).
/// `scripts/` and `configs/` because tests use them (04-3 runs `scripts/check_onnx.py`);
/// `examples/` because the workspace lists its crates as members.
const COPIED: [&str; 10] = [
    "Cargo.toml",
    "Cargo.lock",
    "rust-toolchain",
    "rust-toolchain.toml",
    ".cargo",
    "crates",
    "exercises",
    "scripts",
    "configs",
    "examples",
];

/// The version an exercise crate gets in the staged tree.
pub fn pristine_version(version: &str) -> String {
    if version.contains('-') {
        format!("{version}.pristine")
    } else {
        format!("{version}-pristine")
    }
}

/// The compiler runs of one exercise crate.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Units {
    /// The graded test harness (the library compiled with `--test`).
    pub test: Invocation,
    /// The programs some tests build (`examples` of the crate), by name.
    pub programs: BTreeMap<String, Invocation>,
}

/// The staged handout and how to build on it.
#[derive(Clone, Debug)]
pub struct Handout {
    /// The staged tree (no `solutions/`).
    pub tree: PathBuf,
    /// The compiled dependencies the exercises link, and nothing else of the target folder.
    pub deps: PathBuf,
    /// The target folder the invocations were recorded in (their paths point into it).
    pub target: PathBuf,
    /// The Rust toolchain: its programs and libraries (`bin/`, `lib/` of `rustc --print
    /// sysroot`) hard-linked into the judge's folder, so that a sandbox's mount table names no
    /// folder of the teacher's and a sandbox's own user can read it.
    pub sysroot: PathBuf,
    /// Folders of native libraries the invocations link (`-L native=`), from the target folder
    /// (as the recorded runs name them), each with its hard-linked copy in the judge's folder.
    pub native: Vec<(PathBuf, PathBuf)>,
    /// Per exercise id.
    pub units: BTreeMap<String, Units>,
    /// The hidden tests, out of the staged tree: `<exercise path>/hidden.rs` and the crate root
    /// that compiles them against the exercise's library ([`HIDDEN_ROOT`]).
    pub hidden: PathBuf,
    /// A digest of the staged tree, the selection and the features (what a compiler run reads,
    /// besides the submission and the toolchain).
    pub key: String,
}

/// Stages the handout of `catalog` (the teacher's tree) in `work/handout`, builds the `selected`
/// exercises into `target` and records how. `features` go to cargo (`cuda`).
pub fn prepare(
    catalog: &Catalog,
    selected: &[&Exercise],
    target: &Path,
    work: &Path,
    features: Option<&str>,
    progress: &Progress,
) -> Result<Handout> {
    let tree = work.join("handout");
    stage(&catalog.root, &tree)?;
    // The same tree (every file, byte for byte) built with the same features into the same
    // target as last time, with every compiled dependency still there: the recorded runs hold.
    let key = tree_key(&tree, selected, features)?;
    let cache = work.join("units.json");
    if let Some(cached) = cached_units(&cache, &key, target) {
        let excluded = workspace_crates(catalog)?;
        let (deps, native) = link_deps(&cached, target, work, &excluded)?;
        let any = cached.values().next().map(|u| u.test.program.clone());
        let sysroot = cargo::sysroot(&any.unwrap_or_else(|| "rustc".into()), &tree)?;
        let sysroot = link_sysroot(&sysroot, work)?;
        let hidden = stage_hidden(catalog, selected, &cached, work)?;
        return Ok(Handout {
            tree,
            deps,
            target: target.to_path_buf(),
            sysroot,
            native,
            units: cached,
            key,
            hidden,
        });
    }
    // Force the exercise crates (only them) to be compiled again, so that cargo prints how.
    for exercise in selected {
        let dir = tree.join("exercises").join(&exercise.path);
        touch(&dir.join("src/lib.rs"))?;
        for test in &exercise.spec.tests {
            if let Some(program) = &test.program {
                touch(&dir.join(format!("tests/programs/{program}.rs")))?;
            }
        }
    }
    let packages: Vec<String> = selected
        .iter()
        .map(|e| e.package(&tree, crate::catalog::Variant::Exercises))
        .collect::<Result<_>>()?;
    let with_programs: Vec<String> = selected
        .iter()
        .zip(&packages)
        .filter(|(e, _)| e.spec.tests.iter().any(|t| t.program.is_some()))
        .map(|(_, p)| p.clone())
        .collect();
    progress.line("building the handout (its exercises' stubs) to record how they compile");
    let mut invocations = Vec::new();
    let mut runs = vec![(vec!["test", "--no-run", "--lib"], packages.clone())];
    if !with_programs.is_empty() {
        // A stub's program may well not compile (that a student's does is what 03-2's
        // `build_only` test grades): every program is tried, and what is recorded is how it
        // compiles, which `-vv` prints before the compiler runs. A `compile_fail` program is
        // recorded without its mistake; the judge adds the switch (`crate::refusal`).
        runs.push((vec!["build", "--examples", "--keep-going"], with_programs));
    }
    for (args, packages) in runs {
        let programs_only = args.contains(&"--examples");
        let mut cmd = cargo::command();
        cmd.current_dir(&tree)
            .args(&args)
            .args(["-vv", "--message-format=json"])
            .env("CARGO_TARGET_DIR", target);
        for p in &packages {
            cmd.args(["--package", p]);
        }
        if let Some(f) = features {
            cmd.args(["--features", f]);
        }
        let built = cargo::build(cmd, progress.shows_cargo(), progress.cargo_progress_bar())?;
        if !built.success && programs_only {
            progress.line("(a stub's program that does not compile, above, is expected: the student's code decides)");
        }
        if !built.success && !programs_only {
            let why = built.errors.first().cloned().unwrap_or_else(|| {
                built
                    .stderr
                    .lines()
                    .rev()
                    .take(5)
                    .collect::<Vec<_>>()
                    .join("\n")
            });
            return Err(GradeError::Handout(format!(
                "the handout's exercises do not build (cargo {}): {why}",
                args.join(" ")
            )));
        }
        invocations.extend(built.invocations);
    }
    let mut units = BTreeMap::new();
    for (exercise, package) in selected.iter().zip(&packages) {
        let mine: Vec<&Invocation> = invocations
            .iter()
            .filter(|i| i.var("CARGO_PKG_NAME") == Some(package.as_str()))
            .collect();
        let test = mine
            .iter()
            .find(|i| i.args.iter().any(|a| a == "--test"))
            .ok_or_else(|| {
                GradeError::Handout(format!(
                    "cargo did not compile {}'s graded tests (package {package}); is it a workspace member?",
                    exercise.id
                ))
            })?;
        let mut programs = BTreeMap::new();
        for spec in &exercise.spec.tests {
            let Some(name) = &spec.program else { continue };
            let crate_name = name.replace('-', "_");
            let run = mine
                .iter()
                .find(|i| {
                    i.arg("--crate-type") == Some("bin")
                        && i.arg("--crate-name") == Some(crate_name.as_str())
                })
                .ok_or_else(|| {
                    GradeError::Handout(format!(
                        "{}: test {} builds the program {name}, but the crate has no such example (an [[example]] in its Cargo.toml)",
                        exercise.id, spec.name
                    ))
                })?;
            programs.insert(name.clone(), (*run).clone());
        }
        units.insert(
            exercise.id.clone(),
            Units {
                test: (*test).clone(),
                programs,
            },
        );
    }
    let any = units
        .values()
        .next()
        .ok_or_else(|| GradeError::Handout("no exercise selected".into()))?;
    let sysroot = cargo::sysroot(&any.test.program, &tree)?;
    let sysroot = link_sysroot(&sysroot, work)?;
    let record = serde_json::json!({ "key": key, "units": &units });
    crate::report::write_atomically(&cache, record.to_string().as_bytes())?;
    let excluded = workspace_crates(catalog)?;
    let (deps, native) = link_deps(&units, target, work, &excluded)?;
    let hidden = stage_hidden(catalog, selected, &units, work)?;
    Ok(Handout {
        tree,
        deps,
        target: target.to_path_buf(),
        sysroot,
        native,
        units,
        key,
        hidden,
    })
}

/// The crate root of a hidden tests' harness, beside their `hidden.rs`.
pub const HIDDEN_ROOT: &str = "judge_root.rs";

/// Copies the hidden tests of the `selected` exercises into `work/hidden/<exercise path>/`, each
/// with a crate root that re-exports the exercise's library (so `use super::module::*` in
/// `hidden.rs` finds what it found as a module of the library).
fn stage_hidden(
    catalog: &Catalog,
    selected: &[&Exercise],
    units: &BTreeMap<String, Units>,
    work: &Path,
) -> Result<PathBuf> {
    let hidden = work.join("hidden");
    if hidden.exists() {
        std::fs::remove_dir_all(&hidden).map_err(|e| GradeError::io(&hidden, e))?;
    }
    for exercise in selected {
        if !exercise.spec.tests.iter().any(|t| t.hidden) {
            continue;
        }
        let from = catalog
            .root
            .join("exercises")
            .join(&exercise.path)
            .join("tests/hidden.rs");
        let dir = hidden.join(&exercise.path);
        std::fs::create_dir_all(&dir).map_err(|e| GradeError::io(&dir, e))?;
        let to = dir.join("hidden.rs");
        std::fs::copy(&from, &to).map_err(|e| GradeError::io(&from, e))?;
        let lib_crate = units
            .get(&exercise.id)
            .and_then(|u| u.test.arg("--crate-name"))
            .unwrap_or_default();
        let root = dir.join(HIDDEN_ROOT);
        std::fs::write(
            &root,
            format!("pub use {lib_crate}::*;\n#[path = \"hidden.rs\"]\nmod hidden;\n"),
        )
        .map_err(|e| GradeError::io(&root, e))?;
    }
    Ok(hidden)
}

/// A digest of the staged tree (every file's path and bytes), the selection and the features.
fn tree_key(tree: &Path, selected: &[&Exercise], features: Option<&str>) -> Result<String> {
    use sha2::{Digest, Sha256};
    let mut hash = Sha256::new();
    hash.update(features.unwrap_or_default().as_bytes());
    for exercise in selected {
        hash.update(exercise.id.as_bytes());
    }
    let files = crate::submission::list_files(tree, &ignore::gitignore::Gitignore::empty());
    for rel in files {
        if rel == "Cargo.lock" {
            continue; // cargo rewrites it in the staged tree
        }
        let path = tree.join(&rel);
        let bytes = std::fs::read(&path).map_err(|e| GradeError::io(&path, e))?;
        hash.update(rel.as_bytes());
        hash.update((bytes.len() as u64).to_le_bytes());
        hash.update(&bytes);
    }
    Ok(format!("{:x}", hash.finalize()))
}

/// The units recorded for `key`, if every library they link is still in `target`.
fn cached_units(cache: &Path, key: &str, target: &Path) -> Option<BTreeMap<String, Units>> {
    let text = std::fs::read_to_string(cache).ok()?;
    let record: serde_json::Value = serde_json::from_str(&text).ok()?;
    if record["key"] != key {
        return None;
    }
    let units: BTreeMap<String, Units> = serde_json::from_value(record["units"].clone()).ok()?;
    let all_there = units.values().all(|u| {
        std::iter::once(&u.test)
            .chain(u.programs.values())
            .flat_map(|run| run.args.iter())
            .filter_map(|a| a.split_once('=').map(|(_, p)| p))
            .filter(|p| p.starts_with(&*target.to_string_lossy()))
            .all(|p| Path::new(p).exists())
    });
    all_there.then_some(units)
}

/// Crate names (`ex01_1_fix_the_mismatch`) of every exercise and solution package: their
/// compiled files are never shown to a sandbox.
fn workspace_crates(catalog: &Catalog) -> Result<BTreeSet<String>> {
    let mut names = BTreeSet::new();
    for exercise in &catalog.exercises {
        for variant in [
            crate::catalog::Variant::Exercises,
            crate::catalog::Variant::Solutions,
        ] {
            if exercise
                .dir(&catalog.root, variant)
                .join("Cargo.toml")
                .is_file()
            {
                names.insert(exercise.package(&catalog.root, variant)?.replace('-', "_"));
            }
        }
    }
    Ok(names)
}

/// Hard-links (or copies, across file systems) every library file of the target's `deps`
/// folders that the invocations search, except the workspace's exercise and solution crates,
/// into `<target>/grade/judge-deps`; returns it and the native library folders to mount.
fn link_deps(
    units: &BTreeMap<String, Units>,
    target: &Path,
    work: &Path,
    excluded: &BTreeSet<String>,
) -> Result<(PathBuf, Vec<(PathBuf, PathBuf)>)> {
    let mut searched = BTreeSet::new();
    let mut native = BTreeSet::new();
    for unit in units.values() {
        for run in std::iter::once(&unit.test).chain(unit.programs.values()) {
            for (i, a) in run.args.iter().enumerate() {
                if a == "-L" {
                    if let Some(next) = run.args.get(i + 1) {
                        match next.split_once('=') {
                            Some(("dependency", p)) => {
                                searched.insert(PathBuf::from(p));
                            }
                            Some(("native" | "all", p)) => {
                                native.insert(PathBuf::from(p));
                            }
                            _ => {}
                        }
                    }
                }
            }
        }
    }
    let _ = std::fs::remove_dir_all(target.join("grade").join("judge-deps"));
    let out = work.join("judge-deps");
    if out.exists() {
        std::fs::remove_dir_all(&out).map_err(|e| GradeError::io(&out, e))?;
    }
    std::fs::create_dir_all(&out).map_err(|e| GradeError::io(&out, e))?;
    for dir in searched {
        let entries = std::fs::read_dir(&dir).map_err(|e| GradeError::io(&dir, e))?;
        for entry in entries.flatten() {
            let name = entry.file_name().to_string_lossy().into_owned();
            let Some(krate) = library_crate(&name) else {
                continue;
            };
            if excluded.contains(krate) {
                continue;
            }
            let to = out.join(&name);
            link_readable(&entry.path(), &to)?;
        }
    }
    let views = work.join("judge-native");
    if views.exists() {
        std::fs::remove_dir_all(&views).map_err(|e| GradeError::io(&views, e))?;
    }
    let mut linked = Vec::new();
    for (i, dir) in native.into_iter().enumerate() {
        let view = views.join(i.to_string());
        if dir.is_dir() {
            mirror(&dir, &view)?;
        } else {
            std::fs::create_dir_all(&view).map_err(|e| GradeError::io(&view, e))?;
        }
        linked.push((dir, view));
    }
    Ok((out, linked))
}

/// The toolchain's `bin/` and `lib/` hard-linked (copied where links are impossible) into
/// `work/rust`, kept while the toolchain's `rustc` is the same file.
fn link_sysroot(sysroot: &Path, work: &Path) -> Result<PathBuf> {
    let view = work.join("rust");
    let rustc = sysroot.join("bin").join("rustc");
    let meta = std::fs::metadata(&rustc).map_err(|e| GradeError::io(&rustc, e))?;
    let stamp = format!(
        "{}\n{}\n{:?}\n",
        sysroot.display(),
        meta.len(),
        meta.modified().ok()
    );
    let marker = work.join("rust.stamp");
    if view.is_dir() && std::fs::read_to_string(&marker).ok().as_deref() == Some(stamp.as_str()) {
        return Ok(view);
    }
    let _ = std::fs::remove_file(&marker);
    if view.exists() {
        std::fs::remove_dir_all(&view).map_err(|e| GradeError::io(&view, e))?;
    }
    for part in ["bin", "lib"] {
        mirror(&sysroot.join(part), &view.join(part))?;
    }
    std::fs::write(&marker, stamp).map_err(|e| GradeError::io(&marker, e))?;
    Ok(view)
}

/// `to` as a tree of hard links to `from`'s files and its symbolic links, world-readable folders
/// (copies where links are impossible).
fn mirror(from: &Path, to: &Path) -> Result<()> {
    std::fs::create_dir_all(to).map_err(|e| GradeError::io(to, e))?;
    for entry in std::fs::read_dir(from).map_err(|e| GradeError::io(from, e))? {
        let entry = entry.map_err(|e| GradeError::io(from, e))?;
        let (src, dst) = (entry.path(), to.join(entry.file_name()));
        let kind = entry.file_type().map_err(|e| GradeError::io(&src, e))?;
        if kind.is_dir() {
            mirror(&src, &dst)?;
        } else if kind.is_symlink() {
            let target = std::fs::read_link(&src).map_err(|e| GradeError::io(&src, e))?;
            #[cfg(unix)]
            std::os::unix::fs::symlink(&target, &dst).map_err(|e| GradeError::io(&dst, e))?;
        } else {
            link_readable(&src, &dst)?;
        }
    }
    Ok(())
}

/// `to` as a hard link to `from` when everyone may read it (a sandbox's own user, as root, is
/// not its owner), else as a readable copy (the teacher's file keeps its permissions).
fn link_readable(from: &Path, to: &Path) -> Result<()> {
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(from)
            .map_err(|e| GradeError::io(from, e))?
            .permissions()
            .mode();
        if mode & 0o004 == 0 {
            std::fs::copy(from, to).map_err(|e| GradeError::io(to, e))?;
            return std::fs::set_permissions(to, std::fs::Permissions::from_mode(mode | 0o444))
                .map_err(|e| GradeError::io(to, e));
        }
    }
    if std::fs::hard_link(from, to).is_err() {
        std::fs::copy(from, to).map_err(|e| GradeError::io(to, e))?;
    }
    Ok(())
}

/// `libfoo_bar-0123abcd.rlib` → `foo_bar`; `None` for anything that is not a compiled library.
pub fn library_crate(file: &str) -> Option<&str> {
    let stem = file
        .strip_suffix(".rlib")
        .or_else(|| file.strip_suffix(".rmeta"))
        .or_else(|| file.strip_suffix(".so"))?;
    let name = stem.strip_prefix("lib")?;
    Some(name.rsplit_once('-').map_or(name, |(n, _)| n))
}

fn touch(path: &Path) -> Result<()> {
    let file = std::fs::File::options()
        .write(true)
        .open(path)
        .map_err(|e| GradeError::io(path, e))?;
    file.set_modified(std::time::SystemTime::now())
        .map_err(|e| GradeError::io(path, e))
}

/// Makes `to` a copy of the handout part of `teacher` (see the module's documentation). Files
/// already equal (length and modification time) are left alone, files the teacher no longer has
/// are removed.
pub fn stage(teacher: &Path, to: &Path) -> Result<()> {
    std::fs::create_dir_all(to).map_err(|e| GradeError::io(to, e))?;
    let mut kept = BTreeSet::new();
    for name in COPIED {
        let from = teacher.join(name);
        if from.exists() {
            copy_tree(&from, &to.join(name), Path::new(name), &mut kept)?;
        }
    }
    remove_others(to, to, &kept)?;
    Ok(())
}

fn copy_tree(from: &Path, to: &Path, rel: &Path, kept: &mut BTreeSet<PathBuf>) -> Result<()> {
    let meta = std::fs::metadata(from).map_err(|e| GradeError::io(from, e))?;
    if meta.is_dir() {
        std::fs::create_dir_all(to).map_err(|e| GradeError::io(to, e))?;
        for entry in std::fs::read_dir(from).map_err(|e| GradeError::io(from, e))? {
            let entry = entry.map_err(|e| GradeError::io(from, e))?;
            let name = entry.file_name();
            if name != "target" && name != ".git" {
                copy_tree(&entry.path(), &to.join(&name), &rel.join(&name), kept)?;
            }
        }
        return Ok(());
    }
    let modified = meta.modified().map_err(|e| GradeError::io(from, e))?;
    let bytes = if rel == Path::new("Cargo.toml") {
        Some(without_solutions(from)?)
    } else if rel.starts_with("exercises") && rel.ends_with("Cargo.toml") {
        Some(renamed_manifest(from)?)
    } else {
        // What a sandbox sees is what students were handed: no teacher-only file, no
        // teacher-only passage (`--make-handout`'s rules), whatever a student's code reads.
        // Hidden tests stay out of every tree a student's compilation sees.
        let parts: Vec<_> = rel.components().collect();
        if parts.len() == 5 && rel.starts_with("exercises") && rel.ends_with("tests/hidden.rs") {
            return Ok(());
        }
        let text_like = matches!(
            rel.extension().and_then(|e| e.to_str()),
            Some("md" | "ipynb" | "sh" | "py" | "txt" | "json" | "yml" | "yaml")
        ) || rel.extension().is_none();
        if text_like && meta.len() < 4 << 20 {
            let raw = std::fs::read(from).map_err(|e| GradeError::io(from, e))?;
            if crate::handout_export::teacher_only(&raw) {
                return Ok(());
            }
            match std::str::from_utf8(&raw) {
                Ok(text) if text.contains(crate::handout_export::OPEN) => {
                    Some(crate::handout_export::strip_teacher_only(text).into_bytes())
                }
                _ => None,
            }
        } else {
            None
        }
    };
    kept.insert(rel.to_path_buf());
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
    // Readable by a sandbox's own user (as root), whatever the teacher's umask.
    #[cfg(unix)]
    {
        use std::os::unix::fs::PermissionsExt;
        let mode = meta.permissions().mode() | 0o444;
        file.set_permissions(std::fs::Permissions::from_mode(mode))
            .map_err(|e| GradeError::io(to, e))?;
    }
    Ok(())
}

fn remove_others(root: &Path, dir: &Path, kept: &BTreeSet<PathBuf>) -> Result<()> {
    for entry in std::fs::read_dir(dir).map_err(|e| GradeError::io(dir, e))? {
        let entry = entry.map_err(|e| GradeError::io(dir, e))?;
        let path = entry.path();
        let rel = path.strip_prefix(root).unwrap_or(&path).to_path_buf();
        let is_dir = entry.file_type().is_ok_and(|t| t.is_dir());
        if is_dir {
            // Cargo writes its lock file here, and nothing of the teacher's is ever in target/.
            if rel != Path::new("target") {
                remove_others(root, &path, kept)?;
                if std::fs::read_dir(&path).is_ok_and(|mut d| d.next().is_none()) {
                    let _ = std::fs::remove_dir(&path);
                }
            }
        } else if !kept.contains(&rel) && rel != Path::new("Cargo.lock") {
            std::fs::remove_file(&path).map_err(|e| GradeError::io(&path, e))?;
        }
    }
    Ok(())
}

/// The workspace's `Cargo.toml` without the `solutions/` members.
fn without_solutions(path: &Path) -> Result<Vec<u8>> {
    edit_manifest(path, |manifest| {
        if let Some(members) = manifest
            .get_mut("workspace")
            .and_then(|w| w.get_mut("members"))
            .and_then(|m| m.as_array_mut())
        {
            members.retain(|m| !m.as_str().is_some_and(|m| m.starts_with("solutions")));
        }
    })
}

/// An exercise's `Cargo.toml` with the version `<v>-pristine` (see the module's documentation).
fn renamed_manifest(path: &Path) -> Result<Vec<u8>> {
    edit_manifest(path, |manifest| {
        let Some(package) = manifest.get_mut("package").and_then(|p| p.as_table_mut()) else {
            return;
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
    })
}

fn edit_manifest(path: &Path, edit: impl FnOnce(&mut toml::Table)) -> Result<Vec<u8>> {
    let text = std::fs::read_to_string(path).map_err(|e| GradeError::io(path, e))?;
    let bad = |message: String| GradeError::BadSpec {
        path: path.to_path_buf(),
        message,
    };
    let mut manifest: toml::Table = toml::from_str(&text).map_err(|e| bad(e.to_string()))?;
    edit(&mut manifest);
    Ok(toml::to_string(&manifest)
        .map_err(|e| bad(e.to_string()))?
        .into_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn library_files_are_recognised_by_crate() {
        assert_eq!(library_crate("libworkbook-7c667f.rlib"), Some("workbook"));
        assert_eq!(library_crate("libserde_derive-1a.so"), Some("serde_derive"));
        assert_eq!(library_crate("libfoo-1.rmeta"), Some("foo"));
        assert_eq!(library_crate("ex01_1_fix_the_mismatch-2d81d7"), None);
        assert_eq!(library_crate("libworkbook-7c.d"), None);
    }

    #[test]
    fn the_staged_tree_has_no_solutions() {
        let teacher = tempfile::tempdir().unwrap();
        let t = teacher.path();
        std::fs::write(
            t.join("Cargo.toml"),
            "[workspace]\nmembers = [\"crates/a\", \"exercises/*/*\", \"solutions/*/*\"]\n",
        )
        .unwrap();
        for dir in ["crates/a", "exercises/01-x/1-y", "solutions/01-x/1-y"] {
            std::fs::create_dir_all(t.join(dir)).unwrap();
            std::fs::write(
                t.join(dir).join("Cargo.toml"),
                "[package]\nname = \"p\"\nversion = \"0.1.0\"\n",
            )
            .unwrap();
        }
        let staged = tempfile::tempdir().unwrap();
        let s = staged.path().join("h");
        stage(t, &s).unwrap();
        assert!(!s.join("solutions").exists());
        let root = std::fs::read_to_string(s.join("Cargo.toml")).unwrap();
        assert!(root.contains("exercises/*/*") && !root.contains("solutions"));
        let ex = std::fs::read_to_string(s.join("exercises/01-x/1-y/Cargo.toml")).unwrap();
        assert!(ex.contains("0.1.0-pristine"));
        // a file the teacher deleted goes from the staged tree too
        std::fs::write(s.join("crates/a/stale.rs"), "").unwrap();
        stage(t, &s).unwrap();
        assert!(!s.join("crates/a/stale.rs").exists());
    }
}
