//! A spinner for long waits (a wait, a claim binding, a template build): drawn on stderr only
//! when stderr is a terminal (never into a pipe or a file, where it would be noise), coloured
//! unless `NO_COLOR` is set or the terminal is `dumb`. It says what it waits for and for how long,
//! and clears its line when the wait ends.

use std::io::{IsTerminal, Write};
use std::time::{Duration, Instant};

const FRAMES: [char; 10] = ['⠋', '⠙', '⠹', '⠸', '⠼', '⠴', '⠦', '⠧', '⠇', '⠏'];

/// Whether progress is drawn: stderr is a terminal that is not `dumb`.
pub fn shown() -> bool {
    std::io::stderr().is_terminal() && std::env::var_os("TERM").is_none_or(|t| t != "dumb")
}

/// Whether colours are used: a terminal, and no `NO_COLOR` (https://no-color.org).
pub fn coloured() -> bool {
    shown() && std::env::var_os("NO_COLOR").is_none_or(|v| v.is_empty())
}

/// One spinner line, while it lives.
pub struct Spinner(Option<tokio::task::JoinHandle<()>>);

impl Spinner {
    /// `what` is shown beside the spinner with the time waited so far.
    pub fn start(what: impl Into<String>) -> Spinner {
        if !shown() {
            return Spinner(None);
        }
        let what = what.into();
        let (on, off) = if coloured() { ("\x1b[36m", "\x1b[0m") } else { ("", "") };
        let started = Instant::now();
        Spinner(Some(tokio::spawn(async move {
            for frame in FRAMES.iter().cycle() {
                let waited = crate::duration::human(started.elapsed().as_secs() as i64);
                {
                    let mut err = std::io::stderr().lock();
                    let _ = write!(err, "\r\x1b[2K{on}{frame}{off} {what} ({waited})");
                    let _ = err.flush();
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        })))
    }
}

impl Drop for Spinner {
    fn drop(&mut self) {
        if let Some(task) = self.0.take() {
            task.abort();
            let mut err = std::io::stderr().lock();
            let _ = write!(err, "\r\x1b[2K");
            let _ = err.flush();
        }
    }
}
