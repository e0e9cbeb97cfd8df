//! `workbook figures`: draws the book's measured figures (SVG) from real runs.
//!
//! - `cora_training_curves.svg`: loss and accuracy per epoch of GCN and GATv2 on Cora;
//! - `ledger_bytes.svg`: bytes copied to and from the device, cumulated per epoch, when the
//!   graph is moved once and when it is moved every epoch (karate, transfer ledger);
//! - `serving_throughput.svg`: requests per second against threads sharing one GATv2 model;
//! - `karate_gatv2.svg`: the karate club coloured by GATv2's predictions, edges shaded by the
//!   first layer's attention;
//! - `prefetch_timeline.svg`: a median mini-batch epoch without and with prefetch, and
//!   `prefetch_timeline.md`, the caption the book includes under it (see `prefetch_figure.rs`);
//! - `data_parallel.svg`: bytes per step by kind and time per step of data-parallel GCN on Cora
//!   over 1 to 4 simulated devices (chapter 6);
//! - `rank_times.svg`: each rank's time per step and the epoch's time for 1, 2 and 4 processes
//!   under `mpirun` (chapter 6), redrawn from the recorded runs in `--rank-runs` (JSON lines of
//!   `workbook train --distributed`), since this command does not start `mpirun` itself.

use crate::commands::train::{train_with_bar, ModelKind};
use anyhow::{bail, Context, Result};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use workbook::candle_core::D;
use workbook::device::Chosen;
use workbook::ledger::Ledger;
use workbook::train::{TrainConfig, Trainer};
use workbook::{datasets, Model, ModelConfig, Placement};
use workbook_lessons::figures::{
    draw_data_parallel, draw_graph, draw_line_chart, draw_rank_times, draw_roofline,
    draw_training_curves, measure_data_parallel, roofline_kernels, spring_layout, Curve,
    GraphDrawing, LineChart, RankRun, Series,
};
use workbook_lessons::threads::serving;

#[derive(clap::Args)]
pub struct Args {
    /// Folder for the SVG files.
    #[arg(long, default_value = "book/src/figures")]
    out: PathBuf,
    /// Epochs for the Cora training curves.
    #[arg(long, default_value_t = 200)]
    epochs: usize,
    /// Requests per thread count for the serving figure.
    #[arg(long, default_value_t = 400)]
    requests: usize,
    /// Draw only these figures (training, ledger, serving, karate, prefetch, data-parallel,
    /// ranks, roofline); default: all.
    #[arg(long, value_delimiter = ',')]
    only: Vec<Figure>,
    /// The recorded `mpirun -n N workbook train --distributed` runs the ranks figure is drawn
    /// from: their JSON lines, one per run; `#` lines are comments (machine, command, date).
    /// Default: book/figure-data/ranks/runs.jsonl, when it exists (the ranks figure is skipped
    /// otherwise, unless --only names it).
    #[arg(long)]
    rank_runs: Option<PathBuf>,
    /// The recorded `workbook bench --roofline` runs the roofline figure is drawn from: their
    /// JSON lines; `#` lines are comments. Default: book/figure-data/roofline/runs.jsonl, when it
    /// exists (skipped otherwise, unless --only names it).
    #[arg(long)]
    roofline_runs: Option<PathBuf>,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Figure {
    Training,
    Ledger,
    Serving,
    Karate,
    Prefetch,
    DataParallel,
    Ranks,
    Roofline,
}

pub fn run(args: Args, chosen: &Chosen) -> Result<()> {
    workbook::limits::check_count("--epochs", args.epochs, 1)?;
    workbook::limits::check_count("--requests", args.requests, 1)?;
    let wanted = |f: Figure| args.only.is_empty() || args.only.contains(&f);
    if wanted(Figure::Serving) {
        // Before the long runs that precede it.
        let karate = datasets::karate(Placement::cpu())?;
        workbook::limits::check_serving_fits(
            "the serving figure (--requests)",
            &serving_model(),
            &karate,
            args.requests,
            8,
        )?;
    }
    std::fs::create_dir_all(&args.out)
        .with_context(|| format!("creating {}", args.out.display()))?;
    if wanted(Figure::Training) {
        training(&args, chosen)?;
    }
    if wanted(Figure::Ledger) {
        ledger(&args, chosen)?;
    }
    let graph = datasets::karate(&chosen.placement)?;
    if wanted(Figure::Karate) {
        let path = args.out.join("karate_gatv2.svg");
        draw_graph(&path, &karate_drawing(&graph)?)?;
        eprintln!("wrote {}", path.display());
    }
    if wanted(Figure::Serving) {
        serving_figure(&args, chosen, &graph)?;
    }
    if wanted(Figure::Prefetch) {
        super::prefetch_figure::draw(&args.out, chosen)?;
    }
    if wanted(Figure::DataParallel) {
        data_parallel(&args)?;
    }
    if wanted(Figure::Ranks) {
        let path = recorded_runs(&args, &args.rank_runs, RECORDED_RANK_RUNS, Figure::Ranks);
        match path {
            Some(path) => rank_times(&args, &path)?,
            None => eprintln!(
                "skipped the ranks figure: no recorded mpirun runs at {RECORDED_RANK_RUNS} (give --rank-runs FILE)"
            ),
        }
    }
    if wanted(Figure::Roofline) {
        let path = recorded_runs(
            &args,
            &args.roofline_runs,
            RECORDED_ROOFLINE_RUNS,
            Figure::Roofline,
        );
        match path {
            Some(path) => roofline(&args, &path)?,
            None => eprintln!(
                "skipped the roofline figure: no recorded bench --roofline runs at {RECORDED_ROOFLINE_RUNS} (give --roofline-runs FILE)"
            ),
        }
    }
    Ok(())
}

/// Where the book keeps the `bench --roofline` runs its node-order figure is drawn from.
const RECORDED_ROOFLINE_RUNS: &str = "book/figure-data/roofline/runs.jsonl";

/// The recorded runs a figure is drawn from: the file given, else the book's copy when it
/// exists or the figure was asked for by name (then a missing file is the reading's error);
/// `None`: skip the figure.
fn recorded_runs(
    args: &Args,
    given: &Option<PathBuf>,
    default: &str,
    figure: Figure,
) -> Option<PathBuf> {
    let default = Path::new(default);
    match given {
        Some(path) => Some(path.clone()),
        None if default.is_file() || args.only.contains(&figure) => Some(default.to_path_buf()),
        None => None,
    }
}

/// A file of recorded runs (JSON lines, `#` comments), at most 1 MiB.
fn read_recorded_runs(path: &Path, why: &str, flag: &str) -> Result<String> {
    let cap = workbook::input_file::Cap {
        bytes: 1 << 20,
        why: why.into(),
    };
    workbook::input_file::read_to_string(path, &cap)
        .with_context(|| format!("reading the recorded runs ({flag} {})", path.display()))
}

/// Chapter 5.4's figure: `csr_spmm` at GCN's width (1 × 16) on each recorded graph.
fn roofline(args: &Args, path: &Path) -> Result<()> {
    let text = read_recorded_runs(
        path,
        "a file of recorded bench --roofline runs (a few JSON lines per run)",
        "--roofline-runs",
    )?;
    let kernels =
        roofline_kernels(&text, 1, 16).with_context(|| format!("reading {}", path.display()))?;
    if kernels.is_empty() {
        bail!(
            "{} holds no csr_spmm line of width 1 x 16: record runs with `workbook bench --roofline --dataset NAME >> {}`",
            path.display(),
            path.display()
        );
    }
    let out = args.out.join("roofline.svg");
    draw_roofline(
        &out,
        "csr_spmm at GCN's width (16 channels): measured, and memory's two limits",
        &kernels,
    )?;
    eprintln!("wrote {}", out.display());
    Ok(())
}

/// Where the book keeps the runs its per-rank figure is drawn from (from the repository root).
const RECORDED_RANK_RUNS: &str = "book/figure-data/ranks/runs.jsonl";

/// Chapter 6's per-rank figure, from recorded runs (this command does not start `mpirun`).
fn rank_times(args: &Args, path: &Path) -> Result<()> {
    let text = read_recorded_runs(
        path,
        "a file of recorded distributed runs (one short JSON line per run)",
        "--rank-runs",
    )?;
    let (mut runs, mut settings) = (Vec::new(), Vec::new());
    for (n, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let run: RankRun = serde_json::from_str(line).with_context(|| {
            format!(
                "{}:{}: not the JSON line of `workbook train --distributed` (it needs world_size, steps_per_epoch and rank_epoch_ms)",
                path.display(),
                n + 1
            )
        })?;
        // What the title says: the same for every run, or the figure compares unlike runs.
        let value: serde_json::Value = serde_json::from_str(line)?;
        let setting = format!(
            "{} on {} under mpirun, {} seeds per rank and step, {}",
            value["model"].as_str().unwrap_or("?").to_uppercase(),
            value["dataset"].as_str().unwrap_or("?"),
            value["batch_size_per_rank"],
            value["num_neighbors"]
        );
        if !settings.is_empty() && settings[0] != setting {
            bail!(
                "{}:{}: this run ({setting}) is not like the first ({}): the figure compares runs that differ only in their number of processes",
                path.display(),
                n + 1,
                settings[0]
            );
        }
        settings.push(setting);
        runs.push(run);
    }
    if runs.is_empty() {
        bail!(
            "{}: no runs (JSON lines of `workbook train --distributed`)",
            path.display()
        );
    }
    runs.sort_by_key(|r| r.world_size);
    let out = args.out.join("rank_times.svg");
    draw_rank_times(&out, &settings[0], &runs)?;
    eprintln!("wrote {} from {} run(s)", out.display(), runs.len());
    Ok(())
}

/// Chapter 6's figure: always on simulated devices (sim:1 to sim:4), whatever `--device` says.
fn data_parallel(args: &Args) -> Result<()> {
    let graph = datasets::load("cora", None, Placement::cpu()).context("loading Cora")?;
    let points = measure_data_parallel(&graph, &[1, 2, 3, 4], 120, 3)?;
    let path = args.out.join("data_parallel.svg");
    draw_data_parallel(
        &path,
        "Data-parallel GCN on Cora, global batch 120, [10, 10] (sim devices)",
        &points,
    )?;
    eprintln!("wrote {}", path.display());
    Ok(())
}

fn training(args: &Args, chosen: &Chosen) -> Result<()> {
    let cora = datasets::load("cora", None, &chosen.placement).context("loading Cora")?;
    let mut curves = Vec::new();
    for kind in [ModelKind::Gcn, ModelKind::Gatv2] {
        let report = train_with_bar(kind, &cora, args.epochs, 0)?;
        curves.push(Curve {
            label: kind.name().to_uppercase().replace("GATV2", "GATv2"),
            history: report.history,
        });
    }
    let path = args.out.join("cora_training_curves.svg");
    draw_training_curves(&path, "Cora", &curves)?;
    eprintln!("wrote {}", path.display());
    Ok(())
}

fn ledger(args: &Args, chosen: &Chosen) -> Result<()> {
    // The ledger only sees copies to a device: on the host, use the simulated sim:1.
    let device = if chosen.placement.is_cpu() {
        Placement::sim(1)
    } else {
        chosen.placement.clone()
    };
    let series = [
        ("graph moved once", false),
        ("graph moved every epoch", true),
    ]
    .into_iter()
    .map(|(label, every)| {
        Ok(Series {
            label: label.into(),
            points: cumulative_bytes(&device, every, 20)?,
        })
    })
    .collect::<Result<Vec<_>>>()?;
    let path = args.out.join("ledger_bytes.svg");
    draw_line_chart(
        &path,
        &LineChart {
            title: format!("karate on {device}: bytes copied (transfer ledger)"),
            x_label: "epoch (0 = after loading and initialisation)".into(),
            y_label: "KiB copied so far".into(),
            series,
        },
    )?;
    eprintln!("wrote {}", path.display());

    Ok(())
}

/// The model the serving figure shares between threads.
fn serving_model() -> ModelConfig {
    ModelConfig::gatv2(34, 8, 8, 4)
}

fn serving_figure(args: &Args, chosen: &Chosen, graph: &workbook::Graph) -> Result<()> {
    let (model, _) = Model::init(serving_model(), 0, &chosen.placement)?;
    let requests: Arc<[serving::Request]> =
        serving::mixed_requests(graph, args.requests, 0)?.into();
    let runs = serving::sweep(Arc::new(model), requests, &[1, 2, 4, 8])?;
    let path = args.out.join("serving_throughput.svg");
    draw_line_chart(
        &path,
        &LineChart {
            title: format!(
                "one GATv2 model shared by N threads ({} requests, {} cores)",
                args.requests,
                std::thread::available_parallelism().map_or(1, |n| n.get())
            ),
            x_label: "threads".into(),
            y_label: "requests per second".into(),
            series: vec![Series {
                label: format!("karate on {}", chosen.name),
                points: runs
                    .iter()
                    .map(|r| (r.threads as f64, r.requests_per_second))
                    .collect(),
            }],
        },
    )?;
    eprintln!("wrote {}", path.display());
    Ok(())
}

/// Trains GATv2 on karate and returns the drawing: predicted community per member, and each
/// friendship shaded by the larger of its two first-layer attention weights (mean over heads).
fn karate_drawing(graph: &workbook::Graph) -> Result<GraphDrawing> {
    let report = train_with_bar(ModelKind::Gatv2, graph, 200, 0)?;
    let out = report.model.forward_graph(graph)?;
    let classes: Vec<usize> = out
        .logits
        .argmax(D::Minus1)?
        .to_vec1::<u32>()?
        .into_iter()
        .map(|c| c as usize)
        .collect();
    let attention = &out.attention[0].1;
    let weights = attention.weights.mean(D::Minus1)?.to_vec1::<f32>()?;
    let src = attention.edge_index.sources_host();
    let dst = attention.edge_index.targets_host();
    let mut pairs: std::collections::BTreeMap<(usize, usize), f64> = Default::default();
    for ((&a, &b), &w) in src.iter().zip(dst).zip(&weights) {
        let key = (a.min(b) as usize, a.max(b) as usize);
        let slot = pairs.entry(key).or_insert(0.0);
        *slot = slot.max(f64::from(w));
    }
    let top = pairs.values().copied().fold(1e-9, f64::max);
    let edges: Vec<(usize, usize, f64)> = pairs
        .into_iter()
        .map(|((a, b), w)| (a, b, w / top))
        .collect();
    let marked = match graph.split() {
        Some(s) => s
            .train
            .to_vec1::<u32>()?
            .into_iter()
            .map(|i| i as usize)
            .collect(),
        None => Vec::new(),
    };
    Ok(GraphDrawing {
        title: "karate: GATv2's predicted communities; edges shaded by attention".into(),
        positions: spring_layout(graph.num_nodes(), &edges, 1, 300),
        edges,
        classes,
        marked,
    })
}

/// KiB recorded by the ledger after loading (epoch 0) and after each epoch.
fn cumulative_bytes(
    device: &Placement,
    every_epoch: bool,
    epochs: usize,
) -> Result<Vec<(f64, f64)>> {
    let ledger = Ledger::new();
    let at = device.clone().with_ledger(&ledger);
    ledger.set_phase("load");
    let host = datasets::karate(Placement::cpu())?;
    let mut graph = host.to_device(&at)?;
    let (config, recipe) = ModelKind::Gcn.recipe(&graph);
    let mut trainer = Trainer::new(config, &graph, &TrainConfig { epochs, ..recipe })?;
    let kib = |l: &Ledger| l.transfers().iter().map(|t| t.bytes).sum::<u64>() as f64 / 1024.0;
    let mut points = vec![(0.0, kib(&ledger))];
    for epoch in 1..=epochs {
        ledger.set_phase(format!("epoch {epoch}"));
        if every_epoch {
            graph = host.to_device(&at)?;
        }
        trainer.epoch(&graph)?;
        points.push((epoch as f64, kib(&ledger)));
    }
    Ok(points)
}
