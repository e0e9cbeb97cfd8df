//! How epoch time and memory grow with graph size: one log-log line per series.
//!
//! Fed by `workbook bench --sweep` (see docs/performance.md); a series is one model
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
    super::write_svg(path, |svg| draw(svg, title, points))
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

/// `1k`, `10k`, `100k`, `1M` (and `1`, `10`, `100`) at powers of ten; nothing elsewhere, so a
/// log axis is labelled only where a reader can read it at a glance.
pub(crate) fn power_of_ten_label(v: f64) -> String {
    if !(v.is_finite() && v > 0.0) {
        return String::new();
    }
    let exp = v.log10().round();
    if (v.log10() - exp).abs() > 1e-6 {
        return String::new();
    }
    let exp = exp as i32;
    match exp {
        e if e < 0 => format!("{v}"),
        0..=2 => format!("{}", 10i64.pow(exp as u32)),
        3..=5 => format!("{}k", 10i64.pow(exp as u32 - 3)),
        6..=8 => format!("{}M", 10i64.pow(exp as u32 - 6)),
        _ => format!("{}G", 10i64.pow(exp as u32 - 9)),
    }
}

/// Width of the figure: the book's column, so it is shown at its own size.
const WIDTH: u32 = 720;
/// Height of each of the two panels.
const PANEL: u32 = 330;
/// Height of the legend under the panels (two rows of series).
const LEGEND: u32 = 56;

fn draw(svg: &mut String, title: &str, points: &[ScalingPoint]) -> super::DrawResult {
    // The panels one above the other at the column's width, and one legend under both, outside
    // the plots, so that it covers no line and is read at 14 px.
    let root = SVGBackend::with_string(svg, (WIDTH, 2 * PANEL + LEGEND)).into_drawing_area();
    root.fill(&WHITE)?;
    let (plots, legend) = root.split_vertically(2 * PANEL);
    let (top, bottom) = plots.split_vertically(PANEL);
    let names = series_names(points);
    let x_range = log_range(points.iter().map(|p| p.nodes as f64));
    let panels: [(_, &str, Metric); 2] = [
        (&top, "ms per training epoch", |p| Some(p.epoch_ms)),
        (&bottom, "memory added (MiB)", |p| p.memory_mb),
    ];
    for (area, label, value) in panels {
        let y_range = log_range(points.iter().filter_map(value));
        let mut chart = ChartBuilder::on(area)
            .caption(format!("{title}: {label}"), ("sans-serif", 17))
            .margin(10)
            .x_label_area_size(40)
            .y_label_area_size(70)
            .build_cartesian_2d(x_range.clone().log_scale(), y_range.log_scale())?;
        chart
            .configure_mesh()
            .x_desc("nodes")
            .y_desc(label)
            .x_label_formatter(&|v| power_of_ten_label(*v))
            .y_label_formatter(&|v| power_of_ten_label(*v))
            .label_style(("sans-serif", 14))
            .axis_desc_style(("sans-serif", 14))
            .draw()?;
        for (k, name) in names.iter().enumerate() {
            let colour = COLOURS[k % COLOURS.len()];
            let mut line: Vec<(f64, f64)> = points
                .iter()
                .filter(|p| &p.series == name)
                .filter_map(|p| value(p).filter(|v| *v > 0.0).map(|v| (p.nodes as f64, v)))
                .collect();
            line.sort_by(|a, b| a.0.total_cmp(&b.0));
            chart.draw_series(LineSeries::new(line.clone(), colour.stroke_width(2)))?;
            chart.draw_series(line.into_iter().map(|p| Circle::new(p, 4, colour.filled())))?;
        }
    }
    let font = ("sans-serif", 14).into_font();
    let per_row = names.len().div_ceil(2).max(1);
    let column = (WIDTH as i32 - 20) / per_row as i32;
    for (k, name) in names.iter().enumerate() {
        let colour = COLOURS[k % COLOURS.len()];
        let (row, col) = (k / per_row, k % per_row);
        let (x, y) = (10 + col as i32 * column, 8 + row as i32 * 24);
        legend.draw(&PathElement::new(
            vec![(x, y + 8), (x + 24, y + 8)],
            colour.stroke_width(3),
        ))?;
        legend.draw(&Circle::new((x + 12, y + 8), 4, colour.filled()))?;
        legend.draw(&Text::new(name.clone(), (x + 30, y), font.clone()))?;
    }
    root.present()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::power_of_ten_label;

    #[test]
    fn powers_of_ten_are_labelled_with_a_suffix_and_nothing_else_is() {
        let labels: Vec<String> = [1.0, 10.0, 100.0, 1e3, 1e4, 1e5, 1e6, 1e7, 2e3, 5e5]
            .iter()
            .map(|&v| power_of_ten_label(v))
            .collect();
        assert_eq!(
            labels,
            ["1", "10", "100", "1k", "10k", "100k", "1M", "10M", "", ""]
        );
        assert_eq!(power_of_ten_label(0.0), "");
        assert_eq!(power_of_ten_label(f64::NAN), "");
    }
}
