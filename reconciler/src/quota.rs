//! The quota controller: each KaironQuota reports what its namespace's Machines hold against
//! its limits (`status.used`, `status.hard`, a one-line `status.summary`), and drops from its
//! ledger the reservations the webhook made for writes that have since landed or lapsed.
//! Admission enforces the limits on every write (`api/src/k8s/quota.rs` in the embedded API's
//! transaction, `api/src/webhook/quota.rs` on a real cluster); this only reports and prunes,
//! with a compare-and-swap on the quota so that a reservation added meanwhile is never lost.

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures::StreamExt;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use kube::ResourceExt;
use kube::api::{Api, ListParams, Patch, PatchParams};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::reflector::ObjectRef;
use kube::runtime::watcher;
use serde_json::json;

use kairon_model::quota::QuotaAmounts;
use kairon_model::quota::{self, Limits};
use kairon_model::{KaironQuota, KaironQuotaStatus, KaironTemplate, Machine};

/// How often one quota counts again at most: a namespace's Machines change their status every
/// few seconds each, and counting is a list of them all.
const MIN_INTERVAL: Duration = Duration::from_secs(1);

#[derive(Debug, thiserror::Error)]
pub enum QuotaError {
    #[error(transparent)]
    Kube(#[from] kube::Error),
}

struct Ctx {
    client: kube::Client,
    last: Mutex<HashMap<ObjectRef<KaironQuota>, Instant>>,
}

/// The status `q` reports for the namespace's `machines` and `templates` at `now`: its
/// reservations not spent.
pub fn status_of(q: &KaironQuota, machines: &[Machine], templates: &[KaironTemplate], now: &Time) -> KaironQuotaStatus {
    let used = quota::total(machines);
    let uids: BTreeSet<String> = templates.iter().filter_map(|t| t.metadata.uid.clone()).collect();
    let reservations =
        q.status.iter().flat_map(|s| &s.reservations).filter(|r| !r.spent(machines, &uids, now)).cloned();
    let mut summary = quota::summary(&Limits::of(&q.spec.hard), used);
    if let Some(limit) = q.spec.hard.templates {
        let templates = format!("templates: {}/{limit}", templates.len());
        summary = if summary == "no limits" { templates } else { format!("{summary}, {templates}") };
    }
    KaironQuotaStatus {
        hard: q.spec.hard.clone(),
        used: QuotaAmounts { templates: Some(templates.len() as i64), ..used.amounts() },
        summary: Some(summary),
        observed_generation: q.metadata.generation,
        reservations: reservations.collect(),
    }
}

/// The merge patch that writes `status` over `q`, and only over `q` as it was read: the webhook
/// may have added a reservation since.
fn status_patch(q: &KaironQuota, status: &KaironQuotaStatus) -> serde_json::Value {
    let mut patch = json!({"metadata": {"resourceVersion": q.resource_version()}, "status": status});
    // A merge patch keeps what it does not name: an empty ledger is named, as null, to remove it.
    if status.reservations.is_empty() {
        patch["status"]["reservations"] = serde_json::Value::Null;
    }
    patch
}

async fn reconcile(q: Arc<KaironQuota>, ctx: Arc<Ctx>) -> Result<Action, QuotaError> {
    let key = ObjectRef::from_obj(&*q);
    let since = ctx.last.lock().expect("quota times").get(&key).map(Instant::elapsed);
    if let Some(since) = since.filter(|s| *s < MIN_INTERVAL) {
        return Ok(Action::requeue(MIN_INTERVAL - since));
    }
    ctx.last.lock().expect("quota times").insert(key, Instant::now());
    let ns = q.namespace().unwrap_or_default();
    let machines = Api::<Machine>::namespaced(ctx.client.clone(), &ns).list(&ListParams::default()).await?.items;
    let templates =
        Api::<KaironTemplate>::namespaced(ctx.client.clone(), &ns).list(&ListParams::default()).await?.items;
    let now = Time(Timestamp::now());
    let status = status_of(&q, &machines, &templates, &now);
    if q.status.as_ref() != Some(&status) {
        let api: Api<KaironQuota> = Api::namespaced(ctx.client.clone(), &ns);
        match api.patch_status(&q.name_any(), &PatchParams::default(), &Patch::Merge(&status_patch(&q, &status))).await
        {
            // Its change wakes this controller again, with the quota as it is now.
            Err(kube::Error::Api(s)) if s.code == 409 => return Ok(Action::await_change()),
            r => r.map(|_| ())?,
        }
    }
    // A reservation whose write never lands lapses: count again then.
    let lapses = status.reservations.iter().map(|r| r.expires.0).min();
    Ok(lapses.map_or_else(Action::await_change, |at| {
        Action::requeue(Duration::try_from(at - now.0).unwrap_or_default() + Duration::from_millis(100))
    }))
}

fn error_policy(q: Arc<KaironQuota>, e: &QuotaError, _: Arc<Ctx>) -> Action {
    tracing::warn!(quota = %q.name_any(), error = %e, "counting quota use failed; retrying");
    Action::requeue(Duration::from_secs(2))
}

pub async fn run(client: kube::Client, shutdown: tokio_util::sync::CancellationToken) {
    let quotas: Api<KaironQuota> = Api::all(client.clone());
    let machines: Api<Machine> = Api::all(client.clone());
    let templates: Api<KaironTemplate> = Api::all(client.clone());
    let controller = Controller::new(quotas, watcher::Config::default());
    let store = controller.store();
    let ctx = Arc::new(Ctx { client, last: Mutex::new(HashMap::new()) });
    // A Machine's or a template's change may change what its namespace holds: each quota there
    // counts again.
    let quotas_of = move |ns: Option<String>| {
        store.state().iter().filter(|q| q.namespace() == ns).map(|q| ObjectRef::from_obj(&**q)).collect::<Vec<_>>()
    };
    let of_template = {
        let quotas_of = quotas_of.clone();
        move |t: KaironTemplate| quotas_of(t.namespace())
    };
    controller
        .watches(machines, watcher::Config::default(), move |m: Machine| quotas_of(m.namespace()))
        .watches(templates, watcher::Config::default(), of_template)
        .graceful_shutdown_on(shutdown.cancelled_owned())
        .run(reconcile, error_policy, ctx)
        .for_each(|_| async {})
        .await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_last_reservation_pruned_empties_the_ledger() {
        let q: KaironQuota = serde_json::from_value(json!({
            "metadata": {"name": "q", "namespace": "team", "resourceVersion": "7"}, "spec": {"hard": {"machines": 3}},
            "status": {"reservations": [{"uid": "u", "name": "a", "amounts": {"machines": 1},
                                         "expires": "2020-01-01T00:00:00Z"}]},
        }))
        .unwrap();
        let status = status_of(&q, &[], &[], &Time(Timestamp::now()));
        assert!(status.reservations.is_empty(), "a lapsed reservation is pruned");
        let patch = status_patch(&q, &status);
        assert_eq!(patch["status"].get("reservations"), Some(&serde_json::Value::Null), "{patch}");
        assert_eq!(patch["metadata"]["resourceVersion"], "7");
    }

    #[test]
    fn a_quota_reports_use_against_its_limits() {
        let q: KaironQuota = serde_json::from_value(json!({
            "apiVersion": "kairon.zyvor.dev/v1", "kind": "KaironQuota",
            "metadata": {"name": "q", "namespace": "team", "generation": 2},
            "spec": {"hard": {"machines": 3, "memory": "1Gi"}},
        }))
        .unwrap();
        let m: Machine = serde_json::from_value(json!({
            "apiVersion": "kairon.zyvor.dev/v1", "kind": "Machine",
            "metadata": {"name": "a", "namespace": "team"}, "spec": {"sandbox": {"templateName": "busybox"}},
        }))
        .unwrap();
        let t: KaironTemplate = serde_json::from_value(json!({
            "apiVersion": "kairon.zyvor.dev/v1", "kind": "KaironTemplate",
            "metadata": {"name": "t", "namespace": "team", "uid": "t1"}, "spec": {"image": "builtin:busybox"},
        }))
        .unwrap();
        let s = status_of(&q, &[m.clone(), m.clone()], std::slice::from_ref(&t), &Time(Timestamp::now()));
        assert_eq!(s.summary.as_deref(), Some("machines: 2/3, memory: 1Gi/1Gi"));
        assert_eq!(s.used.templates, Some(1));
        assert_eq!((s.used.machines, s.used.cpu.map(|c| c.0)), (Some(2), Some("2".to_string())));
        assert_eq!((s.hard, s.observed_generation), (q.spec.hard.clone(), Some(2)));
        let mut limited = q.clone();
        limited.spec.hard.templates = Some(2);
        let s = status_of(&limited, &[m], &[t], &Time(Timestamp::now()));
        assert_eq!(s.summary.as_deref(), Some("machines: 1/3, memory: 512Mi/1Gi, templates: 1/2"));
    }
}
