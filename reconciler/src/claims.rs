//! The MachineClaim controller: binds each claim to exactly one warm member of its pool
//! (optimistic concurrency on the member's resourceVersion), ends claims at their TTL, and on
//! deletion (its finalizer) takes the final accrual, writes phase Released with the final usage,
//! releases the Machine and records a Released Event carrying that usage.

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use kube::runtime::finalizer::{Event as Finalizer, finalizer};
use kube::runtime::reflector::{ObjectRef, Store};
use kube::runtime::watcher;
use kube::{Resource, ResourceExt};
use serde_json::json;

use kairon_model::binding::{self, Binding, BindingStore};
use kairon_model::keys::{finalizers, labels, reasons};
use kairon_model::{ClaimPhase, ClaimUsage, Machine, MachineClaim, MachinePool};

use crate::pools;

pub use kairon_model::binding::{
    BOUND_CONDITION, NO_WARM_MEMBER, POOL_NOT_FOUND, no_warm_member_message, pool_not_found_message, try_order,
};

/// What to do with a claim now.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Step {
    /// Find it a warm member.
    Bind,
    /// The API is binding it in its create request; bind it only if still unbound in this
    /// many milliseconds.
    LeaveToApi(i64),
    /// Bound; its TTL ends in this many milliseconds.
    WaitTtl(i64),
    /// Bound with no TTL: nothing until something changes.
    Idle,
    /// Bound and past its TTL: delete the claim (its finalizer releases the Machine).
    Expire,
}

/// Decides from the claim's phase, bound time, TTL, the API's binding in hand
/// ([`binding::binding_until`]) and the clock (Unix ms).
pub fn step(
    phase: Option<ClaimPhase>,
    machine: Option<&str>,
    bound_ms: Option<i64>,
    ttl: Option<i64>,
    api_binding_until: Option<i64>,
    now: i64,
) -> Step {
    if phase != Some(ClaimPhase::Bound) || machine.is_none() {
        return match api_binding_until {
            Some(until) if until > now => Step::LeaveToApi(until - now),
            _ => Step::Bind,
        };
    }
    match (ttl, bound_ms) {
        (Some(ttl), Some(bound)) => {
            let end = bound + ttl.max(0) * 1000;
            if end <= now { Step::Expire } else { Step::WaitTtl(end - now) }
        }
        _ => Step::Idle,
    }
}

/// The Released Event's note: the Machine and the usage found in status.usage.
pub fn released_note(machine: Option<&str>, usage: Option<&ClaimUsage>) -> String {
    let what = match machine {
        Some(m) => format!("released Machine {m}"),
        None => "released before binding a Machine".to_string(),
    };
    match usage {
        Some(u) => format!(
            "{what}; usage: activeSeconds={} suspendedSeconds={} vcpuSeconds={:.3} memoryGiBSeconds={:.3}",
            u.active_seconds, u.suspended_seconds, u.vcpu_seconds, u.memory_gib_seconds
        ),
        None => format!("{what}; usage: none recorded"),
    }
}

struct Ctx {
    client: kube::Client,
    recorder: Recorder,
    store: Option<kairon_db::Store>,
}

#[derive(Debug, thiserror::Error)]
pub enum ClaimError {
    #[error("kubernetes API: {0}")]
    Kube(#[from] kube::Error),
    #[error("finalizer: {0}")]
    Finalizer(#[source] Box<kube::runtime::finalizer::Error<ClaimError>>),
}

fn bound_ms(c: &MachineClaim) -> Option<i64> {
    c.status.as_ref()?.bound_time.as_ref().map(|t| t.0.as_millisecond())
}

async fn publish(ctx: &Ctx, claim: &MachineClaim, type_: EventType, reason: &str, action: &str, note: String) {
    let ev = Event { type_, reason: reason.into(), note: Some(note), action: action.into(), secondary: None };
    if let Err(e) = ctx.recorder.publish(&ev, &claim.object_ref(&())).await {
        tracing::warn!(claim = %claim.name_any(), error = %e, "could not record event");
    }
}

/// Sets the Bound condition to False with `reason` unless it already says so.
async fn pending(
    api: &Api<MachineClaim>,
    claim: &MachineClaim,
    reason: &str,
    message: String,
) -> Result<(), ClaimError> {
    let now = pools::rfc3339(pools::now_ms());
    if let Some(status) = binding::pending_status(claim, reason, message, &now) {
        api.patch_status(&claim.name_any(), &PatchParams::default(), &Patch::Merge(&json!({"status": status}))).await?;
    }
    Ok(())
}

/// Records the binding in the claim's status and a Bound Event.
async fn bound(
    api: &Api<MachineClaim>,
    ctx: &Ctx,
    claim: &MachineClaim,
    machine: &str,
    at: &str,
) -> Result<Action, ClaimError> {
    let patch = json!({"status": binding::bound_status(claim, machine, at)});
    api.patch_status(&claim.name_any(), &PatchParams::default(), &Patch::Merge(&patch)).await?;
    // The Event is for people reading history: the claimant is not kept waiting for it.
    let (recorder, reference) = (ctx.recorder.clone(), claim.object_ref(&()));
    let message = binding::bound_message(claim, machine);
    tokio::spawn(async move {
        let ev = Event {
            type_: EventType::Normal,
            reason: reasons::BOUND.into(),
            note: Some(message),
            action: "Bind".into(),
            secondary: None,
        };
        if let Err(e) = recorder.publish(&ev, &reference).await {
            tracing::warn!(error = %e, "could not record the Bound event");
        }
    });
    let now = pools::now_ms();
    let bound = pools::parse_ms(at).unwrap_or(now);
    Ok(match step(Some(ClaimPhase::Bound), Some(machine), Some(bound), claim.spec.ttl_seconds, None, now) {
        Step::WaitTtl(ms) => Action::requeue(Duration::from_millis(ms as u64 + 20)),
        Step::Expire => Action::requeue(Duration::from_millis(10)),
        _ => Action::await_change(),
    })
}

/// Binding through the Kubernetes API, as this controller sees it.
struct KubeBinding<'a>(&'a kube::Client);

impl BindingStore for KubeBinding<'_> {
    type Error = kube::Error;

    async fn claimed_by(&self, ns: &str, claim: &str) -> Result<Vec<Machine>, kube::Error> {
        let lp = ListParams::default().labels(&format!("{}={claim}", labels::CLAIM));
        Ok(Api::<Machine>::namespaced(self.0.clone(), ns).list(&lp).await?.items)
    }

    async fn pool(&self, ns: &str, name: &str) -> Result<Option<MachinePool>, kube::Error> {
        Api::<MachinePool>::namespaced(self.0.clone(), ns).get_opt(name).await
    }

    async fn members(&self, pool: &MachinePool) -> Result<Vec<Machine>, kube::Error> {
        pools::members(self.0, pool).await
    }

    /// The claim's status is written after, by the caller.
    async fn take(
        &self,
        ns: &str,
        name: &str,
        patch: &serde_json::Value,
        _bound: &serde_json::Value,
    ) -> Result<bool, kube::Error> {
        let machines: Api<Machine> = Api::namespaced(self.0.clone(), ns);
        match machines.patch(name, &PatchParams::default(), &Patch::Merge(patch)).await {
            Ok(_) => Ok(true),
            Err(kube::Error::Api(e)) if e.code == 409 || e.code == 404 => Ok(false),
            Err(e) => Err(e),
        }
    }
}

async fn apply(claim: Arc<MachineClaim>, ctx: &Ctx) -> Result<Action, ClaimError> {
    let ns = claim.namespace().unwrap_or_default();
    let name = claim.name_any();
    let api: Api<MachineClaim> = Api::namespaced(ctx.client.clone(), &ns);
    let status = claim.status.clone().unwrap_or_default();
    let now = pools::now_ms();
    let api_binding = binding::binding_until(&claim);
    match step(status.phase, status.machine_name.as_deref(), bound_ms(&claim), claim.spec.ttl_seconds, api_binding, now)
    {
        Step::Expire => {
            tracing::info!(claim = %name, "claim TTL ended; releasing");
            match api.delete(&name, &DeleteParams::default()).await {
                Ok(_) => {}
                Err(kube::Error::Api(e)) if e.code == 404 => {}
                Err(e) => return Err(e.into()),
            }
            return Ok(Action::await_change());
        }
        Step::WaitTtl(ms) => return Ok(Action::requeue(Duration::from_millis(ms as u64 + 20))),
        Step::Idle => return Ok(Action::await_change()),
        Step::LeaveToApi(ms) => return Ok(Action::requeue(Duration::from_millis(ms as u64 + 20))),
        Step::Bind => {}
    }
    match binding::bind(&KubeBinding(&ctx.client), &claim, now).await? {
        Binding::Bound { machine, at } => {
            tracing::info!(claim = %name, machine = %machine, "claim bound");
            bound(&api, ctx, &claim, &machine, &at).await
        }
        Binding::PoolNotFound => {
            pending(&api, &claim, POOL_NOT_FOUND, pool_not_found_message(&claim.spec.pool_name, &ns)).await?;
            // The pool watch re-queues it when the pool appears.
            Ok(Action::await_change())
        }
        Binding::NoWarmMember => {
            pending(&api, &claim, NO_WARM_MEMBER, no_warm_member_message(&claim.spec.pool_name)).await?;
            // A member of the pool turning warm (or the pool's status changing) re-queues it.
            Ok(Action::requeue(Duration::from_secs(30)))
        }
    }
}

/// Releases a deleted claim, in this order: the final accrual (up to this instant), then
/// `status.phase: Released` with the final usage, then its Machine is deleted and a Released
/// Event records the usage; the finalizer goes when this returns.
async fn cleanup(claim: Arc<MachineClaim>, ctx: &Ctx) -> Result<Action, ClaimError> {
    let ns = claim.namespace().unwrap_or_default();
    let name = claim.name_any();
    let api: Api<MachineClaim> = Api::namespaced(ctx.client.clone(), &ns);
    // Accrue up to this instant first. Another writer may record the same interval at the same
    // moment (Raced): then read again and accrue what is left.
    let mut claim = claim;
    for _ in 0..5 {
        match crate::usage::accrue_claim(&ctx.client, ctx.store.as_ref(), &claim, Duration::ZERO, Duration::ZERO).await
        {
            Ok(done) => {
                if let Some(c) = api.get_opt(&name).await? {
                    claim = Arc::new(c);
                }
                if done != crate::usage::Accrued::Raced {
                    break;
                }
            }
            Err(e) => {
                tracing::warn!(claim = %name, error = %e, "final usage accrual failed; releasing with the usage recorded so far");
                break;
            }
        }
    }
    let usage = match crate::usage::recorded_usage(ctx.store.as_ref(), &claim).await {
        Ok(u) => u,
        Err(e) => {
            tracing::warn!(claim = %name, error = %e, "reading the usage history failed; releasing with status.usage");
            claim.status.as_ref().and_then(|s| s.usage.clone())
        }
    };
    let status = claim.status.clone().unwrap_or_default();
    if status.phase != Some(ClaimPhase::Released) || status.usage != usage {
        let patch = json!({"status": {"phase": ClaimPhase::Released, "usage": usage}});
        api.patch_status(&name, &PatchParams::default(), &Patch::Merge(&patch)).await?;
    }
    let machines: Api<Machine> = Api::namespaced(ctx.client.clone(), &ns);
    let lp = ListParams::default().labels(&format!("{}={name}", labels::CLAIM));
    let mut names: Vec<String> = machines.list(&lp).await?.items.iter().map(|m| m.name_any()).collect();
    if let Some(m) = &status.machine_name
        && !names.contains(m)
    {
        names.push(m.clone());
    }
    for m in &names {
        match machines.delete(m, &DeleteParams::default()).await {
            Ok(_) => {}
            Err(kube::Error::Api(e)) if e.code == 404 => {}
            Err(e) => return Err(e.into()),
        }
    }
    let note = released_note(status.machine_name.as_deref(), usage.as_ref());
    publish(ctx, &claim, EventType::Normal, reasons::RELEASED, "Release", note).await;
    Ok(Action::await_change())
}

async fn reconcile(claim: Arc<MachineClaim>, ctx: Arc<Ctx>) -> Result<Action, ClaimError> {
    let api: Api<MachineClaim> = Api::namespaced(ctx.client.clone(), &claim.namespace().unwrap_or_default());
    finalizer(&api, finalizers::CLAIM, claim, |ev| async {
        match ev {
            Finalizer::Apply(c) => apply(c, &ctx).await,
            Finalizer::Cleanup(c) => cleanup(c, &ctx).await,
        }
    })
    .await
    .map_err(|e| ClaimError::Finalizer(Box::new(e)))
}

fn error_policy(claim: Arc<MachineClaim>, e: &ClaimError, _: Arc<Ctx>) -> Action {
    if raced(e) {
        tracing::debug!(claim = %claim.name_any(), error = %e, "claim reconcile raced a newer write; retrying");
    } else {
        tracing::warn!(claim = %claim.name_any(), error = %e, "claim reconcile failed; retrying");
    }
    Action::requeue(Duration::from_secs(1))
}

/// A write refused because this controller's cache is behind the object (a 409 conflict, or
/// the finalizer helper's JSON patch `test` failing with 422 when a finalizer it just added
/// has not reached the cache yet). Expected when claims race; the retry reads the new object.
fn raced(e: &ClaimError) -> bool {
    use kube::runtime::finalizer::Error as F;
    match e {
        ClaimError::Kube(kube::Error::Api(s)) => s.code == 409,
        ClaimError::Finalizer(f) => match f.as_ref() {
            F::AddFinalizer(kube::Error::Api(s)) | F::RemoveFinalizer(kube::Error::Api(s)) => {
                s.code == 409 || s.code == 422
            }
            _ => false,
        },
        ClaimError::Kube(_) => false,
    }
}

/// Pending claims of `pool` in `ns`.
fn pending_of(store: &Store<MachineClaim>, ns: &str, pool: &str) -> Vec<ObjectRef<MachineClaim>> {
    store
        .state()
        .into_iter()
        .filter(|c| c.namespace().as_deref() == Some(ns) && c.spec.pool_name == pool)
        .filter(|c| c.status.as_ref().and_then(|s| s.phase) != Some(ClaimPhase::Bound))
        .map(|c| ObjectRef::from_obj(&*c))
        .collect()
}

pub async fn run(client: kube::Client, cfg: crate::ControllerConfig, shutdown: tokio_util::sync::CancellationToken) {
    let claims: Api<MachineClaim> = Api::all(client.clone());
    let pools_api: Api<MachinePool> = Api::all(client.clone());
    let machines: Api<Machine> = Api::all(client.clone());
    let controller = Controller::new(claims, watcher::Config::default());
    let by_member = controller.store();
    let by_pool = by_member.clone();
    let reporter = Reporter { controller: "kairon-claims".into(), instance: None };
    let ctx =
        Arc::new(Ctx { client: client.clone(), recorder: Recorder::new(client, reporter), store: cfg.store.clone() });
    controller
        .watches(pools_api, watcher::Config::default(), move |p: MachinePool| {
            pending_of(&by_pool, &p.namespace().unwrap_or_default(), &p.name_any())
        })
        .watches(machines, watcher::Config::default().labels(labels::POOL), move |m: Machine| {
            match m.labels().get(labels::POOL) {
                Some(pool) => pending_of(&by_member, &m.namespace().unwrap_or_default(), pool),
                None => Vec::new(),
            }
        })
        .graceful_shutdown_on(shutdown.cancelled_owned())
        .run(reconcile, error_policy, ctx)
        .for_each(|_| async {})
        .await;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pending_claims_bind_and_bound_ones_wait_for_their_ttl() {
        assert_eq!(step(None, None, None, Some(2), None, 0), Step::Bind);
        assert_eq!(step(Some(ClaimPhase::Pending), None, None, None, None, 0), Step::Bind);
        assert_eq!(step(Some(ClaimPhase::Bound), None, Some(0), None, None, 0), Step::Bind, "bound without a machine");
        assert_eq!(step(Some(ClaimPhase::Bound), Some("m"), Some(1000), None, None, 99_999), Step::Idle);
        assert_eq!(step(Some(ClaimPhase::Bound), Some("m"), Some(1000), Some(2), None, 1500), Step::WaitTtl(1500));
        assert_eq!(step(Some(ClaimPhase::Bound), Some("m"), Some(1000), Some(2), None, 3000), Step::Expire);
        assert_eq!(step(Some(ClaimPhase::Bound), Some("m"), Some(1000), Some(0), None, 1000), Step::Expire);
        // The API's create request is binding it: leave it that long, then bind it here.
        assert_eq!(step(Some(ClaimPhase::Pending), None, None, None, Some(5000), 1000), Step::LeaveToApi(4000));
        assert_eq!(step(Some(ClaimPhase::Pending), None, None, None, Some(5000), 5000), Step::Bind);
        assert_eq!(step(Some(ClaimPhase::Bound), Some("m"), Some(1000), None, Some(5000), 1000), Step::Idle);
    }

    #[test]
    fn notes_and_messages() {
        assert_eq!(
            no_warm_member_message("agents"),
            "pool agents has no warm member right now; the claim binds when one is ready"
        );
        let u = ClaimUsage { active_seconds: 3, suspended_seconds: 4, vcpu_seconds: 3.0, ..Default::default() };
        let note = released_note(Some("agents-x2b4c"), Some(&u));
        assert!(
            note.contains("agents-x2b4c") && note.contains("activeSeconds=3") && note.contains("suspendedSeconds=4")
        );
        assert!(released_note(None, None).contains("none recorded"));
    }
}
