//! `workbook import`: a PyTorch checkpoint (`torch.save(model.state_dict(), "model.pt")`) to the
//! safetensors weights and config JSON that `predict`, `export` and PyG read.
//!
//! As `torch.load`, a file whose tensors were saved on `cuda:0` needs `--map-location` on a
//! machine without that GPU; the model is inferred from PyG's parameter names unless `--config`
//! gives it; a `DataParallel` file's `module.` prefix is removed and said so. Nothing in the file
//! is run: a pickled module (`torch.save(model)`) is refused.

use anyhow::{Context, Result};
use std::path::PathBuf;
use workbook::checkpoint::load_pt;
use workbook::export::safetensors as st_export;
use workbook::torch_file::MapLocation;
use workbook::ModelConfig;

#[derive(clap::Args)]
pub struct Args {
    /// The PyTorch file: torch.save(model.state_dict(), ...), zip or legacy format (.pt, .pth).
    file: PathBuf,
    /// Where the tensors go, as torch.load's map_location: a device (cpu, cuda:N, sim:N), or
    /// SAVED=DEVICE pairs (cuda:0=cpu; repeat the flag for several). Without it each tensor goes
    /// to the device it was saved on, which fails for a GPU this machine lacks, as in PyTorch.
    #[arg(long, value_name = "DEVICE or SAVED=DEVICE")]
    map_location: Vec<String>,
    /// The model's config (JSON, as for predict). Without it the model is inferred from the
    /// state_dict's PyG names and shapes (GCNConv, GATv2Conv, SAGEConv layers conv1, conv2, ...).
    #[arg(long)]
    config: Option<PathBuf>,
    /// The weights to write (safetensors, PyG names); the config goes beside it as .json.
    /// Default: the file's name with .safetensors, in the current folder.
    #[arg(long)]
    out: Option<PathBuf>,
}

pub fn run(args: Args) -> Result<()> {
    let out = match &args.out {
        Some(out) => out.clone(),
        None => {
            let stem = args
                .file
                .file_stem()
                .with_context(|| format!("{} has no file name", args.file.display()))?;
            PathBuf::from(stem).with_extension("safetensors")
        }
    };
    let json = st_export::config_path(&out);
    let mut inputs: Vec<(&str, &std::path::Path)> = vec![("the .pt file", &args.file)];
    if let Some(c) = &args.config {
        inputs.push(("--config", c));
    }
    crate::inputs::refuse_overwriting("--out", &out, &inputs)?;
    crate::inputs::refuse_overwriting("the config beside --out", &json, &inputs)?;
    let map = MapLocation::parse(&args.map_location)?;
    let config = match &args.config {
        Some(path) => {
            let text =
                workbook::input_file::read_to_string(path, &workbook::input_file::Cap::config())?;
            Some(
                ModelConfig::from_json(&text)
                    .with_context(|| format!("--config {}", path.display()))?,
            )
        }
        None => None,
    };
    let import = load_pt(&args.file, &map, config)
        .with_context(|| format!("cannot import {}", args.file.display()))?;
    let model = &import.model;
    println!(
        "read {}: torch.save {} format, {} tensors saved on {}",
        args.file.display(),
        import.format,
        model.named_parameters().len(),
        import.saved_on.join(" and ")
    );
    println!("loaded onto {} ({})", model.placement(), describe(&map));
    for (k, layer) in model.config().layers.iter().enumerate() {
        println!(
            "  conv{}: {} {} -> {}",
            k + 1,
            layer.spec().layer_type(),
            layer.in_channels(),
            layer.output_width()
        );
    }
    if import.inferred {
        println!("model inferred from the names and shapes (give --config to set it yourself):");
    }
    for note in &import.notes {
        println!("  note: {note}");
    }
    let json = st_export::export(model, &out)?;
    println!(
        "wrote {} (PyG-named tensors) and {} (config)",
        out.display(),
        json.display()
    );
    println!(
        "next: workbook predict --config {} --weights {} --graph GRAPH.safetensors --out OUT.safetensors",
        json.display(),
        out.display()
    );
    Ok(())
}

fn describe(map: &MapLocation) -> String {
    match map {
        MapLocation::AsSaved => "no --map-location: where each tensor was saved".into(),
        MapLocation::To(p) => format!("--map-location {p}"),
        MapLocation::Map(pairs) => pairs
            .iter()
            .map(|(from, to)| format!("--map-location {from}={to}"))
            .collect::<Vec<_>>()
            .join(" "),
    }
}
