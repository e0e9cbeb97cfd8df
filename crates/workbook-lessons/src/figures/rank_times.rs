//! One process per device: each rank's time per optimiser step, and the epoch's time (the
//! slowest rank's), for runs over 1, 2, 4, ... processes, from the JSON lines that
//! `mpirun -n N workbook train --distributed` prints (`rank_epoch_ms`, `steps_per_epoch`).
//!
//! Every all-reduce waits for the slowest rank, so the ranks' times side by side show what a
//! step costs each process and how much of it is waiting.
//!
//! ```
//! use workbook_lessons::figures::{draw_rank_times, RankRun};
//! let run = |n: usize, ms: &[f64]| RankRun {
//!     world_size: n, steps_per_epoch: 40 / n, rank_epoch_ms: ms.to_vec(),
//! };
//! let dir = tempfile::tempdir().unwrap();
//! let path = dir.path().join("rank_times.svg");
//! draw_rank_times(&path, "GCN", &[run(1, &[400.0]), run(2, &[230.0, 228.0])]).unwrap();
//! assert!(std::fs::read_to_string(&path).unwrap().contains("<svg"));
//! ```

use plotters::prelude::*;
use std::path::Path;
use workbook::error::{Result, WorkbookError};

/// Rank colours, in rank order (matplotlib's tab10).
const RANKS: [RGBColor; 8] = [
    RGBColor(31, 119, 180),
    RGBColor(255, 127, 14),
    RGBColor(44, 160, 44),
    RGBColor(214, 39, 40),
    RGBColor(148, 103, 189),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(127, 127, 127),
];
const EPOCH: RGBColor = RGBColor(0, 0, 0);

/// One distributed run, as its JSON summary reports it (other fields are ignored).
#[derive(Clone, Debug, PartialEq, serde::Deserialize)]
pub struct RankRun {
    /// Number of processes.
    pub world_size: usize,
    /// Optimiser steps per epoch (the same on every rank).
    pub steps_per_epoch: usize,
    /// Each rank's time in the training loop per epoch, milliseconds (mean over the epochs after
    /// the first), by rank.
    pub rank_epoch_ms: Vec<f64>,
}

impl RankRun {
    /// Rank `r`'s milliseconds per step.
    pub fn step_ms(&self, r: usize) -> f64 {
        self.rank_epoch_ms[r] / self.steps_per_epoch.max(1) as f64
    }

    /// The epoch's time: the slowest rank's.
    pub fn epoch_ms(&self) -> f64 {
        self.rank_epoch_ms.iter().cloned().fold(0.0, f64::max)
    }
}

/// Draws each rank's milliseconds per step (bars grouped by world size, left) and the epoch's
/// milliseconds (right) against the number of processes, into an SVG file, atomically.
pub fn draw_rank_times(path: &Path, title: &str, runs: &[RankRun]) -> Result<()> {
    let valid = runs.iter().all(|r| {
        r.world_size > 0
            && r.rank_epoch_ms.len() == r.world_size
            && r.rank_epoch_ms.iter().all(|v| v.is_finite() && *v >= 0.0)
    });
    if runs.is_empty() || !valid {
        return Err(WorkbookError::file(
            path,
            "cannot draw the figure without runs, or with a run whose rank_epoch_ms does not \
             have one finite, non-negative time per rank",
        ));
    }
    super::write_svg(path, |svg| draw(svg, title, runs))
}

fn draw(svg: &mut String, title: &str, runs: &[RankRun]) -> super::DrawResult {
    let root = SVGBackend::with_string(svg, (900, 380)).into_drawing_area();
    root.fill(&WHITE)?;
    let root = root.titled(title, ("sans-serif", 18))?;
    let (left, right) = root.split_horizontally(470);
    // One slot per run, in the order given, labelled by its world size.
    let slots = runs.len() as f64;
    let top = runs
        .iter()
        .flat_map(|r| (0..r.world_size).map(|k| r.step_ms(k)))
        .fold(0.1, f64::max);
    let labels: Vec<String> = runs.iter().map(|r| r.world_size.to_string()).collect();
    let mut c = ChartBuilder::on(&left)
        .caption("each rank's time per step", ("sans-serif", 15))
        .margin(10)
        .x_label_area_size(36)
        .y_label_area_size(48)
        .build_cartesian_2d(-0.5..slots - 0.5, 0.0..top * 1.45)?;
    c.configure_mesh()
        .disable_x_mesh()
        .x_labels(runs.len())
        .x_label_formatter(&|x| {
            let i = x.round();
            if (x - i).abs() < 1e-6 && i >= 0.0 {
                labels.get(i as usize).cloned().unwrap_or_default()
            } else {
                String::new()
            }
        })
        .x_desc("processes (mpirun -n N)")
        .y_desc("ms per step")
        .draw()?;
    let widest = runs.iter().map(|r| r.world_size).max().unwrap_or(1);
    for rank in 0..widest {
        // Past eight ranks the colours repeat; the bars stay in rank order.
        let colour = RANKS[rank % RANKS.len()];
        c.draw_series(
            runs.iter()
                .enumerate()
                .filter(|(_, r)| rank < r.world_size)
                .map(|(i, r)| {
                    let w = 0.8 / r.world_size as f64;
                    let x0 = i as f64 - 0.4 + w * rank as f64;
                    Rectangle::new(
                        [(x0, 0.0), (x0 + w * 0.9, r.step_ms(rank))],
                        colour.filled(),
                    )
                }),
        )?
        .label(format!("rank {rank}"))
        .legend(move |(x, y)| Rectangle::new([(x, y - 4), (x + 12, y + 4)], colour.filled()));
    }
    c.configure_series_labels()
        .position(SeriesLabelPosition::UpperLeft)
        .border_style(BLACK)
        .background_style(WHITE)
        .draw()?;
    let slowest = runs.iter().map(RankRun::epoch_ms).fold(0.1, f64::max);
    let n_max = widest as f64;
    let mut t = ChartBuilder::on(&right)
        .caption("epoch time (the slowest rank)", ("sans-serif", 15))
        .margin(10)
        .x_label_area_size(36)
        .y_label_area_size(56)
        .build_cartesian_2d(0.5..n_max + 0.5, 0.0..slowest * 1.15)?;
    t.configure_mesh()
        .x_labels(widest + 1)
        .x_label_formatter(&|x| format!("{x:.0}"))
        .x_desc("processes (mpirun -n N)")
        .y_desc("ms per epoch")
        .draw()?;
    let line: Vec<(f64, f64)> = runs
        .iter()
        .map(|r| (r.world_size as f64, r.epoch_ms()))
        .collect();
    t.draw_series(LineSeries::new(line.clone(), EPOCH.stroke_width(2)))?;
    t.draw_series(line.iter().map(|&p| Circle::new(p, 4, EPOCH.filled())))?;
    root.present()?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_run_whose_times_do_not_match_its_ranks_is_refused_not_drawn() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("r.svg");
        let bad = RankRun {
            world_size: 2,
            steps_per_epoch: 3,
            rank_epoch_ms: vec![1.0],
        };
        let err = draw_rank_times(&path, "t", &[bad]).unwrap_err().to_string();
        assert!(
            err.contains("one finite, non-negative time per rank"),
            "{err}"
        );
        assert!(!path.exists());
        let nan = RankRun {
            world_size: 1,
            steps_per_epoch: 3,
            rank_epoch_ms: vec![f64::NAN],
        };
        assert!(draw_rank_times(&path, "t", &[nan]).is_err());
        assert!(draw_rank_times(&path, "t", &[]).is_err());
    }

    #[test]
    fn every_rank_of_every_run_gets_a_bar_and_the_epoch_is_the_slowest_rank() {
        let run = RankRun {
            world_size: 2,
            steps_per_epoch: 4,
            rank_epoch_ms: vec![40.0, 48.0],
        };
        assert_eq!(run.step_ms(1), 12.0);
        assert_eq!(run.epoch_ms(), 48.0);
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("r.svg");
        let one = RankRun {
            world_size: 1,
            steps_per_epoch: 8,
            rank_epoch_ms: vec![80.0],
        };
        draw_rank_times(&path, "t", &[one, run]).unwrap();
        let svg = std::fs::read_to_string(&path).unwrap();
        assert!(svg.contains("rank 0") && svg.contains("rank 1"));
        assert!(!svg.contains("rank 2"));
    }
}
