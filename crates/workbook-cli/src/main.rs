//! `workbook`: train, run and inspect graph neural networks on the best available device.
//!
//! With no command, trains GCN and GATv2 on the embedded karate club graph and writes a report
//! with training curves (`cargo run --release` at the repository root).

mod commands;
mod progress;

use anyhow::Result;
use clap::{Parser, Subcommand};
use workbook::device::{self, DeviceSpec};

#[derive(Parser)]
#[command(name = "workbook", version, about, long_about = None)]
struct Cli {
    /// Device: auto, cpu, cuda or cuda:N. Default: WORKBOOK_DEVICE, else auto.
    #[arg(long, global = true, value_parser = parse_device)]
    device: Option<DeviceSpec>,
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
}

fn parse_device(s: &str) -> Result<DeviceSpec, String> {
    s.parse()
        .map_err(|e: workbook::WorkbookError| e.to_string())
}

fn main() -> Result<()> {
    let cli = Cli::parse();
    let chosen = device::choose(cli.device)?;
    eprintln!("device: {} ({})", chosen.name, chosen.reason);
    match cli.command.unwrap_or(Command::Demo(Default::default())) {
        Command::Demo(args) => commands::demo::run(args, &chosen),
        Command::Train(args) => commands::train::run(args, &chosen),
        Command::Predict(args) => commands::predict::run(args, &chosen),
        Command::Data(args) => commands::data::run(args, &chosen),
    }
}
