//! The node side's network namespace: the host's, or a named one (`/run/netns/NAME`).
//!
//! A socket belongs to the namespace it was created in, so sockets for a named namespace are
//! made on a short-lived OS thread that enters it first (no tokio worker ever changes
//! namespace) and are then driven by tokio like any other.

use std::io;
use std::net::SocketAddr;
use std::os::fd::OwnedFd;
use std::path::PathBuf;
use std::time::Duration;

use rustix::net::{AddressFamily, SocketType};
use rustix::thread::{LinkNameSpaceType, move_into_link_name_space};
use tokio::process::Command;

/// How long a dial from the node may take.
pub const DIAL_TIMEOUT: Duration = Duration::from_secs(10);

#[derive(Clone, Debug)]
pub struct NodeNetns {
    /// `None`: the host's namespace (this process's).
    path: Option<PathBuf>,
}

impl NodeNetns {
    pub fn open(name: Option<&str>) -> io::Result<NodeNetns> {
        let path = name.map(|n| PathBuf::from("/run/netns").join(n));
        if let Some(p) = &path
            && !p.exists()
        {
            return Err(io::Error::new(
                io::ErrorKind::NotFound,
                format!("[network] netns: {} does not exist (create it with `ip netns add`)", p.display()),
            ));
        }
        Ok(NodeNetns { path })
    }

    /// The namespace at `path` (`None`: this process's), as it is.
    pub fn at(path: Option<PathBuf>) -> NodeNetns {
        NodeNetns { path }
    }

    /// Its namespace file (`None`: this process's namespace).
    pub fn path(&self) -> Option<&std::path::Path> {
        self.path.as_deref()
    }

    /// `program` run in the node's namespace.
    pub fn command(&self, program: &str) -> Command {
        match &self.path {
            None => Command::new(program),
            Some(p) => {
                let mut c = Command::new("nsenter");
                c.arg(format!("--net={}", p.display())).arg(program);
                c
            }
        }
    }

    /// Runs `f` in the node's namespace, off the async workers.
    async fn run<T: Send + 'static>(&self, f: impl FnOnce() -> io::Result<T> + Send + 'static) -> io::Result<T> {
        let path = self.path.clone();
        let (tx, rx) = tokio::sync::oneshot::channel();
        std::thread::Builder::new().name("node-netns".into()).spawn(move || {
            let result = (|| {
                if let Some(p) = path {
                    let ns = std::fs::File::open(&p)?;
                    move_into_link_name_space(std::os::fd::AsFd::as_fd(&ns), Some(LinkNameSpaceType::Network))
                        .map_err(|e| io::Error::other(format!("entering {}: {e}", p.display())))?;
                }
                f()
            })();
            let _ = tx.send(result);
        })?;
        rx.await.map_err(|_| io::Error::other("the node namespace thread died"))?
    }

    /// Writes `/proc/sys/<key>` of the node's namespace.
    pub async fn write_sysctl(&self, key: &str, value: &str) -> io::Result<()> {
        let file = format!("/proc/sys/{key}");
        let value = value.to_string();
        self.run(move || {
            std::fs::write(&file, &value).map_err(|e| io::Error::new(e.kind(), format!("writing {file}: {e}")))
        })
        .await
    }

    /// A listening TCP socket on `addr`, which need not be assigned yet (`IP_FREEBIND`: the
    /// gateway address lives on guests' veths, which come and go).
    pub async fn tcp_listener(&self, addr: SocketAddr) -> io::Result<tokio::net::TcpListener> {
        let fd = self
            .run(move || {
                let fd = bound(addr, SocketType::STREAM)?;
                rustix::net::listen(&fd, 1024)?;
                Ok(fd)
            })
            .await
            .map_err(|e| io::Error::new(e.kind(), format!("listening on {addr}: {e}")))?;
        let l = std::net::TcpListener::from(fd);
        l.set_nonblocking(true)?;
        tokio::net::TcpListener::from_std(l)
    }

    /// A UDP socket bound to `addr` (port 0: any free port).
    pub async fn udp_socket(&self, addr: SocketAddr) -> io::Result<tokio::net::UdpSocket> {
        let fd = self
            .run(move || bound(addr, SocketType::DGRAM))
            .await
            .map_err(|e| io::Error::new(e.kind(), format!("binding {addr}: {e}")))?;
        let s = std::net::UdpSocket::from(fd);
        s.set_nonblocking(true)?;
        tokio::net::UdpSocket::from_std(s)
    }

    /// A TCP connection from the node to `addr`.
    pub async fn dial(&self, addr: SocketAddr) -> io::Result<tokio::net::TcpStream> {
        let stream = match &self.path {
            None => tokio::time::timeout(DIAL_TIMEOUT, tokio::net::TcpStream::connect(addr))
                .await
                .map_err(|_| io::Error::new(io::ErrorKind::TimedOut, format!("{addr} did not answer")))??,
            Some(_) => {
                let s = self.run(move || std::net::TcpStream::connect_timeout(&addr, DIAL_TIMEOUT)).await?;
                s.set_nonblocking(true)?;
                tokio::net::TcpStream::from_std(s)?
            }
        };
        stream.set_nodelay(true)?;
        Ok(stream)
    }

    /// Whether `ip` is an address of the node itself (binding to it succeeds only then).
    pub async fn is_local(&self, ip: std::net::IpAddr) -> bool {
        self.run(move || Ok(std::net::UdpSocket::bind(SocketAddr::new(ip, 0)).is_ok())).await.unwrap_or(true)
    }
}

fn bound(addr: SocketAddr, kind: SocketType) -> io::Result<OwnedFd> {
    let family = if addr.is_ipv4() { AddressFamily::INET } else { AddressFamily::INET6 };
    let fd = rustix::net::socket_with(family, kind, rustix::net::SocketFlags::CLOEXEC, None)?;
    rustix::net::sockopt::set_ip_freebind(&fd, true)?;
    rustix::net::sockopt::set_socket_reuseaddr(&fd, true)?;
    rustix::net::bind(&fd, &addr)?;
    Ok(fd)
}
