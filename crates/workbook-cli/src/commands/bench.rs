//! `workbook bench`: time a model's forward pass and training epoch, one JSON line per run.
//!
//! `scripts/pyg_bench.py` prints the same keys for PyTorch Geometric on the same graph file, and
//! `scripts/compare.py` puts the two side by side. `--sweep` runs synthetic graphs of growing size
//! and `--figure` draws how time and memory grow (the book's scaling figure). `--devices` times
//! data parallelism instead (`commands/bench_data_parallel.rs`).

use crate::commands::train::ModelKind;
use anyhow::{bail, Context, Result};
use serde_json::json;
use std::path::PathBuf;
use workbook::device::Chosen;
use workbook::Graph;
use workbook_lessons::bench::{bench, BenchConfig, BenchReport};
use workbook_lessons::figures::{draw_scaling, ScalingPoint};

#[derive(clap::Args)]
pub struct Args {
    /// Model(s) to time: gcn, gatv2, or both separated by a comma.
    #[arg(
        long,
        value_enum,
        value_delimiter = ',',
        required_unless_present_any = ["roofline", "figure_runs"]
    )]
    pub(crate) model: Vec<ModelKind>,
    /// Instead of models: measure memory bandwidth, the random-read (latency) limit, and the
    /// aggregation kernels against both on this graph (default csbm:1000000); see
    /// `commands/roofline.rs`. Outputs go into reused pages, as STREAM's arrays do
    /// (WORKBOOK_KEEP_BUFFERS=0: fresh pages). Uses --epochs repeats.
    #[arg(long, num_args = 0..=1, default_missing_value = "csbm:1000000", value_name = "DATASET")]
    roofline: Option<String>,
    /// karate, cora, citeseer, csbm:<nodes> or knn:<nodes>, optionally with @rcm or @rabbit
    /// (ignored with --graph or --sweep).
    #[arg(long, default_value = "cora")]
    pub(crate) dataset: String,
    /// Renumber the graph in this node order before timing: rcm or rabbit (not with --roofline:
    /// give it a dataset with @rcm, e.g. --roofline knn:1000000@rcm).
    #[arg(long, value_parser = super::reorder_arg::parse, value_name = "ORDER", conflicts_with = "roofline")]
    reorder: Option<workbook::reorder::Order>,
    /// A graph file (as written by `workbook data --out`) to time instead of --dataset.
    #[arg(long)]
    pub(crate) graph: Option<PathBuf>,
    /// Folder holding all eight Planetoid ind.<name>.* files of cora or citeseer (an error names
    /// any missing). Without it: WORKBOOK_DATA_DIR or ~/.cache/gnn-workbook/planetoid, where
    /// Cora falls back to its embedded copy and CiteSeer is downloaded.
    #[arg(long)]
    pub(crate) data_dir: Option<PathBuf>,
    /// Timed repeats of each measurement (the median is reported).
    #[arg(long, default_value_t = 20)]
    pub(crate) epochs: usize,
    /// Untimed runs first.
    #[arg(long, default_value_t = 3)]
    pub(crate) warmup: usize,
    /// CPU threads for the kernels and candle (default: all cores).
    #[arg(long)]
    pub(crate) threads: Option<usize>,
    /// Seed for initialisation and dropout.
    #[arg(long, default_value_t = 0)]
    pub(crate) seed: u64,
    /// Time csbm graphs of these node counts instead (e.g. 1000,10000,100000).
    #[arg(long, value_delimiter = ',')]
    sweep: Vec<usize>,
    /// With --sweep: draw epoch time and memory against graph size into this SVG file.
    #[arg(long)]
    figure: Option<PathBuf>,
    /// With --figure: also draw PyG's runs, read from this file of JSON lines (the `--raw`
    /// output of `scripts/compare.py` on the same csbm sizes; lines with "impl": "pyg" and no
    /// "bench" key).
    #[arg(long, requires = "figure")]
    figure_pyg: Option<PathBuf>,
    /// With --figure: draw the workbook's runs from this file of JSON lines (what an earlier
    /// `bench --sweep ... --batch-size B` printed) instead of measuring; e.g. to redraw the
    /// figure with PyG's runs of another, quieter moment.
    #[arg(long, requires = "figure", conflicts_with = "sweep")]
    figure_runs: Option<PathBuf>,
    /// Also measure concurrent inference: N threads share one model (`threads::serving`) and
    /// answer --serving-requests requests; one JSON line per thread count (e.g. 1,2,4,8).
    #[arg(long, value_delimiter = ',')]
    serving_threads: Vec<usize>,
    /// Requests per serving run.
    #[arg(long, default_value_t = 200)]
    serving_requests: usize,
    /// Data parallelism over the first 1, 2, ..., N of these devices (e.g. sim:1,sim:2,sim:3,sim:4;
    /// needs --batch-size): per-step time and bytes moved (batches, gradient reduce, parameter
    /// broadcast), one JSON line per device count. On sim:N this measures the overheads, not a
    /// speed-up: every simulated device is the same host.
    #[arg(
        long,
        value_parser = super::devices::parse,
        conflicts_with_all = ["device", "sweep", "roofline", "serving_threads", "figure"]
    )]
    pub devices: Option<super::devices::DeviceList>,
    #[command(flatten)]
    pub mini: super::minibatch_args::MiniBatchArgs,
    /// With --batch-size: write every batch the mini-batch run trained on (warm-up and timed
    /// epochs) to this safetensors file, for `scripts/pyg_bench.py --batches` to time PyG's
    /// training step on the same subgraphs (see `commands/batch_file.rs`). One model, no sweep.
    #[arg(long, requires = "batch_size", value_name = "FILE")]
    save_batches: Option<PathBuf>,
    /// With --batch-size: timed mini-batch epochs (default: --epochs). An epoch of a small
    /// training set is one step of a few milliseconds, so a steady median needs more of them
    /// than a full-batch epoch does.
    #[arg(long, requires = "batch_size", value_name = "N")]
    batch_epochs: Option<usize>,
}

pub fn run(args: Args, chosen: &Chosen) -> Result<()> {
    if let Some(t) = args.threads {
        workbook::ops::set_cpu_threads(t).context("setting --threads")?;
    }
    if args.epochs == 0 {
        bail!("--epochs must be at least 1 (the number of timed repeats)");
    }
    // Every count is checked before any work, so a typo fails at once, not after a sweep.
    use workbook::limits::{check_count, check_threads};
    check_count("--epochs", args.epochs, 1)?;
    check_count("--warmup", args.warmup, 0)?;
    if let Some(n) = args.batch_epochs {
        check_count("--batch-epochs", n, 1)?;
    }
    for &t in &args.serving_threads {
        check_threads("--serving-threads", t)?;
    }
    if !args.serving_threads.is_empty() {
        check_count("--serving-requests", args.serving_requests, 1)?;
    }
    for &n in &args.sweep {
        if n > workbook::limits::MAX_NODES {
            bail!(
                "--sweep {n}: graphs are limited to {} nodes",
                workbook::limits::MAX_NODES
            );
        }
    }
    if args.save_batches.is_some() && (args.model.len() != 1 || !args.sweep.is_empty()) {
        bail!("--save-batches writes one run's batches: give one --model and no --sweep");
    }
    // No output may overwrite an input.
    let mut inputs: Vec<(&str, &std::path::Path)> = Vec::new();
    if let Some(g) = &args.graph {
        inputs.push(("--graph", g));
    }
    if let Some(p) = &args.figure_pyg {
        inputs.push(("--figure-pyg", p));
    }
    let data_files = crate::inputs::dataset_files(&args.dataset, args.data_dir.as_deref());
    inputs.extend(data_files.iter().map(|f| ("--data-dir", f.as_path())));
    for (flag, out) in [
        ("--figure", &args.figure),
        ("--save-batches", &args.save_batches),
    ] {
        if let Some(out) = out {
            crate::inputs::refuse_overwriting(flag, out, &inputs)?;
        }
    }
    if let Some(dataset) = &args.roofline {
        return crate::commands::roofline::run(dataset, args.epochs, chosen);
    }
    if let (Some(figure), Some(runs)) = (&args.figure, &args.figure_runs) {
        let mut points = workbook_points(runs)
            .with_context(|| format!("reading the workbook's runs from {}", runs.display()))?;
        if let Some(path) = &args.figure_pyg {
            points.extend(
                pyg_points(path)
                    .with_context(|| format!("reading PyG runs from {}", path.display()))?,
            );
        }
        draw_scaling(figure, FIGURE_TITLE, &points)
            .with_context(|| format!("drawing {}", figure.display()))?;
        eprintln!("wrote {}", figure.display());
        return Ok(());
    }
    if args.figure.is_some() && args.sweep.is_empty() {
        bail!(
            "--figure draws a sweep: add --sweep with node counts, e.g. --sweep 1000,10000 (or \
             --figure-runs with the JSON lines of an earlier sweep)"
        );
    }
    let runs = BenchConfig {
        warmup: args.warmup,
        repeats: args.epochs,
    };
    let datasets: Vec<String> = if args.sweep.is_empty() {
        vec![args.dataset.clone()]
    } else {
        args.sweep.iter().map(|n| format!("csbm:{n}")).collect()
    };
    let mut points = Vec::new();
    for name in &datasets {
        let graph = match (&args.graph, args.sweep.is_empty()) {
            (Some(path), true) => Graph::load(path, &chosen.placement)
                .with_context(|| format!("reading graph file {}", path.display()))?,
            _ => crate::inputs::load_dataset(name, args.data_dir.as_deref(), &chosen.placement)?,
        };
        let graph = super::reorder_arg::apply(graph, args.reorder)?;
        for &kind in &args.model {
            let (config, recipe) = kind.recipe(&graph);
            let recipe = workbook::train::TrainConfig {
                seed: args.seed,
                ..recipe
            };
            let report = bench(config, &recipe, &graph, &runs)
                .with_context(|| format!("timing {} on {}", kind.name(), graph.name))?;
            println!("{}", line(kind, &graph, chosen, &runs, &report));
            points.push(ScalingPoint {
                series: workbook_series(kind.name(), &chosen.name),
                nodes: graph.num_nodes(),
                edges: graph.num_edges(),
                epoch_ms: report.epoch_ms,
                memory_mb: memory_added(&report),
            });
            if let Some(batch_size) = args.mini.batch_size {
                // The loader samples on the host: a host copy of the graph (no ledger).
                let host = graph.to_device(workbook::Placement::cpu())?;
                let settings = super::bench_minibatch::Settings {
                    batch_size,
                    mini: args.mini.clone(),
                    warmup: args.warmup,
                    repeats: args.batch_epochs.unwrap_or(args.epochs),
                    seed: args.seed,
                    save_batches: args.save_batches.clone(),
                };
                let mini =
                    super::bench_minibatch::run(kind, &host, chosen, &settings, report.epoch_ms)?;
                points.push(ScalingPoint {
                    series: minibatch_series(kind.name(), batch_size, &chosen.name),
                    nodes: graph.num_nodes(),
                    edges: graph.num_edges(),
                    epoch_ms: mini.epoch_ms,
                    // Not drawn: in this process the mini-batch run reuses the heap the
                    // full-batch run just freed, so its memory added reads near 0
                    // (bench_minibatch.rs) and would be a line of noise.
                    memory_mb: None,
                });
            }
            if !args.serving_threads.is_empty() {
                serving(kind, &graph, chosen, &args)?;
            }
        }
    }
    if let Some(path) = &args.figure_pyg {
        points.extend(
            pyg_points(path)
                .with_context(|| format!("reading PyG runs from {}", path.display()))?,
        );
    }
    if let Some(path) = &args.figure {
        draw_scaling(path, FIGURE_TITLE, &points)
            .with_context(|| format!("drawing {}", path.display()))?;
        eprintln!("wrote {}", path.display());
    }
    Ok(())
}

/// Concurrent inference throughput against thread count, checked against sequential answers.
fn serving(kind: ModelKind, graph: &Graph, chosen: &Chosen, args: &Args) -> Result<()> {
    use std::sync::Arc;
    use workbook_lessons::threads::serving;
    let (config, _) = kind.recipe(graph);
    let most_threads = args.serving_threads.iter().copied().max().unwrap_or(1);
    workbook::limits::check_serving_fits(
        "--serving-threads",
        &config,
        graph,
        args.serving_requests,
        most_threads,
    )?;
    let (model, _) = workbook::Model::init(config, args.seed, &chosen.placement)?;
    let requests: Arc<[serving::Request]> =
        serving::mixed_requests(graph, args.serving_requests, args.seed)?.into();
    let runs = serving::sweep(Arc::new(model), requests, &args.serving_threads)
        .context("concurrent serving")?;
    for run in runs {
        if run.mismatches != 0 {
            bail!(
                "{} of {} concurrent answers differ from the sequential ones",
                run.mismatches,
                run.requests
            );
        }
        println!(
            "{}",
            json!({
                "impl": "workbook",
                "bench": "serving",
                "model": kind.name(),
                "dataset": graph.name,
                "device": chosen.name,
                "serving_threads": run.threads,
                "requests": run.requests,
                "seconds": run.seconds,
                "requests_per_second": run.requests_per_second,
                "mismatches": run.mismatches,
            })
        );
    }
    Ok(())
}

/// The scaling figure's title (the sweep's graphs).
const FIGURE_TITLE: &str = "csbm graphs, ~10 edges per node";

fn workbook_series(model: &str, device: &str) -> String {
    format!("{model} (workbook, {device})")
}

fn minibatch_series(model: &str, batch_size: usize, device: &str) -> String {
    format!("{model} mini-batch {batch_size} (workbook, {device})")
}

/// The workbook's runs (`"impl": "workbook"` lines `bench` printed) as figure points: full-batch
/// lines with their memory, mini-batch lines (`"bench": "minibatch"`) with their time only (see
/// the sweep above); other lines (serving) are skipped.
fn workbook_points(path: &std::path::Path) -> Result<Vec<ScalingPoint>> {
    let text = std::fs::read_to_string(path)?;
    let mut points = Vec::new();
    for (k, l) in text
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
    {
        let v: serde_json::Value =
            serde_json::from_str(l).with_context(|| format!("line {} is not JSON", k + 1))?;
        if v["impl"] != "workbook" {
            continue;
        }
        let field = |name: &str| {
            v[name]
                .as_f64()
                .with_context(|| format!("line {}: no number '{name}'", k + 1))
        };
        let model = v["model"]
            .as_str()
            .with_context(|| format!("line {}: no model", k + 1))?;
        let device = v["device"].as_str().unwrap_or("cpu");
        let (series, memory_mb) = match v["bench"].as_str() {
            None => (workbook_series(model, device), v["peak_mem_mb"].as_f64()),
            Some("minibatch") => (
                minibatch_series(model, field("batch_size")? as usize, device),
                None,
            ),
            Some(_) => continue,
        };
        points.push(ScalingPoint {
            series,
            nodes: field("nodes")? as usize,
            edges: field("edges")? as usize,
            epoch_ms: field("epoch_ms")?,
            memory_mb,
        });
    }
    if points.is_empty() {
        bail!("no workbook runs (lines with \"impl\": \"workbook\") in the file");
    }
    Ok(points)
}

/// PyG's runs (`"impl": "pyg"` lines of `scripts/compare.py --raw`) as figure points.
fn pyg_points(path: &std::path::Path) -> Result<Vec<ScalingPoint>> {
    let cap = workbook::input_file::Cap {
        bytes: 64 << 20,
        why: "a file of PyG runs (one short JSON line per run)".into(),
    };
    let text = workbook::input_file::read_to_string(path, &cap)?;
    let mut points = Vec::new();
    for (k, l) in text
        .lines()
        .enumerate()
        .filter(|(_, l)| !l.trim().is_empty())
    {
        let v: serde_json::Value =
            serde_json::from_str(l).with_context(|| format!("line {} is not JSON", k + 1))?;
        // Full-batch lines only: a `"bench": "minibatch"` line (PyG replaying our batches,
        // `compare.py --batch-size`) times compute alone and is no point of this figure.
        if v["impl"] != "pyg" || !v["bench"].is_null() {
            continue;
        }
        let field = |name: &str| {
            v[name]
                .as_f64()
                .with_context(|| format!("line {}: no number '{name}'", k + 1))
        };
        let model = match v["model"].as_str() {
            Some("gcn") => "gcn",
            Some("gatv2") => "gatv2",
            other => bail!("line {}: unknown model {other:?}", k + 1),
        };
        points.push(ScalingPoint {
            series: format!("{model} (PyG, {})", v["device"].as_str().unwrap_or("cpu")),
            nodes: field("nodes")? as usize,
            edges: field("edges")? as usize,
            epoch_ms: field("epoch_ms")?,
            memory_mb: v["peak_mem_mb"].as_f64(),
        });
    }
    if points.is_empty() {
        bail!("no PyG runs (lines with \"impl\": \"pyg\") in the file");
    }
    Ok(points)
}

fn memory_added(r: &BenchReport) -> Option<f64> {
    Some(r.peak_rss_mb? - r.base_rss_mb?)
}

fn line(
    kind: ModelKind,
    graph: &Graph,
    chosen: &Chosen,
    runs: &BenchConfig,
    r: &BenchReport,
) -> serde_json::Value {
    json!({
        "impl": "workbook",
        "model": kind.name(),
        "dataset": graph.name,
        "device": chosen.name,
        "threads": workbook::ops::cpu_threads(),
        "nodes": graph.num_nodes(),
        "edges": graph.num_edges(),
        "warmup": runs.warmup,
        "repeats": runs.repeats,
        "forward_ms": r.forward_ms,
        "epoch_ms": r.epoch_ms,
        "epoch_ms_min": r.epoch_samples_ms.iter().copied().fold(f64::INFINITY, f64::min),
        "peak_rss_mb": r.peak_rss_mb,
        "base_rss_mb": r.base_rss_mb,
        "peak_mem_mb": memory_added(r),
        // freed buffers kept for reuse change time and memory: a measurement says whether it ran so
        "keep_buffers_mb": crate::allocator::kept_buffers_cap() >> 20,
    })
}
