//! A command on a terminal (`exec -it`). The runtime opens a pseudo-terminal and makes its
//! slave `runc exec --tty`'s stdin, stdout, stderr and controlling terminal: runc, finding a
//! terminal there, puts it in raw mode, gives the command a terminal of the container's own and
//! copies between the two. The runtime relays the master to the client. A resize sets the
//! master's window size, which signals SIGWINCH to runc (started by `setsid --ctty`, so the
//! slave is its controlling terminal), which resizes the container's terminal. runc runs in
//! the foreground, so its exit status is the command's.

use std::io;
use std::os::fd::{AsFd, OwnedFd};

use rustix::fs::{Mode, OFlags};
use rustix::pty::OpenptFlags;
use rustix::termios::Winsize;
use serde::Deserialize;

/// A terminal's size in characters.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Deserialize)]
pub struct Size {
    pub cols: u16,
    pub rows: u16,
}

impl Size {
    /// A size the terminal can take: 1 to 1000 each way.
    pub fn checked(cols: u16, rows: u16) -> Option<Size> {
        ((1..=1000).contains(&cols) && (1..=1000).contains(&rows)).then_some(Size { cols, rows })
    }
}

/// A client's control message, sent as a WebSocket text frame: `{"resize":{"cols":C,"rows":R}}`.
#[derive(Deserialize)]
pub struct Control {
    pub resize: Size,
}

/// A pseudo-terminal: the master the runtime reads and writes, the slave the command gets.
pub struct Pty {
    pub master: OwnedFd,
    pub slave: OwnedFd,
}

/// Opens a pseudo-terminal of `size`.
pub fn open(size: Size) -> io::Result<Pty> {
    let master = rustix::pty::openpt(OpenptFlags::RDWR | OpenptFlags::NOCTTY | OpenptFlags::CLOEXEC)?;
    rustix::pty::grantpt(&master)?;
    rustix::pty::unlockpt(&master)?;
    let name = rustix::pty::ptsname(&master, Vec::new())?;
    let slave = rustix::fs::open(name.as_c_str(), OFlags::RDWR | OFlags::NOCTTY | OFlags::CLOEXEC, Mode::empty())?;
    set_size(&master, size)?;
    Ok(Pty { master, slave })
}

/// Sets the terminal's size (on the master; the kernel signals the slave's foreground group).
pub fn set_size(master: impl AsFd, size: Size) -> io::Result<()> {
    let ws = Winsize { ws_row: size.rows, ws_col: size.cols, ws_xpixel: 0, ws_ypixel: 0 };
    Ok(rustix::termios::tcsetwinsize(master, ws)?)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pty_takes_a_size_and_carries_bytes_both_ways() {
        let pty = open(Size { cols: 120, rows: 40 }).unwrap();
        let ws = rustix::termios::tcgetwinsize(&pty.slave).unwrap();
        assert_eq!((ws.ws_col, ws.ws_row), (120, 40));
        assert!(rustix::termios::isatty(&pty.slave));
        rustix::io::write(&pty.slave, b"out").unwrap();
        let mut buf = [0u8; 16];
        let n = rustix::io::read(&pty.master, &mut buf).unwrap();
        assert_eq!(&buf[..n], b"out");
        assert_eq!(Size::checked(0, 10), None);
        assert_eq!(Size::checked(80, 24), Some(Size { cols: 80, rows: 24 }));
    }
}
