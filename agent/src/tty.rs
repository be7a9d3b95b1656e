//! Commands on a terminal (`kairon-tty` on guest-exec: `exec -it` on a VM). The agent opens a
//! pseudo-terminal, gives its slave to the command as stdin, stdout, stderr and controlling
//! terminal (through util-linux's `setsid --ctty`, since the workspace has no unsafe code to
//! do it between fork and exec), reads the screen from the master into the command's stdout
//! capture and writes what is typed to it. A resize sets the master's window size; the kernel
//! signals SIGWINCH to the command's foreground group.

use std::io;
use std::os::fd::{AsFd, OwnedFd};

use rustix::fs::{Mode, OFlags};
use rustix::pty::OpenptFlags;
use rustix::termios::Winsize;

/// Where util-linux's setsid is in the image (Debian's util-linux).
pub const SETSID: &str = "/usr/bin/setsid";

/// A pseudo-terminal: the master the agent reads and writes, the slave the command gets.
pub struct Pty {
    pub master: OwnedFd,
    pub slave: OwnedFd,
}

/// A terminal's size from a request: `{"cols": C, "rows": R}`, each 1 to 1000.
pub fn size(v: &serde_json::Value) -> Result<(u16, u16), String> {
    let dim = |k: &str| {
        v.get(k)
            .and_then(serde_json::Value::as_u64)
            .filter(|n| (1..=1000).contains(n))
            .map(|n| n as u16)
            .ok_or_else(|| format!("Parameter '{k}' expects a terminal size from 1 to 1000"))
    };
    Ok((dim("cols")?, dim("rows")?))
}

/// Opens a pseudo-terminal of `cols` x `rows`.
pub fn open(cols: u16, rows: u16) -> io::Result<Pty> {
    let master = rustix::pty::openpt(OpenptFlags::RDWR | OpenptFlags::NOCTTY | OpenptFlags::CLOEXEC)?;
    rustix::pty::grantpt(&master)?;
    rustix::pty::unlockpt(&master)?;
    let name = rustix::pty::ptsname(&master, Vec::new())?;
    let slave = rustix::fs::open(name.as_c_str(), OFlags::RDWR | OFlags::NOCTTY | OFlags::CLOEXEC, Mode::empty())?;
    set_size(&master, cols, rows)?;
    Ok(Pty { master, slave })
}

/// Sets the terminal's size.
pub fn set_size(master: impl AsFd, cols: u16, rows: u16) -> io::Result<()> {
    let ws = Winsize { ws_row: rows, ws_col: cols, ws_xpixel: 0, ws_ypixel: 0 };
    Ok(rustix::termios::tcsetwinsize(master, ws)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pty_takes_a_size_and_carries_bytes_both_ways() {
        let pty = open(120, 40).unwrap();
        let ws = rustix::termios::tcgetwinsize(&pty.slave).unwrap();
        assert_eq!((ws.ws_col, ws.ws_row), (120, 40));
        rustix::io::write(&pty.slave, b"out").unwrap();
        let mut buf = [0u8; 16];
        let n = rustix::io::read(&pty.master, &mut buf).unwrap();
        assert_eq!(&buf[..n], b"out");
        assert_eq!(size(&serde_json::json!({"cols": 80, "rows": 24})), Ok((80, 24)));
        assert!(size(&serde_json::json!({"cols": 0, "rows": 24})).is_err());
    }
}
