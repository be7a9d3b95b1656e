//! Kairon installed on a real Kubernetes control plane (`scripts/k8s-testbed`) as a user would
//! (`kairon_e2e::testbed::Install`: the kustomize base, then the api, two controllers and two
//! nodes as processes with their own ServiceAccounts' bound tokens), and its stories run there,
//! one after another on the one install (a cluster has one Kairon), each in its own namespace.

use futures::StreamExt;
use kube::api::{Api, DynamicObject, Patch, PatchParams};
use kube::core::{ApiResource, GroupVersionKind};
use serde_json::{Value, json};
use tokio_tungstenite::tungstenite::Message;

use std::collections::BTreeSet;

use kairon_e2e::day_of_work::{Permission, day_of_work, granted, not_taken_here};
use kairon_e2e::testbed::Install;
use kairon_e2e::wait::{MINUTE, wait_for, wait_for_sync};

#[tokio::test(flavor = "multi_thread")]
async fn kairon_on_a_real_cluster() {
    let mut install = Install::start(&["a", "b"]).unwrap();
    // Each node registered itself with its own identity.
    install.wait_for_nodes();
    a_machine_runs_on_a_node(&install).await;
    // Idle suspension takes the spec's smallest timeout, 60 s: it runs beside the stories.
    let sleepy = an_idle_machine(&install).await;
    the_webhook_holds_nodes_and_tenants_to_their_own(&install).await;
    a_paused_pool_serves_claims_and_goes_with_its_members(&install).await;
    max_lifetime_deletes(&install).await;
    a_sandbox_migrates_between_the_nodes(&install).await;
    a_namespace_deleted_takes_its_machines_and_sandboxes(&install).await;
    the_standby_controller_leads_when_the_leader_is_killed(&mut install).await;
    a_quota_holds_against_racing_creates_on_every_path(&install).await;
    the_api_names_the_caller_of_each_write_and_the_webhook_holds_it_to_that_callers_rules(&install).await;
    a_quota_holds_templates_against_racing_creates(&install).await;
    a_websocket_ticket_minted_on_one_api_replica_opens_on_another(&install).await;
    each_components_calls_are_exactly_its_role(&install).await;
    it_was_suspended_and_wakes_on_connect(&install, sleepy).await;
}

/// A namespace's KaironQuota holds on a real cluster whoever writes: 20 creates racing for the
/// last 3 places, from a tenant's kubectl and REST token (Stopped VMs: a tenant may not write
/// sandbox-track Machines) and the MCP tool (an admin's: only admins make sandboxes there; REST
/// and MCP both write as the api's ServiceAccount), make exactly 3 Machines; a fork past the limit is refused; a dry
/// run is judged but charges nothing; a Machine deleted frees its place.
async fn a_quota_holds_against_racing_creates_on_every_path(install: &Install) {
    let tb = install.testbed;
    let ns = "quota";
    tb.kubectl(&["create", "namespace", ns]).unwrap();
    tb.apply(&format!(
        "apiVersion: kairon.zyvor.dev/v1\nkind: KaironQuota\nmetadata: {{name: limits, namespace: {ns}}}\n\
         spec: {{hard: {{machines: 4}}}}\n"
    ))
    .unwrap();
    let bob = tb.user("bob", None).unwrap();
    tb.kubectl(&["create", "rolebinding", "bob-edit", "--clusterrole=edit", "--user=bob", "-n", ns]).unwrap();
    let vm = |name: &str| {
        machine(ns, name, "  image: {path: /var/lib/fluxvm/images/kairon-hw.qcow2}\n  powerState: Stopped\n")
    };
    wait_for_sync("bob may create Machines", MINUTE / 2, std::time::Duration::from_millis(300), || {
        let out = tb.kubectl_as(&bob, &["create", "--dry-run=server", "-f", "-"], Some(&vm("probe")));
        if out.status.success() { Ok(()) } else { Err(String::from_utf8_lossy(&out.stderr).into_owned()) }
    });
    let rest = install.rest();
    let bob_rest = kairon_e2e::Rest::new(
        &install.api_url,
        &install.token("bob", "operator", &[ns]).unwrap(),
        install.api_ca.clone(),
    )
    .unwrap();
    let ca = install.dir.path().join("api/tls/ca.crt");
    let sandbox = |name: &str| {
        json!({"metadata": {"name": name},
        "spec": {"sandbox": {"templateName": "busybox"}, "guestAgent": {"console": true}}})
    };
    // The one a fork is tried from, later.
    assert_eq!(rest.post(&format!("/api/v1/machines/{ns}"), sandbox("base")).await.status, 201);
    assert_eq!(rest.wait_phase(ns, "base", "Running", 120).await.status, 200);

    // (path, name, admitted, what a refusal said)
    let mut racing = tokio::task::JoinSet::new();
    for i in 0..20 {
        let name = format!("r{i}");
        let (bob, yaml, bob_rest, ca, url, token) = (
            bob.clone(),
            vm(&name),
            bob_rest.clone(),
            ca.clone(),
            install.api_url.clone(),
            install.admin_token.clone(),
        );
        racing.spawn(async move {
            match i % 3 {
                0 => {
                    let out =
                        tokio::task::spawn_blocking(move || tb.kubectl_as(&bob, &["create", "-f", "-"], Some(&yaml)))
                            .await
                            .unwrap();
                    ("kubectl", name, out.status.success(), String::from_utf8_lossy(&out.stderr).into_owned())
                }
                1 => {
                    let body = serde_yaml::from_str::<Value>(&yaml).unwrap();
                    let a = bob_rest.post(&format!("/api/v1/machines/{ns}"), body).await;
                    let why = format!("{} {} {}", a.status, a.reason(), a.message());
                    ("REST", name, a.status == 201, why)
                }
                _ => {
                    let args = json!({"namespace": ns, "name": name, "template": "busybox"});
                    let (status, text) = tokio::task::spawn_blocking(move || {
                        kairon_e2e::mcp::Mcp::open(&url, &ca, Some(token)).call("create_sandbox", args)
                    })
                    .await
                    .unwrap();
                    ("MCP", name, status == 200, format!("{status} {text}"))
                }
            }
        });
    }
    let outcomes = racing.join_all().await;
    let admitted: Vec<&String> = outcomes.iter().filter(|o| o.2).map(|o| &o.1).collect();
    assert_eq!(admitted.len(), 3, "exactly the quota's 3 creates land: {outcomes:#?}");
    for (path, name, _, why) in outcomes.iter().filter(|o| !o.2) {
        assert!(why.contains("exceeded quota: limits") && why.contains("machines"), "{path} {name}: {why}");
        match *path {
            "REST" => assert!(why.starts_with("403 QuotaExceeded"), "{name}: {why}"),
            "MCP" => assert!(why.starts_with("403"), "{name}: {why}"),
            _ => {}
        }
    }
    let stored = tb.kubectl(&["get", "machines", "-n", ns, "-o", "name"]).unwrap();
    assert_eq!(stored.lines().count(), 4, "{stored}");
    let used = ["get", "kaironquota", "limits", "-n", ns];
    wait_field(install, "the quota to count 4", &used, ".status.used.machines", |u| u == "4");

    // A fork is a create too.
    let fork = rest.post(&format!("/api/v1/machines/{ns}/base/fork"), json!({"name": "forked"})).await;
    assert_eq!((fork.status, fork.reason()), (403, "QuotaExceeded"), "{fork:?}");
    assert!(fork.message().contains("exceeded quota: limits"), "{fork:?}");

    // This api has no --preview-domain: a preview link is refused, never served on a shared origin.
    let preview = rest.post(&format!("/api/v1/machines/{ns}/base/previews"), json!({"port": 8000})).await;
    assert_eq!((preview.status, preview.reason()), (501, "PreviewsUnavailable"), "{preview:?}");
    assert!(preview.message().contains("--preview-domain"), "{preview:?}");

    // One place freed: the quota says so, and a dry run takes nothing of it.
    let freed = admitted[0];
    assert_eq!(rest.delete(&format!("/api/v1/machines/{ns}/{freed}")).await.status, 200);
    rest.wait_deleted(ns, freed, 120).await;
    wait_field(install, "the quota to count 3", &used, ".status.used.machines", |u| u == "3");
    wait_field(install, "the spent reservations pruned", &used, ".status.reservations", str::is_empty);
    for name in ["dry-1", "dry-2"] {
        let out = tb.kubectl_as(&bob, &["create", "--dry-run=server", "-f", "-"], Some(&vm(name)));
        assert!(out.status.success(), "a dry run within the quota: {}", String::from_utf8_lossy(&out.stderr));
    }
    assert_eq!(field(install, &used, ".status.reservations"), "", "a dry run reserves nothing");
    let out = tb.kubectl_as(&bob, &["create", "-f", "-"], Some(&vm("last")));
    assert!(out.status.success(), "the freed place: {}", String::from_utf8_lossy(&out.stderr));
    let out = tb.kubectl_as(&bob, &["create", "--dry-run=server", "-f", "-"], Some(&vm("over")));
    let refused = String::from_utf8_lossy(&out.stderr);
    assert!(!out.status.success() && refused.contains("exceeded quota: limits"), "a dry run past it: {refused}");
    tb.kubectl(&["delete", "namespace", ns, "--wait=false"]).unwrap();
}

/// A namespace's KaironQuota limits its templates on a real cluster too: 6 creates racing from a
/// tenant's kubectl and REST token for a quota of 2 make exactly 2 templates; the quota reports
/// them; a template deleted frees its place.
async fn a_quota_holds_templates_against_racing_creates(install: &Install) {
    let tb = install.testbed;
    let ns = "template-quota";
    tb.kubectl(&["create", "namespace", ns]).unwrap();
    tb.apply(&format!(
        "apiVersion: kairon.zyvor.dev/v1\nkind: KaironQuota\nmetadata: {{name: limits, namespace: {ns}}}\n\
         spec: {{hard: {{templates: 2}}}}\n"
    ))
    .unwrap();
    let erin = tb.user("erin", None).unwrap();
    tb.kubectl(&["create", "rolebinding", "erin-edit", "--clusterrole=edit", "--user=erin", "-n", ns]).unwrap();
    let template = |name: &str| {
        format!(
            "apiVersion: kairon.zyvor.dev/v1\nkind: KaironTemplate\nmetadata: {{name: {name}, namespace: {ns}}}\n\
             spec: {{image: \"builtin:busybox\"}}\n"
        )
    };
    wait_for_sync("erin may create templates", MINUTE / 2, std::time::Duration::from_millis(300), || {
        let out = tb.kubectl_as(&erin, &["create", "--dry-run=server", "-f", "-"], Some(&template("probe")));
        if out.status.success() { Ok(()) } else { Err(String::from_utf8_lossy(&out.stderr).into_owned()) }
    });
    let erin_rest = kairon_e2e::Rest::new(
        &install.api_url,
        &install.token("erin", "operator", &[ns]).unwrap(),
        install.api_ca.clone(),
    )
    .unwrap();
    let mut racing = tokio::task::JoinSet::new();
    for i in 0..6 {
        let (name, yaml, erin, erin_rest) =
            (format!("t{i}"), template(&format!("t{i}")), erin.clone(), erin_rest.clone());
        racing.spawn(async move {
            if i % 2 == 0 {
                let out =
                    tokio::task::spawn_blocking(move || tb.kubectl_as(&erin, &["create", "-f", "-"], Some(&yaml)))
                        .await
                        .unwrap();
                (name, out.status.success(), String::from_utf8_lossy(&out.stderr).into_owned())
            } else {
                let body = serde_yaml::from_str::<Value>(&yaml).unwrap();
                let a = erin_rest.post(&format!("/api/v1/templates/{ns}"), body).await;
                (name, a.status == 201, format!("{} {} {}", a.status, a.reason(), a.message()))
            }
        });
    }
    let outcomes = racing.join_all().await;
    let admitted: Vec<&String> = outcomes.iter().filter(|o| o.1).map(|o| &o.0).collect();
    assert_eq!(admitted.len(), 2, "exactly the quota's 2 templates: {outcomes:#?}");
    for (name, _, why) in outcomes.iter().filter(|o| !o.1) {
        assert!(why.contains("exceeded quota: limits") && why.contains("templates=2"), "{name}: {why}");
        assert!(!why.starts_with("4") || why.starts_with("403 QuotaExceeded"), "{name}: {why}");
    }
    let quota = ["get", "kaironquota", "limits", "-n", ns];
    wait_field(install, "the quota to count 2 templates", &quota, ".status.summary", |s| s == "templates: 2/2");
    wait_field(install, "the spent reservations pruned", &quota, ".status.reservations", str::is_empty);
    tb.kubectl(&["delete", "kairontemplate", admitted[0], "-n", ns]).unwrap();
    wait_field(install, "the quota to count 1", &quota, ".status.used.templates", |u| u == "1");
    let out = tb.kubectl_as(&erin, &["create", "-f", "-"], Some(&template("freed")));
    assert!(out.status.success(), "the freed place: {}", String::from_utf8_lossy(&out.stderr));
    tb.kubectl(&["delete", "namespace", ns, "--wait=false"]).unwrap();
}

/// A write the api makes for a REST caller impersonates the api's own ServiceAccount with the
/// caller as the `kairon.zyvor.dev/requester` extra: the audit log names the caller, and the
/// webhook holds the write to the caller's rules (believing the extra from the api alone, which
/// RBAC lets impersonate only itself and only that extra).
async fn the_api_names_the_caller_of_each_write_and_the_webhook_holds_it_to_that_callers_rules(install: &Install) {
    let tb = install.testbed;
    let ns = "requesters";
    tb.kubectl(&["create", "namespace", ns]).unwrap();
    let vm = |ns: &str, name: &str| {
        machine(ns, name, "  image: {path: /var/lib/fluxvm/images/kairon-hw.qcow2}\n  powerState: Stopped\n")
    };
    let carol = kairon_e2e::Rest::new(
        &install.api_url,
        &install.token("carol", "operator", &[ns]).unwrap(),
        install.api_ca.clone(),
    )
    .unwrap();
    let made = carol.post(&format!("/api/v1/machines/{ns}"), serde_yaml::from_str(&vm(ns, "by-carol")).unwrap()).await;
    assert_eq!(made.status, 201, "{made:?}");
    let api_user = format!("system:serviceaccount:{}:kairon-api", kairon_e2e::testbed::SYSTEM);
    let named = wait_for_sync("the audit log to name carol", MINUTE, std::time::Duration::from_millis(300), || {
        let audit = tb.audit();
        let create = audit.iter().find(|e| {
            e["verb"] == "create" && e["objectRef"]["resource"] == "machines" && e["objectRef"]["namespace"] == ns
        });
        match create {
            Some(e) => Ok(e["impersonatedUser"].clone()),
            None => Err("no create of a Machine in the audit log yet"),
        }
    });
    assert_eq!(named["username"], api_user.as_str(), "the api impersonates itself: {named}");
    let requester = named["extra"]["kairon.zyvor.dev/requester"][0].as_str().unwrap_or_default();
    assert!(requester.contains("\"sub\":\"carol\"") && requester.contains("\"operator\""), "{named}");

    // The same extra from anyone else: RBAC refuses the impersonation itself.
    let dave = tb.user("dave", None).unwrap();
    tb.kubectl(&["create", "rolebinding", "dave-edit", "--clusterrole=edit", "--user=dave", "-n", ns]).unwrap();
    let extra = format!("--as-user-extra=kairon.zyvor.dev/requester={requester}");
    let as_api = format!("--as={api_user}");
    let create = ["create", "--validate=false", "-f", "-", &as_api, &extra];
    let forged = tb.kubectl_as(&dave, &create, Some(&vm(ns, "forged")));
    let refused = String::from_utf8_lossy(&forged.stderr);
    assert!(!forged.status.success() && refused.contains("cannot impersonate"), "{refused}");

    // The api's own credential naming carol: carol's rules, not the api's.
    let api = install.dir.path().join("kairon-api-all.kubeconfig");
    let elsewhere = "requesters-other";
    tb.kubectl(&["create", "namespace", elsewhere]).unwrap();
    let dry = ["create", "--dry-run=server", "-f", "-"];
    let for_carol = ["create", "--dry-run=server", "-f", "-", &as_api, &extra];
    let out = tb.kubectl_as(&api, &for_carol, Some(&vm(elsewhere, "outside")));
    kubectl_denied_by_kairon(&out, "carol");
    let sandbox = machine(ns, "sandbox", "  sandbox: {templateName: busybox}\n");
    let out = tb.kubectl_as(&api, &for_carol, Some(&sandbox));
    kubectl_denied_by_kairon(&out, "sandbox");
    let own = tb.kubectl_as(&api, &dry, Some(&sandbox));
    assert!(own.status.success(), "the api's own write: {}", String::from_utf8_lossy(&own.stderr));
    for n in [ns, elsewhere] {
        tb.kubectl(&["delete", "namespace", n, "--wait=false"]).unwrap();
    }
}

/// Behind the chart's api replicas a browser's WebSocket ticket is minted on one replica and
/// may land on another: tickets live in PostgreSQL, and work once whichever replica takes them.
async fn a_websocket_ticket_minted_on_one_api_replica_opens_on_another(install: &Install) {
    let ns = "replicas";
    install.testbed.kubectl(&["create", "namespace", ns]).unwrap();
    let one = install.rest();
    let sb = json!({"metadata": {"name": "shell"},
        "spec": {"sandbox": {"templateName": "busybox"}, "guestAgent": {"console": true}}});
    assert_eq!(one.post(&format!("/api/v1/machines/{ns}"), sb).await.status, 201);
    one.running(ns, "shell").await;
    let (_replica, url) = install.another_api().unwrap();
    let two = kairon_e2e::Rest::new(&url, &install.admin_token, install.api_ca.clone()).unwrap();
    let cmd = "%5B%22sh%22%2C%22-c%22%2C%22echo%20hi%22%5D";
    let path = format!("/api/v1/machines/{ns}/shell/exec/stream?command={cmd}");
    let body = json!({"path": format!("/api/v1/machines/{ns}/shell/exec/stream")});
    let ticket = one.post("/api/v1/tickets", body).await.ok()["ticket"].as_str().unwrap().to_string();
    let mut ws = two.websocket_with(&format!("{path}&ticket={ticket}"), &[]).await.expect("the other replica opens it");
    let mut out = Vec::new();
    while let Ok(Some(Ok(m))) = tokio::time::timeout(std::time::Duration::from_secs(30), ws.next()).await {
        match m {
            Message::Binary(b) => out.extend_from_slice(&b),
            Message::Close(_) => break,
            _ => {}
        }
    }
    assert_eq!(String::from_utf8_lossy(&out), "hi\n");
    for (replica, rest) in [("the minting", &one), ("the other", &two)] {
        let again = rest.websocket_with(&format!("{path}&ticket={ticket}"), &[]).await.err().unwrap();
        assert!(again.starts_with("401") && again.contains("unknown, used or expired"), "{replica}: {again}");
    }
    install.testbed.kubectl(&["delete", "namespace", ns, "--wait=false"]).unwrap();
}

/// A Machine that suspends after 60 idle seconds and wakes when someone connects.
async fn an_idle_machine(install: &Install) -> &'static str {
    let ns = "sleepers";
    install.testbed.kubectl(&["create", "namespace", ns]).unwrap();
    let spec = "  sandbox: {templateName: busybox}\n  guestAgent: {console: true}\n  \
                lifecycle: {idleTimeoutSeconds: 60, idleAction: Pause, wakeOnConnect: true}\n";
    install.testbed.apply(&machine(ns, "sleepy", spec)).unwrap();
    assert_eq!(install.rest().wait_phase(ns, "sleepy", "Running", 120).await.status, 200);
    ns
}

async fn it_was_suspended_and_wakes_on_connect(install: &Install, ns: &str) {
    let rest = install.rest();
    let paused = rest.wait_phase(ns, "sleepy", "Paused", 120).await;
    assert_eq!(paused.status, 200, "idle-suspended: {paused:?}");
    let events = install.testbed.kubectl(&["get", "events", "-n", ns, "-o", "json"]).unwrap();
    assert!(events.contains("IdleSuspended"), "{events}");
    let out =
        rest.post(&format!("/api/v1/machines/{ns}/sleepy/exec"), json!({"command": ["echo", "awake"]})).await.ok();
    assert_eq!(out["stdout"], "awake\n", "{out}");
    assert_eq!(field(install, &["get", "machine", "sleepy", "-n", ns], ".status.phase"), "Running");
}

/// `kubectl get` of one field (jsonpath), as the installer.
fn field(install: &Install, args: &[&str], path: &str) -> String {
    let jsonpath = format!("jsonpath={{{path}}}");
    let mut all = args.to_vec();
    all.extend(["-o", &jsonpath]);
    install.testbed.kubectl(&all).unwrap_or_default()
}

/// Waits until `check` of a `kubectl get` field holds.
fn wait_field(install: &Install, what: &str, args: &[&str], path: &str, check: impl Fn(&str) -> bool) -> String {
    wait_for_sync(what, 3 * MINUTE, std::time::Duration::from_millis(300), || {
        let v = field(install, args, path);
        if check(&v) { Ok(v) } else { Err(v) }
    })
}

async fn a_paused_pool_serves_claims_and_goes_with_its_members(install: &Install) {
    let tb = install.testbed;
    let ns = "pools";
    tb.kubectl(&["create", "namespace", ns]).unwrap();
    tb.apply(&format!(
        "apiVersion: kairon.zyvor.dev/v1\nkind: MachinePool\nmetadata: {{name: warm, namespace: {ns}}}\nspec:\n  \
         replicas: 3\n  warmPowerState: Paused\n  warmupSeconds: 0\n  template:\n    metadata:\n      \
         labels: {{kairon.zyvor.dev/sandbox: \"true\"}}\n    spec:\n      sandbox: {{templateName: busybox}}\n      \
         guestAgent: {{console: true}}\n"
    ))
    .unwrap();
    let pool = ["get", "machinepool", "warm", "-n", ns];
    wait_field(install, "3 warm members", &pool, ".status.warm", |w| w == "3");
    tb.apply(&format!(
        "apiVersion: kairon.zyvor.dev/v1\nkind: MachineClaim\nmetadata: {{name: c1, namespace: {ns}}}\nspec: {{poolName: warm}}\n"
    ))
    .unwrap();
    let claim = ["get", "machineclaim", "c1", "-n", ns];
    wait_field(install, "the claim Bound", &claim, ".status.phase", |p| p == "Bound");
    let member = field(install, &claim, ".status.machineName");
    let rest = install.rest();
    // A Paused member resumes once bound.
    assert_eq!(rest.wait_phase(ns, &member, "Running", 120).await.status, 200);
    let out =
        rest.post(&format!("/api/v1/machines/{ns}/{member}/exec"), json!({"command": ["echo", "claimed"]})).await.ok();
    assert_eq!(out["stdout"], "claimed\n", "{out}");
    // Its usage, in PostgreSQL's history.
    let rows = wait_for_sync("usage rows for the claim", MINUTE, std::time::Duration::from_millis(500), || {
        let sql = format!("SELECT count(*) FROM claim_usage_intervals WHERE namespace = '{ns}' AND claim_name = 'c1'");
        let n: i64 = kairon_e2e::psql_query(&install.database.url, &sql).unwrap().parse().unwrap();
        if n > 0 { Ok(n) } else { Err(n) }
    });
    assert!(rows > 0);
    // The pool deleted: the garbage collector takes its members (ownerReferences), and their
    // node agents their sandboxes, before the Machines go.
    tb.kubectl(&["delete", "machineclaim", "c1", "-n", ns]).unwrap();
    tb.kubectl(&["delete", "machinepool", "warm", "-n", ns, "--wait=false"]).unwrap();
    wait_field(
        install,
        "the pool's members gone",
        &["get", "machines", "-n", ns],
        ".items[*].metadata.name",
        str::is_empty,
    );
}

async fn max_lifetime_deletes(install: &Install) {
    let tb = install.testbed;
    let ns = "lifetimes";
    tb.kubectl(&["create", "namespace", ns]).unwrap();
    tb.apply(&machine(ns, "brief", "  sandbox: {templateName: busybox}\n  lifecycle: {maxLifetimeSeconds: 5}\n"))
        .unwrap();
    let running = install.rest().wait_phase(ns, "brief", "Running", 120).await;
    assert_eq!(running.status, 200, "{running:?}");
    wait_field(
        install,
        "the Machine deleted at its deadline",
        &["get", "machines", "-n", ns],
        ".items[*].metadata.name",
        str::is_empty,
    );
    let events = tb.kubectl(&["get", "events", "-n", ns, "-o", "json"]).unwrap();
    assert!(events.contains("LifetimeExpired"), "{events}");
}

async fn a_sandbox_migrates_between_the_nodes(install: &Install) {
    let tb = install.testbed;
    let ns = "movers";
    tb.kubectl(&["create", "namespace", ns]).unwrap();
    tb.apply(&machine(
        ns,
        "mover",
        "  nodeName: a\n  sandbox: {templateName: busybox}\n  guestAgent: {console: true}\n",
    ))
    .unwrap();
    let rest = install.rest();
    assert_eq!(rest.wait_phase(ns, "mover", "Running", 120).await.status, 200);
    let write = json!({"command": ["sh", "-c", "echo kept > /root/file"]});
    rest.post(&format!("/api/v1/machines/{ns}/mover/exec"), write).await.ok();
    // The exec's activity stamp races the migration's start: the server reads and plans again.
    let moved = rest.post(&format!("/api/v1/machines/{ns}/mover/migrate?targetNode=b"), json!({})).await;
    let moved = moved.ok();
    assert_eq!(field(install, &["get", "machine", "mover", "-n", ns], ".status.nodeName"), "b", "{moved}");
    assert_eq!(rest.wait_phase(ns, "mover", "Running", 120).await.status, 200);
    let out =
        rest.post(&format!("/api/v1/machines/{ns}/mover/exec"), json!({"command": ["cat", "/root/file"]})).await.ok();
    assert_eq!(out["stdout"], "kept\n", "{out}");
}

async fn a_namespace_deleted_takes_its_machines_and_sandboxes(install: &Install) {
    let tb = install.testbed;
    let ns = "doomed";
    tb.kubectl(&["create", "namespace", ns]).unwrap();
    tb.apply(&machine(ns, "gone", "  sandbox: {templateName: busybox}\n")).unwrap();
    assert_eq!(install.rest().wait_phase(ns, "gone", "Running", 120).await.status, 200);
    let id = field(install, &["get", "machine", "gone", "-n", ns], ".status.runtimeID");
    assert!(!id.is_empty());
    tb.kubectl(&["delete", "namespace", ns, "--wait=false"]).unwrap();
    wait_field(install, "the namespace gone", &["get", "namespaces"], ".items[*].metadata.name", |names| {
        !names.split_whitespace().any(|n| n == ns)
    });
    // No runtime holds its sandbox any more.
    for node in &install.nodes {
        let sandboxes = node.runtime_client().unwrap().list_sandboxes().await.unwrap();
        assert!(!sandboxes.iter().any(|s| s.id.as_str() == id), "{} still runs {id}", node.name);
    }
}

async fn the_standby_controller_leads_when_the_leader_is_killed(install: &mut Install) {
    let tb = install.testbed;
    let lease = ["get", "lease", "kairon-controller", "-n", kairon_e2e::testbed::SYSTEM];
    let leader = wait_field(install, "a leader", &lease, ".spec.holderIdentity", |h| !h.is_empty());
    let index = if leader == "controller-0" { 0 } else { 1 };
    install.controllers[index].kill9();
    let killed_at = std::time::Instant::now();
    let next =
        wait_field(install, "the standby leads", &lease, ".spec.holderIdentity", |h| !h.is_empty() && h != leader);
    let took = killed_at.elapsed();
    assert!(took < std::time::Duration::from_secs(5 * 3), "the standby {next} led after {took:?}");
    // And it works: a Machine is placed and runs.
    let ns = "after-failover";
    tb.kubectl(&["create", "namespace", ns]).unwrap();
    tb.apply(&machine(ns, "placed", "  sandbox: {templateName: busybox}\n")).unwrap();
    assert_eq!(install.rest().wait_phase(ns, "placed", "Running", 120).await.status, 200);
}

fn machine(ns: &str, name: &str, spec: &str) -> String {
    format!(
        "apiVersion: kairon.zyvor.dev/v1\nkind: Machine\nmetadata: {{name: {name}, namespace: {ns}}}\nspec:\n{spec}"
    )
}

async fn a_machine_runs_on_a_node(install: &Install) {
    let tb = install.testbed;
    tb.kubectl(&["create", "namespace", "agents"]).unwrap();
    tb.apply(&machine("agents", "first", "  sandbox: {templateName: busybox}\n  guestAgent: {console: true}\n"))
        .unwrap();
    let rest = install.rest();
    let running = rest.wait_phase("agents", "first", "Running", 120).await;
    assert_eq!(running.status, 200, "{running:?}\nrefused by RBAC: {:#?}", tb.forbidden());
    let machine: Value =
        serde_json::from_str(&tb.kubectl(&["get", "machine", "first", "-n", "agents", "-o", "json"]).unwrap()).unwrap();
    let node = machine["status"]["nodeName"].as_str().unwrap();
    assert!(node == "a" || node == "b", "{machine}");
    let out =
        rest.post("/api/v1/machines/agents/first/exec", json!({"command": ["echo", "on a real cluster"]})).await.ok();
    assert_eq!(out["stdout"], "on a real cluster\n", "{out}");
}

/// The webhook's refusal, as the real API server relays it: Kairon's message.
fn denied_by_kairon(result: Result<DynamicObject, kube::Error>, message: &str) {
    match result {
        Err(kube::Error::Api(status)) => assert!(
            status.message.contains("admission webhook \"validate.kairon.zyvor.dev\" denied the request")
                && status.message.contains(message),
            "want Kairon's webhook to refuse with {message:?}: {status:?}"
        ),
        other => panic!("want Kairon's webhook to refuse with {message:?}, got {other:?}"),
    }
}

/// The same for kubectl's answer.
fn kubectl_denied_by_kairon(out: &std::process::Output, message: &str) {
    let text = String::from_utf8_lossy(&out.stderr);
    assert!(
        !out.status.success()
            && text.contains("admission webhook \"validate.kairon.zyvor.dev\" denied the request")
            && text.contains(message),
        "want Kairon's webhook to refuse with {message:?}: {text}"
    );
}

fn kairon_api(client: &kube::Client, kind: &str, plural: &str, ns: Option<&str>) -> Api<DynamicObject> {
    let resource = ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk("kairon.zyvor.dev", "v1", kind), plural);
    match ns {
        Some(ns) => Api::namespaced_with(client.clone(), ns, &resource),
        None => Api::all_with(client.clone(), &resource),
    }
}

async fn the_webhook_holds_nodes_and_tenants_to_their_own(install: &Install) {
    let tb = install.testbed;
    let ns = "idents";
    tb.kubectl(&["create", "namespace", ns]).unwrap();
    tb.apply(&machine(ns, "on-a", "  nodeName: a\n  sandbox: {templateName: busybox}\n")).unwrap();
    let running = install.rest().wait_phase(ns, "on-a", "Running", 120).await;
    assert_eq!(running.status, 200, "{running:?}");

    // Node b's agent (a token bound to a Pod on node b): RBAC lets a node agent patch
    // KaironNodes and Machine status; the webhook lets it write only its own.
    let node_b = install.node_client("b").await;
    let merge = |v: Value| Patch::Merge(v);
    let nodes = kairon_api(&node_b, "KaironNode", "kaironnodes", None);
    let lie = json!({"spec": {"capacity": {"cpu": "512", "memory": "1Pi"}}});
    let r = nodes.patch("a", &PatchParams::default(), &merge(lie)).await;
    denied_by_kairon(r, "a node agent writes only its own KaironNode (\"b\"), not \"a\"");
    let machines = kairon_api(&node_b, "Machine", "machines", Some(ns));
    let r =
        machines.patch_status("on-a", &PatchParams::default(), &merge(json!({"status": {"phase": "Failed"}}))).await;
    denied_by_kairon(r, "this Machine is not on node \"b\"");
    let phase = tb.kubectl(&["get", "machine", "on-a", "-n", ns, "-o", "jsonpath={.status.phase}"]).unwrap();
    assert_eq!(phase, "Running", "node b changed nothing");
    // Its own KaironNode: status reports what it offers; spec.capacity caps it and is an
    // admin's, so a node that lies about its size cannot draw every new Machine.
    let lie = json!({"spec": {"capacity": {"cpu": "100000", "memory": "1Pi"}}});
    denied_by_kairon(nodes.patch("b", &PatchParams::default(), &merge(lie)).await, "spec.capacity caps");
    let reported = json!({"status": {"capacity": {"cpu": "20", "memory": "8Gi"}}});
    nodes.patch_status("b", &PatchParams::default(), &merge(reported)).await.expect("a node reports its capacity");
    // An Event about a Machine on another node (its ServiceAccount may write Events anywhere):
    // the webhook sees node agents' Events and refuses it.
    let forged: k8s_openapi::api::events::v1::Event = serde_json::from_value(json!({
        "metadata": {"name": "forged", "namespace": ns},
        "regarding": {"apiVersion": "kairon.zyvor.dev/v1", "kind": "Machine", "name": "on-a", "namespace": ns},
        "reason": "Forged", "action": "Forge", "note": "node b says so", "type": "Warning",
        "eventTime": "2026-01-01T00:00:00.000000Z", "reportingController": "kairon.zyvor.dev/node",
        "reportingInstance": "b"
    }))
    .unwrap();
    let events: Api<k8s_openapi::api::events::v1::Event> = Api::namespaced(node_b.clone(), ns);
    match events.create(&Default::default(), &forged).await {
        Err(kube::Error::Api(status)) => assert!(
            status.message.contains("admission webhook \"events.kairon.zyvor.dev\" denied the request")
                && status.message.contains("Events only about Machines on its own node"),
            "{status:?}"
        ),
        other => panic!("node b wrote an Event about node a's Machine: {other:?}"),
    }
    // Node a's agent still writes its own (the same Event, from node a's identity).
    let node_a = install.node_client("a").await;
    let mut own = forged.clone();
    own.metadata.name = Some("own".into());
    Api::<k8s_openapi::api::events::v1::Event>::namespaced(node_a, ns)
        .create(&Default::default(), &own)
        .await
        .expect("a node writes Events about its own Machines");

    // A tenant: client-certificate user alice with Kubernetes' own `edit` in one namespace,
    // which Kairon's ClusterRoles aggregate into.
    let alice = tb.user("alice", None).unwrap();
    tb.kubectl(&["create", "rolebinding", "alice-edit", "--clusterrole=edit", "--user=alice", "-n", ns]).unwrap();
    let vm = |labels: &str| {
        format!(
            "apiVersion: kairon.zyvor.dev/v1\nkind: Machine\nmetadata:\n  name: vm\n  namespace: {ns}\n{labels}\
             spec:\n  image: {{path: /var/lib/fluxvm/images/kairon-hw.qcow2}}\n"
        )
    };
    let create = ["create", "--dry-run=server", "-f", "-"];
    wait_for_sync("edit aggregates the Kairon kinds", MINUTE / 2, std::time::Duration::from_millis(300), || {
        let out = tb.kubectl_as(&alice, &create, Some(&vm("")));
        if out.status.success() { Ok(()) } else { Err(String::from_utf8_lossy(&out.stderr).into_owned()) }
    });
    let out = tb.kubectl_as(&alice, &create, Some(&vm("  labels: {kairon.zyvor.dev/pool: agents}\n")));
    kubectl_denied_by_kairon(&out, "is written by the controllers only");
    let out = tb.kubectl_as(&alice, &["get", "machines", "-n", "agents"], None);
    assert!(!out.status.success(), "alice reads nothing outside her namespace");

    // A tenant who may write Machines but not read Secrets reaches none through secretEnv: the
    // webhook asks the cluster (a SubjectAccessReview) whether the writer may get it.
    tb.apply(&format!(
        "apiVersion: v1\nkind: Secret\nmetadata: {{name: api-key, namespace: {ns}, labels: {{kairon.zyvor.dev/secret-env: \"true\"}}}}\n\
         stringData: {{token: s3cr3t}}\n---\n\
         apiVersion: rbac.authorization.k8s.io/v1\nkind: Role\nmetadata: {{name: machine-writer, namespace: {ns}}}\n\
         rules:\n- apiGroups: [kairon.zyvor.dev]\n  resources: [machines]\n  verbs: [create, get]\n---\n\
         apiVersion: rbac.authorization.k8s.io/v1\nkind: RoleBinding\nmetadata: {{name: machine-writer, namespace: {ns}}}\n\
         roleRef: {{apiGroup: rbac.authorization.k8s.io, kind: Role, name: machine-writer}}\n\
         subjects:\n- {{kind: User, name: mallory, apiGroup: rbac.authorization.k8s.io}}\n"
    ))
    .unwrap();
    let mallory = tb.user("mallory", None).unwrap();
    wait_for_sync("mallory's role in force", MINUTE / 2, std::time::Duration::from_millis(300), || {
        let out = tb.kubectl_as(&mallory, &create, Some(&vm("")));
        if out.status.success() { Ok(()) } else { Err(String::from_utf8_lossy(&out.stderr).into_owned()) }
    });
    let with_secret = format!(
        "apiVersion: kairon.zyvor.dev/v1\nkind: Machine\nmetadata:\n  name: vm\n  namespace: {ns}\n\
         spec:\n  image: {{path: /var/lib/fluxvm/images/kairon-hw.qcow2}}\n  \
         secretEnv: {{TOKEN: {{name: api-key, key: token}}}}\n"
    );
    let out = tb.kubectl_as(&mallory, &create, Some(&with_secret));
    kubectl_denied_by_kairon(&out, "spec.secretEnv.TOKEN names Secret \"api-key\", which mallory may not read");
    // Alice's `edit` reads Secrets: the same Machine is hers to make.
    let out = tb.kubectl_as(&alice, &create, Some(&with_secret));
    assert!(out.status.success(), "alice may reference a Secret she reads: {}", String::from_utf8_lossy(&out.stderr));

    // Even a cluster that gives a tenant the status subresource by mistake keeps Kairon's rule.
    tb.apply(&format!(
        "apiVersion: rbac.authorization.k8s.io/v1\nkind: Role\nmetadata: {{name: status-by-mistake, namespace: {ns}}}\n\
         rules:\n- apiGroups: [kairon.zyvor.dev]\n  resources: [machines/status]\n  verbs: [patch]\n---\n\
         apiVersion: rbac.authorization.k8s.io/v1\nkind: RoleBinding\nmetadata: {{name: status-by-mistake, namespace: {ns}}}\n\
         roleRef: {{apiGroup: rbac.authorization.k8s.io, kind: Role, name: status-by-mistake}}\n\
         subjects:\n- {{kind: User, name: alice, apiGroup: rbac.authorization.k8s.io}}\n"
    ))
    .unwrap();
    let alice_client = kairon_e2e::testbed::client(&alice).await;
    let machines = kairon_api(&alice_client, "Machine", "machines", Some(ns));
    let r = wait_for("the status role in force", MINUTE / 2, || async {
        let failed = merge(json!({"status": {"phase": "Failed"}}));
        match machines.patch_status("on-a", &PatchParams::default(), &failed).await {
            Err(kube::Error::Api(s)) if s.code == 403 && s.message.contains("is forbidden: User") => Err(s.message),
            other => Ok(other),
        }
    })
    .await;
    denied_by_kairon(r, "the status of machines is written by the controllers and node agents only");
}

/// The RBAC test's day of work (`tests/tests/rbac.rs`), on the real API server: its audit log
/// shows no request of Kairon's components that RBAC refused (the webhook's refusals are
/// admission's, not RBAC's), and every grant of `deploy/kustomize/rbac.yaml` used by this run
/// (the stories above and the day) but the named exceptions.
async fn each_components_calls_are_exactly_its_role(install: &Install) {
    let tb = install.testbed;
    let ns = "rbac";
    tb.kubectl(&["create", "namespace", ns]).unwrap();
    let admin = kairon_e2e::testbed::client(&tb.kubeconfig).await;
    // The spec's smallest idle timeout: a real API server holds Kairon's CEL rules.
    day_of_work(&install.rest(), admin, ns, "a", 60).await;

    let account = |name: &str| format!("system:serviceaccount:{}:{name}", kairon_e2e::testbed::SYSTEM);
    let components = [
        ("kairon-api", &["kairon-api", "kairon-api-impersonate"][..]),
        ("kairon-node", &["kairon-node"][..]),
        ("kairon-controller", &["kairon-controller", "kairon-controller-lease"][..]),
    ];
    let compare = || {
        let audit = tb.audit();
        let mut report = Vec::new();
        for (name, roles) in components {
            let user = account(name);
            let mine: Vec<&Value> = audit.iter().filter(|e| e["user"]["username"] == user.as_str()).collect();
            let refused: Vec<String> = mine
                .iter()
                .filter(|e| e["annotations"]["authorization.k8s.io/decision"] == "forbid")
                .map(|e| format!("{} {}", e["verb"], e["requestURI"]))
                .collect();
            let mut used = BTreeSet::<Permission>::new();
            // Whom a request impersonated was authorized as an impersonate of that user and of
            // each extra.
            for impersonated in mine.iter().map(|e| &e["impersonatedUser"]).filter(|u| u.is_object()) {
                used.insert((String::new(), "serviceaccounts".into(), "impersonate".into()));
                for key in impersonated["extra"].as_object().into_iter().flatten().map(|(k, _)| k) {
                    used.insert(("authentication.k8s.io".into(), format!("userextras/{key}"), "impersonate".into()));
                }
            }
            // Asking who one is needs no grant (system:basic-user).
            let asked = |e: &&&Value| e["objectRef"]["resource"] != "selfsubjectreviews";
            for e in mine.iter().filter(|e| e["objectRef"]["resource"].is_string()).filter(asked) {
                let r = &e["objectRef"];
                let resource = match r["subresource"].as_str() {
                    Some(sub) => format!("{}/{sub}", r["resource"].as_str().unwrap()),
                    None => r["resource"].as_str().unwrap().to_string(),
                };
                let group = r["apiGroup"].as_str().unwrap_or_default().to_string();
                let verb = e["verb"].as_str().unwrap().to_string();
                // A server-side apply that made the object (201) was authorized as a create too.
                if verb == "patch" && e["responseStatus"]["code"] == 201 {
                    used.insert((group.clone(), resource.clone(), "create".to_string()));
                }
                used.insert((group, resource, verb));
            }
            let have = granted(roles);
            let missing: Vec<_> = used.difference(&have).collect();
            let unused: Vec<_> = have.difference(&used).filter(|p| !not_taken_here(roles[0], p)).collect();
            if !refused.is_empty() || !missing.is_empty() || !unused.is_empty() {
                report.push(format!(
                    "{name}: refused by RBAC: {refused:?}\n  called but not granted: {missing:?}\n  granted but never called: {unused:?}"
                ));
            }
        }
        report
    };
    // The controllers act a little after the requests that caused it: compare until it holds.
    let report = wait_for("each component's calls to match its role", MINUTE, || async {
        let report = compare();
        if report.is_empty() { Ok(()) } else { Err(report.join("\n")) }
    })
    .await;
    let _: () = report;
}
