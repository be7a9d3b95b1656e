//! Quota at the webhook, for Kairon on a real cluster, race-free as Kubernetes' own
//! ResourceQuota admission is. A write that makes a namespace's Machines hold more is judged
//! against (the Machines that exist) + (the reservations each KaironQuota keeps in
//! `status.reservations` for writes admitted but maybe not stored yet), and allowed only once
//! its reservation is added to every quota of the namespace with a compare-and-swap on the
//! quota's resourceVersion: of two racing writes one adds its reservation first and the other
//! is judged again, seeing it. Use is recounted from what exists, so deleting a Machine frees
//! its share whatever the path; the quota controller prunes the spent reservations
//! (`reconciler/src/quota.rs`). Who writes makes no difference: REST, kubectl, MCP and the pool
//! controller are held to the same limits. A namespace's KaironTemplates are counted against
//! `templates` the same way ([`charge_template`]).

use std::collections::{BTreeSet, HashMap};
use std::sync::{Arc, Mutex};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use kube::ResourceExt;
use kube::api::{Api, ListParams, Patch, PatchParams};
use serde_json::{Value, json};

use kairon_model::quota::{self, Charge, Limits, RESERVATION_LIFETIME, Reservation};
use kairon_model::{KaironQuota, KaironTemplate, Machine};

use super::Refusal;

/// How many times a write is judged again when another write's reservation landed first.
const ATTEMPTS: usize = 20;

/// One lock per namespace: this api's own webhook calls for a namespace take turns, so only
/// other replicas' race (and lose a compare-and-swap).
#[derive(Default)]
pub struct Turns(Mutex<HashMap<String, Arc<tokio::sync::Mutex<()>>>>);

impl Turns {
    fn of(&self, namespace: &str) -> Arc<tokio::sync::Mutex<()>> {
        let mut turns = self.0.lock().expect("quota turns");
        // Drop the locks nobody holds, so the map stays as small as the namespaces in flight.
        turns.retain(|_, t| Arc::strong_count(t) > 1);
        turns.entry(namespace.to_string()).or_default().clone()
    }
}

/// A write of Machine `new` (over `old` for an update) in `namespace`: allowed once charged to
/// every quota there, or refused naming the quota it would pass. A dry run is judged the same
/// and charges nothing.
pub(super) async fn charge(
    kube: &kube::Client,
    turns: &Turns,
    namespace: &str,
    old: Option<&Value>,
    new: &Value,
    dry_run: bool,
) -> Result<(), Refusal> {
    let Some(machine) = serde_json::from_value::<Machine>(new.clone()).ok() else { return Ok(()) };
    let after = quota::charge(&machine);
    let before = old.and_then(|o| serde_json::from_value::<Machine>(o.clone()).ok()).map(|m| quota::charge(&m));
    if !after.grows_from(&before.unwrap_or_default()) {
        return Ok(());
    }
    let Some(uid) = machine.metadata.uid.clone() else {
        return Err((400, "BadRequest", "the Machine under review has no metadata.uid".into()));
    };
    let replaces = old.and_then(|o| o.pointer("/metadata/resourceVersion")).and_then(Value::as_str);
    let turn = turns.of(namespace);
    let _turn = turn.lock().await;
    let quotas: Api<KaironQuota> = Api::namespaced(kube.clone(), namespace);
    let machines: Api<Machine> = Api::namespaced(kube.clone(), namespace);
    for _ in 0..ATTEMPTS {
        // The quotas first, then the Machines: a reservation a quota no longer shows was spent
        // on a Machine the list then holds.
        let mut found = quotas.list(&ListParams::default()).await.map_err(unavailable)?.items;
        if found.is_empty() {
            return Ok(());
        }
        found.sort_by_key(|q| q.name_any());
        let stored = machines.list(&ListParams::default()).await.map_err(unavailable)?.items;
        // Templates' reservations are judged by template creates (`charge_template`).
        let none = BTreeSet::new();
        let now = Time(Timestamp::now());
        let reservation = Reservation {
            uid: uid.clone(),
            name: machine.name_any(),
            replaces: replaces.map(str::to_string),
            amounts: after.amounts(),
            expires: Time(now.0 + RESERVATION_LIFETIME),
        };
        let mut ledgers = Vec::with_capacity(found.len());
        for q in &found {
            let kept: Vec<Reservation> = q
                .status
                .iter()
                .flat_map(|s| &s.reservations)
                .filter(|r| !r.spent(&stored, &none, &now))
                .cloned()
                .collect();
            let mut held = quota::held_by_uid(&stored, &kept, &now);
            let mine = held.remove(&uid).unwrap_or_default();
            let others: Charge = held.into_values().sum();
            if let Some(why) = quota::refusal(&q.name_any(), &Limits::of(&q.spec.hard), others + mine, others + after) {
                return Err((403, "Forbidden", why));
            }
            ledgers.push(kept);
        }
        if settled(&quotas, found, ledgers, &reservation, dry_run).await? {
            return Ok(());
        }
    }
    Err(changed_meanwhile(namespace))
}

/// The create of KaironTemplate `new` in `namespace`: allowed once reserved on every quota there
/// that limits `templates`, or refused naming the quota it would pass (the same ledger and
/// compare-and-swap as Machines', counting the templates stored plus those admitted and not
/// stored yet). A dry run is judged the same and reserves nothing.
pub(super) async fn charge_template(
    kube: &kube::Client,
    turns: &Turns,
    namespace: &str,
    new: &Value,
    dry_run: bool,
) -> Result<(), Refusal> {
    let Some(uid) = new.pointer("/metadata/uid").and_then(Value::as_str) else {
        return Err((400, "BadRequest", "the KaironTemplate under review has no metadata.uid".into()));
    };
    let name = new.pointer("/metadata/name").and_then(Value::as_str).unwrap_or_default();
    let turn = turns.of(namespace);
    let _turn = turn.lock().await;
    let quotas: Api<KaironQuota> = Api::namespaced(kube.clone(), namespace);
    let templates: Api<KaironTemplate> = Api::namespaced(kube.clone(), namespace);
    for _ in 0..ATTEMPTS {
        // The quotas first, then the templates (as for Machines).
        let listed = quotas.list(&ListParams::default()).await.map_err(unavailable)?.items;
        let mut found: Vec<KaironQuota> = listed.into_iter().filter(|q| q.spec.hard.templates.is_some()).collect();
        if found.is_empty() {
            return Ok(());
        }
        found.sort_by_key(|q| q.name_any());
        let stored: BTreeSet<String> = templates
            .list(&ListParams::default())
            .await
            .map_err(unavailable)?
            .items
            .iter()
            .filter_map(|t| t.metadata.uid.clone())
            .collect();
        let now = Time(Timestamp::now());
        let mut ledgers = Vec::with_capacity(found.len());
        for q in &found {
            // A template's reservation goes once its template is stored; Machines' stay for
            // their own judgement and the quota controller.
            let kept: Vec<Reservation> = q
                .status
                .iter()
                .flat_map(|s| &s.reservations)
                .filter(|r| !(r.is_template() && r.spent(&[], &stored, &now)))
                .cloned()
                .collect();
            let held = quota::templates_held(&stored, &kept, uid, &now);
            if let Some(why) = quota::template_refusal(&q.name_any(), &q.spec.hard, held) {
                return Err((403, "Forbidden", why));
            }
            ledgers.push(kept);
        }
        let reservation = Reservation::template(uid, name, &now);
        if settled(&quotas, found, ledgers, &reservation, dry_run).await? {
            return Ok(());
        }
    }
    Err(changed_meanwhile(namespace))
}

/// A write judged to fit: true once its reservation is on every quota `found` (each ledger
/// `ledgers` as kept, plus it) or for a dry run; false when a quota changed meanwhile and the
/// write must be judged again.
async fn settled(
    quotas: &Api<KaironQuota>,
    found: Vec<KaironQuota>,
    ledgers: Vec<Vec<Reservation>>,
    reservation: &Reservation,
    dry_run: bool,
) -> Result<bool, Refusal> {
    if dry_run {
        return Ok(true);
    }
    reserve(quotas, &found, ledgers, reservation).await.map_err(unavailable)
}

fn changed_meanwhile(namespace: &str) -> Refusal {
    (
        409,
        "Conflict",
        format!("the quotas of namespace {namespace} changed {ATTEMPTS} times while this write was judged: try again"),
    )
}

/// Adds `reservation` to each quota's ledger, each only if the quota is still the one read;
/// false (and none added) when one changed since.
async fn reserve(
    api: &Api<KaironQuota>,
    quotas: &[KaironQuota],
    ledgers: Vec<Vec<Reservation>>,
    reservation: &Reservation,
) -> Result<bool, kube::Error> {
    for (i, (q, mut ledger)) in quotas.iter().zip(ledgers).enumerate() {
        ledger.push(reservation.clone());
        let patch = json!({
            "metadata": {"resourceVersion": q.resource_version()},
            "status": {"reservations": ledger},
        });
        match api.patch_status(&q.name_any(), &PatchParams::default(), &Patch::Merge(&patch)).await {
            Ok(_) => {}
            Err(e) => {
                // All or none: take it back from the quotas already charged.
                for done in &quotas[..i] {
                    withdraw(api, &done.name_any(), reservation).await?;
                }
                return match e {
                    kube::Error::Api(s) if s.code == 409 => Ok(false),
                    e => Err(e),
                };
            }
        }
    }
    Ok(true)
}

/// Removes `reservation` from quota `name`'s ledger (compare-and-swap, again until it holds).
async fn withdraw(api: &Api<KaironQuota>, name: &str, reservation: &Reservation) -> Result<(), kube::Error> {
    loop {
        let q = api.get(name).await?;
        let ledger: Vec<&Reservation> =
            q.status.iter().flat_map(|s| &s.reservations).filter(|r| *r != reservation).collect();
        // An empty ledger is removed (null), as the quota controller leaves it.
        let ledger = if ledger.is_empty() { Value::Null } else { json!(ledger) };
        let patch = json!({
            "metadata": {"resourceVersion": q.resource_version()},
            "status": {"reservations": ledger},
        });
        match api.patch_status(name, &PatchParams::default(), &Patch::Merge(&patch)).await {
            Err(kube::Error::Api(s)) if s.code == 409 => continue,
            Err(kube::Error::Api(s)) if s.code == 404 => return Ok(()),
            r => return r.map(|_| ()),
        }
    }
}

fn unavailable(e: kube::Error) -> Refusal {
    (503, "ServiceUnavailable", format!("reading or charging the namespace's KaironQuotas failed: {e}"))
}
