//! The graph file format: one safetensors file per graph.
//!
//! | tensor | dtype, shape | |
//! |---|---|---|
//! | `x` | f32 `[N, F]` | required |
//! | `edge_index` | i64 or i32 `[2, E]` | required, PyG layout |
//! | `edge_weight` | f32 `[E]` | optional |
//! | `y` | i64 `[N]` | optional, with the masks |
//! | `train_mask`, `val_mask`, `test_mask` | u8/bool `[N]` | optional |
//!
//! From PyG: `save_file({"x": data.x, "edge_index": data.edge_index}, "g.safetensors")`.
//!
//! ```
//! use workbook::{datasets, Graph};
//! use workbook::candle_core::Device;
//! let dir = tempfile::tempdir().unwrap();
//! let path = dir.path().join("karate.safetensors");
//! let g = datasets::karate(&Device::Cpu).unwrap();
//! g.save(&path).unwrap();
//! let back = Graph::load(&path, &Device::Cpu).unwrap();
//! assert_eq!((back.num_nodes(), back.num_edges(), back.num_classes()), (34, 156, 4));
//! ```

use crate::edge_index::EdgeIndex;
use crate::error::{Result, WorkbookError};
use crate::graph::{Graph, Split};
use crate::placement::Placement;
use crate::tensor_file;
use candle_core::{DType, Device, Tensor};
use std::path::Path;

impl Graph {
    /// Reads a graph file (see the module docs) onto `device`. Features or edge weights with
    /// NaN or infinite values are refused (unless [`crate::non_finite::set_allowed`]).
    pub fn load(path: &Path, device: impl Into<Placement>) -> Result<Self> {
        let file = tensor_file::read(path, &Device::Cpu)?;
        let bad = |msg: String| WorkbookError::file(path, msg);
        let t = &file.tensors;
        let floats = ["x", "edge_weight"]
            .into_iter()
            .filter_map(|name| t.get(name).map(|v| (name, v)));
        crate::non_finite::check(&path.display().to_string(), floats)?;
        let x = t.get("x").ok_or_else(|| {
            bad("no tensor 'x' (node features, f32 [num_nodes, num_features])".into())
        })?;
        if x.rank() != 2 || !x.dtype().is_float() {
            return Err(bad(format!(
                "'x' must be float [num_nodes, num_features], got {:?} {:?}",
                x.dtype(),
                x.dims()
            )));
        }
        let x = x.to_dtype(DType::F32)?;
        let n = x.dims()[0];
        let ei = t
            .get("edge_index")
            .ok_or_else(|| bad("no tensor 'edge_index' (i64 [2, num_edges])".into()))?;
        let edge_index = EdgeIndex::from_tensor(ei, n).map_err(|e| bad(e.to_string()))?;
        let name = path
            .file_stem()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_else(|| "graph".into());
        let mut g = Graph::new(name, x, edge_index)?;
        if let Some(w) = t.get("edge_weight") {
            g = g
                .with_edge_weight(w.to_dtype(DType::F32)?)
                .map_err(|e| bad(e.to_string()))?;
        }
        if let Some(y) = t.get("y") {
            if y.dims() != [n] || y.dtype().is_float() {
                return Err(bad(format!(
                    "'y' must be integer [{n}], got {:?} {:?}",
                    y.dtype(),
                    y.dims()
                )));
            }
            let labels = y.to_dtype(DType::I64)?.to_vec1::<i64>()?;
            let mask = |name: &str| -> Result<Vec<bool>> {
                match t.get(name) {
                    None => Ok(vec![false; n]),
                    Some(m) if m.dims() == [n] => Ok(m
                        .to_dtype(DType::U8)?
                        .to_vec1::<u8>()?
                        .iter()
                        .map(|&v| v != 0)
                        .collect()),
                    Some(m) => Err(bad(format!(
                        "'{name}' must have shape [{n}], got {:?}",
                        m.dims()
                    ))),
                }
            };
            let split = Split::from_masks(
                &mask("train_mask")?,
                &mask("val_mask")?,
                &mask("test_mask")?,
                &Device::Cpu,
            )?;
            g = g
                .with_labels(&labels, split)
                .map_err(|e| bad(e.to_string()))?;
        }
        g.to_device(device)
    }

    /// Writes the graph atomically in the format above.
    pub fn save(&self, path: &Path) -> Result<()> {
        let cpu = Device::Cpu;
        let mut tensors = vec![
            ("x".to_string(), self.x().clone()),
            ("edge_index".to_string(), self.edge_index().to_tensor(&cpu)?),
        ];
        if let Some(w) = self.edge_weight() {
            tensors.push(("edge_weight".into(), w.clone()));
        }
        if let (Some(y), Some(split)) = (self.y(), self.split()) {
            tensors.push(("y".into(), y.to_dtype(DType::I64)?));
            let names = ["train_mask", "val_mask", "test_mask"];
            for (name, mask) in names.iter().zip(split.to_masks(self.num_nodes())?) {
                let bytes: Vec<u8> = mask.into_iter().map(u8::from).collect();
                let len = bytes.len();
                tensors.push((name.to_string(), Tensor::from_vec(bytes, len, &cpu)?));
            }
        }
        tensor_file::write(path, &tensors, None)
    }
}
