//! `workbook serve-demo`: the thread-safety chapter in one command.
//!
//! 1. The PyG `_alpha` race (issue 8741), forced with channels in two orders: the anti-pattern
//!    hands thread A thread B's attention in one, and makes a thread's `assert alpha is not
//!    None` fail (PyG's `AssertionError`, reported as a value) in both; the stateless
//!    `GatV2Conv` gives every thread its own attention in both.
//! 2. Serving: N threads share one `Arc<Model>` (PyG's example GATv2) and answer the same
//!    requests; every answer is compared bit for bit with the sequential one, and throughput is
//!    reported per thread count.
//! 3. Training while serving: a gradient step paused half-way shows readers of the live `Var`s a
//!    model mixing two steps; readers of the snapshot server never are. Then real Adam training
//!    with concurrent readers, every read tagged with its step.
//!
//! Exits with an error if any check fails (a mismatch, a race in the stateless layer, a mixed
//! snapshot), so CI and the tests can rely on it.

use anyhow::{bail, Context, Result};
use serde_json::json;
use std::path::PathBuf;
use std::sync::Arc;
use workbook::device::Chosen;
use workbook::train::TrainConfig;
use workbook::{Graph, Layer, Model, ModelConfig};
use workbook_lessons::threads::serving::{self, Request, ServingRun};
use workbook_lessons::threads::snapshot::{self, ServeWhileTraining, TornReadDemo};
use workbook_lessons::threads::{race_demo, RaceDemo};

#[derive(clap::Args)]
pub struct Args {
    /// Thread counts to serve with, separated by commas (one run each, e.g. 8 or 1,2,4,8).
    #[arg(long, value_delimiter = ',', default_value = "1,2,4,8")]
    threads: Vec<usize>,
    /// Requests per run (default: 1000 on karate, 50 on larger graphs).
    #[arg(long)]
    requests: Option<usize>,
    /// karate, cora, citeseer or csbm:<nodes>.
    #[arg(long, default_value = "karate")]
    dataset: String,
    /// Folder holding all eight Planetoid ind.<name>.* files of cora or citeseer (an error names
    /// any missing). Without it: WORKBOOK_DATA_DIR or ~/.cache/gnn-workbook/planetoid, where
    /// Cora falls back to its embedded copy and CiteSeer is downloaded.
    #[arg(long)]
    data_dir: Option<PathBuf>,
    /// Adam steps in the training-while-serving run.
    #[arg(long, default_value_t = 20)]
    steps: usize,
    /// Seed for the model and the requests.
    #[arg(long, default_value_t = 0)]
    seed: u64,
    /// Print one JSON object instead of text.
    #[arg(long)]
    json: bool,
}

pub fn run(args: Args, chosen: &Chosen) -> Result<()> {
    if args.threads.is_empty() || args.threads.contains(&0) {
        bail!("--threads takes thread counts of at least 1, e.g. --threads 1,2,4,8");
    }
    if args.steps == 0 {
        bail!("--steps must be at least 1");
    }
    use workbook::limits::{check_count, check_threads};
    for &t in &args.threads {
        check_threads("--threads", t)?;
    }
    check_count("--steps", args.steps, 1)?;
    if let Some(r) = args.requests {
        check_count("--requests", r, 1)?;
    }
    let graph =
        crate::inputs::load_dataset(&args.dataset, args.data_dir.as_deref(), &chosen.placement)?;
    let requests = args
        .requests
        .unwrap_or(if graph.num_nodes() <= 100 { 1000 } else { 50 });
    if requests == 0 {
        bail!("--requests must be at least 1");
    }
    let config = ModelConfig::gatv2(graph.num_features(), 8, 8, graph.num_classes());
    let most_threads = args.threads.iter().copied().max().unwrap_or(1);
    workbook::limits::check_serving_fits("serve-demo", &config, &graph, requests, most_threads)?;
    workbook::limits::check_training_fits("serve-demo's training while serving", &config, &graph)?;
    let (model, _vars) = Model::init(config.clone(), args.seed, &chosen.placement)
        .context("initialising the GATv2 model")?;

    let race = race(&model, &graph, args.seed)?;
    let reqs: Arc<[Request]> = serving::mixed_requests(&graph, requests, args.seed)?.into();
    let runs = serving::sweep(Arc::new(model), reqs, &args.threads).context("serving")?;
    let torn = snapshot::torn_read_demo(&graph, config.clone(), args.seed, 0.05)
        .context("the torn-read demonstration")?;
    let train = TrainConfig {
        epochs: args.steps,
        seed: args.seed,
        ..TrainConfig::gatv2()
    };
    let live = snapshot::serve_while_training(&graph, config, &train, 2, 10)
        .context("training while serving")?;

    if args.json {
        let summary = json!({
            "dataset": graph.name,
            "device": chosen.name,
            "cores": cores(),
            "race_demo": race,
            "serving": runs,
            "torn_read_demo": torn,
            "serve_while_training": live,
        });
        println!("{summary}");
    } else {
        print_text(&graph, &chosen.name, &race, &runs, &torn, &live);
    }
    check(&race, &runs, &torn, &live)
}

/// The race demo on the model's first GATv2 layer: the whole graph against a copy with 80% of
/// its edges (different edges, so different attention).
fn race(model: &Model, graph: &Graph, seed: u64) -> Result<RaceDemo> {
    let Some(Layer::GatV2(conv)) = model.layers().first() else {
        bail!("the race demo needs a model whose first layer is GATv2");
    };
    let pair = serving::mixed_requests(graph, 3, seed)?;
    race_demo::run(conv, &pair[0], &pair[2]).context("the race demo")
}

fn cores() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

fn print_text(
    graph: &Graph,
    device: &str,
    race: &RaceDemo,
    runs: &[ServingRun],
    torn: &TornReadDemo,
    live: &ServeWhileTraining,
) {
    println!("{race}\n");
    let requests = runs.first().map_or(0, |r| r.requests);
    println!(
        "serving: N threads share one GATv2 model (8 heads x 8 hidden) through Arc; {requests} requests on {} \
         (whole graph, node subsets, copies with 90/80/70% of the edges); device {device}, {} CPU core(s)",
        graph.name,
        cores(),
    );
    println!("  threads  requests  seconds  requests/s  vs 1st row  mismatches vs sequential");
    let base = runs.first().map_or(1.0, |r| r.requests_per_second);
    for r in runs {
        println!(
            "  {:>7}  {:>8}  {:>7.3}  {:>10.0}  {:>9.2}x  {}",
            r.threads,
            r.requests,
            r.seconds,
            r.requests_per_second,
            r.requests_per_second / base,
            r.mismatches
        );
    }
    println!(
        "  (the speed-up is bounded by the cores, and by kernels that already use several cores per request)\n"
    );
    println!("{torn}\n");
    println!("training while serving (real Adam, snapshot server): {live}");
}

/// Fails the command if any lesson did not come out as it must.
fn check(
    race: &RaceDemo,
    runs: &[ServingRun],
    torn: &TornReadDemo,
    live: &ServeWhileTraining,
) -> Result<()> {
    if !race.stateless_always_correct() {
        bail!("the stateless GatV2Conv returned another thread's attention, or none");
    }
    if !race.anti_pattern_shows_both_symptoms() {
        bail!("the race demo did not reproduce both symptoms of the race with the anti-pattern");
    }
    if let Some(r) = runs.iter().find(|r| r.mismatches > 0) {
        bail!(
            "{} of {} concurrent answers with {} threads differ from the sequential ones",
            r.mismatches,
            r.requests,
            r.threads
        );
    }
    if !torn.snapshots_consistent() {
        bail!("a snapshot read mixed two optimiser steps");
    }
    if live.mixed_reads > 0 || live.inconsistent_reads > 0 {
        bail!("the snapshot server served a mixed or mis-tagged model: {live}");
    }
    Ok(())
}
