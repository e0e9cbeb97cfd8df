//! How epoch time and memory grow with graph size: one log-log line per series.
//!
//! Fed by `workbook bench --sweep` (see the README's Performance section); a series is one model
//! in one implementation, e.g. "GCN (workbook)" or "GATv2 (PyG)".
//!
//! ```
//! use workbook_lessons::figures::{draw_scaling, ScalingPoint};
//! let p = |nodes: usize, ms: f64| ScalingPoint {
//!     series: "GCN".into(), nodes, edges: 10 * nodes, epoch_ms: ms, memory_mb: Some(ms),
//! };
//! let dir = tempfile::tempdir().unwrap();
//! let path = dir.path().join("scaling.svg");
//! draw_scaling(&path, "csbm", &[p(1_000, 1.0), p(10_000, 9.0)]).unwrap();
//! assert!(std::fs::read_to_string(&path).unwrap().contains("<svg"));
//! ```

use plotters::prelude::*;
use std::path::Path;
use workbook::error::{Result, WorkbookError};

/// One measurement.
#[derive(Clone, Debug, PartialEq)]
pub struct ScalingPoint {
    pub series: String,
    pub nodes: usize,
    pub edges: usize,
    pub epoch_ms: f64,
    /// Memory the run added (peak resident set minus the resident set before the model), MiB.
    pub memory_mb: Option<f64>,
}

/// Reads one quantity of a measurement.
type Metric = fn(&ScalingPoint) -> Option<f64>;

const COLOURS: [RGBColor; 6] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
];

/// Draws epoch time (left) and memory (right) against node count, log-log, into an SVG file.
pub fn draw_scaling(path: &Path, title: &str, points: &[ScalingPoint]) -> Result<()> {
    if points.is_empty() {
        return Err(WorkbookError::InvalidConfig(
            "draw_scaling needs at least one measurement".into(),
        ));
    }
    let mut svg = String::new();
    draw(&mut svg, title, points)
        .map_err(|e| WorkbookError::file(path, format!("cannot draw the figure: {e}")))?;
    workbook::atomic_write::write(path, svg.as_bytes())
}

fn series_names(points: &[ScalingPoint]) -> Vec<String> {
    let mut names: Vec<String> = Vec::new();
    for p in points {
        if !names.contains(&p.series) {
            names.push(p.series.clone());
        }
    }
    names
}

/// Powers of ten that enclose `values` (positive ones only).
fn log_range(values: impl Iterator<Item = f64>) -> std::ops::Range<f64> {
    let (lo, hi) = values
        .filter(|v| v.is_finite() && *v > 0.0)
        .fold((f64::MAX, f64::MIN), |(lo, hi), v| (lo.min(v), hi.max(v)));
    if lo > hi {
        return 1.0..10.0;
    }
    10f64.powf(lo.log10().floor())..10f64.powf(hi.log10().ceil().max(lo.log10().floor() + 1.0))
}

fn draw(
    svg: &mut String,
    title: &str,
    points: &[ScalingPoint],
) -> std::result::Result<(), Box<dyn std::error::Error>> {
    let root = SVGBackend::with_string(svg, (960, 420)).into_drawing_area();
    root.fill(&WHITE)?;
    let (left, right) = root.split_horizontally(480);
    let names = series_names(points);
    let x_range = log_range(points.iter().map(|p| p.nodes as f64));
    let panels: [(_, &str, Metric); 2] = [
        (&left, "ms per training epoch", |p| Some(p.epoch_ms)),
        (&right, "memory added (MiB)", |p| p.memory_mb),
    ];
    for (area, label, value) in panels {
        let y_range = log_range(points.iter().filter_map(value));
        let mut chart = ChartBuilder::on(area)
            .caption(format!("{title}: {label}"), ("sans-serif", 18))
            .margin(10)
            .x_label_area_size(35)
            .y_label_area_size(55)
            .build_cartesian_2d(x_range.clone().log_scale(), y_range.log_scale())?;
        chart
            .configure_mesh()
            .x_desc("nodes")
            .y_desc(label)
            .x_label_formatter(&|v| format!("{v:.0e}"))
            .draw()?;
        for (k, name) in names.iter().enumerate() {
            let colour = COLOURS[k % COLOURS.len()];
            let mut line: Vec<(f64, f64)> = points
                .iter()
                .filter(|p| &p.series == name)
                .filter_map(|p| value(p).filter(|v| *v > 0.0).map(|v| (p.nodes as f64, v)))
                .collect();
            line.sort_by(|a, b| a.0.total_cmp(&b.0));
            chart
                .draw_series(LineSeries::new(line.clone(), colour.stroke_width(2)))?
                .label(name.clone())
                .legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 18, y)], colour.stroke_width(2))
                });
            chart.draw_series(line.into_iter().map(|p| Circle::new(p, 3, colour.filled())))?;
        }
        chart
            .configure_series_labels()
            .position(SeriesLabelPosition::UpperLeft)
            .background_style(WHITE.mix(0.8))
            .border_style(BLACK)
            .draw()?;
    }
    root.present()?;
    Ok(())
}
