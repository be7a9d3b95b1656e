//! The guest network: a guest IP for each attached sandbox, and egress only where the node's
//! allowlist says.
//!
//! Each attached sandbox gets a veth pair: `eth0` in its network namespace with a /32 guest
//! IP, the other end (`kg<tag><n>`) on the node side, routed (no bridge: a bridge holds at
//! most 1,024 ports, and routed /32s keep guests from seeing each other's ARP). Every node end
//! carries the gateway address (the subnet's first), which the guest routes through. The node
//! side is the host's network namespace, or a named one from the node config (`netns`), so
//! two runtimes on one host, and tests, keep their networks apart; every name (veth prefix,
//! nftables table, default subnet) derives from the node name.
//!
//! Traffic from guests, by the node's nftables table (see [`nft`]):
//! - DNS (port 53, to any address) is answered by the node's resolver ([`dns`]), which asks
//!   its upstream only for names the allowlist allows and refuses the rest;
//! - HTTP (80) and HTTPS (443), to any address, go to the node's egress proxy ([`proxy`]),
//!   which matches the Host header or the TLS SNI name against the allowlist (the matcher of
//!   the egress-check API), dials the address *it* resolves for that name (never the guest's
//!   destination) and injects the node's credential into plain HTTP requests;
//! - anything else is routed (and masqueraded) only when the allowlist is empty, and never to
//!   the deny set (`[sandbox] egress_deny_cidrs`: loopback, link-local and metadata addresses,
//!   the guest subnet); the node itself answers guests only on the resolver and proxy ports;
//!   IPv6 from guests is dropped.
//!
//! Addresses: a sandbox's guest IP is kept in its instance record (`vm.json`), so the plan is
//! rebuilt from the records at startup and a lease lives exactly as long as its instance.

pub mod denials;
pub mod dns;
pub mod netns;
pub mod nft;
pub mod proxy;
pub mod testbed;
pub mod tls;

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::sync::Arc;

use serde::Deserialize;
use tokio::process::Command;

use crate::egress::{Cidr, EgressPolicy};
use kairon_model::egress::GuestEgress;
use netns::NodeNetns;

/// Where the node's resolver and egress proxy listen, on the gateway address.
pub const DNS_PORT: u16 = 15053;
pub const HTTP_PORT: u16 = 15080;
pub const TLS_PORT: u16 = 15443;

/// The `[network]` table of the node config.
#[derive(Clone, Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct NetworkSettings {
    /// Attach every sandbox (not only those whose `spec.network` asks for `Tap`/`Bridge`).
    /// Unset: the command's default (`kairon up`: on unless `--no-guest-network`; a cluster's
    /// `kairon node`: off).
    #[serde(default)]
    pub attach_sandboxes: Option<bool>,
    /// The guest subnet (IPv4 CIDR, /16 to /28); default: a /20 in 10.64.0.0/10 chosen by the
    /// node name.
    #[serde(default)]
    pub subnet: Option<String>,
    /// A named network namespace (`/run/netns/NAME`) for the node side: veth ends, rules,
    /// resolver and proxy. Default: the host's.
    #[serde(default)]
    pub netns: Option<String>,
    /// The resolver the node asks for allowed names (`IP` or `IP:PORT`); default: the first
    /// `nameserver` of `/etc/resolv.conf`.
    #[serde(default)]
    pub dns_upstream: Option<String>,
    /// TCP connections one sandbox may have open at once (through the proxy or routed); the
    /// next one is reset. Default: [`DEFAULT_MAX_CONNECTIONS`].
    #[serde(default)]
    pub max_connections: Option<u32>,
    /// More CAs (PEM) the proxy trusts when it talks TLS to a host for a guest, beyond the
    /// node's `/etc/ssl/certs/ca-certificates.crt` (an internal CA).
    #[serde(default)]
    pub upstream_ca_file: Option<std::path::PathBuf>,
    /// Each sandbox's bandwidth in megabits a second, each way (shaped on both ends of its
    /// link, where the guest cannot change it). Default: no limit.
    #[serde(default)]
    pub bandwidth_mbit: Option<u32>,
}

/// Why the guest network could not be set up or a sandbox attached.
#[derive(Debug, thiserror::Error)]
pub enum NetError {
    #[error("invalid [network] config: {0}")]
    Config(String),
    #[error("{0}")]
    Setup(String),
}

impl From<std::io::Error> for NetError {
    fn from(e: std::io::Error) -> Self {
        NetError::Setup(e.to_string())
    }
}

/// Open TCP connections per guest when the node config names no `max_connections`: plenty
/// for a package manager or a browser, and a guest cannot exhaust the node's conntrack table
/// or the proxy's sockets.
pub const DEFAULT_MAX_CONNECTIONS: u32 = 1024;

/// The node's guest network plan: names, subnet, gateway. Pure; [`GuestNetwork`] acts on it.
#[derive(Clone, Debug)]
pub struct Plan {
    pub node: String,
    /// Four hex digits from the node name, in every host-wide name.
    pub tag: String,
    pub subnet: Cidr,
    pub gateway: Ipv4Addr,
    pub netns: Option<String>,
    /// The resolver the node asks (none found: attaching fails, saying so).
    pub dns_upstream: Option<SocketAddr>,
    pub max_connections: u32,
    pub bandwidth_mbit: Option<u32>,
}

impl Plan {
    pub fn new(node: &str, s: &NetworkSettings) -> Result<Plan, NetError> {
        let hash = fnv1a(node.as_bytes());
        let tag = format!("{:04x}", hash & 0xffff);
        let subnet = match &s.subnet {
            Some(text) => {
                let c: Cidr = text.parse().map_err(|e| NetError::Config(format!("subnet {text:?}: {e}")))?;
                if !c.addr.is_ipv4() || !(16..=28).contains(&c.prefix) {
                    return Err(NetError::Config(format!("subnet {text:?} must be an IPv4 network from /16 to /28")));
                }
                c
            }
            None => {
                // 10.64.0.0/10 holds 1,024 /20s (4,094 guests each).
                let base = u32::from(Ipv4Addr::new(10, 64, 0, 0)) + (hash % 1024) * 4096;
                Cidr { addr: IpAddr::V4(Ipv4Addr::from(base)), prefix: 20 }
            }
        };
        let IpAddr::V4(base) = subnet.addr else { unreachable!("checked above") };
        let dns_upstream = match &s.dns_upstream {
            Some(text) => Some(parse_upstream(text)?),
            // Looked up now, needed only once a sandbox is attached (a missing one is an
            // error then, not at startup). A loopback resolver serves the host's namespace only.
            None => system_resolver(s.netns.is_none()),
        };
        if s.bandwidth_mbit == Some(0) {
            return Err(NetError::Config("bandwidth_mbit must be at least 1 (leave it out for no limit)".into()));
        }
        if s.max_connections == Some(0) {
            return Err(NetError::Config(format!(
                "max_connections must be at least 1 (leave it out for the default, {DEFAULT_MAX_CONNECTIONS})"
            )));
        }
        if let Some(ns) = &s.netns
            && (ns.is_empty() || ns.contains('/') || ns.starts_with('.'))
        {
            return Err(NetError::Config(format!("netns {ns:?} must be a name under /run/netns")));
        }
        Ok(Plan {
            node: node.to_string(),
            tag,
            subnet,
            gateway: Ipv4Addr::from(u32::from(base) + 1),
            netns: s.netns.clone(),
            dns_upstream,
            max_connections: s.max_connections.unwrap_or(DEFAULT_MAX_CONNECTIONS),
            bandwidth_mbit: s.bandwidth_mbit,
        })
    }

    /// How many guest addresses the subnet holds (all but network, gateway and broadcast).
    pub fn capacity(&self) -> u32 {
        (1u32 << (32 - u32::from(self.subnet.prefix))) - 3
    }

    /// The `n`th guest address (0-based).
    pub fn guest_ip(&self, n: u32) -> Ipv4Addr {
        let IpAddr::V4(base) = self.subnet.addr else { unreachable!() };
        Ipv4Addr::from(u32::from(base) + 2 + n)
    }

    /// The index of a guest address in the plan, if it is one.
    pub fn index_of(&self, ip: Ipv4Addr) -> Option<u32> {
        let IpAddr::V4(base) = self.subnet.addr else { return None };
        let n = u32::from(ip).checked_sub(u32::from(base) + 2)?;
        (n < self.capacity()).then_some(n)
    }

    /// The node-side veth of guest address `ip`: `kg<tag><index in hex>` (at most 9 of the 15
    /// characters an interface name may have).
    pub fn host_link(&self, ip: Ipv4Addr) -> String {
        format!("{}{:x}", self.link_prefix(), self.index_of(ip).unwrap_or(0))
    }

    /// What every node-side veth's name starts with.
    pub fn link_prefix(&self) -> String {
        format!("kg{}", self.tag)
    }

    /// The nftables table of this node.
    pub fn table(&self) -> String {
        format!("kairon_{}", self.tag)
    }
}

fn fnv1a(bytes: &[u8]) -> u32 {
    bytes.iter().fold(0x811c_9dc5u32, |h, b| (h ^ u32::from(*b)).wrapping_mul(0x0100_0193))
}

fn parse_upstream(text: &str) -> Result<SocketAddr, NetError> {
    if let Ok(addr) = text.parse::<SocketAddr>() {
        return Ok(addr);
    }
    text.parse::<IpAddr>()
        .map(|ip| SocketAddr::new(ip, 53))
        .map_err(|_| NetError::Config(format!("dns_upstream {text:?} is not IP or IP:PORT")))
}

fn system_resolver(allow_loopback: bool) -> Option<SocketAddr> {
    let text = std::fs::read_to_string("/etc/resolv.conf").unwrap_or_default();
    text.lines()
        .filter_map(|l| l.trim().strip_prefix("nameserver"))
        .filter_map(|rest| rest.trim().parse::<IpAddr>().ok())
        .find(|ip| allow_loopback || !ip.is_loopback())
        .map(|ip| SocketAddr::new(ip, 53))
}

/// A guest on the network: the instance holding its address, and how its Machine narrows
/// its egress (`None`: the node's policy alone).
#[derive(Clone, Debug)]
pub struct Guest {
    pub instance: String,
    pub egress: Option<Arc<GuestEgress>>,
}

/// The running guest network of a node: its rules are installed, its resolver and proxy
/// serve.
pub struct GuestNetwork {
    pub plan: Plan,
    ns: NodeNetns,
    ca: Option<Arc<tls::EgressCa>>,
    ctx: Arc<proxy::Context>,
    /// What the packet filter holds for each narrowed guest address: the networks it may
    /// reach by routed traffic (the sets `narrowed4` and `allowed4`).
    narrowed: std::sync::Mutex<std::collections::HashMap<Ipv4Addr, Vec<Cidr>>>,
    /// The resolver and proxy loops. They stop with the runtime, so a runtime opened again
    /// in the same process binds their ports anew; the rules stay, guarding the guests.
    tasks: Vec<tokio::task::JoinHandle<()>>,
}

impl Drop for GuestNetwork {
    fn drop(&mut self) {
        for t in &self.tasks {
            t.abort();
        }
    }
}

impl GuestNetwork {
    /// Installs the node's rules and starts the resolver and the egress proxy.
    /// `ca_dir` keeps the egress CA, made when some host has a credential to inject.
    pub async fn start(
        plan: Plan,
        policy: Arc<EgressPolicy>,
        log: Arc<denials::DenialLog>,
        guest_of: proxy::GuestOf,
        narrowed: Vec<(Ipv4Addr, Arc<GuestEgress>)>,
        ca_dir: &std::path::Path,
        upstream_ca_file: Option<&std::path::Path>,
    ) -> Result<Arc<GuestNetwork>, NetError> {
        let ns = NodeNetns::open(plan.netns.as_deref())?;
        // Forwarding is needed only to route other protocols, which an allowlist forbids. It
        // is never turned off: the host's namespace may route for others (guests' forwarded
        // traffic is dropped by the rules whatever the setting).
        if policy.allows_everything() {
            ns.write_sysctl("net/ipv4/ip_forward", "1").await?;
        }
        let upstream = plan.dns_upstream.ok_or_else(|| {
            NetError::Config(
                "no usable nameserver in /etc/resolv.conf for the guests' resolver: set [network] dns_upstream".into(),
            )
        })?;
        // One neighbour entry per guest: the default limit (1,024) is below a full node. The
        // limits exist in the host's namespace only (other namespaces share them).
        for (key, value) in [("gc_thresh3", "8192"), ("gc_thresh2", "4096")] {
            match ns.write_sysctl(&format!("net/ipv4/neigh/default/{key}"), value).await {
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                other => other?,
            }
        }
        let narrowed: std::collections::HashMap<Ipv4Addr, Vec<Cidr>> =
            narrowed.iter().map(|(ip, egress)| (*ip, egress.routed_v4())).collect();
        let rules = nft::ruleset(&plan, &policy, &narrowed);
        run_with_input(ns.command("nft").args(["-f", "-"]), &rules).await?;
        let gateway = SocketAddr::new(IpAddr::V4(plan.gateway), 0);
        let dns = ns.udp_socket(SocketAddr::new(gateway.ip(), DNS_PORT)).await?;
        let http = ns.tcp_listener(SocketAddr::new(gateway.ip(), HTTP_PORT)).await?;
        let tls = ns.tcp_listener(SocketAddr::new(gateway.ip(), TLS_PORT)).await?;
        let ca = match policy.injects_anything() {
            true => Some(Arc::new(tls::EgressCa::open(ca_dir, upstream_ca_file)?)),
            false => None,
        };
        let upstream = dns::Upstream::open(&ns, upstream).await?;
        let ctx = Arc::new(proxy::Context {
            policy,
            ns: ns.clone(),
            upstream: upstream.clone(),
            log,
            guest_of,
            ca: ca.clone(),
        });
        let tasks = vec![
            tokio::spawn(upstream.receive()),
            tokio::spawn(dns::serve(dns, ctx.clone())),
            tokio::spawn(proxy::serve_http(http, ctx.clone())),
            tokio::spawn(proxy::serve_tls(tls, ctx.clone())),
        ];
        tracing::info!(node = %plan.node, subnet = %plan.subnet, netns = ?plan.netns, "guest network is up");
        Ok(Arc::new(GuestNetwork { plan, ns, ca, ctx, narrowed: std::sync::Mutex::new(narrowed), tasks }))
    }

    /// Puts guest address `ip` in the packet filter's sets as its instance's Machine narrows
    /// it (or out of them): a narrowed guest routes nothing but to its allowlist's networks.
    /// The address may have been another instance's before, so both ways are written.
    async fn narrow(&self, ip: Ipv4Addr) -> Result<(), NetError> {
        let want = (self.ctx.guest_of)(IpAddr::V4(ip)).and_then(|g| g.egress).map(|egress| egress.routed_v4());
        let had = self.narrowed.lock().unwrap_or_else(|e| e.into_inner()).get(&ip).cloned();
        if want == had {
            return Ok(());
        }
        let table = self.plan.table();
        let mut batch = String::new();
        if let Some(nets) = &had {
            batch.push_str(&format!("delete element inet {table} narrowed4 {{ {ip} }}\n"));
            for net in nets {
                batch.push_str(&format!("delete element inet {table} allowed4 {{ {ip} . {net} }}\n"));
            }
        }
        if let Some(nets) = &want {
            batch.push_str(&format!("add element inet {table} narrowed4 {{ {ip} }}\n"));
            for net in nets {
                batch.push_str(&format!("add element inet {table} allowed4 {{ {ip} . {net} }}\n"));
            }
        }
        run_with_input(self.ns.command("nft").args(["-f", "-"]), &batch).await?;
        let mut narrowed = self.narrowed.lock().unwrap_or_else(|e| e.into_inner());
        match want {
            Some(nets) => narrowed.insert(ip, nets),
            None => narrowed.remove(&ip),
        };
        Ok(())
    }

    /// The CA bundle guests trust (the node's store plus its egress CA), when the node
    /// terminates TLS to inject credentials.
    pub fn guest_bundle(&self) -> Option<&std::path::Path> {
        self.ca.as_deref().map(tls::EgressCa::guest_bundle)
    }

    /// Where the node side lives (`None`: this process's namespace).
    pub fn node_netns(&self) -> Option<std::path::PathBuf> {
        self.ns.path().map(std::path::Path::to_path_buf)
    }

    /// The `/etc/resolv.conf` an attached guest gets.
    pub fn resolv_conf(&self) -> String {
        format!("nameserver {}\n", self.plan.gateway)
    }

    /// Gives the network namespace of process `pid` (a sandbox's init) its `eth0` with guest
    /// address `ip`, routed through the node.
    pub async fn attach(&self, pid: u32, ip: Ipv4Addr) -> Result<(), NetError> {
        let gw = self.plan.gateway;
        let guest = format!(
            "link set lo up\n\
             addr add {ip}/32 dev eth0\n\
             link set eth0 up\n\
             route add {gw}/32 dev eth0 scope link\n\
             route add default via {gw} dev eth0\n"
        );
        self.link(pid, ip, &guest).await
    }

    /// Links a VM's QEMU (`pid`; its namespace holds `br0` with QEMU's `tap0`) to the node for
    /// guest address `ip`: the namespace's end of the link joins `br0`, so the guest's NIC sits
    /// on the link as a sandbox's `eth0` would (the guest sets its address itself).
    pub async fn attach_vm(&self, pid: u32, ip: Ipv4Addr) -> Result<(), NetError> {
        self.link(pid, ip, "link set eth0 master br0\nlink set eth0 up\n").await
    }

    /// The link of guest address `ip`: the node's end routed to it, the other (`eth0`) in the
    /// namespace of `pid`, set up there by the `ip -batch` lines `inside`.
    async fn link(&self, pid: u32, ip: Ipv4Addr, inside: &str) -> Result<(), NetError> {
        let link = self.plan.host_link(ip);
        let gw = self.plan.gateway;
        // A link left by an instance that died without its namespace going (cannot normally
        // happen: the link goes with the namespace) would block the name.
        let _ = self.ns.command("ip").args(["link", "del", &link]).output().await;
        // The guest's narrowing is in force before it has a link to send on.
        self.narrow(ip).await?;
        let host = format!(
            "link add {link} type veth peer name eth0 netns {pid}\n\
             addr add {gw}/32 dev {link}\n\
             link set {link} up\n\
             route add {ip}/32 dev {link} src {gw}\n"
        );
        run_with_input(self.ns.command("ip").args(["-batch", "-"]), &host).await?;
        let mut enter = Command::new("nsenter");
        enter.arg(format!("--net=/proc/{pid}/ns/net")).args(["ip", "-batch", "-"]);
        let mut attached = run_with_input(&mut enter, inside).await;
        if let (Ok(()), Some(mbit)) = (&attached, self.plan.bandwidth_mbit) {
            attached = self.shape(pid, &link, mbit).await;
        }
        if attached.is_err() {
            let _ = self.ns.command("ip").args(["link", "del", &link]).output().await;
        }
        attached
    }

    /// Shapes both directions of a guest's link to `mbit`: the node's end (what the guest
    /// receives) and the guest's `eth0` (what it sends; its root has no `CAP_NET_ADMIN` to
    /// lift it).
    async fn shape(&self, pid: u32, link: &str, mbit: u32) -> Result<(), NetError> {
        // A burst of 20 ms at the rate (at least 32 KiB) keeps TCP near the rate.
        let burst = (u64::from(mbit) * 1_000_000 / 8 / 50).max(32 * 1024);
        let tbf = |dev: &str| format!("qdisc replace dev {dev} root tbf rate {mbit}mbit burst {burst} latency 50ms\n");
        run_with_input(self.ns.command("tc").args(["-batch", "-"]), &tbf(link)).await?;
        let mut enter = Command::new("nsenter");
        enter.arg(format!("--net=/proc/{pid}/ns/net")).args(["tc", "-batch", "-"]);
        run_with_input(&mut enter, &tbf("eth0")).await
    }
}

/// Runs `cmd` with `input` on its stdin; an error carries its stderr.
async fn run_with_input(cmd: &mut Command, input: &str) -> Result<(), NetError> {
    use tokio::io::AsyncWriteExt;
    let program = format!("{:?}", cmd.as_std().get_program());
    let mut child = cmd
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true)
        .spawn()
        .map_err(|e| {
            NetError::Setup(format!("running {program}: {e} (the guest network needs iproute2 and nftables)"))
        })?;
    let mut stdin = child.stdin.take().expect("piped");
    stdin.write_all(input.as_bytes()).await?;
    drop(stdin);
    let out = child.wait_with_output().await?;
    if !out.status.success() {
        return Err(NetError::Setup(format!("{program} failed: {}", String::from_utf8_lossy(&out.stderr).trim())));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn settings() -> NetworkSettings {
        NetworkSettings { dns_upstream: Some("192.0.2.53".into()), ..Default::default() }
    }

    #[test]
    fn names_and_subnet_derive_from_the_node_name() {
        let a = Plan::new("node-a", &settings()).unwrap();
        let b = Plan::new("node-b", &settings()).unwrap();
        assert_ne!(a.tag, b.tag);
        assert_ne!(a.subnet, b.subnet);
        assert_ne!(a.table(), b.table());
        assert_eq!(a.subnet.prefix, 20);
        assert!("10.64.0.0/10".parse::<Cidr>().unwrap().contains(a.subnet.addr));
        assert_eq!(Plan::new("node-a", &settings()).unwrap().subnet, a.subnet, "stable");
        let first = a.guest_ip(0);
        assert_eq!(a.index_of(first), Some(0));
        assert_eq!(a.index_of(a.gateway), None);
        assert_eq!(a.capacity(), 4093);
        assert_eq!(a.index_of(a.guest_ip(4092)), Some(4092));
        assert!(a.host_link(a.guest_ip(4092)).len() <= 15);
        assert_eq!(a.dns_upstream, Some("192.0.2.53:53".parse().unwrap()));
    }

    #[test]
    fn bad_settings_say_what_to_fix() {
        let bad = |s: NetworkSettings| Plan::new("n", &s).unwrap_err().to_string();
        assert!(bad(NetworkSettings { subnet: Some("10.0.0.0/8".into()), ..settings() }).contains("/16 to /28"));
        assert!(bad(NetworkSettings { subnet: Some("10.0.0.1/24".into()), ..settings() }).contains("host bits"));
        assert!(bad(NetworkSettings { netns: Some("../x".into()), ..settings() }).contains("/run/netns"));
        assert!(
            bad(NetworkSettings { dns_upstream: Some("resolver".into()), ..Default::default() }).contains("IP:PORT")
        );
    }
}
