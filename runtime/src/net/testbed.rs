//! A test bed for the guest network, for tests and benchmarks: a node's network namespace
//! wired to an "internet" namespace that holds an HTTP server (on `allowed.test`'s and
//! `refused.test`'s addresses, and port 8080), a TLS endpoint that records SNI names, a DNS
//! resolver and the metadata address, plus a service of the node itself. Everything lives in
//! namespaces it creates (deleted on drop); its setup panics on failure, as a test's would.

use std::collections::BTreeMap;
use std::net::Ipv4Addr;
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use rustix::thread::{LinkNameSpaceType, move_into_link_name_space};

pub const ALLOWED_IP: Ipv4Addr = Ipv4Addr::new(198, 51, 100, 1);
pub const REFUSED_IP: Ipv4Addr = Ipv4Addr::new(198, 51, 100, 2);
pub const RESOLVER_IP: Ipv4Addr = Ipv4Addr::new(198, 51, 100, 53);
pub const NODE_IP: Ipv4Addr = Ipv4Addr::new(198, 51, 100, 254);
/// Reads everything sent to it, then answers how many bytes came.
pub const SINK_PORT: u16 = 9000;
/// Sends [`SOURCE_BYTES`] and closes.
pub const SOURCE_PORT: u16 = 9001;
pub const SOURCE_BYTES: usize = 16 << 20;
pub const METADATA_IP: Ipv4Addr = Ipv4Addr::new(169, 254, 169, 254);
/// Addresses of "the inside" the internet namespace also holds (a cluster's API server, a
/// kubelet, a database would be there): one in each range a node denies by default, and one in
/// [`CLUSTER_CIDR`].
pub const INSIDE_IPS: [Ipv4Addr; 6] = [
    Ipv4Addr::new(10, 0, 0, 1),
    Ipv4Addr::new(172, 16, 0, 1),
    Ipv4Addr::new(192, 168, 0, 1),
    Ipv4Addr::new(100, 64, 0, 1),
    Ipv4Addr::new(168, 63, 129, 16),
    Ipv4Addr::new(203, 0, 113, 1),
];
/// A cluster's pod or service range outside the private ones, as `--deny-cidr` gives it.
pub const CLUSTER_CIDR: &str = "203.0.113.0/24";
/// A private address of the node itself (beside [`NODE_IP`]).
pub const NODE_PRIVATE_IP: Ipv4Addr = Ipv4Addr::new(10, 250, 0, 1);

fn ip(args: &[&str]) {
    let out = Command::new("ip").args(args).output().expect("ip");
    assert!(out.status.success(), "ip {args:?}: {}", String::from_utf8_lossy(&out.stderr));
}

/// A named network namespace, deleted on drop.
pub struct Netns(pub String);

impl Netns {
    pub fn new(prefix: &str) -> Netns {
        let name = format!("{prefix}{:06x}", rand::random::<u32>() & 0xff_ffff);
        ip(&["netns", "add", &name]);
        ip(&["-n", &name, "link", "set", "lo", "up"]);
        Netns(name)
    }

    pub fn path(&self) -> String {
        format!("/run/netns/{}", self.0)
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["netns", "del", &self.0]).status();
    }
}

/// Moves the calling thread into the network namespace at `path`.
pub fn enter(path: &str) {
    let f = std::fs::File::open(path).expect("netns");
    move_into_link_name_space(std::os::fd::AsFd::as_fd(&f), Some(LinkNameSpaceType::Network)).expect("setns");
}

/// What "the internet" saw.
#[derive(Default)]
pub struct Seen {
    /// (address the request came to, Host header, Authorization header)
    pub http: Vec<(Ipv4Addr, String, Option<String>)>,
    /// The same, over TLS.
    pub https: Vec<(Ipv4Addr, String, Option<String>)>,
    /// (address, SNI name) of every TLS connection, handshake or not
    pub tls: Vec<(Ipv4Addr, Option<String>)>,
    /// Names asked.
    pub dns: Vec<String>,
    /// Connections to any other port.
    pub other: Vec<(Ipv4Addr, u16)>,
}

/// Name → address the resolver answers.
pub fn zone() -> BTreeMap<&'static str, Ipv4Addr> {
    BTreeMap::from([
        ("allowed.test", ALLOWED_IP),
        ("refused.test", REFUSED_IP),
        ("a.wild.test", ALLOWED_IP),
        ("wild.test", ALLOWED_IP),
        ("allowed.test.evil.test", REFUSED_IP),
        ("meta.test", METADATA_IP),
        ("node.test", NODE_IP),
        // A second virtual host on allowed.test's address, as a shared host or CDN has.
        ("evil.test", ALLOWED_IP),
        ("inside.test", INSIDE_IPS[0]),
        // A stand-in Python package index ([`PACKAGE_INDEX`]), a virtual host on the same address.
        ("pypi.test", ALLOWED_IP),
    ])
}

/// The host of the stand-in package index: `http://pypi.test/simple/` lists one package,
/// [`STAND_IN_WHEEL`], as PEP 503 says an index does (`PIP_INDEX_URL=http://pypi.test/simple`,
/// `PIP_TRUSTED_HOST=pypi.test`).
pub const PACKAGE_INDEX: &str = "pypi.test";
/// The one file of the stand-in index: a small, valid wheel of `six` 1.16.0.
pub const STAND_IN_WHEEL: &str = "six-1.16.0-py2.py3-none-any.whl";

/// What the stand-in index answers at `path` (content type, body), if anything.
fn package_index(path: &str) -> Option<(&'static str, Vec<u8>)> {
    match path {
        "/simple/" => {
            Some(("text/html", b"<!DOCTYPE html><html><body><a href=\"/simple/six/\">six</a></body></html>\n".to_vec()))
        }
        "/simple/six/" => Some((
            "text/html",
            format!(
                "<!DOCTYPE html><html><body><a href=\"/files/{STAND_IN_WHEEL}\">{STAND_IN_WHEEL}</a></body></html>\n"
            )
            .into_bytes(),
        )),
        p if p == format!("/files/{STAND_IN_WHEEL}") => Some(("application/octet-stream", stand_in_wheel())),
        _ => None,
    }
}

/// A wheel pip takes: a zip (stored, not compressed) holding a module and the `.dist-info`
/// files that name the package and version.
fn stand_in_wheel() -> Vec<u8> {
    let info = "six-1.16.0.dist-info";
    let files: [(String, &str); 4] = [
        ("six.py".into(), "# a stand-in for six, served by the test bed's package index\n"),
        (format!("{info}/METADATA"), "Metadata-Version: 2.1\nName: six\nVersion: 1.16.0\n"),
        (
            format!("{info}/WHEEL"),
            "Wheel-Version: 1.0\nGenerator: kairon-testbed\nRoot-Is-Purelib: true\nTag: py2-none-any\nTag: py3-none-any\n",
        ),
        (
            format!("{info}/RECORD"),
            "six.py,,\nsix-1.16.0.dist-info/METADATA,,\nsix-1.16.0.dist-info/WHEEL,,\nsix-1.16.0.dist-info/RECORD,,\n",
        ),
    ];
    let mut zip = Vec::new();
    let mut central = Vec::new();
    for (name, body) in &files {
        let mut crc = flate2::Crc::new();
        crc.update(body.as_bytes());
        let (crc, size, offset) = (crc.sum(), body.len() as u32, zip.len() as u32);
        // Version 2.0, no flags, stored, no time: the fields both headers share.
        let mut common = Vec::new();
        for v in [20u16, 0, 0, 0, 0] {
            common.extend_from_slice(&v.to_le_bytes());
        }
        common.extend_from_slice(&crc.to_le_bytes());
        common.extend_from_slice(&size.to_le_bytes());
        common.extend_from_slice(&size.to_le_bytes());
        common.extend_from_slice(&(name.len() as u16).to_le_bytes());
        common.extend_from_slice(&0u16.to_le_bytes());
        zip.extend_from_slice(&0x0403_4b50u32.to_le_bytes());
        zip.extend_from_slice(&common);
        zip.extend_from_slice(name.as_bytes());
        zip.extend_from_slice(body.as_bytes());
        central.extend_from_slice(&0x0201_4b50u32.to_le_bytes());
        central.extend_from_slice(&20u16.to_le_bytes());
        central.extend_from_slice(&common);
        for v in [0u16, 0, 0] {
            central.extend_from_slice(&v.to_le_bytes());
        }
        central.extend_from_slice(&0u32.to_le_bytes());
        central.extend_from_slice(&offset.to_le_bytes());
        central.extend_from_slice(name.as_bytes());
    }
    let (at, len, n) = (zip.len() as u32, central.len() as u32, files.len() as u16);
    zip.extend_from_slice(&central);
    zip.extend_from_slice(&0x0605_4b50u32.to_le_bytes());
    for v in [0u16, 0, n, n] {
        zip.extend_from_slice(&v.to_le_bytes());
    }
    zip.extend_from_slice(&len.to_le_bytes());
    zip.extend_from_slice(&at.to_le_bytes());
    zip.extend_from_slice(&0u16.to_le_bytes());
    zip
}

/// Starts the internet's servers on a thread inside `ns`; they live as long as the process.
pub fn serve_internet(ns: &Netns, seen: Arc<Mutex<Seen>>, ca: Arc<crate::net::tls::EgressCa>) {
    let path = ns.path();
    let (ready_tx, ready_rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        enter(&path);
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("rt");
        rt.block_on(async move {
            let http = tokio::net::TcpListener::bind("0.0.0.0:80").await.expect("80");
            let tls = tokio::net::TcpListener::bind("0.0.0.0:443").await.expect("443");
            let other = tokio::net::TcpListener::bind("0.0.0.0:8080").await.expect("8080");
            let dns = tokio::net::UdpSocket::bind((RESOLVER_IP, 53)).await.expect("53");
            let sink = tokio::net::TcpListener::bind(("0.0.0.0", SINK_PORT)).await.expect("sink");
            let source = tokio::net::TcpListener::bind(("0.0.0.0", SOURCE_PORT)).await.expect("source");
            ready_tx.send(()).expect("ready");
            tokio::spawn(async move {
                while let Ok((mut c, _)) = sink.accept().await {
                    tokio::spawn(async move {
                        use tokio::io::AsyncWriteExt;
                        let n = tokio::io::copy(&mut c, &mut tokio::io::sink()).await.unwrap_or(0);
                        let _ = c.write_all(format!("{n}\n").as_bytes()).await;
                    });
                }
            });
            tokio::spawn(async move {
                while let Ok((mut c, _)) = source.accept().await {
                    tokio::spawn(async move {
                        use tokio::io::AsyncWriteExt;
                        let chunk = vec![7u8; 64 * 1024];
                        for _ in 0..SOURCE_BYTES / chunk.len() {
                            if c.write_all(&chunk).await.is_err() {
                                return;
                            }
                        }
                        let _ = c.shutdown().await;
                    });
                }
            });
            let s = seen.clone();
            tokio::spawn(async move {
                loop {
                    let (c, _) = http.accept().await.expect("accept");
                    let local = local_v4(&c);
                    tokio::spawn(answer_http(c, local, s.clone(), false));
                }
            });
            let s = seen.clone();
            let certs = ca.clone();
            tokio::spawn(async move {
                loop {
                    let (c, _) = tls.accept().await.expect("accept");
                    let local = local_v4(&c);
                    let (s, certs) = (s.clone(), certs.clone());
                    tokio::spawn(async move {
                        // The SNI name is recorded before the handshake (a bare ClientHello
                        // counts), then the host's certificate answers it.
                        let mut c = c;
                        let Ok(hello) = crate::net::proxy::read_client_hello(&mut c).await else { return };
                        let sni = crate::net::proxy::sni(&hello);
                        s.lock().unwrap().tls.push((local, sni.clone()));
                        let Ok(config) = certs.server_config(sni.as_deref().unwrap_or("unnamed.test")) else { return };
                        let stream = crate::net::tls::Prefixed::new(hello, c);
                        if let Ok(stream) = tokio_rustls::TlsAcceptor::from(config).accept(stream).await {
                            answer_http(stream, local, s, true).await;
                        }
                    });
                }
            });
            let s = seen.clone();
            tokio::spawn(async move {
                loop {
                    let (c, _) = other.accept().await.expect("accept");
                    let local = local_v4(&c);
                    s.lock().unwrap().other.push((local, 8080));
                }
            });
            let mut buf = [0u8; 1500];
            loop {
                let (n, from) = dns.recv_from(&mut buf).await.expect("dns");
                let q = &buf[..n];
                let Some((name, qtype, end)) = crate::net::dns::question(q) else { continue };
                seen.lock().unwrap().dns.push(name.clone());
                let mut reply = q[..end].to_vec();
                reply[2] = 0x81;
                match zone().get(name.as_str()) {
                    Some(addr) if qtype == 1 => {
                        reply[3] = 0x80;
                        reply[7] = 1;
                        reply.extend_from_slice(&[0xc0, 12, 0, 1, 0, 1, 0, 0, 0, 5, 0, 4]);
                        reply.extend_from_slice(&addr.octets());
                    }
                    Some(_) => reply[3] = 0x80,
                    None => reply[3] = 0x83,
                }
                let _ = dns.send_to(&reply, from).await;
            }
        });
    });
    ready_rx.recv_timeout(Duration::from_secs(10)).expect("the internet's servers start");
}

/// One HTTP/1.1 request: recorded (with whether it came over TLS), answered with the
/// address it came to.
async fn answer_http<S: tokio::io::AsyncRead + tokio::io::AsyncWrite + Unpin>(
    mut c: S,
    local: Ipv4Addr,
    seen: Arc<Mutex<Seen>>,
    tls: bool,
) {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let mut buf = Vec::new();
    let mut chunk = [0u8; 2048];
    while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
        match c.read(&mut chunk).await {
            Ok(0) | Err(_) => return,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
    }
    let head = String::from_utf8_lossy(&buf).to_string();
    let header = |name: &str| {
        head.lines().find_map(|l| {
            let (k, v) = l.split_once(':')?;
            k.eq_ignore_ascii_case(name).then(|| v.trim().to_string())
        })
    };
    let request = (local, header("host").unwrap_or_default(), header("authorization"));
    let to_index = request.1.split(':').next() == Some(PACKAGE_INDEX);
    {
        let mut s = seen.lock().unwrap();
        let list = if tls { &mut s.https } else { &mut s.http };
        list.push(request);
    }
    let path = head.split_whitespace().nth(1).unwrap_or("/").to_string();
    let (status, kind, body) = match (to_index, to_index.then(|| package_index(&path)).flatten()) {
        (true, Some((kind, body))) => ("200 OK", kind, body),
        (true, None) => ("404 Not Found", "text/plain", b"no such package\n".to_vec()),
        (false, _) => ("200 OK", "text/plain", format!("hello from {local}\n").into_bytes()),
    };
    let head = format!(
        "HTTP/1.1 {status}\r\nContent-Type: {kind}\r\nContent-Length: {}\r\nConnection: close\r\n\r\n",
        body.len()
    );
    let _ = c.write_all(head.as_bytes()).await;
    let _ = c.write_all(&body).await;
    let _ = c.shutdown().await;
}

fn local_v4(c: &tokio::net::TcpStream) -> Ipv4Addr {
    match c.local_addr().expect("local").ip() {
        std::net::IpAddr::V4(v4) => v4,
        other => panic!("{other}"),
    }
}

/// Links the node's namespace to the internet's: the node at 198.51.100.254 (and a private
/// address), routing everything there; the internet holds the servers' addresses, the metadata
/// address and the inside's.
pub fn wire(node: &Netns, internet: &Netns) {
    let tag = format!("{:05x}", rand::random::<u32>() & 0xf_ffff);
    let (a, b) = (format!("ktn{tag}"), format!("kti{tag}"));
    ip(&["link", "add", &a, "netns", &node.0, "type", "veth", "peer", "name", &b, "netns", &internet.0]);
    ip(&["-n", &node.0, "addr", "add", &format!("{NODE_IP}/24"), "dev", &a]);
    ip(&["-n", &node.0, "addr", "add", &format!("{NODE_PRIVATE_IP}/32"), "dev", &a]);
    ip(&["-n", &node.0, "link", "set", &a, "up"]);
    ip(&["-n", &node.0, "route", "add", "default", "via", &ALLOWED_IP.to_string()]);
    for addr in [ALLOWED_IP, REFUSED_IP, RESOLVER_IP] {
        ip(&["-n", &internet.0, "addr", "add", &format!("{addr}/24"), "dev", &b]);
    }
    for addr in std::iter::once(METADATA_IP).chain(INSIDE_IPS) {
        ip(&["-n", &internet.0, "addr", "add", &format!("{addr}/32"), "dev", &b]);
    }
    ip(&["-n", &internet.0, "link", "set", &b, "up"]);
    ip(&["-n", &internet.0, "route", "add", "default", "via", &NODE_IP.to_string()]);
}

/// A service of the node itself (as the runtime's or the API's port would be), on every
/// address of the node's namespace; counts its connections.
pub fn serve_node_service(node: &Netns) -> Arc<Mutex<u32>> {
    let hits = Arc::new(Mutex::new(0));
    let path = node.path();
    let (tx, rx) = std::sync::mpsc::channel();
    let h = hits.clone();
    std::thread::spawn(move || {
        enter(&path);
        let l = std::net::TcpListener::bind("0.0.0.0:7444").expect("7444");
        tx.send(()).expect("ready");
        for c in l.incoming() {
            drop(c);
            *h.lock().unwrap() += 1;
        }
    });
    rx.recv_timeout(Duration::from_secs(5)).expect("node service");
    hits
}

/// A node namespace wired to a serving internet.
pub struct Testbed {
    pub node: Netns,
    pub internet: Netns,
    /// What the internet saw.
    pub seen: Arc<Mutex<Seen>>,
    /// Connections to the node's own service (port 7444 on every node address).
    pub node_hits: Arc<Mutex<u32>>,
    /// The CA of the internet's TLS certificates (for `[network] upstream_ca_file`).
    pub ca_file: std::path::PathBuf,
    _ca_dir: tempfile::TempDir,
}

impl Testbed {
    pub fn start() -> Testbed {
        let node = Netns::new("ktn-");
        let internet = Netns::new("kti-");
        wire(&node, &internet);
        let seen = Arc::new(Mutex::new(Seen::default()));
        // The internet's hosts have certificates from a CA of their own (the egress CA type,
        // a different key): the node trusts it through `upstream_ca_file`.
        let ca_dir = tempfile::tempdir().expect("tempdir");
        let ca = Arc::new(crate::net::tls::EgressCa::open(ca_dir.path(), None).expect("the internet's CA"));
        let ca_file = ca_dir.path().join("ca.crt");
        serve_internet(&internet, seen.clone(), ca);
        let node_hits = serve_node_service(&node);
        Testbed { node, internet, seen, node_hits, ca_file, _ca_dir: ca_dir }
    }

    /// The `[network]` settings of a runtime whose node side is this bed's node namespace.
    pub fn network(&self) -> crate::net::NetworkSettings {
        crate::net::NetworkSettings {
            netns: Some(self.node.0.clone()),
            dns_upstream: Some(RESOLVER_IP.to_string()),
            upstream_ca_file: Some(self.ca_file.clone()),
            ..Default::default()
        }
    }
}
