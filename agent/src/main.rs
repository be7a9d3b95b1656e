//! kairon-agent: the guest agent of Kairon's test VM image, and its init.
//!
//! As PID 1 (`init=/sbin/kairon-agent`, after the image's initrd has loaded the virtio modules
//! and switched to the root disk) it mounts the kernel filesystems, names the host, brings up
//! the network QEMU's user networking expects (10.0.2.15/24 via 10.0.2.2), starts dropbear and a
//! login shell on the serial console, reaps every orphan, and serves the qemu-guest-agent
//! protocol on the virtio-serial port `org.qemu.guest_agent.0` — or, with `kairon.agent=qemu-ga`
//! on the kernel command line, runs the real `qemu-ga` there instead (so the runtime can be
//! tested against both).
//!
//! Not PID 1 (`kairon-agent [PORT]`), it only serves the protocol. `kairon-agent watch [--recursive]
//! PATH` prints the changes under a directory as they happen (see `watch`); `kairon-agent context
//! LANGUAGE` is a code context, an interpreter kept between runs (see `context`).
//!
//! In a runc sandbox (`kairon-agent sandbox`, the container's init) it serves the same protocol,
//! plus the one-round-trip `kairon-exec`, on the Unix socket the runtime passes as its standard
//! input (see `sandbox`).

/// One line on stderr, never panicking: as PID 1 the agent's stderr is the console, where a
/// write can fail, and `eprintln!` then panics; a panic of PID 1 panics the guest's kernel and
/// ends the VM (seen: a VM whose QEMU exited mid-test, `exitcode=0x00006500` on its console).
macro_rules! warn {
    ($($arg:tt)*) => {{
        use std::io::Write as _;
        let _ = writeln!(std::io::stderr(), $($arg)*);
    }};
}

mod context;
mod exec;
mod ga;
mod init;
mod procs;
mod sandbox;
mod tty;
mod watch;

const PORT_NAME: &str = "org.qemu.guest_agent.0";

fn main() {
    if std::env::args().nth(1).as_deref() == Some("sandbox") {
        sandbox::serve();
    }
    if std::env::args().nth(1).as_deref() == Some("context") {
        let args: Vec<String> = std::env::args().skip(2).collect();
        std::process::exit(context::run(&args));
    }
    if std::env::args().nth(1).as_deref() == Some("watch") {
        let args: Vec<String> = std::env::args().skip(2).collect();
        std::process::exit(watch::run(&args));
    }
    let pid1 = std::process::id() == 1;
    if pid1 {
        init::setup();
    }
    let explicit = std::env::args().nth(1).filter(|a| a.starts_with('/'));
    let port = explicit.or_else(|| {
        // The module may still be probing the port when init reaches this point.
        for _ in 0..100 {
            if let Some(p) = ga::find_port(PORT_NAME) {
                return Some(p);
            }
            std::thread::sleep(std::time::Duration::from_millis(50));
        }
        None
    });
    let cmdline = std::fs::read_to_string("/proc/cmdline").unwrap_or_default();
    if pid1 && cmdline.split_whitespace().any(|w| w == "kairon.agent=qemu-ga") {
        let port = port.clone();
        init::supervise("qemu-ga", move || {
            let mut c = std::process::Command::new("/usr/sbin/qemu-ga");
            c.args([
                "-m",
                "virtio-serial",
                "-p",
                port.as_deref().unwrap_or("/dev/virtio-ports/org.qemu.guest_agent.0"),
            ]);
            c
        });
        init::idle();
    }
    match port {
        Some(p) => ga::serve(&p),
        None => {
            warn!("kairon-agent: no virtio-serial port named {PORT_NAME}");
            if pid1 {
                init::idle();
            }
            std::process::exit(1);
        }
    }
}
