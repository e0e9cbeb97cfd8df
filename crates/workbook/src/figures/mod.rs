//! Figures drawn by the code with plotters (SVG: no font libraries needed).

pub mod scaling;
pub mod training_curves;

pub use scaling::{draw_scaling, ScalingPoint};
pub use training_curves::{draw_training_curves, Curve};
