//! The crate is a stack: `scripts/import_graph.py` draws the module import graph from the
//! source and checks it against the layer table of `src/lib.rs`'s doc (no import circle, no
//! import running up, every file in one layer). And the script itself finds both when they are
//! there, on small crates written here.

use std::path::{Path, PathBuf};
use std::process::Command;

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Runs the script with `python3` on `krate`; (exit code, stdout).
fn import_graph(krate: &Path) -> (i32, String) {
    let script = root().join("scripts/import_graph.py");
    let out = Command::new("python3")
        .arg(&script)
        .arg(krate)
        .arg("--check")
        .output()
        .unwrap_or_else(|e| {
            panic!(
                "python3 {} could not run ({e}); install Python 3",
                script.display()
            )
        });
    (
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr),
    )
}

#[test]
fn the_core_library_is_an_acyclic_stack() {
    let (code, out) = import_graph(Path::new(env!("CARGO_MANIFEST_DIR")));
    assert_eq!(code, 0, "{out}");
    assert!(out.contains("no import circle"), "{out}");
    assert!(out.contains("0 import(s) running up"), "{out}");
}

/// A crate of `files` (path under src/, text) in a fresh directory.
fn krate(files: &[(&str, &str)]) -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    for (path, text) in files {
        let p = dir.path().join("src").join(path);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }
    dir
}

const TABLE: &str = "//! ```text\n//! layers (bottom to top):\n//! low: a\n//! high: b c\n//! ```\npub mod a;\npub mod b;\npub mod c;\n";

#[test]
fn the_script_finds_an_import_circle() {
    let dir = krate(&[
        ("lib.rs", TABLE),
        ("a.rs", "pub struct A;\n"),
        // b and c import each other, one of them through a re-export of a folder's face
        ("b.rs", "use crate::c::C;\npub struct B(C);\n"),
        ("c.rs", "pub struct C;\nfn f(_: crate::b::B) {}\n"),
    ]);
    let (code, out) = import_graph(dir.path());
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("import circle of 2 files: b, c"), "{out}");
}

#[test]
fn the_script_finds_an_import_running_up_and_a_file_in_no_layer() {
    let dir = krate(&[
        ("lib.rs", &format!("{TABLE}pub mod d;\n")),
        // `a` (low) reaches `b` (high) through a `use` tree, a comment does not count
        (
            "a.rs",
            "// crate::c::C is only mentioned here\nuse crate::{b::{self, B}};\n",
        ),
        ("b.rs", "pub struct B;\n"),
        ("c.rs", "/// [`crate::a`]\npub struct C(crate::b::B);\n"),
        ("d.rs", "pub struct D;\n"),
    ]);
    let (code, out) = import_graph(dir.path());
    assert_eq!(code, 1, "{out}");
    assert!(out.contains("1 import(s) running up"), "{out}");
    assert!(out.contains("a.rs:2: a (low) imports b (high)"), "{out}");
    assert!(out.contains("d.rs is in no layer"), "{out}");
}
