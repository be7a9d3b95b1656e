//! A day of work through every kind of REST route (Machines: create, read, update, power,
//! copies, a migration plan, Events; pools and claims; a quota; idle suspension; deletes): what
//! `tests/tests/rbac.rs` records against `kairon up` and the real-cluster stories against a real
//! API server's audit log, to compare each component's calls with its role.

use std::collections::BTreeSet;
use std::time::Duration;

use serde_json::{Value, json};

use crate::{Answer, Rest, eventually};

/// Runs the day in namespace `ns` (which must exist on a real cluster) on node `node`'s
/// sandboxes; `admin` makes the quota (a user's write, not a component's); the idle Machine
/// suspends after `idle_timeout_seconds`.
pub async fn day_of_work(rest: &Rest, admin: kube::Client, ns: &str, node: &str, idle_timeout_seconds: u32) {
    let base = format!("/api/v1/machines/{ns}");
    let ok = |r: Answer, what: &str| {
        assert!(r.status < 300, "{what}: {r:?}");
        r.body
    };
    // A quota the controllers report on (made by a user's admin token, not recorded).
    let secrets: kube::Api<k8s_openapi::api::core::v1::Secret> = kube::Api::namespaced(admin.clone(), ns);
    let quotas: kube::Api<kairon_model::KaironQuota> = kube::Api::namespaced(admin, ns);
    let quota: kairon_model::KaironQuota = serde_json::from_value(json!({
        "apiVersion": "kairon.zyvor.dev/v1", "kind": "KaironQuota", "metadata": {"name": "q", "namespace": ns},
        "spec": {"hard": {"machines": 50}}
    }))
    .unwrap();
    quotas.create(&Default::default(), &quota).await.unwrap();

    // The namespace's own template: a node builds it and reports the build in its status (the
    // node's own busybox, so no registry is needed), then a sandbox of it runs with the step's file.
    // Through every template route: create, wait, list, read, update (a label), and (later) delete.
    let tbase = format!("/api/v1/templates/{ns}");
    let template = json!({"metadata": {"name": "own"},
                          "spec": {"image": "builtin:busybox", "steps": ["echo built-here > /built.txt"]}});
    ok(rest.post(&tbase, template).await, "create template own");
    ok(rest.get(&format!("{tbase}/own/wait?phase=Ready&timeoutSeconds=180")).await, "wait template own");
    let listed = ok(rest.get(&tbase).await, "list templates");
    assert_eq!(listed["items"].as_array().map(Vec::len), Some(1), "{listed}");
    let mut template = ok(rest.get(&format!("{tbase}/own")).await, "get template own");
    template["metadata"]["labels"] = json!({"team": "a"});
    ok(rest.put(&format!("{tbase}/own"), template).await, "label template own");
    let own = json!({"metadata": {"name": "own"},
                     "spec": {"sandbox": {"templateName": "own"}, "guestAgent": {"enabled": true}}});
    ok(rest.post(&base, own).await, "create own");
    ok(rest.get(&format!("{base}/own/wait?phase=Running&timeoutSeconds=120")).await, "wait own");
    let seen = ok(rest.post(&format!("{base}/own/exec"), json!({"command": ["cat", "/built.txt"]})).await, "exec own");
    assert_eq!(seen["stdout"], "built-here\n", "{seen}");

    // Machines: create, read, update, power, copies, a plan, Events, and deletes.
    let sandbox = move |name: &str, idle: bool| {
        let mut m = json!({"metadata": {"name": name, "labels": {"kairon.zyvor.dev/sandbox": "true"}},
                           "spec": {"sandbox": {"templateName": "busybox"}, "guestAgent": {"enabled": true}}});
        if idle {
            m["spec"]["lifecycle"] =
                json!({"idleTimeoutSeconds": idle_timeout_seconds, "idleAction": "Pause", "maxLifetimeSeconds": 3600});
        }
        m
    };
    // m reads a Secret for its commands (spec.secretEnv: the api gets it at each exec).
    let secret = json!({"apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": "token", "labels": {"kairon.zyvor.dev/secret-env": "true"}}, "stringData": {"t": "x"}});
    secrets.create(&Default::default(), &serde_json::from_value(secret).unwrap()).await.expect("create a Secret");
    let mut m = sandbox("m", false);
    m["spec"]["secretEnv"] = json!({"TOKEN": {"name": "token", "key": "t"}});
    ok(rest.post(&base, m).await, "create m");
    ok(rest.post(&base, sandbox("idle", true)).await, "create idle");
    ok(rest.get(&format!("{base}/m/wait?phase=Running&timeoutSeconds=120")).await, "wait m");
    ok(rest.get(&base).await, "list");
    ok(rest.get("/api/v1/machines").await, "list all");
    // An update from what was read (again, when a controller wrote it meanwhile).
    let update = |path: String, change: fn(&mut Value)| {
        let rest = &rest;
        async move {
            for _ in 0..20 {
                let mut v = rest.get(&path).await.body;
                change(&mut v);
                let r = rest.put(&path, v).await;
                if r.status != 409 {
                    assert!(r.status < 300, "update {path}: {r:?}");
                    return;
                }
            }
            panic!("update {path}: always a conflict");
        }
    };
    ok(rest.get(&format!("{base}/m")).await, "get");
    update(format!("{base}/m"), |m| m["metadata"]["labels"]["team"] = json!("a")).await;
    ok(rest.post(&format!("{base}/m/exec"), json!({"command": ["true"]})).await, "exec");
    ok(rest.post(&format!("{base}/m/pause"), json!({})).await, "pause");
    ok(rest.get(&format!("{base}/m/wait?phase=Paused&timeoutSeconds=60")).await, "wait paused");
    ok(rest.post(&format!("{base}/m/resume"), json!({})).await, "resume");
    ok(rest.get(&format!("{base}/m/wait?phase=Running&timeoutSeconds=60")).await, "wait running");
    ok(rest.post(&format!("{base}/m/extend"), json!({"seconds": 60})).await.into_ok_or_409(), "extend");
    ok(rest.post(&format!("{base}/m/fork"), json!({"name": "m-fork"})).await, "fork");
    ok(rest.post(&format!("{base}/m/migrate?dryRun=All"), json!({})).await.into_ok_or_409(), "migrate plan");
    ok(rest.get(&format!("{base}/m/events")).await, "events");
    ok(rest.get("/api/v1/nodes").await, "nodes");
    ok(rest.get(&format!("/api/v1/nodes/{node}")).await, "node");
    ok(rest.get(&format!("/api/v1/quota/{ns}")).await, "quota");

    // Pools and claims: create, read, update, Events, a claim bound, deletes.
    let pools = format!("/api/v1/machinepools/{ns}");
    let pool = json!({"metadata": {"name": "p"}, "spec": {"replicas": 1, "warmPowerState": "Running", "warmupSeconds": 0,
        "template": {"metadata": {"labels": {"kairon.zyvor.dev/sandbox": "true"}}, "spec": {"sandbox": {"templateName": "busybox"}}}}});
    ok(rest.post(&pools, pool).await, "create pool");
    ok(rest.get(&pools).await, "list pools");
    ok(rest.get("/api/v1/machinepools").await, "list all pools");
    ok(rest.get(&format!("{pools}/p")).await, "get pool");
    update(format!("{pools}/p"), |p| p["spec"]["replicas"] = json!(2)).await;
    ok(rest.get(&format!("{pools}/p/events")).await, "pool events");
    // A claim that finds a warm member binds in its own request (the api records Bound); one
    // whose TTL runs out is deleted by the controllers.
    eventually("a warm member", Duration::from_secs(120), || async {
        let p = rest.get(&format!("{pools}/p")).await.body;
        (p["status"]["warm"].as_i64().unwrap_or(0) > 0).then_some(())
    })
    .await;
    let claims = format!("/api/v1/machineclaims/{ns}");
    ok(
        rest.post(&claims, json!({"metadata": {"name": "c"}, "spec": {"poolName": "p", "ttlSeconds": 3600}})).await,
        "claim",
    );
    ok(
        rest.post(&claims, json!({"metadata": {"name": "short"}, "spec": {"poolName": "p", "ttlSeconds": 2}})).await,
        "claim",
    );
    ok(rest.get(&format!("{claims}/short/wait?deleted=true&timeoutSeconds=120")).await, "short claim gone");
    // A claim on a pool with no member at all waits; the claim controller looks the pool up
    // to bind it.
    let empty = json!({"metadata": {"name": "empty"}, "spec": {"replicas": 0, "warmPowerState": "Running",
        "template": {"metadata": {"labels": {"kairon.zyvor.dev/sandbox": "true"}}, "spec": {"sandbox": {"templateName": "busybox"}}}}});
    ok(rest.post(&pools, empty).await, "create empty pool");
    ok(
        rest.post(&claims, json!({"metadata": {"name": "waits"}, "spec": {"poolName": "empty"}})).await,
        "waiting claim",
    );
    // A Machine its node cannot make: the node agent says why in an Event.
    ok(rest.post(&base, json!({"metadata": {"name": "broken"}, "spec": {"image": {"path": "/var/lib/fluxvm/images/missing.qcow2"}}})).await, "create broken");
    eventually("the node's Event", Duration::from_secs(60), || async {
        let ev = rest.get(&format!("{base}/broken/events")).await.body;
        ev["items"].as_array()?.iter().any(|e| e["type"] == "Warning").then_some(())
    })
    .await;
    ok(rest.get(&format!("{claims}/c/wait?phase=Bound&timeoutSeconds=120")).await, "claim bound");
    ok(rest.get(&claims).await, "list claims");
    ok(rest.get("/api/v1/machineclaims").await, "list all claims");
    ok(rest.get(&format!("{claims}/c")).await, "get claim");
    update(format!("{claims}/c"), |c| c["metadata"]["labels"] = json!({"team": "a"})).await;
    ok(rest.get(&format!("{claims}/c/events")).await, "claim events");

    // The lifecycle controller suspends the idle one.
    let idle_wait = format!("{base}/idle/wait?phase=Paused&timeoutSeconds={}", idle_timeout_seconds + 120);
    ok(rest.get(&idle_wait).await, "idle suspended");
    eventually("the quota's use reported", Duration::from_secs(60), || async {
        quotas.get("q").await.ok()?.status.filter(|s| s.used.machines.unwrap_or(0) > 0)
    })
    .await;

    // The pool's deletion, waited for from before it (a watch of pools).
    let pool_gone = {
        let (rest, path) = (rest.clone(), format!("{pools}/p/wait?deleted=true&timeoutSeconds=120"));
        tokio::spawn(async move { rest.get(&path).await })
    };
    tokio::time::sleep(Duration::from_millis(500)).await;
    for path in [
        format!("{claims}/waits"),
        format!("{pools}/empty"),
        format!("{claims}/c"),
        format!("{pools}/p"),
        format!("{base}/m-fork"),
        format!("{base}/m"),
        format!("{base}/idle"),
        format!("{base}/broken"),
        format!("{base}/own"),
    ] {
        ok(rest.delete(&path).await, "delete");
    }
    ok(pool_gone.await.unwrap(), "pool gone");
    for name in ["m", "m-fork", "idle", "broken", "own"] {
        rest.wait_deleted(ns, name, 120).await;
    }
    ok(rest.delete(&format!("{tbase}/own")).await, "delete template own");
}

trait OkOr409 {
    fn into_ok_or_409(self) -> Answer;
}

/// A refusal that still read the objects (409: the plan found no other node; no deadline to
/// extend) counts as a call made.
impl OkOr409 for Answer {
    fn into_ok_or_409(mut self) -> Answer {
        if self.status == 409 {
            self.status = 200;
        }
        self
    }
}

/// One permission: (API group, resource or resource/subresource, verb).
pub type Permission = (String, String, String);

/// The permissions the named ClusterRoles and Roles of `deploy/kustomize/rbac.yaml` grant.
pub fn granted(roles: &[&str]) -> BTreeSet<Permission> {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../deploy/kustomize/rbac.yaml");
    let text = std::fs::read_to_string(path).unwrap();
    let mut out = BTreeSet::new();
    for doc in serde_yaml::Deserializer::from_str(&text) {
        let v: Value =
            serde_json::to_value(<serde_yaml::Value as serde::Deserialize>::deserialize(doc).unwrap()).unwrap();
        if !matches!(v["kind"].as_str(), Some("ClusterRole" | "Role"))
            || !roles.contains(&v["metadata"]["name"].as_str().unwrap())
        {
            continue;
        }
        for rule in v["rules"].as_array().unwrap() {
            let list = |k: &str| -> Vec<String> {
                rule[k].as_array().into_iter().flatten().map(|x| x.as_str().unwrap().to_string()).collect()
            };
            for g in list("apiGroups") {
                for r in list("resources") {
                    for verb in list("verbs") {
                        out.insert((g.clone(), r.clone(), verb));
                    }
                }
            }
        }
    }
    out
}

/// Grants for paths this day of work does not take, each with why it is needed.
pub fn not_taken_here(role: &str, (group, resource, verb): &Permission) -> bool {
    match (role, group.as_str(), resource.as_str(), verb.as_str()) {
        // kube-rs's Event recorder patches an Event when the same one repeats (a series).
        (_, "events.k8s.io", "events", "patch") => true,
        // A migration marks the Machine and moves it (needs two nodes: tests/tests/node.rs).
        ("kairon-api", "kairon.zyvor.dev", "machines/status", "patch") => true,
        // The webhook charges Machine writes to quotas only on a real cluster (kairon up judges
        // quota in its store's transaction); it reads one quota again only to take back a
        // reservation when another quota of the namespace changed meanwhile.
        ("kairon-api", "kairon.zyvor.dev", "kaironquotas/status", "patch") => true,
        ("kairon-api", "kairon.zyvor.dev", "kaironquotas", "get") => true,
        // The webhook asks a SubjectAccessReview before a tenant references a Secret, only on a
        // real cluster (kairon up checks the tenant's Secret reads itself): cluster_install.rs
        // sees it used.
        ("kairon-api", "authorization.k8s.io", "subjectaccessreviews", "create") => true,
        // The api names the caller of its writes by impersonating itself with one extra, only on
        // a real cluster (kairon up's store knows who writes): cluster_install.rs sees it used.
        ("kairon-api", "", "serviceaccounts", "impersonate") => true,
        ("kairon-api", "authentication.k8s.io", "userextras/kairon.zyvor.dev/requester", "impersonate") => true,
        _ => false,
    }
}
