//! Egress policy: every rule of `kairon_runtime::egress`, one table at a time.

use std::collections::BTreeMap;

use kairon_runtime::egress::{EgressError, EgressPolicy, NO_ALLOWLIST_REASON, NodeConfig, SandboxConfig};

fn policy(allow: &[&str]) -> EgressPolicy {
    policy_with(allow, &[])
}

fn policy_with(allow: &[&str], inject: &[(&str, &str)]) -> EgressPolicy {
    EgressPolicy::new(&config(allow, inject)).expect("valid config")
}

fn config(allow: &[&str], inject: &[(&str, &str)]) -> SandboxConfig {
    SandboxConfig {
        egress_allow_domains: allow.iter().map(|s| s.to_string()).collect(),
        inject_authorization: inject.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect::<BTreeMap<_, _>>(),
        // The matcher's tables below use loopback and link-local literals as plain IPs; the
        // deny set has its own tests.
        egress_deny_cidrs: Some(vec![]),
    }
}

/// The default deny set refuses loopback, link-local (metadata) and mapped addresses whatever
/// the allowlist says, with a reason of its own; a configured set replaces it; bad entries are
/// refused at load.
#[test]
fn the_deny_set_wins_over_the_allowlist() {
    let open = EgressPolicy::new(&SandboxConfig::default()).expect("defaults");
    let inside = [
        "127.0.0.1",
        "169.254.169.254",
        "[::1]",
        "[::ffff:127.0.0.1]",
        "0.0.0.0",
        "[fd00:ec2::254]",
        "10.96.0.1",
        "172.16.0.1",
        "172.31.255.254",
        "192.168.1.1",
        "100.64.0.1",
        "100.100.100.200",
        "168.63.129.16",
        "[fd12::1]",
    ];
    for host in inside {
        let d = open.check(host).expect("check");
        assert!(!d.allow, "{host}: {d:?}");
        assert!(d.reason.contains("egress_deny_cidrs"), "{host}: {}", d.reason);
    }
    for host in ["198.51.100.7", "172.32.0.1", "100.128.0.1", "11.0.0.1", "8.8.8.8"] {
        assert!(open.check(host).unwrap().allow, "{host} is outside the default deny set");
    }
    // A cluster's own ranges come from the command line, added to whatever the file says.
    let cluster = open.clone().deny_also(&["203.0.113.0/24".into()]).unwrap();
    let d = cluster.check("203.0.113.9").unwrap();
    assert!(!d.allow && d.reason.contains("--deny-cidr"), "{d:?}");
    assert!(!cluster.check("10.1.2.3").unwrap().allow, "the defaults stay");
    let err = open.clone().deny_also(&["203.0.113.0/40".into()]).expect_err("not a CIDR").to_string();
    assert!(err.contains("--deny-cidr") && err.contains("203.0.113.0/40"), "{err}");
    let listed = EgressPolicy::new(&SandboxConfig {
        egress_allow_domains: vec!["169.254.169.254".into()],
        ..Default::default()
    })
    .unwrap();
    assert!(!listed.check("169.254.169.254").unwrap().allow, "an allowlisted metadata address stays denied");
    let own = EgressPolicy::new(&SandboxConfig {
        egress_deny_cidrs: Some(vec!["192.0.2.0/24".into()]),
        ..Default::default()
    })
    .unwrap();
    assert!(!own.check("192.0.2.9").unwrap().allow);
    assert!(own.check("127.0.0.1").unwrap().allow, "a configured set replaces the defaults");
    let subnet = open.clone().deny_guest_subnet("10.64.16.0/20".parse().unwrap());
    assert!(!subnet.check("10.64.17.3").unwrap().allow);
    for bad in ["10.0.0.1/8", "10.0.0.0/33", "example.com", ""] {
        let err = EgressPolicy::new(&SandboxConfig { egress_deny_cidrs: Some(vec![bad.into()]), ..Default::default() })
            .expect_err(bad)
            .to_string();
        assert!(err.contains("egress_deny_cidrs"), "{bad}: {err}");
    }
}

/// Runs `(allowlist, host, allowed?)` rows and reports every failing row at once.
fn assert_table(rows: &[(&[&str], &str, bool)]) {
    let mut failures = Vec::new();
    for (allow, host, want) in rows {
        let decision = policy(allow).check(host).expect("host is well-formed");
        if decision.allow != *want {
            failures.push(format!("allow={allow:?} host={host:?}: want allow={want}, got {decision:?}"));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn exact_entry_matches_only_that_name() {
    let e: &[&str] = &["example.com"];
    assert_table(&[
        (e, "example.com", true),
        (e, "a.example.com", false),
        (e, "a.b.example.com", false),
        (e, "example.org", false),
        (e, "xample.com", false),
        (e, "com", false),
    ]);
}

#[test]
fn star_entry_matches_subdomains_at_any_depth_but_not_the_domain() {
    let e: &[&str] = &["*.example.com"];
    assert_table(&[
        (e, "a.example.com", true),
        (e, "a.b.example.com", true),
        (e, "x.y.z.example.com", true),
        (e, "example.com", false),
        (e, "example.com.", false),
        (e, "com", false),
    ]);
}

#[test]
fn dot_entry_matches_the_domain_and_all_subdomains() {
    let e: &[&str] = &[".example.com"];
    assert_table(&[
        (e, "example.com", true),
        (e, "a.example.com", true),
        (e, "a.b.example.com", true),
        (e, "example.org", false),
        (e, "com", false),
    ]);
}

#[test]
fn look_alike_hosts_are_refused() {
    let rows: Vec<(&[&str], &str, bool)> = [&["example.com"][..], &["*.example.com"][..], &[".example.com"][..]]
        .into_iter()
        .flat_map(|e| {
            [
                "example.com.evil.net",
                "a.example.com.evil.net",
                "evilexample.com",
                "a.evilexample.com",
                "example.co",
                "example.com-evil.net",
                "xn--example.com",
                "examplecom",
            ]
            .into_iter()
            .map(move |h| (e, h, false))
        })
        .collect();
    assert_table(&rows);
}

#[test]
fn matching_ignores_case_on_both_sides() {
    assert_table(&[
        (&["example.com"], "EXAMPLE.com", true),
        (&["Example.COM"], "example.com", true),
        (&["*.Example.Com"], "API.example.COM", true),
        (&[".EXAMPLE.com"], "Example.Com", true),
    ]);
}

#[test]
fn matching_ignores_one_trailing_dot_on_both_sides() {
    assert_table(&[
        (&["example.com"], "example.com.", true),
        (&["example.com."], "example.com", true),
        (&["example.com."], "example.com.", true),
        (&["*.example.com"], "a.example.com.", true),
        (&["*.example.com."], "a.example.com", true),
        (&[".example.com."], "example.com", true),
        (&["192.0.2.7"], "192.0.2.7.", true),
    ]);
}

#[test]
fn the_request_port_is_ignored() {
    assert_table(&[
        (&["api.example.com"], "api.example.com:443", true),
        (&["api.example.com"], "api.example.com:8080", true),
        (&["api.example.com"], "api.example.com.:443", true),
        (&["*.example.com"], "a.b.example.com:1", true),
        (&["192.0.2.7"], "192.0.2.7:80", true),
        (&["2001:db8::1"], "[2001:db8::1]:443", true),
        (&["evil.com"], "api.example.com:443", false),
    ]);
}

#[test]
fn ipv6_literals_in_brackets_or_bare() {
    assert_table(&[
        (&["2001:db8::1"], "[2001:db8::1]", true),
        (&["2001:db8::1"], "[2001:DB8:0:0:0:0:0:1]", true),
        (&["[2001:db8::1]"], "2001:db8::1", true),
        (&["[2001:db8::1]"], "[2001:db8::1]:8443", true),
        (&["2001:db8::1"], "[2001:db8::2]", false),
        (&["::1"], "[::1]", true),
        // IP entries compare exactly: an IPv4-mapped address is a different address.
        (&["192.0.2.7"], "[::ffff:192.0.2.7]", false),
    ]);
}

#[test]
fn ip_entries_match_only_that_ip() {
    assert_table(&[
        (&["192.0.2.7"], "192.0.2.7", true),
        (&["192.0.2.7"], "192.0.2.70", false),
        (&["192.0.2.7"], "192.0.2.7.nip.io", false),
        (&["192.0.2.7"], "[::1]", false),
        // Names never match IP entries and IPs never match name entries.
        (&[".example.com"], "192.0.2.7", false),
        (&["localhost"], "127.0.0.1", false),
    ]);
}

#[test]
fn empty_allowlist_allows_everything_with_the_documented_reason() {
    let p = policy(&[]);
    for host in ["example.com", "a.b.c.evil.net:443", "192.0.2.7", "[::1]"] {
        let d = p.check(host).expect("well-formed");
        assert!(d.allow, "{host}");
        assert_eq!(d.reason, NO_ALLOWLIST_REASON, "{host}");
        assert_eq!(d.credential, None, "{host}");
    }
    assert_eq!(NO_ALLOWLIST_REASON, "no egress allowlist is configured on this node: all hosts are allowed");
    // Absent from the TOML is the same as empty.
    let cfg = NodeConfig::parse("[sandbox]\n").expect("parses");
    assert!(EgressPolicy::new(&cfg.sandbox).expect("valid").check("x.y").expect("well-formed").allow);
}

#[test]
fn allowed_reason_names_the_first_matching_entry() {
    let p = policy(&["other.org", "*.example.com", ".example.com"]);
    let cases = [
        ("api.example.com", "\"*.example.com\""),
        ("example.com", "\".example.com\""),
        ("OTHER.org.", "\"other.org\""),
    ];
    for (host, entry) in cases {
        let d = p.check(host).expect("well-formed");
        assert!(d.allow, "{host}: {d:?}");
        assert!(d.reason.contains(entry), "{host}: {}", d.reason);
        assert!(d.reason.contains("egress_allow_domains"), "{}", d.reason);
    }
}

#[test]
fn denied_reason_says_what_would_allow_it() {
    let p = policy(&["example.com"]);
    let cases = [
        (
            "api.evil.com",
            "api.evil.com is not in this node's egress_allow_domains",
            &["\"api.evil.com\"", "\".evil.com\""][..],
        ),
        ("API.Evil.com.:443", "api.evil.com is not in this node's egress_allow_domains", &["\"api.evil.com\""][..]),
        ("evil.com", "evil.com is not in this node's egress_allow_domains", &["\"evil.com\"", "\".evil.com\""][..]),
        ("localhost", "localhost is not in this node's egress_allow_domains", &["\"localhost\""][..]),
        ("192.0.2.9", "192.0.2.9 is not in this node's egress_allow_domains", &["\"192.0.2.9\""][..]),
        ("[2001:db8::9]:443", "[2001:db8::9] is not in this node's egress_allow_domains", &["\"2001:db8::9\""][..]),
    ];
    for (host, prefix, suggestions) in cases {
        let d = p.check(host).expect("well-formed");
        assert!(!d.allow, "{host}");
        assert_eq!(d.credential, None, "{host}");
        assert!(d.reason.starts_with(prefix), "{host}: {}", d.reason);
        for s in suggestions {
            assert!(d.reason.contains(s), "{host}: {} lacks {s}", d.reason);
        }
    }
}

#[test]
fn bad_request_hosts_are_errors() {
    let p = policy(&["example.com"]);
    let empty = policy(&[]);
    let hosts = [
        "",
        " ",
        "example.com ",
        " example.com",
        "exa mple.com",
        "https://example.com",
        "example.com/path",
        "user@example.com",
        "example.com@evil.net",
        "example..com",
        ".example.com",
        "example.com..",
        ".",
        "example.com:",
        "example.com:http",
        "example.com:65536",
        "example.com:-1",
        "example.com:443:443",
        "[2001:db8::1",
        "[2001:db8::1]443",
        "[example.com]",
        "2001:db8::zz",
        "fe80::1%eth0",
        "*.example.com",
        "exa*mple.com",
        "-example.com",
        "example-.com",
        "bücher.example",
        "127.1",
        "010.0.0.1",
        "192.0.2.256",
        "1.192.0.2.7",
        "a\nb",
    ];
    let mut failures = Vec::new();
    for host in hosts {
        for p in [&p, &empty] {
            match p.check(host) {
                Err(EgressError::BadHost { host: h, problem }) => {
                    assert_eq!(h, host);
                    assert!(!problem.is_empty());
                }
                other => failures.push(format!("{host:?}: {other:?}")),
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
    let long = format!("{}.com", "a".repeat(64));
    assert!(matches!(p.check(&long), Err(EgressError::BadHost { .. })));
    let too_long = vec!["a".repeat(60); 5].join(".") + ".com";
    assert!(matches!(p.check(&too_long), Err(EgressError::BadHost { .. })));
    let msg = p.check("").map(|_| ()).expect_err("empty").to_string();
    assert!(msg.contains("empty"), "{msg}");
}

#[test]
fn unusual_but_valid_hosts_are_accepted() {
    let p = policy(&[]);
    for host in [
        "localhost",
        "_service.example.com",
        "xn--bcher-kva.example",
        "a-b.example.com",
        "1.example.com",
        "example.com:0",
        "example.com:65535",
        "[::]:1",
        "::",
    ] {
        assert!(p.check(host).is_ok(), "{host}");
    }
}

#[test]
fn invalid_patterns_are_refused_naming_the_pattern() {
    let bad = [
        ("", "empty"),
        (" ", "whitespace"),
        ("example.com ", "whitespace"),
        ("https://example.com", "scheme"),
        ("example.com/path", "path"),
        ("example.com:443", "port"),
        ("192.0.2.7:443", "port"),
        ("[2001:db8::1]:443", "port"),
        ("*", "`*`"),
        ("*example.com", "`*`"),
        ("a.*.example.com", "`*`"),
        ("**.example.com", "`*`"),
        ("*.", "no domain"),
        (".", "no domain"),
        ("..example.com", "empty label"),
        ("example..com", "empty label"),
        ("example.com..", "empty label"),
        ("*.192.0.2.7", "IP address"),
        (".192.0.2.7", "IP address"),
        ("10.0.0", "all-digit"),
        ("010.0.0.1", "all-digit"),
        ("bücher.example", "xn--"),
        ("ex!ample.com", "not allowed"),
        ("-example.com", "`-`"),
        ("user@example.com", "@"),
        ("2001:db8::zz", "IPv6"),
    ];
    let mut failures = Vec::new();
    for field in ["egress_allow_domains", "inject_authorization"] {
        for (pattern, problem_word) in bad {
            let cfg = if field == "egress_allow_domains" {
                config(&[pattern], &[])
            } else {
                config(&[], &[(pattern, "Bearer s3cret")])
            };
            match EgressPolicy::new(&cfg) {
                Err(ref e @ EgressError::BadPattern { field: f, pattern: ref p, .. }) => {
                    let msg = e.to_string();
                    if f != field
                        || p != pattern
                        || !msg.contains(&format!("{pattern:?}"))
                        || !msg.contains(field)
                        || !msg.contains(problem_word)
                        || msg.contains("s3cret")
                    {
                        failures.push(format!("{field} {pattern:?}: {msg}"));
                    }
                }
                other => failures.push(format!("{field} {pattern:?}: {other:?}")),
            }
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn valid_pattern_forms_are_accepted() {
    for pattern in [
        "example.com",
        "Example.COM.",
        "*.example.com",
        ".example.com",
        "localhost",
        "_acme.example.com",
        "xn--bcher-kva.example",
        "192.0.2.7",
        "2001:db8::1",
        "[2001:db8::1]",
        "*.com",
    ] {
        assert!(EgressPolicy::new(&config(&[pattern], &[(pattern, "Bearer x")])).is_ok(), "{pattern}");
    }
}

#[test]
fn credential_only_when_a_pattern_matches_and_the_host_is_allowed() {
    let p = policy_with(
        &[".example.com", "open.org"],
        &[("api.example.com", "Bearer api"), ("*.secret.net", "Bearer secret")],
    );
    let cases = [
        // Allowed and matched: the secret.
        ("api.example.com", true, Some("Bearer api")),
        ("API.example.com.:443", true, Some("Bearer api")),
        // Allowed, no inject pattern matches.
        ("www.example.com", true, None),
        ("example.com", true, None),
        ("open.org", true, None),
        // An inject pattern matches but the host is denied: no credential.
        ("a.secret.net", false, None),
        ("evil.net", false, None),
    ];
    for (host, allow, credential) in cases {
        let d = p.check(host).expect("well-formed");
        assert_eq!(d.allow, allow, "{host}: {d:?}");
        assert_eq!(d.credential.as_deref(), credential, "{host}");
        assert!(!d.reason.contains("Bearer"), "reason leaks: {}", d.reason);
        if credential.is_some() {
            assert!(d.reason.contains("inject_authorization entry"), "{}", d.reason);
        }
    }
}

#[test]
fn credential_with_empty_allowlist_uses_pattern_syntax() {
    let p = policy_with(
        &[],
        &[("*.example.com", "Bearer wild"), (".corp.internal", "Bearer corp"), ("192.0.2.7", "Bearer ip")],
    );
    let cases = [
        ("a.b.example.com", Some("Bearer wild")),
        ("example.com", None),
        ("corp.internal", Some("Bearer corp")),
        ("x.corp.internal", Some("Bearer corp")),
        ("192.0.2.7:443", Some("Bearer ip")),
        ("example.com.evil.net", None),
        ("evilexample.com", None),
    ];
    for (host, credential) in cases {
        let d = p.check(host).expect("well-formed");
        assert!(d.allow, "{host}");
        assert!(d.reason.starts_with(NO_ALLOWLIST_REASON), "{}", d.reason);
        assert_eq!(d.credential.as_deref(), credential, "{host}");
    }
}

#[test]
fn most_specific_credential_pattern_wins() {
    let p = policy_with(
        &[],
        &[(".example.com", "domain"), ("*.api.example.com", "api-wild"), ("v1.api.example.com", "exact")],
    );
    let cases = [
        ("v1.api.example.com", "exact"),
        ("v2.api.example.com", "api-wild"),
        ("www.example.com", "domain"),
        ("example.com", "domain"),
    ];
    for (host, want) in cases {
        let d = p.check(host).expect("well-formed");
        assert_eq!(d.credential.as_deref(), Some(want), "{host}");
    }
}

#[test]
fn unusable_credentials_are_refused_without_echoing_them() {
    for secret in ["", "   ", "Bearer a\r\nX-Evil: 1", "Bearer \u{7f}"] {
        let err = EgressPolicy::new(&config(&[], &[("example.com", secret)])).expect_err("refused").to_string();
        assert!(err.contains("\"example.com\""), "{err}");
        assert!(err.contains("inject_authorization"), "{err}");
        assert!(err.contains("credential"), "{err}");
        assert!(secret.trim().is_empty() || !err.contains(secret), "{err}");
        assert!(!err.contains("Bearer"), "{err}");
    }
}

#[test]
fn debug_output_never_shows_credentials() {
    let cfg = config(&["example.com"], &[("example.com", "Bearer top-secret")]);
    let p = EgressPolicy::new(&cfg).expect("valid");
    for text in [format!("{cfg:?}"), format!("{p:?}")] {
        assert!(!text.contains("top-secret"), "{text}");
        assert!(text.contains("example.com"), "{text}");
    }
    let node = NodeConfig { sandbox: cfg, ..Default::default() };
    assert!(!format!("{node:?}").contains("top-secret"));
}

#[test]
fn decision_serialises_in_the_api_shape() {
    let p = policy_with(&["example.com"], &[("example.com", "Bearer t")]);
    let allowed = serde_json::to_value(p.check("example.com").expect("ok")).expect("json");
    assert_eq!(allowed["allow"], true);
    assert_eq!(allowed["credential"], "Bearer t");
    let denied = serde_json::to_value(p.check("evil.com").expect("ok")).expect("json");
    assert_eq!(denied["allow"], false);
    assert!(denied.get("credential").is_none());
}

#[test]
fn toml_config_parses() {
    let text = r#"
[node]
name = "n1"

[sandbox]
egress_allow_domains = ["*.example.com", ".pypi.org", "192.0.2.7"]
other_setting = 3

[sandbox.inject_authorization]
"api.example.com" = "Bearer abc"
"#;
    let cfg = NodeConfig::parse(text).expect("parses");
    assert_eq!(cfg.sandbox.egress_allow_domains, ["*.example.com", ".pypi.org", "192.0.2.7"]);
    assert_eq!(cfg.sandbox.inject_authorization.get("api.example.com").map(String::as_str), Some("Bearer abc"));
    let p = EgressPolicy::new(&cfg.sandbox).expect("valid");
    let d = p.check("api.example.com:443").expect("ok");
    assert!(d.allow);
    assert_eq!(d.credential.as_deref(), Some("Bearer abc"));
    assert!(p.check("files.pypi.org").expect("ok").allow);
    assert!(!p.check("pypi.org.evil.net").expect("ok").allow);

    for empty in ["", "[node]\nname = \"x\"\n", "[sandbox]\n"] {
        let cfg = NodeConfig::parse(empty).expect("parses");
        assert!(cfg.sandbox.egress_allow_domains.is_empty());
        assert!(cfg.sandbox.inject_authorization.is_empty());
    }
}

#[test]
fn toml_errors_name_the_problem_and_place() {
    let cases = [
        // (text, words the message must hold)
        (
            "[sandbox]\negress_allow_domains = \"example.com\"\n",
            &["line 2", "`sandbox.egress_allow_domains`", "sequence"][..],
        ),
        ("[sandbox]\negress_allow_domains = [1]\n", &["line 2", "`sandbox.egress_allow_domains[0]`", "string"][..]),
        ("[sandbox\n", &["line 1", "unclosed table"][..]),
        ("[sandbox]\negress_allow_domains = [\"a\",\n", &["line 2", "unclosed array"][..]),
        ("[sandbox]\ninject_authorization = 5\n", &["line 2", "`sandbox.inject_authorization`", "map"][..]),
        (
            "[sandbox.inject_authorization]\n\"a.com\" = 5\n",
            &["line 2", "`sandbox.inject_authorization.a.com`", "string"][..],
        ),
        ("sandbox = 1\n", &["line 1", "`sandbox`"][..]),
    ];
    for (text, words) in cases {
        let err = NodeConfig::parse(text).expect_err(text);
        assert!(matches!(err, EgressError::Parse { file: None, .. }), "{err:?}");
        let msg = err.to_string();
        assert!(msg.starts_with("invalid node config: "), "{msg}");
        assert!(!msg.contains('\n'), "one line: {msg:?}");
        for w in words {
            assert!(msg.contains(w), "{text:?}: {msg:?} lacks {w:?}");
        }
    }
}

#[test]
fn load_reads_a_file_and_names_it_in_errors() {
    let dir = tempfile::tempdir().expect("tempdir");

    let good = dir.path().join("good.toml");
    std::fs::write(&good, "[sandbox]\negress_allow_domains = [\"example.com\"]\n").expect("write");
    let cfg = NodeConfig::load(&good).expect("loads");
    assert_eq!(cfg.sandbox.egress_allow_domains, ["example.com"]);

    let bad = dir.path().join("bad.toml");
    std::fs::write(&bad, "[sandbox]\negress_allow_domains = 7\n").expect("write");
    let err = NodeConfig::load(&bad).expect_err("bad toml");
    let msg = err.to_string();
    assert!(msg.contains(&bad.display().to_string()), "{msg}");
    assert!(msg.contains("line 2"), "{msg}");
    assert!(msg.contains("`sandbox.egress_allow_domains`"), "{msg}");

    // A directory cannot be read as a file: a read error naming the path.
    let err = NodeConfig::load(dir.path()).expect_err("directory");
    assert!(matches!(err, EgressError::Read { .. }), "{err:?}");
    assert!(err.to_string().contains(&dir.path().display().to_string()));
}

#[test]
fn load_of_a_missing_file_is_the_allow_all_default() {
    let dir = tempfile::tempdir().expect("tempdir");
    let cfg = NodeConfig::load(&dir.path().join("absent.toml")).expect("default");
    assert!(cfg.sandbox.egress_allow_domains.is_empty());
    assert!(cfg.sandbox.inject_authorization.is_empty());
    let d = EgressPolicy::new(&cfg.sandbox).expect("valid").check("anything.example").expect("ok");
    assert!(d.allow);
    assert_eq!(d.reason, NO_ALLOWLIST_REASON);
}

#[test]
fn the_node_config_carries_registry_settings() {
    let cfg = kairon_runtime::egress::NodeConfig::parse(
        "[registry]\ninsecure = [\"127.0.0.1:5000\"]\n[registry.auth.\"registry.example.com\"]\nusername = \"bot\"\npassword = \"s3cret\"\n",
    )
    .unwrap();
    let pull = cfg.registry.to_config(&["localhost:5001".into()]);
    assert_eq!(pull.insecure_hosts, ["127.0.0.1:5000", "localhost:5001"]);
    assert_eq!(pull.auth["registry.example.com"], ("bot".to_string(), "s3cret".to_string()));
    assert!(!format!("{cfg:?}").contains("s3cret"), "Debug never prints passwords");
}
