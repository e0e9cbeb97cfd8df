//! The prefetch timeline: when each batch was prepared, copied and computed, drawn from the
//! [`StepTiming`]s of a real epoch, one panel without prefetch and one with it.
//!
//! Each panel has two lanes: the prefetch thread (or, without prefetch, the loop itself)
//! preparing batches, and the loop copying and computing them. Where a prepare bar sits under
//! a compute bar, the host work overlapped the step.
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
    let mut svg = String::new();
    draw(&mut svg, panels)
        .map_err(|e| WorkbookError::file(path, format!("cannot draw the figure: {e}")))?;
    workbook::atomic_write::write(path, svg.as_bytes())
}

fn draw(
    svg: &mut String,
    panels: &[(&str, &[StepTiming])],
) -> std::result::Result<(), Box<dyn std::error::Error>> {
    let x_max = panels
        .iter()
        .flat_map(|(_, s)| s.iter())
        .map(|s| s.compute.1.max(s.prepare.1))
        .fold(1e-3, f64::max);
    let root =
        SVGBackend::with_string(svg, (720, 180 * panels.len() as u32 + 40)).into_drawing_area();
    root.fill(&WHITE)?;
    let areas = root.split_evenly((panels.len(), 1));
    for (area, (title, steps)) in areas.iter().zip(panels) {
        let mut c = ChartBuilder::on(area)
            .caption(*title, ("sans-serif", 16))
            .margin(10)
            .x_label_area_size(32)
            .y_label_area_size(110)
            .build_cartesian_2d(0.0..x_max * 1.02, 0.0..2.0)?;
        c.configure_mesh()
            .disable_y_mesh()
            .y_labels(2)
            .y_label_formatter(&|y| {
                if *y < 1.0 {
                    "loop: copy+compute".into()
                } else {
                    "prepare (sample)".into()
                }
            })
            .x_desc("milliseconds since the epoch started")
            .draw()?;
        let bar = |(a, b): (f64, f64), lane: f64, colour: RGBColor| {
            Rectangle::new([(a, lane + 0.2), (b, lane + 0.8)], colour.filled())
        };
        c.draw_series(steps.iter().map(|s| bar(s.prepare, 1.0, PREPARE)))?
            .label("prepare")
            .legend(|(x, y)| Rectangle::new([(x, y - 4), (x + 12, y + 4)], PREPARE.filled()));
        c.draw_series(steps.iter().map(|s| bar(s.copy, 0.0, COPY)))?
            .label("copy (to_device)")
            .legend(|(x, y)| Rectangle::new([(x, y - 4), (x + 12, y + 4)], COPY.filled()));
        c.draw_series(steps.iter().map(|s| bar(s.compute, 0.0, COMPUTE)))?
            .label("compute")
            .legend(|(x, y)| Rectangle::new([(x, y - 4), (x + 12, y + 4)], COMPUTE.filled()));
        c.configure_series_labels()
            .position(SeriesLabelPosition::UpperRight)
            .border_style(BLACK)
            .background_style(WHITE)
            .draw()?;
    }
    root.present()?;
    Ok(())
}
