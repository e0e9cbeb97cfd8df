//! The progress bar shown while training (on stderr; hidden when stderr is not a terminal).

use indicatif::{ProgressBar, ProgressStyle};
use workbook::train::EpochStats;

/// A bar over `epochs` epochs labelled `label`.
pub fn epoch_bar(label: &str, epochs: usize) -> ProgressBar {
    let bar = ProgressBar::new(epochs as u64);
    bar.set_style(
        ProgressStyle::with_template("{prefix:>14} [{bar:30}] {pos}/{len} epochs  {msg}")
            .expect("valid template")
            .progress_chars("=> "),
    );
    bar.set_prefix(label.to_string());
    bar
}

/// Advances the bar by one epoch and shows its statistics.
pub fn tick(bar: &ProgressBar, s: &EpochStats) {
    bar.set_message(format!(
        "loss {:.3}  train {:.1}%  val {:.1}%",
        s.loss,
        100.0 * s.train_accuracy,
        100.0 * s.val_accuracy
    ));
    bar.inc(1);
}
