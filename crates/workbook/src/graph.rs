//! A node-classification graph: features, edges, optional weights, labels and split.
//!
//! A [`Graph`] is checked when it is built: features are `[N, F]` floats, the edge index refers
//! to exactly `N` nodes, edge weights have one entry per edge, labels one per node and the split
//! holds valid node ids. Every layer can then trust it.
//!
//! ```
//! use workbook::{Graph, EdgeIndex};
//! use workbook::candle_core::{Device, Tensor};
//! let dev = Device::Cpu;
//! let x = Tensor::new(&[[1f32, 0.], [0., 1.], [1., 1.]], &dev).unwrap();
//! let ei = EdgeIndex::new(&[0, 1], &[1, 2], 3, &dev).unwrap();
//! let g = Graph::new("tiny", x, ei).unwrap();
//! assert_eq!((g.num_nodes(), g.num_features(), g.num_edges()), (3, 2, 2));
//! ```

use crate::edge_index::EdgeIndex;
use crate::error::{Result, WorkbookError};
use candle_core::{Device, Tensor};

/// Node ids of the train / validation / test sets, as `u32` tensors.
#[derive(Clone, Debug)]
pub struct Split {
    pub train: Tensor,
    pub val: Tensor,
    pub test: Tensor,
}

impl Split {
    /// Builds a split from boolean masks of length `num_nodes`.
    pub fn from_masks(
        train: &[bool],
        val: &[bool],
        test: &[bool],
        device: &Device,
    ) -> Result<Self> {
        let ids = |m: &[bool]| -> Result<Tensor> {
            let v: Vec<u32> = m
                .iter()
                .enumerate()
                .filter(|(_, &b)| b)
                .map(|(i, _)| i as u32)
                .collect();
            let n = v.len();
            Ok(Tensor::from_vec(v, n, device)?)
        };
        Ok(Self {
            train: ids(train)?,
            val: ids(val)?,
            test: ids(test)?,
        })
    }

    /// The split as boolean masks of length `num_nodes`.
    pub fn to_masks(&self, num_nodes: usize) -> Result<[Vec<bool>; 3]> {
        let mask = |t: &Tensor| -> Result<Vec<bool>> {
            let mut m = vec![false; num_nodes];
            for id in t.to_vec1::<u32>()? {
                m[id as usize] = true;
            }
            Ok(m)
        };
        Ok([mask(&self.train)?, mask(&self.val)?, mask(&self.test)?])
    }

    fn to_device(&self, device: &Device) -> Result<Self> {
        Ok(Self {
            train: self.train.to_device(device)?,
            val: self.val.to_device(device)?,
            test: self.test.to_device(device)?,
        })
    }
}

/// A graph for node classification.
#[derive(Clone, Debug)]
pub struct Graph {
    /// A short name for reports (`karate`, `cora`, ...).
    pub name: String,
    x: Tensor,
    edge_index: EdgeIndex,
    edge_weight: Option<Tensor>,
    y: Option<Tensor>,
    num_classes: usize,
    split: Option<Split>,
}

impl Graph {
    /// A graph with features `x` (`[N, F]`, float) and edges.
    pub fn new(name: impl Into<String>, x: Tensor, edge_index: EdgeIndex) -> Result<Self> {
        let dims = x.dims();
        if dims.len() != 2 || !x.dtype().is_float() {
            return Err(WorkbookError::InvalidGraph(format!(
                "x must be a float tensor [num_nodes, num_features], got {:?} {dims:?}",
                x.dtype()
            )));
        }
        if dims[0] != edge_index.num_nodes() {
            return Err(WorkbookError::InvalidGraph(format!(
                "x has {} rows but edge_index was built for {} nodes",
                dims[0],
                edge_index.num_nodes()
            )));
        }
        Ok(Self {
            name: name.into(),
            x,
            edge_index,
            edge_weight: None,
            y: None,
            num_classes: 0,
            split: None,
        })
    }

    /// Adds edge weights (`[E]`, float).
    pub fn with_edge_weight(mut self, w: Tensor) -> Result<Self> {
        crate::layers::gcn_conv::check_edge_weight(&w, &self.edge_index)?;
        self.edge_weight = Some(w);
        Ok(self)
    }

    /// Adds labels (`0..num_classes`, one per node) and the split.
    pub fn with_labels(mut self, y: &[i64], split: Split) -> Result<Self> {
        let n = self.num_nodes();
        if y.len() != n {
            return Err(WorkbookError::InvalidGraph(format!(
                "y has {} labels but the graph has {n} nodes",
                y.len()
            )));
        }
        if let Some((i, &bad)) = y
            .iter()
            .enumerate()
            .find(|(_, &v)| v < 0 || v > u32::MAX as i64)
        {
            return Err(WorkbookError::InvalidGraph(format!(
                "y[{i}] = {bad} is not a class id (classes are 0, 1, 2, ...)"
            )));
        }
        for (name, ids) in [
            ("train", &split.train),
            ("val", &split.val),
            ("test", &split.test),
        ] {
            if let Some(&bad) = ids.to_vec1::<u32>()?.iter().find(|&&i| i as usize >= n) {
                return Err(WorkbookError::InvalidGraph(format!(
                    "{name} split names node {bad} but the graph has {n} nodes"
                )));
            }
        }
        self.num_classes = y.iter().copied().max().map_or(0, |m| m as usize + 1);
        let labels: Vec<u32> = y.iter().map(|&v| v as u32).collect();
        self.y = Some(Tensor::from_vec(labels, n, self.x.device())?);
        self.split = Some(split.to_device(self.x.device())?);
        Ok(self)
    }

    /// Node features `[N, F]`.
    pub fn x(&self) -> &Tensor {
        &self.x
    }
    /// The edges.
    pub fn edge_index(&self) -> &EdgeIndex {
        &self.edge_index
    }
    /// Edge weights `[E]`, if any.
    pub fn edge_weight(&self) -> Option<&Tensor> {
        self.edge_weight.as_ref()
    }
    /// Labels `u32 [N]`, if any.
    pub fn y(&self) -> Option<&Tensor> {
        self.y.as_ref()
    }
    /// The split, if any.
    pub fn split(&self) -> Option<&Split> {
        self.split.as_ref()
    }
    /// Number of classes (0 without labels).
    pub fn num_classes(&self) -> usize {
        self.num_classes
    }
    /// Number of nodes `N`.
    pub fn num_nodes(&self) -> usize {
        self.edge_index.num_nodes()
    }
    /// Number of edges `E`.
    pub fn num_edges(&self) -> usize {
        self.edge_index.num_edges()
    }
    /// Features per node `F`.
    pub fn num_features(&self) -> usize {
        self.x.dims()[1]
    }
    /// The device the tensors live on.
    pub fn device(&self) -> &Device {
        self.x.device()
    }

    /// A copy of the graph on `device` (PyG: `data.to(device)`, which also returns a copy).
    pub fn to_device(&self, device: &Device) -> Result<Self> {
        Ok(Self {
            name: self.name.clone(),
            x: self.x.to_device(device)?,
            edge_index: self.edge_index.to_device(device)?,
            edge_weight: self
                .edge_weight
                .as_ref()
                .map(|w| w.to_device(device))
                .transpose()?,
            y: self.y.as_ref().map(|y| y.to_device(device)).transpose()?,
            num_classes: self.num_classes,
            split: self
                .split
                .as_ref()
                .map(|s| s.to_device(device))
                .transpose()?,
        })
    }

    /// Labels as `i64` on the host.
    pub fn labels_host(&self) -> Result<Option<Vec<i64>>> {
        Ok(match &self.y {
            Some(y) => Some(y.to_vec1::<u32>()?.into_iter().map(i64::from).collect()),
            None => None,
        })
    }
}
