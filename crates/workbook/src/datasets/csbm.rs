//! A seeded contextual stochastic block model: synthetic graphs of any size.
//!
//! Nodes fall into `classes` communities. Each node draws about `avg_degree / 2` partners, a
//! fraction `homophily` of them from its own community and the rest uniformly from the others;
//! every pair becomes two directed edges (duplicates and self-loops removed). Features are the
//! community's random mean vector plus Gaussian noise, so a GNN that averages neighbours denoises
//! them. Split: 20 training nodes per class, 500 validation, 1000 test (Planetoid's sizes), capped
//! for small graphs. Generation is linear in the number of edges: 10⁶ nodes take seconds.
//!
//! ```
//! use workbook::datasets::{csbm, CsbmConfig};
//! let g = csbm(&CsbmConfig::new(1_000), &workbook::candle_core::Device::Cpu).unwrap();
//! assert_eq!(g.num_nodes(), 1_000);
//! assert!(g.num_edges() > 8_000); // about 10 per node
//! ```

use crate::edge_index::EdgeIndex;
use crate::error::{Result, WorkbookError};
use crate::graph::{Graph, Split};
use crate::placement::Placement;
use candle_core::{Device, Tensor};
use rand::seq::SliceRandom;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rand_distr::{Distribution, Normal};

/// Parameters of the generator.
#[derive(Clone, Debug, PartialEq)]
pub struct CsbmConfig {
    pub nodes: usize,
    pub classes: usize,
    pub features: usize,
    /// Expected number of (directed) edges per node.
    pub avg_degree: f64,
    /// Probability that an edge stays inside its community.
    pub homophily: f64,
    /// Standard deviation of the feature noise (class means have unit scale).
    pub noise: f64,
    pub seed: u64,
}

impl CsbmConfig {
    /// Defaults: 5 classes, 32 features, degree 10, homophily 0.8, noise 1.5, seed 0.
    pub fn new(nodes: usize) -> Self {
        Self {
            nodes,
            classes: 5,
            features: 32,
            avg_degree: 10.0,
            homophily: 0.8,
            noise: 1.5,
            seed: 0,
        }
    }
}

/// Generates the graph on `device`.
pub fn csbm(config: &CsbmConfig, device: impl Into<Placement>) -> Result<Graph> {
    let CsbmConfig {
        nodes: n,
        classes: c,
        features: f,
        ..
    } = *config;
    if n < c.max(2) || c < 2 || f == 0 {
        return Err(WorkbookError::InvalidConfig(format!(
            "csbm needs at least 2 classes, 1 feature and as many nodes as classes (got {n} nodes, {c} classes, {f} features)"
        )));
    }
    let usable = (0.0..=1.0).contains(&config.homophily)
        && (0.0..=1e6).contains(&config.avg_degree)
        && config.noise >= 0.0
        && config.noise.is_finite();
    if !usable {
        return Err(WorkbookError::InvalidConfig(
            "csbm: homophily must be in [0, 1], the degree in [0, 1000000] and the noise finite and non-negative".into(),
        ));
    }
    // Before allocating anything: a size that cannot fit is an error, not an abort.
    crate::limits::check_memory(
        &format!(
            "csbm:{n} ({f} features, ~{} edges per node)",
            config.avg_degree
        ),
        crate::limits::csbm_bytes(n, f, config.avg_degree),
    )?;
    if n > crate::limits::MAX_NODES {
        return Err(WorkbookError::InvalidConfig(format!(
            "csbm:{n}: graphs are limited to {} nodes (node ids are 32-bit)",
            crate::limits::MAX_NODES
        )));
    }
    let mut rng = ChaCha8Rng::seed_from_u64(config.seed);
    let labels: Vec<i64> = (0..n).map(|i| (i % c) as i64).collect::<Vec<_>>();
    let mut labels = labels;
    labels.shuffle(&mut rng);
    let mut members: Vec<Vec<u32>> = vec![Vec::new(); c];
    for (i, &y) in labels.iter().enumerate() {
        members[y as usize].push(i as u32);
    }

    let partners_per_node = config.avg_degree / 2.0;
    let mut pairs: Vec<(u32, u32)> =
        Vec::with_capacity((n as f64 * config.avg_degree) as usize + n);
    for (u, &label) in labels.iter().enumerate() {
        // Integer part plus a Bernoulli for the fraction keeps the mean degree exact.
        let whole = partners_per_node.floor() as usize;
        let k = whole + usize::from(rng.random::<f64>() < partners_per_node - whole as f64);
        let own = label as usize;
        for _ in 0..k {
            let class = if rng.random::<f64>() < config.homophily {
                own
            } else {
                let other = rng.random_range(0..c - 1);
                if other >= own {
                    other + 1
                } else {
                    other
                }
            };
            let pool = &members[class];
            let v = pool[rng.random_range(0..pool.len())];
            if v as usize != u {
                pairs.push((u as u32, v));
                pairs.push((v, u as u32));
            }
        }
    }
    pairs.sort_unstable();
    pairs.dedup();
    let src: Vec<i64> = pairs.iter().map(|p| p.0 as i64).collect();
    let dst: Vec<i64> = pairs.iter().map(|p| p.1 as i64).collect();

    let x = class_features(&labels, c, f, config.noise, &mut rng);

    let (train, val, test) = planetoid_split(&labels, c, &mut rng);

    let edge_index = EdgeIndex::new(&src, &dst, n, &Device::Cpu)?;
    let x = Tensor::from_vec(x, (n, f), &Device::Cpu)?;
    let split = Split::from_masks(&train, &val, &test, &Device::Cpu)?;
    Graph::new(format!("csbm:{n}"), x, edge_index)?
        .with_labels(&labels, split)?
        .to_device(device)
}

/// Gaussian features, `[n, features]` row-major: each class draws a mean from N(0, 1) per
/// feature, then each node its class's mean plus `noise`·N(0, 1), all from `rng` in that order
/// (csbm's and knn's features, so both draw the same way).
pub(crate) fn class_features(
    labels: &[i64],
    classes: usize,
    features: usize,
    noise: f64,
    rng: &mut ChaCha8Rng,
) -> Vec<f32> {
    let unit = Normal::new(0.0f32, 1.0).expect("valid normal");
    let means: Vec<Vec<f32>> = (0..classes)
        .map(|_| (0..features).map(|_| unit.sample(rng)).collect())
        .collect();
    let noise = noise as f32;
    let mut x = Vec::with_capacity(labels.len() * features);
    for &y in labels {
        for &m in &means[y as usize] {
            x.push(m + noise * unit.sample(rng));
        }
    }
    x
}

/// Planetoid's split sizes on a synthetic graph: 20 training nodes per class (fewer on small
/// graphs), then 500 validation and 1000 test nodes, drawn with `rng`. Masks of length `n`.
pub(crate) fn planetoid_split(
    labels: &[i64],
    classes: usize,
    rng: &mut ChaCha8Rng,
) -> (Vec<bool>, Vec<bool>, Vec<bool>) {
    let (n, c) = (labels.len(), classes);
    let mut order: Vec<usize> = (0..n).collect();
    order.shuffle(rng);
    let per_class = 20.min(n / (3 * c)).max(1);
    let mut train = vec![false; n];
    let mut taken = vec![0usize; c];
    for &i in &order {
        let y = labels[i] as usize;
        if taken[y] < per_class {
            taken[y] += 1;
            train[i] = true;
        }
    }
    let rest: Vec<usize> = order.iter().copied().filter(|&i| !train[i]).collect();
    let n_val = 500.min(rest.len() / 3);
    let n_test = 1000.min(rest.len() - n_val);
    let mut val = vec![false; n];
    let mut test = vec![false; n];
    rest[..n_val].iter().for_each(|&i| val[i] = true);
    rest[n_val..n_val + n_test]
        .iter()
        .for_each(|&i| test[i] = true);

    (train, val, test)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn is_seeded_and_homophilous() {
        let a = csbm(&CsbmConfig::new(500), &Device::Cpu).unwrap();
        let b = csbm(&CsbmConfig::new(500), &Device::Cpu).unwrap();
        assert_eq!(a.edge_index().sources_host(), b.edge_index().sources_host());
        let y = a.labels_host().unwrap().unwrap();
        let ei = a.edge_index();
        let same = ei
            .sources_host()
            .iter()
            .zip(ei.targets_host())
            .filter(|(&s, &t)| y[s as usize] == y[t as usize])
            .count();
        let ratio = same as f64 / ei.num_edges() as f64;
        assert!((0.7..0.9).contains(&ratio), "homophily {ratio}");
        assert!(ei
            .sources_host()
            .iter()
            .zip(ei.targets_host())
            .all(|(s, t)| s != t));
    }

    #[test]
    fn rejects_nonsense() {
        assert!(csbm(&CsbmConfig::new(1), &Device::Cpu).is_err());
    }
}
