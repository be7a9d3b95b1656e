//! The `network` scenario: the guest network's costs, in the network namespaces of
//! `kairon_runtime::net::testbed` (a node and an "internet" with an HTTP server and a resolver).
//!
//! - sandbox create time attached to the guest network vs not;
//! - one HTTP request (a new connection, `Connection: close`) from a guest through the egress
//!   proxy vs the same request from the node straight to the server: the proxy's added latency
//!   (its Host check, its DNS lookup upstream, its own connection);
//! - another sandbox's exec latency while one guest floods the node's resolver and tries 30,000
//!   connections, beside the same figure on a quiet node (the bounds of `net::dns` and the
//!   per-guest connection limit keep the flood the guest's problem).

use std::io::{Read, Write};
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use kairon_model::{NetworkMode, NetworkSpec, SandboxSpec};
use kairon_runtime::egress::{EgressPolicy, SandboxConfig};
use kairon_runtime::engine::{Runtime, RuntimeConfig};
use kairon_runtime::net::NetworkSettings;
use kairon_runtime::net::testbed::{ALLOWED_IP as SERVER, RESOLVER_IP, Testbed, enter};
use kairon_runtime_api::types::{CreateVmRequest, ExecRequest};

use crate::{Cli, Report};

const S: &str = "network";
const HOST: &str = "allowed.test";

/// `n` requests, each on a new connection to `SERVER:80`, from the network namespace at
/// `netns`; their latencies in ms.
fn requests(netns: String, n: usize) -> Result<Vec<f64>> {
    std::thread::spawn(move || -> Result<Vec<f64>> {
        enter(&netns);
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

/// What one flooding guest sent: DNS questions, connections tried, held and refused.
#[derive(Debug, Default)]
struct Flood {
    questions: u64,
    tried: u64,
    held: usize,
    refused: u64,
}

/// From the network namespace at `netns`, until `stop`: DNS questions for an allowed name as
/// fast as it can send them, and up to 30,000 connections to the server's port 80, kept open.
fn flood(netns: String, stop: std::sync::Arc<std::sync::atomic::AtomicBool>) -> std::thread::JoinHandle<Flood> {
    std::thread::spawn(move || {
        enter(&netns);
        let mut f = Flood::default();
        let Ok(dns) = std::net::UdpSocket::bind(("0.0.0.0", 0)) else { return f };
        let _ = dns.set_nonblocking(true);
        let mut held = Vec::new();
        let mut buf = [0u8; 512];
        while !stop.load(std::sync::atomic::Ordering::Relaxed) {
            for id in 0..200u16 {
                let q = kairon_runtime::net::dns::query(id, HOST, 1);
                if dns.send_to(&q, (RESOLVER_IP, 53)).is_ok() {
                    f.questions += 1;
                }
            }
            while dns.recv(&mut buf).is_ok() {}
            for _ in 0..100 {
                if f.tried >= 30_000 {
                    break;
                }
                f.tried += 1;
                match std::net::TcpStream::connect_timeout(&SocketAddr::from((SERVER, 80)), Duration::from_secs(1)) {
                    Ok(c) => held.push(c),
                    Err(_) => f.refused += 1,
                }
            }
        }
        f.held = held.len();
        f
    })
}

/// `n` execs of `true` in instance `id`; their latencies in ms.
async fn execs(rt: &Runtime, id: &str, n: usize) -> Result<Vec<f64>> {
    let req = ExecRequest { command: vec!["true".into()], ..Default::default() };
    let mut out = Vec::with_capacity(n);
    for _ in 0..n {
        let t = Instant::now();
        rt.exec(id, &req).await.map_err(|e| anyhow::anyhow!("exec: {e}"))?;
        out.push(t.elapsed().as_secs_f64() * 1000.0);
    }
    Ok(out)
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
    // The test bed's setup panics on failure, as a test's would: run it where that is an error.
    let bed = tokio::task::spawn_blocking(Testbed::start).await.context("setting up the network namespaces")?;

    let dir = tempfile::tempdir()?;
    let egress = EgressPolicy::new(&SandboxConfig { egress_allow_domains: vec![HOST.into()], ..Default::default() })?;
    let rt = Runtime::open(RuntimeConfig {
        state_dir: dir.path().to_path_buf(),
        node_name: format!("bench-{}", bed.node.0),
        registry: Default::default(),
        egress,
        network: NetworkSettings { attach_sandboxes: Some(false), ..bed.network() },
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
    let mut direct = requests(bed.node.path(), samples)?;
    report.latencies(S, "HTTP request from a guest, through the egress proxy", &mut proxied);
    report.latencies(S, "HTTP request from the node, direct", &mut direct);
    let added = crate::percentile(&proxied, 50.0) - crate::percentile(&direct, 50.0);
    report.add(S, "egress proxy added latency p50", added, "ms");

    // Another tenant's exec, quiet and while one guest floods the node.
    let victim = rt.list().await.into_iter().find(|v| v.id != guest.id).context("a second sandbox")?;
    let mut quiet = execs(&rt, &victim.id, samples).await?;
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let flooding = flood(format!("/proc/{pid}/ns/net"), stop.clone());
    tokio::time::sleep(Duration::from_millis(500)).await;
    let mut during = execs(&rt, &victim.id, samples).await?;
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let f = tokio::task::spawn_blocking(move || flooding.join())
        .await?
        .map_err(|_| anyhow::anyhow!("the flood panicked"))?;
    report.latencies(S, "another sandbox's exec, quiet node", &mut quiet);
    report.latencies(S, "another sandbox's exec, one guest flooding", &mut during);
    report.add(S, "flood: DNS questions sent", f.questions as f64, "count");
    report.add(S, "flood: connections tried", f.tried as f64, "count");
    report.add(S, "flood: connections held (the per-guest limit)", f.held as f64, "count");
    report.add(S, "flood: connections refused", f.refused as f64, "count");
    for id in ids {
        rt.delete(&id).await.map_err(|e| anyhow::anyhow!("{e}"))?;
    }
    if rt.guest_ips_leased() != 0 {
        report.anomaly(format!("{} guest IPs still leased after every sandbox was deleted", rt.guest_ips_leased()));
    }
    Ok(())
}
