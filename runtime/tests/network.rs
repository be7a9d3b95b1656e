//! The guest network end to end: real runc sandboxes attached to a node network that lives in a
//! network namespace this test creates, and "the internet" in another: an HTTP server on two
//! addresses (`allowed.test` and `refused.test`), a TLS endpoint, a DNS resolver, and a
//! metadata address. Only loopback and these namespaces see any traffic.

use std::collections::BTreeMap;
use std::io::{Read, Write};
use std::net::{Ipv4Addr, SocketAddr};
use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

use kairon_model::{EgressMode, EgressSpec, NetworkSpec, SandboxSpec};
use kairon_runtime::api::{CreateVmRequest, ExecRequest, PowerAction};
use kairon_runtime::egress::{EgressPolicy, SandboxConfig};
use kairon_runtime::engine::{Runtime, RuntimeConfig};
use kairon_runtime::net::NetworkSettings;
use kairon_runtime::net::testbed::{
    self, ALLOWED_IP, CLUSTER_CIDR, INSIDE_IPS, METADATA_IP, NODE_IP, NODE_PRIVATE_IP, REFUSED_IP, RESOLVER_IP, enter,
};

const SECRET: &str = "Bearer s3cret-token-4711";
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

/// The kept refusal for `host`, waited for.
async fn eventually_denied(rt: &Runtime, host: &str) -> kairon_runtime::api::EgressDenial {
    for _ in 0..50 {
        let all = rt.egress_denials_since(0, Duration::ZERO).await;
        if let Some(d) = all.denials.into_iter().find(|d| d.host == host) {
            return d;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    panic!("no refusal for {host}");
}

/// `ip ARGS` inside the network namespace of process `pid` (as the host's root).
fn ip_in(pid: u32, args: &[&str]) {
    let out = std::process::Command::new("nsenter")
        .arg(format!("--net=/proc/{pid}/ns/net"))
        .arg("ip")
        .args(args)
        .output()
        .expect("nsenter");
    assert!(out.status.success(), "ip {args:?}: {}", String::from_utf8_lossy(&out.stderr));
}

/// Plays the guest: from inside `pid`'s network namespace, sends a bare ClientHello for `sni`
/// to `to`:443 and waits for the connection to end.
fn hello_from_guest(pid: u32, to: Ipv4Addr, sni: &str) {
    let hello = kairon_runtime::net::proxy::client_hello(sni);
    std::thread::spawn(move || {
        enter(&format!("/proc/{pid}/ns/net"));
        let Ok(mut c) = std::net::TcpStream::connect_timeout(&SocketAddr::from((to, 443)), Duration::from_secs(5))
        else {
            return;
        };
        c.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
        c.write_all(&hello).unwrap();
        let _ = c.read_to_end(&mut Vec::new());
    })
    .join()
    .expect("guest thread")
}

/// Plays the guest's HTTP client: sends `request` as written to `to`:80 from inside `pid`'s
/// network namespace; the answer.
fn raw_http_from_guest(pid: u32, to: Ipv4Addr, request: &str) -> String {
    let request = request.to_string();
    std::thread::spawn(move || {
        enter(&format!("/proc/{pid}/ns/net"));
        let mut c = std::net::TcpStream::connect_timeout(&SocketAddr::from((to, 80)), Duration::from_secs(5))
            .expect("the proxy takes the connection");
        c.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        c.write_all(request.as_bytes()).unwrap();
        let mut out = Vec::new();
        let _ = c.read_to_end(&mut out);
        String::from_utf8_lossy(&out).into_owned()
    })
    .join()
    .expect("guest thread")
}

/// Plays the guest's HTTPS client: trusting only `bundle` (PEM, what the guest was given),
/// `GET /` from `host` at `to`:443 from inside `pid`'s network namespace; the answer.
fn https_from_guest(pid: u32, to: Ipv4Addr, host: &str, bundle: &str) -> Result<String, String> {
    https_request_from_guest(pid, to, host, host, bundle)
}

/// The same, under TLS server name `sni` with `Host: host`.
fn https_request_from_guest(pid: u32, to: Ipv4Addr, sni: &str, host: &str, bundle: &str) -> Result<String, String> {
    use rustls::pki_types::pem::PemObject;
    let mut roots = rustls::RootCertStore::empty();
    for cert in rustls::pki_types::CertificateDer::pem_slice_iter(bundle.as_bytes()).flatten() {
        let _ = roots.add(cert);
    }
    let config = rustls::ClientConfig::builder_with_provider(Arc::new(rustls::crypto::ring::default_provider()))
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    let (sni, host) = (sni.to_string(), host.to_string());
    std::thread::spawn(move || {
        enter(&format!("/proc/{pid}/ns/net"));
        let name = rustls::pki_types::ServerName::try_from(sni).map_err(|e| e.to_string())?;
        let mut conn = rustls::ClientConnection::new(Arc::new(config), name).map_err(|e| e.to_string())?;
        let mut tcp = std::net::TcpStream::connect_timeout(&SocketAddr::from((to, 443)), Duration::from_secs(5))
            .map_err(|e| e.to_string())?;
        tcp.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        let mut tls = rustls::Stream::new(&mut conn, &mut tcp);
        tls.write_all(format!("GET / HTTP/1.1\r\nHost: {host}\r\nConnection: close\r\n\r\n").as_bytes())
            .map_err(|e| e.to_string())?;
        let mut out = Vec::new();
        let _ = tls.read_to_end(&mut out);
        Ok(String::from_utf8_lossy(&out).into_owned())
    })
    .join()
    .expect("guest thread")
}

/// The allowlist of the main test.
fn allowlist() -> Vec<String> {
    ["allowed.test", "*.wild.test", "meta.test", "node.test"].map(String::from).to_vec()
}

async fn open_runtime(state: &std::path::Path, bed: &testbed::Testbed, allow: Vec<String>, limits: Limits) -> Runtime {
    let egress = EgressPolicy::new(&SandboxConfig {
        egress_allow_domains: allow,
        inject_authorization: BTreeMap::from([("allowed.test".into(), SECRET.into())]),
        egress_deny_cidrs: None,
    })
    .and_then(|p| p.deny_also(&[CLUSTER_CIDR.to_string()]))
    .expect("policy");
    Runtime::open(RuntimeConfig {
        state_dir: state.to_path_buf(),
        node_name: format!("net-{}", bed.node.0),
        registry: Default::default(),
        egress,
        network: NetworkSettings {
            attach_sandboxes: Some(true),
            max_connections: limits.max_connections,
            bandwidth_mbit: limits.bandwidth_mbit,
            ..bed.network()
        },
    })
    .await
    .expect("runtime")
}

/// The per-sandbox limits of a node.
#[derive(Clone, Copy, Default)]
struct Limits {
    max_connections: Option<u32>,
    bandwidth_mbit: Option<u32>,
}

/// A runtime's state dir whose sandboxes and VMs go with it, also when a test fails.
struct State(tempfile::TempDir);

impl State {
    fn path(&self) -> &std::path::Path {
        self.0.path()
    }
}

impl Drop for State {
    fn drop(&mut self) {
        kairon_runtime::vm::kill_all_under(self.0.path());
        kairon_runtime::sandbox::remove_all_under(self.0.path());
    }
}

/// The test bed with a runtime open on its node and the busybox template ready.
struct Node {
    bed: testbed::Testbed,
    state: State,
    rt: Runtime,
}

impl Node {
    async fn start(allow: Vec<String>, limits: Limits) -> Node {
        let bed = testbed::Testbed::start();
        let state = State(tempfile::tempdir().expect("tempdir"));
        let rt = open_runtime(state.path(), &bed, allow, limits).await;
        rt.wait_template("busybox", Duration::from_secs(120)).await.expect("busybox template");
        Node { bed, state, rt }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn guests_reach_only_what_the_allowlist_allows_through_the_node() {
    let Node { bed, state, rt } = Node::start(allowlist(), Limits::default()).await;
    let (seen, node_hits) = (bed.seen.clone(), bed.node_hits.clone());

    let a = rt.create(sandbox("kairon-net-a")).await.expect("sandbox a");
    let a_ip: Ipv4Addr = a.guest_ip.as_deref().expect("status.guestIP is set").parse().expect("an IPv4 address");
    let pid = a.pid.expect("pid");
    let shown = rt.exec(&a.id, &sh("ip -4 addr show eth0 2>/dev/null || ifconfig eth0")).await.expect("exec");
    assert!(shown.stdout.contains(&a_ip.to_string()), "the guest has its address: {shown:?}");
    assert!(rt.exec(&a.id, &sh("cat /etc/resolv.conf")).await.unwrap().stdout.starts_with("nameserver "));

    // The allowed host answers, by name; its credential never travels in clear text (it is
    // injected on the TLS leg only, below).
    let got = rt.exec(&a.id, &sh("wget -q -O - http://allowed.test/")).await.expect("exec");
    assert_eq!(got.stdout, format!("hello from {ALLOWED_IP}\n"), "{got:?}");
    {
        let s = seen.lock().unwrap();
        let (to, host, auth) = s.http.last().expect("the server saw the request");
        assert_eq!((to, host.as_str(), auth.as_deref()), (&ALLOWED_IP, "allowed.test", None));
    }
    // The attack: the URI names the allowed host, the Host header another one on the same
    // address (a shared host or CDN routes on Host). Refused, and counted.
    let smuggled = raw_http_from_guest(
        pid,
        ALLOWED_IP,
        "GET http://allowed.test/ HTTP/1.1\r\nHost: evil.test\r\nConnection: close\r\n\r\n",
    );
    assert!(smuggled.starts_with("HTTP/1.1 403"), "{smuggled}");
    assert!(smuggled.contains("Host header names evil.test"), "the refusal says why: {smuggled}");
    let denial = eventually_denied(&rt, "allowed.test").await;
    assert_eq!(denial.reason, "HostMismatch", "{denial:?}");
    let doubled = raw_http_from_guest(
        pid,
        ALLOWED_IP,
        "GET / HTTP/1.1\r\nHost: allowed.test\r\nHost: evil.test\r\nConnection: close\r\n\r\n",
    );
    assert!(doubled.starts_with("HTTP/1.1 403") || doubled.starts_with("HTTP/1.1 400"), "{doubled}");
    // The absolute form naming one host is sent with the Host the proxy judged.
    let absolute =
        raw_http_from_guest(pid, REFUSED_IP, "GET http://allowed.test/ HTTP/1.1\r\nConnection: close\r\n\r\n");
    assert!(absolute.starts_with("HTTP/1.1 200"), "{absolute}");
    assert_eq!(seen.lock().unwrap().http.last().map(|r| r.1.clone()).as_deref(), Some("allowed.test"));
    // The guest never sees the credential: not in the answer (headers and body), its
    // environment, its init's environment or any file of its root.
    let needle = SECRET.split_whitespace().last().expect("token");
    let dump = rt
        .exec(
            &a.id,
            &sh("wget -S -O - http://allowed.test/ 2>&1; env; tr '\\0' '\\n' < /proc/1/environ; \
                 find / -xdev -type f 2>/dev/null | xargs grep -l s3cret 2>/dev/null; echo dumped"),
        )
        .await
        .expect("exec");
    assert!(dump.stdout.contains("dumped") && dump.stdout.contains("HTTP/1.1 200"), "{dump:?}");
    assert!(!dump.stdout.contains(needle) && !dump.stderr.contains(needle), "the guest saw the credential: {dump:?}");

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

    // TLS: the SNI name decides, and the node dials that name's address (a host with no
    // credential to inject is passed through untouched).
    hello_from_guest(pid, REFUSED_IP, "a.wild.test");
    hello_from_guest(pid, ALLOWED_IP, "refused.test");
    {
        let s = seen.lock().unwrap();
        assert_eq!(s.tls, vec![(ALLOWED_IP, Some("a.wild.test".to_string()))], "only the allowed hello arrived");
    }

    // HTTPS to a host with a credential: the node answers with a certificate the guest trusts
    // (the bundle it was given, named by the usual variables), injects the credential and
    // talks TLS to the host, verifying it.
    let env = rt.exec(&a.id, &sh("env")).await.unwrap().stdout;
    for var in kairon_runtime::net::tls::GUEST_BUNDLE_ENV {
        assert!(env.contains(&format!("{var}={}", kairon_runtime::net::tls::GUEST_BUNDLE_PATH)), "{var}: {env}");
    }
    let bundle = rt.exec(&a.id, &sh(&format!("cat {}", kairon_runtime::net::tls::GUEST_BUNDLE_PATH))).await.unwrap();
    assert!(bundle.stdout.contains("BEGIN CERTIFICATE"), "{bundle:?}");
    let answer = https_from_guest(pid, REFUSED_IP, "allowed.test", &bundle.stdout).expect("HTTPS through the node");
    assert!(answer.ends_with(&format!("hello from {ALLOWED_IP}\n")), "{answer}");
    {
        let s = seen.lock().unwrap();
        let (to, host, auth) = s.https.last().expect("the host saw the request over TLS");
        assert_eq!((to, host.as_str(), auth.as_deref()), (&ALLOWED_IP, "allowed.test", Some(SECRET)));
    }
    // The same attack on the TLS leg: SNI names the allowed host, the Host header the other.
    let smuggled = https_request_from_guest(pid, REFUSED_IP, "allowed.test", "evil.test", &bundle.stdout)
        .expect("the node answers the TLS");
    assert!(smuggled.starts_with("HTTP/1.1 403"), "{smuggled}");
    {
        // `evil.test` never saw the secret (nor any request); `allowed.test` did, over TLS only.
        let s = seen.lock().unwrap();
        assert!(!s.http.iter().chain(&s.https).any(|(_, host, _)| host == "evil.test"), "evil.test was reached");
        assert!(!s.http.iter().any(|(_, _, auth)| auth.is_some()), "a credential went in clear text");
    }
    // egress-check gives the answer real HTTPS gets too, for the same table: a host with a
    // credential through the node's TLS, any other by its hello passed on or not.
    for host in cases {
        let check = rt.egress_check(host).expect("check");
        let passed = if check.credential.is_some() {
            https_from_guest(pid, REFUSED_IP, host, &bundle.stdout).is_ok_and(|a| a.starts_with("HTTP/1.1 200"))
        } else {
            let before = seen.lock().unwrap().tls.len();
            hello_from_guest(pid, REFUSED_IP, host);
            seen.lock().unwrap().tls.len() > before
        };
        assert_eq!(check.allow, passed, "{host} over TLS: egress-check says {check:?}");
    }
    // A client that trusts only the public store cannot be fooled by the node's certificate.
    let no_bundle = https_from_guest(pid, REFUSED_IP, "allowed.test", "");
    assert!(no_bundle.is_err() || no_bundle.as_deref() == Ok(""), "{no_bundle:?}");

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
    // A guest cannot pass for another: a DNS question from a's link with b's address (put there
    // by root on the host, as a guest cannot) is dropped, so no refusal is charged to b; the
    // same question from a's own address is charged to a.
    ip_in(pid, &["addr", "add", &format!("{b_ip}/32"), "dev", "eth0"]);
    let spoofed: Ipv4Addr = b_ip.parse().unwrap();
    std::thread::spawn(move || {
        enter(&format!("/proc/{pid}/ns/net"));
        for (from, name) in [(spoofed, "spoofed-probe.test"), (a_ip, "own-probe.test")] {
            let s = std::net::UdpSocket::bind((from, 0)).expect("bind");
            s.send_to(&kairon_runtime::net::dns::query(7, name, 1), (RESOLVER_IP, 53)).expect("send");
        }
    })
    .join()
    .expect("probing thread");
    ip_in(pid, &["addr", "del", &format!("{b_ip}/32"), "dev", "eth0"]);
    let charged = eventually_denied(&rt, "own-probe.test").await;
    assert_eq!(charged.instance, a.id.as_str(), "the own-address probe is a's");
    let all = rt.egress_denials_since(0, Duration::ZERO).await;
    assert!(!all.denials.iter().any(|d| d.host == "spoofed-probe.test"), "a spoofed packet was served: {all:?}");
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

    // Bounded work, whatever a guest sends: a request head that never ends is cut at the
    // header-read timeout; a flood of DNS questions leaves the node's threads and descriptors
    // flat (one upstream socket, a cap in flight per guest) and its resolver answering.
    let slow = std::thread::spawn(move || {
        enter(&format!("/proc/{pid}/ns/net"));
        let mut c = std::net::TcpStream::connect_timeout(&SocketAddr::from((ALLOWED_IP, 80)), Duration::from_secs(5))
            .expect("the proxy takes the connection");
        c.write_all(b"GET / HTTP/1.1\r\nHost: allowed.test\r\n").unwrap();
        c.set_read_timeout(Some(Duration::from_secs(40))).unwrap();
        let started = std::time::Instant::now();
        let _ = c.read_to_end(&mut Vec::new());
        started.elapsed()
    });
    let count = |dir: &str| std::fs::read_dir(dir).map(|d| d.count()).unwrap_or(0);
    let (threads_before, fds_before) = (count("/proc/self/task"), count("/proc/self/fd"));
    let flood = std::thread::spawn(move || {
        enter(&format!("/proc/{pid}/ns/net"));
        let s = std::net::UdpSocket::bind(("0.0.0.0", 0)).expect("bind");
        for id in 0..20_000u32 {
            let _ = s.send_to(&kairon_runtime::net::dns::query(id as u16, "allowed.test", 1), (RESOLVER_IP, 53));
        }
        s.set_read_timeout(Some(Duration::from_millis(500))).unwrap();
        let mut answered = 0;
        let mut buf = [0u8; 512];
        while s.recv(&mut buf).is_ok() {
            answered += 1;
        }
        answered
    });
    let (mut peak_threads, mut peak_fds) = (0, 0);
    while !flood.is_finished() {
        peak_threads = peak_threads.max(count("/proc/self/task"));
        peak_fds = peak_fds.max(count("/proc/self/fd"));
        std::thread::sleep(Duration::from_millis(2));
    }
    let answered = flood.join().expect("the flooding guest");
    eprintln!(
        "DNS flood of 20,000 questions: {answered} answered; threads {threads_before} -> peak {peak_threads}, \
         descriptors {fds_before} -> peak {peak_fds}"
    );
    assert!(answered > 0, "the resolver answered some of the flood");
    assert!(peak_threads <= threads_before + 16, "threads grew with the flood: {threads_before} -> {peak_threads}");
    assert!(peak_fds <= fds_before + 32, "descriptors grew with the flood: {fds_before} -> {peak_fds}");
    let after = rt.exec(&a.id, &sh("nslookup allowed.test")).await.expect("exec");
    assert!(after.stdout.contains(&ALLOWED_IP.to_string()), "the resolver answers after the flood: {after:?}");
    let held = slow.join().expect("the slow guest");
    let limit = kairon_runtime::net::proxy::HEADER_READ_TIMEOUT;
    assert!(held >= limit - Duration::from_secs(1) && held < limit * 3, "a head that never ends was held {held:?}");

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

    // A fork is re-identified: its own address, and it reaches the network as its parent does.
    let child = rt.fork(&a.id, "kairon-net-a-fork").await.expect("fork");
    let child_ip = child.guest_ip.clone().expect("the fork's guest IP");
    assert!(child_ip != a_ip.to_string() && child_ip != b_ip, "{child_ip}");
    let from_child = rt.exec(&child.id, &sh("wget -q -O - http://allowed.test/")).await.expect("exec");
    assert_eq!(from_child.stdout, format!("hello from {ALLOWED_IP}\n"), "{from_child:?}");
    rt.delete(&child.id).await.expect("delete the fork");

    // The address is kept across pause/resume and a runtime restart, and the guest still works.
    rt.power(&a.id, PowerAction::Pause, false).await.expect("pause");
    let resumed = rt.power(&a.id, PowerAction::Resume, false).await.expect("resume");
    assert_eq!(resumed.guest_ip.as_deref(), Some(a_ip.to_string().as_str()));
    drop(rt);
    let rt = open_runtime(state.path(), &bed, allowlist(), Limits::default()).await;
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
    let links = Command::new("ip").args(["-n", &bed.node.0, "-o", "link"]).output().expect("ip link");
    let links = String::from_utf8_lossy(&links.stdout);
    assert_eq!(links.matches(": kg").count(), 2, "only a's and b's links stay: {links}");
    for id in [&a.id, &b.id] {
        rt.delete(id).await.expect("delete");
    }
    assert_eq!(rt.guest_ips_leased(), 0);
}

const CONNECTION_LIMIT: u32 = 5;
const BANDWIDTH_MBIT: u32 = 80;
const LIMITS: Limits = Limits { max_connections: Some(CONNECTION_LIMIT), bandwidth_mbit: Some(BANDWIDTH_MBIT) };

/// With no allowlist every host is allowed and other protocols are routed (masqueraded), but
/// the deny set and the node itself stay out of reach; a sandbox's open connections are
/// limited. Runs beside the test above: a second node on the same host, its names and subnet its
/// own.
#[tokio::test(flavor = "multi_thread")]
async fn with_no_allowlist_other_protocols_are_routed_but_the_deny_set_is_not() {
    // Every part is bound: what `..` would leave out is dropped at once (the state dir, the
    // node's namespace).
    let Node { bed, state: _state, rt } = Node::start(vec![], LIMITS).await;
    let (seen, node_hits) = (bed.seen.clone(), bed.node_hits.clone());
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

    // Throughput each way is the configured rate, within 20 %.
    let (up, down) = std::thread::spawn(move || {
        enter(&format!("/proc/{pid}/ns/net"));
        let sent = 16usize << 20;
        // The connections held above leave the count as they close.
        let deadline = std::time::Instant::now() + Duration::from_secs(10);
        let mut c = loop {
            match std::net::TcpStream::connect((ALLOWED_IP, testbed::SINK_PORT)) {
                Ok(c) => break c,
                Err(_) if std::time::Instant::now() < deadline => std::thread::sleep(Duration::from_millis(100)),
                Err(e) => panic!("the connection limit did not free up: {e}"),
            }
        };
        let t = std::time::Instant::now();
        c.write_all(&vec![1u8; sent]).expect("upload");
        c.shutdown(std::net::Shutdown::Write).unwrap();
        let mut ack = String::new();
        c.read_to_string(&mut ack).unwrap();
        assert_eq!(ack.trim(), sent.to_string());
        let up = sent as f64 * 8.0 / t.elapsed().as_secs_f64() / 1e6;
        let mut c = std::net::TcpStream::connect((ALLOWED_IP, testbed::SOURCE_PORT)).expect("source");
        let t = std::time::Instant::now();
        let mut got = Vec::new();
        c.read_to_end(&mut got).unwrap();
        assert_eq!(got.len(), testbed::SOURCE_BYTES);
        (up, got.len() as f64 * 8.0 / t.elapsed().as_secs_f64() / 1e6)
    })
    .join()
    .expect("guest thread");
    eprintln!("shaped to {BANDWIDTH_MBIT} Mbit/s: upload {up:.1}, download {down:.1} Mbit/s");
    let (low, high) = (f64::from(BANDWIDTH_MBIT) * 0.8, f64::from(BANDWIDTH_MBIT) * 1.2);
    assert!((low..=high).contains(&up), "upload {up:.1} Mbit/s against {BANDWIDTH_MBIT}");
    assert!((low..=high).contains(&down), "download {down:.1} Mbit/s against {BANDWIDTH_MBIT}");

    // With no node config the inside is out of reach: every private range, shared address space,
    // link-local, Azure's host address, the cluster's own range (`--deny-cidr`) and the node's
    // addresses; by routed traffic, through the proxy by address and by a name that resolves
    // there. Checked last (the connection limit above counts this guest's connections, and
    // these would still be closing), after a control that shows the limit is not what refuses.
    let mut control = String::new();
    for _ in 0..20 {
        control = rt
            .exec(&vm.id, &sh(&format!("echo x | nc -w 3 {ALLOWED_IP} 8080 && echo CONNECTED")))
            .await
            .unwrap()
            .stdout;
        if control.contains("CONNECTED") {
            break;
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    assert!(control.contains("CONNECTED"), "the internet answers again once the held connections closed");
    let inside =
        INSIDE_IPS.iter().map(|ip| (*ip, 8080)).chain([(METADATA_IP, 8080), (NODE_IP, 7444), (NODE_PRIVATE_IP, 7444)]);
    for (target, port) in inside {
        let r = rt.exec(&vm.id, &sh(&format!("echo x | nc -w 3 {target} {port} && echo CONNECTED"))).await.unwrap();
        assert!(!r.stdout.contains("CONNECTED"), "the guest reached {target}:{port}: {r:?}");
    }
    for target in INSIDE_IPS.iter().map(|ip| ip.to_string()).chain(["inside.test".to_string()]) {
        let status = http_status(&rt, &vm.id, ALLOWED_IP, &target).await;
        assert!(status.contains(" 403 "), "HTTP to {target}: {status:?}");
    }
    {
        let s = seen.lock().unwrap();
        assert!(s.other.iter().all(|(to, _)| *to == ALLOWED_IP), "only the internet's 8080 was reached: {:?}", s.other);
        assert!(!s.http.iter().any(|(to, _, _)| INSIDE_IPS.contains(to)), "{:?}", s.http);
    }
    assert_eq!(*node_hits.lock().unwrap(), 0);
    rt.delete(&vm.id).await.expect("delete");
}

/// A Machine's own egress rule narrows the node's (here: no allowlist, everything allowed):
/// mode None reaches nothing, by name, through the proxy or routed; mode Allowlist reaches its
/// names and networks only; each refusal is kept for the Machine's Events, saying why.
#[tokio::test(flavor = "multi_thread")]
async fn a_machines_egress_rule_narrows_its_nodes_policy() {
    let Node { bed, state: _state, rt } = Node::start(vec![], Limits::default()).await;
    let seen = bed.seen.clone();
    let narrowed = |name: &str, mode: EgressMode, allow: &[&str]| CreateVmRequest {
        network: Some(NetworkSpec {
            egress: Some(EgressSpec { mode, allow: allow.iter().map(|a| a.to_string()).collect() }),
            ..Default::default()
        }),
        ..sandbox(name)
    };
    let wget = |host: &str| sh(&format!("wget -q -O - http://{host}/"));
    let routed = |to: Ipv4Addr| sh(&format!("echo x | nc -w 3 {to} 8080 && echo CONNECTED"));

    let open = rt.create(sandbox("kairon-egress-open")).await.expect("sandbox");
    let offline = rt.create(narrowed("kairon-egress-none", EgressMode::None, &[])).await.expect("sandbox");
    let only = rt
        .create(narrowed("kairon-egress-only", EgressMode::Allowlist, &["allowed.test", &format!("{REFUSED_IP}/32")]))
        .await
        .expect("sandbox");

    // The control: the node allows everything.
    let got = rt.exec(&open.id, &wget("refused.test")).await.unwrap();
    assert_eq!(got.stdout, format!("hello from {REFUSED_IP}\n"), "{got:?}");

    // None: no name resolves, no host answers through the proxy, nothing is routed.
    let got = rt.exec(&offline.id, &wget("allowed.test")).await.unwrap();
    assert_ne!(got.exit_code, 0, "{got:?}");
    let denial = eventually_denied(&rt, "allowed.test").await;
    assert_eq!(denial.instance, offline.id.to_string());
    assert!(denial.message.contains("egress.mode is None"), "{denial:?}");
    let status = http_status(&rt, &offline.id, ALLOWED_IP, "allowed.test").await;
    assert!(status.contains(" 403 "), "HTTP by address with Host allowed.test: {status:?}");
    let r = rt.exec(&offline.id, &routed(ALLOWED_IP)).await.unwrap();
    assert!(!r.stdout.contains("CONNECTED"), "{r:?}");

    // Allowlist: its name answers, another is refused saying where to add it; routed traffic
    // reaches its network and nothing else.
    let got = rt.exec(&only.id, &wget("allowed.test")).await.unwrap();
    assert_eq!(got.stdout, format!("hello from {ALLOWED_IP}\n"), "{got:?}");
    let got = rt.exec(&only.id, &wget("inside.test")).await.unwrap();
    assert_ne!(got.exit_code, 0, "{got:?}");
    let denial = eventually_denied(&rt, "inside.test").await;
    assert_eq!(denial.instance, only.id.to_string());
    assert!(denial.message.contains("spec.network.egress.allow"), "{denial:?}");
    let r = rt.exec(&only.id, &routed(ALLOWED_IP)).await.unwrap();
    assert!(!r.stdout.contains("CONNECTED"), "a name in the allowlist opens no routed traffic: {r:?}");
    let r = rt.exec(&only.id, &routed(REFUSED_IP)).await.unwrap();
    assert!(r.stdout.contains("CONNECTED"), "its CIDR is routed: {r:?}");
    assert_eq!(seen.lock().unwrap().other, vec![(REFUSED_IP, 8080)], "only the allowlist's network was reached");
    assert!(rt.egress_denials().contains_key("MachineEgress"), "{:?}", rt.egress_denials());

    // The open guest is untouched by its neighbours' rules.
    let r = rt.exec(&open.id, &routed(ALLOWED_IP)).await.unwrap();
    assert!(r.stdout.contains("CONNECTED"), "{r:?}");
    for vm in [open, offline, only] {
        rt.delete(&vm.id).await.expect("delete");
    }
}

/// A VM on the guest network (real QEMU, TCG): it takes its address from the node, reaches the
/// allowed host by name and nothing else, and its server answers at its guest IP from the
/// node's side (as the HTTP proxy, port-forward and SSH reach it).
#[tokio::test(flavor = "multi_thread")]
async fn a_vm_on_the_guest_network_is_held_to_the_allowlist() {
    let Node { bed, state: _state, rt } = Node::start(allowlist(), Limits::default()).await;
    let image = rt.ensure_default_image().await.expect("the default VM image");
    let req = CreateVmRequest {
        name: "kairon-net-vm".into(),
        image: Some(kairon_model::ImageSource { path: image.to_string_lossy().into_owned() }),
        network: Some(kairon_model::NetworkSpec { mode: kairon_model::NetworkMode::Tap, ..Default::default() }),
        ..Default::default()
    };
    let vm = rt.create(req).await.expect("an attached VM");
    let ip = vm.guest_ip.clone().expect("the VM's guest IP");
    let bb = "/usr/lib/kairon/busybox";
    let shown = rt.exec(&vm.id, &sh(&format!("{bb} ip -4 addr show eth0"))).await.expect("exec in the VM");
    assert!(shown.stdout.contains(&format!("{ip}/32")), "the guest took its address: {shown:?}");

    let got = rt.exec(&vm.id, &sh(&format!("{bb} wget -q -O - http://allowed.test/"))).await.expect("exec");
    assert_eq!(got.stdout, format!("hello from {ALLOWED_IP}\n"), "{got:?}");
    assert_eq!(bed.seen.lock().unwrap().http.last().and_then(|r| r.2.clone()), None, "no credential in clear text");
    let refused = rt.exec(&vm.id, &sh(&format!("{bb} wget -q -O - http://refused.test/"))).await.expect("exec");
    assert_ne!(refused.exit_code, 0, "{refused:?}");
    for (target, port) in [(NODE_IP.to_string(), 7444), (METADATA_IP.to_string(), 8080), (ALLOWED_IP.to_string(), 8080)]
    {
        let r = rt
            .exec(&vm.id, &sh(&format!("echo x | {bb} nc -w 3 {target} {port} && echo CONNECTED")))
            .await
            .expect("exec");
        assert!(!r.stdout.contains("CONNECTED"), "the VM reached {target}:{port}: {r:?}");
    }
    assert_eq!(*bed.node_hits.lock().unwrap(), 0);

    rt.start_process(
        &vm.id,
        &sh(&format!(
            "mkdir -p /root/www && echo vm-on-its-ip > /root/www/index.html && exec {bb} httpd -f -p 8080 -h /root/www"
        )),
    )
    .await
    .expect("httpd in the VM");
    let target = rt.guest_target(&vm.id, 8080).await.expect("target");
    let mut body = String::new();
    for _ in 0..50 {
        if let Ok(mut conn) = kairon_runtime::proxy::dial(target.clone(), 8080).await {
            use tokio::io::{AsyncReadExt, AsyncWriteExt};
            conn.write_all(b"GET /index.html HTTP/1.0\r\n\r\n").await.unwrap();
            conn.read_to_string(&mut body).await.unwrap();
            break;
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
    assert!(body.ends_with("vm-on-its-ip\n"), "the VM's server at its guest IP: {body:?}");

    // A live fork is re-addressed: with its parent's address (in the memory it copied) the
    // node would drop its packets as spoofed.
    let child = rt.fork(&vm.id, "kairon-net-vm-fork").await.expect("live fork");
    let child_ip = child.guest_ip.clone().expect("the fork's guest IP");
    assert_ne!(child_ip, ip);
    let shown = rt.exec(&child.id, &sh(&format!("{bb} ip -4 addr show eth0"))).await.expect("exec in the fork");
    assert!(shown.stdout.contains(&format!("{child_ip}/32")) && !shown.stdout.contains(&format!("{ip}/")), "{shown:?}");
    let got = rt.exec(&child.id, &sh(&format!("{bb} wget -q -O - http://allowed.test/"))).await.expect("exec");
    assert_eq!(got.stdout, format!("hello from {ALLOWED_IP}\n"), "the fork reaches the network: {got:?}");
    rt.delete(&child.id).await.expect("delete the fork");
    rt.delete(&vm.id).await.expect("delete");
    assert_eq!(rt.guest_ips_leased(), 0, "the VM's lease is released");
}

/// The refusals route is the runtime's, behind its token like every other: a wrong token (a
/// tenant, a guest that found the port) is refused; the node's token reads the counts.
#[tokio::test(flavor = "multi_thread")]
async fn the_refusals_route_needs_the_runtime_token() {
    let dir = tempfile::tempdir().expect("tempdir");
    let rt = Runtime::open(RuntimeConfig {
        state_dir: dir.path().to_path_buf(),
        node_name: "net-token".into(),
        registry: Default::default(),
        egress: Default::default(),
        network: Default::default(),
    })
    .await
    .expect("runtime");
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    tokio::spawn(
        async move { axum::serve(listener, kairon_runtime::server::router(rt, "the-node-token".into())).await },
    );
    let stranger = kairon_runtime_api::RuntimeClient::new(&url, "a-guessed-token").unwrap();
    match stranger.egress_denials(0, Duration::ZERO).await {
        Err(kairon_runtime_api::ClientError::Api { status, .. }) => assert_eq!(status, 401),
        other => panic!("a wrong token read the refusals: {other:?}"),
    }
    let node = kairon_runtime_api::RuntimeClient::new(&url, "the-node-token").unwrap();
    let got = node.egress_denials(0, Duration::ZERO).await.expect("the node reads them");
    assert!(got.denials.is_empty() && got.next == 0);
}
