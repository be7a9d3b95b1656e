//! Egress policy: a stateless decision from the node config.
//!
//! The node reads its TOML config file once, at daemon startup; its `[sandbox]` table holds
//! `egress_allow_domains` (a list of host patterns) and `inject_authorization` (a table of
//! host pattern → credential, the secret the node injects as an `Authorization` header on a
//! sandbox's requests to matching hosts). Nothing changes either at run time: there is no API
//! to edit them. [`EgressPolicy`] is built once from [`SandboxConfig`] and answers each egress
//! check ([`crate::api::EgressCheckRequest`]) with an [`EgressDecision`].
//!
//! # Patterns (`egress_allow_domains` entries and `inject_authorization` keys)
//!
//! | entry            | matches                                                        |
//! |------------------|----------------------------------------------------------------|
//! | `example.com`    | exactly `example.com`, nothing else                            |
//! | `*.example.com`  | any subdomain at any depth (`a.example.com`, `a.b.example.com`), NOT `example.com` itself |
//! | `.example.com`   | `example.com` and all its subdomains                           |
//! | `192.0.2.7`      | only that IPv4 address                                         |
//! | `2001:db8::1` or `[2001:db8::1]` | only that IPv6 address                         |
//!
//! Patterns are case-insensitive and one trailing dot is ignored (`Example.COM.` is
//! `example.com`). A pattern is refused (with [`EgressError::BadPattern`], naming it) when
//! it is empty, holds whitespace, a scheme (`https://…`), a path, a port, a `*` anywhere but
//! a leading `*.`, an empty label (`a..b`), a character other than ASCII letters, digits,
//! `-` and `_` (write internationalised names in their `xn--` form), a label that starts or
//! ends with `-`, a label over 63 or a name over 253 characters, a last label that is all
//! digits without the whole being an IPv4 address (`10.0.0`, `010.0.0.1`), or a wildcard or
//! leading dot on an IP address. **Ports are refused** in patterns: the request's port is
//! ignored for matching, so `example.com:443` in the allowlist would read as a restriction to
//! port 443 that is not enforced; refusing it keeps the config honest.
//!
//! # Request hosts
//!
//! The checked host is matched case-insensitively, ignores one trailing dot, and may carry a
//! port (`api.example.com:443`, `[2001:db8::1]:443`) that is ignored for matching. An IPv6
//! literal may come in brackets (with or without a port) or bare (`2001:db8::1`, no port).
//! An empty or malformed host (whitespace, a scheme, a path, `user@host`, a bad port, an empty
//! label, a numeric last label that is not an IPv4 address like `127.1`) is
//! [`EgressError::BadHost`], which the server maps to 422.
//!
//! Matching is on the name as written, never on what it resolves to: an IP entry does not
//! allow a name that resolves to it, nor a name entry its addresses. IP addresses compare
//! exactly, so `::ffff:192.0.2.7` does not match `192.0.2.7` (the safe direction: deny).
//! Look-alikes never match: `.example.com` allows neither `example.com.evil.net` nor
//! `evilexample.com`, because a match is always on whole labels from the right.
//!
//! # Decisions
//!
//! * An empty (or absent) `egress_allow_domains` allows every host, with the reason
//!   `"no egress allowlist is configured on this node: all hosts are allowed"`.
//! * Otherwise an allowed host's reason names the first entry (in list order) that matches
//!   it; a denied host's reason says it is not in `egress_allow_domains` and names the entry
//!   that would allow it.
//! * `credential` is `Some(secret)` only when the host is allowed AND an
//!   `inject_authorization` pattern matches it. When several match, the most specific wins:
//!   an exact name or IP first, then the wildcard with the most labels; a tie goes to the
//!   first in key order. The reason then also names that pattern (never the secret), also
//!   after the no-allowlist reason above.
//!
//! # Missing config file
//!
//! [`NodeConfig::load`] of a file that does not exist gives [`NodeConfig::default`], that is
//! an empty allowlist: allow everything, inject nothing. A node without a config file is one
//! the operator has not restricted, and an absent `[sandbox]` table or key means the same;
//! failing the node's startup instead would make the file mandatory. The choice is logged as
//! a warning. Any other read error, and any parse error, is an error naming the
//! file.

use std::collections::BTreeMap;
use std::fmt;
use std::net::IpAddr;
use std::path::{Path, PathBuf};

use serde::Deserialize;

pub use kairon_model::egress::Cidr;
use kairon_model::egress::{Host, Pattern, parse_pattern};

use crate::api::EgressDecision;

/// The reason given for every host when `egress_allow_domains` is empty.
pub const NO_ALLOWLIST_REASON: &str = "no egress allowlist is configured on this node: all hosts are allowed";

const ALLOW_FIELD: &str = "egress_allow_domains";
const INJECT_FIELD: &str = "inject_authorization";
const DENY_FIELD: &str = "egress_deny_cidrs";

/// Why a config, a pattern or a checked host was refused. No variant ever holds a credential.
#[derive(Debug, thiserror::Error)]
pub enum EgressError {
    /// The config file exists but could not be read.
    #[error("cannot read node config {}: {source}", path.display())]
    Read {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    /// The config is not valid TOML, or a field has the wrong type.
    #[error("invalid node config{}: {problem}", origin(file.as_deref()))]
    Parse { file: Option<PathBuf>, problem: String },
    /// An `egress_allow_domains` entry or `inject_authorization` key (or its value) is refused.
    #[error("invalid [sandbox] {field} entry {pattern:?}: {problem}")]
    BadPattern { field: &'static str, pattern: String, problem: String },
    /// A `--deny-cidr` value is not a CIDR.
    #[error("invalid --deny-cidr {value:?}: {problem}")]
    BadDenyFlag { value: String, problem: String },
    /// The checked host is empty or malformed (HTTP 422).
    #[error("invalid egress host {host:?}: {problem}")]
    BadHost { host: String, problem: String },
}

fn origin(file: Option<&Path>) -> String {
    match file {
        Some(path) => format!(" {}", path.display()),
        None => String::new(),
    }
}

/// The node config's `[sandbox]` table (the part of it this module reads).
///
/// `Debug` prints the `inject_authorization` patterns but not their credentials.
#[derive(Clone, Default, Deserialize)]
pub struct SandboxConfig {
    /// Host patterns a sandbox may reach; empty or absent = allow everything.
    #[serde(default)]
    pub egress_allow_domains: Vec<String>,
    /// Host pattern → the credential injected as an `Authorization` header for matching hosts.
    #[serde(default)]
    pub inject_authorization: BTreeMap<String, String>,
    /// Addresses no guest reaches, whatever the allowlist says (CIDRs; absent = the defaults,
    /// [`DEFAULT_DENY_CIDRS`]). The guest subnet is always added.
    #[serde(default)]
    pub egress_deny_cidrs: Option<Vec<String>>,
}

/// The deny set a node has when its config names none: "this host" and loopback, the private
/// ranges (RFC 1918, where clusters keep their API servers, kubelets, databases and services),
/// shared address space (100.64/10: carrier NAT, Tailscale, Alibaba's metadata address),
/// link-local (the clouds' metadata address 169.254.169.254), Azure's host address,
/// multicast and broadcast; for IPv6 the same kinds, unique-local (fc00::/7), AWS's metadata
/// address and every IPv4-mapped address (so a mapped form cannot name a denied IPv4 address).
/// A cluster whose pod or service ranges lie elsewhere adds them with `--deny-cidr`.
pub const DEFAULT_DENY_CIDRS: [&str; 17] = [
    "0.0.0.0/8",
    "10.0.0.0/8",
    "100.64.0.0/10",
    "127.0.0.0/8",
    "168.63.129.16/32",
    "169.254.0.0/16",
    "172.16.0.0/12",
    "192.168.0.0/16",
    "224.0.0.0/4",
    "255.255.255.255/32",
    "::/128",
    "::1/128",
    "fe80::/10",
    "fc00::/7",
    "ff00::/8",
    "fd00:ec2::254/128",
    "::ffff:0:0/96",
];

impl fmt::Debug for SandboxConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("SandboxConfig")
            .field("egress_allow_domains", &self.egress_allow_domains)
            .field(
                "inject_authorization",
                &self.inject_authorization.keys().map(|k| (k.as_str(), "<redacted>")).collect::<BTreeMap<_, _>>(),
            )
            .field("egress_deny_cidrs", &self.egress_deny_cidrs)
            .finish()
    }
}

/// The node's TOML config file; other tables are ignored here.
#[derive(Clone, Debug, Default, Deserialize)]
pub struct NodeConfig {
    #[serde(default)]
    pub sandbox: SandboxConfig,
    /// Template pulls: `[registry] insecure = ["host:port"]` and
    /// `[registry.auth."host"] username = "…", password = "…"`.
    #[serde(default)]
    pub registry: RegistrySettings,
    /// VMs: `[vm] image_dirs = ["/var/lib/fluxvm/images", "/images"]`.
    #[serde(default)]
    pub vm: VmSettings,
    /// Guest networking: `[network] attach_sandboxes`, `subnet`, `netns`, `dns_upstream`.
    #[serde(default)]
    pub network: crate::net::NetworkSettings,
}

/// The `[vm]` table of the node config.
#[derive(Clone, Debug, Default, Deserialize)]
pub struct VmSettings {
    /// Where `spec.image.path` and `spec.runtime.kernel.*` may lie (default
    /// `crate::vm::hostpaths::DEFAULT_IMAGE_DIRS`; the runtime's own images directory is always
    /// allowed too).
    #[serde(default)]
    pub image_dirs: Option<Vec<std::path::PathBuf>>,
    /// The largest new empty volume (`spec.volumes[].size`) a VM may ask of this node (default
    /// `crate::vm::DEFAULT_MAX_VOLUME_BYTES`, 256 GiB).
    #[serde(default)]
    pub max_volume_size: Option<kairon_model::Quantity>,
}

impl VmSettings {
    /// The configured image directories, or the default ones.
    pub fn image_dirs(&self) -> Vec<std::path::PathBuf> {
        match &self.image_dirs {
            Some(d) => d.clone(),
            None => crate::vm::hostpaths::DEFAULT_IMAGE_DIRS.iter().map(std::path::PathBuf::from).collect(),
        }
    }
}

#[derive(Clone, Default, Deserialize)]
pub struct RegistrySettings {
    /// Registries reached over plain HTTP.
    #[serde(default)]
    pub insecure: Vec<String>,
    #[serde(default)]
    pub auth: BTreeMap<String, RegistryLogin>,
}

#[derive(Clone, Deserialize)]
pub struct RegistryLogin {
    pub username: String,
    pub password: String,
}

/// Never prints passwords.
impl fmt::Debug for RegistrySettings {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RegistrySettings")
            .field("insecure", &self.insecure)
            .field("auth", &self.auth.keys().collect::<Vec<_>>())
            .finish()
    }
}

impl RegistrySettings {
    /// The pull settings these give, plus extra insecure hosts (from the command line).
    pub fn to_config(&self, extra_insecure: &[String]) -> crate::oci::RegistryConfig {
        let mut insecure_hosts = self.insecure.clone();
        insecure_hosts.extend(extra_insecure.iter().cloned());
        crate::oci::RegistryConfig {
            insecure_hosts,
            auth: self.auth.iter().map(|(h, l)| (h.clone(), (l.username.clone(), l.password.clone()))).collect(),
            proxy: None,
        }
    }
}

impl NodeConfig {
    /// Reads and parses the config file at `path`. A file that does not exist gives the
    /// default config (no allowlist: allow everything), with a warning; see the module doc.
    pub fn load(path: &Path) -> Result<NodeConfig, EgressError> {
        let text = match std::fs::read_to_string(path) {
            Ok(text) => text,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                tracing::warn!(
                    path = %path.display(),
                    "node config file not found: no egress allowlist, all hosts are allowed"
                );
                return Ok(NodeConfig::default());
            }
            Err(source) => {
                return Err(EgressError::Read { path: path.to_path_buf(), source });
            }
        };
        parse_text(&text, Some(path))
    }

    /// Parses config text. Errors give the line and column and the problem, without echoing
    /// the offending line (it may hold a credential).
    pub fn parse(text: &str) -> Result<NodeConfig, EgressError> {
        parse_text(text, None)
    }
}

fn parse_text(text: &str, file: Option<&Path>) -> Result<NodeConfig, EgressError> {
    let fail = |e: toml::de::Error, key: Option<String>| {
        let message = e.message().trim_end();
        let at = match key {
            Some(key) => format!("`{key}`: "),
            None => String::new(),
        };
        let problem = match e.span() {
            Some(span) => {
                let (line, column) = line_column(text, span.start);
                format!("line {line}, column {column}: {at}{message}")
            }
            None => format!("{at}{message}"),
        };
        EgressError::Parse { file: file.map(Path::to_path_buf), problem }
    };
    let de = toml::Deserializer::parse(text).map_err(|e| fail(e, None))?;
    serde_path_to_error::deserialize(de).map_err(|e| {
        let key = e.path().to_string();
        let key = (key != ".").then_some(key);
        fail(e.into_inner(), key)
    })
}

/// 1-based line and column (in characters) of byte offset `at` in `text`.
fn line_column(text: &str, at: usize) -> (usize, usize) {
    let before = text.get(..at).unwrap_or(text);
    let line = before.matches('\n').count() + 1;
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    let column = before[line_start..].chars().count() + 1;
    (line, column)
}

/// A pattern with the text the operator wrote, for reasons.
#[derive(Clone, Debug)]
struct Entry {
    text: String,
    pattern: Pattern,
}

/// The egress decision for one node, built once from its [`SandboxConfig`].
///
/// `Debug` prints patterns, never credentials.
#[derive(Clone)]
pub struct EgressPolicy {
    allow: Vec<Entry>,
    inject: Vec<(Entry, String)>,
    /// Addresses never reached, with the text that put each there.
    deny: Vec<(String, Cidr)>,
}

/// No allowlist and nothing to inject: every host is allowed (a node with no config file),
/// but for the default deny set.
impl Default for EgressPolicy {
    fn default() -> Self {
        EgressPolicy::new(&SandboxConfig::default()).expect("the default deny set parses")
    }
}

impl fmt::Debug for EgressPolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EgressPolicy")
            .field("egress_allow_domains", &self.allow.iter().map(|e| &e.text).collect::<Vec<_>>())
            .field("inject_authorization", &self.inject.iter().map(|(e, _)| &e.text).collect::<Vec<_>>())
            .field("egress_deny_cidrs", &self.deny.iter().map(|(t, _)| t).collect::<Vec<_>>())
            .finish()
    }
}

impl EgressPolicy {
    /// Validates every pattern (and that every credential is a usable header value) and
    /// builds the policy. The first refused pattern is the error, naming it.
    pub fn new(cfg: &SandboxConfig) -> Result<Self, EgressError> {
        let allow =
            cfg.egress_allow_domains.iter().map(|text| entry(ALLOW_FIELD, text)).collect::<Result<Vec<_>, _>>()?;
        let inject = cfg
            .inject_authorization
            .iter()
            .map(|(text, secret)| {
                let entry = entry(INJECT_FIELD, text)?;
                check_credential(text, secret)?;
                Ok((entry, secret.clone()))
            })
            .collect::<Result<Vec<_>, EgressError>>()?;
        let deny_texts: Vec<String> = match &cfg.egress_deny_cidrs {
            Some(list) => list.clone(),
            None => DEFAULT_DENY_CIDRS.iter().map(|s| s.to_string()).collect(),
        };
        let deny = deny_texts
            .into_iter()
            .map(|text| {
                let cidr = text.parse::<Cidr>().map_err(|problem| EgressError::BadPattern {
                    field: DENY_FIELD,
                    pattern: text.clone(),
                    problem,
                })?;
                Ok((text, cidr))
            })
            .collect::<Result<Vec<_>, EgressError>>()?;
        Ok(EgressPolicy { allow, inject, deny })
    }

    /// Adds the CIDRs given on the command line (`--deny-cidr`: a cluster's pod and service
    /// ranges) to the deny set, whatever the config file says.
    pub fn deny_also(mut self, cidrs: &[String]) -> Result<Self, EgressError> {
        for text in cidrs {
            let cidr =
                text.parse::<Cidr>().map_err(|problem| EgressError::BadDenyFlag { value: text.clone(), problem })?;
            self.deny.push((format!("{text} (--deny-cidr)"), cidr));
        }
        Ok(self)
    }

    /// Adds the node's guest subnet to the deny set: a guest never reaches another guest.
    pub fn deny_guest_subnet(mut self, subnet: Cidr) -> Self {
        self.deny.push((format!("{subnet} (the guest subnet)"), subnet));
        self
    }

    /// The deny-set entry that holds `ip`, if any.
    pub fn denied_address(&self, ip: IpAddr) -> Option<&str> {
        self.deny.iter().find(|(_, c)| c.contains(ip)).map(|(t, _)| t.as_str())
    }

    /// The IPv4 CIDRs of the deny set (what the node's packet filter drops).
    pub fn denied_v4(&self) -> impl Iterator<Item = Cidr> + '_ {
        self.deny.iter().map(|(_, c)| *c).filter(|c| matches!(c.addr, IpAddr::V4(_)))
    }

    /// Whether some host has a credential to inject.
    pub fn injects_anything(&self) -> bool {
        !self.inject.is_empty()
    }

    /// Whether the allowlist is empty (every host allowed, other protocols routed).
    pub fn allows_everything(&self) -> bool {
        self.allow.is_empty()
    }

    /// Decides whether a sandbox may reach `host` (optionally `host:port`).
    ///
    /// The returned decision's `credential` holds the literal secret that would be injected.
    /// It is for the node's privileged callers only: the Kairon api turns it into
    /// `wouldInjectCredential: bool` and never passes the value on. The `reason` never holds
    /// a secret and may be shown to anyone who may run the check.
    pub fn check(&self, host: &str) -> Result<EgressDecision, EgressError> {
        Ok(self.check_parsed(&parse_host(host)?))
    }

    /// [`Self::check`] of a host already parsed (nothing left to fail).
    pub fn check_parsed(&self, parsed: &Host) -> EgressDecision {
        if let Host::Ip(ip) = parsed
            && let Some(entry) = self.denied_address(*ip)
        {
            return EgressDecision {
                allow: false,
                reason: format!(
                    "{parsed} is in this node's {DENY_FIELD} ({entry}): no guest reaches it, whatever {ALLOW_FIELD} says"
                ),
                credential: None,
            };
        }
        let mut reason = if self.allow.is_empty() {
            NO_ALLOWLIST_REASON.to_string()
        } else if let Some(entry) = self.allow.iter().find(|e| e.pattern.matches(parsed)) {
            format!("{parsed} is allowed by {ALLOW_FIELD} entry {:?}", entry.text)
        } else {
            return EgressDecision { allow: false, reason: denied_reason(parsed), credential: None };
        };
        let mut best: Option<&(Entry, String)> = None;
        for candidate in self.inject.iter().filter(|(e, _)| e.pattern.matches(parsed)) {
            if best.is_none_or(|(b, _)| candidate.0.pattern.specificity() > b.pattern.specificity()) {
                best = Some(candidate);
            }
        }
        let credential = best.map(|(entry, secret)| {
            reason.push_str(&format!(
                "; an Authorization header from {INJECT_FIELD} entry {:?} would be injected",
                entry.text
            ));
            secret.clone()
        });
        EgressDecision { allow: true, reason, credential }
    }
}

fn denied_reason(host: &Host) -> String {
    let suggestion = match host {
        Host::Ip(_) => format!("{:?}", host.to_string().trim_matches(['[', ']'])),
        Host::Name(name) => {
            let labels: Vec<&str> = name.split('.').collect();
            match labels.len() {
                1 => format!("{name:?}"),
                2 => format!("{name:?} (or \".{name}\" for it and all its subdomains)"),
                _ => {
                    let parent = labels[1..].join(".");
                    format!("{name:?} (or \".{parent}\" for all of {parent})")
                }
            }
        }
    };
    format!(
        "{host} is not in this node's {ALLOW_FIELD}; adding {suggestion} to {ALLOW_FIELD} in \
         the [sandbox] table of the node's config file (read at node startup) would allow it"
    )
}

fn entry(field: &'static str, text: &str) -> Result<Entry, EgressError> {
    let pattern =
        parse_pattern(text).map_err(|problem| EgressError::BadPattern { field, pattern: text.to_string(), problem })?;
    Ok(Entry { text: text.to_string(), pattern })
}

fn check_credential(pattern: &str, secret: &str) -> Result<(), EgressError> {
    let problem = if secret.trim().is_empty() {
        "the credential is empty"
    } else if secret.chars().any(|c| c.is_control()) {
        "the credential holds a control character (such as a line break), which cannot go in \
         an HTTP header"
    } else {
        return Ok(());
    };
    Err(EgressError::BadPattern { field: INJECT_FIELD, pattern: pattern.to_string(), problem: problem.to_string() })
}

/// Parses a request host (see the module doc); a malformed one is [`EgressError::BadHost`].
pub fn parse_host(raw: &str) -> Result<Host, EgressError> {
    kairon_model::egress::parse_host(raw).map_err(|problem| EgressError::BadHost { host: raw.to_string(), problem })
}
