//! Where CAR's processes write: the one place that touches stdout and stderr directly
//! (`print_stdout`/`print_stderr` are denied everywhere else by Cargo.toml's lints). A reader
//! that went away (`car … | head`) is not an error worth a panic, so write errors are dropped.

use std::io::Write;

/// Writes `text` to stdout as is.
pub fn stdout(text: &str) {
    let mut out = std::io::stdout().lock();
    let _ = out.write_all(text.as_bytes()).and_then(|()| out.flush());
}

/// Writes `text` to stderr as is (no newline added).
pub fn stderr(text: &str) {
    let mut err = std::io::stderr().lock();
    let _ = err.write_all(text.as_bytes()).and_then(|()| err.flush());
}

/// Writes one line to stderr: a message for the user, or a JSON Lines progress event.
pub fn stderr_line(text: &str) {
    stderr(&format!("{text}\n"));
}
