//! A Machine's `spec.secretEnv`: a labelled Secret of its namespace reaches the guest's commands
//! and nothing else (the Machine as a viewer or kubectl reads it, Events, every log line at
//! trace, the store's revisions); an unlabelled Secret, a missing key or another namespace's
//! Secret is refused saying what to fix; viewers read Secrets without their data, node agents
//! and controllers not at all.

use serde_json::{Value, json};

use kairon_e2e::{Kairon, psql_query};

/// The secret's value: unique, so a grep finds nothing else.
const VALUE: &str = "sk-kairon-secret-env-5f1c9e27";
const NS: &str = "agents";

fn secret(name: &str, labelled: bool) -> Value {
    let labels = if labelled { json!({"kairon.zyvor.dev/secret-env": "true"}) } else { json!({}) };
    json!({
        "apiVersion": "v1", "kind": "Secret",
        "metadata": {"name": name, "labels": labels},
        "stringData": {"api-key": VALUE},
    })
}

fn machine(name: &str, secret_env: Value) -> Value {
    json!({
        "metadata": {"name": name, "labels": {"kairon.zyvor.dev/sandbox": "true"}},
        "spec": {
            "sandbox": {"templateName": "busybox"}, "guestAgent": {"console": true},
            "env": {"PLAIN": "visible"}, "secretEnv": secret_env,
        }
    })
}

#[tokio::test(flavor = "multi_thread")]
async fn a_secret_reaches_the_guests_commands_and_nowhere_else() {
    let k = Kairon::start_logging(&[], "trace").expect("kairon up");
    let admin = k.rest().unwrap();
    let operator = k.rest_as(&k.token("alice", "operator", &[NS]).unwrap()).unwrap();
    let viewer = k.rest_as(&k.token("val", "viewer", &[NS]).unwrap()).unwrap();
    let node = k.rest_as(&k.token("local", "node", &[]).unwrap()).unwrap();
    let secrets = format!("/api/v1/namespaces/{NS}/secrets");

    // A tenant writes its Secrets: stringData is stored as data, Opaque by default.
    let made = operator.post(&secrets, secret("openai", true)).await.ok();
    assert_eq!(made["type"], "Opaque", "{made}");
    assert!(made.get("stringData").is_none() && made["data"]["api-key"].is_string(), "{made}");
    operator.post(&secrets, secret("unlabelled", false)).await.ok();
    admin.post("/api/v1/namespaces/other/secrets", secret("theirs", true)).await.ok();

    // Viewers see that it exists, not its data; node agents and controllers not at all.
    let seen = viewer.get(&format!("{secrets}/openai")).await.ok();
    assert!(seen.get("data").is_none() && !seen.to_string().contains(VALUE), "{seen}");
    let listed = viewer.get(&secrets).await.ok();
    assert!(listed["items"].as_array().unwrap().iter().all(|s| s.get("data").is_none()), "{listed}");
    let refused = node.get(&format!("{secrets}/openai")).await;
    assert_eq!(refused.status, 403, "{}", refused.message());
    assert!(refused.message().contains("never read Secrets"), "{}", refused.message());

    // The Machine (sandboxes are written by an admin) names the key; its commands get the value.
    let refs = json!({"OPENAI_API_KEY": {"name": "openai", "key": "api-key"}});
    admin.post(&format!("/api/v1/machines/{NS}"), machine("agent", refs)).await.ok();
    admin.running(NS, "agent").await;
    let run = |cmd: &str| json!({"command": ["sh", "-c", cmd]});
    let got = admin.post(&format!("/api/v1/machines/{NS}/agent/exec"), run("echo $OPENAI_API_KEY $PLAIN")).await.ok();
    assert_eq!(got["stdout"], format!("{VALUE} visible\n"), "{got}");
    // A request's own env wins, as over spec.env.
    let own = json!({"command": ["sh", "-c", "echo $OPENAI_API_KEY"], "env": {"OPENAI_API_KEY": "mine"}});
    assert_eq!(admin.post(&format!("/api/v1/machines/{NS}/agent/exec"), own).await.ok()["stdout"], "mine\n");
    // A background process too.
    let p = admin.post(&format!("/api/v1/machines/{NS}/agent/processes"), run("echo $OPENAI_API_KEY")).await.ok();
    let pid = p["id"].as_str().unwrap().to_string();
    let logs = kairon_e2e::eventually("the process's output", std::time::Duration::from_secs(30), || async {
        let l = admin.get(&format!("/api/v1/machines/{NS}/agent/processes/{pid}/logs")).await.ok();
        l["stdout"].as_str().is_some_and(|s| !s.is_empty()).then_some(l)
    })
    .await;
    assert_eq!(logs["stdout"], format!("{VALUE}\n"), "{logs}");

    // A claim carries its own secretEnv onto the warm member it binds, as its env.
    let pool = json!({"metadata": {"name": "warm"}, "spec": {"replicas": 1, "warmPowerState": "Running",
        "template": {"metadata": {"labels": {"kairon.zyvor.dev/sandbox": "true"}},
                     "spec": {"sandbox": {"templateName": "busybox"}, "guestAgent": {"console": true}}}}});
    admin.post(&format!("/api/v1/machinepools/{NS}"), pool).await.ok();
    let claim = json!({"metadata": {"name": "job"}, "spec": {"poolName": "warm",
        "secretEnv": {"CLAIMED_KEY": {"name": "openai", "key": "api-key"}}}});
    operator.post(&format!("/api/v1/machineclaims/{NS}"), claim).await.ok();
    let bound = admin.get(&format!("/api/v1/machineclaims/{NS}/job/wait?phase=Bound&timeoutSeconds=120")).await.ok();
    let member = bound["status"]["machineName"].as_str().expect("the bound member").to_string();
    let got = admin.post(&format!("/api/v1/machines/{NS}/{member}/exec"), run("echo $CLAIMED_KEY")).await.ok();
    assert_eq!(got["stdout"], format!("{VALUE}\n"), "{got}");

    // Refusals that say what to fix: an unlabelled Secret, a missing key, another namespace's.
    let unlabelled = json!({"KEY": {"name": "unlabelled", "key": "api-key"}});
    admin.post(&format!("/api/v1/machines/{NS}"), machine("plain", unlabelled)).await.ok();
    admin.running(NS, "plain").await;
    let refused = admin.post(&format!("/api/v1/machines/{NS}/plain/exec"), run("true")).await;
    assert_eq!(refused.status, 400, "{}", refused.message());
    assert!(refused.message().contains("kairon.zyvor.dev/secret-env=true"), "{}", refused.message());
    let missing = json!({"KEY": {"name": "openai", "key": "nope"}});
    admin.post(&format!("/api/v1/machines/{NS}"), machine("nokey", missing)).await.ok();
    admin.running(NS, "nokey").await;
    let refused = admin.post(&format!("/api/v1/machines/{NS}/nokey/exec"), run("true")).await;
    assert!(refused.status == 400 && refused.message().contains("no key \"nope\""), "{}", refused.message());
    for name in ["other/theirs", "theirs.other"] {
        let foreign = json!({"KEY": {"name": name, "key": "api-key"}});
        let refused = admin.post(&format!("/api/v1/machines/{NS}"), machine("foreign", foreign)).await;
        if refused.status < 400 {
            // A dotted name is a valid Secret name of this namespace, where none exists.
            admin.running(NS, "foreign").await;
            let r = admin.post(&format!("/api/v1/machines/{NS}/foreign/exec"), run("true")).await;
            assert!(r.status == 400 && r.message().contains("does not exist"), "{}", r.message());
            admin.delete(&format!("/api/v1/machines/{NS}/foreign")).await;
            continue;
        }
        assert_eq!(refused.status, 422, "{name}: {}", refused.message());
        assert!(refused.message().contains("own namespace"), "{}", refused.message());
    }

    // Nowhere else: the Machine (viewer, kubectl), Events, the store's Machine revisions, logs.
    let m = viewer.get(&format!("/api/v1/machines/{NS}/agent")).await.ok();
    assert!(!m.to_string().contains(VALUE), "{m}");
    for args in [
        vec!["get", "machine", "agent", "-n", NS, "-o", "yaml"],
        vec!["get", "events", "-A", "-o", "yaml"],
        vec!["get", "machines", "-A", "-o", "json"],
    ] {
        let out = k.kubectl_ok(&args);
        assert!(!out.contains(VALUE), "kubectl {args:?} shows the secret");
    }
    let db = k.database_url().expect("a test database");
    let hits = psql_query(
        db,
        &format!(
            "SELECT resource, name FROM revisions WHERE object::text LIKE '%{VALUE}%' \
             UNION ALL SELECT resource, name FROM objects WHERE object::text LIKE '%{VALUE}%'"
        ),
    )
    .unwrap();
    assert_eq!(hits, "", "stored in clear text (a Secret's data is base64, as etcd keeps it)");
    let usage = psql_query(
        db,
        &format!("SELECT count(*) FROM claim_usage_intervals WHERE row(claim_usage_intervals)::text LIKE '%{VALUE}%'"),
    )
    .unwrap();
    assert_eq!(usage, "0");
    let log = std::fs::read_to_string(&k.log).unwrap();
    assert!(log.len() > 100_000, "the log is at trace: {} bytes", log.len());
    let leaked: Vec<&str> = log.lines().filter(|l| l.contains(VALUE)).take(3).collect();
    assert!(leaked.is_empty(), "the api's, node's and runtime's logs at trace hold the secret: {leaked:?}");
}
