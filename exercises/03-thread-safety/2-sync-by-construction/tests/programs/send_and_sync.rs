//! Written out by `is_send_and_sync_by_construction` (tests/grade.rs), with "EXERCISE_SRC"
//! replaced by the path of your `src/sync_by_construction.rs`. It compiles only if your
//! `CachedGatV2` is Send + Sync without `unsafe`: a serving thread gets it through an `Arc`.

#![forbid(unsafe_code)]

#[allow(dead_code)]
mod under_test {
    include!("EXERCISE_SRC");
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
