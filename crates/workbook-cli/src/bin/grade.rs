//! `cargo grade`: the grader for the workbook's exercises (`crates/grader`).
//!
//! It lives in this package, whose `default-run` is `workbook`, so that `cargo run` at the root
//! still runs the main job: Cargo cannot choose when two packages own a binary.

fn main() {
    grader::cli::main();
}
