//! A seeded k-nearest-neighbour graph of random points: real locality, hidden by the numbering.
//!
//! `nodes` points are drawn uniformly in the unit square; each node receives an edge from each
//! of its `k` nearest other points (PyG's `knn_graph(pos, k)`, messages flowing from the
//! neighbours to the centre), so the graph has exactly `nodes * k` edges and, like a mesh or a
//! road network, every neighbourhood is small in space. Classes are the regions nearest to
//! `classes` random centres, features the class's random mean plus Gaussian noise, and the split
//! Planetoid's sizes, as in [`csbm`](fn@super::csbm), so a GNN trains on it.
//!
//! The ids are a seeded random permutation of the points (`shuffle`, the default), so the
//! numbering hides the locality: the mean `|i - j|` over edges is about `n / 3`, as on a random
//! graph, and a node order ([`crate::reorder`]) can recover it. With `shuffle: false` the points
//! are numbered cell by cell of the search grid (row-major), a locality-preserving order.
//! Neighbours are found in a grid of cells holding about four points each, searched ring by
//! ring, in parallel: linear time, 10⁶ nodes in seconds.
//!
//! ```
//! use workbook::datasets::{knn, KnnConfig};
//! let g = knn(&KnnConfig::new(1_000), &workbook::candle_core::Device::Cpu).unwrap();
//! assert_eq!((g.num_nodes(), g.num_edges()), (1_000, 10_000));
//! assert!(knn(&KnnConfig { k: 1_000, ..KnnConfig::new(1_000) }, &workbook::candle_core::Device::Cpu).is_err());
//! ```

use crate::edge_index::EdgeIndex;
use crate::error::{Result, WorkbookError};
use crate::graph::{Graph, Split};
use crate::placement::Placement;
use crate::reorder::{permute_graph, Permutation};
use candle_core::{Device, Tensor};
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rayon::prelude::*;

/// Parameters of the generator.
#[derive(Clone, Debug, PartialEq)]
pub struct KnnConfig {
    pub nodes: usize,
    /// Neighbours per node: each node is the target of `k` edges.
    pub k: usize,
    pub classes: usize,
    pub features: usize,
    /// Standard deviation of the feature noise (class means have unit scale).
    pub noise: f64,
    pub seed: u64,
    /// Number the nodes at random (hiding the locality) rather than cell by cell.
    pub shuffle: bool,
}

impl KnnConfig {
    /// Defaults: 10 neighbours, 5 classes, 32 features, noise 1.5, seed 0, shuffled ids.
    pub fn new(nodes: usize) -> Self {
        Self {
            nodes,
            k: 10,
            classes: 5,
            features: 32,
            noise: 1.5,
            seed: 0,
            shuffle: true,
        }
    }
}

/// Generates the graph on `device`.
pub fn knn(config: &KnnConfig, device: impl Into<Placement>) -> Result<Graph> {
    let KnnConfig {
        nodes: n,
        k,
        classes: c,
        features: f,
        ..
    } = *config;
    if c < 2 || n < c || f == 0 || k == 0 || k >= n {
        return Err(WorkbookError::InvalidConfig(format!(
            "knn needs at least 2 classes, 1 feature, 1 neighbour, as many nodes as classes and more nodes than neighbours (got {n} nodes, k = {k}, {c} classes, {f} features)"
        )));
    }
    if !(config.noise >= 0.0 && config.noise.is_finite()) {
        return Err(WorkbookError::InvalidConfig(
            "knn: the noise must be finite and non-negative".into(),
        ));
    }
    if n > crate::limits::MAX_NODES {
        return Err(WorkbookError::InvalidConfig(format!(
            "knn:{n}: graphs are limited to {} nodes (node ids are 32-bit)",
            crate::limits::MAX_NODES
        )));
    }
    crate::limits::check_memory(
        &format!("knn:{n} ({f} features, {k} neighbours)"),
        crate::limits::csbm_bytes(n, f, k as f64),
    )?;
    let mut rng = ChaCha8Rng::seed_from_u64(config.seed);
    let drawn: Vec<[f64; 2]> = (0..n).map(|_| [rng.random(), rng.random()]).collect();

    // The grid: `side` x `side` cells of about four points each; the points are numbered in
    // cell order, so that a cell's points are a range.
    let side = ((n as f64 / 4.0).sqrt().ceil() as usize).max(1);
    let cell_of = |p: &[f64; 2]| {
        let cx = ((p[0] * side as f64) as usize).min(side - 1);
        let cy = ((p[1] * side as f64) as usize).min(side - 1);
        cy * side + cx
    };
    let mut starts = vec![0usize; side * side + 1];
    for p in &drawn {
        starts[cell_of(p) + 1] += 1;
    }
    for i in 0..side * side {
        starts[i + 1] += starts[i];
    }
    let mut fill = starts.clone();
    let mut points = vec![[0f64; 2]; n];
    for p in &drawn {
        let cell = cell_of(p);
        points[fill[cell]] = *p;
        fill[cell] += 1;
    }
    drop(drawn);

    let grid = Grid {
        side,
        starts: &starts,
        points: &points,
    };
    let mut neighbours = vec![0u32; n * k];
    neighbours
        .par_chunks_mut(k)
        .enumerate()
        .for_each(|(i, out)| grid.nearest(i, out));

    let centres: Vec<[f64; 2]> = (0..c).map(|_| [rng.random(), rng.random()]).collect();
    let labels: Vec<i64> = points
        .iter()
        .map(|p| {
            let d = |q: &[f64; 2]| (p[0] - q[0]).powi(2) + (p[1] - q[1]).powi(2);
            (0..c)
                .min_by(|&a, &b| d(&centres[a]).total_cmp(&d(&centres[b])))
                .unwrap_or(0) as i64
        })
        .collect();
    if let Some(empty) = (0..c).find(|&y| !labels.contains(&(y as i64))) {
        return Err(WorkbookError::InvalidConfig(format!(
            "knn:{n} with seed {}: class {empty} has no node (too few nodes for {c} classes); use more nodes or fewer classes",
            config.seed
        )));
    }
    let x = super::csbm::class_features(&labels, c, f, config.noise, &mut rng);
    let (train, val, test) = super::csbm::planetoid_split(&labels, c, &mut rng);

    // Edges neighbour -> centre, sorted by (target, source).
    let dst: Vec<i64> = (0..n as i64)
        .flat_map(|i| std::iter::repeat_n(i, k))
        .collect();
    let src: Vec<i64> = neighbours.iter().map(|&j| i64::from(j)).collect();
    drop(neighbours);
    let edge_index = EdgeIndex::new(&src, &dst, n, &Device::Cpu)?;
    drop((src, dst));
    let x = Tensor::from_vec(x, (n, f), &Device::Cpu)?;
    let split = Split::from_masks(&train, &val, &test, &Device::Cpu)?;
    let graph = Graph::new(format!("knn:{n}"), x, edge_index)?.with_labels(&labels, split)?;
    let graph = if config.shuffle {
        let mut old_of_new: Vec<u32> = (0..n as u32).collect();
        old_of_new.shuffle(&mut rng);
        permute_graph(&graph, &Permutation::from_old_of_new(old_of_new)?)?
    } else {
        graph
    };
    graph.to_device(device)
}

/// Points bucketed by cell, for the nearest-neighbour search.
struct Grid<'a> {
    side: usize,
    starts: &'a [usize],
    points: &'a [[f64; 2]],
}

impl Grid<'_> {
    /// The `out.len()` nearest other points of point `i`, nearest first (ties: lower id),
    /// searching rings of cells around its cell until no closer point can remain.
    fn nearest(&self, i: usize, out: &mut [u32]) {
        let k = out.len();
        let p = self.points[i];
        let side = self.side as isize;
        let cell = 1.0 / self.side as f64;
        let cx = ((p[0] * self.side as f64) as isize).min(side - 1);
        let cy = ((p[1] * self.side as f64) as isize).min(side - 1);
        // (squared distance, id), sorted, at most k.
        let mut best: Vec<(f64, u32)> = Vec::with_capacity(k + 1);
        for ring in 0..=side {
            for y in (cy - ring)..=(cy + ring) {
                for x in (cx - ring)..=(cx + ring) {
                    let on_ring = (y - cy).abs() == ring || (x - cx).abs() == ring;
                    if !on_ring || x < 0 || y < 0 || x >= side || y >= side {
                        continue;
                    }
                    let c = (y * side + x) as usize;
                    for j in self.starts[c]..self.starts[c + 1] {
                        if j == i {
                            continue;
                        }
                        let q = self.points[j];
                        let d = (p[0] - q[0]).powi(2) + (p[1] - q[1]).powi(2);
                        let candidate = (d, j as u32);
                        if best.len() == k && candidate >= best[k - 1] {
                            continue;
                        }
                        let at = best.partition_point(|b| *b < candidate);
                        best.insert(at, candidate);
                        best.truncate(k);
                    }
                }
            }
            // A point beyond this ring is at least `ring` cells away along one axis.
            let reach = ring as f64 * cell;
            if best.len() == k && best[k - 1].0 <= reach * reach {
                break;
            }
        }
        for (o, (_, j)) in out.iter_mut().zip(&best) {
            *o = *j;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The ring search finds what comparing every pair finds, on a grid coarse and fine.
    #[test]
    fn the_grid_search_finds_the_true_nearest_neighbours() {
        let mut rng = ChaCha8Rng::seed_from_u64(5);
        for (n, side) in [(400usize, 10usize), (400, 3), (50, 1)] {
            let raw: Vec<[f64; 2]> = (0..n).map(|_| [rng.random(), rng.random()]).collect();
            let cell_of = |p: &[f64; 2]| {
                let cx = ((p[0] * side as f64) as usize).min(side - 1);
                let cy = ((p[1] * side as f64) as usize).min(side - 1);
                cy * side + cx
            };
            let mut points = raw.clone();
            points.sort_by_key(cell_of);
            let mut starts = vec![0usize; side * side + 1];
            for p in &points {
                starts[cell_of(p) + 1] += 1;
            }
            for i in 0..side * side {
                starts[i + 1] += starts[i];
            }
            let grid = Grid {
                side,
                starts: &starts,
                points: &points,
            };
            let k = 7;
            for i in 0..n {
                let mut found = vec![0u32; k];
                grid.nearest(i, &mut found);
                let p = points[i];
                let mut all: Vec<(f64, u32)> = (0..n)
                    .filter(|&j| j != i)
                    .map(|j| {
                        let q = points[j];
                        ((p[0] - q[0]).powi(2) + (p[1] - q[1]).powi(2), j as u32)
                    })
                    .collect();
                all.sort_by(|a, b| a.partial_cmp(b).unwrap());
                let truth: Vec<u32> = all[..k].iter().map(|&(_, j)| j).collect();
                assert_eq!(found, truth, "point {i} of {n}, {side}x{side} cells");
            }
        }
    }
}
