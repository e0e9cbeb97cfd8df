//! A plain line chart (one line per series, markers on the points) for the book's measured
//! figures: ledger bytes per epoch, serving throughput per thread count.
//!
//! ```
//! use workbook_lessons::figures::{draw_line_chart, LineChart, Series};
//! let chart = LineChart {
//!     title: "requests per second".into(),
//!     x_label: "threads".into(),
//!     y_label: "requests/s".into(),
//!     series: vec![Series { label: "GATv2".into(), points: vec![(1.0, 100.0), (2.0, 180.0)] }],
//! };
//! let dir = tempfile::tempdir().unwrap();
//! let path = dir.path().join("chart.svg");
//! draw_line_chart(&path, &chart).unwrap();
//! assert!(std::fs::read_to_string(&path).unwrap().contains("<svg"));
//! ```

use plotters::prelude::*;
use std::path::Path;
use workbook::error::{Result, WorkbookError};

/// One line: a label and its `(x, y)` points.
#[derive(Clone, Debug)]
pub struct Series {
    pub label: String,
    pub points: Vec<(f64, f64)>,
}

/// A chart: title, axis labels and the lines.
#[derive(Clone, Debug)]
pub struct LineChart {
    pub title: String,
    pub x_label: String,
    pub y_label: String,
    pub series: Vec<Series>,
}

const COLOURS: [RGBColor; 4] = [
    RGBColor(31, 119, 180),
    RGBColor(214, 39, 40),
    RGBColor(44, 160, 44),
    RGBColor(255, 127, 14),
];

/// Draws `chart` into an SVG file, atomically. Axes start at zero.
pub fn draw_line_chart(path: &Path, chart: &LineChart) -> Result<()> {
    let points = chart.series.iter().flat_map(|s| s.points.iter());
    if points
        .clone()
        .any(|(x, y)| !x.is_finite() || !y.is_finite())
    {
        return Err(WorkbookError::file(
            path,
            "cannot draw a figure with non-finite values",
        ));
    }
    super::write_svg(path, |svg| draw(svg, chart))
}

fn draw(svg: &mut String, chart: &LineChart) -> super::DrawResult {
    let all = || chart.series.iter().flat_map(|s| s.points.iter());
    let x_max = all().map(|p| p.0).fold(1.0, f64::max);
    let y_max = all().map(|p| p.1).fold(1.0, f64::max);
    let root = SVGBackend::with_string(svg, (640, 400)).into_drawing_area();
    root.fill(&WHITE)?;
    let mut c = ChartBuilder::on(&root)
        .caption(&chart.title, ("sans-serif", 18))
        .margin(12)
        .x_label_area_size(36)
        .y_label_area_size(64)
        .build_cartesian_2d(0.0..x_max * 1.05, 0.0..y_max * 1.1)?;
    c.configure_mesh()
        .x_desc(chart.x_label.as_str())
        .y_desc(chart.y_label.as_str())
        .draw()?;
    for (k, s) in chart.series.iter().enumerate() {
        let colour = COLOURS[k % COLOURS.len()];
        c.draw_series(LineSeries::new(
            s.points.iter().copied(),
            colour.stroke_width(2),
        ))?
        .label(s.label.clone())
        .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 16, y)], colour.stroke_width(2)));
        c.draw_series(s.points.iter().map(|&p| Circle::new(p, 3, colour.filled())))?;
    }
    c.configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .border_style(BLACK)
        .background_style(WHITE)
        .draw()?;
    root.present()?;
    Ok(())
}
