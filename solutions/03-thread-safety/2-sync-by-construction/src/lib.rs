//! Exercise 03-2: Sync by construction, not by promise (book chapter 3, notebook
//! `notebooks/03-thread-safety.ipynb`).
//!
//! Edit only `src/sync_by_construction.rs`, at the `TODO:` markers; grade with `cargo grade 03-2`.

/// A GATv2 serving layer with an answer cache, shared by every serving thread.
///
/// Its first version kept the cache in a `RefCell` and the request count in a `Cell`. Sharing
/// it through `Arc` then failed to compile (E0277: "`RefCell<..>` cannot be shared between
/// threads safely"), and the error was silenced with `unsafe impl Sync`: a promise to the
/// compiler that nothing backs. Two threads calling `answer` at once now race on the
/// `RefCell`'s borrow counter, the `HashMap` and the `Cell`: undefined behaviour that no test
/// run is sure to show. The fix makes the layer `Sync` *because its fields are*.
///
/// (These docs live here because the graded tests compile `sync_by_construction.rs` on its own
/// with `include!`, where a file cannot start with `//!` comments.)
pub mod sync_by_construction;

// The graded tests. The path is written from the repository root so that the reference solution
// (solutions/…/src/lib.rs, this same file) compiles the very same tests: written once, no copy.
#[cfg(test)]
#[path = "../../../../exercises/03-thread-safety/2-sync-by-construction/tests/grade.rs"]
mod grade;
