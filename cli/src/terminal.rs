//! This process's own terminal for `exec -it`: its size, and raw mode (every key goes to the
//! guest as typed, ^C included, and nothing is echoed here) for as long as a guard lives.

use std::io::IsTerminal;

use rustix::termios::{OptionalActions, Termios};

/// The terminal's size as (columns, rows), 80 x 24 when stdout is not a terminal.
pub fn size() -> (u16, u16) {
    match rustix::termios::tcgetwinsize(std::io::stdout()) {
        Ok(w) if w.ws_col > 0 && w.ws_row > 0 => (w.ws_col, w.ws_row),
        _ => (80, 24),
    }
}

/// Whether stdin and stdout are both a terminal (what `-t` needs).
pub fn interactive() -> bool {
    std::io::stdin().is_terminal() && std::io::stdout().is_terminal()
}

/// Raw mode on stdin until dropped, which restores the settings found.
pub struct RawMode(Termios);

impl RawMode {
    pub fn enter() -> std::io::Result<RawMode> {
        let stdin = std::io::stdin();
        let saved = rustix::termios::tcgetattr(&stdin)?;
        let mut raw = saved.clone();
        raw.make_raw();
        rustix::termios::tcsetattr(&stdin, OptionalActions::Now, &raw)?;
        Ok(RawMode(saved))
    }
}

impl Drop for RawMode {
    fn drop(&mut self) {
        let _ = rustix::termios::tcsetattr(std::io::stdin(), OptionalActions::Now, &self.0);
    }
}
