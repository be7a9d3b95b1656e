//! PID 1 duties: kernel filesystems, host name, network, services, shutdown.

use std::process::Command;
use std::time::Duration;

use rustix::mount::{MountFlags, mount};

use crate::procs;

const PATH: &str = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin:/usr/lib/kairon";
/// A static busybox the image carries for what minbase Debian lacks (`ip`).
const BUSYBOX: &str = "/usr/lib/kairon/busybox";

fn mnt(src: &str, target: &str, fs: &str, flags: MountFlags, data: Option<&str>) {
    let _ = std::fs::create_dir_all(target);
    let data = data.map(|d| std::ffi::CString::new(d).expect("no NUL in mount options"));
    if let Err(e) = mount(src, target, fs, flags, data.as_deref())
        && e != rustix::io::Errno::BUSY
    {
        warn!("kairon-agent: mounting {fs} on {target}: {e}");
    }
}

pub fn setup() {
    let nosuid = MountFlags::NOSUID | MountFlags::NODEV | MountFlags::NOEXEC;
    mnt("proc", "/proc", "proc", nosuid, None);
    mnt("sysfs", "/sys", "sysfs", nosuid, None);
    mnt("devtmpfs", "/dev", "devtmpfs", MountFlags::NOSUID, Some("mode=0755"));
    mnt("devpts", "/dev/pts", "devpts", MountFlags::NOSUID | MountFlags::NOEXEC, Some("gid=5,mode=620,ptmxmode=666"));
    mnt("tmpfs", "/dev/shm", "tmpfs", MountFlags::NOSUID | MountFlags::NODEV, Some("mode=1777"));
    mnt("tmpfs", "/run", "tmpfs", MountFlags::NOSUID | MountFlags::NODEV, Some("mode=0755"));
    identity();
    let name = std::fs::read_to_string("/etc/hostname").unwrap_or_default();
    let name = name.trim();
    let _ = rustix::system::sethostname(if name.is_empty() { b"localhost" } else { name.as_bytes() });
    network();
    if std::path::Path::new("/usr/sbin/dropbear").exists() {
        let _ = std::fs::create_dir_all("/etc/dropbear");
        supervise("dropbear", || {
            let mut c = Command::new("/usr/sbin/dropbear");
            c.args(["-F", "-E", "-R", "-p", "22"]);
            c
        });
    }
    if std::path::Path::new("/dev/ttyS0").exists() {
        supervise("console shell", || {
            let mut c = Command::new("setsid");
            c.args(["-c", "/bin/bash", "-l"]).env("TERM", "linux").env("HOME", "/root");
            if let (Ok(i), Ok(o), Ok(e)) = (tty(), tty(), tty()) {
                c.stdin(i).stdout(o).stderr(e);
            }
            c
        });
    }
}

/// `kairon.hostname=` and `kairon.machine_id=` on the kernel command line: the identity the
/// runtime gave this VM, written before anything reads it.
fn identity() {
    let cmdline = std::fs::read_to_string("/proc/cmdline").unwrap_or_default();
    for w in cmdline.split_whitespace() {
        if let Some(h) = w.strip_prefix("kairon.hostname=") {
            let _ = std::fs::write("/etc/hostname", format!("{h}\n"));
        } else if let Some(m) = w.strip_prefix("kairon.machine_id=") {
            let _ = std::fs::write("/etc/machine-id", format!("{m}\n"));
        }
    }
}

fn tty() -> std::io::Result<std::fs::File> {
    std::fs::OpenOptions::new().read(true).write(true).open("/dev/ttyS0")
}

/// The `ip` of the image, or busybox's.
fn ip(args: &[&str]) {
    let r = if std::path::Path::new("/usr/sbin/ip").exists() || std::path::Path::new("/sbin/ip").exists() {
        procs::run("ip", args)
    } else {
        let mut all = vec!["ip"];
        all.extend_from_slice(args);
        procs::run(BUSYBOX, &all)
    };
    if let Err(e) = r {
        warn!("kairon-agent: ip {args:?}: {e}");
    }
}

/// The node's guest network, when the kernel command line gives `kairon.ip=` and `kairon.gw=`:
/// the address alone (/32), routed through the gateway, which also resolves names. Else QEMU
/// user networking: the guest is 10.0.2.15, the gateway 10.0.2.2, DNS 10.0.2.3.
fn network() {
    ip(&["link", "set", "lo", "up"]);
    if !std::path::Path::new("/sys/class/net/eth0").exists() {
        return;
    }
    ip(&["link", "set", "eth0", "up"]);
    let cmdline = std::fs::read_to_string("/proc/cmdline").unwrap_or_default();
    let arg = |key: &str| {
        cmdline
            .split_whitespace()
            .find_map(|w| w.strip_prefix(key))
            .and_then(|v| v.parse::<std::net::Ipv4Addr>().ok())
            .map(|a| a.to_string())
    };
    match (arg("kairon.ip="), arg("kairon.gw=")) {
        (Some(addr), Some(gw)) => {
            ip(&["addr", "add", &format!("{addr}/32"), "dev", "eth0"]);
            ip(&["route", "add", &gw, "dev", "eth0", "scope", "link"]);
            ip(&["route", "add", "default", "via", &gw, "dev", "eth0"]);
            let _ = std::fs::write("/etc/resolv.conf", format!("nameserver {gw}\n"));
        }
        _ => {
            ip(&["addr", "add", "10.0.2.15/24", "dev", "eth0"]);
            ip(&["route", "add", "default", "via", "10.0.2.2"]);
            let _ = std::fs::write("/etc/resolv.conf", "nameserver 10.0.2.3\n");
        }
    }
}

/// Keeps a service running: starts it again a second after it ends.
pub fn supervise(what: &'static str, make: impl Fn() -> Command + Send + 'static) {
    std::thread::spawn(move || {
        loop {
            let mut c = make();
            c.env("PATH", PATH);
            match procs::spawn(&mut c) {
                Ok(child) => {
                    procs::wait(child.id(), None);
                }
                Err(e) => warn!("kairon-agent: starting {what}: {e}"),
            }
            std::thread::sleep(Duration::from_secs(1));
        }
    });
}

pub fn idle() -> ! {
    loop {
        std::thread::sleep(Duration::from_secs(3600));
    }
}

pub fn hostname() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default().trim().to_string()
}

/// Powers the guest off (or halts, or reboots): every process is asked to end, disks are
/// synced and the root filesystem remounted read-only, then the kernel is told.
pub fn shutdown(mode: &str) {
    let mode = mode.to_string();
    std::thread::spawn(move || {
        if std::process::id() != 1 {
            let _ = procs::run(if mode == "reboot" { "reboot" } else { "poweroff" }, &[]);
            return;
        }
        rustix::fs::sync();
        // Read-only when nothing holds a file open for writing; the sync above covers the rest.
        let _ = rustix::mount::mount_remount("/", MountFlags::RDONLY, "");
        rustix::fs::sync();
        let cmd = match mode.as_str() {
            "reboot" => rustix::system::RebootCommand::Restart,
            "halt" => rustix::system::RebootCommand::Halt,
            _ => rustix::system::RebootCommand::PowerOff,
        };
        let _ = rustix::system::reboot(cmd);
    });
}
