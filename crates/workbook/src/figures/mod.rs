//! Figures drawn by the code with plotters (SVG: no font libraries needed).

pub mod training_curves;

pub use training_curves::{draw_training_curves, Curve};
