//! Data parallelism on simulated devices: bytes copied per step by kind (batch parts, gradient
//! reduce, parameter broadcast) and time per step, for 1, 2, ... devices, measured from real
//! [`DataParallelTrainer`] epochs and the transfer ledger.
//!
//! On `sim:N` every device shares the host's cores, so the time shows this library's overheads
//! (one replica's forward and backward after another, the copies), not a speed-up.
//!
//! ```
//! use workbook_lessons::figures::{draw_data_parallel, DataParallelPoint};
//! let p = |devices: usize, ms: f64| DataParallelPoint {
//!     devices, steps: 3, batch_bytes: 1e6, reduce_bytes: 9e4 * (devices - 1) as f64,
//!     broadcast_bytes: 9e4 * (devices - 1) as f64, step_ms: ms,
//! };
//! let dir = tempfile::tempdir().unwrap();
//! let path = dir.path().join("data_parallel.svg");
//! draw_data_parallel(&path, "GCN on Cora", &[p(1, 10.0), p(2, 18.0)]).unwrap();
//! assert!(std::fs::read_to_string(&path).unwrap().contains("<svg"));
//! ```

use plotters::prelude::*;
use plotters::style::text_anchor::{HPos, Pos, VPos};
use std::path::Path;
use workbook::error::{Result, WorkbookError};
use workbook::ledger::Ledger;
use workbook::parallel::{DataParallelTrainer, StepBytes};
use workbook::train::minibatch::{Eval, MiniBatchConfig};
use workbook::train::TrainConfig;
use workbook::{Graph, ModelConfig, Placement};

const BATCH: RGBColor = RGBColor(31, 119, 180);
const REDUCE: RGBColor = RGBColor(214, 39, 40);
const BROADCAST: RGBColor = RGBColor(255, 127, 14);
const TIME: RGBColor = RGBColor(44, 160, 44);

/// Reads one kind of bytes per step from a measurement.
type Bytes = fn(&DataParallelPoint) -> f64;

/// What one run over `devices` simulated devices measured, per optimiser step (averaged over
/// the measured epochs).
#[derive(Clone, Debug, PartialEq)]
pub struct DataParallelPoint {
    /// Number of devices (`sim:1` .. `sim:N`).
    pub devices: usize,
    /// Optimiser steps measured.
    pub steps: usize,
    /// Bytes of batch parts (and the structures derived from their edges) copied per step.
    pub batch_bytes: f64,
    /// Gradient bytes copied to the first device per step (`reduce grad[...]`).
    pub reduce_bytes: f64,
    /// Parameter bytes copied from the first device per step (`broadcast ...`).
    pub broadcast_bytes: f64,
    /// Wall time per step (sampling, copies, every replica's forward and backward, reduce,
    /// optimiser, broadcast), in milliseconds.
    pub step_ms: f64,
}

/// Trains GCN on `graph` data-parallel over `sim:1 ..= sim:n` for each `n` of `devices`, with a
/// global batch of `global_batch` seeds (`[10, 10]` neighbours), and measures epochs 2 to
/// `1 + epochs` (the first is warm-up). `global_batch` must split evenly over every `n`.
pub fn measure_data_parallel(
    graph: &Graph,
    devices: &[usize],
    global_batch: usize,
    epochs: usize,
) -> Result<Vec<DataParallelPoint>> {
    if epochs == 0 {
        return Err(WorkbookError::InvalidConfig(
            "measure at least one epoch (epochs >= 1)".into(),
        ));
    }
    devices
        .iter()
        .map(|&n| {
            let ledger = Ledger::new();
            let placements: Vec<Placement> = (1..=n)
                .map(|k| Placement::sim(k).with_ledger(&ledger))
                .collect();
            let config = ModelConfig::gcn(graph.num_features(), 16, graph.num_classes());
            // No accuracy is drawn, and evaluation runs after the timed steps and copies
            // nothing in an epoch phase: skipping it changes no number, only the wait (a
            // full-graph forward pass per epoch, slow in an unoptimised notebook; issue 48).
            let settings = MiniBatchConfig {
                eval: Eval::Skip,
                ..MiniBatchConfig::new(&[10, 10], global_batch)
            };
            let mut t = DataParallelTrainer::new(
                config,
                graph,
                &TrainConfig::gcn(),
                settings,
                &placements,
            )?;
            t.epoch()?; // warm-up
            ledger.clear();
            let (mut steps, mut ms) = (0usize, 0f64);
            for _ in 0..epochs {
                let e = t.epoch()?;
                steps += e.steps;
                ms += e.stats.step_ms;
            }
            let bytes = StepBytes::from_ledger(&ledger, steps);
            Ok(DataParallelPoint {
                devices: n,
                steps,
                batch_bytes: bytes.batch,
                reduce_bytes: bytes.reduce,
                broadcast_bytes: bytes.broadcast,
                step_ms: ms / steps.max(1) as f64,
            })
        })
        .collect()
}

/// Draws the bytes copied per step against the number of devices, into an SVG file,
/// atomically: the batch parts (MB, top left), the gradient reduce and the parameter broadcast
/// (kB, bottom left, on a scale of their own: next to the batch parts they would be slivers a
/// pixel or two high) and the time per step (right). Every bar carries its value.
pub fn draw_data_parallel(path: &Path, title: &str, points: &[DataParallelPoint]) -> Result<()> {
    let finite = points.iter().all(|p| {
        [p.batch_bytes, p.reduce_bytes, p.broadcast_bytes, p.step_ms]
            .iter()
            .all(|v| v.is_finite() && *v >= 0.0)
    });
    if points.is_empty() || !finite {
        return Err(WorkbookError::file(
            path,
            "cannot draw the figure without measurements or with negative or non-finite ones",
        ));
    }
    super::write_svg(path, |svg| draw(svg, title, points))
}

fn draw(svg: &mut String, title: &str, points: &[DataParallelPoint]) -> super::DrawResult {
    let n_max = points.iter().map(|p| p.devices).max().unwrap_or(1) as f64;
    let root = SVGBackend::with_string(svg, (900, 560)).into_drawing_area();
    root.fill(&WHITE)?;
    let root = root.titled(title, ("sans-serif", 18))?;
    let (left, right) = root.split_horizontally(470);
    let (upper, lower) = left.split_vertically(265);
    let label =
        TextStyle::from(("sans-serif", 12).into_font()).pos(Pos::new(HPos::Center, VPos::Bottom));

    // Batch parts, in MB.
    let mb = |b: f64| b / 1e6;
    let top = points.iter().map(|p| mb(p.batch_bytes)).fold(0.1, f64::max);
    let mut c = ChartBuilder::on(&upper)
        .caption("batch parts: MB copied per step", ("sans-serif", 15))
        .margin(10)
        .x_label_area_size(36)
        .y_label_area_size(48)
        .build_cartesian_2d(0.4..n_max + 0.6, 0.0..top * 1.25)?;
    c.configure_mesh()
        .disable_x_mesh()
        .x_labels(points.len())
        .x_label_formatter(&|x| format!("{x:.0}"))
        .x_desc("devices (sim:1 .. sim:N)")
        .y_desc("MB")
        .draw()?;
    c.draw_series(points.iter().map(|p| {
        let x = p.devices as f64;
        Rectangle::new(
            [(x - 0.3, 0.0), (x + 0.3, mb(p.batch_bytes))],
            BATCH.filled(),
        )
    }))?;
    c.draw_series(points.iter().map(|p| {
        let at = (p.devices as f64, mb(p.batch_bytes) + top * 0.02);
        Text::new(format!("{:.2}", mb(p.batch_bytes)), at, label.clone())
    }))?;

    // Gradient reduce and parameter broadcast, side by side, in kB: a scale of their own.
    let kb = |b: f64| b / 1e3;
    let kinds: [(&str, RGBColor, Bytes, f64); 2] = [
        ("gradient reduce", REDUCE, |p| p.reduce_bytes, -0.17),
        (
            "parameter broadcast",
            BROADCAST,
            |p| p.broadcast_bytes,
            0.17,
        ),
    ];
    let top = points
        .iter()
        .map(|p| kb(p.reduce_bytes.max(p.broadcast_bytes)))
        .fold(1.0, f64::max);
    let mut g = ChartBuilder::on(&lower)
        .caption(
            "gradient reduce, parameter broadcast: kB per step",
            ("sans-serif", 15),
        )
        .margin(10)
        .x_label_area_size(36)
        .y_label_area_size(48)
        .build_cartesian_2d(0.4..n_max + 0.6, 0.0..top * 1.45)?;
    g.configure_mesh()
        .disable_x_mesh()
        .x_labels(points.len())
        .x_label_formatter(&|x| format!("{x:.0}"))
        .x_desc("devices (sim:1 .. sim:N)")
        .y_desc("kB")
        .draw()?;
    for (name, colour, value, offset) in kinds {
        g.draw_series(points.iter().map(|p| {
            let x = p.devices as f64 + offset;
            Rectangle::new([(x - 0.15, 0.0), (x + 0.15, kb(value(p)))], colour.filled())
        }))?
        .label(name)
        .legend(move |(x, y)| Rectangle::new([(x, y - 4), (x + 12, y + 4)], colour.filled()));
        // The value on every bar, 0 included: one device copies nothing, and the figure says so.
        g.draw_series(points.iter().map(|p| {
            let at = (p.devices as f64 + offset, kb(value(p)) + top * 0.03);
            Text::new(format!("{:.0}", kb(value(p))), at, label.clone())
        }))?;
    }
    g.configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .border_style(BLACK)
        .background_style(WHITE)
        .draw()?;

    let slowest = points.iter().map(|p| p.step_ms).fold(0.1, f64::max);
    let mut t = ChartBuilder::on(&right)
        .caption("time per step (shared host cores)", ("sans-serif", 15))
        .margin(10)
        .x_label_area_size(36)
        .y_label_area_size(48)
        .build_cartesian_2d(0.6..n_max + 0.4, 0.0..slowest * 1.15)?;
    t.configure_mesh()
        .x_labels(points.len())
        .x_label_formatter(&|x| format!("{x:.0}"))
        .x_desc("devices (sim:1 .. sim:N)")
        .y_desc("ms")
        .draw()?;
    let line: Vec<(f64, f64)> = points
        .iter()
        .map(|p| (p.devices as f64, p.step_ms))
        .collect();
    t.draw_series(LineSeries::new(line.clone(), TIME.stroke_width(2)))?;
    t.draw_series(line.iter().map(|&p| Circle::new(p, 4, TIME.filled())))?;
    root.present()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Heights of the bars (filled rectangles) of one colour, in pixels.
    fn bar_heights(svg: &str, colour: RGBColor) -> Vec<f64> {
        let fill = format!("fill=\"#{:02X}{:02X}{:02X}\"", colour.0, colour.1, colour.2);
        svg.lines()
            .filter(|l| l.starts_with("<rect") && l.contains(&fill))
            .filter_map(|l| {
                let h = l.split(" height=\"").nth(1)?.split('"').next()?;
                h.parse().ok()
            })
            .collect()
    }

    #[test]
    fn reduce_and_broadcast_bars_are_visible_next_to_much_bigger_batches() {
        // The proportions of the book's run: 5 to 10 MB of batch parts, one model's
        // 92,252 bytes of gradients and as many of parameters per replica after the first.
        let points: Vec<DataParallelPoint> = (1..=4)
            .map(|n| DataParallelPoint {
                devices: n,
                steps: 6,
                batch_bytes: 4e6 + 1.5e6 * n as f64,
                reduce_bytes: 46_126.0 * (n - 1) as f64,
                broadcast_bytes: 92_252.0 * (n - 1) as f64,
                step_ms: 10.0,
            })
            .collect();
        let mut svg = String::new();
        draw(&mut svg, "test", &points).unwrap();
        for colour in [REDUCE, BROADCAST] {
            let heights = bar_heights(&svg, colour);
            // one bar per point (the legend's swatch is 8 px high)
            let bars: Vec<f64> = heights.into_iter().filter(|&h| h != 8.0).collect();
            assert_eq!(bars.len(), 4, "{svg}");
            assert_eq!(bars[0], 0.0, "one device copies nothing");
            // the smallest non-zero bar is plainly visible, not the pixel or two it was
            // when the bars were stacked on the batch parts' MB scale
            assert!(bars[1] >= 15.0, "bar heights {bars:?}");
            assert!(bars[3] > bars[2] && bars[2] > bars[1], "{bars:?}");
        }
        for value in ["92", "277", "138", "0"] {
            assert!(
                svg.contains(&format!(">\n{value}\n</text>")),
                "no label {value}"
            );
        }
    }
}
