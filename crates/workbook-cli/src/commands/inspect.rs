//! `workbook inspect`: load a checkpoint and/or a dataset onto the chosen device and print
//! every tensor with its device, dtype and shape (the usual first step when debugging a
//! device mismatch).

use anyhow::{bail, Context, Result};
use std::path::PathBuf;
use workbook::device::Chosen;
use workbook::{checkpoint, inspect};

#[derive(clap::Args)]
pub struct Args {
    /// A checkpoint written by `train --save` (loaded onto --device: map_location).
    #[arg(long)]
    checkpoint: Option<PathBuf>,
    /// A dataset to place on --device: karate, cora, citeseer or csbm:<nodes>.
    #[arg(long)]
    dataset: Option<String>,
    /// Folder holding all eight Planetoid ind.<name>.* files of cora or citeseer (an error names
    /// any missing). Without it: WORKBOOK_DATA_DIR or ~/.cache/gnn-workbook/planetoid, where
    /// Cora falls back to its embedded copy and CiteSeer is downloaded.
    #[arg(long)]
    data_dir: Option<PathBuf>,
}

pub fn run(args: Args, chosen: &Chosen) -> Result<()> {
    if args.checkpoint.is_none() && args.dataset.is_none() {
        bail!("nothing to inspect: give --checkpoint PATH and/or --dataset NAME");
    }
    if let Some(path) = &args.checkpoint {
        let model = checkpoint::load(path, &chosen.placement)
            .with_context(|| format!("loading checkpoint {}", path.display()))?;
        println!("model from {} on {}:", path.display(), chosen.name);
        print!("{}", inspect::model_table(&model));
    }
    if let Some(name) = &args.dataset {
        let graph = crate::inputs::load_dataset(name, args.data_dir.as_deref(), &chosen.placement)?;
        println!("graph {} on {}:", graph.name, chosen.name);
        print!("{}", inspect::graph_table(&graph));
    }
    Ok(())
}
