//! Rabbit order (Arai et al., "Rabbit Order: Just-in-time Parallel Reordering for Fast Graph
//! Analysis", IPDPS 2016): communities found by modularity, numbered together.
//!
//! Nodes are visited once each, lowest degree first. A visited node's edges are gathered by
//! community (a neighbour that was merged somewhere counts for the community it is now in), and
//! the node's community joins the neighbouring community with the largest modularity gain
//! `ΔQ(u, v) = 2 (w_uv / 2m - d_u d_v / (2m)²)`, if that gain is positive (`w_uv`: edges between
//! the two, `d`: the sum of the degrees of a community's nodes, `m`: edges of the graph).
//! Otherwise it stays a top-level community. The merges form a forest (a node is a child of
//! the community it joined); numbering the nodes depth first from each root, a node before the
//! nodes that joined it, makes every community, and every sub-community within it, a range of
//! consecutive ids: hierarchical locality, matched to the cache levels. This is the paper's
//! sequential algorithm; its parallel merging (lock-free, per thread) is left out, since the
//! order is computed once per graph.
//!
//! ```
//! use workbook::reorder::{rabbit, Adjacency};
//! use workbook::EdgeIndex;
//! // Two triangles {0, 2, 4} and {1, 3, 5} joined by the edge 4 - 5, numbered interleaved.
//! let (s, t) = ([0, 2, 4, 1, 3, 5, 4], [2, 4, 0, 3, 5, 1, 5]);
//! let ei = EdgeIndex::new(&s, &t, 6, &workbook::candle_core::Device::Cpu).unwrap();
//! let order = rabbit::order(&Adjacency::undirected(&ei));
//! let place = |v: u32| order.iter().position(|&o| o == v).unwrap();
//! // Each triangle gets three consecutive new ids.
//! let mut first: Vec<usize> = [0, 2, 4].into_iter().map(place).collect();
//! first.sort();
//! assert!(first == [0, 1, 2] || first == [3, 4, 5], "{order:?}");
//! ```

use super::Adjacency;

const NONE: u32 = u32::MAX;

/// The Rabbit order of `graph`: `old_of_new`, every node once.
pub fn order(graph: &Adjacency) -> Vec<u32> {
    let n = graph.num_nodes();
    let two_m: f64 = (0..n).map(|v| graph.degree(v) as f64).sum();
    let mut strength: Vec<f64> = (0..n).map(|v| graph.degree(v) as f64).collect();
    let mut parent: Vec<u32> = (0..n as u32).collect();
    // Edges a community took over from the communities that joined it before it was visited:
    // (neighbour, weight). A node's own edges are read from `graph`.
    let mut taken: Vec<Vec<(u32, u32)>> = vec![Vec::new(); n];
    let mut visited = vec![false; n];
    let (mut first_child, mut last_child, mut next_sibling) =
        (vec![NONE; n], vec![NONE; n], vec![NONE; n]);
    let mut weight_to: Vec<u32> = vec![0; n];
    let mut touched: Vec<u32> = Vec::new();

    let mut by_degree: Vec<u32> = (0..n as u32).collect();
    by_degree.sort_by_key(|&v| (graph.degree(v as usize), v));
    for &u in &by_degree {
        let u = u as usize;
        visited[u] = true;
        // `u` is a root: only a node being visited is ever merged into another.
        touched.clear();
        let own = graph.neighbours(u).iter().map(|&x| (x, 1u32));
        let inherited = std::mem::take(&mut taken[u]);
        for (x, w) in own.chain(inherited.iter().copied()) {
            let r = find(&mut parent, x);
            if r as usize == u {
                continue;
            }
            if weight_to[r as usize] == 0 {
                touched.push(r);
            }
            weight_to[r as usize] += w;
        }
        let mut best: Option<(f64, u32)> = None;
        for &r in &touched {
            let gain = f64::from(weight_to[r as usize])
                - strength[u] * strength[r as usize] / two_m.max(1.0);
            let better = match best {
                None => gain > 0.0,
                Some((g, b)) => gain > g || (gain == g && r < b),
            };
            if better {
                best = Some((gain, r));
            }
        }
        if let Some((_, v)) = best {
            let v = v as usize;
            parent[u] = v as u32;
            strength[v] += strength[u];
            if last_child[v] == NONE {
                first_child[v] = u as u32;
            } else {
                next_sibling[last_child[v] as usize] = u as u32;
            }
            last_child[v] = u as u32;
            if !visited[v] {
                // `v` gathers `u`'s edges when it is visited; a visited root never looks at
                // its edges again.
                let edges: Vec<(u32, u32)> = touched
                    .iter()
                    .filter(|&&r| r as usize != v)
                    .map(|&r| (r, weight_to[r as usize]))
                    .collect();
                taken[v].extend(edges);
            }
        }
        for &r in &touched {
            weight_to[r as usize] = 0;
        }
    }

    // Depth first from each top-level community, lowest id first; a node before its children,
    // children in the order they joined.
    let mut numbered: Vec<u32> = Vec::with_capacity(n);
    let mut stack: Vec<u32> = Vec::new();
    let roots: Vec<u32> = (0..n as u32).filter(|&v| parent[v as usize] == v).collect();
    for root in roots {
        stack.push(root);
        while let Some(v) = stack.pop() {
            numbered.push(v);
            // Push children last-first so that the first to join is numbered first.
            let mut children = Vec::new();
            let mut c = first_child[v as usize];
            while c != NONE {
                children.push(c);
                c = next_sibling[c as usize];
            }
            stack.extend(children.into_iter().rev());
        }
    }
    numbered
}

/// The root of `v`'s community, halving the path on the way.
fn find(parent: &mut [u32], mut v: u32) -> u32 {
    while parent[v as usize] != v {
        let up = parent[parent[v as usize] as usize];
        parent[v as usize] = up;
        v = up;
    }
    v
}
