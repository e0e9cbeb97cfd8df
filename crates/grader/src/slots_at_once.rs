//! Work spread over `jobs` threads, each with a slot number of its own (`0..jobs`): how a class's
//! students and `--wrong`'s references and known-wrong solutions are graded several at a time,
//! each in its own [`crate::slot`] and sandbox.
//!
//! Results come back in the items' order, whatever order they finished in, so a report written
//! from them is the same for one job as for several.
//!
//! ```
//! use std::sync::Mutex;
//! let busy = Mutex::new(std::collections::BTreeSet::new());
//! let squares = grader::slots_at_once::each(&[1, 2, 3, 4, 5], 2, |n, slot| {
//!     // no two items run in the same slot at the same time
//!     assert!(busy.lock().unwrap().insert(slot));
//!     let square = n * n;
//!     busy.lock().unwrap().remove(&slot);
//!     (square, slot < 2)
//! });
//! assert_eq!(squares, [(1, true), (4, true), (9, true), (16, true), (25, true)]);
//! ```

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

/// Runs `work(item, slot)` for every item of `items`, `jobs` at a time (at least one, at most
/// one per item), each thread under its own `slot` in `0..jobs`; the results in `items`' order.
/// A panic in `work` reaches the caller once the other threads have ended.
pub fn each<T: Sync, R: Send>(
    items: &[T],
    jobs: usize,
    work: impl Fn(&T, usize) -> R + Sync,
) -> Vec<R> {
    let next = AtomicUsize::new(0);
    let done: Mutex<Vec<Option<R>>> = Mutex::new(items.iter().map(|_| None).collect());
    std::thread::scope(|scope| {
        for slot in 0..jobs.clamp(1, items.len().max(1)) {
            let (next, done, work) = (&next, &done, &work);
            scope.spawn(move || loop {
                let k = next.fetch_add(1, Ordering::Relaxed);
                let Some(item) = items.get(k) else { break };
                let result = work(item, slot);
                done.lock().unwrap_or_else(|p| p.into_inner())[k] = Some(result);
            });
        }
    });
    done.into_inner()
        .unwrap_or_else(|p| p.into_inner())
        .into_iter()
        .map(|r| r.expect("every item was taken by a thread, and the scope joined them all"))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::each;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::time::{Duration, Instant};

    #[test]
    fn runs_jobs_at_once_and_keeps_the_order() {
        let running = AtomicUsize::new(0);
        let most = AtomicUsize::new(0);
        let items: Vec<u64> = (0..8).collect();
        let out = each(&items, 3, |&k, _| {
            let now = running.fetch_add(1, Ordering::SeqCst) + 1;
            most.fetch_max(now, Ordering::SeqCst);
            // the first three wait for each other (a bounded wait: with fewer threads the
            // assertion below fails instead of the test hanging)
            let begun = Instant::now();
            while k < 3
                && most.load(Ordering::SeqCst) < 3
                && begun.elapsed() < Duration::from_secs(10)
            {
                std::thread::sleep(Duration::from_millis(1));
            }
            // later items finish first: the order must still be the items'
            std::thread::sleep(Duration::from_millis(16 - 2 * k));
            running.fetch_sub(1, Ordering::SeqCst);
            k * 10
        });
        assert_eq!(out, [0, 10, 20, 30, 40, 50, 60, 70]);
        assert_eq!(
            most.load(Ordering::SeqCst),
            3,
            "three at a time, never more"
        );
    }

    #[test]
    fn zero_jobs_is_one_and_no_items_is_nothing() {
        assert_eq!(each(&[7], 0, |&x, slot| (x, slot)), [(7, 0)]);
        assert!(each(&[] as &[u8], 4, |&x, _| x).is_empty());
        // never more threads (slots) than items
        assert_eq!(each(&[1, 2], 8, |_, slot| slot < 2), [true, true]);
    }
}
