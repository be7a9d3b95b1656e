//! The install on Kubernetes (`deploy/kustomize` and the Helm chart), checked on its rendered
//! objects: it renders with `kubectl kustomize`, the chart with the real `helm template` and
//! `helm lint` (the testbed's build, `scripts/k8s-testbed`); every object round-trips through its
//! k8s-openapi type unchanged (an unknown or misspelt field fails); every `kairon` command line
//! in it is one the binary takes; the webhook is registered for every Kairon kind and its status,
//! at the api's route; each component runs as its own ServiceAccount; the control plane never
//! lands on a guests' node. (Its CRDs are `kairon crds`:
//! `model/src/crds.rs::committed_manifests_match`; the install itself on a real API server is
//! `helm_install.rs`.)
use std::path::PathBuf;
use std::process::Command;

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use k8s_openapi::api::admissionregistration::v1::ValidatingWebhookConfiguration;
use k8s_openapi::api::apps::v1::{DaemonSet, Deployment, StatefulSet};
use k8s_openapi::api::core::v1::{ConfigMap, Namespace, PodSpec, Service, ServiceAccount};
use k8s_openapi::api::networking::v1::NetworkPolicy;
use k8s_openapi::api::rbac::v1::{ClusterRole, ClusterRoleBinding, Role, RoleBinding};
use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;

fn base() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../deploy/kustomize")
}

/// `kubectl kustomize deploy/kustomize`, as JSON objects.
fn rendered() -> Vec<Value> {
    let out = Command::new("kubectl").arg("kustomize").arg(base()).output().expect("kubectl");
    assert!(out.status.success(), "kubectl kustomize: {}", String::from_utf8_lossy(&out.stderr));
    documents(&String::from_utf8(out.stdout).unwrap())
}

/// `obj` read as `K` and written back: the same JSON, or where it differs (a field the type
/// does not know is dropped, a misspelt one too).
fn round_trip<K: DeserializeOwned + Serialize>(obj: &Value) -> Result<(), String> {
    let typed: K = serde_json::from_value(obj.clone()).map_err(|e| e.to_string())?;
    let back = serde_json::to_value(&typed).map_err(|e| e.to_string())?;
    match first_difference(obj, &back, String::new()) {
        None => Ok(()),
        Some((at, was, is)) => Err(format!("differs after a round trip at {at}: rendered {was}, typed {is}")),
    }
}

/// The first place two JSON values differ (numbers by value: YAML's 60 and a type's 60.0 are
/// the same number).
fn first_difference(a: &Value, b: &Value, at: String) -> Option<(String, String, String)> {
    match (a, b) {
        (Value::Number(x), Value::Number(y)) if x.as_f64() == y.as_f64() => None,
        (Value::Object(x), Value::Object(y)) => {
            x.keys().chain(y.keys().filter(|k| !x.contains_key(*k))).find_map(|k| {
                first_difference(
                    x.get(k).unwrap_or(&Value::Null),
                    y.get(k).unwrap_or(&Value::Null),
                    format!("{at}/{k}"),
                )
            })
        }
        (Value::Array(x), Value::Array(y)) if x.len() == y.len() => {
            x.iter().zip(y).enumerate().find_map(|(i, (p, q))| first_difference(p, q, format!("{at}/{i}")))
        }
        _ if a == b => None,
        _ => Some((at, a.to_string().chars().take(200).collect(), b.to_string().chars().take(200).collect())),
    }
}

#[test]
fn the_kustomize_base_renders_and_every_object_is_what_kubernetes_reads() {
    let objects = rendered();
    let mut kinds: Vec<String> = Vec::new();
    for obj in &objects {
        let kind = obj["kind"].as_str().unwrap().to_string();
        let name = obj["metadata"]["name"].as_str().unwrap_or_default();
        let r = match kind.as_str() {
            "Namespace" => round_trip::<Namespace>(obj),
            "CustomResourceDefinition" => round_trip::<CustomResourceDefinition>(obj),
            "ServiceAccount" => round_trip::<ServiceAccount>(obj),
            "ClusterRole" => round_trip::<ClusterRole>(obj),
            "ClusterRoleBinding" => round_trip::<ClusterRoleBinding>(obj),
            "Role" => round_trip::<Role>(obj),
            "RoleBinding" => round_trip::<RoleBinding>(obj),
            "Deployment" => round_trip::<Deployment>(obj),
            "DaemonSet" => round_trip::<DaemonSet>(obj),
            "Service" => round_trip::<Service>(obj),
            "ValidatingWebhookConfiguration" => round_trip::<ValidatingWebhookConfiguration>(obj),
            "NetworkPolicy" => round_trip::<NetworkPolicy>(obj),
            "ConfigMap" => round_trip::<ConfigMap>(obj),
            other => Err(format!("a kind this test does not know: {other}")),
        };
        if let Err(e) = r {
            panic!("{kind} {name}: {e}");
        }
        kinds.push(kind);
    }
    for want in ["Namespace", "CustomResourceDefinition", "Deployment", "DaemonSet", "ValidatingWebhookConfiguration"] {
        assert!(kinds.iter().any(|k| k == want), "no {want} in {kinds:?}");
    }
    // Everything namespaced is in kairon-system.
    for obj in &objects {
        let ns = obj["metadata"]["namespace"].as_str();
        assert!(ns.is_none() || ns == Some("kairon-system"), "{obj}");
    }
}

/// The pod templates of the workloads, by name.
fn pods(objects: &[Value]) -> Vec<(String, PodSpec)> {
    objects
        .iter()
        .filter(|o| matches!(o["kind"].as_str(), Some("Deployment" | "DaemonSet")))
        .map(|o| {
            let spec: PodSpec = serde_json::from_value(o["spec"]["template"]["spec"].clone()).unwrap();
            (o["metadata"]["name"].as_str().unwrap().to_string(), spec)
        })
        .collect()
}

/// Every `kairon` command line of the workloads is one the binary takes: run with `--help`
/// after it, the binary checks each flag and value it knows and refuses a misspelt one.
#[test]
fn every_kairon_command_line_in_it_is_accepted() {
    let objects = rendered();
    let mut checked = 0;
    for (name, pod) in pods(&objects) {
        for c in pod.containers {
            let Some(args) = c.args.filter(|_| c.image.as_deref().is_some_and(|i| i.contains("kairon"))) else {
                continue;
            };
            // The values Kubernetes substitutes, as a pod would get them.
            let args: Vec<String> = args
                .iter()
                .map(|a| {
                    a.replace("$(POD_NAME)", "kairon-controller-0")
                        .replace("$(NODE_NAME)", "n1")
                        .replace("$(NODE_IP)", "10.0.0.1")
                })
                .collect();
            let out = Command::new(kairon_e2e::kairon_bin()).args(&args).arg("--help").output().unwrap();
            assert!(
                out.status.success(),
                "{name}/{}: kairon {args:?} is refused: {}",
                c.name,
                String::from_utf8_lossy(&out.stderr)
            );
            checked += 1;
        }
    }
    assert_eq!(checked, 3, "the api, the controller and the node agent");
}

#[test]
fn the_webhook_covers_every_kairon_kind_and_each_component_has_its_own_identity() {
    let objects = rendered();
    let hook = objects.iter().find(|o| o["kind"] == "ValidatingWebhookConfiguration").unwrap();
    let hook: ValidatingWebhookConfiguration = serde_json::from_value(hook.clone()).unwrap();
    let w = &hook.webhooks.as_ref().unwrap()[0];
    let svc = w.client_config.service.as_ref().unwrap();
    assert_eq!((svc.name.as_str(), svc.namespace.as_str()), ("kairon-api", "kairon-system"));
    assert_eq!(svc.path.as_deref(), Some("/admission/v1/validate"), "the api's route (api/src/webhook.rs)");
    // The webhook's own port (kairon api --webhook-listen), never the API's.
    assert_eq!(svc.port, Some(8443));
    let resources: Vec<&str> =
        w.rules.iter().flatten().flat_map(|r| r.resources.iter().flatten()).map(String::as_str).collect();
    for crd in kairon_model::crds::all() {
        let plural = crd.spec.names.plural;
        assert!(resources.contains(&plural.as_str()), "{plural}");
        assert!(resources.contains(&format!("{plural}/status").as_str()), "{plural}/status");
    }
    // Node agents' Events, and no one else's: their ServiceAccount may write Events anywhere,
    // the webhook lets them only about Machines on their own node.
    let events = &hook.webhooks.as_ref().unwrap()[1];
    assert_eq!(events.client_config.service.as_ref(), Some(svc), "the same route");
    let rules = events.rules.clone().unwrap_or_default();
    let groups: Vec<String> = rules.iter().flat_map(|r| r.api_groups.clone().unwrap_or_default()).collect();
    assert_eq!(groups, ["", "events.k8s.io"]);
    assert!(rules.iter().all(|r| r.resources.as_deref() == Some(&["events".to_string()][..])), "{rules:?}");
    let conditions = events.match_conditions.clone().unwrap_or_default();
    assert_eq!(conditions.len(), 1, "{conditions:?}");
    assert!(conditions[0].expression.contains("system:serviceaccount:kairon-system:kairon-node"), "{conditions:?}");
    let service = objects.iter().find(|o| o["kind"] == "Service").unwrap();
    assert_eq!(service["metadata"]["name"], svc.name.as_str(), "the webhook's service exists");
    // The api's certificate is for the name the API server calls.
    let api = pods(&objects).into_iter().find(|(n, _)| n == "kairon-api").unwrap().1;
    let args = api.containers[0].args.clone().unwrap();
    assert!(args.windows(2).any(|w| w[0] == "--tls-name" && w[1] == "kairon-api.kairon-system.svc"), "{args:?}");
    // The Service's webhook port leads to the container port the webhook listens on.
    assert!(args.windows(2).any(|w| w[0] == "--webhook-listen" && w[1] == "0.0.0.0:7446"), "{args:?}");
    let ports = api.containers[0].ports.clone().unwrap();
    assert!(ports.iter().any(|p| p.name.as_deref() == Some("webhook") && p.container_port == 7446), "{ports:?}");
    let service_port = service["spec"]["ports"].as_array().unwrap().iter().find(|p| p["port"] == 8443).unwrap();
    assert_eq!(service_port["targetPort"], "webhook");
    // One ServiceAccount each: the webhook tells nodes, controllers and the api apart by it.
    let accounts: Vec<(String, String)> =
        pods(&objects).into_iter().map(|(n, p)| (n, p.service_account_name.unwrap_or_default())).collect();
    for (workload, account) in &accounts {
        assert_eq!(workload, account, "{workload} runs as its own ServiceAccount");
    }
    // The node agents' account is the one the webhook reads a node from (with its bound
    // token's node name).
    assert!(accounts.iter().any(|(_, a)| a == "kairon-node"), "{accounts:?}");
}

fn chart() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../deploy/helm/kairon")
}

/// The chart's default values.
fn default_values() -> Value {
    let text = std::fs::read_to_string(chart().join("values.yaml")).unwrap();
    serde_json::to_value(serde_yaml::from_str::<serde_yaml::Value>(&text).unwrap()).unwrap()
}

/// Documents of YAML text as JSON objects.
fn documents(text: &str) -> Vec<Value> {
    serde_yaml::Deserializer::from_str(text)
        .map(|doc| serde_json::to_value(serde_yaml::Value::deserialize(doc).unwrap()).unwrap())
        .filter(|v: &Value| !v.is_null())
        .collect()
}

/// Runs the real `helm` (the testbed's build) with `values` in a file; its output.
fn helm(args: &[&str], values: &Value) -> String {
    let file = tempfile::NamedTempFile::with_suffix(".json").unwrap();
    std::fs::write(file.path(), values.to_string()).unwrap();
    let out = Command::new(kairon_e2e::testbed::bin("helm"))
        .args(args)
        .arg(chart())
        .arg("--values")
        .arg(file.path())
        .output()
        .unwrap();
    let text = format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "helm {args:?}: {text}");
    text
}

/// The chart's templates rendered with `values` by `helm template`, as JSON objects.
fn chart_objects(values: &Value) -> Vec<Value> {
    documents(&helm(&["template", "kairon"], values))
}

/// `helm lint --strict` passes with the default values and with every option set.
#[test]
fn helm_lint_passes() {
    for values in [default_values(), every_option()] {
        let text = helm(&["lint", "--strict"], &values);
        assert!(text.contains("0 chart(s) failed"), "{text}");
    }
}

/// With its default values the chart renders exactly the kustomize base (its CRDs, in the
/// chart's `crds/`, are `kairon crds`: `model/src/crds.rs::committed_manifests_match`).
#[test]
fn the_chart_renders_what_the_kustomize_base_does() {
    let chart = chart_objects(&default_values());
    let base: Vec<Value> = rendered().into_iter().filter(|o| o["kind"] != "CustomResourceDefinition").collect();
    let key =
        |o: &Value| (o["kind"].as_str().unwrap().to_string(), o["metadata"]["name"].as_str().unwrap().to_string());
    let chart_keys: Vec<_> = chart.iter().map(key).collect();
    let base_keys: Vec<_> = base.iter().map(key).collect();
    assert_eq!(chart_keys.len(), base_keys.len(), "chart {chart_keys:?}\nbase {base_keys:?}");
    for want in &base {
        let have =
            chart.iter().find(|o| key(o) == key(want)).unwrap_or_else(|| panic!("the chart has no {:?}", key(want)));
        if let Some((at, was, is)) = first_difference(want, have, String::new()) {
            panic!("{:?} differs at {at}: the base has {was}, the chart {is}", key(want));
        }
    }
}

/// The default values with every option changed or turned on.
fn every_option() -> Value {
    let mut v = default_values();
    v["image"]["pullPolicy"] = "Always".into();
    v["api"]["replicas"] = 3.into();
    v["node"]["tolerations"] =
        serde_json::json!([{"key": "dedicated", "operator": "Equal", "value": "kairon", "effect": "NoSchedule"}]);
    v["ui"]["auth"]["sandboxOperatorExec"] = true.into();
    v["legacyToken"]["secret"] = "kairon-legacy".into();
    v["metrics"]["serviceMonitor"] = true.into();
    v["createNamespace"] = false.into();
    v["postgresql"]["enabled"] = true.into();
    v["webhook"]["clientCASecret"] = "kairon-webhook-client-ca".into();
    v["webhook"]["allowFrom"] = serde_json::json!([{"ipBlock": {"cidr": "192.0.2.10/32"}}]);
    v
}

/// Every value the chart takes renders objects Kubernetes reads back unchanged.
#[test]
fn the_charts_values_render_and_read_back() {
    let objects = chart_objects(&every_option());
    let by = |kind: &str, name: &str| {
        objects
            .iter()
            .find(|o| o["kind"] == kind && o["metadata"]["name"] == name)
            .unwrap_or_else(|| panic!("{kind} {name}"))
    };
    assert!(!objects.iter().any(|o| o["kind"] == "Namespace"), "createNamespace: false");
    for o in &objects {
        let r = match o["kind"].as_str().unwrap() {
            "Deployment" => round_trip::<Deployment>(o),
            "DaemonSet" => round_trip::<DaemonSet>(o),
            "StatefulSet" => round_trip::<StatefulSet>(o),
            "Service" => round_trip::<Service>(o),
            "NetworkPolicy" => round_trip::<NetworkPolicy>(o),
            _ => Ok(()),
        };
        r.unwrap_or_else(|e| panic!("{}: {e}", o["metadata"]["name"]));
    }
    let api = by("Deployment", "kairon-api");
    assert_eq!(api["spec"]["replicas"], 3);
    let env = &api["spec"]["template"]["spec"]["containers"][0]["env"];
    let var = |name: &str| env.as_array().unwrap().iter().find(|e| e["name"] == name).cloned();
    assert_eq!(var("KAIRON_UI_SANDBOX_OPERATOR_EXEC").unwrap()["value"], "true", "ui.auth.sandboxOperatorExec");
    assert_eq!(var("KAIRON_LEGACY_TOKEN").unwrap()["valueFrom"]["secretKeyRef"]["name"], "kairon-legacy");
    assert_eq!(api["spec"]["template"]["spec"]["containers"][0]["imagePullPolicy"], "Always");
    let args = api["spec"]["template"]["spec"]["containers"][0]["args"].as_array().unwrap();
    let ca = args.iter().position(|a| a == "--webhook-client-ca").expect("webhook.clientCASecret");
    assert_eq!(args[ca + 1], "/etc/kairon/webhook-client-ca/ca.crt");
    let volumes = api["spec"]["template"]["spec"]["volumes"].as_array().unwrap();
    assert!(volumes.iter().any(|v| v["secret"]["secretName"] == "kairon-webhook-client-ca"), "{volumes:?}");
    let node = by("DaemonSet", "kairon-node");
    assert_eq!(node["spec"]["template"]["spec"]["tolerations"][0]["key"], "dedicated");
    let monitor = by("ServiceMonitor", "kairon-controller");
    assert_eq!(monitor["spec"]["endpoints"][0]["port"], "metrics");
    by("Service", "kairon-controller-metrics");
    let postgres = by("StatefulSet", "kairon-postgresql");
    assert_eq!(postgres["spec"]["volumeClaimTemplates"][0]["spec"]["resources"]["requests"]["storage"], "10Gi");
    by("Service", "kairon-postgresql");
    // Off by default: the kustomize base and the default chart have no database of their own.
    assert!(!chart_objects(&default_values()).iter().any(|o| o["kind"] == "StatefulSet"));
}

/// A change that makes a values file bad.
type Change = fn(&mut Value);

/// Good and bad values files against the chart's values.schema.json.
#[test]
fn values_files_are_checked_against_the_schema() {
    let schema: Value =
        serde_json::from_str(&std::fs::read_to_string(chart().join("values.schema.json")).unwrap()).unwrap();
    let validator = jsonschema::validator_for(&schema).unwrap();
    let good = default_values();
    let errors: Vec<String> = validator.iter_errors(&good).map(|e| e.to_string()).collect();
    assert!(errors.is_empty(), "the default values: {errors:?}");
    let mut with_options = good.clone();
    with_options["metrics"]["serviceMonitor"] = true.into();
    with_options["legacyToken"]["secret"] = "kairon-legacy".into();
    assert!(validator.is_valid(&with_options));
    let bad: Vec<(&str, Change)> = vec![
        ("replicas as words", |v| v["api"]["replicas"] = "two".into()),
        ("no replicas", |v| v["controller"]["replicas"] = 0.into()),
        ("no image tag", |v| {
            v["image"].as_object_mut().unwrap().remove("tag");
        }),
        ("a misspelt key", |v| v["api"]["replica"] = 2.into()),
        ("an unknown pull policy", |v| v["image"]["pullPolicy"] = "Sometimes".into()),
        ("a namespace that is no name", |v| v["namespace"] = "Kairon_System".into()),
        ("a port out of range", |v| v["node"]["runtimePort"] = 70000.into()),
        ("a memory that is no quantity", |v| v["api"]["resources"]["limits"]["memory"] = "lots".into()),
        ("a flag that is no boolean", |v| v["ui"]["auth"]["sandboxOperatorExec"] = "yes".into()),
        ("an unknown failure policy", |v| v["webhook"]["failurePolicy"] = "Retry".into()),
        ("a volume size that is no quantity", |v| v["postgresql"]["storage"] = "big".into()),
    ];
    for (what, change) in bad {
        let mut v = good.clone();
        change(&mut v);
        assert!(!validator.is_valid(&v), "{what} passed the schema");
    }
}

/// The api, the controllers and the chart's PostgreSQL hold the cluster's keys and every
/// tenant's records: each refuses a node labelled for Kairon's guests.
#[test]
fn the_control_plane_never_shares_a_node_with_guests() {
    let chart = chart_objects(&every_option());
    let kustomize = rendered();
    let workloads = [
        (&kustomize, "Deployment", "kairon-api"),
        (&kustomize, "Deployment", "kairon-controller"),
        (&chart, "Deployment", "kairon-api"),
        (&chart, "Deployment", "kairon-controller"),
        (&chart, "StatefulSet", "kairon-postgresql"),
    ];
    for (objects, kind, name) in workloads {
        let o = objects.iter().find(|o| o["kind"] == kind && o["metadata"]["name"] == name).unwrap();
        let pod: PodSpec = serde_json::from_value(o["spec"]["template"]["spec"].clone()).unwrap();
        let required = pod
            .affinity
            .and_then(|a| a.node_affinity)
            .and_then(|a| a.required_during_scheduling_ignored_during_execution)
            .unwrap_or_else(|| panic!("{kind} {name} has no required node affinity"));
        // Every term (they are ORed) must keep it off a Kairon node.
        for term in &required.node_selector_terms {
            let refuses = term.match_expressions.iter().flatten().any(|e| {
                e.key == "kairon.zyvor.dev/node"
                    && e.operator == "NotIn"
                    && e.values.iter().flatten().any(|v| v == "true")
            });
            assert!(refuses, "{kind} {name}: a term that allows a Kairon node: {term:?}");
        }
        assert!(!required.node_selector_terms.is_empty(), "{kind} {name}");
    }
    // The node agents go only where the label is.
    let node = kustomize.iter().find(|o| o["kind"] == "DaemonSet").unwrap();
    assert_eq!(node["spec"]["template"]["spec"]["nodeSelector"]["kairon.zyvor.dev/node"], "true");
}

/// Every node starts with the config the manifests mount, and its deny set holds every range of
/// the built-in one (the cluster's inside), plus the cluster's own CIDRs from `--deny-cidr`.
#[test]
fn the_nodes_keep_guests_off_the_clusters_inside() {
    for (what, objects) in [("kustomize", rendered()), ("chart", chart_objects(&default_values()))] {
        let by = |kind: &str, name: &str| {
            objects
                .iter()
                .find(|o| o["kind"] == kind && o["metadata"]["name"] == name)
                .unwrap_or_else(|| panic!("{what}: {kind} {name}"))
                .clone()
        };
        let text = by("ConfigMap", "kairon-node-config")["data"]["node.toml"].as_str().expect("node.toml").to_string();
        let config = kairon_runtime::egress::NodeConfig::parse(&text).unwrap_or_else(|e| panic!("{what}: {e}"));
        let listed = config.sandbox.egress_deny_cidrs.clone().expect("the deny set is spelled out");
        for range in kairon_runtime::egress::DEFAULT_DENY_CIDRS {
            assert!(listed.iter().any(|l| l == range), "{what}: the node config leaves out {range}");
        }
        let daemon = by("DaemonSet", "kairon-node");
        let pod: PodSpec = serde_json::from_value(daemon["spec"]["template"]["spec"].clone()).unwrap();
        let args = pod.containers[0].args.clone().unwrap_or_default();
        let after =
            |flag: &str| -> Vec<String> { args.windows(2).filter(|w| w[0] == flag).map(|w| w[1].clone()).collect() };
        assert_eq!(after("--config"), ["/etc/kairon/node/node.toml"], "{what}");
        let cluster = after("--deny-cidr");
        assert!(!cluster.is_empty(), "{what}: the cluster's CIDRs are denied too");
        let policy = kairon_runtime::egress::EgressPolicy::new(&config.sandbox)
            .and_then(|p| p.deny_also(&cluster))
            .unwrap_or_else(|e| panic!("{what}: {e}"));
        for host in ["10.96.0.1", "10.244.1.5", "172.20.0.1", "192.168.1.1", "169.254.169.254", "100.64.0.1"] {
            assert!(!policy.check(host).unwrap().allow, "{what}: a guest reaches {host}");
        }
        assert!(policy.check("198.51.100.1").unwrap().allow, "{what}: the internet stays open");
        let mount = pod.containers[0].volume_mounts.iter().flatten().find(|m| m.mount_path == "/etc/kairon/node");
        let volume = mount.map(|m| m.name.clone()).expect("the config is mounted");
        let source = pod.volumes.iter().flatten().find(|v| v.name == volume).and_then(|v| v.config_map.clone());
        assert_eq!(source.map(|c| c.name), Some("kairon-node-config".to_string()), "{what}");
    }
}

/// Where the network enforces NetworkPolicy: the api's ports are its API and its webhook (the
/// webhook's only from `webhook.allowFrom`), and only the api and controllers reach the chart's
/// PostgreSQL.
#[test]
fn network_policies_fence_the_webhook_and_the_database() {
    let objects = chart_objects(&every_option());
    let find = |kind: &str, name: &str| {
        objects
            .iter()
            .find(|o| o["kind"] == kind && o["metadata"]["name"] == name)
            .unwrap_or_else(|| panic!("{kind} {name}"))
    };
    let policy = |name: &str| -> NetworkPolicy { serde_json::from_value(find("NetworkPolicy", name).clone()).unwrap() };
    let pod_labels = |kind: &str, name: &str| find(kind, name)["spec"]["template"]["metadata"]["labels"].clone();

    let api = policy("kairon-api").spec.unwrap();
    assert_eq!(
        serde_json::to_value(&api.pod_selector.as_ref().unwrap().match_labels).unwrap(),
        pod_labels("Deployment", "kairon-api")
    );
    let rules = api.ingress.unwrap();
    let port = |r: &k8s_openapi::api::networking::v1::NetworkPolicyIngressRule| {
        serde_json::to_value(&r.ports.as_ref().unwrap()[0].port).unwrap()
    };
    let https = rules.iter().find(|r| port(r) == 7445).expect("the API's port");
    assert!(https.from.is_none(), "the API takes anyone");
    let webhook = rules.iter().find(|r| port(r) == 7446).expect("the webhook's port");
    let from = serde_json::to_value(webhook.from.as_ref().expect("webhook.allowFrom")).unwrap();
    assert_eq!(from, serde_json::json!([{"ipBlock": {"cidr": "192.0.2.10/32"}}]));
    assert_eq!(rules.len(), 2, "no other port");

    let db = policy("kairon-postgresql").spec.unwrap();
    assert_eq!(
        serde_json::to_value(&db.pod_selector.as_ref().unwrap().match_labels).unwrap(),
        pod_labels("StatefulSet", "kairon-postgresql")
    );
    let rule = &db.ingress.unwrap()[0];
    assert_eq!(port(rule), 5432);
    let allowed = &rule.from.as_ref().unwrap()[0].pod_selector.as_ref().unwrap().match_expressions.as_ref().unwrap()[0];
    let mut names = allowed.values.clone().unwrap();
    names.sort();
    assert_eq!(
        (allowed.key.as_str(), allowed.operator.as_str(), names),
        ("app.kubernetes.io/name", "In", vec!["kairon-api".to_string(), "kairon-controller".to_string()])
    );
    for workload in ["kairon-api", "kairon-controller"] {
        assert_eq!(pod_labels("Deployment", workload)["app.kubernetes.io/name"], workload);
    }
    // With the defaults, the webhook's port admits any source (the client certificate guards it).
    let defaults = chart_objects(&default_values());
    let api = defaults.iter().find(|o| o["kind"] == "NetworkPolicy" && o["metadata"]["name"] == "kairon-api").unwrap();
    assert!(api["spec"]["ingress"][1]["from"].is_null(), "{api}");
}
