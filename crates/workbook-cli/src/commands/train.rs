//! `workbook train`: one model, one dataset, a JSON summary on stdout.

use crate::progress;
use anyhow::{Context, Result};
use serde_json::json;
use std::path::PathBuf;
use workbook::device::Chosen;
use workbook::ledger::Ledger;
use workbook::placement::Placement;
use workbook::train::minibatch::{train_minibatch, Eval, MiniBatchConfig};
use workbook::train::{train, TrainConfig, TrainReport};
use workbook::{Graph, ModelConfig};

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum ModelKind {
    Gcn,
    Gatv2,
    /// GraphSAGE (PyG's `SAGEConv`, mean aggregation), with the GCN recipe.
    Sage,
}

impl ModelKind {
    pub fn name(self) -> &'static str {
        match self {
            ModelKind::Gcn => "gcn",
            ModelKind::Gatv2 => "gatv2",
            ModelKind::Sage => "sage",
        }
    }

    /// The classic architecture and recipe for this model on `graph`.
    pub fn recipe(self, graph: &Graph) -> (ModelConfig, TrainConfig) {
        let (f, c) = (graph.num_features(), graph.num_classes());
        match self {
            ModelKind::Gcn => (ModelConfig::gcn(f, 16, c), TrainConfig::gcn()),
            ModelKind::Gatv2 => (ModelConfig::gatv2(f, 8, 8, c), TrainConfig::gatv2()),
            ModelKind::Sage => (ModelConfig::sage(f, 16, c), TrainConfig::gcn()),
        }
    }
}

#[derive(clap::Args)]
pub struct Args {
    /// Which model.
    #[arg(long, value_enum)]
    pub(crate) model: ModelKind,
    /// karate, cora, citeseer or csbm:<nodes>.
    #[arg(long, default_value = "karate")]
    pub(crate) dataset: String,
    /// Folder holding all eight Planetoid ind.<name>.* files of cora or citeseer (an error names
    /// any missing). Without it: WORKBOOK_DATA_DIR or ~/.cache/gnn-workbook/planetoid, where
    /// Cora falls back to its embedded copy and CiteSeer is downloaded.
    #[arg(long)]
    pub(crate) data_dir: Option<PathBuf>,
    /// Number of epochs (default 200).
    #[arg(long, default_value_t = 200)]
    pub(crate) epochs: usize,
    /// Seed for initialisation and dropout.
    #[arg(long, default_value_t = 0)]
    pub(crate) seed: u64,
    /// Also save a checkpoint: safetensors with PyG names and the model config in its
    /// metadata; loads on any device.
    #[arg(long)]
    pub(crate) save: Option<PathBuf>,
    /// Record every copy between host and device and print the transfer ledger (stderr), with
    /// per-phase totals in the JSON summary.
    #[arg(long)]
    pub(crate) ledger: bool,
    /// Data parallelism: one replica per device (cpu, cuda:N, sim:N; e.g. sim:1,sim:2), each
    /// taking an equal share of every step's mini-batches (needs --batch-size, the global batch).
    #[arg(long, value_parser = super::devices::parse, conflicts_with = "device")]
    pub devices: Option<super::devices::DeviceList>,
    /// One process per device, started by an MPI launcher: `mpirun -n 2 workbook train
    /// --distributed --batch-size 64 ...` (PyTorch's DistributedDataParallel). --batch-size is per
    /// rank; rank 0 prints and saves. Needs a build with the `mpi` feature.
    #[arg(long, conflicts_with_all = ["devices", "ledger"], requires = "batch_size")]
    pub distributed: bool,
    /// With --distributed: each rank's device: `sim` (sim:<rank+1>, the default: the placement
    /// checks of several devices on one CPU), `cpu`, or `cuda` (cuda:<local rank>).
    #[arg(long, value_enum, default_value = "sim", requires = "distributed")]
    pub rank_device: super::train_distributed::RankDevice,
    /// With --distributed: seconds a rank waits in one collective call for the others before
    /// it gives up and ends the job (a rank that skipped a step or died).
    #[arg(long, default_value_t = 300, requires = "distributed")]
    pub collective_timeout: u64,
    #[command(flatten)]
    pub mini: super::minibatch_args::MiniBatchArgs,
    /// Mini-batch evaluation: `batches` (every neighbour, in batches of 1024 seeds; memory
    /// bounded by the batch) or `full` (the whole graph moved to the device once; exact).
    #[arg(long, value_enum, default_value = "batches", requires = "batch_size")]
    pub(crate) eval: EvalKind,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum EvalKind {
    Batches,
    Full,
}

/// Trains `kind` on `graph` with a progress bar.
pub fn train_with_bar(
    kind: ModelKind,
    graph: &Graph,
    epochs: usize,
    seed: u64,
) -> Result<TrainReport> {
    let (config, recipe) = kind.recipe(graph);
    let recipe = TrainConfig {
        epochs,
        seed,
        ..recipe
    };
    let bar = progress::epoch_bar(&format!("{} {}", kind.name(), graph.name), epochs);
    let report = train(config, graph, &recipe, |s| progress::tick(&bar, s))
        .with_context(|| format!("training {} on {}", kind.name(), graph.name))?;
    bar.finish_and_clear();
    Ok(report)
}

pub fn run(args: Args, chosen: &Chosen) -> Result<()> {
    workbook::limits::check_count("--epochs", args.epochs, 1)?;
    if let Some(batch_size) = args.mini.batch_size {
        return run_minibatch(&args, batch_size, chosen);
    }
    let ledger = Ledger::new();
    let at = if args.ledger {
        chosen.placement.clone().with_ledger(&ledger)
    } else {
        chosen.placement.clone()
    };
    ledger.set_phase("load");
    if let Some(path) = &args.save {
        crate::inputs::refuse_overwriting_dataset(
            "--save",
            path,
            &args.dataset,
            args.data_dir.as_deref(),
        )?;
    }
    let graph = crate::inputs::load_dataset(&args.dataset, args.data_dir.as_deref(), &at)?;
    eprintln!(
        "dataset: {} ({} nodes, {} edges, {} features, {} classes)",
        graph.name,
        graph.num_nodes(),
        graph.num_edges(),
        graph.num_features(),
        graph.num_classes()
    );
    let report = train_with_bar(args.model, &graph, args.epochs, args.seed)?;
    if let Some(path) = &args.save {
        ledger.set_phase("save");
        workbook::checkpoint::save(&report.model, path)
            .with_context(|| format!("saving a checkpoint to {}", path.display()))?;
        eprintln!("saved checkpoint to {}", path.display());
    }
    if args.ledger {
        eprint!("transfer ledger ({}):\n{}", chosen.name, ledger.table());
    }
    let last = report.last().context("training ran no epochs")?;
    let mut summary = json!({
            "model": args.model.name(),
            "dataset": graph.name,
            "device": chosen.name,
            "epochs": args.epochs,
            "seed": args.seed,
            "loss": last.loss,
            "train_accuracy": last.train_accuracy,
            "val_accuracy": last.val_accuracy,
            "test_accuracy": last.test_accuracy,
            "epoch_ms": report.epoch_ms(),
    });
    if args.ledger {
        summary["ledger"] = serde_json::to_value(ledger.totals())?;
    }
    println!("{summary}");
    Ok(())
}

/// What every mini-batch mode (one device or data-parallel) starts from: the dataset loaded on
/// the host (the loader samples there; the graph is never moved whole), the model's recipe
/// with the run's epochs and seed, the neighbours per layer and the loader settings.
pub(crate) fn minibatch_setup(
    args: &Args,
    batch_size: usize,
    how: &str,
) -> Result<(Graph, ModelConfig, TrainConfig, Vec<i64>, MiniBatchConfig)> {
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
    eprintln!(
        "dataset: {} ({} nodes, {} edges, {} features, {} classes), {how}",
        graph.name,
        graph.num_nodes(),
        graph.num_edges(),
        graph.num_features(),
        graph.num_classes()
    );
    let (config, recipe) = args.model.recipe(&graph);
    let recipe = TrainConfig {
        epochs: args.epochs,
        seed: args.seed,
        ..recipe
    };
    let layers = config.layers.len();
    let num_neighbors = args.mini.num_neighbors(layers);
    let mut mb = args.mini.config(batch_size, layers);
    if args.eval == EvalKind::Full {
        mb.eval = Eval::FullGraph;
    }
    Ok((graph, config, recipe, num_neighbors, mb))
}

/// `train --batch-size ...`: the graph stays on the host, the model moves once, each batch
/// moves every step; the ledger is always kept so the JSON line can report per-phase traffic.
fn run_minibatch(args: &Args, batch_size: usize, chosen: &Chosen) -> Result<()> {
    let ledger = Ledger::new();
    let device = chosen.placement.clone().with_ledger(&ledger);
    ledger.set_phase("load");
    let (graph, config, recipe, num_neighbors, mb) =
        minibatch_setup(args, batch_size, &format!("mini-batches of {batch_size}"))?;
    let bar = progress::epoch_bar(
        &format!("{} {} (mini-batch)", args.model.name(), graph.name),
        args.epochs,
    );
    let trainer = train_minibatch(config, &graph, &recipe, mb, &device, |e| {
        progress::tick(&bar, &e.stats)
    })
    .with_context(|| {
        format!(
            "training {} on {} by mini-batches",
            args.model.name(),
            graph.name
        )
    })?;
    bar.finish_and_clear();
    if let Some(path) = &args.save {
        ledger.set_phase("save");
        workbook::checkpoint::save(trainer.model(), path)
            .with_context(|| format!("saving a checkpoint to {}", path.display()))?;
        eprintln!("saved checkpoint to {}", path.display());
    }
    if args.ledger {
        eprint!("transfer ledger ({}):\n{}", chosen.name, ledger.table());
    }
    let history = trainer.history();
    let last = history.last().expect("at least one epoch");
    // Mean over the epochs after the first (which pays one-off costs), as full-batch reports.
    let later: Vec<_> = history.iter().skip(1).collect();
    let later = if later.is_empty() {
        history.iter().collect()
    } else {
        later
    };
    let mean = |f: &dyn Fn(&workbook::train::minibatch::MiniBatchEpoch) -> f64| {
        later.iter().map(|e| f(e)).sum::<f64>() / later.len() as f64
    };
    let epoch_ms = mean(&|e| e.stats.step_ms);
    let prepare_ms = mean(&|e| e.prepare_ms());
    let summary = json!({
        "model": args.model.name(),
        "dataset": graph.name,
        "device": chosen.name,
        "epochs": args.epochs,
        "seed": args.seed,
        "loss": last.stats.loss,
        "train_accuracy": last.stats.train_accuracy,
        "val_accuracy": last.stats.val_accuracy,
        "test_accuracy": last.stats.test_accuracy,
        "epoch_ms": epoch_ms,
        "batch_size": batch_size,
        "num_neighbors": num_neighbors,
        "prefetch": args.mini.prefetch,
        "eval": if args.eval == EvalKind::Full { "full" } else { "batches" },
        "batches_per_epoch": last.batches,
        "prepare_ms_per_epoch": prepare_ms,
        "wait_ms_per_epoch": mean(&|e| e.wait_ms()),
        "bytes_per_step": last.bytes_per_step(),
        "ledger": folded_totals(&ledger),
    });
    println!("{summary}");
    Ok(())
}

/// The ledger's per-phase totals with `epoch N` folded into `epoch *` and `eval N` into
/// `eval *` (summed over epochs), so a 200-epoch run stays one short JSON line.
pub(crate) fn folded_totals(ledger: &Ledger) -> serde_json::Value {
    let mut out: Vec<(String, usize, u64)> = Vec::new();
    for t in ledger.totals() {
        let phase = match t.phase.split_once(' ') {
            Some((head, n)) if n.chars().all(|c| c.is_ascii_digit()) => format!("{head} *"),
            _ => t.phase.clone(),
        };
        match out.iter_mut().find(|(p, _, _)| *p == phase) {
            Some(row) => {
                row.1 += t.transfers;
                row.2 += t.bytes;
            }
            None => out.push((phase, t.transfers, t.bytes)),
        }
    }
    out.into_iter()
        .map(|(phase, transfers, bytes)| json!({"phase": phase, "transfers": transfers, "bytes": bytes}))
        .collect()
}
