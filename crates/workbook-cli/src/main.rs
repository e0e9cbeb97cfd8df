//! `workbook`: train, run and inspect graph neural networks on the best available device.
//!
//! With no command, trains GCN and GATv2 on the embedded karate club graph and writes a report
//! with training curves (`cargo run --release` at the repository root).

mod allocator;
mod commands;
mod inputs;
mod kept_buffers;
mod mapped_buffers;
mod progress;

use anyhow::Result;
use clap::{Parser, Subcommand};
use workbook::device::{self, DeviceSpec};

#[derive(Parser)]
#[command(name = "workbook", version, about, long_about = None)]
struct Cli {
    /// Device: auto, cpu, cuda, cuda:N, or sim:N (a simulated device: host memory, checked as
    /// a device of its own). Default: WORKBOOK_DEVICE, else auto (CUDA if present, else cpu).
    /// For several devices (data parallelism), `train` and `bench` take --devices instead.
    #[arg(long, global = true, value_parser = parse_device)]
    device: Option<DeviceSpec>,
    /// The memory limit every estimate is checked against before anything large is allocated
    /// (e.g. 512M, 16G, 1.5T). Default: the memory available now. Raise it when you know a run
    /// fits (swap, an estimate on the safe side); lower it to keep a run small.
    #[arg(long, global = true, value_name = "SIZE", value_parser = parse_size)]
    max_memory: Option<u64>,
    /// Accept models and graphs that hold NaN or infinite values (refused by default: they
    /// make predictions NaN). A training run still stops at a loss that is not finite.
    #[arg(long, global = true)]
    allow_non_finite: bool,
    /// An output path that is a symbolic link: write its target (the link stays). By default
    /// such an output is refused, since replacing it would turn the link into a file.
    #[arg(long, global = true)]
    follow_symlinks: bool,
    #[command(subcommand)]
    command: Option<Command>,
}

#[derive(Subcommand)]
enum Command {
    /// Train GCN and GATv2 on karate and write a report (the default command).
    Demo(commands::demo::Args),
    /// Train one model on a dataset and print a JSON summary.
    Train(commands::train::Args),
    /// Run a PyG model (config JSON + safetensors weights) on a graph file.
    Predict(commands::predict::Args),
    /// Write a dataset as a graph file (safetensors: x, edge_index, y, masks).
    Data(commands::data::Args),
    /// Time a model's forward pass and training epoch (JSON; see scripts/compare.sh for PyG).
    // Boxed: its options make it several times the size of the other variants.
    Bench(Box<commands::bench::Args>),
    /// Print every tensor of a checkpoint and/or dataset with its device, dtype and shape.
    Inspect(commands::inspect::Args),
    /// Draw the book's measured figures (training curves, ledger bytes, serving throughput).
    Figures(commands::figures::Args),
    /// Thread safety: the PyG attention race, concurrent serving, training while serving.
    ServeDemo(commands::serve_demo::Args),
    /// Pre-flight a model, then export it as ONNX (opset 18) or as safetensors for PyG.
    Export(commands::export::Args),
    /// Read a PyTorch checkpoint (.pt/.pth state_dict) into safetensors weights and a config;
    /// --map-location as torch.load's.
    Import(commands::import::Args),
}

fn parse_device(s: &str) -> Result<DeviceSpec, String> {
    s.parse()
        .map_err(|e: workbook::WorkbookError| e.to_string())
}

fn parse_size(s: &str) -> Result<u64, String> {
    workbook::limits::parse_bytes(s).map_err(|e| e.to_string())
}

#[global_allocator]
static ALLOCATOR: allocator::HugePageAlloc = allocator::HugePageAlloc;

fn main() -> Result<()> {
    allocator::keep_freed_buffers();
    allocator::configure_huge_pages();
    allocator::configure_kept_buffers();
    let cli = Cli::parse();
    // Process-wide policies, set once before any command runs.
    workbook::limits::set_memory_limit(cli.max_memory);
    workbook::non_finite::set_allowed(cli.allow_non_finite);
    workbook::atomic_write::set_follow_symlinks(cli.follow_symlinks);
    let command = cli.command.unwrap_or(Command::Demo(Default::default()));
    let result = run(command, cli.device);
    for note in workbook::non_finite::take_let_in() {
        eprintln!("warning: {note}");
    }
    result
}

fn run(command: Command, device: Option<DeviceSpec>) -> Result<()> {
    // `--devices` names every device itself (and conflicts with --device): no single device
    // is chosen, so WORKBOOK_DEVICE is not read.
    let command = match command {
        Command::Train(args) if args.distributed => {
            if let Some(d) = device {
                anyhow::bail!("--device {d} with --distributed: each rank's device comes from --rank-device (sim, cpu or cuda; cuda takes cuda:<local rank>), not --device");
            }
            return commands::train_distributed::run(&args);
        }
        Command::Train(args) if args.devices.is_some() => {
            return commands::train_data_parallel::run(&args)
        }
        Command::Bench(args) if args.devices.is_some() => {
            return commands::bench_data_parallel::run(&args)
        }
        // The map location says where the tensors go; no --device is chosen.
        Command::Import(args) => return commands::import::run(args),
        other => other,
    };
    let chosen = device::choose(device)?;
    eprintln!("device: {} ({})", chosen.name, chosen.reason);
    match command {
        Command::Demo(args) => commands::demo::run(args, &chosen),
        Command::Train(args) => commands::train::run(args, &chosen),
        Command::Predict(args) => commands::predict::run(args, &chosen),
        Command::Data(args) => commands::data::run(args, &chosen),
        Command::Bench(args) => commands::bench::run(*args, &chosen),
        Command::Inspect(args) => commands::inspect::run(args, &chosen),
        Command::Figures(args) => commands::figures::run(args, &chosen),
        Command::ServeDemo(args) => commands::serve_demo::run(args, &chosen),
        Command::Export(args) => commands::export::run(args, &chosen),
        Command::Import(args) => commands::import::run(args),
    }
}
