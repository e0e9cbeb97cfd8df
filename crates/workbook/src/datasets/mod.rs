//! Datasets: the embedded karate club, Planetoid Cora and CiteSeer, and synthetic CSBM graphs.
//!
//! [`load`] takes the names the CLI accepts: `karate`, `cora`, `citeseer`, `csbm:<nodes>`.
//!
//! ```
//! let g = workbook::datasets::load("csbm:300", None, &workbook::candle_core::Device::Cpu).unwrap();
//! assert_eq!(g.num_nodes(), 300);
//! assert!(workbook::datasets::load("mnist", None, &workbook::candle_core::Device::Cpu).is_err());
//! ```

pub mod csbm;
pub mod karate;
pub mod planetoid;

pub use csbm::{csbm, CsbmConfig};
pub use karate::karate;
pub use planetoid::{load_planetoid, load_planetoid_from, PlanetoidSource};

use crate::error::{Result, WorkbookError};
use crate::graph::Graph;
use crate::placement::Placement;
use std::path::Path;

/// Loads a dataset by name onto `device`. `data_dir` is where Planetoid files are looked for
/// (and downloaded to); `None` means the default cache (see [`planetoid::default_data_dir`]).
pub fn load(name: &str, data_dir: Option<&Path>, device: impl Into<Placement>) -> Result<Graph> {
    let device = device.into();
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
    if lower == "cora" || lower == "citeseer" {
        return Ok(load_planetoid(&lower, data_dir, &device)?.0);
    }
    Err(WorkbookError::UnknownDataset(name.to_string()))
}
