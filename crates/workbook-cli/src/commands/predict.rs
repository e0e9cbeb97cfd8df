//! `workbook predict`: run a PyTorch Geometric model from its config and `state_dict`.

use anyhow::{Context, Result};
use std::path::PathBuf;
use workbook::device::Chosen;
use workbook::predict::{predict_files, PredictPaths, IMPROVED_NOTE};

#[derive(clap::Args)]
pub struct Args {
    /// Model config: {"layer": "GCNConv" | "GATv2Conv" | "SAGEConv", ...PyG arguments} or
    /// {"layers": [...]}; "in_channels": -1 (PyG's lazy width) takes the width from the weights.
    #[arg(long)]
    config: PathBuf,
    /// Weights: a PyG state_dict saved with safetensors.torch.save_file.
    #[arg(long)]
    weights: PathBuf,
    /// Graph: safetensors with x, edge_index and optionally edge_weight.
    #[arg(long)]
    graph: PathBuf,
    /// Output: safetensors receiving out (and alpha, alpha_edge_index for GATv2).
    #[arg(long)]
    out: PathBuf,
    /// Strip this prefix from weight names (e.g. "params." or "model.").
    #[arg(long, default_value = "")]
    weights_prefix: String,
}

pub fn run(args: Args, chosen: &Chosen) -> Result<()> {
    crate::inputs::refuse_overwriting(
        "--out",
        &args.out,
        &[
            ("--config", &args.config),
            ("--weights", &args.weights),
            ("--graph", &args.graph),
        ],
    )?;
    let summary = predict_files(
        &PredictPaths {
            config: &args.config,
            weights: &args.weights,
            graph: &args.graph,
            out: &args.out,
            weights_prefix: &args.weights_prefix,
        },
        &chosen.placement,
    )
    .context("predict failed")?;
    if !summary.ignored.is_empty() {
        eprintln!(
            "note: {} tensor(s) in the weights file are not used by the model: {}",
            summary.ignored.len(),
            summary.ignored.join(", ")
        );
    }
    if !summary.improved_ignored.is_empty() {
        eprintln!(
            "note: improved=true in {}: {IMPROVED_NOTE}",
            summary.improved_ignored.join(", ")
        );
    }
    println!(
        "wrote {} ({}) for {} nodes, {} edges; out shape {:?}",
        args.out.display(),
        summary.written.join(", "),
        summary.num_nodes,
        summary.num_edges,
        summary.out_shape
    );
    Ok(())
}
