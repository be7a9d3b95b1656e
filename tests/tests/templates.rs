//! A namespace's own templates (KaironTemplate) end to end: an operator declares one from an
//! image in a real registry plus a build step; a Machine of the namespace that names it, placed
//! on a node that never had it, gets it built there (one node builds a new template at once,
//! and its status follows that build) (the step's file is in the sandbox); another
//! namespace naming it gets no such template; an image at a private address a tenant names is
//! refused by the node's egress policy.

use std::process::Command;

use kube::ResourceExt;
use kube::api::{Api, PostParams};
use serde_json::{Value, json};

use kairon_e2e::registry::Registry;
use kairon_e2e::{Kairon, MINUTE, SeparateNode, eventually, kairon_bin};
use kairon_model::{KaironNode, KaironQuota, KaironTemplate, Machine, TemplatePhase};

mod support;
use support::{built_typescript, repo, run, venv_bin, with_env};

fn template(name: &str, image: &str, steps: &[&str]) -> KaironTemplate {
    serde_json::from_value(json!({
        "apiVersion": "kairon.zyvor.dev/v1", "kind": "KaironTemplate", "metadata": {"name": name},
        "spec": {"image": image, "steps": steps},
    }))
    .unwrap()
}

/// A sandbox Machine naming `template`, on the node (the sandbox track is an admin's to create,
/// directly or as a pool's members, in the tenant's namespace).
fn sandbox(name: &str, template: &str, node: &str) -> Value {
    json!({"metadata": {"name": name}, "spec": {"sandbox": {"templateName": template}, "nodeName": node, "guestAgent": {"console": true}}})
}

/// The Machine's Ready condition once it says `reason`.
async fn ready_reason(machines: &Api<Machine>, name: &str, reason: &str) -> Value {
    eventually(&format!("{name} to say {reason}"), 3 * MINUTE, || async {
        let m = machines.get(name).await.ok()?;
        let ready = m.status?.conditions.into_iter().find(|c| c.type_ == "Ready")?;
        (ready.reason == reason).then(|| json!({"message": ready.message}))
    })
    .await
}

#[tokio::test(flavor = "multi_thread")]
async fn a_namespace_template_is_built_on_the_node_that_runs_it_and_is_that_namespaces_alone() {
    let registry = Registry::start().unwrap();
    let image = registry.push_busybox("agents/busybox:1.35").await.unwrap();
    let k = Kairon::start_with(&["--no-runtime"]).unwrap();
    let insecure = ["--insecure-registry", registry.host.as_str()];
    let (state_a, state_b) = (tempfile::tempdir().unwrap(), tempfile::tempdir().unwrap());
    let nodes = [
        SeparateNode::start(&k, "builder-a", state_a.path(), &insecure).unwrap(),
        SeparateNode::start(&k, "builder-b", state_b.path(), &insecure).unwrap(),
    ];
    let admin = k.client().await.unwrap();
    eventually("both nodes to report", MINUTE, || async {
        let listed = Api::<KaironNode>::all(admin.clone()).list(&Default::default()).await.ok()?;
        (listed.items.iter().filter(|n| n.status.as_ref().is_some_and(|s| s.heartbeat_time.is_some())).count() == 2)
            .then_some(())
    })
    .await;

    // An operator declares it; one node builds it at once, and its status follows the build.
    let (a, b) = ("tmpl-own", "tmpl-other");
    let alice = k.client_with_token(Some(&k.token("alice", "operator", &[a]).unwrap())).await.unwrap();
    let pp = PostParams::default();
    let templates: Api<KaironTemplate> = Api::namespaced(alice.clone(), a);
    let made = templates
        .create(&pp, &template("agent", &image, &["echo from-the-step > /built.txt && chown 1000 /built.txt"]))
        .await
        .unwrap();
    let ready = eventually("the template to be built", 3 * MINUTE, || async {
        let t = templates.get("agent").await.ok()?;
        t.status.filter(|s| s.phase == TemplatePhase::Ready)
    })
    .await;
    assert_eq!(ready.nodes.len(), 1, "built on one node first: {ready:?}");
    let first = &ready.nodes[0];
    assert_eq!((first.steps_done, first.digest.is_some()), (1, true), "{ready:?}");
    assert_eq!(ready.message.as_deref(), Some(format!("built on {}", first.node).as_str()));

    // A sandbox of namespace a naming it, on the other node: built there too, then started.
    let other = nodes.iter().find(|n| n.name != first.node).unwrap();
    let on_node = kairon_model::template::node_template_name(a, "agent", &made.uid().unwrap());
    let runtime = other.runtime_client().unwrap();
    assert!(runtime.templates().await.unwrap().iter().all(|t| t.name != on_node), "the other node does not have it");
    let rest = k.rest().unwrap();
    rest.post(&format!("/api/v1/machines/{a}"), sandbox("uses-it", "agent", &other.name)).await.ok();
    rest.wait_phase(a, "uses-it", "Running", 180).await.ok();
    let seen = rest
        .post(
            &format!("/api/v1/machines/{a}/uses-it/exec"),
            json!({"command": ["sh", "-c", "cat /built.txt; stat -c %u /built.txt"]}),
        )
        .await
        .ok();
    assert_eq!(seen["stdout"], "from-the-step\n1000\n", "{seen}");
    let built = runtime.templates().await.unwrap().into_iter().find(|t| t.name == on_node).expect("built there");
    assert_eq!((built.steps_done, built.image_ref.as_str()), (1, image.as_str()), "{built:?}");

    // Namespace b names the same template: it is not b's, and no shared template has the name.
    rest.post(&format!("/api/v1/machines/{b}"), sandbox("borrows-it", "agent", &other.name)).await.ok();
    let bob = k.token("bob", "operator", &[b]).unwrap();
    let theirs: Api<Machine> = Api::namespaced(k.client_with_token(Some(&bob)).await.unwrap(), b);
    let refused = ready_reason(&theirs, "borrows-it", "TemplateNotFound").await;
    assert!(refused["message"].as_str().unwrap().contains("\"agent\" does not exist"), "{refused}");

    // An image a tenant names at a private address (the registry again, by a name the node's
    // config does not give): the node's egress policy refuses the pull, and both the template
    // and a Machine naming it say so.
    let port = registry.host.rsplit_once(':').unwrap().1;
    templates.create(&pp, &template("sneaky", &format!("localhost:{port}/agents/busybox:1.35"), &[])).await.unwrap();
    let failed = eventually("the sneaky template to fail", 3 * MINUTE, || async {
        let t = templates.get("sneaky").await.ok()?;
        t.status.filter(|s| s.phase == TemplatePhase::Failed)
    })
    .await;
    let message = failed.message.unwrap_or_default();
    assert!(message.contains("resolves to 127.0.0.1") && message.contains("egress_deny_cidrs"), "{message}");
    rest.post(&format!("/api/v1/machines/{a}"), sandbox("sneaks", "sneaky", &other.name)).await.ok();
    let machines: Api<Machine> = Api::namespaced(alice, a);
    let failed = ready_reason(&machines, "sneaks", "TemplateBuildFailed").await;
    assert!(failed["message"].as_str().unwrap().contains("egress_deny_cidrs"), "{failed}");

    // The Python SDK, as alice: a template built with its progress, a failing step, the quota
    // (4 templates: agent, sneaky, py-sdk and broken fit; a fifth does not), and bob refused.
    Api::<KaironQuota>::namespaced(admin, a)
        .create(
            &pp,
            &serde_json::from_value(json!({"metadata": {"name": "limits"}, "spec": {"hard": {"templates": 4}}}))
                .unwrap(),
        )
        .await
        .unwrap();
    let mut cmd = Command::new(venv_bin("python"));
    cmd.arg(repo().join("sdk/python/scripts/template_build.py"));
    with_env(&mut cmd, &k);
    cmd.env("KAIRON_TOKEN", k.token("alice", "operator", &[a]).unwrap())
        .env("KAIRON_NAMESPACE", a)
        .env("TEMPLATE_IMAGE", &image)
        .env("OTHER_TOKEN", &bob);
    let out = run("scripts/template_build.py", &mut cmd);
    assert_eq!(out.lines().collect::<Vec<_>>(), ["ok build", "ok failed", "ok quota", "ok isolation"], "{out}");

    // The TypeScript SDK, the same way (room made in the quota for its two).
    templates.delete("sneaky", &Default::default()).await.unwrap();
    let ts = built_typescript();
    let mut cmd = Command::new("node");
    cmd.arg("dist/examples/template_build.js").current_dir(&ts);
    with_env(&mut cmd, &k);
    cmd.env("KAIRON_TOKEN", k.token("alice", "operator", &[a]).unwrap())
        .env("KAIRON_NAMESPACE", a)
        .env("TEMPLATE_IMAGE", &image)
        .env("OTHER_TOKEN", &bob);
    let out = run("examples/template_build.ts", &mut cmd);
    assert_eq!(out.lines().collect::<Vec<_>>(), ["ok build", "ok failed", "ok isolation"], "{out}");

    // kaironctl, the same way: declared, followed to its end, or the failing step's output.
    let kaironctl = |args: &[&str]| {
        Command::new(kairon_bin().with_file_name("kaironctl"))
            .env("KUBECONFIG", &k.kubeconfig)
            .env("KAIRON_TOKEN", k.token("alice", "operator", &[a]).unwrap())
            .args(["-n", a])
            .args(args)
            .output()
            .unwrap()
    };
    let out = kaironctl(&["build", "template", "kctl", "--image", &image, "--step", "echo kctl > /k.txt", "--wait"]);
    let said = String::from_utf8_lossy(&out.stdout).to_string() + &String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success() && said.contains("template kctl built (built on builder-"), "{said}");
    assert_eq!(templates.get("kctl").await.unwrap().spec.steps, ["echo kctl > /k.txt"]);
    templates.delete("kctl", &Default::default()).await.unwrap();
    let out = kaironctl(&["build", "template", "kctl-bad", "--image", &image, "--step", "exit 9", "--wait"]);
    let said = String::from_utf8_lossy(&out.stderr).to_string();
    assert_eq!(out.status.code(), Some(1), "{said}");
    assert!(said.contains("template kctl-bad failed to build") && said.contains("code 9"), "{said}");
    drop(nodes);
}
