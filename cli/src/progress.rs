//! A spinner for long waits (a wait, a claim binding, a pool warming up, a template build, with
//! what is done so far when there is a measure of it): drawn on stderr only
//! when stderr is a terminal (never into a pipe or a file, where it would be noise), coloured
//! unless `NO_COLOR` is set or the terminal is `dumb`. It says what it waits for and for how long,
//! and clears its line when the wait ends.

use std::io::{IsTerminal, Write};
use std::sync::{Arc, Mutex};
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
pub struct Spinner {
    task: Option<tokio::task::JoinHandle<()>>,
    what: Arc<Mutex<String>>,
}

impl Spinner {
    /// `what` is shown beside the spinner with the time waited so far.
    pub fn start(what: impl Into<String>) -> Spinner {
        let what = Arc::new(Mutex::new(what.into()));
        if !shown() {
            return Spinner { task: None, what };
        }
        let (on, off) = if coloured() { ("\x1b[36m", "\x1b[0m") } else { ("", "") };
        let started = Instant::now();
        let shown_what = what.clone();
        let task = tokio::spawn(async move {
            for frame in FRAMES.iter().cycle() {
                let waited = crate::duration::human(started.elapsed().as_secs() as i64);
                let what = shown_what.lock().map(|w| w.clone()).unwrap_or_default();
                {
                    let mut err = std::io::stderr().lock();
                    let _ = write!(err, "\r\x1b[2K{on}{frame}{off} {what} ({waited})");
                    let _ = err.flush();
                }
                tokio::time::sleep(Duration::from_millis(100)).await;
            }
        });
        Spinner { task: Some(task), what }
    }

    /// Says something else beside the spinner from now on (what is done so far).
    pub fn set(&self, what: impl Into<String>) {
        if let Ok(mut w) = self.what.lock() {
            *w = what.into();
        }
    }
}

/// A bar of `width` cells, `done` of `total` filled: `[#####.....]`.
pub fn bar(done: u64, total: u64, width: usize) -> String {
    let filled = if total == 0 { 0 } else { ((done.min(total) as u128 * width as u128) / total as u128) as usize };
    format!("[{}{}]", "#".repeat(filled), ".".repeat(width - filled))
}

impl Drop for Spinner {
    fn drop(&mut self) {
        if let Some(task) = self.task.take() {
            task.abort();
            let mut err = std::io::stderr().lock();
            let _ = write!(err, "\r\x1b[2K");
            let _ = err.flush();
        }
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn a_bar_fills_in_proportion() {
        assert_eq!(super::bar(0, 100, 10), "[..........]");
        assert_eq!(super::bar(25, 100, 10), "[##........]");
        assert_eq!(super::bar(150, 100, 4), "[####]");
        assert_eq!(super::bar(5, 0, 4), "[....]");
    }
}
