//! Host paths at the API, attacked by a tenant against a real `kairon up`: a Machine (or a
//! MachinePool's template) names files a root runtime opens, so an operator may name images,
//! kernels and initrds only inside the image directories and volume paths without `..`; an
//! admin may name others, and the node's runtime still refuses what lies outside its own
//! directories. SECURITY.md's "Host paths" names these tests.

use std::time::Duration;

use serde_json::{Value, json};

use kairon_e2e::{Answer, Kairon, Rest, eventually};

const GROUP: &str = "/apis/kairon.zyvor.dev/v1";
const IMAGE: &str = "/var/lib/fluxvm/images/kairon-hw.qcow2";

fn machine(name: &str, spec: Value) -> Value {
    json!({"apiVersion": "kairon.zyvor.dev/v1", "kind": "Machine", "metadata": {"name": name}, "spec": spec})
}

fn pool(name: &str, spec: Value) -> Value {
    json!({"apiVersion": "kairon.zyvor.dev/v1", "kind": "MachinePool", "metadata": {"name": name},
           "spec": {"replicas": 0, "template": {"spec": spec}}})
}

async fn send(r: &Rest, method: reqwest::Method, path: &str, content_type: &str, body: &Value) -> Answer {
    let req = r.request(method, path).header("content-type", content_type).body(serde_json::to_vec(body).unwrap());
    r.send(req).await
}

#[track_caller]
fn refused(what: &str, got: &Answer, text: &str) {
    assert_eq!(got.status, 403, "{what}: wanted 403, got {} {}", got.status, got.body);
    let msg = got.body["message"].as_str().unwrap_or_default();
    assert!(msg.contains(text), "{what}: the message should say {text:?}: {msg}");
    assert!(msg.contains("ask an admin"), "{what}: the message should say what to do: {msg}");
}

#[track_caller]
fn ok(what: &str, got: &Answer) {
    assert!((200..300).contains(&got.status), "{what}: wanted success, got {} {}", got.status, got.body);
}

/// The specs an attacker tries, and what the refusal names.
fn attacks() -> Vec<(&'static str, Value, &'static str)> {
    vec![
        (
            "image outside",
            json!({"image": {"path": "/etc/shadow"}}),
            "image.path \"/etc/shadow\" is not inside the image directories",
        ),
        (
            "image climbing out",
            json!({"image": {"path": "/var/lib/fluxvm/images/../../../etc/shadow"}}),
            "is not inside the image directories",
        ),
        ("image in a look-alike dir", json!({"image": {"path": "/imagesX/a.qcow2"}}), "is not inside"),
        (
            "kernel outside",
            json!({"image": {"path": IMAGE}, "runtime": {"kernel": {"path": "/boot/vmlinuz"}}}),
            "runtime.kernel.path",
        ),
        (
            "initrd outside",
            json!({"image": {"path": IMAGE}, "runtime": {"kernel": {"path": "/images/k", "initrd": "/etc/shadow"}}}),
            "runtime.kernel.initrd",
        ),
        (
            "volume climbing out",
            json!({"image": {"path": IMAGE}, "volumes": [{"name": "d", "path": "../../../etc/shadow"}]}),
            "volumes[d].path",
        ),
    ]
}

#[tokio::test(flavor = "multi_thread")]
async fn a_tenant_names_host_paths_only_inside_the_image_dirs_on_every_write_path() {
    let k = Kairon::start_with(&["--no-runtime"]).unwrap();
    let admin = k.rest().unwrap();
    let alice = k.rest_as(&k.token("alice", "operator", &["a"]).unwrap()).unwrap();
    let legacy_free = k.rest_as(&k.token("vic", "viewer", &["a"]).unwrap()).unwrap();
    let machines = format!("{GROUP}/namespaces/a/machines");
    let pools = format!("{GROUP}/namespaces/a/machinepools");
    let json = "application/json";
    for (what, spec, text) in attacks() {
        // Create, on the Kubernetes paths and the REST API, as a Machine and as a pool template.
        let name = "evil";
        refused(what, &send(&alice, reqwest::Method::POST, &machines, json, &machine(name, spec.clone())).await, text);
        refused(what, &alice.post("/api/v1/machines/a", machine(name, spec.clone())).await, text);
        refused(what, &send(&alice, reqwest::Method::POST, &pools, json, &pool(name, spec.clone())).await, text);
        let applied = format!("{machines}/{name}?fieldManager=attacker&force=true");
        refused(
            what,
            &send(
                &alice,
                reqwest::Method::PATCH,
                &applied,
                "application/apply-patch+yaml",
                &machine(name, spec.clone()),
            )
            .await,
            text,
        );
        assert_eq!(admin.get(&format!("{machines}/{name}")).await.status, 404, "{what}: nothing was stored");
        assert_eq!(admin.get(&format!("{pools}/{name}")).await.status, 404, "{what}: nothing was stored");
    }
    // Changing a good Machine's paths: merge patch, JSON patch, PUT, REST replace.
    ok(
        "a good Machine",
        &send(&alice, reqwest::Method::POST, &machines, json, &machine("good", json!({"image": {"path": IMAGE}})))
            .await,
    );
    let good = format!("{machines}/good");
    refused(
        "merge patch",
        &send(
            &alice,
            reqwest::Method::PATCH,
            &good,
            "application/merge-patch+json",
            &json!({"spec": {"image": {"path": "/etc/shadow"}}}),
        )
        .await,
        "is not inside",
    );
    refused(
        "JSON patch",
        &send(
            &alice,
            reqwest::Method::PATCH,
            &good,
            "application/json-patch+json",
            &json!([{"op": "add", "path": "/spec/runtime", "value": {"kernel": {"path": "/etc/shadow"}}}]),
        )
        .await,
        "runtime.kernel.path",
    );
    let mut whole = admin.get(&good).await.ok();
    whole["spec"]["volumes"] = json!([{"name": "d", "path": "/var/lib/kairon/volumes/a/../../../../etc/shadow"}]);
    refused("PUT", &send(&alice, reqwest::Method::PUT, &good, json, &whole).await, "volumes[d].path");
    let mut rest = alice.get("/api/v1/machines/a/good").await.ok();
    rest["spec"]["image"]["path"] = json!("/root/.ssh/id_rsa");
    refused("REST replace", &alice.put("/api/v1/machines/a/good", rest).await, "is not inside");
    assert_eq!(admin.get(&good).await.ok()["spec"]["image"]["path"], IMAGE, "the stored Machine is unchanged");
    // A viewer is refused before any of this.
    assert_eq!(
        send(
            &legacy_free,
            reqwest::Method::POST,
            &machines,
            json,
            &machine("v", json!({"image": {"path": "/etc/shadow"}}))
        )
        .await
        .status,
        403
    );

    // Inside the directories, and a volume named in the namespace's volumes directory: fine.
    let fine = json!({"image": {"path": "/images/x.qcow2"}, "runtime": {"kernel": {"path": "/images/x.vmlinuz", "initrd": "/images/x.initrd"}},
                      "volumes": [{"name": "d", "path": "data.qcow2"}]});
    ok("paths inside", &send(&alice, reqwest::Method::POST, &machines, json, &machine("fine", fine.clone())).await);
    ok("a pool inside", &send(&alice, reqwest::Method::POST, &pools, json, &pool("fine", fine)).await);

    // An admin may name other paths (the node's runtime still checks its own directories), and
    // a tenant may then change the rest of that Machine, not its paths.
    let other = json!({"image": {"path": "/srv/other.qcow2"}, "volumes": [{"name": "d", "path": "/srv/d.raw"}]});
    ok("admin", &send(&admin, reqwest::Method::POST, &machines, json, &machine("admins", other)).await);
    let admins = format!("{machines}/admins");
    ok(
        "a tenant labels the admin's Machine",
        &send(
            &alice,
            reqwest::Method::PATCH,
            &admins,
            "application/merge-patch+json",
            &json!({"metadata": {"labels": {"x": "y"}}}),
        )
        .await,
    );
    refused(
        "a tenant moves the admin's image",
        &send(
            &alice,
            reqwest::Method::PATCH,
            &admins,
            "application/merge-patch+json",
            &json!({"spec": {"image": {"path": "/srv/x.qcow2"}}}),
        )
        .await,
        "is not inside",
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn the_image_dirs_are_a_flag_of_kairon_up() {
    let k = Kairon::start_with(&["--no-runtime", "--image-dir", "/srv/kairon-images"]).unwrap();
    let alice = k.rest_as(&k.token("alice", "operator", &["a"]).unwrap()).unwrap();
    let machines = format!("{GROUP}/namespaces/a/machines");
    let json = "application/json";
    ok(
        "inside the flag's dir",
        &send(
            &alice,
            reqwest::Method::POST,
            &machines,
            json,
            &machine("in", json!({"image": {"path": "/srv/kairon-images/a.qcow2"}})),
        )
        .await,
    );
    let got =
        send(&alice, reqwest::Method::POST, &machines, json, &machine("def", json!({"image": {"path": IMAGE}}))).await;
    refused("the default dir is no longer one", &got, "/srv/kairon-images");
    // kairon up's own DATA_DIR/images (where `kairon image` builds) stays one.
    let own = k.data_dir.path().join("images/kairon-hw.qcow2");
    ok(
        "DATA_DIR/images",
        &send(
            &alice,
            reqwest::Method::POST,
            &machines,
            json,
            &machine("own", json!({"image": {"path": own.to_string_lossy()}})),
        )
        .await,
    );
}

/// An admin's Machine whose image is /etc/shadow passes the API; the node's runtime refuses
/// it before QEMU starts, and the Machine says why.
#[tokio::test(flavor = "multi_thread")]
async fn the_node_refuses_an_admins_path_outside_its_own_dirs() {
    let k = Kairon::start().unwrap();
    let admin = k.rest().unwrap();
    let shadow = std::fs::metadata("/etc/shadow").unwrap();
    for (name, spec, text) in [
        ("shadow", json!({"image": {"path": "/etc/shadow"}}), "outside the node's image directories"),
        (
            "kernel",
            json!({"image": {"path": IMAGE}, "runtime": {"kernel": {"path": "/etc/shadow"}}}),
            "spec.runtime.kernel.path",
        ),
        (
            "volume",
            json!({"image": {"path": IMAGE}, "volumes": [{"name": "d", "path": "/etc/shadow"}]}),
            "outside the volumes directory of namespace ops",
        ),
    ] {
        ok(name, &admin.post("/api/v1/machines/ops", machine(name, spec)).await);
        let m = eventually(&format!("{name} fails"), Duration::from_secs(90), || {
            let admin = &admin;
            async move {
                let m = admin.get(&format!("/api/v1/machines/ops/{name}")).await.ok();
                (m["status"]["phase"] == "Failed").then_some(m)
            }
        })
        .await;
        let ready = m["status"]["conditions"].as_array().unwrap().iter().find(|c| c["type"] == "Ready").cloned();
        let msg = ready.as_ref().and_then(|c| c["message"].as_str()).unwrap_or_default().to_string();
        // The image may be missing on a fresh node: then the kernel and volume cases are
        // refused for the image first; the point is that nothing starts.
        if std::path::Path::new(IMAGE).is_file() || name == "shadow" {
            assert!(msg.contains(text), "{name}: {msg}");
        }
    }
    let instances = k.runtime().unwrap().list().await.unwrap();
    assert!(instances.iter().all(|v| v.backend != "qemu"), "no VM was created: {instances:?}");
    let after = std::fs::metadata("/etc/shadow").unwrap();
    assert_eq!(after.modified().unwrap(), shadow.modified().unwrap());
}
