//! `--reorder rcm|rabbit`: renumber the graph in a locality-preserving node order before
//! writing it (`data`) or timing it (`bench`); see `workbook::reorder`.

use anyhow::{Context, Result};
use workbook::reorder::{reorder_graph, Order};
use workbook::Graph;

/// clap's value parser for `--reorder`.
pub fn parse(s: &str) -> Result<Order, String> {
    Order::parse(s).map_err(|e| e.to_string())
}

/// `graph` renumbered by `order` (unchanged without one), its name suffixed `@order` as
/// `datasets::load` names a reordered dataset, so reports tell the two numberings apart.
pub fn apply(graph: Graph, order: Option<Order>) -> Result<Graph> {
    let Some(order) = order else {
        return Ok(graph);
    };
    let started = std::time::Instant::now();
    let (mut reordered, _) = reorder_graph(&graph, order)
        .with_context(|| format!("reordering {} ({order})", graph.name))?;
    reordered.name = format!("{}@{order}", graph.name);
    eprintln!(
        "reordered {} in {order} order in {:.2} s",
        graph.name,
        started.elapsed().as_secs_f64()
    );
    Ok(reordered)
}
