//! `workbook data`: write any dataset as a graph file, e.g. to hand PyG the same graph.

use anyhow::{Context, Result};
use std::path::PathBuf;
use workbook::device::Chosen;

#[derive(clap::Args)]
pub struct Args {
    /// karate, cora, citeseer, csbm:<nodes> (random edges) or knn:<nodes> (each node's 10
    /// nearest points in the unit square, ids shuffled: local edges under a random numbering).
    #[arg(long)]
    dataset: String,
    /// Renumber the nodes first: rcm (reverse Cuthill-McKee) or rabbit (Rabbit order,
    /// communities together), so that neighbours get nearby ids (`workbook::reorder`).
    #[arg(long, value_parser = super::reorder_arg::parse, value_name = "ORDER")]
    reorder: Option<workbook::reorder::Order>,
    /// Output file (safetensors: x, edge_index, y, train_mask, val_mask, test_mask).
    #[arg(long)]
    out: PathBuf,
    /// Folder holding all eight Planetoid ind.<name>.* files of cora or citeseer (an error names
    /// any missing). Without it: WORKBOOK_DATA_DIR or ~/.cache/gnn-workbook/planetoid, where
    /// Cora falls back to its embedded copy and CiteSeer is downloaded.
    #[arg(long)]
    data_dir: Option<PathBuf>,
}

pub fn run(args: Args, chosen: &Chosen) -> Result<()> {
    crate::inputs::refuse_overwriting_dataset(
        "--out",
        &args.out,
        &args.dataset,
        args.data_dir.as_deref(),
    )?;
    let graph =
        crate::inputs::load_dataset(&args.dataset, args.data_dir.as_deref(), &chosen.placement)?;
    let graph = super::reorder_arg::apply(graph, args.reorder)?;
    graph
        .save(&args.out)
        .with_context(|| format!("writing {}", args.out.display()))?;
    println!(
        "wrote {} ({} nodes, {} edges, {} features, {} classes)",
        args.out.display(),
        graph.num_nodes(),
        graph.num_edges(),
        graph.num_features(),
        graph.num_classes()
    );
    Ok(())
}
