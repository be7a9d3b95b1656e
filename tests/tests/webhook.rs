//! The validating admission webhook (`api/src/webhook.rs`), POSTed to over TLS as a cluster's API
//! server would (no Kairon token, the server's CA, the client certificate the API server
//! presents), on its own listener: the API port does not serve it, and a client without a
//! certificate from `--webhook-client-ca` is refused in the handshake. The table of good and bad objects
//! (`model::rules::examples`, which the CRDs' CEL rules agree with) as an admin, tenants' limits,
//! and node identities touching their own and other nodes' objects.

use serde_json::{Value, json};

use kairon_e2e::Kairon;
use kairon_e2e::flags::API_ONLY;

struct Webhook {
    http: reqwest::Client,
    url: String,
}

/// Who asks: a Kubernetes user, its groups, and the node a bound token names.
#[derive(Clone, Copy)]
struct User(&'static str, &'static [&'static str], Option<&'static str>);

const ADMIN: User = User("root", &["system:masters"], None);
const TENANT: User = User("alice", &["system:authenticated"], None);
const NODE_A: User = User("system:serviceaccount:kairon-system:kairon-node-a", &["system:serviceaccounts"], None);
/// The node DaemonSet's shared ServiceAccount, its token bound to a pod on node `a`.
const DAEMON_ON_A: User =
    User("system:serviceaccount:kairon-system:kairon-node", &["system:serviceaccounts"], Some("a"));
/// A tenant's own ServiceAccount with a node agent's name: nobody special.
const FAKE_NODE_A: User = User("system:serviceaccount:team:kairon-node-a", &["system:serviceaccounts"], None);
const CONTROLLER: User = User("system:serviceaccount:kairon-system:kairon-controller", &[], None);

impl Webhook {
    /// The review's answer: allowed, and the status code and message of a refusal.
    #[allow(clippy::too_many_arguments)]
    async fn review(
        &self,
        plural: &str,
        operation: &str,
        sub_resource: Option<&str>,
        user: User,
        old: Option<&Value>,
        new: &Value,
    ) -> (bool, i64, String) {
        let namespaced = plural != "kaironnodes";
        let body = json!({
            "apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
            "request": {
                "uid": "705ab4f5-6393-11e8-b7cc-42010a800002",
                "kind": {"group": "kairon.zyvor.dev", "version": "v1", "kind": "Whatever"},
                "resource": {"group": "kairon.zyvor.dev", "version": "v1", "resource": plural},
                "subResource": sub_resource,
                "namespace": if namespaced { Some("team") } else { None },
                "name": new["metadata"]["name"],
                "operation": operation,
                "userInfo": {"username": user.0, "groups": user.1,
                             "extra": user.2.map(|n| json!({"authentication.kubernetes.io/node-name": [n]})).unwrap_or(json!({}))},
                "object": new, "oldObject": old, "dryRun": false,
            }
        });
        let r = self.http.post(&self.url).json(&body).send().await.unwrap();
        assert_eq!(r.status(), 200);
        let v: Value = r.json().await.unwrap();
        assert_eq!(
            (v["apiVersion"].as_str(), v["kind"].as_str()),
            (Some("admission.k8s.io/v1"), Some("AdmissionReview"))
        );
        let resp = &v["response"];
        assert_eq!(resp["uid"], "705ab4f5-6393-11e8-b7cc-42010a800002", "the answer names the request");
        (
            resp["allowed"].as_bool().unwrap(),
            resp["status"]["code"].as_i64().unwrap_or(0),
            resp["status"]["message"].as_str().unwrap_or_default().to_string(),
        )
    }
}

/// A whole object of a kind around `spec` (and `status`).
fn object(plural: &str, name: &str, spec: &Value, status: Option<Value>) -> Value {
    let kind = match plural {
        "machines" => "Machine",
        "machinepools" => "MachinePool",
        "machineclaims" => "MachineClaim",
        "kaironnodes" => "KaironNode",
        _ => "KaironQuota",
    };
    let mut o = json!({
        "apiVersion": "kairon.zyvor.dev/v1", "kind": kind,
        "metadata": {"name": name, "namespace": "team", "uid": "u-1", "finalizers": ["kairon.zyvor.dev/machine"]},
        "spec": spec,
    });
    if plural == "kaironnodes" {
        o["metadata"].as_object_mut().unwrap().remove("namespace");
    }
    if let Some(s) = status {
        o["status"] = s;
    }
    o
}

/// A CA and a client certificate it signs, as PEM (the certificate, then its key).
fn client_identity(cn: &str) -> (String, String) {
    let ca_key = rcgen::KeyPair::generate().unwrap();
    let mut ca = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    ca.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
    ca.distinguished_name.push(rcgen::DnType::CommonName, format!("{cn}-ca"));
    let ca_cert = ca.self_signed(&ca_key).unwrap();
    let issuer = rcgen::Issuer::new(ca, ca_key);
    let mut leaf = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
    leaf.distinguished_name.push(rcgen::DnType::CommonName, cn);
    leaf.extended_key_usages = vec![rcgen::ExtendedKeyUsagePurpose::ClientAuth];
    let key = rcgen::KeyPair::generate().unwrap();
    let cert = leaf.signed_by(&key, &issuer).unwrap();
    (ca_cert.pem(), format!("{}{}", cert.pem(), key.serialize_pem()))
}

#[tokio::test(flavor = "multi_thread")]
async fn the_webhook_answers_admission_reviews_over_tls_as_the_embedded_api_decides() {
    let (client_ca, apiserver_identity) = client_identity("kube-apiserver");
    let (_, stranger_identity) = client_identity("kube-apiserver");
    let ca_file = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(ca_file.path(), &client_ca).unwrap();
    let ca_path = ca_file.path().to_str().unwrap();
    let flags = [API_ONLY, &["--webhook-listen", "127.0.0.1:0", "--webhook-client-ca", ca_path]].concat();
    let k = Kairon::start_with(&flags).unwrap();
    let ca = std::fs::read(k.data_dir.path().join("tls/ca.crt")).unwrap();
    let client = |identity: Option<&str>| {
        let mut b = reqwest::Client::builder().add_root_certificate(reqwest::Certificate::from_pem(&ca).unwrap());
        if let Some(pem) = identity {
            b = b.identity(reqwest::Identity::from_pem(pem.as_bytes()).unwrap());
        }
        b.build().unwrap()
    };
    let url = k.webhook_url.clone().expect("kairon up prints the webhook's URL");
    assert!(url.starts_with("https://") && url.ends_with("/admission/v1/validate"), "over TLS: {url}");
    let review = json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": {"uid": "1"}});

    // Only the API server's certificate opens it; the public API port does not serve it.
    let refused = client(None).post(&url).json(&review).send().await;
    assert!(refused.is_err(), "a client without a certificate: {refused:?}");
    let refused = client(Some(&stranger_identity)).post(&url).json(&review).send().await;
    assert!(refused.is_err(), "a certificate of another CA: {refused:?}");
    let on_api_port = client(None)
        .post(format!("{}/admission/v1/validate", k.url))
        .bearer_auth(&k.admin_token)
        .json(&review)
        .send()
        .await
        .unwrap();
    assert_eq!(on_api_port.status(), 404, "the API port answers no review");
    let anonymous = client(None).post(format!("{}/admission/v1/validate", k.url)).json(&review).send().await.unwrap();
    assert_eq!(anonymous.status(), 401, "nor does it answer anyone without a token");

    let hook = Webhook { http: client(Some(&apiserver_identity)), url };

    // The table of good and bad objects, as an admin: the webhook agrees with the CEL rules.
    let mut wrong = Vec::new();
    for ex in kairon_model::rules::examples() {
        let name = "x";
        let new = object(ex.plural, name, &ex.new["spec"], None);
        let old = ex.old.as_ref().map(|o| object(ex.plural, name, &o["spec"], None));
        let op = if old.is_some() { "UPDATE" } else { "CREATE" };
        let (allowed, code, message) = hook.review(ex.plural, op, None, ADMIN, old.as_ref(), &new).await;
        if allowed != ex.valid {
            wrong.push(format!("{}: allowed={allowed} ({code} {message}), want {}", ex.what, ex.valid));
        }
        if !allowed && code != 422 {
            wrong.push(format!("{}: refused with {code}, want 422 (invalid): {message}", ex.what));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));

    // Tenants: no sandbox-track Machine, no status, no controller keys; a plain VM is fine.
    let vm = json!({"image": {"path": "/var/lib/fluxvm/images/kairon-hw.qcow2"}});
    let sandbox = json!({"sandbox": {"templateName": "busybox"}});
    let (ok, _, _) = hook.review("machines", "CREATE", None, TENANT, None, &object("machines", "v", &vm, None)).await;
    assert!(ok, "a tenant's VM");
    let (ok, code, msg) =
        hook.review("machines", "CREATE", None, TENANT, None, &object("machines", "s", &sandbox, None)).await;
    assert!(!ok && code == 403 && msg.contains("admin-only"), "{code} {msg}");
    let (ok, _, _) =
        hook.review("machines", "CREATE", None, ADMIN, None, &object("machines", "s", &sandbox, None)).await;
    assert!(ok, "an admin's sandbox");
    let on = |node: &str| Some(json!({"nodeName": node, "phase": "Running"}));
    let placed = object("machines", "v", &vm, on("a"));
    let mut reported = placed.clone();
    reported["status"]["phase"] = json!("Paused");
    let (ok, code, _) = hook.review("machines", "UPDATE", Some("status"), TENANT, Some(&placed), &reported).await;
    assert!(!ok && code == 403, "a tenant writes no status");

    // A node agent writes the status of the Machines on its node, never another node's, and
    // moves none; its own KaironNode, not another's. A tenant's ServiceAccount of the same name
    // is a tenant. The controllers may place a Machine.
    for node_a in [NODE_A, DAEMON_ON_A] {
        let (ok, _, msg) = hook.review("machines", "UPDATE", Some("status"), node_a, Some(&placed), &reported).await;
        assert!(ok, "node a ({}) reports its Machine: {msg}", node_a.0);
    }
    let elsewhere = object("machines", "v", &vm, on("b"));
    let mut elsewhere_reported = elsewhere.clone();
    elsewhere_reported["status"]["phase"] = json!("Paused");
    for node_a in [NODE_A, DAEMON_ON_A] {
        let (ok, code, msg) =
            hook.review("machines", "UPDATE", Some("status"), node_a, Some(&elsewhere), &elsewhere_reported).await;
        assert!(!ok && code == 403 && msg.contains("not on node \"a\""), "{code} {msg}");
    }
    let mut moved = placed.clone();
    moved["status"]["nodeName"] = json!("b");
    let (ok, code, _) = hook.review("machines", "UPDATE", Some("status"), NODE_A, Some(&placed), &moved).await;
    assert!(!ok && code == 403, "a node agent moves no Machine");
    let (ok, _, _) = hook.review("machines", "UPDATE", Some("status"), CONTROLLER, Some(&placed), &moved).await;
    assert!(ok, "the controllers place Machines");
    let mut respecced = placed.clone();
    respecced["spec"]["powerState"] = json!("Paused");
    let (ok, code, _) = hook.review("machines", "UPDATE", None, NODE_A, Some(&placed), &respecced).await;
    assert!(!ok && code == 403, "a node agent writes no spec");
    let (ok, code, _) = hook.review("machines", "UPDATE", Some("status"), FAKE_NODE_A, Some(&placed), &reported).await;
    assert!(!ok && code == 403, "a tenant's look-alike ServiceAccount is no node");
    let node = |name: &str| object("kaironnodes", name, &json!({"runtimeEndpoint": "https://10.0.0.1:7444"}), None);
    let (ok, _, msg) = hook.review("kaironnodes", "CREATE", None, NODE_A, None, &node("a")).await;
    assert!(ok, "node a registers itself: {msg}");
    let capped = object(
        "kaironnodes",
        "a",
        &json!({"runtimeEndpoint": "https://10.0.0.1:7444", "capacity": {"cpu": "100000", "memory": "1Pi"}}),
        None,
    );
    let (ok, code, msg) = hook.review("kaironnodes", "UPDATE", None, NODE_A, Some(&node("a")), &capped).await;
    assert!(!ok && code == 403 && msg.contains("spec.capacity"), "its capacity is an admin's: {msg}");
    let (ok, code, _) = hook.review("kaironnodes", "CREATE", None, NODE_A, None, &node("b")).await;
    assert!(!ok && code == 403, "node a registers no other node");

    // Deletes are RBAC's; what is not an AdmissionReview is a 400 review.
    let (ok, _, _) = hook.review("machines", "DELETE", None, TENANT, None, &placed).await;
    assert!(ok);
    let r = hook.http.post(&hook.url).json(&json!({"request": {"uid": 5}})).send().await.unwrap();
    let v: Value = r.json().await.unwrap();
    assert_eq!(
        (v["response"]["allowed"].as_bool(), v["response"]["status"]["code"].as_i64()),
        (Some(false), Some(400))
    );
}
