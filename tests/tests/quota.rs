//! Quota per namespace under `kairon up`: a KaironQuota (set by an admin) limits what a
//! namespace's Machines add up to. A create beyond it is refused on every path (REST, kubectl,
//! racing clients, a pool making members) with the limit and the use in the message, and
//! nothing is left half made; a claim whose pool cannot grow waits with a QuotaExceeded
//! condition and binds once the quota allows; `kaironctl get quota`, the REST report and the
//! quota's status report use against limits.

use std::process::{Command, Output};
use std::time::Duration;

use k8s_openapi::api::events::v1::Event;
use kube::ResourceExt;
use kube::api::{Api, ListParams, Patch, PatchParams, PostParams};
use serde_json::{Value, json};

use kairon_e2e::{Flags, Kairon, MINUTE, eventually, kairon_bin, wait_for_object};
use kairon_model::{ClaimPhase, KaironQuota, KaironTemplate, LaunchType, Machine, MachineClaim, MachinePool};

const IMAGE: &str = "/var/lib/fluxvm/images/kairon-hw.qcow2";
/// Where the VMs here are pinned: no such node, so they stay Pending and never boot (what quota
/// counts does not depend on it).
const NOWHERE: &str = "nowhere";

fn quota(ns: &str, name: &str, hard: Value) -> KaironQuota {
    serde_json::from_value(json!({
        "apiVersion": "kairon.zyvor.dev/v1", "kind": "KaironQuota",
        "metadata": {"name": name, "namespace": ns}, "spec": {"hard": hard},
    }))
    .unwrap()
}

fn vm(name: &str, cpu: &str, memory: &str) -> Value {
    json!({
        "apiVersion": "kairon.zyvor.dev/v1", "kind": "Machine", "metadata": {"name": name},
        "spec": {"image": {"path": IMAGE}, "resources": {"cpu": cpu, "memory": memory}, "nodeName": NOWHERE},
    })
}

fn text(out: &Output) -> String {
    format!("{}{}", String::from_utf8_lossy(&out.stdout), String::from_utf8_lossy(&out.stderr))
}

fn kaironctl(k: &Kairon, token: &str, args: &[&str]) -> Output {
    Command::new(kairon_bin().with_file_name("kaironctl"))
        .env("KUBECONFIG", &k.kubeconfig)
        .env("KAIRON_TOKEN", token)
        .args(args)
        .output()
        .expect("kaironctl (cargo build -p kaironctl)")
}

#[tokio::test(flavor = "multi_thread")]
async fn creates_beyond_a_namespace_quota_are_refused_on_every_path_and_use_is_reported() {
    let ns = "quota-team";
    let k = Kairon::start().unwrap();
    let admin = k.client().await.unwrap();
    let quotas: Api<KaironQuota> = Api::namespaced(admin.clone(), ns);
    let machines: Api<Machine> = Api::namespaced(admin.clone(), ns);
    quotas
        .create(&PostParams::default(), &quota(ns, "limits", json!({"machines": 3, "cpu": "4", "memory": "4Gi"})))
        .await
        .unwrap();
    let tenant = k.token("alice", "operator", &[ns]).unwrap();
    let rest = k.rest_as(&tenant).unwrap();
    let create = |body: Value| {
        let rest = &rest;
        async move { rest.post(&format!("/api/v1/machines/{ns}"), body).await }
    };

    // A tenant reads its quota but may not change it, on either API.
    let own = k.client_with_token(Some(&tenant)).await.unwrap();
    let mine: Api<KaironQuota> = Api::namespaced(own, ns);
    assert_eq!(mine.get("limits").await.unwrap().spec.hard.machines, Some(3));
    let raise = Patch::Merge(json!({"spec": {"hard": {"machines": 100}}}));
    let e = mine.patch("limits", &PatchParams::default(), &raise).await.unwrap_err();
    assert!(matches!(&e, kube::Error::Api(s) if s.code == 403 && s.message.contains("only an admin sets it")), "{e:?}");
    let out = k.kubectl(&["--token", &tenant, "-n", ns, "delete", "kaironquota", "limits"]);
    assert!(!out.status.success() && text(&out).contains("only an admin sets it"), "{}", text(&out));

    // Within the limits: stored. Beyond the CPU limit: 403 QuotaExceeded, naming it, and nothing stored.
    create(vm("a", "2", "1Gi")).await.ok();
    create(vm("b", "2", "1Gi")).await.ok();
    let refused = create(vm("c", "1", "512Mi")).await;
    assert_eq!((refused.status, refused.reason()), (403, "QuotaExceeded"), "{:?}", refused.body);
    assert!(
        refused.message().starts_with("exceeded quota: limits, requested: cpu=1, used: cpu=4, limited: cpu=4: "),
        "{}",
        refused.message()
    );
    assert_eq!(rest.get(&format!("/api/v1/machines/{ns}/c")).await.status, 404, "nothing half made");
    // A dry run answers as the write would.
    let dry = rest.post(&format!("/api/v1/machines/{ns}?dryRun=All"), vm("c", "1", "512Mi")).await;
    assert_eq!((dry.status, dry.reason()), (403, "QuotaExceeded"), "{:?}", dry.body);

    // kubectl: the same refusal, as Kubernetes words a ResourceQuota's.
    let manifest = serde_json::to_string(&vm("d", "1", "3Gi")).unwrap();
    let out = k.kubectl_stdin(&["--token", &tenant, "-n", ns, "create", "-f", "-"], &manifest);
    assert!(!out.status.success(), "{}", text(&out));
    let said = text(&out);
    assert!(
        said.contains("Forbidden") && said.contains("exceeded quota: limits, requested: cpu=1,memory=3Gi"),
        "{said}"
    );

    // What is used, against what is allowed: the REST report, kaironctl, the quota's status.
    let report = rest.get(&format!("/api/v1/quota/{ns}")).await.ok();
    assert_eq!(
        report["used"],
        json!({"machines": 2, "cpu": "4", "memory": "2Gi", "warmMembers": 0, "storage": "0"}),
        "{report}"
    );
    assert_eq!(report["quotas"][0]["summary"], "machines: 2/3, cpu: 4/4, memory: 2Gi/4Gi", "{report}");
    let out = kaironctl(&k, &tenant, &["-n", ns, "get", "quota"]);
    assert!(out.status.success(), "{}", text(&out));
    let table = String::from_utf8_lossy(&out.stdout).to_string();
    let rows: Vec<Vec<&str>> = table.lines().map(|l| l.split_whitespace().collect()).collect();
    assert_eq!(rows[0], ["QUOTA", "RESOURCE", "USED", "LIMIT"], "{table}");
    for want in [["limits", "machines", "2", "3"], ["limits", "cpu", "4", "4"], ["limits", "memory", "2Gi", "4Gi"]] {
        assert!(rows.iter().any(|r| r[..] == want[..]), "{want:?} in\n{table}");
    }
    let other = kaironctl(&k, &tenant, &["-n", "elsewhere", "get", "quota"]);
    assert!(!other.status.success() && text(&other).contains("elsewhere"), "{}", text(&other));
    let q = wait_for_object(&quotas, "limits", "the quota to report its use", MINUTE, |q| {
        q.status.as_ref().and_then(|s| s.summary.as_deref()) == Some("machines: 2/3, cpu: 4/4, memory: 2Gi/4Gi")
    })
    .await;
    assert_eq!(q.status.unwrap().used.machines, Some(2));
    let listed = k.kubectl_ok(&["-n", ns, "get", "kquota"]);
    assert!(listed.contains("machines: 2/3, cpu: 4/4, memory: 2Gi/4Gi"), "{listed}");

    // A Machine gone frees what it held.
    machines.delete("a", &Default::default()).await.unwrap();
    eventually("a to be gone", MINUTE, || async { machines.get_opt("a").await.unwrap().is_none().then_some(()) }).await;
    create(vm("c", "1", "512Mi")).await.ok();

    // Racing creates never pass a limit together: 4 places left, 10 clients, 4 winners.
    let more = Patch::Merge(json!({"spec": {"hard": {"machines": 6, "cpu": "100", "memory": "100Gi"}}}));
    quotas.patch("limits", &PatchParams::default(), &more).await.unwrap();
    let racing: Vec<_> = (0..10).map(|i| create(vm(&format!("race-{i}"), "1", "512Mi"))).collect();
    let answers = futures::future::join_all(racing).await;
    let won = answers.iter().filter(|a| a.status == 201).count();
    let lost: Vec<_> = answers.iter().filter(|a| a.status != 201).collect();
    assert_eq!(won, 4, "{answers:?}");
    assert!(lost.iter().all(|a| a.status == 403 && a.reason() == "QuotaExceeded"), "{lost:?}");
    assert_eq!(machines.list(&ListParams::default()).await.unwrap().items.len(), 6);

    // A limit lowered below the use: what is there stays and may change without growing; nothing
    // more is made.
    let less = Patch::Merge(json!({"spec": {"hard": {"machines": 1}}}));
    quotas.patch("limits", &PatchParams::default(), &less).await.unwrap();
    let relabel = Patch::Merge(json!({"metadata": {"labels": {"team": "a"}}}));
    machines.patch("b", &PatchParams::default(), &relabel).await.unwrap();
    let grow = Patch::Merge(json!({"spec": {"resources": {"cpu": "200"}}}));
    let e = machines.patch("b", &PatchParams::default(), &grow).await.unwrap_err();
    assert!(matches!(&e, kube::Error::Api(s) if s.code == 403 && s.message.contains("requested: cpu=198")), "{e:?}");
    assert_eq!(create(vm("e", "1", "512Mi")).await.status, 403);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_pool_makes_no_more_warm_members_than_its_quota_allows_and_says_so() {
    let ns = "quota-warm";
    let k = Kairon::start().unwrap();
    let admin = k.client().await.unwrap();
    let quotas: Api<KaironQuota> = Api::namespaced(admin.clone(), ns);
    let pools: Api<MachinePool> = Api::namespaced(admin.clone(), ns);
    let machines: Api<Machine> = Api::namespaced(admin.clone(), ns);
    quotas.create(&PostParams::default(), &quota(ns, "warm", json!({"warmMembers": 2}))).await.unwrap();
    let pool: MachinePool = serde_json::from_value(json!({
        "apiVersion": "kairon.zyvor.dev/v1", "kind": "MachinePool", "metadata": {"name": "vms", "namespace": ns},
        "spec": {"replicas": 3, "template": {"spec": {"image": {"path": IMAGE}, "nodeName": NOWHERE}}},
    }))
    .unwrap();
    pools.create(&PostParams::default(), &pool).await.unwrap();
    let p = wait_for_object(&pools, "vms", "the pool to say its quota refused a member", MINUTE, |p| {
        p.status.as_ref().is_some_and(|s| s.conditions.iter().any(|c| c.type_ == "QuotaExceeded" && c.status == "True"))
    })
    .await;
    let c = p.status.unwrap().conditions.into_iter().find(|c| c.type_ == "QuotaExceeded").unwrap();
    assert!(c.message.starts_with("1 of the 3 members this pool wants cannot be made: exceeded quota: warm, requested: warmMembers=1, used: warmMembers=2, limited: warmMembers=2"), "{}", c.message);
    assert_eq!(machines.list(&ListParams::default()).await.unwrap().items.len(), 2);
    let events: Api<Event> = Api::namespaced(admin.clone(), ns);
    let warned = eventually("a QuotaExceeded Warning Event on the pool", MINUTE, || async {
        let list = events.list(&ListParams::default()).await.ok()?;
        list.items.into_iter().find(|e| e.reason.as_deref() == Some("QuotaExceeded"))
    })
    .await;
    assert_eq!(warned.type_.as_deref(), Some("Warning"));

    // Raised, the pool makes the member at once (the quota's change tells it) and the condition goes.
    let more = Patch::Merge(json!({"spec": {"hard": {"warmMembers": 3}}}));
    quotas.patch("warm", &PatchParams::default(), &more).await.unwrap();
    wait_for_object(&pools, "vms", "the pool to make its third member", Duration::from_secs(20), |p| {
        p.status.as_ref().is_some_and(|s| s.replicas == 3 && s.conditions.iter().all(|c| c.type_ != "QuotaExceeded"))
    })
    .await;
}

fn fast() -> Flags<'static> {
    Flags::fast_activity("1s")
}

#[tokio::test(flavor = "multi_thread")]
async fn a_claim_beyond_the_quota_waits_saying_why_and_binds_once_the_quota_allows() {
    let ns = "quota-claims";
    let k = Kairon::start_with(&fast()).unwrap();
    let client = k.client().await.unwrap();
    let quotas: Api<KaironQuota> = Api::namespaced(client.clone(), ns);
    let pools: Api<MachinePool> = Api::namespaced(client.clone(), ns);
    let claims: Api<MachineClaim> = Api::namespaced(client.clone(), ns);
    quotas.create(&PostParams::default(), &quota(ns, "two", json!({"machines": 2}))).await.unwrap();
    let pool: MachinePool = serde_json::from_value(json!({
        "apiVersion": "kairon.zyvor.dev/v1", "kind": "MachinePool", "metadata": {"name": "agents", "namespace": ns},
        "spec": {"replicas": 1, "warmPowerState": "Paused", "warmupSeconds": 1,
                 "template": {"spec": {"sandbox": {"templateName": "busybox"}}}},
    }))
    .unwrap();
    pools.create(&PostParams::default(), &pool).await.unwrap();
    let claim = |name: &str| -> MachineClaim {
        serde_json::from_value(json!({
            "apiVersion": "kairon.zyvor.dev/v1", "kind": "MachineClaim",
            "metadata": {"name": name, "namespace": ns}, "spec": {"poolName": "agents"},
        }))
        .unwrap()
    };
    let warm = |pools: &Api<MachinePool>| {
        let pools = pools.clone();
        async move {
            wait_for_object(&pools, "agents", "a warm member", Duration::from_secs(120), |p| {
                p.status.as_ref().is_some_and(|s| s.warm == 1)
            })
            .await
        }
    };
    let bound = |name: &'static str| {
        let claims = claims.clone();
        async move {
            wait_for_object(&claims, name, &format!("{name} to bind"), Duration::from_secs(120), |c| {
                c.status.as_ref().and_then(|s| s.phase) == Some(ClaimPhase::Bound)
            })
            .await
        }
    };
    // Two claims take the member and its replacement: the namespace then holds its 2 Machines.
    warm(&pools).await;
    claims.create(&PostParams::default(), &claim("first")).await.unwrap();
    bound("first").await;
    warm(&pools).await;
    claims.create(&PostParams::default(), &claim("second")).await.unwrap();
    bound("second").await;
    wait_for_object(&pools, "agents", "the pool to say the quota refused its member", MINUTE, |p| {
        p.status.as_ref().is_some_and(|s| s.conditions.iter().any(|c| c.type_ == "QuotaExceeded"))
    })
    .await;

    // A third waits, saying why.
    let third = claims.create(&PostParams::default(), &claim("third")).await.unwrap();
    let status = third.status.expect("the create answers its status");
    assert_eq!(status.phase, Some(ClaimPhase::Pending));
    let why = status.conditions.iter().find(|c| c.type_ == "Bound").expect("a Bound condition");
    assert_eq!(why.reason, "QuotaExceeded", "{why:?}");
    assert!(
        why.message.starts_with("pool agents has no warm member and cannot make one: 1 of the 1 members this pool wants cannot be made: exceeded quota: two, requested: machines=1, used: machines=2, limited: machines=2"),
        "{}",
        why.message
    );

    // Releasing the first frees a place: the pool makes a member and the third binds to it, cold.
    claims.delete("first", &Default::default()).await.unwrap();
    let third = bound("third").await;
    assert_eq!(third.status.as_ref().and_then(|s| s.launch_type), Some(LaunchType::Cold));
    // The claim controller labels how it was served in a write of its own, after the status.
    wait_for_object(&claims, "third", "the third's launch-type label", MINUTE, |c| {
        c.labels().get("kairon.zyvor.dev/launch-type").is_some_and(|t| t == "Cold")
    })
    .await;
}

/// The shrink attack: a VM created at its quota's limit and running, then patched down, frees
/// nothing while its node still runs it at the size it started with (`status.resources`, the
/// node's report): quota counts the larger of spec and status, so a second create that the
/// shrink would have let in is refused; the resize takes effect at the next start.
#[tokio::test(flavor = "multi_thread")]
async fn shrinking_a_running_machine_frees_no_quota_until_its_node_applies_it() {
    let ns = "shrink";
    let images = kairon_runtime::vm::image::images_dir(&std::env::temp_dir().join("kairon-images"));
    let image = kairon_runtime::vm::image::ensure_default_image(&images, &Default::default()).await.unwrap();
    let k = Kairon::start_with(&fast()).unwrap();
    let admin = k.client().await.unwrap();
    Api::<KaironQuota>::namespaced(admin.clone(), ns)
        .create(&PostParams::default(), &quota(ns, "limits", json!({"cpu": "2", "memory": "1Gi"})))
        .await
        .unwrap();
    let tenant = k.token("mallory", "operator", &[ns]).unwrap();
    let rest = k.rest_as(&tenant).unwrap();
    let big = json!({"metadata": {"name": "big"},
                     "spec": {"image": {"path": image}, "resources": {"cpu": "2", "memory": "1Gi"}}});
    let made = rest.post(&format!("/api/v1/machines/{ns}"), big).await;
    assert_eq!(made.status, 201, "{made:?}");
    let running = rest.get(&format!("/api/v1/machines/{ns}/big/wait?phase=Running&timeoutSeconds=300")).await;
    assert_eq!(running.status, 200, "{running:?}");
    let machines: Api<Machine> = Api::namespaced(admin.clone(), ns);
    let started = eventually("the node reports what it started the VM with", MINUTE, || async {
        let m = machines.get("big").await.ok()?;
        m.status?.resources
    })
    .await;
    assert_eq!(started.cpu.map(|q| q.0).as_deref(), Some("2"));
    assert_eq!(started.memory.map(|q| q.0).as_deref(), Some("1Gi"));

    // The shrink is accepted (it is a resize for the next start) but frees nothing now.
    let shrink = json!({"spec": {"resources": {"cpu": "1", "memory": "256Mi"}}});
    let own = k.client_with_token(Some(&tenant)).await.unwrap();
    Api::<Machine>::namespaced(own, ns)
        .patch("big", &PatchParams::default(), &Patch::Merge(shrink))
        .await
        .expect("a resize is a spec change a tenant may make");
    let second = rest.post(&format!("/api/v1/machines/{ns}"), vm("second", "1", "256Mi")).await;
    assert_eq!((second.status, second.reason()), (403, "QuotaExceeded"), "the shrink freed quota: {second:?}");
    let report = rest.get(&format!("/api/v1/quota/{ns}")).await.ok();
    assert_eq!(report["used"]["cpu"], "2", "the VM still holds what it started with: {report}");
    assert_eq!(report["used"]["memory"], "1Gi", "{report}");

    // Deleting it frees its place.
    rest.delete(&format!("/api/v1/machines/{ns}/big")).await;
    eventually("the VM gone", MINUTE, || async { machines.get_opt("big").await.ok().filter(Option::is_none) }).await;
    let third = rest.post(&format!("/api/v1/machines/{ns}"), vm("third", "1", "256Mi")).await;
    assert_eq!(third.status, 201, "{third:?}");
}

/// `storage` limits what a namespace's new empty volumes add up to (`spec.volumes[].size`), on
/// every path that makes Machines; beyond it a create is refused naming it.
#[tokio::test(flavor = "multi_thread")]
async fn new_volumes_count_against_a_storage_quota() {
    let ns = "storage-team";
    let k = Kairon::start().unwrap();
    let admin = k.client().await.unwrap();
    Api::<KaironQuota>::namespaced(admin.clone(), ns)
        .create(&PostParams::default(), &quota(ns, "disks", json!({"storage": "10Gi"})))
        .await
        .unwrap();
    let tenant = k.token("alice", "operator", &[ns]).unwrap();
    let rest = k.rest_as(&tenant).unwrap();
    let with_volume = |name: &str, size: &str| {
        let mut m = vm(name, "1", "512Mi");
        m["spec"]["volumes"] = json!([{"name": "data", "size": size}]);
        m
    };
    let first = rest.post(&format!("/api/v1/machines/{ns}"), with_volume("first", "8Gi")).await;
    assert_eq!(first.status, 201, "{first:?}");
    let second = rest.post(&format!("/api/v1/machines/{ns}"), with_volume("second", "4Gi")).await;
    assert_eq!((second.status, second.reason()), (403, "QuotaExceeded"), "{second:?}");
    assert!(
        second.message().contains("requested: storage=4Gi, used: storage=8Gi, limited: storage=10Gi"),
        "{second:?}"
    );
    let fits = rest.post(&format!("/api/v1/machines/{ns}"), with_volume("fits", "2Gi")).await;
    assert_eq!(fits.status, 201, "{fits:?}");
    let report = rest.get(&format!("/api/v1/quota/{ns}")).await.ok();
    assert_eq!(report["used"]["storage"], "10Gi", "{report}");
    assert_eq!(report["quotas"][0]["summary"], "storage: 10Gi/10Gi", "{report}");
    let out = kaironctl(&k, &tenant, &["-n", ns, "get", "quota"]);
    let table = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(
        table.lines().any(|l| l.split_whitespace().collect::<Vec<_>>() == ["disks", "storage", "10Gi", "10Gi"]),
        "{table}"
    );
}

fn template(name: &str, steps: &[&str]) -> KaironTemplate {
    serde_json::from_value(json!({
        "apiVersion": "kairon.zyvor.dev/v1", "kind": "KaironTemplate", "metadata": {"name": name},
        "spec": {"image": "docker.io/library/python:3.12-slim", "steps": steps},
    }))
    .unwrap()
}

/// A namespace's own templates count against its quota's `templates` (racing creates included),
/// are its own (another namespace's operator neither sees nor touches them) and are fixed once
/// created.
#[tokio::test(flavor = "multi_thread")]
async fn a_namespace_makes_no_more_templates_than_its_quota_allows_and_keeps_them_to_itself() {
    let (ns, other) = ("tmpl-a", "tmpl-b");
    let k = Kairon::start().unwrap();
    let admin = k.client().await.unwrap();
    Api::<KaironQuota>::namespaced(admin.clone(), ns)
        .create(&PostParams::default(), &quota(ns, "limits", json!({"templates": 2})))
        .await
        .unwrap();
    let alice = k.client_with_token(Some(&k.token("alice", "operator", &[ns]).unwrap())).await.unwrap();
    let templates: Api<KaironTemplate> = Api::namespaced(alice.clone(), ns);
    let pp = PostParams::default();
    templates.create(&pp, &template("py312", &["pip install pandas"])).await.unwrap();

    // Two racing creates for the last place: one is stored, the other refused naming the limit.
    let (one, two) = (template("one", &[]), template("two", &[]));
    let (a, b) = tokio::join!(templates.create(&pp, &one), templates.create(&pp, &two));
    let refused = match (&a, &b) {
        (Ok(_), Err(e)) | (Err(e), Ok(_)) => e,
        _ => panic!("exactly one racing create wins: {a:?} {b:?}"),
    };
    assert!(
        matches!(refused, kube::Error::Api(s) if s.code == 403 && s.message.contains("exceeded quota: limits") && s.message.contains("limited: templates=2")),
        "{refused:?}"
    );
    assert_eq!(templates.list(&ListParams::default()).await.unwrap().items.len(), 2);

    // Fixed once created: a node may have built it from this spec.
    let change = Patch::Merge(json!({"spec": {"steps": ["true"]}}));
    let e = templates.patch("py312", &PatchParams::default(), &change).await.unwrap_err();
    assert!(matches!(&e, kube::Error::Api(s) if s.code == 422 && s.message.contains("cannot change")), "{e:?}");
    let blank = template("blank", &[" "]);
    let e = templates.create(&pp, &blank).await.unwrap_err();
    assert!(matches!(&e, kube::Error::Api(s) if s.code == 422 && s.message.contains("spec.steps[0]")), "{e:?}");

    // Another namespace's operator neither lists, reads nor deletes them.
    let bob = k.client_with_token(Some(&k.token("bob", "operator", &[other]).unwrap())).await.unwrap();
    let theirs: Api<KaironTemplate> = Api::namespaced(bob.clone(), ns);
    for e in [
        theirs.get("py312").await.unwrap_err(),
        theirs.list(&ListParams::default()).await.unwrap_err(),
        theirs.delete("py312", &Default::default()).await.unwrap_err(),
    ] {
        assert!(matches!(&e, kube::Error::Api(s) if s.code == 403), "{e:?}");
    }
    let everywhere: Api<KaironTemplate> = Api::all(bob.clone());
    let seen = everywhere.list(&ListParams::default()).await.map(|l| l.items).unwrap_or_default();
    assert!(seen.iter().all(|t| t.namespace().as_deref() != Some(ns)), "a list across namespaces shows only its own");
    let own: Api<KaironTemplate> = Api::namespaced(bob, other);
    assert!(own.list(&ListParams::default()).await.unwrap().items.is_empty(), "its own namespace has none");

    // A deleted template frees its place.
    templates.delete("py312", &Default::default()).await.unwrap();
    templates.create(&pp, &template("py313", &[])).await.unwrap();
}
