//! Training curves: loss and accuracy per epoch, one line per model.
//!
//! ```
//! use workbook_lessons::figures::{draw_training_curves, Curve};
//! use workbook::train::EpochStats;
//! let h: Vec<EpochStats> = (1..=3).map(|e| EpochStats { epoch: e, loss: 1.0 / e as f32,
//!     train_accuracy: 0.5, val_accuracy: 0.4, test_accuracy: 0.4, step_ms: 1.0 }).collect();
//! let dir = tempfile::tempdir().unwrap();
//! let path = dir.path().join("curves.svg");
//! draw_training_curves(&path, "karate", &[Curve { label: "GCN".into(), history: h }]).unwrap();
//! assert!(std::fs::read_to_string(&path).unwrap().contains("<svg"));
//! ```

use plotters::prelude::*;
use std::path::Path;
use workbook::error::Result;
use workbook::train::EpochStats;

/// One model's history.
pub struct Curve {
    pub label: String,
    pub history: Vec<EpochStats>,
}

const COLOURS: [RGBColor; 4] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
];

/// Draws loss (left) and test accuracy (right) per epoch into an SVG file, atomically.
pub fn draw_training_curves(path: &Path, title: &str, curves: &[Curve]) -> Result<()> {
    let svg = training_curves_svg(path, title, curves)?;
    workbook::atomic_write::write(path, svg.as_bytes())
}

/// The SVG [`draw_training_curves`] writes, for a caller that writes it with other files as
/// one unit ([`workbook::atomic_write::FileSet`]); `path` names it in errors.
pub fn training_curves_svg(path: &Path, title: &str, curves: &[Curve]) -> Result<String> {
    super::render_svg(path, |svg| draw(svg, title, curves))
}

fn draw(svg: &mut String, title: &str, curves: &[Curve]) -> super::DrawResult {
    let root = SVGBackend::with_string(svg, (960, 400)).into_drawing_area();
    root.fill(&WHITE)?;
    let (left, right) = root.split_horizontally(480);
    let epochs = curves
        .iter()
        .map(|c| c.history.len())
        .max()
        .unwrap_or(1)
        .max(2);
    let max_loss = curves
        .iter()
        .flat_map(|c| c.history.iter().map(|s| s.loss))
        .filter(|l| l.is_finite())
        .fold(0.1f32, f32::max);

    let mut loss = ChartBuilder::on(&left)
        .caption(format!("{title}: training loss"), ("sans-serif", 18))
        .margin(12)
        .x_label_area_size(32)
        .y_label_area_size(48)
        .build_cartesian_2d(1..epochs, 0f32..max_loss * 1.05)?;
    loss.configure_mesh()
        .x_desc("epoch")
        .y_desc("cross-entropy")
        .draw()?;

    let mut acc = ChartBuilder::on(&right)
        .caption(
            format!("{title}: accuracy (solid test, dashed train)"),
            ("sans-serif", 18),
        )
        .margin(12)
        .x_label_area_size(32)
        .y_label_area_size(48)
        .build_cartesian_2d(1..epochs, 0f32..1.0f32)?;
    acc.configure_mesh()
        .x_desc("epoch")
        .y_desc("accuracy")
        .draw()?;

    for (k, curve) in curves.iter().enumerate() {
        let colour = COLOURS[k % COLOURS.len()];
        loss.draw_series(LineSeries::new(
            curve.history.iter().map(|s| (s.epoch, s.loss)),
            colour.stroke_width(2),
        ))?
        .label(curve.label.clone())
        .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 16, y)], colour.stroke_width(2)));
        acc.draw_series(LineSeries::new(
            curve.history.iter().map(|s| (s.epoch, s.test_accuracy)),
            colour.stroke_width(2),
        ))?
        .label(curve.label.clone())
        .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 16, y)], colour.stroke_width(2)));
        acc.draw_series(DashedLineSeries::new(
            curve.history.iter().map(|s| (s.epoch, s.train_accuracy)),
            4,
            4,
            colour.stroke_width(1),
        ))?;
    }
    loss.configure_series_labels()
        .border_style(BLACK)
        .background_style(WHITE)
        .draw()?;
    acc.configure_series_labels()
        .position(SeriesLabelPosition::LowerRight)
        .border_style(BLACK)
        .background_style(WHITE)
        .draw()?;
    root.present()?;
    Ok(())
}
