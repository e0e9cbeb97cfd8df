//! Debug helpers: every parameter, buffer, optimiser state and graph tensor with its device,
//! dtype and shape.
//!
//! The usual advice for *"Expected all tensors to be on the same device"* in PyTorch is to
//! print `[(n, p.device) for n, p in model.named_parameters()]` and the same for buffers and
//! the batch. These helpers print that table for our types, with `sim:N` devices named.
//!
//! ```
//! use workbook::{datasets, inspect, placement::Placement, Model, ModelConfig};
//! let sim = Placement::sim(1);
//! let g = datasets::karate(&sim).unwrap();
//! let (model, _) = Model::init(ModelConfig::gcn(34, 4, 4), 0, &sim).unwrap();
//! let table = inspect::model_table(&model);
//! assert!(table.contains("conv1.lin.weight") && table.contains("sim:1") && table.contains("[4, 34]"));
//! assert!(inspect::graph_table(&g).contains("edge_index"));
//! ```

use crate::graph::Graph;
use crate::model::Model;
use crate::module::Module;
use crate::placement::Placement;
use crate::train::Adam;
use candle_core::Tensor;
use std::fmt::Write as _;

/// One tensor in a table (defined with [`Module::inspect_rows`], which makes them).
pub use crate::module::Row;

fn row(name: impl Into<String>, kind: &'static str, at: &Placement, t: &Tensor) -> Row {
    Row {
        name: name.into(),
        kind,
        device: at.to_string(),
        dtype: format!("{:?}", t.dtype()).to_lowercase(),
        shape: t.dims().to_vec(),
    }
}

/// The model's parameters and cached buffers, from the layer trait's declaration
/// ([`Module::inspect_rows`]).
pub fn model_rows(model: &Model) -> Vec<Row> {
    model.inspect_rows("")
}

/// The optimiser's state tensors.
pub fn optimizer_rows(opt: &Adam) -> Vec<Row> {
    let at = opt.state_placement();
    opt.state()
        .flat_map(|(name, m, v)| {
            [
                row(format!("exp_avg[{name}]"), "optimizer state", at, m),
                row(format!("exp_avg_sq[{name}]"), "optimizer state", at, v),
            ]
        })
        .collect()
}

/// The graph's tensors (`edge_index` is shown as its `[2, E]` shape).
pub fn graph_rows(graph: &Graph) -> Vec<Row> {
    let mut rows = Vec::new();
    for (part, at) in graph.placements() {
        use crate::graph::GraphPart::*;
        let t = match part {
            X => graph.x().clone(),
            EdgeIndex => graph.edge_index().sources().clone(),
            EdgeWeight => graph
                .edge_weight()
                .cloned()
                .unwrap_or_else(|| graph.x().clone()),
            Labels => graph.y().cloned().unwrap_or_else(|| graph.x().clone()),
            Masks => match graph.split() {
                Some(s) => s.train.clone(),
                None => continue,
            },
        };
        let mut r = row(part.name(), "input", at, &t);
        match part {
            EdgeIndex => r.shape = vec![2, graph.num_edges()],
            Masks => r.shape = vec![graph.num_nodes()],
            _ => {}
        }
        rows.push(r);
    }
    rows
}

/// Formats rows as an aligned table.
pub fn table(rows: &[Row]) -> String {
    let w = rows.iter().map(|r| r.name.len()).max().unwrap_or(4).max(4);
    let mut out = String::new();
    let _ = writeln!(
        out,
        "{:<w$}  {:<15}  {:<8}  {:<5}  shape",
        "name", "kind", "device", "dtype"
    );
    for r in rows {
        // A lazy layer's parameter has no shape until its first forward pass (PyTorch prints
        // `<UninitializedParameter>`); an empty list would read as a scalar.
        let shape = if r.kind == "uninitialised" {
            "? (first forward pass)".to_string()
        } else {
            format!("{:?}", r.shape)
        };
        let _ = writeln!(
            out,
            "{:<w$}  {:<15}  {:<8}  {:<5}  {shape}",
            r.name, r.kind, r.device, r.dtype
        );
    }
    out
}

/// [`table`] of [`model_rows`].
pub fn model_table(model: &Model) -> String {
    table(&model_rows(model))
}

/// [`table`] of [`graph_rows`].
pub fn graph_table(graph: &Graph) -> String {
    table(&graph_rows(graph))
}
