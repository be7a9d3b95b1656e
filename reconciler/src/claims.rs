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
use kube::runtime::reflector::ObjectRef;
use kube::runtime::watcher;
use kube::{Resource, ResourceExt};
use serde_json::json;

use kairon_model::binding::{self, Binding, BindingStore};
use kairon_model::keys::{finalizers, labels, reasons};
use kairon_model::warm::MemberView;
use kairon_model::{ClaimPhase, ClaimUsage, LaunchType, Machine, MachineClaim, MachinePhase, MachinePool};

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
    let status = binding::bound_status(claim, machine, at);
    // Preconditioned on the claim as read: a reconcile from a cache that has not yet seen this
    // claim bound finds its member again (claimed_by) and must not record, and count, the
    // binding twice; the 409 retries with the claim as it is.
    let patch = json!({"metadata": {"resourceVersion": claim.resource_version()}, "status": &status});
    api.patch_status(&claim.name_any(), &PatchParams::default(), &Patch::Merge(patch)).await?;
    binding::Served::of(claim, at).record(&claim.spec.pool_name);
    // The next reconcile (this status write re-queues the claim) puts its launch type in its label.
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

/// Puts the claim's launch type (its status's) in its label, unless the label says so already
/// (a tenant may remove or change a label on its claim; the status stays the record).
async fn label_launch_type(
    api: &Api<MachineClaim>,
    claim: &MachineClaim,
    launch: LaunchType,
) -> Result<(), ClaimError> {
    let launch = launch.as_str();
    if claim.labels().get(labels::LAUNCH_TYPE).map(String::as_str) == Some(launch) {
        return Ok(());
    }
    let patch = json!({"metadata": {"labels": {labels::LAUNCH_TYPE: launch}}});
    api.patch(&claim.name_any(), &PatchParams::default(), &Patch::Merge(&patch)).await?;
    Ok(())
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

    async fn labelled_for_pool(&self, ns: &str, pool: &str) -> Result<Vec<Machine>, kube::Error> {
        let lp = ListParams::default().labels(&format!("{}={pool}", labels::POOL));
        Ok(Api::<Machine>::namespaced(self.0.clone(), ns).list(&lp).await?.items)
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
    if status.phase == Some(ClaimPhase::Bound)
        && let Some(launch) = status.launch_type
    {
        label_launch_type(&api, &claim, launch).await?;
    }
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
        Binding::QuotaExceeded(message) => {
            pending(&api, &claim, binding::QUOTA_EXCEEDED, message).await?;
            // As NoWarmMember: the member the pool makes once the quota allows it wakes it.
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
    .or_else(|e| {
        // A cleanup run again from a cache that had not yet seen the claim go: done already.
        if finalizers::gone(&e) { Ok(Action::await_change()) } else { Err(ClaimError::Finalizer(Box::new(e))) }
    })
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
    match e {
        ClaimError::Kube(kube::Error::Api(s)) => s.code == 409,
        ClaimError::Finalizer(f) => finalizers::raced(f.as_ref()),
        ClaimError::Kube(_) => false,
    }
}

/// The pending claims of `pool` in `ns` that a change of the pool or of one of its members
/// should wake, oldest first: every one still told that its pool is missing, and the `n` oldest
/// of the others (a warm member serves one claim). Waking every pending claim on every member
/// update had 200 claims re-read a 50-member pool on each status write and activity stamp, and
/// the store's connections ran out; a claim not woken still retries on its own (NoWarmMember
/// requeues it).
fn to_wake(claims: &[Arc<MachineClaim>], ns: &str, pool: &str, n: usize) -> Vec<ObjectRef<MachineClaim>> {
    let mut pending: Vec<&Arc<MachineClaim>> = claims
        .iter()
        .filter(|c| c.namespace().as_deref() == Some(ns) && c.spec.pool_name == pool)
        .filter(|c| c.status.as_ref().and_then(|s| s.phase) != Some(ClaimPhase::Bound))
        .collect();
    pending.sort_by_key(|c| (c.metadata.creation_timestamp.as_ref().map(|t| t.0.as_millisecond()), c.name_any()));
    let pool_missing = |c: &MachineClaim| {
        c.status
            .as_ref()
            .is_some_and(|s| s.conditions.iter().any(|x| x.type_ == BOUND_CONDITION && x.reason == POOL_NOT_FOUND))
    };
    let (missing, waiting): (Vec<_>, Vec<_>) = pending.into_iter().partition(|c| pool_missing(c));
    missing.into_iter().chain(waiting.into_iter().take(n)).map(|c| ObjectRef::from_obj(&**c)).collect()
}

/// Whether a change of this member may let a claim bind it: unclaimed, staying, past its
/// warm-up stamp and up (whether it is in the pool's warm phase the claim's bind decides).
fn may_serve_a_claim(m: &Machine) -> bool {
    let v = MemberView::of(m);
    !v.claimed
        && !v.deleting
        && v.warm_since_ms.is_some()
        && matches!(v.phase, Some(MachinePhase::Running | MachinePhase::Paused))
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
            let warm = p.status.as_ref().map_or(0, |s| s.warm.max(0) as usize);
            to_wake(&by_pool.state(), &p.namespace().unwrap_or_default(), &p.name_any(), warm)
        })
        .watches(machines, watcher::Config::default().labels(labels::POOL), move |m: Machine| {
            match m.labels().get(labels::POOL) {
                Some(pool) if may_serve_a_claim(&m) => {
                    to_wake(&by_member.state(), &m.namespace().unwrap_or_default(), pool, 1)
                }
                _ => Vec::new(),
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

    fn claim(name: &str, created: &str, pool: &str, phase: Option<&str>, reason: Option<&str>) -> Arc<MachineClaim> {
        let mut status = serde_json::json!({});
        if let Some(p) = phase {
            status["phase"] = serde_json::json!(p);
        }
        if let Some(r) = reason {
            status["conditions"] = serde_json::json!([{"type": BOUND_CONDITION, "status": "False", "reason": r,
                                                       "message": "", "lastTransitionTime": created}]);
        }
        Arc::new(
            serde_json::from_value(serde_json::json!({
                "apiVersion": "kairon.zyvor.dev/v1", "kind": "MachineClaim",
                "metadata": {"name": name, "namespace": "ns", "creationTimestamp": created},
                "spec": {"poolName": pool}, "status": status,
            }))
            .unwrap(),
        )
    }

    #[test]
    fn a_pool_change_wakes_as_many_pending_claims_as_it_has_warm_members_oldest_first() {
        let claims = [
            claim("c3", "2026-01-01T00:00:03Z", "p", Some("Pending"), Some(NO_WARM_MEMBER)),
            claim("c1", "2026-01-01T00:00:01Z", "p", Some("Pending"), Some(NO_WARM_MEMBER)),
            claim("bound", "2026-01-01T00:00:00Z", "p", Some("Bound"), None),
            claim("other-pool", "2026-01-01T00:00:00Z", "q", Some("Pending"), Some(NO_WARM_MEMBER)),
            claim("c2", "2026-01-01T00:00:02Z", "p", None, None),
            claim("lost", "2026-01-01T00:00:09Z", "p", Some("Pending"), Some(POOL_NOT_FOUND)),
        ];
        let names = |n| to_wake(&claims, "ns", "p", n).into_iter().map(|r| r.name).collect::<Vec<_>>();
        assert_eq!(names(0), ["lost"], "a claim told its pool is missing always hears of the pool");
        assert_eq!(names(1), ["lost", "c1"]);
        assert_eq!(names(2), ["lost", "c1", "c2"]);
        assert_eq!(names(10), ["lost", "c1", "c2", "c3"], "never a Bound claim, nor another pool's");
        assert!(to_wake(&claims, "other", "p", 10).is_empty());
    }

    #[test]
    fn only_a_member_that_may_be_bound_wakes_a_claim() {
        let member = |labels: serde_json::Value, warm: bool, phase: &str| -> Machine {
            let mut m = serde_json::json!({
                "apiVersion": "kairon.zyvor.dev/v1", "kind": "Machine",
                "metadata": {"name": "m", "namespace": "ns", "labels": labels},
                "spec": {"sandbox": {"templateName": "busybox"}}, "status": {"phase": phase},
            });
            if warm {
                m["metadata"]["annotations"] = serde_json::json!({pools::WARM_SINCE: "2026-01-01T00:00:00Z"});
            }
            serde_json::from_value(m).unwrap()
        };
        let pool = serde_json::json!({labels::POOL: "p"});
        assert!(may_serve_a_claim(&member(pool.clone(), true, "Paused")));
        assert!(may_serve_a_claim(&member(pool.clone(), true, "Running")));
        assert!(!may_serve_a_claim(&member(pool.clone(), false, "Running")), "not yet stamped warm");
        assert!(!may_serve_a_claim(&member(pool.clone(), true, "Provisioning")));
        let claimed = serde_json::json!({labels::POOL: "p", labels::CLAIM: "c1"});
        assert!(!may_serve_a_claim(&member(claimed, true, "Running")), "a claimed member serves no other claim");
    }

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
