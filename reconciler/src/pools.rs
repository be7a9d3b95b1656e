//! The MachinePool controller: keeps `replicas` unclaimed members, warms them up, pauses them
//! (Paused pools) or resumes them (Running pools), trims the surplus (non-warm first), and
//! reports replicas, ready, warm and claimed. A deleted pool's finalizer deletes its members
//! (claimed ones too, as garbage collection of their owner would) before the pool goes.

use std::collections::BTreeMap;
use std::hash::{BuildHasher, Hasher};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, DeleteParams, ListParams, Patch, PatchParams, PostParams, Preconditions};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use kube::runtime::finalizer::{Event as Finalizer, finalizer};
use kube::runtime::reflector::ObjectRef;
use kube::runtime::watcher;
use kube::{Resource, ResourceExt};
use serde_json::json;

use kairon_model::autoscale::{self, Observed};
use kairon_model::keys::{labels, reasons};
use kairon_model::meta::Condition;
use kairon_model::placement;
use kairon_model::pool::DEFAULT_WINDOW_SECONDS;
use kairon_model::quota;
use kairon_model::{
    KaironNode, KaironQuota, Machine, MachineClaim, MachinePhase, MachinePool, PowerState, WarmPowerState,
};

use crate::arrivals::{Arrivals, Window};

/// The pool controller deletes a deleted pool's members before the pool goes.
pub const POOL_FINALIZER: &str = "kairon.zyvor.dev/pool";

pub use kairon_model::warm::{
    CREATED_AT, MemberView, WARM_SINCE, is_warm, parse_ms, rfc3339, template_paused, warm_phase,
};

pub fn now_ms() -> i64 {
    k8s_openapi::jiff::Timestamp::now().as_millisecond()
}

/// What the pool controller should do now.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Plan {
    /// How many new members to create.
    pub create: usize,
    /// Members to delete (surplus).
    pub delete: Vec<String>,
    /// Members seen Running for the first time: stamp warm-since = now.
    pub stamp: Vec<String>,
    /// Members whose spec.powerState should change.
    pub power: Vec<(String, PowerState)>,
    pub counts: Counts,
    /// When the next member's warm-up ends (ms from now).
    pub requeue_after_ms: Option<i64>,
}

#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Counts {
    pub replicas: i32,
    pub ready: i32,
    pub warm: i32,
    pub claimed: i32,
}

/// Decides creations, trimming, warm-up stamps, power changes, counts and the next wake-up.
/// `template_paused`: the template itself asks for powerState Paused (a Running pool then leaves
/// Paused members alone).
pub fn plan(
    replicas: i32,
    warm: WarmPowerState,
    warmup_seconds: i64,
    template_paused: bool,
    members: &[MemberView],
    now_ms: i64,
) -> Plan {
    let mut p = Plan::default();
    let warm_in = warm_phase(warm, template_paused);
    // Members first seen up (Running, or in the warm phase) start their warm-up now.
    let members: Vec<MemberView> = members
        .iter()
        .map(|m| {
            let mut m = m.clone();
            let up = m.phase == Some(MachinePhase::Running) || m.phase == Some(warm_in);
            if !m.claimed && !m.deleting && m.warm_since_ms.is_none() && up {
                p.stamp.push(m.name.clone());
                m.warm_since_ms = Some(now_ms);
            }
            m
        })
        .collect();
    let mut unclaimed: Vec<&MemberView> = members.iter().filter(|m| !m.claimed && !m.deleting).collect();
    p.counts.claimed = members.iter().filter(|m| m.claimed && !m.deleting).count() as i32;
    let want = replicas.max(0) as usize;
    if unclaimed.len() < want {
        p.create = want - unclaimed.len();
    } else if unclaimed.len() > want {
        // Non-warm first, then the newest.
        let mut order = unclaimed.clone();
        order.sort_by_key(|m| {
            (is_warm(m, warm_in, warmup_seconds, now_ms), std::cmp::Reverse(m.created_ms), m.name.clone())
        });
        let surplus: Vec<String> = order.iter().take(unclaimed.len() - want).map(|m| m.name.clone()).collect();
        unclaimed.retain(|m| !surplus.contains(&m.name));
        p.delete = surplus;
    }
    for m in &unclaimed {
        let past = m.warm_at_ms(warmup_seconds).is_some_and(|t| t <= now_ms);
        if let Some(t) = m.warm_at_ms(warmup_seconds).filter(|t| *t > now_ms) {
            let after = t - now_ms;
            p.requeue_after_ms = Some(p.requeue_after_ms.map_or(after, |a| a.min(after)));
        }
        match warm {
            WarmPowerState::Paused => {
                if past && m.power_state != PowerState::Paused && m.phase == Some(MachinePhase::Running) {
                    p.power.push((m.name.clone(), PowerState::Paused));
                }
            }
            WarmPowerState::Running => {
                if !template_paused && m.power_state == PowerState::Paused {
                    p.power.push((m.name.clone(), PowerState::Running));
                }
            }
        }
        if matches!(m.phase, Some(MachinePhase::Running | MachinePhase::Paused)) {
            p.counts.ready += 1;
        }
        if is_warm(m, warm_in, warmup_seconds, now_ms) {
            p.counts.warm += 1;
        }
    }
    p.counts.replicas = unclaimed.len() as i32;
    p
}

/// `<pool>-<5 random chars>`, Kubernetes-style (no vowels, no look-alikes).
pub fn member_name(pool: &str) -> String {
    const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u64(COUNTER.fetch_add(1, Ordering::Relaxed));
    h.write_i64(k8s_openapi::jiff::Timestamp::now().as_nanosecond() as i64);
    let mut x = h.finish();
    let mut s = String::with_capacity(pool.len() + 6);
    s.push_str(pool);
    s.push('-');
    for _ in 0..5 {
        s.push(ALPHABET[(x % ALPHABET.len() as u64) as usize] as char);
        x /= ALPHABET.len() as u64;
    }
    s
}

/// A new member of `pool`, from its template, made at `now_ms`.
pub fn member(pool: &MachinePool, now_ms: i64) -> Machine {
    let name = pool.name_any();
    let tmeta = pool.spec.template.metadata.clone().unwrap_or_default();
    let mut labels: BTreeMap<String, String> = tmeta.labels;
    labels.insert(labels::POOL.to_string(), name.clone());
    let mut spec = pool.spec.template.spec.clone();
    if pool.spec.warm_power_state == WarmPowerState::Paused {
        // Every member boots Running and is paused after its warm-up.
        spec.power_state = Some(PowerState::Running);
    }
    let mut m = Machine::new(&member_name(&name), spec);
    m.metadata.namespace = pool.namespace();
    m.metadata.labels = Some(labels);
    let mut annotations = tmeta.annotations;
    annotations.insert(CREATED_AT.to_string(), rfc3339(now_ms));
    m.metadata.annotations = Some(annotations);
    m.metadata.owner_references = pool.controller_owner_ref(&()).map(|o| vec![o]);
    m
}

/// The members of a pool: Machines in its namespace labelled with it and owned by it.
pub async fn members(client: &kube::Client, pool: &MachinePool) -> Result<Vec<Machine>, kube::Error> {
    let api: Api<Machine> = Api::namespaced(client.clone(), &pool.namespace().unwrap_or_default());
    let lp = ListParams::default().labels(&format!("{}={}", labels::POOL, pool.name_any()));
    Ok(api.list(&lp).await?.items.into_iter().filter(|m| kairon_model::warm::is_member_of(m, pool)).collect())
}

struct Ctx {
    client: kube::Client,
    reporter: Reporter,
    arrivals: Arrivals,
}

/// A pool's condition saying whether its claims are served warm often enough.
pub const HIT_RATE_CONDITION: &str = "WarmHitRate";
/// When a pool whose members its namespace's quota refused tries again without being told of a
/// change (a quota or a member changing tells it at once; a Machine of the namespace that is no
/// member going does not).
const QUOTA_RETRY: Duration = Duration::from_secs(30);
/// The share of warm claims a pool without autoscale is held to.
const DEFAULT_HIT_RATE_TARGET: f64 = kairon_model::pool::DEFAULT_TARGET_HIT_RATE;

/// The hit-rate condition for the claims bound over the last `window_seconds` (None before
/// any): True at or above `target`, False (BelowTarget) under it. Its transition time is kept
/// while its status stays.
pub fn hit_rate_condition(
    w: &Window,
    target: f64,
    window_seconds: i64,
    old: Option<&Condition>,
    now: &str,
) -> Option<Condition> {
    let rate = w.hit_rate()?;
    let met = rate >= target;
    let status = if met { "True" } else { "False" };
    let message = format!(
        "{} of the {} claims bound over the last {window_seconds} s were served warm ({:.0}%; target {:.0}%){}",
        w.warm,
        w.warm + w.cold,
        rate * 100.0,
        target * 100.0,
        if met { "" } else { ": raise replicas, or set spec.autoscale" },
    );
    let reason = if met { "AtTarget" } else { "BelowTarget" };
    let now = now.parse().ok().map_or_else(|| Time(Timestamp::now()), Time);
    Some(Condition::keeping_transition(HIT_RATE_CONDITION, status, reason, message, old, now))
}

#[derive(Debug, thiserror::Error)]
pub enum PoolError {
    #[error("kubernetes API: {0}")]
    Kube(#[from] kube::Error),
    #[error("finalizer: {0}")]
    Finalizer(#[source] Box<kube::runtime::finalizer::Error<PoolError>>),
}

async fn reconcile(pool: Arc<MachinePool>, ctx: Arc<Ctx>) -> Result<Action, PoolError> {
    let api: Api<MachinePool> = Api::namespaced(ctx.client.clone(), &pool.namespace().unwrap_or_default());
    finalizer(&api, POOL_FINALIZER, pool, |ev| async {
        match ev {
            Finalizer::Apply(p) => apply(p, &ctx).await,
            Finalizer::Cleanup(p) => cleanup(p, &ctx).await,
        }
    })
    .await
    .map_err(|e| PoolError::Finalizer(Box::new(e)))
}

/// Which members a deleted pool still has to delete: those not already being deleted.
pub fn to_delete(members: &[MemberView]) -> Vec<String> {
    members.iter().filter(|m| !m.deleting).map(|m| m.name.clone()).collect()
}

/// A deleted pool: delete every member (not leaving it to garbage collection), and let the
/// finalizer go once each of them is being deleted.
async fn cleanup(pool: Arc<MachinePool>, ctx: &Ctx) -> Result<Action, PoolError> {
    let api: Api<Machine> = Api::namespaced(ctx.client.clone(), &pool.namespace().unwrap_or_default());
    let machines = members(&ctx.client, &pool).await?;
    let views: Vec<MemberView> = machines.iter().map(MemberView::of).collect();
    ctx.arrivals.forget(&pool.namespace().unwrap_or_default(), &pool.name_any());
    for name in to_delete(&views) {
        match api.delete(&name, &DeleteParams::default()).await {
            Ok(_) => tracing::info!(pool = %pool.name_any(), member = %name, "pool deleted; deleting its member"),
            Err(kube::Error::Api(e)) if e.code == 404 => {}
            Err(e) => return Err(e.into()),
        }
    }
    Ok(Action::await_change())
}

async fn apply(pool: Arc<MachinePool>, ctx: &Ctx) -> Result<Action, PoolError> {
    let ns = pool.namespace().unwrap_or_default();
    let api: Api<Machine> = Api::namespaced(ctx.client.clone(), &ns);
    let pools: Api<MachinePool> = Api::namespaced(ctx.client.clone(), &ns);
    let machines = members(&ctx.client, &pool).await?;
    let views: Vec<MemberView> = machines.iter().map(MemberView::of).collect();
    let now = now_ms();
    let window_seconds = pool.spec.autoscale.map_or(DEFAULT_WINDOW_SECONDS, |a| a.window_seconds);
    let window = ctx.arrivals.window(&ns, &pool.name_any(), now - window_seconds * 1000);
    let mut autoscale_due = None;
    if let Some(a) = &pool.spec.autoscale {
        let b = a.bounds();
        let refill_seconds = autoscale::refill_seconds(&views, pool.spec.warmup_seconds);
        let o = Observed {
            arrivals: &window.arrivals,
            warm: window.warm,
            cold: window.cold,
            refill_seconds,
            current: pool.spec.replicas,
            now_ms: now,
            last_needed_ms: window.last_needed_ms,
        };
        let mut d = autoscale::decide(&b, &o);
        ctx.arrivals.set_last_needed(&ns, &pool.name_any(), d.last_needed_ms);
        let mut capped = None;
        if d.replicas > pool.spec.replicas {
            // Never beyond what the nodes have room for: the unclaimed members placed there now
            // and what still fits beside everything placed (members not yet placed take from
            // that room).
            let fits = fits_on_nodes(&ctx.client, &pool).await?;
            let cap = i32::try_from(fits).unwrap_or(i32::MAX).max(pool.spec.replicas);
            if d.replicas > cap {
                capped = Some(d.replicas);
                d.replicas = cap;
            }
        }
        if d.replicas != pool.spec.replicas {
            // Preconditioned: a change of the pool meanwhile (its bounds) is decided on again.
            let patch =
                json!({"metadata": {"resourceVersion": pool.resource_version()}, "spec": {"replicas": d.replicas}});
            pools.patch(&pool.name_any(), &PatchParams::default(), &Patch::Merge(&patch)).await?;
            let mut note = d.reason(pool.spec.replicas, &b, refill_seconds);
            if let Some(wanted) = capped {
                note.push_str(&format!("; {wanted} wanted, but the nodes have room for no more"));
            }
            tracing::info!(pool = %pool.name_any(), "{note}");
            publish(ctx, &pool, EventType::Normal, reasons::SCALED, "Scale", note).await;
            // The write re-queues the pool, which then acts on the new replicas.
            return Ok(Action::await_change());
        }
        autoscale_due = autoscale::next_change_ms(&b, &o, &d);
    }
    let template_paused = template_paused(&pool);
    let p =
        plan(pool.spec.replicas, pool.spec.warm_power_state, pool.spec.warmup_seconds, template_paused, &views, now);
    // A member the namespace's quota refuses: the pool says so (and its claims, waiting, say
    // why); it tries again when a quota or a member changes, or after QUOTA_RETRY.
    let mut refused = None;
    for made in 0..p.create {
        let m = member(&pool, now);
        match api.create(&PostParams::default(), &m).await {
            Ok(_) => tracing::info!(pool = %pool.name_any(), member = %m.name_any(), "created pool member"),
            Err(kube::Error::Api(e)) if e.code == 403 && quota::is_refusal(&e.message) => {
                refused = Some(format!(
                    "{} of the {} members this pool wants cannot be made: {}",
                    p.create - made,
                    pool.spec.replicas,
                    e.message
                ));
                break;
            }
            Err(e) => return Err(e.into()),
        }
    }
    for name in &p.delete {
        // Preconditioned: a member a claim binds meanwhile is not trimmed.
        let Some(m) = machines.iter().find(|m| &m.name_any() == name) else { continue };
        let dp = DeleteParams {
            preconditions: Some(Preconditions { resource_version: m.resource_version(), uid: m.uid() }),
            ..DeleteParams::default()
        };
        match api.delete(name, &dp).await {
            Ok(_) => tracing::info!(pool = %pool.name_any(), member = %name, "trimmed pool member"),
            Err(kube::Error::Api(e)) if e.code == 404 || e.code == 409 => {}
            Err(e) => return Err(e.into()),
        }
    }
    let stamp = rfc3339(now);
    for name in &p.stamp {
        let patch = json!({"metadata": {"annotations": {WARM_SINCE: stamp}}});
        api.patch(name, &PatchParams::default(), &Patch::Merge(&patch)).await?;
    }
    for (name, state) in &p.power {
        // A claim binding this member at the same time wins: the patch holds only while the
        // member has no claim label (a failed test is 422). Not a resourceVersion precondition:
        // a busy member's status and activity stamps change it every second, and on a loaded
        // host every pause of a 50-member pool then lost that race, so none ever became warm.
        let patch = power_patch(*state);
        match api.patch(name, &PatchParams::default(), &Patch::Json::<()>(patch)).await {
            Ok(_) => {}
            Err(kube::Error::Api(e)) if e.code == 409 || e.code == 404 || e.code == 422 => {}
            Err(e) => return Err(e.into()),
        }
    }
    let old = pool.status.clone().unwrap_or_default();
    let c = p.counts;
    let target = pool.spec.autoscale.map_or(DEFAULT_HIT_RATE_TARGET, |a| a.target_hit_rate);
    let old_condition = old.conditions.iter().find(|c| c.type_ == HIT_RATE_CONDITION);
    let condition = hit_rate_condition(&window, target, window_seconds, old_condition, &rfc3339(now));
    let old_quota = old.conditions.iter().find(|c| c.type_ == quota::QUOTA_EXCEEDED);
    let quota_condition = refused.as_ref().map(|message| {
        let (kind, now) = (quota::QUOTA_EXCEEDED, Time(Timestamp::now()));
        Condition::keeping_transition(kind, "True", kind, message.clone(), old_quota, now)
    });
    if let Some(message) = &refused
        && old_quota.is_none()
    {
        tracing::info!(pool = %pool.name_any(), "{message}");
        publish(ctx, &pool, EventType::Warning, quota::QUOTA_EXCEEDED, "Create", message.clone()).await;
    }
    let mut conditions: Vec<Condition> = old
        .conditions
        .iter()
        .filter(|c| c.type_ != HIT_RATE_CONDITION && c.type_ != quota::QUOTA_EXCEEDED)
        .cloned()
        .collect();
    conditions.extend(condition);
    conditions.extend(quota_condition);
    let hit_rate = window.hit_rate().map(|r| (r * 1000.0).round() / 1000.0);
    if (old.replicas, old.ready, old.warm, old.claimed, old.observed_generation, old.hit_rate, &old.conditions)
        != (c.replicas, c.ready, c.warm, c.claimed, pool.metadata.generation, hit_rate, &conditions)
    {
        let patch = json!({"status": {
            "replicas": c.replicas, "ready": c.ready, "warm": c.warm, "claimed": c.claimed,
            "observedGeneration": pool.metadata.generation, "hitRate": hit_rate, "conditions": conditions,
        }});
        pools.patch_status(&pool.name_any(), &PatchParams::default(), &Patch::Merge(&patch)).await?;
    }
    // Member changes (phase, labels) and claims arriving re-queue through the watches; the clock
    // only for warm-up ends, and for an autoscaled pool when its decision can next change.
    let quota_due = refused.is_some().then_some(QUOTA_RETRY.as_millis() as i64);
    let due = [p.requeue_after_ms, autoscale_due.map(|at| at - now), quota_due].into_iter().flatten().min();
    Ok(match due {
        Some(ms) => Action::requeue(Duration::from_millis(ms.max(0) as u64 + 20)),
        None => Action::await_change(),
    })
}

/// How many more of `pool`'s members the nodes have room for, as the scheduler counts it.
/// How many unclaimed members of `pool` the nodes can hold: those placed now, and what still fits
/// beside everything placed. Both from one listing, so that a member placed between two reads
/// is counted once (it was counted in the room and missed among the placed).
async fn fits_on_nodes(client: &kube::Client, pool: &MachinePool) -> Result<i64, kube::Error> {
    let nodes = Api::<KaironNode>::all(client.clone()).list(&ListParams::default()).await?.items;
    let machines = Api::<Machine>::all(client.clone()).list(&ListParams::default()).await?.items;
    let placed = machines
        .iter()
        .filter(|m| kairon_model::warm::is_member_of(m, pool))
        .filter(|m| m.status.as_ref().is_some_and(|s| s.node_name.is_some()))
        .map(MemberView::of)
        .filter(|m| !m.claimed && !m.deleting)
        .count() as i64;
    let now = k8s_openapi::jiff::Timestamp::now();
    let mut views: Vec<placement::NodeView> = nodes.iter().map(|n| placement::node_view(n, now)).collect();
    let machines: Vec<Arc<Machine>> = machines.into_iter().map(Arc::new).collect();
    placement::tally(&mut views, &machines, &mut Default::default());
    Ok(placed + placement::room(&views, placement::demand(&pool.spec.template.spec)))
}

/// Sets a member's powerState unless a claim has bound it since the pool looked.
fn power_patch(state: PowerState) -> json_patch::Patch {
    let claim = format!("/metadata/labels/{}", labels::CLAIM.replace('~', "~0").replace('/', "~1"));
    serde_json::from_value(json!([
        {"op": "test", "path": claim, "value": null},
        {"op": "add", "path": "/spec/powerState", "value": state},
    ]))
    .expect("a well-formed JSON patch")
}

/// Records an Event of its own: each resize says why (a shared Recorder folds the events of one
/// reason into a series that keeps the first note).
async fn publish(ctx: &Ctx, pool: &MachinePool, type_: EventType, reason: &str, action: &str, note: String) {
    let ev = Event { type_, reason: reason.into(), note: Some(note), action: action.into(), secondary: None };
    let recorder = Recorder::new(ctx.client.clone(), ctx.reporter.clone());
    if let Err(e) = recorder.publish(&ev, &pool.object_ref(&())).await {
        tracing::warn!(pool = %pool.name_any(), error = %e, "could not record event");
    }
}

fn error_policy(pool: Arc<MachinePool>, e: &PoolError, _: Arc<Ctx>) -> Action {
    if matches!(e, PoolError::Kube(kube::Error::Api(s)) if s.code == 409) {
        // A write decided on a pool this cache had not caught up with: decided again.
        tracing::debug!(pool = %pool.name_any(), error = %e, "pool reconcile raced a newer write; retrying");
    } else {
        tracing::warn!(pool = %pool.name_any(), error = %e, "pool reconcile failed; retrying");
    }
    Action::requeue(Duration::from_secs(1))
}

/// Maps a member to its pool.
pub fn pool_of(m: &Machine) -> Option<ObjectRef<MachinePool>> {
    let pool = m.labels().get(labels::POOL)?;
    Some(ObjectRef::new(pool).within(&m.namespace().unwrap_or_default()))
}

pub async fn run(client: kube::Client, _cfg: crate::ControllerConfig, shutdown: tokio_util::sync::CancellationToken) {
    let pools: Api<MachinePool> = Api::all(client.clone());
    let machines: Api<Machine> = Api::all(client.clone());
    let claims: Api<MachineClaim> = Api::all(client.clone());
    let reporter = Reporter { controller: "kairon-pools".into(), instance: None };
    let quotas: Api<KaironQuota> = Api::all(client.clone());
    let ctx = Arc::new(Ctx { client, reporter, arrivals: Arrivals::default() });
    let arrivals = ctx.clone();
    let controller = Controller::new(pools, watcher::Config::default());
    let store = controller.store();
    controller
        .watches(machines, watcher::Config::default().labels(labels::POOL), |m| pool_of(&m))
        // A quota's change (its limits, or its use going down) may let a refused pool grow.
        .watches(quotas, watcher::Config::default(), move |q: KaironQuota| {
            let ns = q.namespace();
            store.state().iter().filter(|p| p.namespace() == ns).map(|p| ObjectRef::from_obj(&**p)).collect::<Vec<_>>()
        })
        // A claim arriving, or learning how it was served, tells its pool.
        .watches(claims, watcher::Config::default(), move |c: MachineClaim| {
            arrivals
                .arrivals
                .record(&c, now_ms())
                .then(|| ObjectRef::new(&c.spec.pool_name).within(&c.namespace().unwrap_or_default()))
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
    fn the_hit_rate_condition_says_how_claims_were_served_and_keeps_its_transition_time() {
        let w = |warm, cold| Window { arrivals: vec![], warm, cold, last_needed_ms: None };
        assert_eq!(hit_rate_condition(&w(0, 0), 0.95, 600, None, "2026-01-01T00:00:00Z"), None, "no claim bound yet");
        let low = hit_rate_condition(&w(1, 7), 0.95, 600, None, "2026-01-01T00:00:00Z").unwrap();
        assert_eq!((low.status.as_str(), low.reason.as_str()), ("False", "BelowTarget"));
        assert!(
            low.message.starts_with("1 of the 8 claims bound over the last 600 s were served warm (12%; target 95%)")
        );
        let still = hit_rate_condition(&w(2, 7), 0.95, 600, Some(&low), "2026-01-01T00:05:00Z").unwrap();
        assert_eq!(still.last_transition_time, low.last_transition_time, "same status: the transition stays");
        let met = hit_rate_condition(&w(19, 1), 0.95, 600, Some(&still), "2026-01-01T00:09:00Z").unwrap();
        assert_eq!((met.status.as_str(), met.reason.as_str()), ("True", "AtTarget"));
        assert_ne!(met.last_transition_time, low.last_transition_time);
    }

    #[test]
    fn a_pause_holds_only_while_no_claim_label_is_there() {
        let patch = serde_json::to_value(power_patch(PowerState::Paused)).unwrap();
        assert_eq!(
            patch,
            json!([
                {"op": "test", "path": "/metadata/labels/kairon.zyvor.dev~1claim", "value": null},
                {"op": "add", "path": "/spec/powerState", "value": "Paused"},
            ])
        );
        // A member a claim bound meanwhile fails the test, and nothing changes.
        let mut claimed =
            json!({"metadata": {"labels": {"kairon.zyvor.dev/claim": "c1"}}, "spec": {"powerState": "Running"}});
        assert!(json_patch::patch(&mut claimed, &power_patch(PowerState::Paused)).is_err());
        assert_eq!(claimed["spec"]["powerState"], "Running");
    }

    const T0: i64 = 1_000_000;

    fn m(name: &str, created: i64, phase: Option<MachinePhase>, power: PowerState, since: Option<i64>) -> MemberView {
        MemberView {
            name: name.into(),
            created_ms: created,
            claimed: false,
            deleting: false,
            phase,
            power_state: power,
            warm_since_ms: since,
        }
    }

    use MachinePhase::*;
    use PowerState as P;

    #[test]
    fn an_empty_pool_creates_all_replicas() {
        let p = plan(5, WarmPowerState::Paused, 1, false, &[], T0);
        assert_eq!(p.create, 5);
        assert_eq!(p.counts, Counts::default());
        assert_eq!(p.requeue_after_ms, None);
    }

    #[test]
    fn a_member_first_seen_running_is_stamped_and_paused_after_warmup() {
        let members = [m("a", 0, Some(Running), P::Running, None)];
        let p = plan(1, WarmPowerState::Paused, 30, false, &members, T0);
        assert_eq!(p.stamp, vec!["a".to_string()]);
        assert!(p.power.is_empty());
        assert_eq!(p.requeue_after_ms, Some(30_000), "requeue exactly when warm-up ends");
        assert_eq!(p.counts, Counts { replicas: 1, ready: 1, warm: 0, claimed: 0 });

        let members = [m("a", 0, Some(Running), P::Running, Some(T0 - 30_000))];
        let p = plan(1, WarmPowerState::Paused, 30, false, &members, T0);
        assert!(p.stamp.is_empty());
        assert_eq!(p.power, vec![("a".to_string(), P::Paused)]);
        assert_eq!(p.counts.warm, 0, "running is not warm for a Paused pool");

        let members = [m("a", 0, Some(Paused), P::Paused, Some(T0 - 31_000))];
        let p = plan(1, WarmPowerState::Paused, 30, false, &members, T0);
        assert!(p.power.is_empty());
        assert_eq!(p.counts, Counts { replicas: 1, ready: 1, warm: 1, claimed: 0 });
    }

    #[test]
    fn booting_members_are_neither_stamped_nor_ready() {
        let members = [m("a", 0, Some(Provisioning), P::Running, None), m("b", 0, None, P::Running, None)];
        let p = plan(2, WarmPowerState::Paused, 1, false, &members, T0);
        assert!(p.stamp.is_empty() && p.power.is_empty());
        assert_eq!(p.counts, Counts { replicas: 2, ready: 0, warm: 0, claimed: 0 });
    }

    #[test]
    fn claimed_and_deleting_members_do_not_count() {
        let mut c = m("c", 0, Some(Running), P::Running, Some(0));
        c.claimed = true;
        let mut d = m("d", 0, Some(Paused), P::Paused, Some(0));
        d.deleting = true;
        let p = plan(2, WarmPowerState::Paused, 1, false, &[c, d, m("a", 0, Some(Paused), P::Paused, Some(0))], T0);
        assert_eq!(p.create, 1);
        assert!(p.power.is_empty(), "a claimed member is never paused by the pool");
        assert_eq!(p.counts, Counts { replicas: 1, ready: 1, warm: 1, claimed: 1 });
    }

    #[test]
    fn surplus_trims_non_warm_first_then_newest() {
        let members = [
            m("warm-old", 1, Some(Paused), P::Paused, Some(0)),
            m("warm-new", 5, Some(Paused), P::Paused, Some(0)),
            m("cold-old", 2, Some(Running), P::Running, Some(T0)),
            m("cold-new", 4, Some(Provisioning), P::Running, None),
            m("warm-mid", 3, Some(Paused), P::Paused, Some(0)),
        ];
        let p = plan(2, WarmPowerState::Paused, 10, false, &members, T0);
        assert_eq!(p.delete, vec!["cold-new".to_string(), "cold-old".to_string(), "warm-new".to_string()]);
        assert_eq!(p.counts, Counts { replicas: 2, ready: 2, warm: 2, claimed: 0 });
        let p = plan(4, WarmPowerState::Paused, 10, false, &members, T0);
        assert_eq!(p.delete, vec!["cold-new".to_string()]);
    }

    #[test]
    fn a_running_pool_resumes_paused_members_unless_its_template_is_paused() {
        let members = [m("a", 0, Some(Paused), P::Paused, Some(0)), m("b", 0, Some(Running), P::Running, Some(0))];
        let p = plan(2, WarmPowerState::Running, 1, false, &members, T0);
        assert_eq!(p.power, vec![("a".to_string(), P::Running)]);
        assert_eq!(p.counts, Counts { replicas: 2, ready: 2, warm: 1, claimed: 0 });
        let p = plan(2, WarmPowerState::Running, 1, true, &members, T0);
        assert!(p.power.is_empty());
    }

    #[test]
    fn a_running_pool_with_a_paused_template_keeps_paused_members_and_hands_them_out() {
        // Booted and paused at once by the node: first seen Paused, so its warm-up starts then.
        let members = [m("a", 0, Some(Paused), P::Paused, None)];
        let p = plan(1, WarmPowerState::Running, 2, true, &members, T0);
        assert_eq!(p.stamp, vec!["a".to_string()]);
        assert!(p.power.is_empty(), "not resumed: the template asks for Paused");
        assert_eq!(p.counts, Counts { replicas: 1, ready: 1, warm: 0, claimed: 0 });
        assert_eq!(p.requeue_after_ms, Some(2000));
        let members = [m("a", 0, Some(Paused), P::Paused, Some(T0 - 2000))];
        let p = plan(1, WarmPowerState::Running, 2, true, &members, T0);
        assert_eq!(p.counts.warm, 1, "a Paused member is warm (claimable) in such a pool");
        // Without the paused template the same member is resumed, and not warm until Running.
        let p = plan(1, WarmPowerState::Running, 2, false, &members, T0);
        assert_eq!(p.power, vec![("a".to_string(), P::Running)]);
        assert_eq!(p.counts.warm, 0);
    }

    #[test]
    fn a_running_member_of_a_running_pool_is_warm_after_warmup() {
        let a = m("a", 0, Some(Running), P::Running, Some(T0 - 500));
        assert!(!is_warm(&a, Running, 1, T0));
        assert!(is_warm(&a, Running, 1, T0 + 500));
        assert!(!is_warm(&a, Paused, 1, T0 + 500));
        assert_eq!(warm_phase(WarmPowerState::Running, false), Running);
        assert_eq!(warm_phase(WarmPowerState::Paused, false), Paused);
        assert_eq!(warm_phase(WarmPowerState::Paused, true), Paused);
        let p = plan(1, WarmPowerState::Running, 1, false, &[a], T0);
        assert_eq!(p.requeue_after_ms, Some(500));
    }

    #[test]
    fn a_deleted_pool_deletes_every_member_not_already_going() {
        let mut claimed = m("claimed", 0, Some(Running), P::Running, Some(0));
        claimed.claimed = true;
        let mut going = m("going", 0, Some(Paused), P::Paused, Some(0));
        going.deleting = true;
        let members =
            [m("warm", 0, Some(Paused), P::Paused, Some(0)), claimed, going, m("new", 0, None, P::Running, None)];
        assert_eq!(to_delete(&members), vec!["warm".to_string(), "claimed".to_string(), "new".to_string()]);
        assert!(to_delete(&[]).is_empty());
    }

    #[test]
    fn member_names_are_pool_dash_five() {
        let a = member_name("agents");
        let b = member_name("agents");
        assert_eq!(a.len(), "agents-".len() + 5);
        assert!(a.starts_with("agents-"));
        assert_ne!(a, b);
        assert_eq!(parse_ms(&rfc3339(T0)), Some(T0));
    }
}
