//! One process per device, with ranks as threads (`ThreadGroup`): DDP's equivalence with
//! `DataParallel`, the shards, the failures a distributed run meets (a rank that skips a
//! collective, stops early, or was started with another config) and rank 0's checkpoint.
//! The same code over MPI processes is tests/distributed_mpi.rs (feature `mpi`).

use std::sync::Arc;
use std::time::Duration;
use workbook::checkpoint;
use workbook::loader::NeighborLoader;
use workbook::parallel::{
    DistributedDataParallel, DistributedSampler, DistributedTrainer, ThreadGroup, World,
};
use workbook::placement::Placement;
use workbook::train::minibatch::MiniBatchConfig;
use workbook::train::TrainConfig;
use workbook::{Model, ModelConfig};

mod common {
    pub mod ddp_replay;
}
use common::ddp_replay::{
    config, data_parallel_on_the_ranks_batches, graph, max_difference, mb, params,
};

#[test]
fn two_ranks_end_identical_and_equal_to_data_parallel_on_the_same_batches() {
    let g = graph();
    let tc = TrainConfig::gcn();
    let epochs = 2;
    let out = ThreadGroup::run(2, |group| {
        let world = Arc::new(World::new(Arc::new(group)));
        let at = Placement::sim(world.rank() + 1);
        let mut t = DistributedTrainer::new(config(&g), &g, &tc, mb(), world, &at)?;
        for _ in 0..epochs {
            let e = t.epoch()?;
            assert!(e.in_sync, "ranks drifted apart in epoch {}", e.epoch);
        }
        let loader = t.loader().clone();
        Ok((params(t.ddp().module()), loader, t.history().to_vec()))
    });
    let (p0, loader, h0) = out[0].as_ref().unwrap();
    let (p1, _, h1) = out[1].as_ref().unwrap();
    assert_eq!(p0, p1, "the two ranks' parameters differ");
    assert_eq!(h0[0].loss, h1[0].loss);
    assert!(h0[0].stats.is_some() && h1[0].stats.is_none());

    // The same batches, one process, one replica per rank.
    let (init, want) = data_parallel_on_the_ranks_batches(&g, loader, 2, epochs as u64);
    let worst = max_difference(p0, &want);
    assert!(worst <= 1e-5, "DDP and DataParallel differ by {worst:e}");
    // and they did train: the parameters moved from the initial ones
    assert!(max_difference(&init, &want) > 1e-3);
}

#[test]
fn every_training_node_is_trained_once_per_epoch_for_world_sizes_1_to_4() {
    let g = graph();
    let loader = NeighborLoader::new(
        &g,
        workbook::loader::LoaderConfig {
            input_nodes: workbook::loader::InputNodes::Train,
            ..workbook::loader::LoaderConfig::new(&[5, 5], 8)
        },
    )
    .unwrap();
    let seeds = loader.seeds().to_vec();
    for w in 1..=4 {
        let mut previous: Option<Vec<u32>> = None;
        for epoch in 1..=3 {
            let shards: Vec<Vec<u32>> = (0..w)
                .map(|r| {
                    DistributedSampler::new(w, r, 42)
                        .unwrap()
                        .shard(&seeds, epoch)
                })
                .collect();
            let mut all = shards.concat();
            assert_eq!(all.len(), seeds.len(), "world {w}, epoch {epoch}");
            all.sort_unstable();
            let mut want = seeds.clone();
            want.sort_unstable();
            assert_eq!(
                all, want,
                "world {w}, epoch {epoch}: not every seed exactly once"
            );
            let sizes: Vec<usize> = shards.iter().map(Vec::len).collect();
            assert!(sizes.iter().max().unwrap() - sizes.iter().min().unwrap() <= 1);
            if w > 1 {
                assert_ne!(
                    previous.as_ref(),
                    Some(&shards[0]),
                    "epoch {epoch} repeats the shuffle"
                );
            }
            previous = Some(shards[0].clone());
        }
        // and the trainer trains exactly those: every rank's seed count adds up, every rank
        // makes the same number of steps
        let out = ThreadGroup::run(w, |group| {
            let world = Arc::new(World::new(Arc::new(group)));
            let at = Placement::sim(world.rank() + 1);
            let mut t = DistributedTrainer::new(
                config(&g),
                &g,
                &TrainConfig::gcn(),
                MiniBatchConfig::new(&[5, 5], 8),
                world,
                &at,
            )?;
            t.epoch()
        });
        let epochs: Vec<_> = out.into_iter().map(Result::unwrap).collect();
        assert_eq!(
            epochs.iter().map(|e| e.seeds).sum::<usize>(),
            seeds.len(),
            "world {w}"
        );
        assert!(epochs
            .iter()
            .all(|e| e.steps == epochs[0].steps && e.in_sync));
        assert_eq!(epochs[0].rank_ms.len(), w);
    }
}

/// Each rank's DDP with a short time limit, and one batch per step of the same shard.
fn ddp_ranks<T: Send>(
    w: usize,
    timeout: Duration,
    body: impl Fn(&mut DistributedDataParallel, &[workbook::loader::Batch]) -> workbook::Result<T>
        + Sync,
) -> Vec<workbook::Result<T>> {
    let g = graph();
    let loader = NeighborLoader::new(&g, workbook::loader::LoaderConfig::new(&[5, 5], 8)).unwrap();
    ThreadGroup::run(w, |group| {
        let world = Arc::new(World::new(Arc::new(group)).with_timeout(timeout));
        let at = Placement::sim(world.rank() + 1);
        let (model, _) = Model::init(config(&g), 0, Placement::cpu())?;
        let mut ddp = DistributedDataParallel::new(&model, world, &at, &TrainConfig::gcn())?;
        let batches: Vec<_> = (0..3)
            .map(|b| loader.batch(0, b).and_then(|x| x.to_device(&at)))
            .collect::<workbook::Result<_>>()?;
        body(&mut ddp, &batches)
    })
}

#[test]
fn a_rank_that_skips_a_step_is_named_at_the_next_call_instead_of_mixing_gradients_silently_forever()
{
    let out = ddp_ranks(2, Duration::from_secs(20), |ddp, batches| {
        let rank = ddp.world().rank();
        for (k, b) in batches.iter().enumerate() {
            if rank == 1 && k == 1 {
                continue; // the classic: "no batch here, nothing to do"
            }
            ddp.step(Some(b))?;
        }
        ddp.world().barrier("end of epoch")
    });
    for (r, o) in out.iter().enumerate() {
        let e = o.as_ref().unwrap_err().to_string();
        assert!(e.contains(&format!("rank {r} of 2")), "{e}");
        // rank 1's barrier met rank 0's last all-reduce: both named, with their rank
        assert!(e.contains("'all_reduce gradients', rank 1"), "{e}");
        assert!(e.contains(" at call #5 'barrier end of epoch'"), "{e}");
        assert!(e.contains("same calls in the same order"), "{e}");
    }
}

#[test]
fn a_rank_that_stops_early_ends_the_others_wait_at_the_time_limit() {
    let started = std::time::Instant::now();
    let out = ddp_ranks(2, Duration::from_millis(500), |ddp, batches| {
        let n = if ddp.world().rank() == 1 { 1 } else { 3 };
        for b in &batches[..n] {
            ddp.step(Some(b))?;
        }
        Ok(())
    });
    let e = out[0].as_ref().unwrap_err().to_string();
    assert!(e.contains("rank 0 of 2") && e.contains("timed out"), "{e}");
    assert!(e.contains("rank(s) 1 never made this call"), "{e}");
    assert!(out[1].is_ok());
    assert!(started.elapsed() < Duration::from_secs(30));
}

#[test]
fn a_rank_without_a_batch_joins_with_none_and_the_step_is_the_other_ranks_alone() {
    let out = ddp_ranks(2, Duration::from_secs(20), |ddp, batches| {
        let b = (ddp.world().rank() == 0).then_some(&batches[0]);
        let s = ddp.step(b)?;
        Ok((s, params(ddp.module())))
    });
    let (s0, p0) = out[0].as_ref().unwrap();
    let (s1, p1) = out[1].as_ref().unwrap();
    assert_eq!((s0.seeds, s0.local_seeds, s1.local_seeds), (8, 8, 0));
    assert_eq!(p0, p1);
    assert_eq!(s0.loss, s1.loss);
}

#[test]
fn ranks_started_with_different_configs_are_refused_before_training() {
    let g = graph();
    let out = ThreadGroup::run(2, |group| {
        let world = Arc::new(World::new(Arc::new(group)).with_timeout(Duration::from_secs(20)));
        let hidden = if world.rank() == 0 { 16 } else { 32 };
        let c = ModelConfig::gcn(g.num_features(), hidden, g.num_classes());
        let (model, _) = Model::init(c, 0, Placement::cpu())?;
        DistributedDataParallel::new(&model, world, &Placement::cpu(), &TrainConfig::gcn())
            .map(|_| ())
    });
    for o in &out {
        let e = o.as_ref().unwrap_err().to_string();
        assert!(e.contains("the ranks disagree on the model config"), "{e}");
        assert!(e.contains("same arguments"), "{e}");
    }
}

#[test]
fn rank_0s_parameters_win_at_the_start_whatever_each_rank_initialised() {
    let g = graph();
    let out = ThreadGroup::run(3, |group| {
        let world = Arc::new(World::new(Arc::new(group)));
        let (model, _) = Model::init(config(&g), 100 + world.rank() as u64, Placement::cpu())?;
        let ddp =
            DistributedDataParallel::new(&model, world, &Placement::cpu(), &TrainConfig::gcn())?;
        Ok(params(ddp.module()))
    });
    let (rank0_init, _) = Model::init(config(&g), 100, Placement::cpu()).unwrap();
    for o in &out {
        assert_eq!(o.as_ref().unwrap(), &params(&rank0_init));
    }
}

#[test]
fn rank_0s_checkpoint_loads_in_a_one_process_run_without_renaming() {
    let g = graph();
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("ddp.safetensors");
    let out = ThreadGroup::run(2, |group| {
        let world = Arc::new(World::new(Arc::new(group)));
        let at = Placement::sim(world.rank() + 1);
        let mut t = DistributedTrainer::new(
            config(&g),
            &g,
            &TrainConfig::gcn(),
            mb(),
            world.clone(),
            &at,
        )?;
        t.epoch()?;
        if world.is_main() {
            checkpoint::save(t.ddp().module(), &path)?;
        }
        Ok(params(t.ddp().module()))
    });
    let trained = out[0].as_ref().unwrap();
    let names: Vec<&String> = trained.iter().map(|(n, _)| n).collect();
    assert!(names.iter().all(|n| !n.starts_with("module.")), "{names:?}");
    let loaded = checkpoint::load(&path, Placement::cpu()).unwrap();
    assert_eq!(&params(&loaded), trained);
}
