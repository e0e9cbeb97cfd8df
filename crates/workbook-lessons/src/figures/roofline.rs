//! The aggregation against memory's two limits: `csr_spmm`'s measured time on each graph beside
//! the time its bytes would take at the memory's bandwidth and the time the cache lines it must
//! fetch from random places (its gathered rows, and edge weights found at random) would take at
//! the best random-read rate (the latency limit), from the JSON lines of
//! `workbook bench --roofline` (`"roofline": "csr_spmm"`, fields `ms`, `bound_ms`,
//! `latency_bound_ms`).
//!
//! One group of bars per graph, in the order recorded (the same graph with shuffled ids, then
//! renumbered, then a random graph): the reader sees the measured bar come down to the latency
//! line when the order recovers locality, and stay there on a random graph.
//!
//! ```
//! use workbook_lessons::figures::{draw_roofline, RooflineKernel};
//! let k = |dataset: &str, ms: f64| RooflineKernel {
//!     dataset: dataset.into(), heads: 1, channels: 16, ms,
//!     bound_ms: 8.0, latency_bound_ms: Some(120.0),
//! };
//! let dir = tempfile::tempdir().unwrap();
//! let path = dir.path().join("roofline.svg");
//! draw_roofline(&path, "csr_spmm", &[k("knn:1000000", 300.0), k("knn:1000000@rcm", 40.0)]).unwrap();
//! assert!(std::fs::read_to_string(&path).unwrap().contains("knn:1000000@rcm"));
//! ```

use plotters::prelude::*;
use std::path::Path;
use workbook::error::{Result, WorkbookError};

const MEASURED: RGBColor = RGBColor(31, 119, 180);
const LATENCY: RGBColor = RGBColor(214, 39, 40);
const BANDWIDTH: RGBColor = RGBColor(44, 160, 44);

/// One `csr_spmm` measurement of `bench --roofline` (other fields are ignored).
#[derive(Clone, Debug, PartialEq, serde::Deserialize)]
pub struct RooflineKernel {
    /// The graph (`knn:1000000`, `knn:1000000@rcm`, `csbm:1000000`).
    pub dataset: String,
    /// Heads and channels per head: the width of the rows gathered.
    pub heads: usize,
    /// Channels per head.
    pub channels: usize,
    /// Measured milliseconds (median).
    pub ms: f64,
    /// Milliseconds at the memory's bandwidth: the bandwidth limit.
    pub bound_ms: f64,
    /// Milliseconds for the random cache lines the kernel must fetch at the best random-read
    /// rate: the latency limit.
    pub latency_bound_ms: Option<f64>,
}

/// The `csr_spmm` lines of `bench --roofline` output of width `heads × channels`, in order;
/// lines that are not JSON objects (comments starting with `#`, blank lines) are skipped, and
/// a `csr_spmm` line without the fields is an error naming its line.
pub fn roofline_kernels(text: &str, heads: usize, channels: usize) -> Result<Vec<RooflineKernel>> {
    let mut found = Vec::new();
    for (k, line) in text.lines().enumerate() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        let value: serde_json::Value = serde_json::from_str(line).map_err(|e| {
            WorkbookError::InvalidConfig(format!("line {}: not a JSON line: {e}", k + 1))
        })?;
        if value.get("roofline").and_then(|v| v.as_str()) != Some("csr_spmm") {
            continue;
        }
        let kernel: RooflineKernel = serde_json::from_value(value).map_err(|e| {
            WorkbookError::InvalidConfig(format!(
                "line {}: a csr_spmm line of bench --roofline needs dataset, heads, channels, ms, bound_ms and latency_bound_ms: {e}",
                k + 1
            ))
        })?;
        if kernel.heads == heads && kernel.channels == channels {
            found.push(kernel);
        }
    }
    Ok(found)
}

/// Draws the measured time, the latency limit and the bandwidth limit of each kernel (one group
/// per graph, log scale) into an SVG file, atomically.
pub fn draw_roofline(path: &Path, title: &str, kernels: &[RooflineKernel]) -> Result<()> {
    let finite = |v: f64| v.is_finite() && v > 0.0;
    let valid = kernels
        .iter()
        .all(|k| finite(k.ms) && finite(k.bound_ms) && k.latency_bound_ms.is_none_or(finite));
    if kernels.is_empty() || !valid {
        return Err(WorkbookError::file(
            path,
            "cannot draw the figure without measurements, or with a time that is not a finite, \
             positive number of milliseconds",
        ));
    }
    super::write_svg(path, |svg| draw(svg, title, kernels))
}

fn draw(svg: &mut String, title: &str, kernels: &[RooflineKernel]) -> super::DrawResult {
    let root = SVGBackend::with_string(svg, (900, 400)).into_drawing_area();
    root.fill(&WHITE)?;
    let root = root.titled(title, ("sans-serif", 18))?;
    let values = kernels.iter().flat_map(|k| {
        [k.ms, k.bound_ms]
            .into_iter()
            .chain(k.latency_bound_ms)
            .collect::<Vec<_>>()
    });
    let (low, high) = values.fold((f64::MAX, 0f64), |(lo, hi), v| (lo.min(v), hi.max(v)));
    let labels: Vec<String> = kernels.iter().map(|k| k.dataset.clone()).collect();
    let slots = kernels.len() as f64;
    let mut c = ChartBuilder::on(&root)
        .margin(12)
        .x_label_area_size(40)
        .y_label_area_size(64)
        .build_cartesian_2d(-0.5..slots - 0.5, (low / 2.0..high * 8.0).log_scale())?;
    c.configure_mesh()
        .disable_x_mesh()
        .x_labels(kernels.len())
        .x_label_formatter(&|x| {
            let i = x.round();
            if (x - i).abs() < 1e-6 && i >= 0.0 {
                labels.get(i as usize).cloned().unwrap_or_default()
            } else {
                String::new()
            }
        })
        .y_desc("ms per pass (log scale)")
        .draw()?;
    let bar = |i: usize, offset: f64, ms: f64| {
        let x0 = i as f64 + offset;
        Rectangle::new([(x0, low / 2.0), (x0 + 0.25, ms)], MEASURED.filled())
    };
    c.draw_series(
        kernels
            .iter()
            .enumerate()
            .map(|(i, k)| bar(i, -0.125, k.ms)),
    )?
    .label("measured")
    .legend(|(x, y)| Rectangle::new([(x, y - 4), (x + 12, y + 4)], MEASURED.filled()));
    let tick = |i: usize, ms: f64, colour: RGBColor| {
        PathElement::new(
            vec![(i as f64 - 0.35, ms), (i as f64 + 0.35, ms)],
            colour.stroke_width(3),
        )
    };
    c.draw_series(
        kernels
            .iter()
            .enumerate()
            .filter_map(|(i, k)| k.latency_bound_ms.map(|ms| tick(i, ms, LATENCY))),
    )?
    .label("latency limit (the random cache lines it must fetch)")
    .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 14, y)], LATENCY.stroke_width(3)));
    c.draw_series(
        kernels
            .iter()
            .enumerate()
            .map(|(i, k)| tick(i, k.bound_ms, BANDWIDTH)),
    )?
    .label("bandwidth limit (every byte once)")
    .legend(|(x, y)| PathElement::new(vec![(x, y), (x + 14, y)], BANDWIDTH.stroke_width(3)));
    c.configure_series_labels()
        .position(SeriesLabelPosition::UpperRight)
        .border_style(BLACK)
        .background_style(WHITE)
        .draw()?;
    root.present()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    const RUN: &str = r#"# machine: test
{"roofline":"bandwidth","copy_gb_s":10.0}
{"roofline":"csr_spmm","dataset":"knn:1000","heads":1,"channels":16,"ms":3.0,"bound_ms":0.5,"latency_bound_ms":2.0}
{"roofline":"csr_spmm","dataset":"knn:1000","heads":8,"channels":8,"ms":9.0,"bound_ms":1.5,"latency_bound_ms":2.0}
{"roofline":"gat_scores","dataset":"knn:1000","heads":8,"channels":8,"ms":9.0}
{"roofline":"csr_spmm","dataset":"knn:1000@rcm","heads":1,"channels":16,"ms":1.0,"bound_ms":0.5,"latency_bound_ms":2.0}
"#;

    #[test]
    fn only_the_kernel_lines_of_the_width_asked_for_are_read_in_order() {
        let k = roofline_kernels(RUN, 1, 16).unwrap();
        let names: Vec<&str> = k.iter().map(|k| k.dataset.as_str()).collect();
        assert_eq!(names, ["knn:1000", "knn:1000@rcm"]);
        assert_eq!(k[1].ms, 1.0);
        assert_eq!(roofline_kernels(RUN, 8, 8).unwrap().len(), 1);
    }

    #[test]
    fn a_kernel_line_without_its_times_is_an_error_naming_the_line() {
        let bad = "{\"roofline\":\"csr_spmm\",\"dataset\":\"x\"}\n";
        let err = roofline_kernels(bad, 1, 16).unwrap_err().to_string();
        assert!(err.contains("line 1") && err.contains("bound_ms"), "{err}");
        let err = roofline_kernels("not json\n", 1, 16)
            .unwrap_err()
            .to_string();
        assert!(err.contains("line 1"), "{err}");
    }

    #[test]
    fn every_graph_gets_a_bar_and_bad_times_are_refused_not_drawn() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("r.svg");
        let k = roofline_kernels(RUN, 1, 16).unwrap();
        draw_roofline(&path, "t", &k).unwrap();
        let svg = std::fs::read_to_string(&path).unwrap();
        assert!(svg.contains("knn:1000@rcm") && svg.contains("latency limit"));
        let mut nan = k.clone();
        nan[0].ms = f64::NAN;
        let other = dir.path().join("nan.svg");
        assert!(draw_roofline(&other, "t", &nan).is_err());
        assert!(!other.exists());
        assert!(draw_roofline(&other, "t", &[]).is_err());
    }
}
