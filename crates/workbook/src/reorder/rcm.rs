//! Reverse Cuthill-McKee: a breadth-first numbering from a peripheral node, reversed.
//!
//! Cuthill-McKee (1969) numbers a connected component level by level from a start node,
//! visiting each node's unnumbered neighbours lowest degree first, so every edge joins two
//! nodes of the same or of adjacent levels and the ids of neighbours differ by at most about
//! two level widths. A start on the periphery makes the levels many and narrow: the start is a
//! pseudo-peripheral node (George and Liu, 1979: from a low-degree node, repeatedly move to a
//! lowest-degree node of the farthest level while that level gets farther). Reversing the
//! numbering (George, 1971) keeps the bandwidth and reduces fill-in; for a GNN's gather both are
//! the same. Components are numbered one after another, lowest-degree start first.
//!
//! ```
//! use workbook::reorder::{rcm, Adjacency};
//! use workbook::EdgeIndex;
//! // A path 0 - 2 - 4 - 1 - 3, numbered badly: RCM walks it end to end.
//! let ei = EdgeIndex::new(&[0, 2, 4, 1], &[2, 4, 1, 3], 5, &workbook::candle_core::Device::Cpu).unwrap();
//! let order = rcm::order(&Adjacency::undirected(&ei)); // old ids in their new places
//! assert!(order == [3, 1, 4, 2, 0] || order == [0, 2, 4, 1, 3]);
//! ```

use super::Adjacency;

/// The reverse Cuthill-McKee order of `graph`: `old_of_new`, every node once.
pub fn order(graph: &Adjacency) -> Vec<u32> {
    let n = graph.num_nodes();
    let mut visited = vec![false; n];
    let mut numbered: Vec<u32> = Vec::with_capacity(n);
    // Start candidates, lowest degree first (ties: lower id), so each component starts low.
    let mut by_degree: Vec<u32> = (0..n as u32).collect();
    by_degree.sort_by_key(|&v| (graph.degree(v as usize), v));
    let mut levels = LevelScratch::new(n);
    for &seed in &by_degree {
        if visited[seed as usize] {
            continue;
        }
        let start = pseudo_peripheral(graph, seed, &mut levels);
        cuthill_mckee(graph, start, &mut visited, &mut numbered);
    }
    numbered.reverse();
    numbered
}

/// One component numbered breadth first from `start`, neighbours by increasing degree.
fn cuthill_mckee(graph: &Adjacency, start: u32, visited: &mut [bool], numbered: &mut Vec<u32>) {
    let mut head = numbered.len();
    visited[start as usize] = true;
    numbered.push(start);
    let mut next: Vec<u32> = Vec::new();
    while head < numbered.len() {
        let v = numbered[head] as usize;
        head += 1;
        next.clear();
        next.extend(
            graph
                .neighbours(v)
                .iter()
                .copied()
                .filter(|&u| !visited[u as usize]),
        );
        next.sort_by_key(|&u| (graph.degree(u as usize), u));
        for &u in &next {
            visited[u as usize] = true;
            numbered.push(u);
        }
    }
}

/// Breadth-first levels from a node, with a stamp per search so the arrays are reused.
struct LevelScratch {
    stamp: Vec<u32>,
    round: u32,
    queue: Vec<(u32, u32)>,
}

impl LevelScratch {
    fn new(n: usize) -> Self {
        Self {
            stamp: vec![0; n],
            round: 0,
            queue: Vec::new(),
        }
    }

    /// The eccentricity of `root` in its component, and a lowest-degree node (lowest id on
    /// ties) of the last level.
    fn farthest(&mut self, graph: &Adjacency, root: u32) -> (u32, u32) {
        self.round += 1;
        self.queue.clear();
        self.queue.push((root, 0));
        self.stamp[root as usize] = self.round;
        let mut head = 0;
        while head < self.queue.len() {
            let (v, depth) = self.queue[head];
            head += 1;
            for &u in graph.neighbours(v as usize) {
                if self.stamp[u as usize] != self.round {
                    self.stamp[u as usize] = self.round;
                    self.queue.push((u, depth + 1));
                }
            }
        }
        let depth = self.queue.last().map_or(0, |&(_, d)| d);
        let pick = self
            .queue
            .iter()
            .rev()
            .take_while(|&&(_, d)| d == depth)
            .map(|&(v, _)| v)
            .min_by_key(|&v| (graph.degree(v as usize), v))
            .unwrap_or(root);
        (depth, pick)
    }
}

/// George and Liu's pseudo-peripheral node of `seed`'s component.
fn pseudo_peripheral(graph: &Adjacency, seed: u32, levels: &mut LevelScratch) -> u32 {
    let mut start = seed;
    let (mut eccentricity, mut candidate) = levels.farthest(graph, start);
    // Each round costs one breadth-first search; a handful suffice in practice, and the bound
    // keeps a pathological graph from looping long.
    for _ in 0..8 {
        let (depth, next) = levels.farthest(graph, candidate);
        if depth <= eccentricity {
            break;
        }
        start = candidate;
        eccentricity = depth;
        candidate = next;
    }
    start
}
