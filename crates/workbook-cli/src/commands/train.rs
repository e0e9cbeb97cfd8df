//! `workbook train`: one model, one dataset, a JSON summary on stdout.

use crate::progress;
use anyhow::{Context, Result};
use serde_json::json;
use std::path::PathBuf;
use workbook::device::Chosen;
use workbook::ledger::Ledger;
use workbook::train::{train, TrainConfig, TrainReport};
use workbook::{datasets, Graph, ModelConfig};

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
    model: ModelKind,
    /// karate, cora, citeseer or csbm:<nodes>.
    #[arg(long, default_value = "karate")]
    dataset: String,
    /// Folder with (or for downloading) the Planetoid ind.* files.
    #[arg(long)]
    data_dir: Option<PathBuf>,
    /// Number of epochs (default 200).
    #[arg(long, default_value_t = 200)]
    epochs: usize,
    /// Seed for initialisation and dropout.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Also save a checkpoint: safetensors with PyG names and the model config in its
    /// metadata; loads on any device.
    #[arg(long)]
    save: Option<PathBuf>,
    /// Record every copy between host and device and print the transfer ledger (stderr), with
    /// per-phase totals in the JSON summary.
    #[arg(long)]
    ledger: bool,
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
    let ledger = Ledger::new();
    let at = if args.ledger {
        chosen.placement.clone().with_ledger(&ledger)
    } else {
        chosen.placement.clone()
    };
    ledger.set_phase("load");
    let graph = datasets::load(&args.dataset, args.data_dir.as_deref(), &at)
        .with_context(|| format!("loading dataset '{}'", args.dataset))?;
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
