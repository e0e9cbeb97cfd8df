//! The prefetch timeline: when each batch was prepared, copied and computed, drawn from the
//! [`StepTiming`]s of a real epoch, one panel without prefetch and one with it.
//!
//! Each panel has three lanes: preparing batches (the prefetch thread, or without prefetch the
//! loop itself), copying them to the device (`batch.to_device`) and computing the step. Where a
//! prepare bar sits under a compute bar, the host work overlapped the step. A copy to `sim:1` is a
//! `memcpy` and would be too thin to see at the scale of an epoch, so every bar is drawn at least
//! [`MIN_BAR_PX`] wide (the caption under the figure gives the real totals).
//!
//! ```
//! use workbook_lessons::figures::draw_prefetch_timeline;
//! use workbook::train::minibatch::StepTiming;
//! let step = StepTiming { prepare: (0.0, 1.0), prepared_in_background: true, wait: (0.0, 1.0),
//!     copy: (1.0, 1.2), compute: (1.2, 3.0), bytes: 10 };
//! let dir = tempfile::tempdir().unwrap();
//! let path = dir.path().join("timeline.svg");
//! draw_prefetch_timeline(&path, &[("prefetch", &[step][..])]).unwrap();
//! assert!(std::fs::read_to_string(&path).unwrap().contains("<svg"));
//! ```

use plotters::prelude::*;
use std::path::Path;
use workbook::error::{Result, WorkbookError};
use workbook::train::minibatch::StepTiming;

const PREPARE: RGBColor = RGBColor(255, 127, 14);
const COPY: RGBColor = RGBColor(214, 39, 40);
const COMPUTE: RGBColor = RGBColor(31, 119, 180);

/// The narrowest a bar is drawn, in pixels, however short the interval it stands for.
pub const MIN_BAR_PX: f64 = 3.0;

/// Width of the figure in pixels: the book's column, so it is shown at its own size.
const WIDTH: u32 = 720;
/// Pixels left of the plot for the lane names.
const LANE_LABELS: u32 = 90;

/// Draws one panel per `(title, steps)` (e.g. without and with prefetch), atomically.
pub fn draw_prefetch_timeline(path: &Path, panels: &[(&str, &[StepTiming])]) -> Result<()> {
    let finite = panels.iter().flat_map(|(_, s)| s.iter()).all(|s| {
        [s.prepare, s.wait, s.copy, s.compute]
            .iter()
            .all(|(a, b)| a.is_finite() && b.is_finite())
    });
    if panels.is_empty() || !finite {
        return Err(WorkbookError::file(
            path,
            "cannot draw a timeline without steps or with non-finite times",
        ));
    }
    super::write_svg(path, |svg| draw(svg, panels))
}

/// `(a, b)` widened to at least `min` (centred), so that a short interval stays visible.
fn at_least(a: f64, b: f64, min: f64) -> (f64, f64) {
    if b - a >= min {
        (a, b)
    } else {
        let mid = (a + b) / 2.0;
        (mid - min / 2.0, mid + min / 2.0)
    }
}

fn draw(svg: &mut String, panels: &[(&str, &[StepTiming])]) -> super::DrawResult {
    let x_max = panels
        .iter()
        .flat_map(|(_, s)| s.iter())
        .map(|s| s.compute.1.max(s.prepare.1))
        .fold(1e-3, f64::max)
        * 1.02;
    // About 610 px of plot: the width less the lane names and the margins.
    let plot_px = (WIDTH - LANE_LABELS - 20) as f64;
    let min_w = x_max * MIN_BAR_PX / plot_px;
    let panel_h = 200;
    let root = SVGBackend::with_string(svg, (WIDTH, panel_h * panels.len() as u32 + 36))
        .into_drawing_area();
    root.fill(&WHITE)?;
    let (body, legend) = root.split_vertically(panel_h * panels.len() as u32);
    let areas = body.split_evenly((panels.len(), 1));
    let lanes = ["compute", "copy", "prepare"];
    for (area, (title, steps)) in areas.iter().zip(panels) {
        let mut c = ChartBuilder::on(area)
            .caption(*title, ("sans-serif", 16))
            .margin(10)
            .x_label_area_size(36)
            .y_label_area_size(LANE_LABELS)
            // Lanes centred on 0, 1 and 2, so that the axis's labels fall on them.
            .build_cartesian_2d(0.0..x_max, -0.5..2.5)?;
        c.configure_mesh()
            .disable_y_mesh()
            .y_labels(7)
            .y_label_formatter(&|y: &f64| {
                let lane = y.round();
                if (y - lane).abs() < 1e-6 && (0.0..=2.0).contains(&lane) {
                    lanes[lane as usize].to_string()
                } else {
                    String::new()
                }
            })
            .y_label_style(("sans-serif", 14))
            .x_label_style(("sans-serif", 13))
            .x_desc("milliseconds since the epoch started")
            .axis_desc_style(("sans-serif", 14))
            .draw()?;
        let bar = |(a, b): (f64, f64), lane: f64, colour: RGBColor| {
            let (a, b) = at_least(a, b, min_w);
            Rectangle::new([(a, lane - 0.3), (b, lane + 0.3)], colour.filled())
        };
        c.draw_series(steps.iter().map(|s| bar(s.prepare, 2.0, PREPARE)))?;
        c.draw_series(steps.iter().map(|s| bar(s.copy, 1.0, COPY)))?;
        c.draw_series(steps.iter().map(|s| bar(s.compute, 0.0, COMPUTE)))?;
    }
    // One legend for both panels, under them, so that it covers no bar.
    let font = ("sans-serif", 14).into_font();
    let copy = format!("copy (to_device; at least {MIN_BAR_PX} px)");
    let entries = [
        (PREPARE, "prepare (sample, gather)"),
        (COPY, copy.as_str()),
        (COMPUTE, "compute (forward, backward, step)"),
    ];
    let mut x = 12;
    for (colour, label) in entries {
        legend.draw(&Rectangle::new([(x, 12), (x + 14, 24)], colour.filled()))?;
        legend.draw(&Text::new(label, (x + 20, 11), font.clone()))?;
        // About 7 px per character at 14 px.
        x += 20 + label.chars().count() as i32 * 7 + 24;
    }
    root.present()?;
    Ok(())
}
