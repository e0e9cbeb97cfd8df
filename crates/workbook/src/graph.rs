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
use crate::placement::{bytes_of, inherit, Placed, Placement, Role};
use crate::unchecked_graph::UncheckedGraph;
use candle_core::{DType, Device, Tensor};

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

    /// The split as boolean masks of length `num_nodes`; an id not below `num_nodes` is an
    /// error naming the set and the id (the fields are public, so nothing else has checked).
    pub fn to_masks(&self, num_nodes: usize) -> Result<[Vec<bool>; 3]> {
        let mask = |name: &str, t: &Tensor| -> Result<Vec<bool>> {
            let mut m = vec![false; num_nodes];
            for id in t.to_vec1::<u32>()? {
                let slot = m.get_mut(id as usize).ok_or_else(|| {
                    WorkbookError::InvalidGraph(format!(
                        "{name} split names node {id} but the graph has {num_nodes} nodes: \
                         build the split from masks of length {num_nodes}"
                    ))
                })?;
                *slot = true;
            }
            Ok(m)
        };
        Ok([
            mask("train", &self.train)?,
            mask("val", &self.val)?,
            mask("test", &self.test)?,
        ])
    }

    fn move_to(&self, to: &Placement, from: &Placement, what: &str) -> Result<Self> {
        let mut m = to.move_tensors(&[&self.train, &self.val, &self.test], from, what)?;
        let test = m.pop().expect("three tensors moved");
        let val = m.pop().expect("three tensors moved");
        let train = m.pop().expect("three tensors moved");
        Ok(Self { train, val, test })
    }
}

/// The parts of a [`Graph`], for moving one part on its own ([`Graph::move_part`]) and for
/// naming the culprit of a device mismatch.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GraphPart {
    X,
    EdgeIndex,
    EdgeWeight,
    Labels,
    Masks,
}

impl GraphPart {
    /// The part's name as PyG's `Data` spells it.
    pub fn name(self) -> &'static str {
        match self {
            GraphPart::X => "x",
            GraphPart::EdgeIndex => "edge_index",
            GraphPart::EdgeWeight => "edge_weight",
            GraphPart::Labels => "y",
            GraphPart::Masks => "train_mask/val_mask/test_mask",
        }
    }
}

/// A graph for node classification.
#[derive(Clone, Debug)]
pub struct Graph {
    /// A short name for reports (`karate`, `cora`, ...).
    pub name: String,
    x: Tensor,
    x_at: Placement,
    edge_index: EdgeIndex,
    edge_weight: Option<(Tensor, Placement)>,
    y: Option<(Tensor, Placement)>,
    num_classes: usize,
    split: Option<(Split, Placement)>,
}

impl Graph {
    /// A graph with features `x` (`[N, F]`, float) and edges. `x` takes the edge index's
    /// placement when both are on the same candle device (so a graph built on `sim:1` is on
    /// `sim:1`); otherwise it keeps its own, and a model's pre-flight check will name it.
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
            x_at: inherit(&x, edge_index.placement()),
            x,
            edge_index,
            edge_weight: None,
            y: None,
            num_classes: 0,
            split: None,
        })
    }

    /// Checks a graph held as PyG's `Data` holds it and returns it as a checked `Graph`,
    /// before any kernel can meet a bad id: PyG's `data.validate(raise_on_error=True)`, which
    /// checks that the edge index has shape `[2, num_edges]`, that no id is negative and that
    /// none is `num_nodes` or more (`num_nodes` being the rows of `x`). The error names the
    /// first offending edge, its id, the node count and how many edges are wrong, and quotes
    /// PyG. The ids are read back to the host once (recorded in the ledger, as PyG's
    /// `edge_index.min()` / `.max()` are copies too); validate on the CPU, before moving the
    /// graph, to spare the copy.
    ///
    /// ```
    /// use workbook::{Graph, UncheckedGraph};
    /// use workbook::candle_core::{DType, Device, Tensor};
    /// let x = Tensor::zeros((3, 2), DType::F32, &Device::Cpu).unwrap();
    /// let ei = Tensor::new(&[[0i64, 1], [1, 2]], &Device::Cpu).unwrap();
    /// let graph = Graph::validate(&UncheckedGraph::new("tiny", x, ei)).unwrap();
    /// assert_eq!((graph.num_nodes(), graph.num_edges()), (3, 2));
    /// ```
    pub fn validate(data: &UncheckedGraph) -> Result<Self> {
        let (x, edge_index, at) = (data.x(), data.edge_index(), data.placement());
        let dims = edge_index.dims();
        if dims.len() != 2 || dims[0] != 2 {
            return Err(WorkbookError::InvalidGraph(format!(
                "edge_index must have shape [2, num_edges] (row 0 = sources, row 1 = targets), got {dims:?}; if you have [num_edges, 2], transpose it (PyG's data.validate() says \"ValueError: 'edge_index' needs to be of shape [2, num_edges] in 'Data' (found torch.Size({dims:?}))\")"
            )));
        }
        if !matches!(
            edge_index.dtype(),
            DType::I64 | DType::U32 | DType::I32 | DType::U8
        ) {
            return Err(WorkbookError::InvalidGraph(format!(
                "edge_index must hold integers (i64, i32, u32 or u8), got {:?}",
                edge_index.dtype()
            )));
        }
        let num_nodes = match x.dims() {
            [n, _] if x.dtype().is_float() => *n,
            other => {
                return Err(WorkbookError::InvalidGraph(format!(
                    "x must be a float tensor [num_nodes, num_features], got {:?} {other:?}; the node count is read from it (PyG's data.validate() says \"ValueError: 'num_nodes' is undefined in 'Data'\" when it has neither x nor num_nodes)",
                    x.dtype()
                )))
            }
        };
        let num_edges = dims[1];
        let flat = edge_index.flatten_all()?.to_dtype(DType::I64)?;
        let ids: Vec<i64> = at.fetch_vec1(
            &flat,
            &format!("{}.edge_index (Graph::validate)", data.name),
        )?;
        let (src, dst) = ids.split_at(num_edges);
        let out_of_range = |id: i64| id < 0 || id as u64 >= num_nodes as u64;
        // The first bad edge in edge order, checking its source before its target.
        let first = (0..num_edges).find_map(|e| {
            [(0, src[e]), (1, dst[e])]
                .into_iter()
                .find(|&(_, id)| out_of_range(id))
                .map(|(row, id)| (row, e, id))
        });
        if let Some((row, edge, id)) = first {
            return Err(WorkbookError::NodeIdOutOfRange {
                row,
                edge,
                id,
                num_nodes,
                count: (0..num_edges)
                    .filter(|&e| out_of_range(src[e]) || out_of_range(dst[e]))
                    .count(),
                num_edges,
                min: ids.iter().copied().min().unwrap_or(0),
                max: ids.iter().copied().max().unwrap_or(0),
            });
        }
        let edges = EdgeIndex::new(src, dst, num_nodes, at)?;
        Graph::new(data.name.clone(), x.clone(), edges)
    }

    /// Adds edge weights (`[E]`, float).
    pub fn with_edge_weight(mut self, w: Tensor) -> Result<Self> {
        self.edge_index.check_weight(&w)?;
        let at = inherit(&w, self.edge_index.placement());
        self.edge_weight = Some((w, at));
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
        let at = self.x_at.clone();
        let y = Tensor::from_vec(labels, n, at.device())?;
        at.record_upload(bytes_of(&y), "y");
        self.y = Some((y, at.clone()));
        let split_at = Placement::of(split.train.device());
        self.split = Some((
            split.move_to(&at, &split_at, "train_mask/val_mask/test_mask")?,
            at,
        ));
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
        self.edge_weight.as_ref().map(|(w, _)| w)
    }
    /// Labels `u32 [N]`, if any.
    pub fn y(&self) -> Option<&Tensor> {
        self.y.as_ref().map(|(y, _)| y)
    }
    /// The split, if any.
    pub fn split(&self) -> Option<&Split> {
        self.split.as_ref().map(|(s, _)| s)
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
    /// The candle device of the features.
    pub fn device(&self) -> &Device {
        self.x.device()
    }

    /// Where the features live; the graph's placement when all parts agree.
    pub fn placement(&self) -> &Placement {
        &self.x_at
    }

    /// Every part that is present, with its placement (for checks and debugging).
    pub fn placements(&self) -> Vec<(GraphPart, &Placement)> {
        let mut out = vec![
            (GraphPart::X, &self.x_at),
            (GraphPart::EdgeIndex, self.edge_index.placement()),
        ];
        if let Some((_, at)) = &self.edge_weight {
            out.push((GraphPart::EdgeWeight, at));
        }
        if let Some((_, at)) = &self.y {
            out.push((GraphPart::Labels, at));
        }
        if let Some((_, at)) = &self.split {
            out.push((GraphPart::Masks, at));
        }
        out
    }

    /// Checks that every part is on `expected` (described as `expected_what`, e.g. "model
    /// parameters"), naming the first part that is not.
    pub fn check_on(&self, expected_what: &str, expected: &Placement) -> Result<()> {
        let items: Vec<Placed> = self
            .placements()
            .into_iter()
            .map(|(part, at)| Placed::new(part.name(), Role::Input, at))
            .collect();
        crate::placement::check_all(expected_what, expected, &items)
    }

    /// A copy of the graph on `to` (PyG: `data.to(device)`, which also returns a copy). Each
    /// part's copy is recorded in the ledger (`graph.x`, `graph.edge_index`, ...); parts that
    /// are already there are not copied.
    pub fn to_device(&self, to: impl Into<Placement>) -> Result<Self> {
        let to = self.x_at.destination(&to.into());
        let mut g = self.clone();
        for part in [
            GraphPart::X,
            GraphPart::EdgeIndex,
            GraphPart::EdgeWeight,
            GraphPart::Labels,
            GraphPart::Masks,
        ] {
            g = g.move_part(part, &to)?;
        }
        Ok(g)
    }

    /// A copy with only `part` moved to `to`: PyG's `data.x = data.x.to(device)`. Moving one
    /// part and forgetting the others is the classic way to get a mismatch, which a model's
    /// pre-flight check then names.
    pub fn move_part(&self, part: GraphPart, to: &Placement) -> Result<Self> {
        let mut g = self.clone();
        let to = self.x_at.destination(to);
        let what = format!("{}.{}", self.name, part.name());
        match part {
            GraphPart::X => {
                g.x = to.move_tensor(&self.x, &self.x_at, &what)?;
                g.x_at = to;
            }
            GraphPart::EdgeIndex => g.edge_index = self.edge_index.to_device_named(&to, &what)?,
            GraphPart::EdgeWeight => {
                if let Some((w, at)) = &self.edge_weight {
                    g.edge_weight = Some((to.move_tensor(w, at, &what)?, to));
                }
            }
            GraphPart::Labels => {
                if let Some((y, at)) = &self.y {
                    g.y = Some((to.move_tensor(y, at, &what)?, to));
                }
            }
            GraphPart::Masks => {
                if let Some((s, at)) = &self.split {
                    g.split = Some((s.move_to(&to, at, &what)?, to));
                }
            }
        }
        Ok(g)
    }

    /// Labels as `i64` on the host.
    pub fn labels_host(&self) -> Result<Option<Vec<i64>>> {
        Ok(match self.y() {
            Some(y) => Some(y.to_vec1::<u32>()?.into_iter().map(i64::from).collect()),
            None => None,
        })
    }
}

/// The sizes the memory estimates ([`crate::limits`]) read.
impl crate::limits::GraphSize for Graph {
    fn label(&self) -> &str {
        &self.name
    }
    fn node_count(&self) -> usize {
        self.num_nodes()
    }
    fn edge_count(&self) -> usize {
        self.num_edges()
    }
}
