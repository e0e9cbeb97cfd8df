//! Zachary's karate club, embedded: the default graph for demos, no files needed.
//!
//! 34 members, 78 friendships (156 directed edges), four communities found by modularity
//! clustering, one labelled member per community: exactly PyG's `KarateClub` (features are the
//! identity matrix). PyG defines only a training mask; here the 30 other members form both the
//! validation and the test set.
//!
//! ```
//! let g = workbook::datasets::karate(&workbook::candle_core::Device::Cpu).unwrap();
//! assert_eq!((g.num_nodes(), g.num_edges(), g.num_features(), g.num_classes()), (34, 156, 34, 4));
//! ```

use crate::edge_index::EdgeIndex;
use crate::error::Result;
use crate::graph::{Graph, Split};
use crate::placement::Placement;
use candle_core::{Device, Tensor};

/// The 78 friendships, each once with the smaller id first.
pub const EDGES: [(u8, u8); 78] = [
    (0, 1),
    (0, 2),
    (0, 3),
    (0, 4),
    (0, 5),
    (0, 6),
    (0, 7),
    (0, 8),
    (0, 10),
    (0, 11),
    (0, 12),
    (0, 13),
    (0, 17),
    (0, 19),
    (0, 21),
    (0, 31),
    (1, 2),
    (1, 3),
    (1, 7),
    (1, 13),
    (1, 17),
    (1, 19),
    (1, 21),
    (1, 30),
    (2, 3),
    (2, 7),
    (2, 8),
    (2, 9),
    (2, 13),
    (2, 27),
    (2, 28),
    (2, 32),
    (3, 7),
    (3, 12),
    (3, 13),
    (4, 6),
    (4, 10),
    (5, 6),
    (5, 10),
    (5, 16),
    (6, 16),
    (8, 30),
    (8, 32),
    (8, 33),
    (9, 33),
    (13, 33),
    (14, 32),
    (14, 33),
    (15, 32),
    (15, 33),
    (18, 32),
    (18, 33),
    (19, 33),
    (20, 32),
    (20, 33),
    (22, 32),
    (22, 33),
    (23, 25),
    (23, 27),
    (23, 29),
    (23, 32),
    (23, 33),
    (24, 25),
    (24, 27),
    (24, 31),
    (25, 31),
    (26, 29),
    (26, 33),
    (27, 33),
    (28, 31),
    (28, 33),
    (29, 32),
    (29, 33),
    (30, 32),
    (30, 33),
    (31, 32),
    (31, 33),
    (32, 33),
];

/// The community of each member (PyG's labels).
pub const LABELS: [i64; 34] = [
    1, 1, 1, 1, 3, 3, 3, 1, 0, 1, 3, 1, 1, 1, 0, 0, 3, 1, 0, 1, 0, 1, 0, 0, 2, 2, 0, 0, 2, 0, 0, 2,
    0, 0,
];

/// The karate club graph on `device`, edges in PyG's order (sorted by source, then target).
pub fn karate(device: impl Into<Placement>) -> Result<Graph> {
    let mut pairs: Vec<(i64, i64)> = EDGES
        .iter()
        .flat_map(|&(a, b)| [(a as i64, b as i64), (b as i64, a as i64)])
        .collect();
    pairs.sort_unstable();
    let (src, dst): (Vec<i64>, Vec<i64>) = pairs.into_iter().unzip();
    let n = LABELS.len();
    let edge_index = EdgeIndex::new(&src, &dst, n, &Device::Cpu)?;
    let x = Tensor::eye(n, candle_core::DType::F32, &Device::Cpu)?;
    // One training node per class: the first member of each community.
    let mut train = vec![false; n];
    for class in 0..4 {
        let first = LABELS
            .iter()
            .position(|&c| c == class)
            .expect("every class has a member");
        train[first] = true;
    }
    let rest: Vec<bool> = train.iter().map(|t| !t).collect();
    let split = Split::from_masks(&train, &rest, &rest, &Device::Cpu)?;
    Graph::new("karate", x, edge_index)?
        .with_labels(&LABELS, split)?
        .to_device(device)
}
