// Exercise 03-2: the file you edit. (Its module docs are in `src/lib.rs`: the graded tests compile
// this file on its own with `include!`, where `//!` comments are not allowed.)

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use workbook::{GatV2Conv, GatV2Output, Result};
use workbook_lessons::threads::serving::Request;

/// A GATv2 layer for serving: it remembers its answers by request name, so a request that comes
/// again is answered without a forward pass, and it counts the requests it served.
///
/// Meant to be built once and shared by every serving thread (`Arc<CachedGatV2>`).
#[derive(Debug)]
pub struct CachedGatV2 {
    conv: GatV2Conv,
    // TODO: a `RefCell`'s borrow counter is a plain integer: two threads must never touch it at once. Use a thread-safe container.
    answers: RefCell<HashMap<String, GatV2Output>>,
    // TODO: two threads doing `set(get() + 1)` at once lose updates. Count so that concurrent increments are never lost.
    served: Cell<usize>,
}

// Without the next line, handing an `Arc<CachedGatV2>` to another thread does not compile (E0277:
// "`RefCell<HashMap<String, GatV2Output>>` cannot be shared between threads safely"). Someone
// silenced the compiler by promising that sharing is safe. Nothing here backs that promise.
// TODO: no `unsafe` here: once every field is `Sync`, the compiler derives `Sync` for the layer by itself.
// SAFETY: none. This is the bug of the exercise: `RefCell` and `Cell` are not thread-safe, so the
// promise is false and two threads calling `answer` at once are undefined behaviour.
unsafe impl Sync for CachedGatV2 {}

impl CachedGatV2 {
    /// Wraps `conv` with an empty cache.
    pub fn new(conv: GatV2Conv) -> Self {
        Self {
            conv,
            answers: RefCell::new(HashMap::new()),
            served: Cell::new(0),
        }
    }

    /// The layer's output and attention on `request`'s graph: from the cache when a request
    /// with the same name was answered before, else computed (and cached).
    pub fn answer(&self, request: &Request) -> Result<GatV2Output> {
        self.served.set(self.served.get() + 1);
        if let Some(hit) = self.answers.borrow().get(&request.name) {
            return Ok(hit.clone());
        }
        let out = self.conv.forward(&request.x, &request.edge_index)?;
        self.answers
            .borrow_mut()
            .insert(request.name.clone(), out.clone());
        Ok(out)
    }

    /// How many requests `answer` was called for, by every thread together.
    pub fn served(&self) -> usize {
        self.served.get()
    }

    /// How many distinct requests (names) the cache holds.
    pub fn cached(&self) -> usize {
        self.answers.borrow().len()
    }
}
