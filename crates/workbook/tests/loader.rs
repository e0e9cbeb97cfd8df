//! NeighborLoader: the sampler's invariants and statistics, batches that move every step (the
//! ledger), the named failures, prefetch, and mini-batch training.

use rand::SeedableRng;
use std::collections::{HashMap, HashSet};
use workbook::datasets::{self, CsbmConfig};
use workbook::ledger::Ledger;
use workbook::loader::{BatchPart, InputNodes, LoaderConfig, NeighborLoader, NeighborSampler};
use workbook::placement::Placement;
use workbook::train::minibatch::{Eval, MiniBatchConfig, MiniBatchTrainer};
use workbook::train::TrainConfig;
use workbook::{Graph, ModelConfig, WorkbookError};

fn csbm(nodes: usize, seed: u64) -> Graph {
    let mut c = CsbmConfig::new(nodes);
    c.seed = seed;
    c.avg_degree = 8.0;
    datasets::csbm(&c, Placement::cpu()).unwrap()
}

/// Checks every invariant of every batch of `loader` in `epoch`.
fn check_batches(g: &Graph, loader: &NeighborLoader, epoch: u64) -> usize {
    let src = g.edge_index().sources_host();
    let dst = g.edge_index().targets_host();
    let sampler = loader.sampler();
    let k = &loader.config().num_neighbors;
    let expected_seeds = loader.epoch_seeds(epoch);
    let mut n = 0;
    for (b, batch) in loader.batches(epoch).enumerate() {
        let batch = batch.unwrap();
        n += 1;
        let n_id = batch.n_id_host();
        let e_id = batch.e_id().to_vec1::<u32>().unwrap();
        // Seeds first, in the loader's order.
        assert_eq!(&n_id[..batch.batch_size()], &expected_seeds[b][..]);
        // Nodes and edges are distinct (sampling without replacement).
        assert_eq!(n_id.iter().collect::<HashSet<_>>().len(), n_id.len());
        assert_eq!(e_id.iter().collect::<HashSet<_>>().len(), e_id.len());
        // Hop counts add up.
        assert_eq!(batch.num_sampled_nodes().iter().sum::<usize>(), n_id.len());
        assert_eq!(batch.num_sampled_edges().iter().sum::<usize>(), e_id.len());
        assert_eq!(batch.num_sampled_nodes().len(), k.len() + 1);
        // Every edge is a graph edge, in PyG's direction (source -> target).
        let ls = batch.edge_index().sources_host();
        let ld = batch.edge_index().targets_host();
        for ((&s, &d), &e) in ls.iter().zip(ld).zip(&e_id) {
            let e = e as usize;
            assert_eq!((n_id[s as usize], n_id[d as usize]), (src[e], dst[e]));
        }
        // Hop limits: the targets of hop h's edges are the nodes added at hop h (seeds for
        // h = 0), each node gets min(k, in-degree) edges, and sources come from hop <= h + 1.
        let mut node_start = vec![0usize];
        for c in batch.num_sampled_nodes() {
            node_start.push(node_start.last().unwrap() + c);
        }
        let mut edge_at = 0usize;
        for (h, (&kh, &count)) in k.iter().zip(batch.num_sampled_edges()).enumerate() {
            let mut per_target: HashMap<u32, usize> = HashMap::new();
            for i in edge_at..edge_at + count {
                let t = ld[i] as usize;
                assert!(
                    (node_start[h]..node_start[h + 1]).contains(&t),
                    "hop {h} edge into a node of another hop"
                );
                assert!(
                    (ls[i] as usize) < node_start[h + 2],
                    "source beyond hop {}",
                    h + 1
                );
                *per_target.entry(ld[i]).or_default() += 1;
            }
            for (t, &node) in n_id
                .iter()
                .enumerate()
                .take(node_start[h + 1])
                .skip(node_start[h])
            {
                let deg = sampler.in_degree(node);
                let want = if kh < 0 { deg } else { deg.min(kh as usize) };
                assert_eq!(per_target.get(&(t as u32)).copied().unwrap_or(0), want);
            }
            edge_at += count;
        }
        // Features and labels are the rows of the batch's nodes.
        let x = g.x().to_vec2::<f32>().unwrap();
        let bx = batch.x().to_vec2::<f32>().unwrap();
        let y = g.y().unwrap().to_vec1::<u32>().unwrap();
        let by = batch.y().unwrap().to_vec1::<u32>().unwrap();
        for (local, &global) in n_id.iter().enumerate() {
            assert_eq!(bx[local], x[global as usize]);
            assert_eq!(by[local], y[global as usize]);
        }
    }
    n
}

#[test]
fn batches_keep_every_invariant() {
    let g = csbm(600, 1);
    for (k, bs, shuffle) in [
        (vec![3, 2], 64, true),
        (vec![-1, 5], 100, false),
        (vec![10, 10, 10], 7, true),
        (vec![0, 4], 50, false),
    ] {
        let loader = NeighborLoader::new(
            &g,
            LoaderConfig {
                shuffle,
                input_nodes: InputNodes::Train,
                seed: 5,
                ..LoaderConfig::new(&k, bs)
            },
        )
        .unwrap();
        for epoch in 0..2 {
            assert_eq!(check_batches(&g, &loader, epoch), loader.len());
        }
    }
}

#[test]
fn epochs_cover_every_seed_once_and_shuffle_differs() {
    let g = csbm(300, 2);
    let loader = NeighborLoader::new(
        &g,
        LoaderConfig {
            shuffle: true,
            ..LoaderConfig::new(&[2], 32)
        },
    )
    .unwrap();
    assert_eq!(loader.len(), 300usize.div_ceil(32));
    let e0: Vec<u32> = loader.epoch_seeds(0).concat();
    let e1: Vec<u32> = loader.epoch_seeds(1).concat();
    let mut sorted = e0.clone();
    sorted.sort();
    assert_eq!(sorted, (0..300).collect::<Vec<u32>>());
    assert_ne!(e0, e1, "shuffle gives each epoch its own order");
    // Without shuffle, input order.
    let plain = NeighborLoader::new(&g, LoaderConfig::new(&[2], 32)).unwrap();
    assert_eq!(
        plain.epoch_seeds(3).concat(),
        (0..300).collect::<Vec<u32>>()
    );
}

#[test]
fn determinism_per_seed_and_prefetch_gives_the_same_batches() {
    let g = csbm(400, 3);
    let make = |seed| {
        NeighborLoader::new(
            &g,
            LoaderConfig {
                shuffle: true,
                seed,
                ..LoaderConfig::new(&[4, 3], 50)
            },
        )
        .unwrap()
    };
    let ids = |l: &NeighborLoader, prefetch: bool| -> Vec<Vec<u32>> {
        let it: Box<dyn Iterator<Item = _>> = if prefetch {
            Box::new(l.prefetch(7, 2))
        } else {
            Box::new(l.batches(7))
        };
        it.map(|b| b.unwrap().n_id_host().to_vec()).collect()
    };
    let (a, b, c) = (make(9), make(9), make(10));
    assert_eq!(ids(&a, false), ids(&b, false));
    assert_ne!(ids(&a, false), ids(&c, false));
    assert_eq!(ids(&a, false), ids(&a, true));
    assert_eq!(a.batch(7, 3).unwrap().n_id_host(), &ids(&a, false)[3][..]);
    // Stopping early stops the prefetch thread (no hang, no leak of the epoch).
    let first = a.prefetch(1, 1).next().unwrap().unwrap();
    assert!(first.prepared().in_background);
}

#[test]
fn sampling_is_uniform_without_replacement() {
    // Node 0 receives from nodes 1..=10.
    let src: Vec<u32> = (1..=10).collect();
    let dst = vec![0u32; 10];
    let s = NeighborSampler::new(&src, &dst, 11).unwrap();
    let mut rng = rand_chacha::ChaCha8Rng::seed_from_u64(42);
    let draws = 20_000usize;
    let mut count = [0usize; 11];
    for _ in 0..draws {
        let sub = s.sample(&[0], &[3], &mut rng).unwrap();
        assert_eq!(sub.n_id.len(), 4);
        for &j in &sub.n_id[1..] {
            count[j as usize] += 1;
        }
    }
    // Each neighbour is picked with probability 3/10: mean 6000, sd ~65; allow 5 sd.
    for (j, &c) in count.iter().enumerate().skip(1) {
        assert!(
            (c as f64 - 6000.0).abs() < 325.0,
            "neighbour {j}: {c} of {draws}"
        );
    }
    // Pairs are uniform too (a biased without-replacement scheme fails here): 45 pairs,
    // each with probability 3/45 per draw = 1333 expected, sd ~35.
    let mut pairs: HashMap<(u32, u32), usize> = HashMap::new();
    for _ in 0..draws {
        let sub = s.sample(&[0], &[3], &mut rng).unwrap();
        let mut p = sub.n_id[1..].to_vec();
        p.sort();
        for a in 0..3 {
            for b in a + 1..3 {
                *pairs.entry((p[a], p[b])).or_default() += 1;
            }
        }
    }
    assert_eq!(pairs.len(), 45);
    for (p, &c) in &pairs {
        assert!((c as f64 - 1333.3).abs() < 200.0, "pair {p:?}: {c}");
    }
}

#[test]
fn the_sampler_refuses_device_side_inputs_with_a_named_error() {
    let g = csbm(100, 4);
    let sim = Placement::sim(1);
    // The whole graph on the device (PyG: data.to(device) before the loader).
    let err =
        NeighborLoader::new(&g.to_device(&sim).unwrap(), LoaderConfig::new(&[5], 10)).unwrap_err();
    assert!(
        matches!(err, WorkbookError::SamplerInputOnDevice { .. }),
        "{err}"
    );
    assert!(err.to_string().contains("sim:1"), "{err}");
    // The message says that PyG (2.4 and later) accepts this and why this loader does not,
    // rather than calling a graph on the GPU a mistake.
    assert!(
        err.to_string().contains("PyG 2.4 and later accept this"),
        "{err}"
    );
    // input_nodes on the device, graph on the host (PyG 2.3 died on it, issue 7691; PyG 2.4
    // and later copy them to the CPU).
    let ids = g.split().unwrap().train.clone();
    let on_sim = sim.move_tensor(&ids, &Placement::cpu(), "ids").unwrap();
    let config = LoaderConfig {
        input_nodes: InputNodes::Tensor {
            ids: on_sim,
            at: sim.clone(),
        },
        ..LoaderConfig::new(&[5], 10)
    };
    let err = NeighborLoader::new(&g, config).unwrap_err();
    assert!(err.to_string().contains("input_nodes is on sim:1"), "{err}");
    // The host tensor is fine.
    let config = LoaderConfig {
        input_nodes: InputNodes::Tensor {
            ids,
            at: Placement::cpu(),
        },
        ..LoaderConfig::new(&[5], 10)
    };
    assert!(NeighborLoader::new(&g, config).is_ok());
    // Bad settings are named too.
    for (k, bs, what) in [
        (vec![], 10, "num_neighbors is empty"),
        (vec![-3], 10, "-3"),
        (vec![2], 0, "batch_size is 0"),
    ] {
        let err = NeighborLoader::new(&g, LoaderConfig::new(&k, bs)).unwrap_err();
        assert!(err.to_string().contains(what), "{err}");
    }
    let mask = InputNodes::Mask(vec![true; 3]);
    let err = NeighborLoader::new(
        &g,
        LoaderConfig {
            input_nodes: mask,
            ..LoaderConfig::new(&[1], 4)
        },
    )
    .unwrap_err();
    assert!(err.to_string().contains("mask has 3 entries"), "{err}");
}

fn trainer(g: &Graph, device: &Placement, prefetch: usize, eval: Eval) -> MiniBatchTrainer {
    trainer_bs(g, device, prefetch, eval, 64)
}

fn trainer_bs(
    g: &Graph,
    device: &Placement,
    prefetch: usize,
    eval: Eval,
    batch_size: usize,
) -> MiniBatchTrainer {
    let config = ModelConfig::gcn(g.num_features(), 16, g.num_classes());
    let mb = MiniBatchConfig {
        prefetch,
        eval,
        ..MiniBatchConfig::new(&[5, 5], batch_size)
    };
    let tc = TrainConfig {
        seed: 1,
        ..TrainConfig::gcn()
    };
    MiniBatchTrainer::new(config, g, &tc, mb, device).unwrap()
}

#[test]
fn the_ledger_shows_each_batch_moving_and_the_model_crossing_once() {
    let g = csbm(20_000, 5);
    let ledger = Ledger::new();
    let sim = Placement::sim(1).with_ledger(&ledger);
    let mut t = trainer(&g, &sim, 0, Eval::FullGraph);
    let init = ledger.in_phase("init");
    assert!(
        !init.is_empty() && init.iter().all(|t| t.to == "sim:1"),
        "{init:?}"
    );
    let e1 = t.epoch().unwrap();
    let e2 = t.epoch().unwrap();
    // The model crossed once, in init, and never again.
    assert!(ledger
        .transfers()
        .iter()
        .filter(|t| t.phase != "init")
        .all(|t| !t.what.starts_with("conv")));
    // Epoch 2 (the eval graph moved once, in epoch 1): per step exactly the batch's five
    // parts, of exactly the batch's size; then one read-back of the metrics.
    let e2_transfers = ledger.in_phase("epoch 2");
    let batch_moves: Vec<_> = e2_transfers
        .iter()
        .filter(|t| t.what.starts_with("batch."))
        .collect();
    assert_eq!(batch_moves.len(), 5 * e2.batches);
    let moved: u64 = batch_moves.iter().map(|t| t.bytes).sum();
    let expected: u64 = e2.steps.iter().map(|s| s.bytes).sum();
    assert_eq!(moved, expected);
    // Each step moves a small part of the graph: under a fifth of its features alone.
    let graph_x = (g.num_nodes() * g.num_features() * 4) as u64;
    assert!(
        e2.steps.iter().all(|s| s.bytes < graph_x / 5),
        "{:?} vs {graph_x}",
        e2.steps
    );
    // Besides: the structure GCN derives from each batch's edges (self-loops, the sorted CSR),
    // built on the host from the batch's host ids and uploaded once per batch. Nothing of the
    // graph. Evaluation (full graph, moved once) reads back one thing: the metrics.
    let rest: Vec<_> = e2_transfers
        .iter()
        .filter(|t| !t.what.starts_with("batch."))
        .collect();
    let derived = rest
        .iter()
        .filter(|t| t.what.starts_with("edge_index ("))
        .count();
    assert_eq!(derived, 2 * e2.batches, "{rest:?}");
    assert_eq!(rest.len(), derived, "{rest:?}");
    let eval = ledger.in_phase("eval 2");
    assert_eq!(eval.len(), 1, "{eval:?}");
    assert_eq!((eval[0].from.as_str(), eval[0].bytes), ("sim:1", 16));
    assert!(ledger
        .in_phase("eval graph")
        .iter()
        .any(|t| t.what.ends_with(".x")));
    assert!(e1.stats.loss.is_finite());
}

#[test]
fn each_step_is_marked_in_the_ledger_after_its_batch_crossed() {
    // Steps copy nothing themselves; the mark each leaves tells which copies came before which
    // step: here exactly its own batch's five parts (and the structure the previous step
    // derived from its batch's edges, uploaded during that step).
    let g = csbm(600, 9);
    let ledger = Ledger::new();
    let sim = Placement::sim(1).with_ledger(&ledger);
    let mut t = trainer_bs(&g, &sim, 0, Eval::Skip, 50);
    ledger.clear();
    let e = t.epoch().unwrap();
    let before = ledger.before_each(workbook::train::minibatch::STEP_MARK);
    assert_eq!(before.len(), e.batches);
    for (k, copies) in before.iter().enumerate() {
        let mut parts: Vec<&str> = copies
            .iter()
            .filter(|t| t.what.starts_with("batch."))
            .map(|t| t.what.as_str())
            .collect();
        parts.sort();
        assert_eq!(
            parts,
            [
                "batch.e_id",
                "batch.edge_index",
                "batch.n_id",
                "batch.x",
                "batch.y"
            ],
            "step {k}: {copies:?}"
        );
    }
    // A loop that moves every batch first and then steps shows it: all copies before step 0.
    ledger.clear();
    let loader = t.loader().clone();
    let moved: Vec<_> = loader
        .batches(2)
        .map(|b| b.unwrap().to_device(&sim).unwrap())
        .collect();
    for b in &moved {
        t.step(b).unwrap();
    }
    let before = ledger.before_each(workbook::train::minibatch::STEP_MARK);
    assert_eq!(before[0].len(), 5 * moved.len());
    assert!(before[1..]
        .iter()
        .all(|c| c.iter().all(|t| !t.what.starts_with("batch."))));
}

#[test]
fn moving_the_whole_graph_inside_the_loop_shows_in_the_ledger() {
    // The anti-pattern raises no error; only the ledger shows it.
    let g = csbm(300, 6);
    let ledger = Ledger::new();
    let sim = Placement::sim(1).with_ledger(&ledger);
    let loader = NeighborLoader::new(&g, LoaderConfig::new(&[3, 3], 100)).unwrap();
    ledger.set_phase("bad loop");
    for batch in loader.batches(0) {
        let _everything = g.to_device(&sim).unwrap(); // every step: the full graph
        let _batch = batch.unwrap().to_device(&sim).unwrap();
    }
    let bad = ledger.in_phase("bad loop");
    let graph_x = bad
        .iter()
        .filter(|t| t.what.ends_with(".x") && !t.what.starts_with("batch"))
        .count();
    assert_eq!(graph_x, loader.len());
}

#[test]
fn a_batch_part_left_behind_is_named() {
    let g = csbm(300, 7);
    let sim = Placement::sim(1);
    let mut t = trainer(&g, &sim, 0, Eval::FullGraph);
    let batch = t.loader().batch(1, 0).unwrap();
    // Everything but the labels moved (PyG: batch.x, batch.edge_index moved by hand).
    let mut partial = batch.clone();
    for part in [
        BatchPart::X,
        BatchPart::EdgeIndex,
        BatchPart::NId,
        BatchPart::EId,
    ] {
        partial = partial.move_part(part, &sim).unwrap();
    }
    let err = t.step(&partial).unwrap_err().to_string();
    assert!(
        err.contains("batch.y") && err.contains("cpu") && err.contains("sim:1"),
        "{err}"
    );
    assert!(err.contains("batch.to_device"), "the fix is named: {err}");
    // n_id left behind.
    let partial = batch
        .to_device(&sim)
        .unwrap()
        .move_part(BatchPart::NId, &Placement::cpu())
        .unwrap();
    let err = t.step(&partial).unwrap_err().to_string();
    assert!(err.contains("batch.n_id"), "{err}");
    // Nothing moved: the features are named first.
    let err = t.step(&batch).unwrap_err().to_string();
    assert!(err.contains("batch.x"), "{err}");
    assert!(t.step(&batch.to_device(&sim).unwrap()).is_ok());
}

#[test]
fn prefetch_prepares_ahead_and_trains_identically() {
    let g = csbm(800, 8);
    let sim = Placement::sim(1);
    let mut plain = trainer_bs(&g, &sim, 0, Eval::FullGraph, 10);
    let mut ahead = trainer_bs(&g, &sim, 2, Eval::FullGraph, 10);
    for _ in 0..2 {
        let a = plain.epoch().unwrap();
        let b = ahead.epoch().unwrap();
        // Same batches, same model: bit-identical on a host-backed device.
        assert_eq!(a.stats.loss, b.stats.loss);
        assert_eq!(a.stats.test_accuracy, b.stats.test_accuracy);
        assert!(b.steps.iter().all(|s| s.prepared_in_background));
        assert!(a.steps.iter().all(|s| !s.prepared_in_background));
        // Timing order, not wall time: with prefetch, some batch b + 1 was being prepared
        // before batch b's compute ended (the thread starts as soon as the channel has room;
        // "some" rather than "every" because the scheduler may park the thread once).
        assert_eq!(b.batches, 10);
        assert!(
            b.steps.windows(2).any(|w| w[1].prepare.0 < w[0].compute.1),
            "{:?}",
            b.steps
        );
        // Inline, preparation happens inside the wait, before the copy.
        for s in &a.steps {
            assert!(s.prepare.0 >= s.wait.0 && s.prepare.1 <= s.copy.0, "{s:?}");
        }
    }
}

#[test]
fn skipping_evaluation_trains_identically_and_evaluates_nothing() {
    let g = csbm(800, 8);
    let ledger = Ledger::new();
    let sim = Placement::sim(1).with_ledger(&ledger);
    let mut evaluated = trainer_bs(&g, &Placement::sim(1), 0, Eval::FullGraph, 10);
    let mut skipped = trainer_bs(&g, &sim, 0, Eval::Skip, 10);
    for epoch in 1..=2 {
        let a = evaluated.epoch().unwrap();
        let b = skipped.epoch().unwrap();
        // Evaluation reads the model and draws no random numbers: the training is the same.
        assert_eq!(a.stats.loss, b.stats.loss);
        assert!(a.stats.test_accuracy.is_finite());
        assert!(b.stats.train_accuracy.is_nan() && b.stats.val_accuracy.is_nan());
        assert!(b.stats.test_accuracy.is_nan());
        // Nothing but the metrics' one read-back in the evaluation phase.
        let eval = ledger.in_phase(&format!("eval {epoch}"));
        assert_eq!(eval.len(), 1, "{eval:?}");
        assert_eq!(eval[0].to, "cpu");
    }
    assert!(ledger.in_phase("eval graph").is_empty());
}

#[test]
fn minibatch_gcn_learns_cora() {
    let g = datasets::load("cora", None, Placement::cpu()).unwrap();
    let config = ModelConfig::gcn(g.num_features(), 16, g.num_classes());
    let mb = MiniBatchConfig {
        eval: Eval::FullGraph,
        ..MiniBatchConfig::new(&[10, 10], 128)
    };
    let tc = TrainConfig::gcn();
    let mut t = MiniBatchTrainer::new(config, &g, &tc, mb, &Placement::sim(1)).unwrap();
    let mut last = None;
    for _ in 0..40 {
        last = Some(t.epoch().unwrap());
    }
    let last = last.unwrap();
    assert_eq!(last.batches, 2); // 140 training nodes
    assert!(last.stats.test_accuracy > 0.70, "{:?}", last.stats);
}

#[test]
fn minibatch_gatv2_trains_by_batches_on_karate() {
    let g = datasets::karate(Placement::cpu()).unwrap();
    let config = ModelConfig::gatv2(g.num_features(), 4, 2, g.num_classes());
    let mb = MiniBatchConfig::new(&[5, 5], 2);
    let tc = TrainConfig::gatv2();
    let mut t = MiniBatchTrainer::new(config, &g, &tc, mb, &Placement::sim(2)).unwrap();
    let first = t.epoch().unwrap();
    for _ in 0..30 {
        t.epoch().unwrap();
    }
    let last = t.history().last().unwrap();
    assert!(last.stats.loss < first.stats.loss, "{first:?} -> {last:?}");
    // Wrong hop count is named.
    let config = ModelConfig::gcn(g.num_features(), 4, g.num_classes());
    let err = MiniBatchTrainer::new(
        config,
        &g,
        &tc,
        MiniBatchConfig::new(&[5], 2),
        &Placement::cpu(),
    )
    .err()
    .unwrap()
    .to_string();
    assert!(
        err.contains("num_neighbors has 1 hop(s) but the model has 2"),
        "{err}"
    );
}

#[test]
fn a_cached_gcn_is_refused_for_mini_batches_with_the_fix() {
    // PyG's GCNConv(cached=True) keeps the first graph's normalisation; a mini-batch of the same
    // size with other edges would be normalised with the first batch's graph, silently.
    let g = csbm(300, 8);
    let mut config = ModelConfig::gcn(g.num_features(), 16, g.num_classes());
    if let workbook::LayerConfig::Gcn(c) = &mut config.layers[1] {
        c.cached = true;
    }
    let err = MiniBatchTrainer::new(
        config.clone(),
        &g,
        &TrainConfig::gcn(),
        MiniBatchConfig::new(&[5, 5], 64),
        &Placement::sim(1),
    )
    .err()
    .expect("a cached GCN must be refused for mini-batches")
    .to_string();
    assert!(
        err.contains("layer 2") && err.contains("cached=false"),
        "{err}"
    );
    // Data-parallel training samples mini-batches too.
    let err = workbook::parallel::train_data_parallel(
        config,
        &g,
        &TrainConfig {
            epochs: 1,
            ..TrainConfig::gcn()
        },
        MiniBatchConfig::new(&[5, 5], 64),
        &[Placement::sim(1), Placement::sim(2)],
        |_| {},
    )
    .err()
    .expect("refused for data-parallel mini-batches too")
    .to_string();
    assert!(err.contains("cached=false"), "{err}");
}
