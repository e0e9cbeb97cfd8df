//! Draws `data_parallel.svg` for chapter 6: GCN on Cora trained data-parallel over 1 to 4
//! simulated devices (a global batch of 120 seeds, `[10, 10]` neighbours; epochs 2 to 4
//! measured), bytes per step by kind from the ledger and time per step.
//!
//! ```sh
//! cargo run --release -p workbook-lessons --example data_parallel_figure -- book/src/figures
//! ```

use std::path::PathBuf;
use workbook::{datasets, Placement};
use workbook_lessons::figures::{draw_data_parallel, measure_data_parallel};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let out = PathBuf::from(std::env::args().nth(1).unwrap_or_else(|| ".".into()));
    let graph = datasets::load("cora", None, Placement::cpu())?;
    let points = measure_data_parallel(&graph, &[1, 2, 3, 4], 120, 3)?;
    for p in &points {
        eprintln!(
            "{} device(s): {} steps, per step {:.0} B batch parts, {:.0} B reduce, {:.0} B broadcast, {:.2} ms",
            p.devices, p.steps, p.batch_bytes, p.reduce_bytes, p.broadcast_bytes, p.step_ms
        );
    }
    let path = out.join("data_parallel.svg");
    draw_data_parallel(
        &path,
        "Data-parallel GCN on Cora, global batch 120, [10, 10] (sim devices)",
        &points,
    )?;
    eprintln!("wrote {}", path.display());
    Ok(())
}
