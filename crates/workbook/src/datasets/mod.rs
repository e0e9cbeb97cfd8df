//! Datasets: the embedded karate club, Planetoid Cora and CiteSeer, and synthetic graphs: CSBM
//! (random edges) and k-nearest-neighbour graphs (local edges under random ids).
//!
//! [`load`] takes the names the CLI accepts: `karate`, `cora`, `citeseer`, `csbm:<nodes>`,
//! `knn:<nodes>`, each optionally followed by `@rcm` or `@rabbit` for the graph renumbered in that
//! node order ([`crate::reorder`]; the name keeps the suffix, so reports tell the two apart).
//!
//! ```
//! let g = workbook::datasets::load("csbm:300", None, &workbook::candle_core::Device::Cpu).unwrap();
//! assert_eq!(g.num_nodes(), 300);
//! let k = workbook::datasets::load("knn:300@rcm", None, &workbook::candle_core::Device::Cpu).unwrap();
//! assert_eq!((k.name.as_str(), k.num_edges()), ("knn:300@rcm", 3000));
//! assert!(workbook::datasets::load("mnist", None, &workbook::candle_core::Device::Cpu).is_err());
//! ```

pub mod csbm;
pub mod karate;
pub mod knn;
pub mod planetoid;

pub use csbm::{csbm, CsbmConfig};
pub use karate::karate;
pub use knn::{knn, KnnConfig};
pub use planetoid::{load_planetoid, load_planetoid_from, PlanetoidSource};

use crate::error::{Result, WorkbookError};
use crate::graph::Graph;
use crate::placement::Placement;
use crate::reorder::{reorder_graph, Order};
use std::path::Path;

/// Loads a dataset by name onto `device`. `data_dir` is where Planetoid files are looked for
/// (and downloaded to); `None` means the default cache (see [`planetoid::default_data_dir`]).
/// A name ending in `@rcm` or `@rabbit` loads the graph renumbered in that [`Order`] (the
/// permutation is dropped: use [`reorder_graph`] to keep it).
pub fn load(name: &str, data_dir: Option<&Path>, device: impl Into<Placement>) -> Result<Graph> {
    let device = device.into();
    if let Some((base, order)) = name.rsplit_once('@') {
        let order = Order::parse(order)?;
        let (mut graph, _) = reorder_graph(&load(base, data_dir, device)?, order)?;
        graph.name = format!("{}@{}", graph.name, order.name());
        return Ok(graph);
    }
    let lower = name.trim().to_ascii_lowercase();
    if lower == "karate" {
        return karate(&device);
    }
    if let Some(nodes) = lower.strip_prefix("csbm:") {
        let nodes: usize = nodes.replace('_', "").parse().map_err(|_| {
            WorkbookError::UnknownDataset(format!(
                "{name} (the part after csbm: must be a node count)"
            ))
        })?;
        return csbm(&CsbmConfig::new(nodes), &device);
    }
    if let Some(nodes) = lower.strip_prefix("knn:") {
        let nodes: usize = nodes.replace('_', "").parse().map_err(|_| {
            WorkbookError::UnknownDataset(format!(
                "{name} (the part after knn: must be a node count)"
            ))
        })?;
        return knn(&KnnConfig::new(nodes), &device);
    }
    if lower == "cora" || lower == "citeseer" {
        return Ok(load_planetoid(&lower, data_dir, &device)?.0);
    }
    Err(WorkbookError::UnknownDataset(name.to_string()))
}
