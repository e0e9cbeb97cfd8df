//! Graded tests for exercise 03-2 (points in exercise.toml). Do not edit: the grader checks this
//! file against its checksum.
//!
//! Two tests compile small programs with trybuild (`tests/ui/`): one that the compiler must
//! refuse, with exactly the error in its `.stderr` file, and one that puts *your*
//! `src/sync_by_construction.rs` in a crate that forbids `unsafe` and shares your layer between
//! threads. The first such build compiles the workbook's dependencies once (a few minutes); run
//! `cargo test -p ex03-2-sync-by-construction --lib` to see the compiler's full output.

use std::path::{Path, PathBuf};
use std::sync::Once;

/// The file under test, from whichever tree (exercises/ or solutions/) is being graded.
const SOURCE_PATH: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/src/sync_by_construction.rs");
const SOURCE: &str = include_str!(concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/src/sync_by_construction.rs"
));

/// The exercise folder (the ui programs and their expected errors live there), from either tree.
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

/// Runs trybuild cases; `Err` when one failed (trybuild printed why, on stderr).
fn trybuild(add_cases: impl FnOnce(&trybuild::TestCases)) -> Result<(), ()> {
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
    // trybuild reads these at run time. The ui programs always build in the exercise's folder,
    // so the expected errors read the same for exercises/ and solutions/; EXERCISE_SRC is the
    // file under test, which a program pulls in with `include!(env!("EXERCISE_SRC"))`.
    std::env::set_var("CARGO_MANIFEST_DIR", exercise_dir());
    std::env::set_var("EXERCISE_SRC", SOURCE_PATH);
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        let cases = trybuild::TestCases::new();
        add_cases(&cases);
        // trybuild builds and checks the cases when `cases` is dropped, here.
    }))
    .map_err(drop)
}

fn ui(name: &str) -> PathBuf {
    exercise_dir().join("tests/ui").join(name)
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
fn refcell_and_cell_are_refused_across_threads() {
    let words = words(SOURCE);
    let found: Vec<&str> = ["RefCell", "Cell", "UnsafeCell", "OnceCell"]
        .into_iter()
        .filter(|name| words.iter().any(|w| w == name))
        .collect();
    if !found.is_empty() {
        panic!(
            "src/sync_by_construction.rs still uses `{}`, not Sync: the compiler refuses to share such a layer between threads (the E0277 in tests/ui/refcell_layer_is_refused.stderr); use a Mutex and an AtomicUsize",
            found.join("` and `")
        );
    }
    // The design you replaced, without its `unsafe impl`: the compiler must refuse it, with
    // exactly the error checked in beside it.
    let refused = trybuild(|t| t.compile_fail(ui("refcell_layer_is_refused.rs")));
    assert!(
        refused.is_ok(),
        "tests/ui/refcell_layer_is_refused.rs did not fail to compile with the E0277 in its .stderr (a different toolchain? run `cargo test -p ex03-2-sync-by-construction --lib` to see the difference)"
    );
}

#[test]
fn shares_one_layer_across_threads() {
    if words(SOURCE).iter().any(|w| w == "unsafe") {
        panic!(
            "your layer is compiled with #![forbid(unsafe_code)], and src/sync_by_construction.rs still uses `unsafe`: make it Send + Sync without it"
        );
    }
    let shared = trybuild(|t| t.pass(ui("share_across_threads.rs")));
    assert!(
        shared.is_ok(),
        "CachedGatV2 could not be shared by 4 threads: with unsafe code forbidden it is not Send + Sync, or its answers or counts were wrong (`cargo test -p ex03-2-sync-by-construction --lib shares_one_layer` prints the compiler's or the program's output)"
    );
}
