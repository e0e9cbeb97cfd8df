//! Graded tests for exercise 03-2 (points in exercise.toml). Do not edit: the grader checks this
//! file against its checksum.
//!
//! Two tests compile *your* `src/sync_by_construction.rs` into small programs with trybuild (in
//! a crate that forbids `unsafe`), because a layer that is not `Send + Sync` must cost those
//! tests' points, not stop the whole exercise from compiling. The programs are written at test
//! time from `tests/programs/`, with the path of your file in them. The first such build
//! compiles the workbook's dependencies once (a few minutes); run
//! `cargo test -p ex03-2-sync-by-construction --lib` to see the compiler's full output.

use std::path::{Path, PathBuf};
use std::sync::Once;

/// The file under test, from whichever tree (exercises/ or solutions/) is being graded.
const SOURCE_PATH: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/src/sync_by_construction.rs");
const SOURCE: &str = include_str!(concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/src/sync_by_construction.rs"
));

/// The exercise folder (the program templates live there), from either tree.
fn exercise_dir() -> PathBuf {
    Path::new(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../../exercises/03-thread-safety/2-sync-by-construction"
    ))
    .canonicalize()
    .expect("the exercise folder exists")
}

/// The code of `text` without comments, as identifier-like words.
fn words(text: &str) -> Vec<String> {
    let mut code = String::new();
    let mut rest = text;
    while !rest.is_empty() {
        if let Some(after) = rest.strip_prefix("//") {
            rest = after.find('\n').map_or("", |i| &after[i..]);
        } else if let Some(after) = rest.strip_prefix("/*") {
            rest = after.find("*/").map_or("", |i| &after[i + 2..]);
            code.push(' ');
        } else {
            let c = rest.chars().next().expect("not empty");
            code.push(c);
            rest = &rest[c.len_utf8()..];
        }
    }
    code.split(|c: char| !(c.is_alphanumeric() || c == '_'))
        .filter(|w| !w.is_empty())
        .map(str::to_string)
        .collect()
}

/// Writes `tests/programs/{template}` with the path of the file under test filled in, into a
/// fresh folder outside the exercise (graded files stay as shipped), and returns its path. A
/// program that fails writes why into `verdict.txt` beside it ("VERDICT" in the template).
fn program(template: &str) -> PathBuf {
    let text = std::fs::read_to_string(exercise_dir().join("tests/programs").join(template))
        .expect("the program template exists");
    assert!(
        text.contains("EXERCISE_SRC"),
        "{template} has no EXERCISE_SRC"
    );
    let dir = std::env::temp_dir().join(format!(
        "ex03-2-{}-{}",
        std::process::id(),
        template.trim_end_matches(".rs")
    ));
    std::fs::create_dir_all(&dir).expect("creating a folder for the generated program");
    let verdict = dir.join("verdict.txt");
    let text = text
        .replace("\"EXERCISE_SRC\"", &format!("{SOURCE_PATH:?}"))
        .replace(
            "\"VERDICT\"",
            &format!("{:?}", verdict.display().to_string()),
        );
    let path = dir.join(template);
    std::fs::write(&path, text).expect("writing the generated program");
    path
}

/// Builds and runs `program` with trybuild; `Err` when it did not build or did not succeed
/// (trybuild printed why, on stderr), with the program's own verdict when it wrote one.
fn build_and_run(program: &Path) -> Result<(), Option<String>> {
    static QUIET: Once = Once::new();
    QUIET.call_once(|| {
        // trybuild reports its failures itself, then panics with "1 of 1 tests failed"; keep
        // that panic out of the test's message, which says what it means instead.
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if !info
                .location()
                .is_some_and(|l| l.file().contains("trybuild"))
            {
                previous(info);
            }
        }));
    });
    // trybuild reads the manifest folder at run time: the programs always build against the
    // exercise's Cargo.toml, for exercises/ and solutions/ alike.
    std::env::set_var("CARGO_MANIFEST_DIR", exercise_dir());
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let cases = trybuild::TestCases::new();
        cases.pass(program);
        // trybuild builds and runs the case when `cases` is dropped, here.
    }))
    .map_err(|_| {
        let verdict = program.with_file_name("verdict.txt");
        std::fs::read_to_string(verdict).ok()
    });
    if let Some(dir) = program.parent() {
        let _ = std::fs::remove_dir_all(dir);
    }
    result
}

#[test]
fn no_unsafe_impl_of_sync_or_send() {
    let words = words(SOURCE);
    let lie = words
        .windows(3)
        .find(|w| w[0] == "unsafe" && w[1] == "impl")
        .map(|w| w[2].clone());
    if let Some(trait_name) = lie {
        panic!(
            "src/sync_by_construction.rs still has `unsafe impl {trait_name}`: delete it, and make the layer {trait_name} because its fields are"
        );
    }
}

#[test]
fn is_send_and_sync_by_construction() {
    // Your layer, in a crate that forbids `unsafe`, handed to another thread through an `Arc`:
    // it compiles only if every field is Send + Sync (a RefCell or a Cell is refused with E0277).
    let built = build_and_run(&program("send_and_sync.rs"));
    assert!(
        built.is_ok(),
        "your CachedGatV2 cannot be shared between threads without `unsafe`: the compiler refused it (E0277 names the field that is not Sync) or your file uses `unsafe`; make every field thread-safe (a Mutex for the map, an atomic for the count). `cargo test -p ex03-2-sync-by-construction --lib is_send_and_sync` prints the compiler's output"
    );
}

#[test]
fn shares_one_layer_across_threads() {
    // Your layer shared by threads that are made to collide: two threads call `answer` at the
    // same moment, and every read of an atomic counter waits until the other thread has read it
    // too, the interleaving that loses an update when the increment is a load then a store.
    // Then 4 threads answer 100 requests on 5 graphs, checked against the sequential answers.
    match build_and_run(&program("share_across_threads.rs")) {
        Ok(()) => {}
        Err(Some(verdict)) => panic!("{}", verdict.trim()),
        Err(None) => panic!(
            "your CachedGatV2 did not compile without `unsafe` (or its program crashed), so it could not be shared between threads; `cargo test -p ex03-2-sync-by-construction --lib shares_one_layer` prints the compiler's output"
        ),
    }
}
