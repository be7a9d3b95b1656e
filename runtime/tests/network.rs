//! The guest network end to end: real runc sandboxes attached to a node network that lives in a
//! network namespace this test creates, and "the internet" in another: an HTTP server on two
//! addresses (`allowed.test` and `refused.test`), a TLS endpoint, a DNS resolver, and a
//! metadata address. Only loopback and these namespaces see any traffic.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::{Ipv4Addr, SocketAddr};
use std::process::Command;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use kairon_model::SandboxSpec;
use kairon_runtime::api::{CreateVmRequest, ExecRequest, PowerAction};
use kairon_runtime::egress::{EgressPolicy, SandboxConfig};
use kairon_runtime::engine::{Runtime, RuntimeConfig};
use kairon_runtime::net::NetworkSettings;
use rustix::thread::{LinkNameSpaceType, move_into_link_name_space};

const SECRET: &str = "Bearer s3cret-token-4711";
const ALLOWED_IP: Ipv4Addr = Ipv4Addr::new(198, 51, 100, 1);
const REFUSED_IP: Ipv4Addr = Ipv4Addr::new(198, 51, 100, 2);
const RESOLVER_IP: Ipv4Addr = Ipv4Addr::new(198, 51, 100, 53);
const NODE_IP: Ipv4Addr = Ipv4Addr::new(198, 51, 100, 254);
const METADATA_IP: Ipv4Addr = Ipv4Addr::new(169, 254, 169, 254);

fn ip(args: &[&str]) {
    let out = Command::new("ip").args(args).output().expect("ip");
    assert!(out.status.success(), "ip {args:?}: {}", String::from_utf8_lossy(&out.stderr));
}

/// A named network namespace, deleted on drop.
struct Netns(String);

impl Netns {
    fn new(prefix: &str) -> Netns {
        let name = format!("{prefix}{:06x}", rand::random::<u32>() & 0xff_ffff);
        ip(&["netns", "add", &name]);
        ip(&["-n", &name, "link", "set", "lo", "up"]);
        Netns(name)
    }

    fn path(&self) -> String {
        format!("/run/netns/{}", self.0)
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        let _ = Command::new("ip").args(["netns", "del", &self.0]).status();
    }
}

/// Moves the calling thread into the network namespace at `path`.
fn enter(path: &str) {
    let f = std::fs::File::open(path).expect("netns");
    move_into_link_name_space(std::os::fd::AsFd::as_fd(&f), Some(LinkNameSpaceType::Network)).expect("setns");
}

/// What "the internet" saw.
#[derive(Default)]
struct Seen {
    /// (address the request came to, Host header, Authorization header)
    http: Vec<(Ipv4Addr, String, Option<String>)>,
    /// (address, SNI name)
    tls: Vec<(Ipv4Addr, Option<String>)>,
    /// Names asked.
    dns: Vec<String>,
    /// Connections to any other port.
    other: Vec<(Ipv4Addr, u16)>,
}

/// Name → address the test resolver answers.
fn zone() -> BTreeMap<&'static str, Ipv4Addr> {
    BTreeMap::from([
        ("allowed.test", ALLOWED_IP),
        ("refused.test", REFUSED_IP),
        ("a.wild.test", ALLOWED_IP),
        ("wild.test", ALLOWED_IP),
        ("allowed.test.evil.test", REFUSED_IP),
        ("meta.test", METADATA_IP),
        ("node.test", NODE_IP),
    ])
}

/// Starts the internet's servers on a thread inside `ns`; they live as long as the process.
fn serve_internet(ns: &Netns, seen: Arc<Mutex<Seen>>) {
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
            ready_tx.send(()).expect("ready");
            let s = seen.clone();
            tokio::spawn(async move {
                loop {
                    let (mut c, _) = http.accept().await.expect("accept");
                    let local = local_v4(&c);
                    let s = s.clone();
                    tokio::spawn(async move {
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
                        s.lock().unwrap().http.push((
                            local,
                            header("host").unwrap_or_default(),
                            header("authorization"),
                        ));
                        let body = format!("hello from {local}\n");
                        let resp = format!(
                            "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                            body.len()
                        );
                        let _ = c.write_all(resp.as_bytes()).await;
                    });
                }
            });
            let s = seen.clone();
            tokio::spawn(async move {
                loop {
                    let (mut c, _) = tls.accept().await.expect("accept");
                    let local = local_v4(&c);
                    let s = s.clone();
                    tokio::spawn(async move {
                        use tokio::io::{AsyncReadExt, AsyncWriteExt};
                        let mut buf = vec![0u8; 4096];
                        let n = c.read(&mut buf).await.unwrap_or(0);
                        s.lock().unwrap().tls.push((local, kairon_runtime::net::proxy::sni(&buf[..n])));
                        let _ = c.write_all(format!("tls-ok from {local}\n").as_bytes()).await;
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
                let Some((name, qtype, end)) = kairon_runtime::net::dns::question(q) else { continue };
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

fn local_v4(c: &tokio::net::TcpStream) -> Ipv4Addr {
    match c.local_addr().expect("local").ip() {
        std::net::IpAddr::V4(v4) => v4,
        other => panic!("{other}"),
    }
}

/// Links the node's namespace to the internet's: the node at 198.51.100.254, routing
/// everything there; the internet holds the servers' addresses and the metadata address.
fn wire(node: &Netns, internet: &Netns) {
    let tag = format!("{:05x}", rand::random::<u32>() & 0xf_ffff);
    let (a, b) = (format!("ktn{tag}"), format!("kti{tag}"));
    ip(&["link", "add", &a, "netns", &node.0, "type", "veth", "peer", "name", &b, "netns", &internet.0]);
    ip(&["-n", &node.0, "addr", "add", &format!("{NODE_IP}/24"), "dev", &a]);
    ip(&["-n", &node.0, "link", "set", &a, "up"]);
    ip(&["-n", &node.0, "route", "add", "default", "via", &ALLOWED_IP.to_string()]);
    for addr in [ALLOWED_IP, REFUSED_IP, RESOLVER_IP] {
        ip(&["-n", &internet.0, "addr", "add", &format!("{addr}/24"), "dev", &b]);
    }
    ip(&["-n", &internet.0, "addr", "add", &format!("{METADATA_IP}/32"), "dev", &b]);
    ip(&["-n", &internet.0, "link", "set", &b, "up"]);
    ip(&["-n", &internet.0, "route", "add", "default", "via", &NODE_IP.to_string()]);
}

/// A service of the node itself (as the runtime's or the API's port would be), on every
/// address of the node's namespace; counts its connections.
fn serve_node_service(node: &Netns) -> Arc<Mutex<u32>> {
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

fn sh(script: &str) -> ExecRequest {
    ExecRequest {
        command: vec!["sh".into(), "-c".into(), script.into()],
        timeout_seconds: Some(20),
        ..Default::default()
    }
}

fn sandbox(name: &str) -> CreateVmRequest {
    CreateVmRequest {
        name: name.into(),
        sandbox: Some(SandboxSpec { template_name: Some("busybox".into()) }),
        ..Default::default()
    }
}

/// The status line an HTTP request with `Host: host` sent to `to` gets, from inside a guest.
async fn http_status(rt: &Runtime, id: &str, to: Ipv4Addr, host: &str) -> String {
    // busybox wget sends the given Host header instead of its own; -S prints the status line,
    // a refusal's status is in its error.
    let script = format!("wget -q -S -O /dev/null --header 'Host: {host}' http://{to}/ 2>&1 | grep -m1 HTTP/");
    rt.exec(id, &sh(&script)).await.expect("exec").stdout.trim().to_string()
}

/// Plays the guest: from inside `pid`'s network namespace, sends a ClientHello for `sni` to
/// `to`:443 and returns what came back before the connection closed.
fn tls_from_guest(pid: u32, to: Ipv4Addr, sni: &str) -> String {
    let hello = kairon_runtime::net::proxy::client_hello(sni);
    std::thread::spawn(move || {
        enter(&format!("/proc/{pid}/ns/net"));
        let Ok(mut c) = std::net::TcpStream::connect_timeout(&SocketAddr::from((to, 443)), Duration::from_secs(5))
        else {
            return String::new();
        };
        c.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        c.write_all(&hello).unwrap();
        let mut out = String::new();
        let _ = c.read_to_string(&mut out);
        out
    })
    .join()
    .expect("guest thread")
}

/// The allowlist of the main test.
fn allowlist() -> Vec<String> {
    ["allowed.test", "*.wild.test", "meta.test", "node.test"].map(String::from).to_vec()
}

async fn open_runtime(
    state: &std::path::Path,
    node: &Netns,
    allow: Vec<String>,
    max_connections: Option<u32>,
) -> Runtime {
    let egress = EgressPolicy::new(&SandboxConfig {
        egress_allow_domains: allow,
        inject_authorization: BTreeMap::from([("allowed.test".into(), SECRET.into())]),
        egress_deny_cidrs: None,
    })
    .expect("policy");
    Runtime::open(RuntimeConfig {
        state_dir: state.to_path_buf(),
        node_name: format!("net-{}", node.0),
        registry: Default::default(),
        egress,
        network: NetworkSettings {
            attach_sandboxes: true,
            netns: Some(node.0.clone()),
            dns_upstream: Some(RESOLVER_IP.to_string()),
            subnet: None,
            max_connections,
        },
    })
    .await
    .expect("runtime")
}

/// A node wired to the internet, with its runtime open and its busybox template ready.
struct Testbed {
    node: Netns,
    _internet: Netns,
    seen: Arc<Mutex<Seen>>,
    node_hits: Arc<Mutex<u32>>,
    state: tempfile::TempDir,
    rt: Runtime,
}

impl Testbed {
    async fn start(allow: Vec<String>, max_connections: Option<u32>) -> Testbed {
        let node = Netns::new("ktn-");
        let internet = Netns::new("kti-");
        wire(&node, &internet);
        let seen = Arc::new(Mutex::new(Seen::default()));
        serve_internet(&internet, seen.clone());
        let node_hits = serve_node_service(&node);
        let state = tempfile::tempdir().expect("tempdir");
        let rt = open_runtime(state.path(), &node, allow, max_connections).await;
        rt.wait_template("busybox", Duration::from_secs(120)).await.expect("busybox template");
        Testbed { node, _internet: internet, seen, node_hits, state, rt }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn guests_reach_only_what_the_allowlist_allows_through_the_node() {
    let Testbed { node, _internet, seen, node_hits, state, rt } = Testbed::start(allowlist(), None).await;

    let a = rt.create(sandbox("kairon-net-a")).await.expect("sandbox a");
    let a_ip: Ipv4Addr = a.guest_ip.as_deref().expect("status.guestIP is set").parse().expect("an IPv4 address");
    let pid = a.pid.expect("pid");
    let shown = rt.exec(&a.id, &sh("ip -4 addr show eth0 2>/dev/null || ifconfig eth0")).await.expect("exec");
    assert!(shown.stdout.contains(&a_ip.to_string()), "the guest has its address: {shown:?}");
    assert!(rt.exec(&a.id, &sh("cat /etc/resolv.conf")).await.unwrap().stdout.starts_with("nameserver "));

    // The allowed host answers, by name, with the node's credential injected on the way.
    let got = rt.exec(&a.id, &sh("wget -q -O - http://allowed.test/")).await.expect("exec");
    assert_eq!(got.stdout, format!("hello from {ALLOWED_IP}\n"), "{got:?}");
    {
        let s = seen.lock().unwrap();
        let (to, host, auth) = s.http.last().expect("the server saw the request");
        assert_eq!((to, host.as_str(), auth.as_deref()), (&ALLOWED_IP, "allowed.test", Some(SECRET)));
    }

    // The refused name is not even resolved: the question never reaches the resolver.
    let refused = rt.exec(&a.id, &sh("wget -q -O - http://refused.test/")).await.expect("exec");
    assert_ne!(refused.exit_code, 0, "{refused:?}");
    let direct = rt.exec(&a.id, &sh(&format!("nslookup refused.test {RESOLVER_IP}"))).await.expect("exec");
    assert!(!direct.stdout.contains(&REFUSED_IP.to_string()), "another resolver is not reachable: {direct:?}");
    let allowed_dns = rt.exec(&a.id, &sh("nslookup allowed.test")).await.expect("exec");
    assert!(allowed_dns.stdout.contains(&ALLOWED_IP.to_string()), "{allowed_dns:?}");
    assert!(!seen.lock().unwrap().dns.iter().any(|n| n == "refused.test"), "a refused name left the node");

    // egress-check gives the answer real traffic gets, for every case of the table.
    let cases = [
        "allowed.test",
        "ALLOWED.TEST",
        "refused.test",
        "a.wild.test",
        "wild.test",
        "allowed.test.evil.test",
        "198.51.100.1",
        "169.254.169.254",
        "127.0.0.1",
        &a_ip.to_string(),
    ];
    for host in cases {
        let check = rt.egress_check(host).expect("check");
        let status = http_status(&rt, &a.id, REFUSED_IP, host).await;
        let passed = status.contains(" 200 ");
        assert_eq!(check.allow, passed, "{host}: egress-check says {check:?}, traffic got {status:?}");
        if !check.allow {
            assert!(status.contains(" 403 "), "{host}: a refusal says why ({status:?})");
        }
    }
    // Whatever address the guest sent to, an allowed name went to the address the node found.
    assert!(
        seen.lock().unwrap().http.iter().all(|(to, _, _)| *to == ALLOWED_IP),
        "the guest's destination was dialled"
    );
    // A name allowed by the list that resolves into the deny set (or to the node) is refused.
    for host in ["meta.test", "node.test"] {
        assert!(http_status(&rt, &a.id, ALLOWED_IP, host).await.contains(" 403 "), "{host}");
    }

    // TLS: the SNI name decides, and the node dials that name's address.
    let via_refused_ip = tls_from_guest(pid, REFUSED_IP, "allowed.test");
    assert_eq!(via_refused_ip, format!("tls-ok from {ALLOWED_IP}\n"));
    assert_eq!(tls_from_guest(pid, ALLOWED_IP, "refused.test"), "", "a refused SNI name gets nothing");
    {
        let s = seen.lock().unwrap();
        assert!(s.tls.iter().all(|(to, _)| *to == ALLOWED_IP), "{:?}", s.tls);
        assert_eq!(s.tls.len(), 1, "only the allowed hello arrived: {:?}", s.tls);
    }

    // Nothing else leaves: other ports, the node itself, the metadata address, another guest.
    let b = rt.create(sandbox("kairon-net-b")).await.expect("sandbox b");
    let b_ip = b.guest_ip.clone().expect("b's guest IP");
    assert_ne!(b_ip, a_ip.to_string());
    rt.start_process(
        &b.id,
        &ExecRequest { command: vec!["nc".into(), "-l".into(), "-p".into(), "9000".into()], ..Default::default() },
    )
    .await
    .expect("a listener in b");
    let control = rt.exec(&a.id, &sh(&format!("echo x | nc -w 3 {ALLOWED_IP} 80 && echo CONNECTED"))).await.unwrap();
    assert!(control.stdout.contains("CONNECTED"), "the probe works where the node lets it through: {control:?}");
    let gateway = rt.exec(&a.id, &sh("ip route | sed -n 's/^default via \\([0-9.]*\\).*/\\1/p'")).await.unwrap().stdout;
    for (target, port) in [
        (ALLOWED_IP.to_string(), 8080),
        (NODE_IP.to_string(), 7444),
        (gateway.trim().to_string(), 7444),
        (METADATA_IP.to_string(), 8080),
        (b_ip.clone(), 9000),
    ] {
        let r = rt.exec(&a.id, &sh(&format!("echo x | nc -w 3 {target} {port} && echo CONNECTED"))).await.unwrap();
        assert!(!r.stdout.contains("CONNECTED"), "the guest reached {target}:{port}: {r:?}");
    }
    assert!(seen.lock().unwrap().other.is_empty(), "another protocol left the node with an allowlist set");
    assert_eq!(*node_hits.lock().unwrap(), 0, "a guest reached the node's own service");
    let denials = rt.egress_denials();
    for reason in ["NotAllowed", "DenySet", "DnsRefused"] {
        assert!(denials.get(reason).copied().unwrap_or(0) > 0, "{reason} counted: {denials:?}");
    }

    // The guest HTTP proxy dials the guest IP: a server bound to it answers; one on the
    // guest's loopback only is out of reach, and the refusal says why.
    rt.start_process(
        &a.id,
        &sh(&format!("mkdir -p /www && echo served > /www/index.html && httpd -f -p {a_ip}:8081 -h /www")),
    )
    .await
    .expect("httpd on the guest IP");
    rt.start_process(&a.id, &sh("httpd -f -p 127.0.0.1:8082 -h /www")).await.expect("httpd on loopback");
    tokio::time::sleep(Duration::from_millis(300)).await;
    let target = rt.guest_target(&a.id, 8081).await.expect("target");
    let mut conn = kairon_runtime::proxy::dial(target, 8081).await.expect("the guest IP's server answers");
    {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        conn.write_all(b"GET /index.html HTTP/1.0\r\n\r\n").await.unwrap();
        let mut body = String::new();
        conn.read_to_string(&mut body).await.unwrap();
        assert!(body.ends_with("served\n"), "{body}");
    }
    let refused = kairon_runtime::proxy::dial(rt.guest_target(&a.id, 8082).await.unwrap(), 8082).await.unwrap_err();
    assert!(refused.to_string().contains("listen on 0.0.0.0"), "{refused}");

    // The address is kept across pause/resume and a runtime restart, and the guest still works.
    rt.power(&a.id, PowerAction::Pause, false).await.expect("pause");
    let resumed = rt.power(&a.id, PowerAction::Resume, false).await.expect("resume");
    assert_eq!(resumed.guest_ip.as_deref(), Some(a_ip.to_string().as_str()));
    drop(rt);
    let rt = open_runtime(state.path(), &node, allowlist(), None).await;
    assert_eq!(rt.get(&a.id).await.expect("adopted").guest_ip.as_deref(), Some(a_ip.to_string().as_str()));
    let again = rt.exec(&a.id, &sh("wget -q -O - http://allowed.test/")).await.expect("exec");
    assert_eq!(again.stdout, format!("hello from {ALLOWED_IP}\n"), "after a runtime restart: {again:?}");

    // 50 sandboxes get 50 different addresses; deleting them leaks no lease.
    let before = rt.guest_ips_leased();
    let mut ids = Vec::new();
    let mut ips = std::collections::BTreeSet::new();
    for i in 0..50 {
        let vm = rt.create(sandbox(&format!("kairon-net-many-{i}"))).await.expect("create");
        assert!(ips.insert(vm.guest_ip.clone().expect("guest ip")), "an address given twice");
        ids.push(vm.id);
    }
    assert!(!ips.contains(&a_ip.to_string()) && !ips.contains(&b_ip));
    for id in &ids {
        rt.delete(id).await.expect("delete");
    }
    assert_eq!(rt.guest_ips_leased(), before, "leases leaked");
    let links = Command::new("ip").args(["-n", &node.0, "-o", "link"]).output().expect("ip link");
    let links = String::from_utf8_lossy(&links.stdout);
    assert_eq!(links.matches(": kg").count(), 2, "only a's and b's links stay: {links}");
    for id in [&a.id, &b.id] {
        rt.delete(id).await.expect("delete");
    }
    assert_eq!(rt.guest_ips_leased(), 0);
}

const CONNECTION_LIMIT: u32 = 5;

/// With no allowlist every host is allowed and other protocols are routed (masqueraded), but
/// the deny set and the node itself stay out of reach; a sandbox's open connections are
/// limited. Runs beside the test above: a second node on the same host, its names and subnet its
/// own.
#[tokio::test(flavor = "multi_thread")]
async fn with_no_allowlist_other_protocols_are_routed_but_the_deny_set_is_not() {
    // Every part is bound: what `..` would leave out is dropped at once (the state dir, the
    // node's namespace).
    let Testbed { node: _node, _internet, seen, node_hits, state: _state, rt } =
        Testbed::start(vec![], Some(CONNECTION_LIMIT)).await;
    let vm = rt.create(sandbox("kairon-open-a")).await.expect("sandbox");

    let got = rt.exec(&vm.id, &sh("wget -q -O - http://refused.test/")).await.expect("exec");
    assert_eq!(got.stdout, format!("hello from {REFUSED_IP}\n"), "every name is allowed: {got:?}");
    let other = rt.exec(&vm.id, &sh(&format!("echo x | nc -w 3 {ALLOWED_IP} 8080 && echo CONNECTED"))).await.unwrap();
    assert!(other.stdout.contains("CONNECTED"), "{other:?}");
    assert_eq!(seen.lock().unwrap().other, vec![(ALLOWED_IP, 8080)]);
    for (target, port) in [(METADATA_IP, 8080), (NODE_IP, 7444)] {
        let r = rt.exec(&vm.id, &sh(&format!("echo x | nc -w 3 {target} {port} && echo CONNECTED"))).await.unwrap();
        assert!(!r.stdout.contains("CONNECTED"), "the guest reached {target}:{port}: {r:?}");
    }
    assert_eq!(seen.lock().unwrap().other.len(), 1);
    assert_eq!(*node_hits.lock().unwrap(), 0);

    // Connection N+1 is refused while N are open (the proxy holds each, waiting for a request).
    let pid = vm.pid.expect("pid");
    let opened = std::thread::spawn(move || {
        enter(&format!("/proc/{pid}/ns/net"));
        let dial = || std::net::TcpStream::connect_timeout(&SocketAddr::from((ALLOWED_IP, 80)), Duration::from_secs(3));
        let held: Vec<_> = (0..CONNECTION_LIMIT).map(|_| dial()).collect();
        let one_more = dial();
        (held.iter().filter(|c| c.is_ok()).count(), one_more.map(|_| ()).map_err(|e| e.kind()))
    })
    .join()
    .expect("guest thread");
    assert_eq!(opened.0, CONNECTION_LIMIT as usize, "the first {CONNECTION_LIMIT} connect");
    assert_eq!(opened.1, Err(std::io::ErrorKind::ConnectionRefused), "connection {} is refused", CONNECTION_LIMIT + 1);
    rt.delete(&vm.id).await.expect("delete");
}
