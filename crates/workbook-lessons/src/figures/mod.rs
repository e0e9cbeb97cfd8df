//! Figures drawn by the code with plotters (SVG: no font libraries needed).

pub mod data_parallel;
pub mod graph_drawing;
pub mod line_chart;
pub mod prefetch_timeline;
pub mod rank_times;
pub mod roofline;
pub mod scaling;
pub mod training_curves;

pub use data_parallel::{draw_data_parallel, measure_data_parallel, DataParallelPoint};
pub use graph_drawing::{draw_graph, spring_layout, GraphDrawing};
pub use line_chart::{draw_line_chart, LineChart, Series};
pub use prefetch_timeline::{draw_prefetch_timeline, MIN_BAR_PX};
pub use rank_times::{draw_rank_times, RankRun};
pub use roofline::{draw_roofline, roofline_kernels, RooflineKernel};
pub use scaling::{draw_scaling, ScalingPoint};
pub use training_curves::{draw_training_curves, training_curves_svg, Curve};

use std::path::Path;
use workbook::{Result, WorkbookError};

/// What the drawing code of a figure returns: plotters' errors come boxed.
type DrawResult = std::result::Result<(), Box<dyn std::error::Error>>;

/// Runs `draw` on an empty SVG string and returns the drawing; a drawing error names `path`, the
/// file the figure is for.
fn render_svg(path: &Path, draw: impl FnOnce(&mut String) -> DrawResult) -> Result<String> {
    let mut svg = String::new();
    draw(&mut svg)
        .map_err(|e| WorkbookError::file(path, format!("cannot draw the figure: {e}")))?;
    Ok(svg)
}

/// [`render_svg`], then writes the drawing to `path` atomically.
fn write_svg(path: &Path, draw: impl FnOnce(&mut String) -> DrawResult) -> Result<()> {
    let svg = render_svg(path, draw)?;
    workbook::atomic_write::write(path, svg.as_bytes())
}
