//! The progress bar of long runs (on stderr, only when it is a terminal).

use std::time::Duration;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

/// Progress over every cell of a check, in thousandths of a cell.
pub struct Progress {
    bar: ProgressBar,
}

impl Progress {
    /// A bar for `cells` runs; hidden unless stderr is a terminal and `show`.
    pub fn new(cells: usize, show: bool) -> Progress {
        use std::io::IsTerminal;
        let target = if show && std::io::stderr().is_terminal() {
            ProgressDrawTarget::stderr()
        } else {
            ProgressDrawTarget::hidden()
        };
        let bar = ProgressBar::with_draw_target(Some(cells as u64 * 1000), target);
        if let Ok(style) = ProgressStyle::with_template("{bar:30} {percent:>3}% eta {eta}  {msg}") {
            bar.set_style(style);
        }
        bar.enable_steady_tick(Duration::from_millis(200));
        Progress { bar }
    }

    /// Cell `index` (from 0), named `what`, is `fraction` done.
    pub fn at(&self, index: usize, fraction: f64, what: &str) {
        let done = (fraction.clamp(0.0, 1.0) * 1000.0) as u64;
        self.bar.set_position(index as u64 * 1000 + done);
        if self.bar.message() != what {
            self.bar.set_message(what.to_owned());
        }
    }

    /// Removes the bar.
    pub fn finish(&self) {
        self.bar.finish_and_clear();
    }
}
