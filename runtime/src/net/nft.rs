//! The node's nftables table: what guests may send, and where it goes.

use std::collections::HashMap;
use std::fmt::Write;
use std::net::Ipv4Addr;

use super::{DNS_PORT, HTTP_PORT, Plan, TLS_PORT};
use crate::egress::{Cidr, EgressPolicy};

/// The whole table, replacing any earlier one of this node (loaded with `nft -f -`, in one
/// transaction).
/// `narrowed` holds the guests whose Machines narrow their egress, each with the networks it
/// may still reach by routed traffic.
pub fn ruleset(plan: &Plan, policy: &EgressPolicy, narrowed: &HashMap<Ipv4Addr, Vec<Cidr>>) -> String {
    let table = plan.table();
    let guests = format!("\"{}*\"", plan.link_prefix());
    let gw = plan.gateway;
    let mut deny: Vec<String> = policy.denied_v4().map(|c| c.to_string()).collect();
    deny.push(plan.subnet.to_string());
    // Routed traffic (not DNS, HTTP or HTTPS, which the resolver and proxy judge): all of it
    // when the node has no allowlist, but a narrowed guest's only to its allowlist's networks.
    let other = if policy.allows_everything() {
        "ip saddr . ip daddr @allowed4 accept\n\t\tip saddr @narrowed4 counter drop\n\t\taccept"
    } else {
        "counter drop"
    };
    let elements = |items: Vec<String>| match items.is_empty() {
        true => String::new(),
        false => format!(" elements = {{ {} }};", items.join(", ")),
    };
    let narrowed4 = elements(narrowed.keys().map(ToString::to_string).collect());
    let allowed4 =
        elements(narrowed.iter().flat_map(|(ip, nets)| nets.iter().map(move |net| format!("{ip} . {net}"))).collect());
    // nf_conncount: the guest's open connections (closed ones leave the count).
    let conns_set = "\tset conns { type ipv4_addr; flags dynamic; size 65535; }\n";
    let limit = format!(
        "\t\tmeta l4proto tcp ct state new add @conns {{ ip saddr ct count over {} }} counter reject with tcp reset\n",
        plan.max_connections
    );
    let mut s = String::new();
    let _ = write!(
        s,
        "add table inet {table}\n\
         delete table inet {table}\n\
         table inet {table} {{\n\
         \tcomment \"Kairon node {node}: guests {subnet}\"\n\
         \tset deny4 {{ type ipv4_addr; flags interval; auto-merge; elements = {{ {deny} }} }}\n\
         \tset narrowed4 {{ type ipv4_addr;{narrowed4} }}\n\
         \tset allowed4 {{ type ipv4_addr . ipv4_addr; flags interval;{allowed4} }}\n\
         {conns_set}\
         \tchain pre {{\n\
         \t\ttype nat hook prerouting priority dstnat; policy accept;\n\
         \t\tiifname {guests} meta l4proto {{ tcp, udp }} th dport 53 dnat ip to {gw}:{DNS_PORT}\n\
         \t\tiifname {guests} tcp dport 80 dnat ip to {gw}:{HTTP_PORT}\n\
         \t\tiifname {guests} tcp dport 443 dnat ip to {gw}:{TLS_PORT}\n\
         \t}}\n\
         \tchain input {{\n\
         \t\ttype filter hook input priority filter; policy accept;\n\
         \t\tiifname {guests} jump from_guest\n\
         \t}}\n\
         \tchain from_guest {{\n\
         \t\tmeta nfproto ipv6 drop\n\
         \t\tfib saddr . iif oif missing drop\n\
         \t\tct state established,related accept\n\
         {limit}\
         \t\tip daddr {gw} udp dport {DNS_PORT} accept\n\
         \t\tip daddr {gw} tcp dport {{ {HTTP_PORT}, {TLS_PORT} }} accept\n\
         \t\tcounter drop\n\
         \t}}\n\
         \tchain forward {{\n\
         \t\ttype filter hook forward priority filter; policy accept;\n\
         \t\tiifname {guests} jump through_guest\n\
         \t\toifname {guests} ct state established,related accept\n\
         \t\toifname {guests} drop\n\
         \t}}\n\
         \tchain through_guest {{\n\
         \t\tmeta nfproto ipv6 drop\n\
         \t\tfib saddr . iif oif missing drop\n\
         \t\tip daddr @deny4 counter drop\n\
         \t\toifname {guests} drop\n\
         {limit}\
         \t\t{other}\n\
         \t}}\n\
         \tchain post {{\n\
         \t\ttype nat hook postrouting priority srcnat; policy accept;\n\
         \t\tip saddr {subnet} oifname != {guests} masquerade\n\
         \t}}\n\
         }}\n",
        node = plan.node.replace(['"', '\\'], "_"),
        subnet = plan.subnet,
        deny = deny.join(", "),
    );
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn guests_reach_only_the_resolver_and_proxy_unless_everything_is_allowed() {
        let plan = Plan::new(
            "n1",
            &super::super::NetworkSettings { dns_upstream: Some("192.0.2.53".into()), ..Default::default() },
        )
        .unwrap();
        let open = ruleset(&plan, &EgressPolicy::default(), &HashMap::new());
        assert!(open.contains("169.254.0.0/16"), "{open}");
        assert!(open.contains(&plan.subnet.to_string()));
        assert!(open.contains("\t\taccept\n"));
        let guest = plan.guest_ip(0);
        let narrowed = HashMap::from([(guest, vec!["198.51.100.0/24".parse().unwrap()])]);
        let narrow = ruleset(&plan, &EgressPolicy::default(), &narrowed);
        assert!(narrow.contains(&format!("elements = {{ {guest} . 198.51.100.0/24 }}")), "{narrow}");
        let cfg = crate::egress::SandboxConfig { egress_allow_domains: vec!["a.test".into()], ..Default::default() };
        let closed = ruleset(&plan, &EgressPolicy::new(&cfg).unwrap(), &narrowed);
        assert!(!closed.contains("\t\taccept\n"), "{closed}");
        assert!(closed.contains(&format!("table inet {}", plan.table())));
        // The kernel takes both (checked, not applied).
        for rules in [&narrow, &closed] {
            let mut nft = std::process::Command::new("nft")
                .args(["-c", "-f", "-"])
                .stdin(std::process::Stdio::piped())
                .stderr(std::process::Stdio::piped())
                .spawn()
                .expect("nft (nftables) is installed");
            use std::io::Write as _;
            nft.stdin.take().unwrap().write_all(rules.as_bytes()).unwrap();
            let out = nft.wait_with_output().unwrap();
            assert!(out.status.success(), "{}\n{rules}", String::from_utf8_lossy(&out.stderr));
        }
    }
}
