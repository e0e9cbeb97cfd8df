//! `cargo grade`: the grader for the workbook's exercises (`crates/grader`; the alias is in
//! `.cargo/config.toml`). A binary of its own with few dependencies, so that `cargo grade` builds
//! in seconds and never rebuilds the workbook just to start.

fn main() {
    grader::cli::main();
}
