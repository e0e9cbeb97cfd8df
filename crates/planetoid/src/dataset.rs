//! Reads the eight `ind.<name>.<part>` files of a Planetoid dataset and assembles them exactly as
//! PyTorch Geometric 2.8 does (`torch_geometric/io/planetoid.py`, `read_planetoid_data`),
//! followed by the `NormalizeFeatures` transform.
//!
//! The assembly, step by step:
//!
//! 1. `x = vstack(allx, tx)`, `y = argmax(vstack(ally, ty), axis=1)` (first maximum, so an
//!    all-zero row gets label 0), where the CSR matrices are made dense and all values are `f32`.
//! 2. CiteSeer only: some test nodes are isolated and absent from `tx`/`ty`, so both are first
//!    extended to `max(test) - min(test) + 1` zero rows with the real rows placed at
//!    `sorted(test) - min(test)`.
//! 3. The test rows are reordered: `x[test] = x[sorted(test)]`, and likewise `y`.
//! 4. Masks: training = the first `len(y)` nodes, validation = the next 500, test = the ids in
//!    `test.index`.
//! 5. Edges: one per `(node, neighbour)` entry of the graph dictionary; self-loops removed, then
//!    coalesced (sorted by `(src, dst)`, duplicates dropped).
//! 6. `NormalizeFeatures`: subtract the global minimum of `x`, then divide each row by
//!    `max(row_sum, 1)`.
//!
//! Beyond what PyG checks, every cross-file size is validated (feature and class counts agree,
//! one test id per `tx` row, ids in range and unique, …) so that a corrupt or mixed-up download
//! gives a clear [`PlanetoidError`] instead of a wrong dataset. One deliberate difference: PyG drops
//! the last line of `test.index` when the file lacks a final newline; this reader keeps it.
//!
//! ```no_run
//! use planetoid::{load, PlanetoidName};
//! let cora = load("data/planetoid", "cora".parse::<PlanetoidName>()?)?;
//! assert_eq!((cora.num_nodes, cora.num_features, cora.num_classes), (2708, 1433, 7));
//! assert_eq!(cora.num_edges(), 10556);
//! # Ok::<(), planetoid::PlanetoidError>(())
//! ```
//!
//! ```
//! use planetoid::{PlanetoidError, PlanetoidName, FILE_PARTS};
//! assert_eq!("CiteSeer".parse::<PlanetoidName>().unwrap(), PlanetoidName::CiteSeer);
//! assert_eq!(PlanetoidName::Cora.file_name(FILE_PARTS[6]), "ind.cora.graph");
//! let err = "pubmed".parse::<PlanetoidName>().unwrap_err();
//! assert!(matches!(err, PlanetoidError::UnsupportedName(_)));
//! ```

use std::fmt;
use std::io::Read;
use std::path::Path;
use std::str::FromStr;

use crate::error::{DecodeError, PlanetoidError, Result};
use crate::graph_dict::AdjacencyDict;
use crate::numpy::{self, NdArray};
use crate::pickle::Pickle;
use crate::scipy_sparse::{self, Csr, MAX_DENSE_ELEMENTS};

/// The eight file parts, in the order PyG reads them.
pub const FILE_PARTS: [&str; 8] = ["x", "tx", "allx", "y", "ty", "ally", "graph", "test.index"];

/// Largest file [`PlanetoidFiles::read_dir`] reads (256 MiB; the real files are below 1 MiB).
pub const MAX_FILE_BYTES: u64 = 256 << 20;

/// Number of validation nodes of the public split.
pub const NUM_VAL: usize = 500;

/// Most rows (nodes) a matrix file may have (16 Mi; Cora has 2,708 nodes, PubMed 19,717).
pub const MAX_NODES: usize = 1 << 24;

/// A supported Planetoid dataset.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum PlanetoidName {
    /// Cora: 2708 papers, 1433 word features, 7 classes.
    Cora,
    /// CiteSeer: 3327 papers, 3703 word features, 6 classes.
    CiteSeer,
}

impl PlanetoidName {
    /// Both datasets.
    pub const ALL: [PlanetoidName; 2] = [PlanetoidName::Cora, PlanetoidName::CiteSeer];

    /// The lower-case prefix used in file names: `cora`, `citeseer`.
    pub fn prefix(self) -> &'static str {
        match self {
            PlanetoidName::Cora => "cora",
            PlanetoidName::CiteSeer => "citeseer",
        }
    }

    /// The file name of a part, e.g. `ind.cora.test.index`.
    pub fn file_name(self, part: &str) -> String {
        format!("ind.{}.{part}", self.prefix())
    }
}

impl fmt::Display for PlanetoidName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            PlanetoidName::Cora => "Cora",
            PlanetoidName::CiteSeer => "CiteSeer",
        })
    }
}

impl FromStr for PlanetoidName {
    type Err = PlanetoidError;

    /// Parses `cora` or `citeseer`, ignoring case; `pubmed` gives
    /// [`PlanetoidError::UnsupportedName`], anything else [`PlanetoidError::UnknownName`].
    fn from_str(s: &str) -> Result<Self> {
        match s.trim().to_ascii_lowercase().as_str() {
            "cora" => Ok(PlanetoidName::Cora),
            "citeseer" => Ok(PlanetoidName::CiteSeer),
            "pubmed" => Err(PlanetoidError::UnsupportedName(s.to_string())),
            _ => Err(PlanetoidError::UnknownName(s.to_string())),
        }
    }
}

/// The raw bytes of the eight files of one dataset.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct PlanetoidFiles {
    /// `ind.<name>.x`: CSR features of the training nodes.
    pub x: Vec<u8>,
    /// `ind.<name>.tx`: CSR features of the test nodes.
    pub tx: Vec<u8>,
    /// `ind.<name>.allx`: CSR features of all labelled and unlabelled training nodes.
    pub allx: Vec<u8>,
    /// `ind.<name>.y`: one-hot labels of the training nodes.
    pub y: Vec<u8>,
    /// `ind.<name>.ty`: one-hot labels of the test nodes.
    pub ty: Vec<u8>,
    /// `ind.<name>.ally`: one-hot labels of the `allx` nodes.
    pub ally: Vec<u8>,
    /// `ind.<name>.graph`: the adjacency dictionary.
    pub graph: Vec<u8>,
    /// `ind.<name>.test.index`: test node ids, one per line.
    pub test_index: Vec<u8>,
}

impl PlanetoidFiles {
    /// The bytes of a part named as in [`FILE_PARTS`].
    pub fn part(&self, part: &str) -> Option<&[u8]> {
        Some(match part {
            "x" => &self.x,
            "tx" => &self.tx,
            "allx" => &self.allx,
            "y" => &self.y,
            "ty" => &self.ty,
            "ally" => &self.ally,
            "graph" => &self.graph,
            "test.index" => &self.test_index,
            _ => return None,
        })
    }

    /// Mutable access to a part named as in [`FILE_PARTS`].
    pub fn part_mut(&mut self, part: &str) -> Option<&mut Vec<u8>> {
        Some(match part {
            "x" => &mut self.x,
            "tx" => &mut self.tx,
            "allx" => &mut self.allx,
            "y" => &mut self.y,
            "ty" => &mut self.ty,
            "ally" => &mut self.ally,
            "graph" => &mut self.graph,
            "test.index" => &mut self.test_index,
            _ => return None,
        })
    }

    /// Reads `dir/ind.<name>.<part>` for every part. A missing file gives
    /// [`PlanetoidError::MissingFile`] naming it; files over [`MAX_FILE_BYTES`] are refused.
    pub fn read_dir(dir: impl AsRef<Path>, name: PlanetoidName) -> Result<PlanetoidFiles> {
        let dir = dir.as_ref();
        let mut files = PlanetoidFiles::default();
        for part in FILE_PARTS {
            let bytes = read_bounded(dir, &name.file_name(part))?;
            *files.part_mut(part).expect("FILE_PARTS are all known") = bytes;
        }
        Ok(files)
    }
}

fn read_bounded(dir: &Path, file: &str) -> Result<Vec<u8>> {
    let path = dir.join(file);
    let io = |source| PlanetoidError::Io {
        path: path.clone(),
        source,
    };
    let meta = match std::fs::metadata(&path) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(PlanetoidError::MissingFile {
                file: file.to_string(),
                dir: dir.to_path_buf(),
            })
        }
        Err(e) => return Err(io(e)),
    };
    if !meta.is_file() {
        return Err(io(std::io::Error::other("not a regular file")));
    }
    let too_large = |size| PlanetoidError::FileTooLarge {
        path: path.clone(),
        size,
        limit: MAX_FILE_BYTES,
    };
    if meta.len() > MAX_FILE_BYTES {
        return Err(too_large(meta.len()));
    }
    let mut bytes = Vec::with_capacity(meta.len() as usize);
    std::fs::File::open(&path)
        .and_then(|f| f.take(MAX_FILE_BYTES + 1).read_to_end(&mut bytes))
        .map_err(io)?;
    if bytes.len() as u64 > MAX_FILE_BYTES {
        return Err(too_large(bytes.len() as u64));
    }
    Ok(bytes)
}

/// A Planetoid dataset as PyTorch Geometric 2.8 loads it with `NormalizeFeatures`.
#[derive(Debug, Clone, PartialEq)]
pub struct Planetoid {
    /// Which dataset.
    pub name: PlanetoidName,
    /// Number of nodes.
    pub num_nodes: usize,
    /// Number of features per node.
    pub num_features: usize,
    /// Number of classes, `max(y) + 1` as PyG computes it.
    pub num_classes: usize,
    /// Row-normalised features, row-major `[num_nodes * num_features]`.
    pub x: Vec<f32>,
    /// Class of each node.
    pub y: Vec<i64>,
    /// Edge sources (`edge_index[0]`), sorted by `(src, dst)`, no duplicates or self-loops.
    pub edge_src: Vec<i64>,
    /// Edge destinations (`edge_index[1]`).
    pub edge_dst: Vec<i64>,
    /// Training nodes of the public split.
    pub train_mask: Vec<bool>,
    /// Validation nodes of the public split.
    pub val_mask: Vec<bool>,
    /// Test nodes of the public split.
    pub test_mask: Vec<bool>,
}

impl Planetoid {
    /// Number of directed edges.
    pub fn num_edges(&self) -> usize {
        self.edge_src.len()
    }

    /// The feature row of `node`, or `None` if out of range.
    pub fn features(&self, node: usize) -> Option<&[f32]> {
        let f = self.num_features;
        self.x
            .get(node.checked_mul(f)?..node.checked_add(1)?.checked_mul(f)?)
    }

    /// Ids of the training nodes, ascending.
    pub fn train_indices(&self) -> Vec<usize> {
        mask_indices(&self.train_mask)
    }

    /// Ids of the validation nodes, ascending.
    pub fn val_indices(&self) -> Vec<usize> {
        mask_indices(&self.val_mask)
    }

    /// Ids of the test nodes, ascending.
    pub fn test_indices(&self) -> Vec<usize> {
        mask_indices(&self.test_mask)
    }
}

fn mask_indices(mask: &[bool]) -> Vec<usize> {
    mask.iter()
        .enumerate()
        .filter_map(|(i, &m)| m.then_some(i))
        .collect()
}

/// Reads the files from `dir` and assembles them: [`PlanetoidFiles::read_dir`] then [`assemble`].
pub fn load(dir: impl AsRef<Path>, name: PlanetoidName) -> Result<Planetoid> {
    let files = PlanetoidFiles::read_dir(dir, name)?;
    assemble(name, &files)
}

/// A dense row-major `f32` matrix.
struct Dense {
    rows: usize,
    cols: usize,
    data: Vec<f32>,
}

fn parse_pickle(file: &str, bytes: &[u8]) -> Result<Pickle> {
    Pickle::parse(bytes).map_err(|source| PlanetoidError::Pickle {
        file: file.to_string(),
        source,
    })
}

fn decode_err(file: &str) -> impl Fn(DecodeError) -> PlanetoidError + '_ {
    move |source| PlanetoidError::Decode {
        file: file.to_string(),
        source,
    }
}

/// Reads a matrix file, which (as in PyG's `read_file`) may be a CSR matrix or a 2-D array.
fn read_matrix(file: &str, bytes: &[u8]) -> Result<Dense> {
    let m = read_matrix_unchecked(file, bytes)?;
    if m.rows > MAX_NODES {
        return Err(decode_err(file)(DecodeError::Invalid(format!(
            "the matrix has {} rows, more than the {MAX_NODES} this reader accepts",
            m.rows
        ))));
    }
    Ok(m)
}

fn read_matrix_unchecked(file: &str, bytes: &[u8]) -> Result<Dense> {
    let p = parse_pickle(file, bytes)?;
    let root = p.root();
    let err = decode_err(file);
    if scipy_sparse::is_csr(&p, root) {
        let m = Csr::from_pickle(&p, root).map_err(&err)?;
        let data = m.to_dense_f32().map_err(&err)?;
        Ok(Dense {
            rows: m.rows(),
            cols: m.cols(),
            data,
        })
    } else if numpy::is_ndarray(&p, root) {
        let a = NdArray::from_pickle(&p, root).map_err(&err)?;
        let (rows, cols) = a.shape_2d().map_err(&err)?;
        if a.len() > MAX_DENSE_ELEMENTS {
            return Err(err(DecodeError::Invalid(format!(
                "a {rows} x {cols} matrix is too large (limit {MAX_DENSE_ELEMENTS} elements)"
            ))));
        }
        Ok(Dense {
            rows,
            cols,
            data: a.to_f32_vec(),
        })
    } else {
        const WHAT: &str = "a SciPy CSR matrix or a numpy array";
        Err(err(match p.call_global(root) {
            Some((module, name)) => DecodeError::UnexpectedGlobal {
                module: module.into(),
                name: name.into(),
                expected: WHAT.into(),
            },
            None => DecodeError::Expected {
                expected: WHAT.into(),
                found: p.describe(root),
            },
        }))
    }
}

/// Parses a `test.index` file: one non-negative integer per line (surrounding whitespace and a
/// final newline allowed). `file` only names the file in errors.
pub fn parse_test_index(file: &str, bytes: &[u8]) -> Result<Vec<i64>> {
    let bad = |line: usize, reason: String| PlanetoidError::TestIndex {
        file: file.to_string(),
        line,
        reason,
    };
    let text = std::str::from_utf8(bytes).map_err(|e| {
        let line = 1 + bytes[..e.valid_up_to()]
            .iter()
            .filter(|&&b| b == b'\n')
            .count();
        bad(line, "the file is not text".into())
    })?;
    let text = text.strip_suffix('\n').unwrap_or(text);
    if text.trim().is_empty() {
        return Err(bad(1, "the file holds no test node ids".into()));
    }
    text.split('\n')
        .enumerate()
        .map(|(i, line)| {
            let t = line.trim();
            if t.is_empty() {
                return Err(bad(i + 1, "empty line".into()));
            }
            match t.parse::<i64>() {
                Ok(v) if v >= 0 => Ok(v),
                Ok(v) => Err(bad(i + 1, format!("negative node id {v}"))),
                Err(_) => Err(bad(
                    i + 1,
                    format!("{:?} is not an integer node id", truncate(t, 40)),
                )),
            }
        })
        .collect()
}

fn truncate(s: &str, n: usize) -> String {
    s.chars().take(n).collect()
}

/// Index of the first maximum of each row (torch's `max(dim=1)[1]`; a NaN counts as the maximum).
fn argmax_rows(m: &Dense) -> Vec<i64> {
    (0..m.rows)
        .map(|r| {
            let row = &m.data[r * m.cols..(r + 1) * m.cols];
            let mut best = 0usize;
            for (j, &v) in row.iter().enumerate().skip(1) {
                let b = row[best];
                if b.is_nan() {
                    break;
                }
                if v.is_nan() || v > b {
                    best = j;
                }
            }
            best as i64
        })
        .collect()
}

/// Assembles a dataset from its eight files exactly as PyG's `read_planetoid_data` followed by
/// `NormalizeFeatures`; see the module documentation for the steps and checks.
pub fn assemble(name: PlanetoidName, files: &PlanetoidFiles) -> Result<Planetoid> {
    let fname = |part: &str| name.file_name(part);
    let inconsistent = |reason: String| PlanetoidError::Inconsistent {
        dataset: name.to_string(),
        reason,
    };

    let x_file = read_matrix(&fname("x"), &files.x)?;
    let mut tx = read_matrix(&fname("tx"), &files.tx)?;
    let allx = read_matrix(&fname("allx"), &files.allx)?;
    let y_file = read_matrix(&fname("y"), &files.y)?;
    let mut ty = read_matrix(&fname("ty"), &files.ty)?;
    let ally = read_matrix(&fname("ally"), &files.ally)?;
    let graph = {
        let file = fname("graph");
        let p = parse_pickle(&file, &files.graph)?;
        AdjacencyDict::from_pickle(&p, p.root()).map_err(decode_err(&file))?
    };
    let test_index = parse_test_index(&fname("test.index"), &files.test_index)?;

    // --- cross-file checks
    let num_features = allx.cols;
    for (part, m) in [("x", &x_file), ("tx", &tx)] {
        if m.cols != num_features {
            return Err(inconsistent(format!(
                "{} has {} feature columns but {} has {num_features}",
                fname(part),
                m.cols,
                fname("allx")
            )));
        }
    }
    let label_cols = ally.cols;
    for (part, m) in [("y", &y_file), ("ty", &ty)] {
        if m.cols != label_cols {
            return Err(inconsistent(format!(
                "{} has {} label columns but {} has {label_cols}",
                fname(part),
                m.cols,
                fname("ally")
            )));
        }
    }
    if label_cols == 0 {
        return Err(inconsistent("the label matrices have no columns".into()));
    }
    if allx.rows != ally.rows {
        return Err(inconsistent(format!(
            "{} has {} rows but {} has {}",
            fname("allx"),
            allx.rows,
            fname("ally"),
            ally.rows
        )));
    }
    if tx.rows != ty.rows || tx.rows != test_index.len() {
        return Err(inconsistent(format!(
            "{} has {} rows, {} has {} rows and {} has {} ids (all three must match)",
            fname("tx"),
            tx.rows,
            fname("ty"),
            ty.rows,
            fname("test.index"),
            test_index.len()
        )));
    }
    let mut sorted_test: Vec<i64> = test_index.clone();
    sorted_test.sort_unstable();
    if let Some(w) = sorted_test.windows(2).find(|w| w[0] == w[1]) {
        return Err(inconsistent(format!(
            "{} lists node {} twice",
            fname("test.index"),
            w[0]
        )));
    }
    let (min_test, max_test) = (sorted_test[0], sorted_test[sorted_test.len() - 1]);

    // --- CiteSeer: give the isolated test nodes (missing from tx/ty) zero rows.
    if name == PlanetoidName::CiteSeer {
        let len = (max_test - min_test) as usize + 1;
        let too_large = len
            .checked_add(allx.rows)
            .filter(|&n| n <= MAX_NODES)
            .and_then(|n| n.checked_mul(num_features.max(label_cols)))
            .is_none_or(|n| n > MAX_DENSE_ELEMENTS);
        if too_large {
            return Err(inconsistent(format!(
                "{} spans ids {min_test}..={max_test}, too many for the {} test rows",
                fname("test.index"),
                tx.rows
            )));
        }
        let mut tx_ext = vec![0f32; len * num_features];
        let mut ty_ext = vec![0f32; len * label_cols];
        for (i, &t) in sorted_test.iter().enumerate() {
            let r = (t - min_test) as usize;
            tx_ext[r * num_features..(r + 1) * num_features]
                .copy_from_slice(&tx.data[i * num_features..(i + 1) * num_features]);
            ty_ext[r * label_cols..(r + 1) * label_cols]
                .copy_from_slice(&ty.data[i * label_cols..(i + 1) * label_cols]);
        }
        tx = Dense {
            rows: len,
            cols: num_features,
            data: tx_ext,
        };
        ty = Dense {
            rows: len,
            cols: label_cols,
            data: ty_ext,
        };
    }

    // --- x = vstack(allx, tx); y = argmax(vstack(ally, ty))
    let num_nodes = allx.rows + tx.rows;
    let mut x = allx.data;
    x.extend_from_slice(&tx.data);
    let mut y = argmax_rows(&ally);
    y.extend(argmax_rows(&ty));
    drop(tx);

    let in_range = |v: i64| usize::try_from(v).ok().filter(|&v| v < num_nodes);
    if in_range(max_test).is_none() {
        return Err(inconsistent(format!(
            "{} refers to node {max_test} but there are only {num_nodes} nodes",
            fname("test.index")
        )));
    }

    // --- x[test] = x[sorted(test)]; y[test] = y[sorted(test)]
    let f = num_features;
    let mut x_rows = Vec::with_capacity(sorted_test.len() * f);
    let mut y_vals = Vec::with_capacity(sorted_test.len());
    for &s in &sorted_test {
        let s = s as usize;
        x_rows.extend_from_slice(&x[s * f..(s + 1) * f]);
        y_vals.push(y[s]);
    }
    for (i, &t) in test_index.iter().enumerate() {
        let t = t as usize;
        x[t * f..(t + 1) * f].copy_from_slice(&x_rows[i * f..(i + 1) * f]);
        y[t] = y_vals[i];
    }
    drop(x_rows);

    // --- masks
    let num_train = y_file.rows;
    if num_train + NUM_VAL > num_nodes {
        return Err(inconsistent(format!(
            "{} has {num_train} rows, leaving fewer than {NUM_VAL} of the {num_nodes} nodes for \
             validation",
            fname("y")
        )));
    }
    let train_mask: Vec<bool> = (0..num_nodes).map(|i| i < num_train).collect();
    let val_mask: Vec<bool> = (0..num_nodes)
        .map(|i| (num_train..num_train + NUM_VAL).contains(&i))
        .collect();
    let mut test_mask = vec![false; num_nodes];
    for &t in &test_index {
        test_mask[t as usize] = true;
    }

    // --- edges: remove self-loops, coalesce
    let n = num_nodes as u64;
    let mut keys = Vec::with_capacity(graph.num_raw_edges());
    for (node, nbrs) in graph.entries() {
        let Some(src) = in_range(*node) else {
            return Err(inconsistent(format!(
                "{} has node {node} but there are only {num_nodes} nodes",
                fname("graph")
            )));
        };
        for &d in nbrs {
            let Some(dst) = in_range(d) else {
                return Err(inconsistent(format!(
                    "{} links node {node} to node {d} but there are only {num_nodes} nodes",
                    fname("graph")
                )));
            };
            if src != dst {
                keys.push(src as u64 * n + dst as u64);
            }
        }
    }
    keys.sort_unstable();
    keys.dedup();
    let edge_src = keys.iter().map(|k| (k / n) as i64).collect();
    let edge_dst = keys.iter().map(|k| (k % n) as i64).collect();

    normalize_features(&mut x, f);
    let num_classes = y.iter().copied().max().map_or(0, |m| m as usize + 1);

    Ok(Planetoid {
        name,
        num_nodes,
        num_features,
        num_classes,
        x,
        y,
        edge_src,
        edge_dst,
        train_mask,
        val_mask,
        test_mask,
    })
}

/// PyG's `NormalizeFeatures`: `x -= x.min()`, then each row `/= max(row.sum(), 1)`.
/// Row sums are accumulated in `f64` and rounded to `f32` (exact for the 0/1 Planetoid features).
fn normalize_features(x: &mut [f32], cols: usize) {
    if x.is_empty() || cols == 0 {
        return;
    }
    // torch.min propagates NaN
    let min = x.iter().copied().fold(
        f32::INFINITY,
        |m, v| if v.is_nan() || v < m { v } else { m },
    );
    if min != 0.0 {
        for v in x.iter_mut() {
            *v -= min;
        }
    }
    for row in x.chunks_exact_mut(cols) {
        let sum = row.iter().map(|&v| f64::from(v)).sum::<f64>() as f32;
        // clamp(min=1) keeps NaN, unlike f32::max
        let d = if sum < 1.0 { 1.0 } else { sum };
        for v in row.iter_mut() {
            *v /= d;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_pickles::{
        csr_pickle, graph_pickle, ndarray_pickle, one_hot_pickle, Array, CsrParts,
    };

    const F: usize = 3;
    const C: usize = 2;

    /// Features of training node `i` (all `allx` rows).
    fn allx_row(i: usize) -> [f32; F] {
        [(i % 2) as f32, 1.0, (i % 3) as f32]
    }

    /// A tiny dataset: 502 `allx` nodes (2 training), 3 test rows `tx`, test ids as given.
    fn synthetic(test_ids: &[i64]) -> PlanetoidFiles {
        let n_all = 502;
        let allx: Vec<f32> = (0..n_all).flat_map(allx_row).collect();
        let tx = [7.0, 0.0, 1.0, 0.0, 2.0, 0.0, 0.0, 0.0, 5.0];
        let labels: Vec<usize> = (0..n_all).map(|i| i % C).collect();
        let graph = vec![
            (0, vec![1, 1, 0]),
            (1, vec![0]),
            (504, vec![502, 502]),
            (502, vec![504]),
        ];
        PlanetoidFiles {
            x: csr_pickle(&CsrParts::from_dense(2, F, &allx[..2 * F])),
            tx: csr_pickle(&CsrParts::from_dense(3, F, &tx)),
            allx: csr_pickle(&CsrParts::from_dense(n_all, F, &allx)),
            y: one_hot_pickle(&labels[..2], C),
            ty: one_hot_pickle(&[1, 0, 1], C),
            ally: one_hot_pickle(&labels, C),
            graph: graph_pickle(&graph),
            test_index: test_ids
                .iter()
                .map(|t| format!("{t}\n"))
                .collect::<String>()
                .into_bytes(),
        }
    }

    #[test]
    fn cora_style_reorder() {
        // sorted test ids 502, 503, 504 hold tx rows 0, 1, 2; the file order is 504, 502, 503,
        // so x[504] = tx0, x[502] = tx1, x[503] = tx2.
        let d = assemble(PlanetoidName::Cora, &synthetic(&[504, 502, 503])).unwrap();
        assert_eq!((d.num_nodes, d.num_features, d.num_classes), (505, F, C));
        assert_eq!(d.features(504).unwrap(), &[7.0 / 8.0, 0.0, 1.0 / 8.0]);
        assert_eq!(d.features(502).unwrap(), &[0.0, 1.0, 0.0]);
        assert_eq!(d.features(503).unwrap(), &[0.0, 0.0, 1.0]);
        assert_eq!(&d.y[502..], &[0, 1, 1]);
        // training rows: [i%2, 1, i%3] normalised by max(sum, 1)
        assert_eq!(d.features(5).unwrap(), &[0.25, 0.25, 0.5]);
        assert_eq!(d.features(0).unwrap(), &[0.0, 1.0, 0.0]);
        assert_eq!(d.train_indices(), vec![0, 1]);
        assert_eq!(d.val_indices(), (2..502).collect::<Vec<_>>());
        assert_eq!(d.test_indices(), vec![502, 503, 504]);
        assert_eq!(d.edge_src, vec![0, 1, 502, 504]);
        assert_eq!(d.edge_dst, vec![1, 0, 504, 502]);
    }

    #[test]
    fn citeseer_style_gap() {
        // test ids 505, 502, 503: 504 is an isolated node missing from tx. Extended tx rows:
        // 502 = tx0, 503 = tx1, 504 = zeros, 505 = tx2. Reorder: x[505] = x[502] = tx0,
        // x[502] = x[503] = tx1, x[503] = x[505] = tx2; x[504] stays zero with label 0.
        let d = assemble(PlanetoidName::CiteSeer, &synthetic(&[505, 502, 503])).unwrap();
        assert_eq!(d.num_nodes, 506);
        assert_eq!(d.features(505).unwrap(), &[7.0 / 8.0, 0.0, 1.0 / 8.0]);
        assert_eq!(d.features(502).unwrap(), &[0.0, 1.0, 0.0]);
        assert_eq!(d.features(503).unwrap(), &[0.0, 0.0, 1.0]);
        assert_eq!(d.features(504).unwrap(), &[0.0, 0.0, 0.0]);
        assert_eq!(&d.y[502..], &[0, 1, 0, 1]);
        assert_eq!(d.test_indices(), vec![502, 503, 505]);
        assert!(!d.test_mask[504]);
        // The same files in Cora mode refer to node 505 of 505: an error, not a panic.
        let err = assemble(PlanetoidName::Cora, &synthetic(&[505, 502, 503])).unwrap_err();
        assert!(matches!(err, PlanetoidError::Inconsistent { .. }), "{err}");
    }

    fn assert_inconsistent(files: &PlanetoidFiles, needle: &str) {
        let err = assemble(PlanetoidName::Cora, files).unwrap_err();
        assert!(
            matches!(err, PlanetoidError::Inconsistent { .. }) && err.to_string().contains(needle),
            "expected Inconsistent containing {needle:?}, got {err}"
        );
    }

    #[test]
    fn cross_file_checks() {
        let mut f = synthetic(&[504, 502, 503]);
        f.tx = csr_pickle(&CsrParts::from_dense(3, F + 1, &[0.0; 12]));
        assert_inconsistent(&f, "feature columns");

        let mut f = synthetic(&[504, 502, 503]);
        f.ty = one_hot_pickle(&[0, 1, 2], 3);
        assert_inconsistent(&f, "label columns");

        let mut f = synthetic(&[504, 502, 503]);
        f.ally = one_hot_pickle(&[0; 10], C);
        assert_inconsistent(&f, "rows");

        assert_inconsistent(&synthetic(&[504, 502]), "all three must match");
        assert_inconsistent(&synthetic(&[504, 502, 502]), "twice");

        let mut f = synthetic(&[504, 502, 503]);
        f.y = one_hot_pickle(&[0; 6], C);
        assert_inconsistent(&f, "validation");

        let mut f = synthetic(&[504, 502, 503]);
        f.graph = graph_pickle(&[(0, vec![505])]);
        assert_inconsistent(&f, "node 505");
        f.graph = graph_pickle(&[(-1, vec![0])]);
        assert_inconsistent(&f, "node -1");
    }

    #[test]
    fn dense_arrays_are_accepted_and_other_content_rejected() {
        // PyG accepts any matrix file as a numpy array too (`todense` only if present).
        let mut f = synthetic(&[504, 502, 503]);
        let tx = [7.0f32, 0.0, 1.0, 0.0, 2.0, 0.0, 0.0, 0.0, 5.0];
        f.tx = ndarray_pickle(&Array::f32(&[3, F], &tx));
        let d = assemble(PlanetoidName::Cora, &f).unwrap();
        assert_eq!(d.features(504).unwrap(), &[7.0 / 8.0, 0.0, 1.0 / 8.0]);

        f.tx = ndarray_pickle(&Array::f32(&[9], &tx));
        let err = assemble(PlanetoidName::Cora, &f).unwrap_err();
        assert!(matches!(err, PlanetoidError::Decode { ref file, .. } if file == "ind.cora.tx"));

        f.tx = b"\x80\x02cos\nsystem\nU\x02ls\x85R.".to_vec();
        let err = assemble(PlanetoidName::Cora, &f).unwrap_err();
        assert!(err.to_string().contains("os.system"), "{err}");
        assert!(err.to_string().starts_with("ind.cora.tx: "), "{err}");

        // zero columns make a huge row count cheap to declare; it must not be allocated
        let mut f = synthetic(&[504, 502, 503]);
        f.allx = ndarray_pickle(&Array::f32(&[1 << 40, 0], &[]));
        let err = assemble(PlanetoidName::Cora, &f).unwrap_err();
        assert!(err.to_string().contains("rows, more than"), "{err}");

        let mut f = synthetic(&[504, 502, 503]);
        f.graph = csr_pickle(&CsrParts::from_dense(1, 1, &[1.0]));
        let err = assemble(PlanetoidName::Cora, &f).unwrap_err();
        assert!(matches!(err, PlanetoidError::Decode { ref file, .. } if file == "ind.cora.graph"));
    }

    #[test]
    fn test_index_parsing() {
        let p = |s: &[u8]| parse_test_index("ind.cora.test.index", s);
        assert_eq!(p(b"3\n1\n2\n").unwrap(), vec![3, 1, 2]);
        assert_eq!(p(b"3\r\n1\r\n2").unwrap(), vec![3, 1, 2]);
        for (bad, line) in [
            (&b""[..], 1),
            (b"\n", 1),
            (b"1\n\n2\n", 2),
            (b"1\nx\n", 2),
            (b"1\n-4\n", 2),
            (b"1\n2.5\n", 2),
            (b"1\n2\n\xff\n", 3),
            (b"99999999999999999999\n", 1),
        ] {
            match p(bad) {
                Err(PlanetoidError::TestIndex { line: l, .. }) => assert_eq!(l, line, "{bad:?}"),
                other => panic!("{bad:?}: {other:?}"),
            }
        }
    }

    #[test]
    fn names() {
        assert_eq!(
            "CORA".parse::<PlanetoidName>().unwrap(),
            PlanetoidName::Cora
        );
        assert_eq!(
            " citeseer ".parse::<PlanetoidName>().unwrap(),
            PlanetoidName::CiteSeer
        );
        let err = "PubMed".parse::<PlanetoidName>().unwrap_err();
        assert!(err.to_string().contains("not supported"), "{err}");
        let err = "karate".parse::<PlanetoidName>().unwrap_err();
        assert!(matches!(err, PlanetoidError::UnknownName(_)));
        assert_eq!(PlanetoidName::CiteSeer.to_string(), "CiteSeer");
        assert_eq!(
            PlanetoidName::CiteSeer.file_name("test.index"),
            "ind.citeseer.test.index"
        );
    }

    #[test]
    fn normalize() {
        let mut x = vec![-1.0, 1.0, 0.0, -1.0, -1.0, -1.0];
        normalize_features(&mut x, 3);
        // min -1 subtracted: [0, 2, 1] / 3 and [0, 0, 0] / 1
        assert_eq!(x, vec![0.0, 2.0 / 3.0, 1.0 / 3.0, 0.0, 0.0, 0.0]);
        let mut x = vec![0.0, 0.25, 0.25];
        normalize_features(&mut x, 3);
        assert_eq!(x, vec![0.0, 0.25, 0.25]); // a sum below 1 is clamped to 1
    }
}
