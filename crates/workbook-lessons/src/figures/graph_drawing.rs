//! A small graph drawn as nodes and edges: nodes coloured by class, edges shaded by a weight
//! (e.g. GATv2 attention), positions from a seeded force-directed layout.
//!
//! ```
//! use workbook_lessons::figures::{draw_graph, spring_layout, GraphDrawing};
//! let edges = vec![(0, 1, 1.0), (1, 2, 0.5), (2, 0, 0.2)];
//! let positions = spring_layout(3, &edges, 0, 100);
//! let drawing = GraphDrawing { title: "triangle".into(), positions, edges,
//!     classes: vec![0, 1, 1], marked: vec![0] };
//! let dir = tempfile::tempdir().unwrap();
//! let path = dir.path().join("g.svg");
//! draw_graph(&path, &drawing).unwrap();
//! assert!(std::fs::read_to_string(&path).unwrap().contains("<svg"));
//! ```

use plotters::prelude::*;
use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use std::path::Path;
use workbook::error::{Result, WorkbookError};

/// What to draw.
#[derive(Clone, Debug)]
pub struct GraphDrawing {
    pub title: String,
    /// One `(x, y)` per node, in `0..1`.
    pub positions: Vec<(f64, f64)>,
    /// `(source, target, weight in 0..=1)`; heavier edges are drawn darker.
    pub edges: Vec<(usize, usize, f64)>,
    /// A class per node (its colour).
    pub classes: Vec<usize>,
    /// Nodes drawn with a black ring (e.g. the labelled training nodes).
    pub marked: Vec<usize>,
}

const COLOURS: [RGBColor; 6] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
];

/// Fruchterman-Reingold layout, seeded so the figure is the same on every run; positions are
/// scaled into `0..1`.
pub fn spring_layout(
    n: usize,
    edges: &[(usize, usize, f64)],
    seed: u64,
    iterations: usize,
) -> Vec<(f64, f64)> {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut pos: Vec<(f64, f64)> = (0..n)
        .map(|_| (rng.random::<f64>(), rng.random::<f64>()))
        .collect();
    let k = (1.0 / n.max(1) as f64).sqrt();
    for it in 0..iterations {
        let temperature = 0.1 * (1.0 - it as f64 / iterations as f64) + 1e-3;
        let mut disp = vec![(0.0, 0.0); n];
        for i in 0..n {
            for j in 0..n {
                if i == j {
                    continue;
                }
                let (dx, dy) = (pos[i].0 - pos[j].0, pos[i].1 - pos[j].1);
                let d = (dx * dx + dy * dy).sqrt().max(1e-4);
                let f = k * k / d;
                disp[i].0 += dx / d * f;
                disp[i].1 += dy / d * f;
            }
        }
        for &(a, b, _) in edges {
            if a == b || a >= n || b >= n {
                continue;
            }
            let (dx, dy) = (pos[a].0 - pos[b].0, pos[a].1 - pos[b].1);
            let d = (dx * dx + dy * dy).sqrt().max(1e-4);
            let f = d * d / k;
            disp[a].0 -= dx / d * f;
            disp[a].1 -= dy / d * f;
            disp[b].0 += dx / d * f;
            disp[b].1 += dy / d * f;
        }
        for (p, d) in pos.iter_mut().zip(&disp) {
            let len = (d.0 * d.0 + d.1 * d.1).sqrt().max(1e-9);
            let step = len.min(temperature);
            p.0 += d.0 / len * step;
            p.1 += d.1 / len * step;
        }
    }
    let (min_x, max_x) = min_max(pos.iter().map(|p| p.0));
    let (min_y, max_y) = min_max(pos.iter().map(|p| p.1));
    pos.iter()
        .map(|p| {
            (
                (p.0 - min_x) / (max_x - min_x).max(1e-9),
                (p.1 - min_y) / (max_y - min_y).max(1e-9),
            )
        })
        .collect()
}

fn min_max(v: impl Iterator<Item = f64>) -> (f64, f64) {
    v.fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), x| {
        (a.min(x), b.max(x))
    })
}

/// Draws the graph into an SVG file, atomically.
pub fn draw_graph(path: &Path, drawing: &GraphDrawing) -> Result<()> {
    let n = drawing.positions.len();
    if drawing.classes.len() != n {
        return Err(WorkbookError::file(
            path,
            format!("{} classes for {n} nodes", drawing.classes.len()),
        ));
    }
    if let Some(&(a, b, _)) = drawing.edges.iter().find(|e| e.0 >= n || e.1 >= n) {
        return Err(WorkbookError::file(
            path,
            format!("edge {a} -> {b} names a node beyond the {n} drawn"),
        ));
    }
    super::write_svg(path, |svg| draw(svg, drawing))
}

fn draw(svg: &mut String, d: &GraphDrawing) -> super::DrawResult {
    let root = SVGBackend::with_string(svg, (640, 560)).into_drawing_area();
    root.fill(&WHITE)?;
    let mut chart = ChartBuilder::on(&root)
        .caption(&d.title, ("sans-serif", 18))
        .margin(16)
        .build_cartesian_2d(-0.05f64..1.05, -0.05f64..1.05)?;
    for &(a, b, w) in &d.edges {
        if a == b {
            continue;
        }
        let shade = BLACK.mix(0.08 + 0.8 * w.clamp(0.0, 1.0));
        chart.draw_series(std::iter::once(PathElement::new(
            vec![d.positions[a], d.positions[b]],
            shade.stroke_width(1 + (3.0 * w.clamp(0.0, 1.0)) as u32),
        )))?;
    }
    for (i, &p) in d.positions.iter().enumerate() {
        let colour = COLOURS[d.classes[i] % COLOURS.len()];
        chart.draw_series(std::iter::once(Circle::new(p, 7, colour.filled())))?;
        if d.marked.contains(&i) {
            chart.draw_series(std::iter::once(Circle::new(p, 10, BLACK.stroke_width(2))))?;
        }
    }
    root.present()?;
    Ok(())
}
