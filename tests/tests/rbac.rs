//! RBAC checked against behaviour: each component's calls to the Kubernetes API, recorded while
//! `kairon up` does a day's work through every kind of REST route (the api's own identity
//! `kairon-api`, the node agent `local`, the controllers `kairon-controller-local`), compared
//! with its ClusterRole (and the controllers' lease Role) in `deploy/kustomize/rbac.yaml`:
//! nothing it calls is missing from its role, and nothing in its role goes unused.

use std::collections::BTreeSet;
use std::time::Duration;

use kairon_e2e::day_of_work::{Permission, granted, not_taken_here};
use kairon_e2e::{Flags, Kairon};

/// The permissions each component was seen using, from the api's request log.
fn recorded(logs: &str, sub: &str) -> BTreeSet<Permission> {
    let field = |line: &str, key: &str| -> String {
        let at = format!("{key}=");
        line.split_whitespace()
            .find_map(|w| w.strip_prefix(at.as_str()))
            .map(|v| v.trim_matches('"').to_string())
            .unwrap_or_default()
    };
    logs.lines()
        .map(kairon_e2e::strip_ansi)
        .filter(|l| l.contains("kairon_api::requests") && field(l, "sub") == sub)
        .map(|l| {
            let (resource, subresource) = (field(&l, "resource"), field(&l, "subresource"));
            let resource = if subresource.is_empty() { resource } else { format!("{resource}/{subresource}") };
            (field(&l, "group"), resource, field(&l, "verb"))
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn each_components_calls_are_exactly_its_role() {
    let k = Kairon::start_with(
        &Flags::fast_activity("1s").usage_interval("1s").with(&["--test-min-idle-timeout-seconds", "2"]),
    )
    .unwrap();
    let ns = "rbac";
    kairon_e2e::day_of_work::day_of_work(&k.rest().unwrap(), k.client().await.unwrap(), ns, "local", 2).await;
    // The controllers and node agent settle.
    tokio::time::sleep(Duration::from_secs(3)).await;

    // The controllers act on what they see a little after the requests that caused it: the
    // comparison is taken again until it holds, for a while.
    let compare = || {
        let logs = k.logs();
        let mut report = Vec::new();
        for (sub, roles) in [
            ("kairon-api", &["kairon-api"][..]),
            ("local", &["kairon-node"][..]),
            ("kairon-controller-local", &["kairon-controller", "kairon-controller-lease"][..]),
        ] {
            let used = recorded(&logs, sub);
            let have = granted(roles);
            let missing: Vec<_> = used.difference(&have).collect();
            let unused: Vec<_> = have.difference(&used).filter(|p| !not_taken_here(roles[0], p)).collect();
            if used.is_empty() || !missing.is_empty() || !unused.is_empty() {
                report.push(format!(
                    "{sub} ({roles:?}):\n  called but not granted: {missing:?}\n  granted but never called: {unused:?}"
                ));
            }
        }
        report
    };
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    let mut report = compare();
    while !report.is_empty() && std::time::Instant::now() < deadline {
        tokio::time::sleep(Duration::from_secs(1)).await;
        report = compare();
    }
    assert!(report.is_empty(), "{}", report.join("\n"));
}
