//! Egress host patterns and addresses: the grammar a node's `egress_allow_domains` and a
//! Machine's `spec.network.egress.allow` share, and the matcher both decide with.
//!
//! | entry            | matches                                                        |
//! |------------------|----------------------------------------------------------------|
//! | `example.com`    | exactly `example.com`, nothing else                            |
//! | `*.example.com`  | any subdomain at any depth, NOT `example.com` itself           |
//! | `.example.com`   | `example.com` and all its subdomains                           |
//! | `192.0.2.7`      | only that IPv4 address (an IPv6 one likewise)                  |
//! | `198.51.100.0/24`| (a Machine's allowlist only) the addresses of that network     |
//!
//! Matching is on whole labels from the right, case-insensitive, one trailing dot ignored;
//! never on what a name resolves to.

use std::fmt;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

use crate::machine::{EgressMode, EgressSpec};

/// An IPv4 or IPv6 network: an address and a prefix length (`10.64.0.0/20`, `fe80::/10`; a
/// bare address is a /32 or /128).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Cidr {
    pub addr: IpAddr,
    pub prefix: u8,
}

impl Cidr {
    pub fn contains(&self, ip: IpAddr) -> bool {
        match (self.addr, ip) {
            (IpAddr::V4(net), IpAddr::V4(ip)) => {
                let mask = u32::MAX.checked_shl(32 - u32::from(self.prefix)).unwrap_or(0);
                u32::from(net) & mask == u32::from(ip) & mask
            }
            (IpAddr::V6(net), IpAddr::V6(ip)) => {
                let mask = u128::MAX.checked_shl(128 - u32::from(self.prefix)).unwrap_or(0);
                u128::from(net) & mask == u128::from(ip) & mask
            }
            _ => false,
        }
    }
}

impl fmt::Display for Cidr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.addr, self.prefix)
    }
}

impl std::str::FromStr for Cidr {
    type Err = String;

    fn from_str(text: &str) -> Result<Self, String> {
        let (addr, prefix) = match text.split_once('/') {
            Some((a, p)) => (a, Some(p)),
            None => (text, None),
        };
        let addr: IpAddr =
            addr.parse().map_err(|_| format!("{addr:?} is not an IP address (write a CIDR such as 10.0.0.0/8)"))?;
        let max = if addr.is_ipv4() { 32 } else { 128 };
        let prefix = match prefix {
            None => max,
            Some(p) => p
                .parse::<u8>()
                .ok()
                .filter(|p| *p <= max)
                .ok_or_else(|| format!("the prefix length {p:?} is not a number from 0 to {max}"))?,
        };
        let cidr = Cidr { addr, prefix };
        let network = match addr {
            IpAddr::V4(a) => {
                IpAddr::V4(Ipv4Addr::from(u32::from(a) & u32::MAX.checked_shl(32 - u32::from(prefix)).unwrap_or(0)))
            }
            IpAddr::V6(a) => {
                IpAddr::V6(Ipv6Addr::from(u128::from(a) & u128::MAX.checked_shl(128 - u32::from(prefix)).unwrap_or(0)))
            }
        };
        if network != addr {
            return Err(format!("{text} has host bits set: the network is {network}/{prefix}"));
        }
        Ok(cidr)
    }
}

/// A checked host, normalised: a lower-case name without trailing dot, or an IP address.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Host {
    Name(String),
    Ip(IpAddr),
}

impl fmt::Display for Host {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Host::Name(name) => f.write_str(name),
            Host::Ip(IpAddr::V4(ip)) => write!(f, "{ip}"),
            Host::Ip(IpAddr::V6(ip)) => write!(f, "[{ip}]"),
        }
    }
}

/// A parsed pattern.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Pattern {
    /// `example.com`
    Exact(String),
    /// `*.example.com`: subdomains only.
    Subdomains(String),
    /// `.example.com`: the domain and its subdomains.
    DomainAndSubdomains(String),
    /// An IP literal.
    Ip(IpAddr),
}

impl Pattern {
    pub fn matches(&self, host: &Host) -> bool {
        match (self, host) {
            (Pattern::Exact(name), Host::Name(h)) => h == name,
            (Pattern::Subdomains(base), Host::Name(h)) => is_subdomain(h, base),
            (Pattern::DomainAndSubdomains(base), Host::Name(h)) => h == base || is_subdomain(h, base),
            (Pattern::Ip(ip), Host::Ip(h)) => h == ip,
            _ => false,
        }
    }

    /// Higher is more specific: exact names and IPs, then wildcards by label count.
    pub fn specificity(&self) -> (u8, usize) {
        match self {
            Pattern::Exact(_) | Pattern::Ip(_) => (1, 0),
            Pattern::Subdomains(base) | Pattern::DomainAndSubdomains(base) => (0, base.split('.').count()),
        }
    }
}

/// `host` is a strict subdomain of `base`: it ends with `.base` on a label boundary.
fn is_subdomain(host: &str, base: &str) -> bool {
    host.len() > base.len() + 1 && host.ends_with(base) && host.as_bytes()[host.len() - base.len() - 1] == b'.'
}

/// Refusals shared by patterns and hosts, before any structure is read.
pub fn common_refusal(text: &str) -> Option<String> {
    if text.is_empty() {
        return Some("it is empty".into());
    }
    if text.chars().any(char::is_whitespace) {
        return Some("it holds whitespace".into());
    }
    if text.contains("://") {
        return Some("it holds a URL scheme; give the host name only".into());
    }
    if text.contains('/') {
        return Some("it holds a path; give the host name only".into());
    }
    if text.contains('@') {
        return Some("it holds user info (`@`); give the host name only".into());
    }
    None
}

pub fn parse_pattern(text: &str) -> Result<Pattern, String> {
    if let Some(problem) = common_refusal(text) {
        return Err(problem);
    }
    if let Some(ip) = ip_literal(text.strip_suffix('.').unwrap_or(text))? {
        return Ok(Pattern::Ip(ip));
    }
    if text.contains(':') {
        return Err("it holds a port; patterns match hosts on every port (the request's port is \
             ignored), so give the host name only"
            .into());
    }
    let (wildcard, rest) = if let Some(rest) = text.strip_prefix("*.") {
        (Some(true), rest)
    } else if let Some(rest) = text.strip_prefix('.') {
        (Some(false), rest)
    } else {
        (None, text)
    };
    if rest.contains('*') {
        return Err("`*` is only allowed as a leading `*.` (as in `*.example.com`); an empty allowlist \
             already allows every host"
            .into());
    }
    let rest = rest.strip_suffix('.').unwrap_or(rest);
    if wildcard.is_some() && rest.parse::<IpAddr>().is_ok() {
        return Err("a wildcard or leading dot cannot apply to an IP address".into());
    }
    let name = domain_name(rest)?;
    Ok(match wildcard {
        Some(true) => Pattern::Subdomains(name),
        Some(false) => Pattern::DomainAndSubdomains(name),
        None => Pattern::Exact(name),
    })
}

/// An IP literal (`192.0.2.7`, `2001:db8::1`, `[2001:db8::1]`); `Ok(None)` when `text` is
/// not shaped like one.
fn ip_literal(text: &str) -> Result<Option<IpAddr>, String> {
    if let Some(inner) = text.strip_prefix('[') {
        return match inner.strip_suffix(']') {
            Some(inner) => inner
                .parse::<Ipv6Addr>()
                .map(|ip| Some(IpAddr::V6(ip)))
                .map_err(|_| format!("{inner:?} in brackets is not an IPv6 address")),
            None => Err("it opens `[` for an IPv6 address without a plain closing `]`; give \
                         no port"
                .into()),
        };
    }
    if text.matches(':').count() >= 2 {
        return text
            .parse::<Ipv6Addr>()
            .map(|ip| Some(IpAddr::V6(ip)))
            .map_err(|_| "it is not a valid IPv6 address".into());
    }
    Ok(text.parse::<Ipv4Addr>().ok().map(IpAddr::V4))
}

/// Validates a DNS name (no wildcard, no trailing dot) and lower-cases it.
fn domain_name(name: &str) -> Result<String, String> {
    if name.is_empty() {
        return Err("it names no domain".into());
    }
    if !name.is_ascii() {
        return Err("it holds non-ASCII characters; write an internationalised name in its `xn--` form".into());
    }
    if name.len() > 253 {
        return Err("the name is longer than 253 characters".into());
    }
    let labels: Vec<&str> = name.split('.').collect();
    for label in &labels {
        if label.is_empty() {
            return Err("it has an empty label (`..`, or a leading or extra trailing dot)".into());
        }
        if label.len() > 63 {
            return Err(format!("the label {label:?} is longer than 63 characters"));
        }
        if let Some(c) = label.chars().find(|c| !(c.is_ascii_alphanumeric() || *c == '-' || *c == '_')) {
            return Err(format!("{c:?} is not allowed in a host name (letters, digits, `-`, `_` and dots only)"));
        }
        if label.starts_with('-') || label.ends_with('-') {
            return Err(format!("the label {label:?} starts or ends with `-`"));
        }
    }
    if labels.last().is_some_and(|l| l.chars().all(|c| c.is_ascii_digit())) {
        return Err("it ends in an all-digit label but is not a dotted-quad IPv4 address (such as \
             192.0.2.7)"
            .into());
    }
    Ok(name.to_ascii_lowercase())
}

/// Parses a request host: `name`, `name:port`, `ipv4[:port]`, `[ipv6][:port]` or bare `ipv6`.
pub fn parse_host(raw: &str) -> Result<Host, String> {
    let bad = |problem: String| problem;
    if let Some(problem) = common_refusal(raw) {
        return Err(bad(problem));
    }
    if let Some(inner) = raw.strip_prefix('[') {
        let Some((addr, after)) = inner.split_once(']') else {
            return Err(bad("it opens `[` without a closing `]`".into()));
        };
        if !after.is_empty() {
            let port = after.strip_prefix(':').ok_or_else(|| bad("only `:port` may follow `]`".into()))?;
            check_port(port).map_err(bad)?;
        }
        let ip = addr.parse::<Ipv6Addr>().map_err(|_| bad(format!("{addr:?} in brackets is not an IPv6 address")))?;
        return Ok(Host::Ip(IpAddr::V6(ip)));
    }
    let name = match raw.matches(':').count() {
        0 => raw,
        1 => {
            let (name, port) = raw.split_once(':').unwrap_or((raw, ""));
            check_port(port).map_err(bad)?;
            name
        }
        _ => {
            let ip = raw.parse::<Ipv6Addr>().map_err(|_| {
                bad("it is not a valid IPv6 address (put an IPv6 address with a port in \
                     brackets: `[2001:db8::1]:443`)"
                    .into())
            })?;
            return Ok(Host::Ip(IpAddr::V6(ip)));
        }
    };
    let name = name.strip_suffix('.').unwrap_or(name);
    if let Ok(ip) = name.parse::<Ipv4Addr>() {
        return Ok(Host::Ip(IpAddr::V4(ip)));
    }
    if name.contains('*') {
        return Err(bad("a checked host cannot hold `*`".into()));
    }
    domain_name(name).map(Host::Name)
}

fn check_port(port: &str) -> Result<(), String> {
    if port.is_empty() || port.len() > 5 || !port.bytes().all(|b| b.is_ascii_digit()) {
        return Err(format!("the port {port:?} is not a number from 0 to 65535"));
    }
    port.parse::<u16>().map(|_| ()).map_err(|_| format!("the port {port:?} is not a number from 0 to 65535"))
}

/// The most entries a Machine's `spec.network.egress.allow` may hold.
pub const MAX_ALLOW_ENTRIES: usize = 64;

/// One entry of a Machine's allowlist: a host pattern or a network.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum AllowEntry {
    Host(Pattern),
    Net(Cidr),
}

/// A Machine's allowlist entry, as the API document states it: a host pattern (labels of
/// letters, digits, `_` and inner `-`, at most 63 each; `*.` or `.` before, one `.` after, as the
/// node's patterns) or an IPv4 CIDR; at most 253 characters. An IPv4 address is a name of digit
/// labels that reads as one. (No lookahead: the same text in a JSON Schema and here.)
pub const ALLOW_ENTRY_PATTERN: &str = concat!(
    "^((\\*\\.|\\.)?[A-Za-z0-9_]([-A-Za-z0-9_]{0,61}[A-Za-z0-9_])?(\\.[A-Za-z0-9_]([-A-Za-z0-9_]{0,61}[A-Za-z0-9_])?)*\\.?",
    "|(25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])(\\.(25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])){3}/(3[0-2]|[12]?[0-9]))$"
);
/// The longest allowlist entry.
pub const MAX_ALLOW_ENTRY: usize = 253;

impl AllowEntry {
    /// An entry of [`ALLOW_ENTRY_PATTERN`]: an IPv4 CIDR (host bits cleared, as a Kubernetes
    /// NetworkPolicy's `ipBlock` reads one), an IPv4 address, or a host pattern.
    pub fn parse(text: &str) -> Result<AllowEntry, String> {
        if text.is_empty() || text.len() > MAX_ALLOW_ENTRY {
            return Err(format!("an entry has 1 to {MAX_ALLOW_ENTRY} characters"));
        }
        if text.contains("://") {
            return Err("it holds a URL scheme; give the host name only".into());
        }
        if let Some((addr, prefix)) = text.split_once('/') {
            let addr: Ipv4Addr = addr.parse().map_err(|_| {
                format!("{addr:?} is not an IPv4 address (write a host name, an IPv4 address or an IPv4 CIDR)")
            })?;
            let digits = !prefix.is_empty()
                && prefix.bytes().all(|b| b.is_ascii_digit())
                && (prefix == "0" || !prefix.starts_with('0'));
            let prefix = prefix
                .parse::<u8>()
                .ok()
                .filter(|p| digits && *p <= 32)
                .ok_or_else(|| format!("the prefix length {prefix:?} is not a number from 0 to 32"))?;
            let mask = u32::MAX.checked_shl(32 - u32::from(prefix)).unwrap_or(0);
            let net = Ipv4Addr::from(u32::from(addr) & mask);
            return Ok(AllowEntry::Net(Cidr { addr: IpAddr::V4(net), prefix }));
        }
        let (wildcard, rest) = if let Some(rest) = text.strip_prefix("*.") {
            (Some(true), rest)
        } else if let Some(rest) = text.strip_prefix('.') {
            (Some(false), rest)
        } else {
            (None, text)
        };
        let name = rest.strip_suffix('.').unwrap_or(rest);
        if name.is_empty() {
            return Err("it names no host".into());
        }
        for label in name.split('.') {
            let ok = !label.is_empty()
                && label.len() <= 63
                && label.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
                && !label.starts_with('-')
                && !label.ends_with('-');
            if !ok {
                return Err(format!(
                    "the label {label:?} is not 1 to 63 letters, digits, '_' and inner '-' (write a host name such as \
                     pypi.org, .pythonhosted.org or *.example.com, an IPv4 address, or an IPv4 CIDR)"
                ));
            }
        }
        if wildcard.is_none()
            && let Ok(ip) = name.parse::<Ipv4Addr>()
        {
            return Ok(AllowEntry::Host(Pattern::Ip(IpAddr::V4(ip))));
        }
        let name = name.to_ascii_lowercase();
        Ok(AllowEntry::Host(match wildcard {
            Some(true) => Pattern::Subdomains(name),
            Some(false) => Pattern::DomainAndSubdomains(name),
            None => Pattern::Exact(name),
        }))
    }

    fn matches(&self, host: &Host) -> bool {
        match (self, host) {
            (AllowEntry::Host(p), h) => p.matches(h),
            (AllowEntry::Net(net), Host::Ip(ip)) => net.contains(*ip),
            (AllowEntry::Net(_), Host::Name(_)) => false,
        }
    }
}

/// What one guest may reach beyond its node's policy, compiled from its Machine's
/// `spec.network.egress`: only ever a narrowing (`Internet` compiles to `None`, "no further
/// rule").
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum GuestEgress {
    /// `mode: None`: no host at all.
    Nothing,
    /// `mode: Allowlist`: only hosts an entry matches (with the text written, for reasons).
    Only(Vec<(String, AllowEntry)>),
}

impl GuestEgress {
    /// The narrowing `spec` asks for; the first bad entry is the error, with its index.
    pub fn compile(spec: &EgressSpec) -> Result<Option<GuestEgress>, (usize, String)> {
        match spec.mode {
            EgressMode::Internet => Ok(None),
            EgressMode::None => Ok(Some(GuestEgress::Nothing)),
            EgressMode::Allowlist => spec
                .allow
                .iter()
                .enumerate()
                .map(|(i, text)| AllowEntry::parse(text).map(|e| (text.clone(), e)).map_err(|problem| (i, problem)))
                .collect::<Result<Vec<_>, _>>()
                .map(|entries| Some(GuestEgress::Only(entries))),
        }
    }

    /// Whether this guest may reach `host` (parsed); the error is the reason it may not.
    pub fn check(&self, host: &Host) -> Result<(), String> {
        match self {
            GuestEgress::Nothing => {
                Err(format!("{host}: this Machine's spec.network.egress.mode is None (no egress at all)"))
            }
            GuestEgress::Only(entries) if entries.iter().any(|(_, e)| e.matches(host)) => Ok(()),
            GuestEgress::Only(_) => {
                Err(format!("{host} is not in this Machine's spec.network.egress.allow (add it there to allow it)"))
            }
        }
    }

    /// The IPv4 networks this guest may reach by routed traffic (other protocols than HTTP
    /// and HTTPS): its allowlist's IPv4 addresses and networks, each once and none inside
    /// another (the packet filter's interval set refuses overlapping elements).
    pub fn routed_v4(&self) -> Vec<Cidr> {
        let GuestEgress::Only(entries) = self else { return vec![] };
        let nets: Vec<Cidr> = entries
            .iter()
            .filter_map(|(_, e)| match e {
                AllowEntry::Net(c) if c.addr.is_ipv4() => Some(*c),
                AllowEntry::Host(Pattern::Ip(ip @ IpAddr::V4(_))) => Some(Cidr { addr: *ip, prefix: 32 }),
                _ => None,
            })
            .collect();
        let mut out: Vec<Cidr> = Vec::new();
        for (i, c) in nets.iter().enumerate() {
            // Two CIDRs are nested or apart: keep the widest, and the first of equals.
            let covered = nets
                .iter()
                .enumerate()
                .any(|(j, o)| o.contains(c.addr) && (o.prefix < c.prefix || (o.prefix == c.prefix && j < i)));
            if !covered {
                out.push(*c);
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn compile(mode: EgressMode, allow: &[&str]) -> Option<GuestEgress> {
        GuestEgress::compile(&EgressSpec { mode, allow: allow.iter().map(|s| s.to_string()).collect() }).unwrap()
    }

    #[test]
    fn a_machines_egress_narrows_by_name_and_network() {
        assert_eq!(compile(EgressMode::Internet, &[]), None);
        let none = compile(EgressMode::None, &[]).unwrap();
        assert!(none.check(&parse_host("pypi.org").unwrap()).unwrap_err().contains("mode is None"));
        let only = compile(EgressMode::Allowlist, &[".pypi.org", "198.51.100.0/24", "192.0.2.7"]).unwrap();
        only.check(&parse_host("files.pypi.org:443").unwrap()).unwrap();
        only.check(&parse_host("198.51.100.9").unwrap()).unwrap();
        let refused = only.check(&parse_host("evil.test").unwrap()).unwrap_err();
        assert!(refused.contains("evil.test") && refused.contains("egress.allow"), "{refused}");
        assert!(only.check(&parse_host("pypi.org.evil.test").unwrap()).is_err());
        assert_eq!(
            only.routed_v4().iter().map(ToString::to_string).collect::<Vec<_>>(),
            ["198.51.100.0/24", "192.0.2.7/32"]
        );
        // Nested and repeated networks are one element each (nft refuses overlapping ones).
        let nested =
            compile(EgressMode::Allowlist, &["198.51.100.7", "198.51.100.0/24", "198.51.100.0/24", "10.0.0.0/8"])
                .unwrap();
        assert_eq!(
            nested.routed_v4().iter().map(ToString::to_string).collect::<Vec<_>>(),
            ["198.51.100.0/24", "10.0.0.0/8"]
        );
    }

    #[test]
    fn bad_allow_entries_name_their_index_and_problem() {
        let bad = |allow: &[&str]| {
            GuestEgress::compile(&EgressSpec {
                mode: EgressMode::Allowlist,
                allow: allow.iter().map(|s| s.to_string()).collect(),
            })
            .unwrap_err()
        };
        assert_eq!(bad(&["ok.test", "https://x.test"]).0, 1);
        assert!(bad(&["10.0.0.0/33"]).1.contains("0 to 32"));
        assert!(bad(&["10.0.0.0/08"]).1.contains("0 to 32"));
        assert!(bad(&["a.test:443"]).1.contains("label"));
        assert!(bad(&["2001:db8::/32"]).1.contains("IPv4"));
        assert!(bad(&["-a.test"]).1.contains("label"));
        // Host bits are cleared, as a NetworkPolicy reads a CIDR.
        let c = GuestEgress::compile(&EgressSpec { mode: EgressMode::Allowlist, allow: vec!["10.1.2.3/8".into()] });
        assert_eq!(c.unwrap().unwrap().routed_v4()[0].to_string(), "10.0.0.0/8");
    }

    /// The parser takes exactly what the API document's pattern states (checked on a sample of
    /// both kinds, with a regex engine in the test only).
    #[test]
    fn the_parser_is_the_documents_pattern() {
        let re = regex::Regex::new(ALLOW_ENTRY_PATTERN).unwrap();
        for text in [
            "pypi.org",
            ".pythonhosted.org",
            "*.example.com",
            "Example.COM.",
            "a_b.test",
            "123",
            "10.0.0",
            "256.1.1.1",
            "1.2.3.4",
            "10.0.0.0/8",
            "0.0.0.0/0",
            "192.0.2.7/32",
            "x",
            "a-b.c-d",
            "",
            "-a",
            "a-",
            "a..b",
            "*.",
            ".",
            "a/b",
            "10.0.0.0/33",
            "10.0.0.0/08",
            "01.2.3.4/8",
            "1.2.3/8",
            "a.test:443",
            "https://a",
            "a b",
            "*a.test",
            "a.*.test",
            "::1",
            "2001:db8::/32",
            "a.test..",
        ] {
            assert_eq!(re.is_match(text), AllowEntry::parse(text).is_ok(), "{text:?}");
        }
        assert!(!re.is_match(&"a".repeat(254)) && AllowEntry::parse(&"a".repeat(254)).is_err());
    }
}
