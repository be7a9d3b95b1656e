//! The `network` scenario: the guest network's costs, in network namespaces it creates (a
//! node and an "internet" with one HTTP server and a resolver).
//!
//! - sandbox create time attached to the guest network vs not;
//! - one HTTP request (a new connection, `Connection: close`) from a guest through the egress
//!   proxy vs the same request from the node straight to the server: the proxy's added latency
//!   (its Host check, its DNS lookup upstream, its own connection).

use std::io::{Read, Write};
use std::net::{Ipv4Addr, SocketAddr};
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use kairon_model::{NetworkMode, NetworkSpec, SandboxSpec};
use kairon_runtime::egress::{EgressPolicy, SandboxConfig};
use kairon_runtime::engine::{Runtime, RuntimeConfig};
use kairon_runtime::net::NetworkSettings;
use kairon_runtime_api::types::CreateVmRequest;
use rustix::thread::{LinkNameSpaceType, move_into_link_name_space};

use crate::{Cli, Report};

const S: &str = "network";
const SERVER: Ipv4Addr = Ipv4Addr::new(198, 51, 100, 1);
const NODE: Ipv4Addr = Ipv4Addr::new(198, 51, 100, 254);
const HOST: &str = "bench.test";

fn ip(args: &[&str]) -> Result<()> {
    let out = Command::new("ip").args(args).output().context("running ip")?;
    anyhow::ensure!(out.status.success(), "ip {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    Ok(())
}

/// A named network namespace, deleted on drop.
struct Netns(String);

impl Netns {
    fn new(prefix: &str) -> Result<Netns> {
        let name = format!("{prefix}{:06x}", rand::random::<u32>() & 0xff_ffff);
        ip(&["netns", "add", &name])?;
        ip(&["-n", &name, "link", "set", "lo", "up"])?;
        Ok(Netns(name))
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["netns", "del", &self.0]).status();
    }
}

fn enter(path: &str) -> std::io::Result<()> {
    let f = std::fs::File::open(path)?;
    move_into_link_name_space(std::os::fd::AsFd::as_fd(&f), Some(LinkNameSpaceType::Network))?;
    Ok(())
}

/// The internet: an HTTP server on port 80 and a resolver on port 53 answering `bench.test`,
/// on a thread inside `ns` for the rest of the process.
fn serve_internet(ns: &Netns) -> Result<()> {
    let path = format!("/run/netns/{}", ns.0);
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        if let Err(e) = enter(&path) {
            let _ = tx.send(Err(e.to_string()));
            return;
        }
        let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("rt");
        rt.block_on(async move {
            let (http, dns) = match (
                tokio::net::TcpListener::bind("0.0.0.0:80").await,
                tokio::net::UdpSocket::bind((SERVER, 53)).await,
            ) {
                (Ok(h), Ok(d)) => (h, d),
                (h, d) => {
                    let _ = tx.send(Err(format!("{:?} {:?}", h.err(), d.err())));
                    return;
                }
            };
            let _ = tx.send(Ok(()));
            tokio::spawn(async move {
                while let Ok((mut c, _)) = http.accept().await {
                    tokio::spawn(async move {
                        use tokio::io::{AsyncReadExt, AsyncWriteExt};
                        let mut buf = Vec::new();
                        let mut chunk = [0u8; 1024];
                        while !buf.windows(4).any(|w| w == b"\r\n\r\n") {
                            match c.read(&mut chunk).await {
                                Ok(0) | Err(_) => return,
                                Ok(n) => buf.extend_from_slice(&chunk[..n]),
                            }
                        }
                        let _ =
                            c.write_all(b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\nConnection: close\r\n\r\nok\n").await;
                    });
                }
            });
            let mut buf = [0u8; 1500];
            while let Ok((n, from)) = dns.recv_from(&mut buf).await {
                let Some((name, qtype, end)) = kairon_runtime::net::dns::question(&buf[..n]) else { continue };
                let mut reply = buf[..end].to_vec();
                reply[2] = 0x81;
                reply[3] = if name == HOST { 0x80 } else { 0x83 };
                if name == HOST && qtype == 1 {
                    reply[7] = 1;
                    reply.extend_from_slice(&[0xc0, 12, 0, 1, 0, 1, 0, 0, 0, 5, 0, 4]);
                    reply.extend_from_slice(&SERVER.octets());
                }
                let _ = dns.send_to(&reply, from).await;
            }
        });
    });
    rx.recv_timeout(Duration::from_secs(10))?.map_err(|e| anyhow::anyhow!("the internet's servers: {e}"))
}

/// `n` requests, each on a new connection to `SERVER:80`, from the network namespace at
/// `netns`; their latencies in ms.
fn requests(netns: String, n: usize) -> Result<Vec<f64>> {
    std::thread::spawn(move || -> Result<Vec<f64>> {
        enter(&netns)?;
        let mut out = Vec::with_capacity(n);
        for _ in 0..n {
            let t = Instant::now();
            let mut c = std::net::TcpStream::connect_timeout(&SocketAddr::from((SERVER, 80)), Duration::from_secs(5))?;
            c.set_nodelay(true)?;
            c.write_all(format!("GET / HTTP/1.1\r\nHost: {HOST}\r\nConnection: close\r\n\r\n").as_bytes())?;
            let mut resp = Vec::new();
            c.read_to_end(&mut resp)?;
            anyhow::ensure!(resp.starts_with(b"HTTP/1.1 200"), "{}", String::from_utf8_lossy(&resp));
            out.push(t.elapsed().as_secs_f64() * 1000.0);
        }
        Ok(out)
    })
    .join()
    .map_err(|_| anyhow::anyhow!("the request thread panicked"))?
}

fn sandbox(name: &str, attach: bool) -> CreateVmRequest {
    let mode = if attach { NetworkMode::Tap } else { NetworkMode::None };
    CreateVmRequest {
        name: name.into(),
        sandbox: Some(SandboxSpec { template_name: Some("busybox".into()) }),
        network: Some(NetworkSpec { mode, ..Default::default() }),
        ..Default::default()
    }
}

pub async fn run(cli: &Cli, report: &mut Report) -> Result<()> {
    let node = Netns::new("kbn-")?;
    let internet = Netns::new("kbi-")?;
    let (a, b) = (format!("kbn{}", &node.0[4..]), format!("kbi{}", &internet.0[4..]));
    ip(&["link", "add", &a, "netns", &node.0, "type", "veth", "peer", "name", &b, "netns", &internet.0])?;
    ip(&["-n", &node.0, "addr", "add", &format!("{NODE}/24"), "dev", &a])?;
    ip(&["-n", &node.0, "link", "set", &a, "up"])?;
    ip(&["-n", &node.0, "route", "add", "default", "via", &SERVER.to_string()])?;
    ip(&["-n", &internet.0, "addr", "add", &format!("{SERVER}/24"), "dev", &b])?;
    ip(&["-n", &internet.0, "link", "set", &b, "up"])?;
    ip(&["-n", &internet.0, "route", "add", "default", "via", &NODE.to_string()])?;
    serve_internet(&internet)?;

    let dir = tempfile::tempdir()?;
    let egress = EgressPolicy::new(&SandboxConfig { egress_allow_domains: vec![HOST.into()], ..Default::default() })?;
    let rt = Runtime::open(RuntimeConfig {
        state_dir: dir.path().to_path_buf(),
        node_name: format!("bench-{}", node.0),
        registry: Default::default(),
        egress,
        network: NetworkSettings {
            attach_sandboxes: false,
            netns: Some(node.0.clone()),
            dns_upstream: Some(SERVER.to_string()),
            subnet: None,
            max_connections: None,
        },
    })
    .await
    .map_err(|e| anyhow::anyhow!("opening the runtime (needs root, runc, iproute2, nftables): {e}"))?;
    rt.wait_template("busybox", Duration::from_secs(120)).await.map_err(|e| anyhow::anyhow!("{e}"))?;
    let n = cli.sandboxes.unwrap_or(crate::DEFAULT_SANDBOXES);

    // Create time, alternating so both see the same machine.
    let (mut with, mut without, mut ids) = (Vec::new(), Vec::new(), Vec::new());
    for i in 0..n {
        for attach in [true, false] {
            let t = Instant::now();
            let vm = rt
                .create(sandbox(&format!("bench-net-{i}-{attach}"), attach))
                .await
                .map_err(|e| anyhow::anyhow!("{e}"))?;
            let ms = t.elapsed().as_secs_f64() * 1000.0;
            if attach {
                with.push(ms);
            } else {
                without.push(ms);
            }
            ids.push(vm.id);
        }
    }
    report.latencies(S, "create, attached to the guest network", &mut with);
    report.latencies(S, "create, not attached", &mut without);

    // A request through the proxy (from a guest) against the same request from the node.
    let guest = rt.list().await.into_iter().find(|v| v.guest_ip.is_some()).context("an attached sandbox")?;
    let pid = guest.pid.context("its pid")?;
    let samples = (n * 10).max(20);
    let mut proxied = requests(format!("/proc/{pid}/ns/net"), samples)?;
    let mut direct = requests(format!("/run/netns/{}", node.0), samples)?;
    report.latencies(S, "HTTP request from a guest, through the egress proxy", &mut proxied);
    report.latencies(S, "HTTP request from the node, direct", &mut direct);
    let added = crate::percentile(&proxied, 50.0) - crate::percentile(&direct, 50.0);
    report.add(S, "egress proxy added latency p50", added, "ms");
    for id in ids {
        rt.delete(&id).await.map_err(|e| anyhow::anyhow!("{e}"))?;
    }
    if rt.guest_ips_leased() != 0 {
        report.anomaly(format!("{} guest IPs still leased after every sandbox was deleted", rt.guest_ips_leased()));
    }
    Ok(())
}
