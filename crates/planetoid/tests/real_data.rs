//! Loads the real Cora and CiteSeer files and checks them against PyTorch Geometric 2.8.1's
//! numbers and against reference values computed independently in Python.
//!
//! The reference values were computed with Python 3.11's own `pickle` module, using an
//! `Unpickler.find_class` that maps `numpy.core.multiarray._reconstruct`, `numpy.ndarray`,
//! `numpy.dtype` and `scipy.sparse.csr.csr_matrix` to tiny stand-in classes (numpy/SciPy are not
//! installed) which decode the raw bytes with `struct`; the result was then assembled in plain
//! Python following `torch_geometric/io/planetoid.py` line by line (CiteSeer extension, test
//! reordering, `max(dim=1)` labels, self-loop removal, sorted unique edges) and
//! `NormalizeFeatures` (f32 rounding emulated with `struct.pack('f', ...)`).

mod common;

use std::collections::HashSet;
use std::time::Instant;

use planetoid::{load, Planetoid, PlanetoidFiles, PlanetoidName};

/// Reference numbers from the independent Python assembly described above.
struct Expected {
    nodes: usize,
    features: usize,
    classes: usize,
    edges: usize,
    train: usize,
    /// `y[0]`
    y0: i64,
    /// `(first id in test.index, its label)`
    first_test: (usize, i64),
    /// `(smallest test id, its label)`
    min_test: (usize, i64),
    /// nonzero features of node 0 and the first five of their columns
    x0_nnz: usize,
    x0_cols: [usize; 5],
    /// out-degree of node 0 (equal to its in-degree: the graphs are symmetric)
    deg0: usize,
    first_edges: [(i64, i64); 3],
    last_edges: [(i64, i64); 2],
    /// nonzeros in the whole (unnormalised) x
    total_nnz: usize,
    /// sum of y, and sum of i * y[i]
    sum_y: i64,
    sum_iy: i64,
    /// number of nodes per class
    class_counts: &'static [usize],
    /// sum over edges k (0-based, sorted) of (src * N + dst) * (k + 1), mod 2^61 - 1
    edge_checksum: u64,
    /// sum over nonzero x[i][j] of (i * F + j), mod 2^61 - 1
    x_checksum: u64,
    /// all-zero feature rows (CiteSeer's isolated test nodes)
    zero_rows: &'static [usize],
}

const CORA: Expected = Expected {
    nodes: 2708,
    features: 1433,
    classes: 7,
    edges: 10556,
    train: 140,
    y0: 3,
    first_test: (2692, 3),
    min_test: (1708, 3),
    x0_nnz: 9,
    x0_cols: [19, 81, 146, 315, 774],
    deg0: 3,
    first_edges: [(0, 633), (0, 1862), (0, 2582)],
    last_edges: [(2707, 1473), (2707, 2706)],
    total_nnz: 49216,
    sum_y: 7781,
    sum_iy: 10506393,
    class_counts: &[351, 217, 418, 818, 426, 298, 180],
    edge_checksum: 262801860794179,
    x_checksum: 94910363407,
    zero_rows: &[],
};

const CITESEER: Expected = Expected {
    nodes: 3327,
    features: 3703,
    classes: 6,
    edges: 9104,
    train: 120,
    y0: 3,
    first_test: (2488, 2),
    min_test: (2312, 4),
    x0_nnz: 31,
    x0_cols: [184, 257, 362, 560, 565],
    deg0: 1,
    first_edges: [(0, 628), (1, 158), (1, 486)],
    last_edges: [(3325, 1643), (3326, 33)],
    total_nnz: 105165,
    sum_y: 8953,
    sum_iy: 14890602,
    class_counts: &[264, 590, 668, 701, 596, 508],
    edge_checksum: 300002456962057,
    x_checksum: 647137655982,
    zero_rows: &[
        2407, 2489, 2553, 2682, 2781, 2953, 3042, 3063, 3212, 3214, 3250, 3292, 3305, 3306, 3309,
    ],
};

const MOD: u64 = (1 << 61) - 1;

fn check(d: &Planetoid, e: &Expected, test_ids: &[usize]) {
    let n = d.num_nodes;
    assert_eq!(
        (n, d.num_features, d.num_classes, d.num_edges()),
        (e.nodes, e.features, e.classes, e.edges)
    );
    assert_eq!(d.x.len(), n * d.num_features);
    for v in [
        &d.y.len(),
        &d.train_mask.len(),
        &d.val_mask.len(),
        &d.test_mask.len(),
    ] {
        assert_eq!(*v, n);
    }
    assert_eq!(d.edge_dst.len(), d.edge_src.len());

    // split
    assert_eq!(d.train_indices(), (0..e.train).collect::<Vec<_>>());
    assert_eq!(
        d.val_indices(),
        (e.train..e.train + 500).collect::<Vec<_>>()
    );
    assert_eq!(test_ids.len(), 1000);
    let mut sorted = test_ids.to_vec();
    sorted.sort_unstable();
    assert_eq!(d.test_indices(), sorted);

    // features: rows sum to 1, or are all zero
    let mut zero_rows = Vec::new();
    let mut total_nnz = 0;
    let mut x_checksum = 0u64;
    for i in 0..n {
        let row = d.features(i).unwrap();
        let sum: f64 = row.iter().map(|&v| f64::from(v)).sum();
        let nnz = row.iter().filter(|&&v| v != 0.0).count();
        total_nnz += nnz;
        if nnz == 0 {
            zero_rows.push(i);
        } else {
            assert!((sum - 1.0).abs() < 1e-5, "row {i} sums to {sum}");
            // the features are 0/1, so every nonzero equals 1 / nnz exactly as PyG computes it
            let want = 1.0f32 / nnz as f32;
            assert!(row.iter().all(|&v| v == 0.0 || v == want), "row {i}");
        }
        for (j, &v) in row.iter().enumerate() {
            if v != 0.0 {
                x_checksum = (x_checksum + (i * d.num_features + j) as u64) % MOD;
            }
        }
    }
    assert_eq!(zero_rows, e.zero_rows);
    assert_eq!(total_nnz, e.total_nnz);
    assert_eq!(x_checksum, e.x_checksum);

    // spot values
    assert_eq!(d.y[0], e.y0);
    assert_eq!(test_ids[0], e.first_test.0);
    assert_eq!(d.y[e.first_test.0], e.first_test.1);
    assert_eq!(d.y[e.min_test.0], e.min_test.1);
    let x0 = d.features(0).unwrap();
    let cols: Vec<usize> = (0..d.num_features).filter(|&j| x0[j] != 0.0).collect();
    assert_eq!(cols.len(), e.x0_nnz);
    assert_eq!(&cols[..5], &e.x0_cols);
    for &z in e.zero_rows {
        assert_eq!(
            d.y[z], 0,
            "isolated test node {z} gets label 0 (argmax of a zero row)"
        );
    }

    // labels
    assert_eq!(d.y.iter().sum::<i64>(), e.sum_y);
    assert_eq!(
        d.y.iter()
            .enumerate()
            .map(|(i, &v)| i as i64 * v)
            .sum::<i64>(),
        e.sum_iy
    );
    let mut counts = vec![0usize; d.num_classes];
    for &c in &d.y {
        counts[c as usize] += 1;
    }
    assert_eq!(counts, e.class_counts);

    // edges: sorted, unique, no self-loops, symmetric, as in the reference
    let edges: Vec<(i64, i64)> = d
        .edge_src
        .iter()
        .copied()
        .zip(d.edge_dst.iter().copied())
        .collect();
    assert!(
        edges.windows(2).all(|w| w[0] < w[1]),
        "edges sorted and unique"
    );
    assert!(edges.iter().all(|&(s, t)| s != t), "no self-loops");
    assert!(edges
        .iter()
        .all(|&(s, t)| s >= 0 && t >= 0 && (s as usize) < n && (t as usize) < n));
    let set: HashSet<(i64, i64)> = edges.iter().copied().collect();
    assert!(
        edges.iter().all(|&(s, t)| set.contains(&(t, s))),
        "symmetric"
    );
    assert_eq!(&edges[..3], &e.first_edges);
    assert_eq!(&edges[edges.len() - 2..], &e.last_edges);
    assert_eq!(d.edge_src.iter().filter(|&&s| s == 0).count(), e.deg0);
    let checksum = edges.iter().enumerate().fold(0u64, |acc, (k, &(s, t))| {
        let key = (s as u128 * n as u128 + t as u128) * (k as u128 + 1);
        ((acc as u128 + key) % MOD as u128) as u64
    });
    assert_eq!(checksum, e.edge_checksum);
}

fn test_ids(dir: &std::path::Path, name: PlanetoidName) -> Vec<usize> {
    std::fs::read_to_string(dir.join(name.file_name("test.index")))
        .unwrap()
        .lines()
        .map(|l| l.trim().parse().unwrap())
        .collect()
}

#[test]
fn cora_matches_pyg() {
    let Some(dir) = common::data_dir_or_skip("cora_matches_pyg") else {
        return;
    };
    let start = Instant::now();
    let d = load(&dir, PlanetoidName::Cora).unwrap();
    let elapsed = start.elapsed();
    eprintln!("loading Cora took {elapsed:?}");
    assert_eq!(d.name, PlanetoidName::Cora);
    check(&d, &CORA, &test_ids(&dir, PlanetoidName::Cora));
    // node 0: 9 nonzero features, each 1/9 in f32
    assert_eq!(d.features(0).unwrap()[19], 1.0f32 / 9.0);
    // generous bound: catches accidental quadratic behaviour without being flaky
    assert!(
        elapsed.as_secs_f64() < 10.0,
        "loading Cora took {elapsed:?}"
    );
}

#[test]
fn citeseer_matches_pyg() {
    let Some(dir) = common::data_dir_or_skip("citeseer_matches_pyg") else {
        return;
    };
    let start = Instant::now();
    let d = load(&dir, PlanetoidName::CiteSeer).unwrap();
    eprintln!("loading CiteSeer took {:?}", start.elapsed());
    assert_eq!(d.name, PlanetoidName::CiteSeer);
    check(&d, &CITESEER, &test_ids(&dir, PlanetoidName::CiteSeer));
}

#[test]
fn raw_files_decode() {
    use planetoid::graph_dict::AdjacencyDict;
    use planetoid::numpy::{ArrayData, NdArray};
    use planetoid::pickle::Pickle;
    use planetoid::scipy_sparse::Csr;

    let Some(dir) = common::data_dir_or_skip("raw_files_decode") else {
        return;
    };
    let files = PlanetoidFiles::read_dir(&dir, PlanetoidName::Cora).unwrap();

    let p = Pickle::parse(&files.y).unwrap();
    let y = NdArray::from_pickle(&p, p.root()).unwrap();
    assert_eq!(y.shape, vec![140, 7]);
    assert_eq!(y.dtype.to_string(), "<i4");
    let ArrayData::Int(v) = &y.data else {
        panic!("int labels")
    };
    assert!(v.chunks(7).all(|r| r.iter().sum::<i64>() == 1), "one-hot");

    let p = Pickle::parse(&files.allx).unwrap();
    let allx = Csr::from_pickle(&p, p.root()).unwrap();
    assert_eq!((allx.rows(), allx.cols()), (1708, 1433));
    assert!(allx.data().iter().all(|&v| v == 1.0));

    let p = Pickle::parse(&files.graph).unwrap();
    let g = AdjacencyDict::from_pickle(&p, p.root()).unwrap();
    assert_eq!(g.len(), 2708);
    // reference: sum of len(v) over the Python dict
    assert_eq!(g.num_raw_edges(), 10858);
    assert_eq!(g.entries()[0], (0, vec![633, 1862, 2582]));
}
