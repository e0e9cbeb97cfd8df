//! Data parallelism over simulated devices: equivalence with one device, the ledger's reduce
//! and broadcast traffic, the replica check, and the named failures.

use workbook::datasets;
use workbook::ledger::Ledger;
use workbook::loader::{Batch, LoaderConfig, NeighborLoader};
use workbook::parallel::{DataParallel, DataParallelTrainer};
use workbook::placement::{bytes_of, Placement};
use workbook::train::minibatch::{Eval, MiniBatchConfig, MiniBatchTrainer};
use workbook::train::{Adam, TrainConfig};
use workbook::{Graph, Model, ModelConfig};

fn cora() -> Graph {
    datasets::load("cora", None, Placement::cpu()).unwrap()
}

fn no_dropout(mut c: ModelConfig) -> ModelConfig {
    c.dropout = 0.0;
    c
}

fn max_diff(a: &Model, b: &Model) -> f32 {
    let pb: std::collections::HashMap<_, _> = b.named_parameters().into_iter().collect();
    a.named_parameters()
        .iter()
        .map(|(n, t)| {
            (t - &pb[n])
                .unwrap()
                .abs()
                .unwrap()
                .flatten_all()
                .unwrap()
                .max(0)
                .unwrap()
                .to_scalar::<f32>()
                .unwrap()
        })
        .fold(0f32, f32::max)
}

/// Two replicas on sim:1 and sim:2 against one device computing the mean loss over the same
/// two batches (written here from the definition: one backward pass over both, one Adam step).
/// Dropout is off so that both sides see the same computation; only the order of the sums
/// differs.
fn equivalence_for(config: ModelConfig, train: TrainConfig) {
    let g = cora();
    let loader = NeighborLoader::new(
        &g,
        LoaderConfig {
            shuffle: true,
            seed: 3,
            input_nodes: workbook::loader::InputNodes::Train,
            ..LoaderConfig::new(&[10, 10], 32)
        },
    )
    .unwrap();
    let (model, _) = Model::init(config.clone(), 0, Placement::cpu()).unwrap();
    let devices = [Placement::sim(1), Placement::sim(2)];
    let mut dp = DataParallel::new(&model, &devices, &train).unwrap();

    let one = Placement::sim(1);
    let reference = model.to_device(&one).unwrap();
    let mut opt = train.optimizer(&reference).unwrap();

    for epoch in 1..=3u64 {
        let batches: Vec<Batch> = loader.batches(epoch).collect::<Result<_, _>>().unwrap();
        for pair in batches.chunks(2) {
            let step = dp.step(&dp.scatter(pair).unwrap()).unwrap();
            let dp_loss = step.loss().unwrap();

            let seeds: usize = pair.iter().map(Batch::batch_size).sum();
            let mut total: Option<workbook::candle_core::Tensor> = None;
            for b in pair {
                let b = b.to_device(&one).unwrap();
                let bs = b.batch_size();
                let out = reference
                    .forward_t(b.x(), b.edge_index(), b.edge_weight(), None)
                    .unwrap();
                let ce = workbook::candle_nn::loss::cross_entropy(
                    &out.logits.narrow(0, 0, bs).unwrap(),
                    &b.y().unwrap().narrow(0, 0, bs).unwrap(),
                )
                .unwrap();
                let part = (ce * bs as f64).unwrap();
                total = Some(match total {
                    None => part,
                    Some(t) => (t + part).unwrap(),
                });
            }
            let loss = (total.unwrap() / seeds as f64).unwrap();
            let ref_loss = loss.to_scalar::<f32>().unwrap();
            opt.backward_step(&loss).unwrap();
            assert!(
                (dp_loss - ref_loss).abs() < 1e-5,
                "epoch {epoch}: data-parallel loss {dp_loss} vs one device {ref_loss}"
            );
        }
    }
    let d = max_diff(dp.module(), &reference);
    assert!(d < 1e-4, "parameters differ by {d} after 3 epochs");
    assert!(dp.check_in_sync().unwrap().in_sync);
}

#[test]
fn two_devices_match_one_device_on_the_same_batches_gcn() {
    let g = cora();
    equivalence_for(
        no_dropout(ModelConfig::gcn(g.num_features(), 16, g.num_classes())),
        TrainConfig::gcn(),
    );
}

#[test]
fn two_devices_match_one_device_on_the_same_batches_gatv2() {
    let g = cora();
    let mut c = no_dropout(ModelConfig::gatv2(g.num_features(), 8, 2, g.num_classes()));
    for l in &mut c.layers {
        if let workbook::LayerConfig::GatV2(gc) = l {
            gc.dropout = 0.0;
        }
    }
    equivalence_for(c, TrainConfig::gatv2());
}

#[test]
fn one_device_is_the_mini_batch_trainer_bit_for_bit() {
    let g = cora();
    let config = ModelConfig::gcn(g.num_features(), 16, g.num_classes());
    let mb = || MiniBatchConfig {
        eval: Eval::FullGraph,
        ..MiniBatchConfig::new(&[10, 10], 64)
    };
    let train = TrainConfig::gcn();
    let mut single =
        MiniBatchTrainer::new(config.clone(), &g, &train, mb(), &Placement::sim(1)).unwrap();
    let mut dp = DataParallelTrainer::new(config, &g, &train, mb(), &[Placement::sim(1)]).unwrap();
    for _ in 0..3 {
        let a = single.epoch().unwrap().stats;
        let b = dp.epoch().unwrap().stats;
        assert_eq!(a.loss.to_bits(), b.loss.to_bits(), "{a:?} vs {b:?}");
        assert_eq!(a.test_accuracy, b.test_accuracy);
    }
    assert_eq!(max_diff(single.model(), dp.data_parallel().module()), 0.0);
}

#[test]
fn every_step_reduces_gradients_and_broadcasts_parameters_in_the_ledger() {
    let g = cora();
    let ledger = Ledger::new();
    let devices: Vec<Placement> = (1..=3)
        .map(|k| Placement::sim(k).with_ledger(&ledger))
        .collect();
    let config = ModelConfig::gcn(g.num_features(), 16, g.num_classes());
    let param_bytes: u64 = Model::init(config.clone(), 0, Placement::cpu())
        .unwrap()
        .0
        .named_parameters()
        .iter()
        .map(|(_, t)| bytes_of(t))
        .sum();
    // 140 training nodes, 30 per replica: steps of 3 + 1 + 1 batches (30,30,30 | 30,20).
    let mb = MiniBatchConfig {
        eval: Eval::FullGraph,
        ..MiniBatchConfig::new(&[5, 5], 90)
    };
    let mut t = DataParallelTrainer::new(config, &g, &TrainConfig::gcn(), mb, &devices).unwrap();
    let e = t.epoch().unwrap();
    assert_eq!((e.steps, e.batches), (2, 5));
    assert!(e.replicas_in_sync);
    let epoch = ledger.in_phase("epoch 1");
    let sum = |prefix: &str| -> u64 {
        epoch
            .iter()
            .filter(|t| t.what.starts_with(prefix))
            .map(|t| t.bytes)
            .sum()
    };
    // Step 1: replicas 1 and 2 send their gradients; step 2: replica 1 only.
    assert_eq!(sum("reduce grad["), param_bytes * (2 + 1));
    // Both steps broadcast to the two other devices.
    assert_eq!(sum("broadcast "), param_bytes * 2 * 2);
    for t in epoch.iter().filter(|t| t.what.starts_with("reduce grad[")) {
        assert_eq!(t.to, "sim:1", "{t:?}");
    }
    for t in epoch.iter().filter(|t| t.what.starts_with("broadcast ")) {
        assert_eq!(t.from, "sim:1", "{t:?}");
    }
    // The same totals per step, as the CLI and the figure read them.
    let per_step = workbook::parallel::StepBytes::from_ledger(&ledger, e.steps);
    assert_eq!(per_step.reduce, (param_bytes * 3) as f64 / 2.0);
    assert_eq!(per_step.broadcast, (param_bytes * 4) as f64 / 2.0);
    assert!(per_step.batch > 0.0);
    // Each step is marked where it begins: its batches crossed before, its reduce after.
    let before = ledger.before_each(workbook::parallel::STEP_MARK);
    assert_eq!(before.len(), e.steps);
    assert!(before[0].iter().all(|t| !t.what.starts_with("reduce ")));
    assert!(before[1].iter().any(|t| t.what.starts_with("reduce grad[")));
    assert!(before[1]
        .iter()
        .any(|t| t.what == "batch.x" && t.to == "sim:2"));
    // Every batch part went to its replica's device.
    assert!(epoch.iter().any(|t| t.what == "batch.x" && t.to == "sim:3"));
    // The sync check read every replica's parameters back.
    assert_eq!(
        ledger
            .in_phase("sync 1")
            .iter()
            .map(|t| t.bytes)
            .sum::<u64>(),
        param_bytes * 3
    );
}

#[test]
fn the_sync_check_finds_a_replica_that_drifted() {
    let (model, _) = Model::init(ModelConfig::gcn(4, 8, 2), 0, Placement::cpu()).unwrap();
    let dp = DataParallel::new(
        &model,
        &[Placement::sim(1), Placement::sim(2)],
        &TrainConfig::gcn(),
    )
    .unwrap();
    assert!(dp.check_in_sync().unwrap().in_sync);
    let (name, var) = dp.replicas()[1].vars().unwrap().remove(0);
    var.set(&(var.as_tensor() + 1e-3).unwrap()).unwrap();
    let report = dp.check_in_sync().unwrap();
    assert!(!report.in_sync);
    assert_eq!(report.differences.len(), 1, "{:?}", report.differences);
    assert!(
        report.differences[0].contains(&format!("replica 1 (sim:2): '{name}'")),
        "{:?}",
        report.differences
    );
}

#[test]
fn a_replica_reading_from_the_first_device_is_named() {
    let (model, _) = Model::init(ModelConfig::gcn(4, 8, 2), 0, Placement::sim(1)).unwrap();
    // PyTorch's failure: the replica on the second device still uses the first's weights.
    let wrong = vec![model.clone(), model.clone()];
    let err = DataParallel::from_replicas(
        wrong,
        &[Placement::sim(1), Placement::sim(2)],
        &TrainConfig::gcn(),
    )
    .err()
    .unwrap()
    .to_string();
    assert!(
        err.contains("replica 1's device and batch are on sim:2 but replica tensor 'conv1.lin.weight' is on sim:1"),
        "{err}"
    );
    assert!(err.contains("DataParallel::new"), "{err}");
    let right = vec![model.clone(), model.to_device(Placement::sim(2)).unwrap()];
    assert!(DataParallel::from_replicas(
        right,
        &[Placement::sim(1), Placement::sim(2)],
        &TrainConfig::gcn()
    )
    .is_ok());
}

#[test]
fn a_batch_left_on_another_device_is_named() {
    let g = datasets::karate(Placement::cpu()).unwrap();
    let (model, _) = Model::init(
        ModelConfig::gcn(g.num_features(), 8, g.num_classes()),
        0,
        Placement::cpu(),
    )
    .unwrap();
    let mut dp = DataParallel::new(
        &model,
        &[Placement::sim(1), Placement::sim(2)],
        &TrainConfig::gcn(),
    )
    .unwrap();
    let loader = NeighborLoader::new(&g, LoaderConfig::new(&[5, 5], 2)).unwrap();
    let batches: Vec<Batch> = loader.batches(0).take(2).collect::<Result<_, _>>().unwrap();
    // Both batches sent to the first device.
    let both_first: Vec<Batch> = batches
        .iter()
        .map(|b| b.to_device(Placement::sim(1)).unwrap())
        .collect();
    let err = dp.step(&both_first).err().unwrap().to_string();
    assert!(
        err.contains("replica 1's parameters are on sim:2 but batch part 'batch.x' is on sim:1"),
        "{err}"
    );
}

#[test]
fn outputs_gathered_to_one_device_and_labels_on_another_are_named() {
    let g = datasets::karate(Placement::cpu()).unwrap();
    let (model, _) = Model::init(
        ModelConfig::gcn(g.num_features(), 8, g.num_classes()),
        0,
        Placement::cpu(),
    )
    .unwrap();
    let devices = [Placement::sim(1), Placement::sim(2)];
    let dp = DataParallel::new(&model, &devices, &TrainConfig::gcn()).unwrap();
    let loader = NeighborLoader::new(&g, LoaderConfig::new(&[5, 5], 2)).unwrap();
    let batches: Vec<Batch> = loader.batches(0).take(2).collect::<Result<_, _>>().unwrap();
    let gathered = dp
        .forward_gather(&dp.scatter(&batches).unwrap(), &devices[0])
        .unwrap();
    let y: Vec<u32> = batches
        .iter()
        .flat_map(|b| {
            b.y()
                .unwrap()
                .narrow(0, 0, b.batch_size())
                .unwrap()
                .to_vec1::<u32>()
                .unwrap()
        })
        .collect();
    let y = workbook::candle_core::Tensor::new(y.as_slice(), devices[1].device()).unwrap();
    let err = gathered
        .cross_entropy(&y, &devices[1])
        .err()
        .unwrap()
        .to_string();
    assert!(
        err.contains("gathered outputs are on sim:1 but labels 'y' is on sim:2"),
        "{err}"
    );
    let y = devices[0].move_tensor(&y, &devices[1], "y").unwrap();
    assert!(gathered
        .cross_entropy(&y, &devices[0])
        .unwrap()
        .to_scalar::<f32>()
        .unwrap()
        .is_finite());
}

#[test]
fn optimizer_state_left_on_another_device_is_named() {
    let (model, _) = Model::init(ModelConfig::gcn(4, 8, 2), 0, Placement::sim(2)).unwrap();
    let opt_on_sim2 = TrainConfig::gcn().optimizer(&model).unwrap();
    let dp = DataParallel::new(
        &model,
        &[Placement::sim(1), Placement::sim(2)],
        &TrainConfig::gcn(),
    )
    .unwrap();
    // Rebinding keeps the state on sim:2 while the first replica is on sim:1.
    let stale: Adam = opt_on_sim2.rebind(dp.module()).unwrap();
    let err = DataParallel::new(
        &model,
        &[Placement::sim(1), Placement::sim(2)],
        &TrainConfig::gcn(),
    )
    .unwrap();
    let err = err.with_optimizer(stale).err();
    // `stale` is bound to `dp`'s first replica, not `err`'s: it is refused for that first.
    assert!(err
        .unwrap()
        .to_string()
        .contains("does not update the first replica"));
    let stale = opt_on_sim2.rebind(dp.module()).unwrap();
    let msg = dp.with_optimizer(stale).err().unwrap().to_string();
    assert!(
        msg.contains("model parameters are on sim:1 but optimizer state 'exp_avg[conv1.lin.weight]' is on sim:2"),
        "{msg}"
    );
}

#[test]
fn bad_device_lists_and_batch_sizes_are_refused_with_the_fix() {
    let g = cora();
    let config = ModelConfig::gcn(g.num_features(), 16, g.num_classes());
    let twice = [Placement::sim(1), Placement::sim(1)];
    let (model, _) = Model::init(config.clone(), 0, Placement::cpu()).unwrap();
    let err = DataParallel::new(&model, &twice, &TrainConfig::gcn())
        .err()
        .unwrap()
        .to_string();
    assert!(err.contains("sim:1 is listed twice"), "{err}");
    let err = DataParallel::new(&model, &[], &TrainConfig::gcn())
        .err()
        .unwrap()
        .to_string();
    assert!(err.contains("at least one device"), "{err}");
    let devices = [Placement::sim(1), Placement::sim(2)];
    let err = DataParallelTrainer::new(
        config,
        &g,
        &TrainConfig::gcn(),
        MiniBatchConfig::new(&[10, 10], 127),
        &devices,
    )
    .err()
    .unwrap()
    .to_string();
    assert!(
        err.contains("batch size 127 does not split evenly over 2 device(s)")
            && err.contains("e.g. 126"),
        "{err}"
    );
}

#[test]
fn two_devices_reach_one_devices_accuracy_on_cora() {
    let g = cora();
    let config = ModelConfig::gcn(g.num_features(), 16, g.num_classes());
    let train = TrainConfig {
        epochs: 60,
        ..TrainConfig::gcn()
    };
    let mb = || MiniBatchConfig {
        eval: Eval::FullGraph,
        ..MiniBatchConfig::new(&[10, 10], 128)
    };
    let one = workbook::train::minibatch::train_minibatch(
        config.clone(),
        &g,
        &train,
        mb(),
        &Placement::sim(1),
        |_| {},
    )
    .unwrap();
    let two = workbook::parallel::train_data_parallel(
        config,
        &g,
        &train,
        mb(),
        &[Placement::sim(1), Placement::sim(2)],
        |_| {},
    )
    .unwrap();
    let a = one.history().last().unwrap().stats.test_accuracy;
    let last = two.history().last().unwrap();
    assert!(last.replicas_in_sync);
    let b = last.stats.test_accuracy;
    assert!(
        a > 0.7 && b > 0.7 && (a - b).abs() < 0.03,
        "one device {a}, two devices {b}"
    );
}
