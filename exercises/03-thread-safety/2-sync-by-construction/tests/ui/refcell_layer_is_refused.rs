//! Graded by `refcell_and_cell_are_refused_across_threads`: the layer of exercise 03-2 as it was
//! before someone wrote `unsafe impl Sync`. Sharing it with another thread does not compile:
//! `RefCell` and `Cell` are not `Sync`, so `Arc<CachedGatV2>` is not `Send`.

use std::cell::{Cell, RefCell};
use std::collections::HashMap;
use std::sync::Arc;
use workbook::threads::serving::Request;
use workbook::{GatV2Conv, GatV2Output, Result};

struct CachedGatV2 {
    conv: GatV2Conv,
    answers: RefCell<HashMap<String, GatV2Output>>,
    served: Cell<usize>,
}

impl CachedGatV2 {
    fn answer(&self, request: &Request) -> Result<GatV2Output> {
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
}

/// `std::thread::spawn`'s own requirement, written out here: a closure that runs on another
/// thread must be `Send`. (Spelled out so that the compiler's note points into this file rather
/// than into the standard library's sources, which rustc quotes only when `rust-src` is
/// installed: the expected error is then the same on every machine.)
fn spawn<F, T>(f: F) -> std::thread::JoinHandle<T>
where
    F: FnOnce() -> T + Send + 'static,
    T: Send + 'static,
{
    std::thread::spawn(f)
}

fn serve(layer: CachedGatV2, mine: Request, theirs: Request) -> Result<()> {
    let layer = Arc::new(layer);
    let shared = Arc::clone(&layer);
    let other = spawn(move || shared.answer(&theirs));
    layer.answer(&mine)?;
    let _ = other.join();
    Ok(())
}

fn main() {
    let _ = serve;
}
