//! `workbook export`: pre-flight a model, then write it as ONNX or as safetensors for PyG.

use anyhow::{bail, Context, Result};
use std::path::PathBuf;
use workbook::candle_core::{DType, Tensor};
use workbook::device::Chosen;
use workbook::export::preflight::{Example, Preflight};
use workbook::export::{onnx, safetensors as st_export};
use workbook::{checkpoint, datasets, limits, predict, EdgeIndex, Graph, Model};

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// ONNX opset 18, dynamic num_nodes and num_edges.
    Onnx,
    /// PyG-named float32 weights plus a .json config beside them.
    Safetensors,
}

#[derive(clap::Args)]
pub struct Args {
    /// Model config JSON (PyG layer arguments; "in_channels": -1 takes the width from the
    /// weights). Optional when --weights is a workbook checkpoint, which carries its config.
    #[arg(long)]
    model: Option<PathBuf>,
    /// Weights: a workbook checkpoint or a PyG state_dict saved with safetensors.
    #[arg(long)]
    weights: PathBuf,
    #[arg(long, value_enum)]
    format: Format,
    /// Output file (.onnx, or .safetensors with the config written beside it as .json).
    #[arg(long)]
    out: PathBuf,
    /// Example graph for the pre-flight forward pass (karate, cora, citeseer, csbm:<nodes>);
    /// default: a 10-node ring with the model's feature width.
    #[arg(long)]
    data: Option<String>,
    /// ONNX: also output each GATv2 layer's attention and the edge list it is over.
    #[arg(long)]
    attention: bool,
    /// ONNX: take a third input edge_weight float32 [num_edges] for the GCN layers (without it
    /// every edge weighs 1 and, as in PyG, improved=true has no effect).
    #[arg(long)]
    edge_weight: bool,
}

fn load(args: &Args, chosen: &Chosen) -> Result<Model> {
    Ok(match &args.model {
        Some(config) => {
            let (model, ignored) =
                predict::load_model(config, &args.weights, "", &chosen.placement)?;
            if !ignored.is_empty() {
                eprintln!(
                    "note: {} tensor(s) in the weights file are not used by the model: {}",
                    ignored.len(),
                    ignored.join(", ")
                );
            }
            model
        }
        None => checkpoint::load(&args.weights, &chosen.placement)?,
    })
}

fn example(args: &Args, model: &Model, chosen: &Chosen) -> Result<Graph> {
    if let Some(spec) = &args.data {
        let graph = datasets::load(spec, None, &chosen.placement)?;
        limits::check_inference_fits(
            &format!("the pre-flight forward pass on '{spec}'"),
            model.config(),
            graph.num_nodes(),
            graph.num_edges(),
        )?;
        return Ok(graph);
    }
    let n = 10usize;
    limits::check_inference_fits(
        "the pre-flight forward pass on a 10-node ring",
        model.config(),
        n,
        n,
    )?;
    let features = model.config().layers[0].in_channels();
    let src: Vec<i64> = (0..n as i64).collect();
    let dst: Vec<i64> = (0..n as i64).map(|i| (i + 1) % n as i64).collect();
    let ei = EdgeIndex::new(&src, &dst, n, &chosen.placement)?;
    let x = Tensor::full(0.1f32, (n, features), chosen.placement.device())?;
    Ok(Graph::new("ring10", x, ei)?)
}

/// Every file the export writes: `--out`, and for safetensors the config beside it.
fn outputs(args: &Args) -> Result<Vec<(&'static str, PathBuf)>> {
    let mut out = vec![("--out", args.out.clone())];
    if args.format == Format::Safetensors {
        let json = st_export::config_path(&args.out);
        if json == args.out {
            bail!(
                "--out {}: the config is written beside the weights with the extension .json; give --out another extension (e.g. model.safetensors)",
                args.out.display()
            );
        }
        out.push(("the config beside --out", json));
    }
    Ok(out)
}

pub fn run(args: Args, chosen: &Chosen) -> Result<()> {
    let mut inputs: Vec<(&str, &std::path::Path)> = vec![("--weights", &args.weights)];
    if let Some(m) = &args.model {
        inputs.push(("--model", m));
    }
    for (flag, path) in outputs(&args)? {
        crate::inputs::refuse_overwriting(flag, &path, &inputs)?;
    }
    let model = load(&args, chosen).context("cannot load the model")?;
    let graph = example(&args, &model, chosen).context("cannot build the example graph")?;
    let report = Preflight::new(&model)
        .check(&Example::from_graph(&graph))
        .with_context(|| format!("not exporting {}", args.out.display()))?;
    println!("pre-flight (example graph '{}'):", graph.name);
    for check in &report.checks {
        println!("  ok  {check}");
    }
    if model.dtype() != DType::F32 {
        bail!("the model is {:?}; exports are float32", model.dtype());
    }
    match args.format {
        Format::Onnx => {
            let proto = onnx::write(
                &model,
                &args.out,
                &onnx::OnnxOptions {
                    attention: args.attention,
                    edge_weight: args.edge_weight,
                },
            )?;
            let graph = proto.graph.unwrap_or_default();
            let outputs: Vec<&str> = graph.output.iter().map(|o| o.name.as_str()).collect();
            println!(
                "wrote {}: ONNX opset {}, {} nodes; inputs x [num_nodes, {}] float32, edge_index [2, num_edges] int64{}; outputs {}",
                args.out.display(),
                onnx::OPSET,
                graph.node.len(),
                model.config().layers[0].in_channels(),
                if args.edge_weight {
                    ", edge_weight [num_edges] float32"
                } else {
                    ""
                },
                outputs.join(", ")
            );
        }
        Format::Safetensors => {
            let json = st_export::export(&model, &args.out)?;
            println!(
                "wrote {} ({} PyG-named float32 tensors) and {} (config)",
                args.out.display(),
                model.named_parameters().len(),
                json.display()
            );
            println!(
                "load in PyG: model.load_state_dict(safetensors.torch.load_file({:?}))",
                args.out.display().to_string()
            );
        }
    }
    Ok(())
}
