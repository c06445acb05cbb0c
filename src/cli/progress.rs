//! Progress of long work (graph scan, memory import, the StateBench evaluation): a bar
//! (indicatif) when stderr is a terminal and the output is for a person; otherwise JSON Lines on
//! stderr, `{"type":"progress","command":…,"stage":…,"done":N,"total":M}`, at most every 200 ms
//! and always at the end of a stage, so scripts and agents can follow it without parsing a bar.

use std::io::IsTerminal;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use serde_json::json;

/// How often a JSON progress line may be written.
const JSON_EVERY: Duration = Duration::from_millis(200);

/// Where a command's progress goes.
pub struct Reporter {
    command: &'static str,
    bar: Option<ProgressBar>,
    last_line: Mutex<Option<Instant>>,
}

impl Reporter {
    /// A bar on a terminal unless `json`; JSON Lines otherwise.
    pub fn new(command: &'static str, json: bool) -> Reporter {
        let bar = (!json && std::io::stderr().is_terminal()).then(|| {
            let bar = ProgressBar::with_draw_target(None, ProgressDrawTarget::stderr());
            bar.set_style(
                ProgressStyle::with_template("{spinner} {msg} {bar:30} {pos}/{len} ({elapsed})")
                    .unwrap_or_else(|_| ProgressStyle::default_bar()),
            );
            bar.enable_steady_tick(Duration::from_millis(120));
            bar
        });
        Reporter {
            command,
            bar,
            last_line: Mutex::new(None),
        }
    }

    /// `done` of `total` (unknown while counting) in `stage`.
    pub fn update(&self, stage: &str, done: u64, total: Option<u64>) {
        if let Some(bar) = &self.bar {
            bar.set_message(stage.to_string());
            match total {
                Some(total) => bar.set_length(total),
                None => bar.unset_length(),
            }
            bar.set_position(done);
            return;
        }
        let finished = total.is_some_and(|t| done >= t);
        let mut last = self
            .last_line
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if !finished && last.is_some_and(|at| at.elapsed() < JSON_EVERY) {
            return;
        }
        *last = Some(Instant::now());
        super::console::stderr_line(
            &json!({"type": "progress", "command": self.command, "stage": stage,
                    "done": done, "total": total})
            .to_string(),
        );
    }

    /// Whether progress goes to a bar (a person at a terminal).
    pub fn is_bar(&self) -> bool {
        self.bar.is_some()
    }

    /// Clears the bar (the result follows on stdout).
    pub fn finish(&self) {
        if let Some(bar) = &self.bar {
            bar.finish_and_clear();
        }
    }
}
