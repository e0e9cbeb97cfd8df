//! The one-process reference of a distributed run: `DataParallel` with one replica per rank,
//! fed the batches each rank's shard gives (shared by tests/distributed.rs and
//! tests/distributed_mpi.rs).

use workbook::graph::Graph;
use workbook::loader::NeighborLoader;
use workbook::parallel::{DataParallel, DistributedSampler};
use workbook::placement::Placement;
use workbook::train::minibatch::MiniBatchConfig;
use workbook::train::TrainConfig;
use workbook::{datasets, Model, ModelConfig};

pub fn graph() -> Graph {
    datasets::load("csbm:600", None, Placement::cpu()).unwrap()
}

pub fn config(g: &Graph) -> ModelConfig {
    ModelConfig::gcn(g.num_features(), 16, g.num_classes())
}

/// 7 seeds per rank and step: the shards' last batches are smaller, and with 2 ranks an odd
/// number of training nodes leaves rank 1 one seed short.
pub fn mb() -> MiniBatchConfig {
    MiniBatchConfig::new(&[5, 5], 7)
}

/// Every parameter's name and values, flattened.
pub type Params = Vec<(String, Vec<f32>)>;

pub fn params(m: &Model) -> Params {
    m.vars()
        .unwrap()
        .into_iter()
        .map(|(n, v)| (n, v.as_tensor().flatten_all().unwrap().to_vec1().unwrap()))
        .collect()
}

/// The parameters after `epochs` epochs of `DataParallel` over `world` replicas (sim:1..) on
/// the batches rank r of a distributed run samples (batch t·world + r of its shard's chunk t).
pub fn data_parallel_on_the_ranks_batches(
    g: &Graph,
    loader: &NeighborLoader,
    world: usize,
    epochs: u64,
) -> (Params, Params) {
    let tc = TrainConfig::gcn();
    let (model, _) = Model::init(config(g), tc.seed, Placement::cpu()).unwrap();
    let devices: Vec<Placement> = (1..=world).map(Placement::sim).collect();
    let mut dp = DataParallel::new(&model, &devices, &tc).unwrap();
    let seeds = loader.seeds();
    let bs = mb().batch_size;
    for epoch in 1..=epochs {
        let shards: Vec<Vec<u32>> = (0..world)
            .map(|r| {
                DistributedSampler::new(world, r, tc.seed)
                    .unwrap()
                    .shard(seeds, epoch)
            })
            .collect();
        let steps = DistributedSampler::new(world, 0, tc.seed)
            .unwrap()
            .steps(seeds.len(), bs);
        for t in 0..steps {
            let batches: Vec<_> = (0..world)
                .filter_map(|r| {
                    let s = &shards[r];
                    let c = s.get(t * bs..((t + 1) * bs).min(s.len()))?;
                    (!c.is_empty()).then(|| {
                        loader
                            .batch_of(epoch, t * world + r, c)
                            .unwrap()
                            .to_device(&devices[r])
                            .unwrap()
                    })
                })
                .collect();
            dp.step(&batches).unwrap();
        }
    }
    (params(&model), params(dp.module()))
}

/// The largest difference between two parameter lists of the same names and sizes.
pub fn max_difference(a: &[(String, Vec<f32>)], b: &[(String, Vec<f32>)]) -> f32 {
    assert_eq!(a.len(), b.len());
    let mut worst = 0f32;
    for ((n, x), (m, y)) in a.iter().zip(b) {
        assert_eq!((n, x.len()), (m, y.len()));
        for (p, q) in x.iter().zip(y) {
            assert!(p.is_finite() && q.is_finite(), "{n}: {p} vs {q}");
            worst = worst.max((p - q).abs());
        }
    }
    worst
}
