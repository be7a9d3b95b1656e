//! Kairon's CRDs on a real Kubernetes API server (`scripts/k8s-testbed`: kube-apiserver and etcd
//! v1.37, built from their Go modules): the server takes `deploy/crds.yaml` — structural
//! schemas, CEL rules within its cost budget — and, with no webhook registered, judges every
//! object of the rules table (`kairon_model::rules::examples`) as Kairon's own validation does,
//! naming the same field.

use std::collections::BTreeSet;

use kube::api::{Api, DynamicObject, PostParams};
use kube::core::{ApiResource, GroupVersionKind};
use serde_json::{Value, json};

use kairon_e2e::testbed::Testbed;
use kairon_model::rules::{Example, examples};

async fn client(tb: &Testbed) -> kube::Client {
    kairon_e2e::testbed::client(&tb.kubeconfig).await
}

fn api(client: &kube::Client, ns: &str, plural: &str) -> Api<DynamicObject> {
    let kind = match plural {
        "machines" => "Machine",
        "machinepools" => "MachinePool",
        "machineclaims" => "MachineClaim",
        "kairontemplates" => "KaironTemplate",
        other => panic!("no kind for {other}"),
    };
    let resource = ApiResource::from_gvk_with_plural(&GroupVersionKind::gvk("kairon.zyvor.dev", "v1", kind), plural);
    Api::namespaced_with(client.clone(), ns, &resource)
}

fn object(plural: &str, name: &str, body: &Value) -> DynamicObject {
    let kind = match plural {
        "machines" => "Machine",
        "machinepools" => "MachinePool",
        "kairontemplates" => "KaironTemplate",
        _ => "MachineClaim",
    };
    serde_json::from_value(json!({
        "apiVersion": "kairon.zyvor.dev/v1",
        "kind": kind,
        "metadata": {"name": name},
        "spec": body["spec"],
    }))
    .unwrap()
}

/// The API server's verdict: the fields it names, empty when it takes the object.
async fn server_verdict(client: &kube::Client, ns: &str, i: usize, example: &Example) -> Result<(), Vec<String>> {
    let api = api(client, ns, example.plural);
    let name = format!("example-{i}");
    let dry_run = PostParams { dry_run: true, ..Default::default() };
    let answer = match &example.old {
        None => api.create(&dry_run, &object(example.plural, &name, &example.new)).await,
        Some(old) => {
            let before = api
                .create(&PostParams::default(), &object(example.plural, &name, old))
                .await
                .unwrap_or_else(|e| panic!("{}: the object before the update is refused: {e}", example.what));
            let mut after = object(example.plural, &name, &example.new);
            after.metadata.resource_version = before.metadata.resource_version;
            api.replace(&name, &dry_run, &after).await
        }
    };
    match answer {
        Ok(_) => Ok(()),
        Err(kube::Error::Api(status)) if status.code == 422 => {
            let causes = status.details.map(|d| d.causes).unwrap_or_default();
            // A cause with no field says only that some rules went unchecked ("<nil>").
            Err(causes.into_iter().map(|c| c.field).filter(|f| !f.is_empty() && f != "<nil>").collect())
        }
        Err(e) => panic!("{}: the API server answered {e}", example.what),
    }
}

#[tokio::test]
async fn the_apiserver_takes_the_crds_and_judges_the_rules_table_as_kairon_does() {
    let tb = Testbed::shared();
    tb.install_crds();
    let ns = "rules-table";
    tb.kubectl(&["create", "namespace", ns]).unwrap();
    let client = client(tb).await;
    let mut wrong = Vec::new();
    for (i, example) in examples().iter().enumerate() {
        let kairon: BTreeSet<String> = example.kairon_errors().into_iter().map(|e| e.field).collect();
        let server = server_verdict(&client, ns, i, example).await;
        match (&server, example.valid) {
            (Ok(()), true) if kairon.is_empty() => {}
            (Err(fields), false) if !kairon.is_empty() => {
                // The same field: each field the server names is one Kairon names too.
                let server: BTreeSet<String> = fields.iter().cloned().collect();
                if !server.is_subset(&kairon) || server.is_empty() {
                    wrong.push(format!("{}: the API server names {server:?}, Kairon {kairon:?}", example.what));
                }
            }
            _ => wrong.push(format!(
                "{}: want valid={}, the API server says {server:?}, Kairon {kairon:?}",
                example.what, example.valid
            )),
        }
    }
    assert!(wrong.is_empty(), "{} disagreements:\n{}", wrong.len(), wrong.join("\n"));
}

/// `/version` tells the truth about the build (the testbed's `-ldflags`), and kube-rs's
/// k8s-openapi speaks that version.
#[tokio::test]
async fn the_testbed_is_the_kubernetes_release_k8s_openapi_speaks() {
    let tb = Testbed::shared();
    let version = client(tb).await.apiserver_version().await.unwrap();
    assert_eq!((version.major.as_str(), version.minor.as_str()), ("1", "37"), "{version:?}");
    assert_eq!(version.git_version, "v1.37.2");
}
