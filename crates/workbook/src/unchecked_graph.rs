//! A graph as PyG's `Data` holds it: a feature tensor and a raw `[2, E]` edge index, nothing
//! checked.
//!
//! `Data(x=x, edge_index=edge_index)` takes any tensors: an id that is not a node (counted from
//! 1, or kept from the whole graph in a subgraph) is met only by the kernel that gathers with
//! it, on a GPU as a device-side assert reported somewhere else (see [`crate::sim_device`]).
//! PyG's remedy is `data.validate(raise_on_error=True)`, which checks the edge index's shape,
//! that no id is negative and that none is `num_nodes` or more. Here that is
//! [`Graph::validate`](crate::graph::Graph::validate), which checks the same, names the first
//! offending edge, its id and the node count, and returns the checked [`Graph`](crate::Graph)
//! that every layer of this crate takes. An `UncheckedGraph` is for code that works on the raw
//! tensors, as a reader's own layer does with [`crate::ops::raw_index`].
//!
//! ```
//! use workbook::{Graph, UncheckedGraph};
//! use workbook::candle_core::{Device, Tensor};
//! let x = Tensor::zeros((3, 2), workbook::candle_core::DType::F32, &Device::Cpu).unwrap();
//! let edge_index = Tensor::new(&[[0i64, 1], [1, 3]], &Device::Cpu).unwrap(); // 3 is no node
//! let data = UncheckedGraph::new("tiny", x, edge_index); // accepted, as by PyG's Data
//! let err = Graph::validate(&data).unwrap_err().to_string();
//! assert!(err.starts_with("edge_index[1][1] = 3 is not a node id: the graph has 3 nodes"));
//! ```

use crate::error::Result;
use crate::placement::Placement;
use candle_core::Tensor;

/// Node features and a raw `[2, E]` edge index, as PyG's `Data` holds them; see the
/// [module](self) documentation.
#[derive(Clone, Debug)]
pub struct UncheckedGraph {
    /// A short name for reports and the ledger.
    pub name: String,
    x: Tensor,
    edge_index: Tensor,
    at: Placement,
}

impl UncheckedGraph {
    /// Features `x` and an `edge_index`, on the device of `x` (the CPU for host tensors), as
    /// they are: nothing is checked, not even the shapes (PyG: `Data(x=x, edge_index=ei)`).
    pub fn new(name: impl Into<String>, x: Tensor, edge_index: Tensor) -> Self {
        Self {
            name: name.into(),
            at: Placement::of(x.device()),
            x,
            edge_index,
        }
    }

    /// A copy on `to` (PyG: `data.to(device)`), each tensor's copy recorded in the ledger.
    pub fn to_device(&self, to: impl Into<Placement>) -> Result<Self> {
        let to = self.at.destination(&to.into());
        let x = to.move_tensor(&self.x, &self.at, &format!("{}.x", self.name))?;
        let edge_index = to.move_tensor(
            &self.edge_index,
            &self.at,
            &format!("{}.edge_index", self.name),
        )?;
        Ok(Self {
            name: self.name.clone(),
            x,
            edge_index,
            at: to,
        })
    }

    /// The features, unchecked.
    pub fn x(&self) -> &Tensor {
        &self.x
    }

    /// The edge index, unchecked (PyG's layout: row 0 the sources, row 1 the targets).
    pub fn edge_index(&self) -> &Tensor {
        &self.edge_index
    }

    /// Where both tensors live.
    pub fn placement(&self) -> &Placement {
        &self.at
    }
}
