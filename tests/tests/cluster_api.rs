//! `kairon api` against a Kubernetes API it does not own: here the embedded one of a `kairon up`
//! stands in for a real cluster. The REST layer reads and writes through kube-rs only, so what
//! it serves mirrors the cluster: objects made with kubectl show up, objects made over REST land
//! in the cluster, and guest routes reach the cluster's nodes with the shared runtime token.

use std::time::Duration;

use serde_json::json;

use kairon_e2e::{Flags, Kairon, Process, eventually};

/// A `kairon api` of its own against `cluster`'s Kubernetes API (its own data dir, CA and token
/// key), reaching runtimes as `runtime` says; with its URL, an admin token it signs, and a
/// client trusting its CA.
struct SeparateApi {
    _process: Process,
    _dir: tempfile::TempDir,
    url: String,
    token: String,
    http: reqwest::Client,
}

impl SeparateApi {
    fn start(cluster: &Kairon, runtime: &[&str]) -> SeparateApi {
        let dir = tempfile::tempdir().unwrap();
        let kubeconfig = cluster.kubeconfig.to_string_lossy().to_string();
        let data_dir = dir.path().to_string_lossy().to_string();
        let mut args = vec![
            "api",
            "--kubeconfig",
            &kubeconfig,
            "--data-dir",
            &data_dir,
            "--listen",
            "127.0.0.1:0",
            "--database-url",
            cluster.database().unwrap(),
        ];
        args.extend_from_slice(runtime);
        let process = Process::start(&args, "Kairon API is up at ").unwrap();
        let url = process.ready_line.trim().trim_start_matches("Kairon API is up at ").to_string();
        let out = std::process::Command::new(kairon_e2e::kairon_bin())
            .args(["token", "--data-dir", &data_dir, "--sub", "ops", "--role", "admin"])
            .output()
            .unwrap();
        let token = String::from_utf8(out.stdout).unwrap().trim().to_string();
        let ca = std::fs::read(dir.path().join("tls/ca.crt")).unwrap();
        let http = reqwest::Client::builder()
            .add_root_certificate(reqwest::Certificate::from_pem(&ca).unwrap())
            .build()
            .unwrap();
        SeparateApi { _process: process, _dir: dir, url, token, http }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn the_rest_api_mirrors_a_cluster_it_does_not_own() {
    let cluster = Kairon::start_with(&Flags::fast()).unwrap();
    let runtime_token = std::fs::read_to_string(cluster.data_dir.path().join("runtime-token")).unwrap();
    // A client of the separate api: its own CA and its own signing key.
    let api = SeparateApi::start(&cluster, &["--runtime-token", runtime_token.trim()]);
    let (url, token, http) = (api.url.clone(), api.token.clone(), api.http.clone());
    let get = |path: String| {
        let (http, token) = (http.clone(), token.clone());
        let url = format!("{url}{path}");
        async move {
            let r = http.get(url).bearer_auth(token).send().await.unwrap();
            (r.status().as_u16(), r.json::<serde_json::Value>().await.unwrap_or_default())
        }
    };

    // Made with kubectl in the cluster, seen over REST.
    let manifest = "apiVersion: kairon.zyvor.dev/v1\nkind: Machine\nmetadata: {name: from-kubectl, namespace: agents}\nspec:\n  sandbox: {templateName: busybox}\n  guestAgent: {console: true}\n";
    let out = cluster.kubectl_stdin(&["apply", "-f", "-"], manifest);
    assert!(out.status.success(), "{out:?}");
    let (status, m) = get("/api/v1/machines/agents/from-kubectl/wait?phase=Running&timeoutSeconds=120".into()).await;
    assert_eq!(status, 200, "{m}");

    // Made over REST, seen by kubectl.
    let body = json!({"metadata": {"name": "from-rest"}, "spec": {"sandbox": {"templateName": "busybox"}}});
    let r = http.post(format!("{url}/api/v1/machines/agents")).bearer_auth(&token).json(&body).send().await.unwrap();
    assert_eq!(r.status().as_u16(), 201);
    eventually("kubectl to see the Machine", Duration::from_secs(30), || async {
        let out = cluster.kubectl(&["get", "machine", "from-rest", "-n", "agents", "-o", "name"]);
        out.status.success().then_some(())
    })
    .await;

    // Guest routes reach the cluster's node through its registration and the runtime token.
    let r = http
        .post(format!("{url}/api/v1/machines/agents/from-kubectl/exec"))
        .bearer_auth(&token)
        .json(&json!({"command": ["echo", "through the cluster"]}))
        .send()
        .await
        .unwrap();
    let v: serde_json::Value = r.json().await.unwrap();
    assert_eq!(v["stdout"], "through the cluster\n", "{v}");

    // It serves no Kubernetes API of its own: the cluster is the source of truth.
    let (status, _) = get("/apis/kairon.zyvor.dev/v1/namespaces/agents/machines".into()).await;
    assert_eq!(status, 404);
    let (status, nodes) = get("/api/v1/nodes".into()).await;
    assert_eq!((status, nodes["items"][0]["metadata"]["name"].as_str()), (200, Some("local")));
    drop(api);
}

/// Across a cluster no node holds a credential another node's runtime accepts: the api signs a
/// grant per node (`--runtime-signing-key`), and a runtime given the api's public key
/// (`kairon node --runtime-api-key`) takes only grants for itself, beside its own private token.
#[tokio::test(flavor = "multi_thread")]
async fn each_runtime_takes_only_the_apis_grant_for_its_own_node() {
    use kairon_runtime_api::grant::GrantSigner;
    use kairon_runtime_api::{ClientError, Credential, RuntimeClient, RuntimeConnector};

    let cluster = Kairon::start_with(&Flags::fast()).unwrap();
    let keys = tempfile::tempdir().unwrap();
    let made = std::process::Command::new(kairon_e2e::kairon_bin())
        .args(["runtime-keys", "--out"])
        .arg(keys.path())
        .output()
        .unwrap();
    assert!(made.status.success(), "{made:?}");
    let signing = keys.path().join("runtime-signing.key").to_string_lossy().to_string();
    let public = keys.path().join("runtime-api.pub").to_string_lossy().to_string();
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(std::fs::metadata(&signing).unwrap().permissions().mode() & 0o777, 0o600);
    let again = std::process::Command::new(kairon_e2e::kairon_bin())
        .args(["runtime-keys", "--out"])
        .arg(keys.path())
        .output()
        .unwrap();
    assert!(!again.status.success(), "an existing signing key was overwritten");

    let kubeconfig = cluster.kubeconfig.to_string_lossy().to_string();
    let state = tempfile::tempdir().unwrap();
    let _cleanup = kairon_e2e::SandboxCleanup(state.path().to_path_buf());
    let state_dir = state.path().to_string_lossy().to_string();
    let _node = Process::start(
        &[
            "node",
            "--kubeconfig",
            &kubeconfig,
            "--node-name",
            "granted",
            "--state-dir",
            &state_dir,
            "--runtime-api-key",
            &public,
            "--heartbeat-interval",
            "1s",
            "--node-tick",
            "1s",
        ],
        "is up",
    )
    .unwrap();
    let api = SeparateApi::start(&cluster, &["--runtime-signing-key", &signing]);
    let (url, token, http) = (api.url.clone(), api.token.clone(), api.http.clone());

    // A sandbox on that node, run and reached through the api with grants.
    let manifest = "apiVersion: kairon.zyvor.dev/v1\nkind: Machine\nmetadata: {name: granted, namespace: agents}\nspec:\n  nodeName: granted\n  sandbox: {templateName: busybox}\n  guestAgent: {enabled: true}\n";
    let out = cluster.kubectl_stdin(&["apply", "-f", "-"], manifest);
    assert!(out.status.success(), "{out:?}");
    let r = http
        .get(format!("{url}/api/v1/machines/agents/granted/wait?phase=Running&timeoutSeconds=120"))
        .bearer_auth(&token)
        .send()
        .await
        .unwrap();
    assert_eq!(r.status().as_u16(), 200, "{:?}", r.text().await);
    let r = http
        .post(format!("{url}/api/v1/machines/agents/granted/exec"))
        .bearer_auth(&token)
        .json(&json!({"command": ["echo", "through a grant"]}))
        .send()
        .await
        .unwrap();
    let v: serde_json::Value = r.json().await.unwrap();
    assert_eq!(v["stdout"], "through a grant\n", "{v}");

    // Straight at the runtime: its node's grant opens it; another node's grant, the other
    // node's runtime token, and nothing at all do not.
    let endpoint = eventually("the node's runtime endpoint", Duration::from_secs(30), || async {
        let out = cluster.kubectl(&["get", "kaironnode", "granted", "-o", "jsonpath={.spec.runtimeEndpoint}"]);
        let e = String::from_utf8_lossy(&out.stdout).trim().to_string();
        (!e.is_empty()).then_some(e)
    })
    .await;
    let signer = std::sync::Arc::new(GrantSigner::from_pem(&std::fs::read(&signing).unwrap()).unwrap());
    let grants = RuntimeConnector::with_credential(Credential::Grants(signer), None).unwrap();
    assert_eq!(grants.client_for("granted", &endpoint, None).unwrap().node().await.unwrap()["name"], "granted");
    let unauthorized = |e: ClientError| matches!(e, ClientError::Api { status: 401, .. });
    let other = grants.client_for("local", &endpoint, None).unwrap().node().await.unwrap_err();
    assert!(unauthorized(other), "a grant for another node was taken");
    assert!(grants.client(&endpoint).is_err(), "a grant needs its node named");
    let local_token = std::fs::read_to_string(cluster.data_dir.path().join("runtime-token")).unwrap();
    let err = RuntimeClient::new(&endpoint, local_token.trim()).unwrap().node().await.unwrap_err();
    assert!(unauthorized(err), "another node's runtime token was taken");
    let err = RuntimeClient::new(&endpoint, "").unwrap().node().await.unwrap_err();
    assert!(unauthorized(err));
    drop(api);
}
