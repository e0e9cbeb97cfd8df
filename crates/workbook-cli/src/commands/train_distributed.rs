//! `mpirun -n 2 workbook train --distributed --batch-size 64 ...`: one process per device
//! ([`workbook::parallel::DistributedTrainer`] over [`MpiGroup`](workbook::parallel::MpiGroup)),
//! PyTorch's DistributedDataParallel from the command line.
//!
//! Every rank runs this same command. Rank 0 prints the world (each rank's device, once), one
//! line per epoch and the JSON summary, and writes `--save`; the other ranks print only their
//! errors. Before training, the ranks check that they were started with the same command line,
//! graph and configs. A rank that fails ends the whole job (`MPI_Abort`), so that no rank is
//! left waiting in a collective; a rank that never comes ends the others' wait after
//! `--collective-timeout` seconds.

use super::train::Args;
use anyhow::{bail, Result};

/// Each rank's device (`--rank-device`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum RankDevice {
    /// `sim:<rank + 1>`: a simulated device per rank, on the CPU.
    Sim,
    /// The CPU for every rank.
    Cpu,
    /// `cuda:<local rank>`: one GPU per process on each machine.
    Cuda,
}

/// The message for a build without the `mpi` feature.
#[cfg(not(feature = "mpi"))]
pub const NO_MPI: &str = "this workbook was built without MPI, so --distributed cannot start: install MPI (Debian: apt-get install openmpi-bin libopenmpi-dev libclang-dev), build with `cargo build --release -p workbook-cli --features mpi`, and start one process per device with `mpirun -n 2 target/release/workbook train --distributed ...` (README: \"Several processes\")";

#[cfg(not(feature = "mpi"))]
pub fn run(_args: &Args) -> Result<()> {
    bail!("{NO_MPI}")
}

#[cfg(feature = "mpi")]
pub fn run(args: &Args) -> Result<()> {
    use std::sync::Arc;
    use workbook::parallel::{mpi_group, MpiGroup};
    if !mpi_group::launched() {
        bail!(
            "--distributed runs one process per device, all started together by an MPI launcher, but this process was started alone (none of {} is set). Start it as: mpirun -n 2 {} (add --oversubscribe when there are fewer cores than ranks; as root, Open MPI also wants OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1)",
            mpi_group::LAUNCHER_VARIABLES.join(", "),
            std::env::args().collect::<Vec<_>>().join(" ")
        );
    }
    let group = Arc::new(MpiGroup::init()?);
    match distributed::run(args, group.clone()) {
        Ok(()) => Ok(()),
        Err(e) => {
            use workbook::parallel::ProcessGroup;
            eprintln!(
                "error (rank {} of {}): {e:#}",
                group.rank(),
                group.world_size()
            );
            // Returning would leave the other ranks waiting in their next collective until
            // their time limit: end the whole job now.
            group.abort(2)
        }
    }
}

#[cfg(feature = "mpi")]
mod distributed {
    use super::RankDevice;
    use crate::commands::train::{Args, EvalKind};
    use anyhow::{Context, Result};
    use serde_json::json;
    use std::sync::Arc;
    use std::time::Duration;
    use workbook::parallel::world::fingerprint;
    use workbook::parallel::{DistributedTrainer, MpiGroup, World};
    use workbook::placement::Placement;

    /// This rank's local rank on its machine (the GPU it takes), as launchers report it.
    fn local_rank(rank: usize) -> usize {
        [
            "OMPI_COMM_WORLD_LOCAL_RANK",
            "MPI_LOCALRANKID",
            "PMI_LOCAL_RANK",
            "SLURM_LOCALID",
        ]
        .iter()
        .find_map(|v| std::env::var(v).ok()?.parse().ok())
        .unwrap_or(rank)
    }

    fn device_name(kind: RankDevice, rank: usize) -> String {
        match kind {
            RankDevice::Sim => format!("sim:{}", rank + 1),
            RankDevice::Cpu => "cpu".into(),
            RankDevice::Cuda => format!("cuda:{}", local_rank(rank)),
        }
    }

    pub fn run(args: &Args, group: Arc<MpiGroup>) -> Result<()> {
        let world = Arc::new(
            World::new(group).with_timeout(Duration::from_secs(args.collective_timeout.max(1))),
        );
        let (rank, n) = (world.rank(), world.world_size());
        // mpirun gives every rank the same arguments, but an MPMD launch (`mpirun -n 1 a : -n
        // 1 b`) or a wrapper script need not: ranks that disagree would train different
        // models and meet in the wrong collectives.
        let line: Vec<String> = std::env::args().skip(1).collect();
        world
            .agree("the command line", fingerprint(&line.join("\u{0}")))
            .with_context(|| format!("this rank was started as: workbook {}", line.join(" ")))?;
        let at = match args.rank_device {
            RankDevice::Sim => Placement::sim(rank + 1),
            RankDevice::Cpu => Placement::cpu(),
            RankDevice::Cuda => Placement::cuda(local_rank(rank))
                .with_context(|| format!("rank {rank}: opening its GPU (--rank-device cuda)"))?,
        };
        let batch_size = args
            .mini
            .batch_size
            .context("--distributed needs --batch-size")?;
        let main = world.is_main();
        if main {
            eprintln!(
                "distributed: {n} rank(s) over {} (one process each), {} seeds per rank and step",
                world.backend(),
                batch_size
            );
            for r in 0..n {
                eprintln!("  rank {r}: {}", device_name(args.rank_device, r));
            }
        }
        if let Some(path) = &args.save {
            crate::inputs::refuse_overwriting_dataset(
                "--save",
                path,
                &args.dataset,
                args.data_dir.as_deref(),
            )?;
        }
        let graph =
            crate::inputs::load_dataset(&args.dataset, args.data_dir.as_deref(), Placement::cpu())?;
        if main {
            eprintln!(
                "dataset: {} ({} nodes, {} edges, {} features, {} classes)",
                graph.name,
                graph.num_nodes(),
                graph.num_edges(),
                graph.num_features(),
                graph.num_classes()
            );
        }
        let (config, recipe) = args.model.recipe(&graph);
        let recipe = workbook::train::TrainConfig {
            epochs: args.epochs,
            seed: args.seed,
            ..recipe
        };
        let layers = config.layers.len();
        let mut mb = args.mini.config(batch_size, layers);
        if args.eval == EvalKind::Full {
            mb.eval = workbook::train::minibatch::Eval::FullGraph;
        }
        let num_neighbors = mb.num_neighbors.clone();
        let mut trainer = DistributedTrainer::new(config, &graph, &recipe, mb, world.clone(), &at)
            .with_context(|| format!("rank {rank}: setting up"))?;
        for _ in 0..args.epochs {
            let e = trainer.epoch()?;
            if let Some(s) = &e.stats {
                eprintln!(
                    "epoch {}/{}: loss {:.4}  train {:.1}%  val {:.1}%  test {:.1}%  {} steps x {n} rank(s)  rank ms {}  ranks {}",
                    e.epoch,
                    args.epochs,
                    e.loss,
                    100.0 * s.train_accuracy,
                    100.0 * s.val_accuracy,
                    100.0 * s.test_accuracy,
                    e.steps,
                    e.rank_ms.iter().map(|t| format!("{t:.0}")).collect::<Vec<_>>().join("/"),
                    if e.in_sync { "in sync" } else { "DIFFER" }
                );
            }
        }
        let history = trainer.history().to_vec();
        // Every rank gets here before rank 0 writes and prints: a rank that failed has ended
        // the job already, so rank 0 never reports a run that did not finish everywhere.
        world.barrier("end of training")?;
        if !main {
            return Ok(());
        }
        let last = history.last().context("training ran no epochs")?;
        let stats = last.stats.as_ref().context("rank 0 evaluates")?;
        if let Some(path) = &args.save {
            // Only rank 0 writes, and it writes the model, not the wrapper: no `module.`
            // prefix, loadable by a one-process run.
            workbook::checkpoint::save(trainer.ddp().module(), path)
                .with_context(|| format!("saving a checkpoint to {}", path.display()))?;
            eprintln!("saved the model (rank 0's, on {at}) to {}", path.display());
        }
        let later = if history.len() > 1 {
            &history[1..]
        } else {
            &history[..]
        };
        let mean = |f: &dyn Fn(&workbook::parallel::DistributedEpoch) -> f64| {
            later.iter().map(f).sum::<f64>() / later.len() as f64
        };
        let slowest = mean(&|e| e.rank_ms.iter().cloned().fold(0.0, f64::max));
        let summary = json!({
            "model": args.model.name(),
            "dataset": graph.name,
            "distributed": true,
            "backend": world.backend(),
            "world_size": n,
            "rank_devices": (0..n).map(|r| device_name(args.rank_device, r)).collect::<Vec<_>>(),
            "epochs": args.epochs,
            "seed": args.seed,
            "loss": last.loss,
            "train_accuracy": stats.train_accuracy,
            "val_accuracy": stats.val_accuracy,
            "test_accuracy": stats.test_accuracy,
            "ranks_in_sync": last.in_sync,
            "epoch_ms": slowest,
            "rank_epoch_ms": (0..n).map(|r| mean(&|e| e.rank_ms[r])).collect::<Vec<_>>(),
            "batch_size_per_rank": batch_size,
            "num_neighbors": num_neighbors,
            "eval": if args.eval == EvalKind::Full { "full" } else { "batches" },
            "steps_per_epoch": last.steps,
        });
        println!("{summary}");
        Ok(())
    }
}
