//! Who reads the Prometheus counters (they name every namespace's pools and Machines): on the
//! api's `/metrics` an admin or a `metrics` token, never a tenant; a `metrics` token reads
//! nothing else. The controllers' own listener serves other hosts only behind that token.

use std::process::Command;

use kairon_e2e::{Kairon, Process};

/// (HTTP status, body) of a GET with `token`.
fn get(url: &str, ca: Option<&std::path::Path>, token: Option<&str>) -> (u16, String) {
    let mut cmd = Command::new("curl");
    cmd.args(["-sS", "-o", "-", "-w", "\n%{http_code}"]);
    if let Some(ca) = ca {
        cmd.arg("--cacert").arg(ca);
    }
    if let Some(t) = token {
        cmd.args(["-H", &format!("Authorization: Bearer {t}")]);
    }
    let out = cmd.arg(url).output().expect("curl");
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let (body, code) = text.rsplit_once('\n').unwrap_or(("", &text));
    (code.trim().parse().unwrap_or(0), body.to_string())
}

#[test]
fn metrics_are_read_by_admins_and_scrapers_only() {
    let k = Kairon::start().expect("kairon up");
    let ca = k.data_dir.path().join("tls/ca.crt");
    let api = |path: &str, token: &str| get(&format!("{}{path}", k.url), Some(&ca), Some(token));
    let scraper = k.token("prometheus", "metrics", &[]).unwrap();
    let operator = k.token("alice", "operator", &["agents"]).unwrap();
    let viewer = k.token("vera", "viewer", &["*"]).unwrap();

    for (who, token) in [("the admin", &k.admin_token), ("a metrics token", &scraper)] {
        let (status, body) = api("/metrics", token);
        assert_eq!(status, 200, "{who}: {body}");
        assert!(body.contains("kairon_"), "{who} reads the counters: {body}");
    }
    for (who, token) in [("an operator", &operator), ("a viewer", &viewer)] {
        let (status, body) = api("/metrics", token);
        assert_eq!(status, 403, "{who}: {body}");
        assert!(body.contains("/metrics is read with an admin token or a metrics token"), "{who}: {body}");
        assert!(!body.contains("kairon_"), "{who} reads no counter: {body}");
    }
    // The scraper's token opens nothing else: not the REST API, the Kubernetes API, MCP or a ticket.
    for path in [
        "/api/v1/machines",
        "/api/v1/whoami",
        "/apis/kairon.zyvor.dev/v1/machines",
        "/api/v1/namespaces",
        "/api/v1/tickets",
    ] {
        let (status, body) = api(path, &scraper);
        assert_eq!(status, 403, "{path}: {body}");
        assert!(body.contains("prometheus is a metrics scraper: its token reads /metrics and nothing else"), "{body}");
    }

    // The controllers' listener: not open to other hosts without a token.
    let kubeconfig = k.kubeconfig.to_string_lossy().to_string();
    let open = Command::new(kairon_e2e::kairon_bin())
        .args(["controller", "--kubeconfig", &kubeconfig, "--metrics-listen", "0.0.0.0:0"])
        .output()
        .unwrap();
    let said = String::from_utf8_lossy(&open.stderr);
    assert!(!open.status.success() && said.contains("give --metrics-token-file"), "{said}");
    let file = k.data_dir.path().join("metrics-token");
    std::fs::write(&file, format!("{scraper}\n")).unwrap();
    let controller = Process::start(
        &[
            "controller",
            "--kubeconfig",
            &kubeconfig,
            "--identity",
            "scraped",
            "--metrics-listen",
            "0.0.0.0:0",
            "--metrics-token-file",
            file.to_str().unwrap(),
        ],
        "metrics:",
    )
    .unwrap();
    let port = controller.ready_line.trim().rsplit(':').next().unwrap().trim_end_matches("/metrics").to_string();
    let url = format!("http://127.0.0.1:{port}/metrics");
    assert_eq!(get(&url, None, None).0, 401, "no token");
    assert_eq!(get(&url, None, Some(&operator)).0, 401, "another token");
    // A stand-by (kairon up's own controllers hold the Lease) has counted nothing yet: 200 is
    // what tells the scraper's token apart.
    let (status, body) = get(&url, None, Some(&scraper));
    assert_eq!(status, 200, "{body}");
}
