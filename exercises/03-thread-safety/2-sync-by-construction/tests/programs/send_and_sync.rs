//! Graded program of exercise 03-2 (`is_send_and_sync_by_construction`, `build_only`): its test
//! is that it compiles. It includes your `src/sync_by_construction.rs` in a crate that forbids
//! `unsafe`, and hands your `CachedGatV2` to another thread through an `Arc`: that compiles only
//! if every field is thread-safe (a `RefCell` or a `Cell` is refused with E0277, which names the
//! field). Do not edit: the grader checks this file against its checksum.

#![forbid(unsafe_code)]

#[allow(dead_code)]
mod under_test {
    include!(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/src/sync_by_construction.rs"
    ));
}

use std::sync::Arc;
use under_test::CachedGatV2;

/// `std::thread::spawn`'s requirement, spelled out: what crosses to another thread is `Send`.
fn spawn<F, T>(f: F) -> std::thread::JoinHandle<T>
where
    F: FnOnce() -> T + Send + 'static,
    T: Send + 'static,
{
    std::thread::spawn(f)
}

fn serve(layer: Arc<CachedGatV2>) -> usize {
    let shared = Arc::clone(&layer);
    let other = spawn(move || shared.served());
    other.join().unwrap_or(0) + layer.cached()
}

fn main() {
    let _ = serve;
}
