//! The default command: train GCN and GATv2 on the embedded karate club and write a report.
//!
//! Needs no files and no network: the main job of `cargo run --release`.

use super::train::{train_with_bar, ModelKind};
use anyhow::{Context, Result};
use serde_json::json;
use std::fmt::Write as _;
use std::path::PathBuf;
use workbook::atomic_write::FileSet;
use workbook::datasets;
use workbook::device::Chosen;
use workbook_lessons::figures::{training_curves_svg, Curve};

#[derive(clap::Args)]
pub struct Args {
    /// Folder for report.md, report.json and training_curves.svg.
    #[arg(long, default_value = "workbook-report")]
    report_dir: PathBuf,
    /// Epochs per model.
    #[arg(long, default_value_t = 200)]
    epochs: usize,
    /// Seed for initialisation and dropout.
    #[arg(long, default_value_t = 0)]
    seed: u64,
}

impl Default for Args {
    fn default() -> Self {
        Self {
            report_dir: PathBuf::from("workbook-report"),
            epochs: 200,
            seed: 0,
        }
    }
}

pub fn run(args: Args, chosen: &Chosen) -> Result<()> {
    workbook::limits::check_count("--epochs", args.epochs, 1)?;
    let graph = datasets::karate(&chosen.placement).context("building the karate graph")?;
    println!(
        "Zachary's karate club: {} members, {} directed edges, {} communities, {} labelled member(s) per community",
        graph.num_nodes(),
        graph.num_edges(),
        graph.num_classes(),
        1
    );
    let mut curves = Vec::new();
    let mut rows = Vec::new();
    for kind in [ModelKind::Gcn, ModelKind::Gatv2] {
        let report = train_with_bar(kind, &graph, args.epochs, args.seed)?;
        let last = report.last().context("training ran no epochs")?.clone();
        println!(
            "{:>6}: {} epochs on {} in {:.1} ms/epoch; loss {:.3}, train accuracy {:.0}%, accuracy on the 30 unlabelled members {:.1}%",
            kind.name(),
            args.epochs,
            chosen.name,
            report.epoch_ms(),
            last.loss,
            100.0 * last.train_accuracy,
            100.0 * last.test_accuracy
        );
        rows.push(json!({
            "model": kind.name(),
            "dataset": "karate",
            "device": chosen.name,
            "epochs": args.epochs,
            "seed": args.seed,
            "loss": last.loss,
            "train_accuracy": last.train_accuracy,
            "test_accuracy": last.test_accuracy,
            "epoch_ms": report.epoch_ms(),
        }));
        curves.push(Curve {
            label: kind.name().to_uppercase(),
            history: report.history,
        });
    }
    let dir = &args.report_dir;
    let svg_path = dir.join("training_curves.svg");
    let svg =
        training_curves_svg(&svg_path, "karate", &curves).context("drawing the training curves")?;
    let json_text = serde_json::to_string_pretty(&json!({
        "device": chosen.name,
        "device_reason": chosen.reason,
        "runs": rows,
    }))?;
    let mut md = String::new();
    writeln!(md, "# Karate club: GCN and GATv2\n")?;
    writeln!(md, "Device: `{}` ({}).\n", chosen.name, chosen.reason)?;
    writeln!(
        md,
        "| model | epochs | loss | train acc. | acc. on unlabelled | ms/epoch |"
    )?;
    writeln!(md, "|---|---|---|---|---|---|")?;
    for r in &rows {
        writeln!(
            md,
            "| {} | {} | {:.3} | {:.1}% | {:.1}% | {:.2} |",
            r["model"].as_str().unwrap_or_default(),
            r["epochs"],
            r["loss"].as_f64().unwrap_or(f64::NAN),
            100.0 * r["train_accuracy"].as_f64().unwrap_or(f64::NAN),
            100.0 * r["test_accuracy"].as_f64().unwrap_or(f64::NAN),
            r["epoch_ms"].as_f64().unwrap_or(f64::NAN)
        )?;
    }
    writeln!(md, "\n![training curves](training_curves.svg)")?;
    // The three files are one report: all written, or the old report left as it was.
    let mut report = FileSet::new();
    report.add(&svg_path, svg.as_bytes())?;
    report.add(&dir.join("report.json"), json_text.as_bytes())?;
    report.add(&dir.join("report.md"), md.as_bytes())?;
    report
        .commit()
        .with_context(|| format!("writing the report to {}", dir.display()))?;
    println!(
        "report: {} (and report.json, training_curves.svg)",
        dir.join("report.md").display()
    );
    Ok(())
}
