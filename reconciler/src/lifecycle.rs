//! The lifecycle controller: suspends (or deletes) a Machine idle for its
//! `spec.lifecycle.idleTimeoutSeconds`, and deletes one at the end of its max lifetime or
//! `spec.ttlSeconds`. What to do is a pure function of the Machine and the clock ([`decide`]);
//! the reconciler applies it and requeues at the instant the next thing is due.

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use k8s_openapi::jiff::Timestamp;
use kube::api::{Api, DeleteParams, Patch, PatchParams, Preconditions};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::events::{Event, EventType, Recorder, Reporter};
use kube::runtime::reflector::ObjectRef;
use kube::runtime::watcher;
use kube::{Resource, ResourceExt};
use serde_json::json;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kairon_model::keys::{annotations, metrics, reasons};
use kairon_model::{IdleAction, Machine, MachineClaim, MachinePhase, PowerState};

/// What the controller does to a Machine now.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Act {
    /// Idle for `idle_for` (≥ `threshold`): apply `action`.
    Idle { action: IdleAction, idle_for: Duration, threshold: Duration },
    /// Its max lifetime or TTL ended: delete it. `why` is the Event note.
    Expire { why: String },
}

/// The answer for one Machine: act now (or not), and when to look again.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Plan {
    pub act: Option<Act>,
    /// The earliest future instant something may be due; `None`: only a change can matter.
    pub next: Option<Timestamp>,
}

fn elapsed(from: Timestamp, to: Timestamp) -> Duration {
    let ms = to.as_millisecond() - from.as_millisecond();
    Duration::from_millis(ms.max(0) as u64)
}

/// Go-style duration text ("10m0s", "1h0m0s", "5s"), whole seconds.
pub fn fmt_duration(d: Duration) -> String {
    kairon_model::duration::exact(d.as_secs() as i64)
}

/// The past tense of an idle action, for Event notes.
pub fn done_word(a: IdleAction) -> &'static str {
    match a {
        IdleAction::Pause => "paused",
        IdleAction::Hibernate => "hibernated",
        IdleAction::Halt => "halted",
        IdleAction::Stop => "stopped",
        IdleAction::Delete => "deleted",
    }
}

pub use kairon_model::expiry::warm_pool_member;
use kairon_model::expiry::{self, annotation_time, claimed_pool_member, plus};

/// Since when a Machine has been idle: the later of `status.lifecycle.lastActivityTime` and
/// the last-activity annotation; with neither, its creation (or lifecycle-start, if later).
/// A claimed pool member is never idle since before its claim: what it did (or did not do)
/// while it sat warm in the pool is not its claimant's idleness.
pub fn idle_since(m: &Machine) -> Option<Timestamp> {
    let status = m.status.as_ref().and_then(|s| s.lifecycle.as_ref()).and_then(|l| l.last_activity_time.as_ref());
    let seen = [status.map(|t| t.0), annotation_time(m, annotations::LAST_ACTIVITY)].into_iter().flatten().max();
    let claimed_at = if claimed_pool_member(m) { annotation_time(m, annotations::LIFECYCLE_START) } else { None };
    let since = seen.or_else(|| {
        let created = m.metadata.creation_timestamp.as_ref().map(|t| t.0);
        [created, annotation_time(m, annotations::LIFECYCLE_START)].into_iter().flatten().max()
    });
    [since, claimed_at].into_iter().flatten().max()
}

/// Whether idleness may be acted on: Running, not migrating, and `spec.powerState` unset or
/// Running (a hand-paused or stopped Machine is the user's business).
pub fn idle_eligible(m: &Machine) -> bool {
    let phase = m.status.as_ref().and_then(|s| s.phase);
    let migrating = m.status.as_ref().is_some_and(|s| s.migration.is_some());
    phase == Some(MachinePhase::Running) && !migrating && matches!(m.spec.power_state, None | Some(PowerState::Running))
}

/// Decides what to do with `m` at `now`; `min_idle` is the smallest idle timeout honoured.
pub fn decide(m: &Machine, now: Timestamp, min_idle: Duration) -> Plan {
    if m.metadata.deletion_timestamp.is_some() {
        return Plan { act: None, next: None };
    }
    let lifecycle = m.spec.lifecycle.as_ref();
    let mut next: Option<Timestamp> = None;
    let mut due = |t: Timestamp| next = Some(next.map_or(t, |n: Timestamp| n.min(t)));

    // Max lifetime and TTL: deletion wins over everything. (A claim's TTL is the claims
    // controller's: it deletes the claim, whose release deletes the Machine.)
    if let Some(end) = expiry::earliest(&expiry::machine_ends(m)) {
        if now >= end.at() {
            return Plan { act: Some(Act::Expire { why: end.why() }), next: None };
        }
        due(end.at());
    }

    // Idleness; a warm pool member's power state is its pool's business.
    if let Some(l) = lifecycle
        && let Some(timeout) = l.idle_timeout_seconds
        && !warm_pool_member(m)
        && idle_eligible(m)
        && let Some(since) = idle_since(m)
    {
        let threshold = Duration::from_secs(timeout.max(0) as u64).max(min_idle);
        let deadline = plus(since, threshold.as_secs() as i64);
        if now >= deadline {
            let act = Act::Idle { action: l.idle_action, idle_for: elapsed(since, now), threshold };
            return Plan { act: Some(act), next };
        }
        due(deadline);
    }
    Plan { act: None, next }
}

struct Ctx {
    client: kube::Client,
    recorder: Recorder,
    min_idle: Duration,
}

#[derive(Debug, thiserror::Error)]
pub enum LifecycleError {
    #[error("kubernetes API: {0}")]
    Kube(#[from] kube::Error),
}

fn is_conflict(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 409)
}

fn is_not_found(e: &kube::Error) -> bool {
    matches!(e, kube::Error::Api(s) if s.code == 404)
}

fn requeue_at(next: Option<Timestamp>, now: Timestamp) -> Action {
    match next {
        // A little past the instant, so the re-evaluation finds it due.
        Some(t) => Action::requeue(elapsed(now, t) + Duration::from_millis(20)),
        None => Action::await_change(),
    }
}

async fn publish(ctx: &Ctx, m: &Machine, type_: EventType, reason: &str, action: &str, note: String) {
    let ev = Event { type_, reason: reason.into(), note: Some(note), action: action.into(), secondary: None };
    if let Err(e) = ctx.recorder.publish(&ev, &m.object_ref(&())).await {
        tracing::warn!(machine = %m.name_any(), error = %e, "recording a lifecycle event failed");
    }
}

/// Records the Machine's end (its own deadlines and its claim's) as `status.lifecycle.expiresAt`
/// when it changed.
async fn record_expiry(api: &Api<Machine>, m: &Machine, ctx: &Ctx) -> Result<(), kube::Error> {
    if m.metadata.deletion_timestamp.is_some() {
        return Ok(());
    }
    let claim = match expiry::claim_name(m) {
        Some(c) => Api::<MachineClaim>::namespaced(ctx.client.clone(), &m.namespace().unwrap_or_default())
            .get_opt(c)
            .await?
            .filter(|c| expiry::binds(c, m)),
        None => None,
    };
    let want = expiry::earliest(&expiry::ends(m, claim.as_ref())).map(|e| e.at().as_second());
    let have = m.status.as_ref().and_then(|s| s.lifecycle.as_ref()?.expires_at.as_ref()).map(|t| t.0.as_second());
    if want == have {
        return Ok(());
    }
    let at = want.and_then(|s| Timestamp::from_second(s).ok()).map(Time);
    let patch = json!({"status": {"lifecycle": {"expiresAt": at}}});
    match api.patch_status(&m.name_any(), &PatchParams::default(), &Patch::Merge(&patch)).await {
        Err(e) if is_not_found(&e) => Ok(()),
        r => r.map(|_| ()),
    }
}

async fn reconcile(m: Arc<Machine>, ctx: Arc<Ctx>) -> Result<Action, LifecycleError> {
    let now = Timestamp::now();
    let api: Api<Machine> = Api::namespaced(ctx.client.clone(), &m.namespace().unwrap_or_default());
    record_expiry(&api, &m, &ctx).await?;
    let plan = decide(&m, now, ctx.min_idle);
    let Some(act) = plan.act else {
        return Ok(requeue_at(plan.next, now));
    };
    let name = m.name_any();
    let preconditions = Preconditions { uid: m.uid(), resource_version: m.resource_version() };
    match act {
        Act::Expire { why } => {
            let dp = DeleteParams { preconditions: Some(preconditions), ..DeleteParams::default() };
            match api.delete(&name, &dp).await {
                Ok(_) => {}
                Err(e) if is_not_found(&e) => return Ok(Action::await_change()),
                Err(e) if is_conflict(&e) => return Ok(Action::requeue(Duration::from_millis(500))),
                Err(e) => return Err(e.into()),
            }
            tracing::info!(machine = %name, %why, "lifetime expired; deleting");
            crate::metrics::global().add(metrics::LIFECYCLE_ACTIONS_TOTAL, &[("action", "Expire")], 1.0);
            publish(&ctx, &m, EventType::Normal, reasons::LIFETIME_EXPIRED, "Delete", why).await;
            Ok(Action::await_change())
        }
        Act::Idle { action, idle_for, threshold } => {
            let result = match action.power_state() {
                Some(ps) => {
                    let value = format!("{} at {now}", action.as_str());
                    let patch = json!({
                        "metadata": {
                            "resourceVersion": m.resource_version(),
                            "annotations": {annotations::IDLE_SUSPENDED: value},
                        },
                        "spec": {"powerState": ps},
                    });
                    api.patch(&name, &PatchParams::default(), &Patch::Merge(&patch)).await.map(|_| ())
                }
                None => {
                    let dp = DeleteParams { preconditions: Some(preconditions), ..DeleteParams::default() };
                    api.delete(&name, &dp).await.map(|_| ())
                }
            };
            match result {
                Ok(()) => {}
                Err(e) if is_not_found(&e) => return Ok(Action::await_change()),
                // The user changed it meanwhile: their change wins; look again.
                Err(e) if is_conflict(&e) => return Ok(Action::requeue(Duration::from_millis(500))),
                Err(e) => return Err(e.into()),
            }
            let note = format!(
                "idle for {} (threshold {}): {}",
                fmt_duration(idle_for),
                fmt_duration(threshold),
                done_word(action)
            );
            tracing::info!(machine = %name, %note, "idle action");
            crate::metrics::global().add(metrics::LIFECYCLE_ACTIONS_TOTAL, &[("action", action.as_str())], 1.0);
            publish(&ctx, &m, EventType::Normal, reasons::IDLE_SUSPENDED, action.as_str(), note).await;
            Ok(Action::await_change())
        }
    }
}

fn error_policy(m: Arc<Machine>, e: &LifecycleError, _: Arc<Ctx>) -> Action {
    tracing::warn!(machine = %m.name_any(), error = %e, "lifecycle reconcile failed; retrying");
    Action::requeue(Duration::from_secs(2))
}

/// Runs the lifecycle controller over all Machines until its stream ends.
pub async fn run(client: kube::Client, cfg: crate::ControllerConfig, shutdown: tokio_util::sync::CancellationToken) {
    crate::metrics::global().describe(
        metrics::LIFECYCLE_ACTIONS_TOTAL,
        "Lifecycle actions the controller took (idle actions, and Expire for max lifetime/TTL).",
    );
    let machines: Api<Machine> = Api::all(client.clone());
    let reporter = Reporter { controller: "kairon-lifecycle".into(), instance: None };
    let ctx = Arc::new(Ctx {
        client: client.clone(),
        recorder: Recorder::new(client, reporter),
        min_idle: cfg.min_idle_timeout,
    });
    let claims: Api<MachineClaim> = Api::all(ctx.client.clone());
    Controller::new(machines, watcher::Config::default())
        // A claim's TTL is part of its Machine's end.
        .watches(claims, watcher::Config::default(), |c: MachineClaim| {
            let ns = c.namespace().unwrap_or_default();
            c.status.and_then(|s| s.machine_name).map(|name| ObjectRef::new(&name).within(&ns))
        })
        .graceful_shutdown_on(shutdown.cancelled_owned())
        .run(reconcile, error_policy, ctx)
        .for_each(|_| async {})
        .await;
}

#[cfg(test)]
mod tests {
    use super::*;

    const MIN: Duration = Duration::from_secs(60);

    fn ts(s: &str) -> Timestamp {
        s.parse().unwrap()
    }

    fn at(secs: i64) -> Timestamp {
        plus(ts("2026-01-01T00:00:00Z"), secs)
    }

    /// A Running sandbox created at `at(0)`, with the given lifecycle.
    fn machine(lifecycle: serde_json::Value) -> Machine {
        serde_json::from_value(json!({
            "apiVersion": "kairon.zyvor.dev/v1", "kind": "Machine",
            "metadata": {"name": "m", "namespace": "default", "creationTimestamp": "2026-01-01T00:00:00Z",
                         "resourceVersion": "5"},
            "spec": {"sandbox": {"templateName": "busybox"}, "lifecycle": lifecycle},
            "status": {"phase": "Running"}
        }))
        .unwrap()
    }

    fn idle(action: IdleAction, idle_for: u64, threshold: u64) -> Option<Act> {
        Some(Act::Idle { action, idle_for: Duration::from_secs(idle_for), threshold: Duration::from_secs(threshold) })
    }

    #[test]
    fn idle_from_creation_acts_at_the_deadline_with_each_action() {
        for action in IdleAction::ALL {
            let m = machine(json!({"idleTimeoutSeconds": 600, "idleAction": action.as_str()}));
            assert_eq!(decide(&m, at(599), MIN), Plan { act: None, next: Some(at(600)) });
            assert_eq!(decide(&m, at(600), MIN).act, idle(action, 600, 600));
            assert_eq!(decide(&m, at(900), MIN).act, idle(action, 900, 600));
        }
    }

    #[test]
    fn idle_since_is_the_later_of_status_and_annotation() {
        let mut m = machine(json!({"idleTimeoutSeconds": 100}));
        m.status.as_mut().unwrap().lifecycle = Some(kairon_model::LifecycleStatus {
            last_activity_time: Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(at(50))),
            ..Default::default()
        });
        assert_eq!(idle_since(&m), Some(at(50)));
        assert_eq!(decide(&m, at(120), MIN).next, Some(at(150)));
        m.metadata.annotations =
            Some([(annotations::LAST_ACTIVITY.to_string(), at(80).to_string())].into_iter().collect());
        assert_eq!(idle_since(&m), Some(at(80)));
        assert_eq!(decide(&m, at(179), MIN), Plan { act: None, next: Some(at(180)) });
        assert_eq!(decide(&m, at(180), MIN).act, idle(IdleAction::Pause, 100, 100));
        // An older annotation does not move it back; a garbage one is ignored.
        m.metadata.annotations =
            Some([(annotations::LAST_ACTIVITY.to_string(), "yesterday".to_string())].into_iter().collect());
        assert_eq!(idle_since(&m), Some(at(50)));
    }

    #[test]
    fn the_minimum_idle_timeout_is_honoured() {
        let m = machine(json!({"idleTimeoutSeconds": 1}));
        assert_eq!(decide(&m, at(1), MIN).next, Some(at(60)));
        assert_eq!(decide(&m, at(1), Duration::from_secs(1)).act, idle(IdleAction::Pause, 1, 1));
    }

    #[test]
    fn only_running_machines_with_an_idle_timeout_are_suspended() {
        let none: Machine = {
            let mut m = machine(json!({}));
            m.spec.lifecycle = None;
            m
        };
        assert_eq!(decide(&none, at(100_000), MIN), Plan { act: None, next: None });
        let no_timeout = machine(json!({"idleAction": "Stop"}));
        assert_eq!(decide(&no_timeout, at(100_000), MIN), Plan { act: None, next: None });
        for ps in [PowerState::Paused, PowerState::Stopped, PowerState::Hibernated, PowerState::Halted] {
            let mut m = machine(json!({"idleTimeoutSeconds": 60}));
            m.spec.power_state = Some(ps);
            assert_eq!(decide(&m, at(1000), MIN), Plan { act: None, next: None }, "{ps}");
        }
        let mut running = machine(json!({"idleTimeoutSeconds": 60}));
        running.spec.power_state = Some(PowerState::Running);
        assert!(decide(&running, at(1000), MIN).act.is_some());
        for phase in [
            MachinePhase::Pending,
            MachinePhase::Starting,
            MachinePhase::Migrating,
            MachinePhase::Paused,
            MachinePhase::Stopped,
            MachinePhase::Failed,
        ] {
            let mut m = machine(json!({"idleTimeoutSeconds": 60}));
            m.status.as_mut().unwrap().phase = Some(phase);
            assert_eq!(decide(&m, at(1000), MIN), Plan { act: None, next: None }, "{phase:?}");
        }
        let mut no_status = machine(json!({"idleTimeoutSeconds": 60}));
        no_status.status = None;
        assert_eq!(decide(&no_status, at(1000), MIN), Plan { act: None, next: None });
        let mut deleting = machine(json!({"idleTimeoutSeconds": 60, "maxLifetimeSeconds": 1}));
        deleting.metadata.deletion_timestamp = Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(at(5)));
        assert_eq!(decide(&deleting, at(1000), MIN), Plan { act: None, next: None });
    }

    #[test]
    fn max_lifetime_from_creation() {
        let m = machine(json!({"maxLifetimeSeconds": 3600}));
        assert_eq!(decide(&m, at(3599), MIN), Plan { act: None, next: Some(at(3600)) });
        let p = decide(&m, at(3600), MIN);
        assert_eq!(p.act, Some(Act::Expire { why: "max lifetime of 1h0m0s since creation reached".into() }));
        // Also a paused or stopped Machine expires.
        let mut paused = machine(json!({"maxLifetimeSeconds": 3}));
        paused.spec.power_state = Some(PowerState::Stopped);
        assert!(matches!(decide(&paused, at(3), MIN).act, Some(Act::Expire { .. })));
    }

    fn labelled(m: &mut Machine, claim: bool, start: Option<i64>) {
        let mut l = std::collections::BTreeMap::from([(kairon_model::keys::labels::POOL.to_string(), "p".to_string())]);
        if claim {
            l.insert(kairon_model::keys::labels::CLAIM.to_string(), "c".into());
        }
        m.metadata.labels = Some(l);
        if let Some(s) = start {
            m.metadata.annotations =
                Some([(annotations::LIFECYCLE_START.to_string(), at(s).to_string())].into_iter().collect());
        }
    }

    #[test]
    fn a_claimed_pool_member_counts_from_lifecycle_start_and_a_warm_one_is_exempt() {
        let mut warm = machine(json!({"maxLifetimeSeconds": 10}));
        warm.spec.ttl_seconds = Some(5);
        labelled(&mut warm, false, None);
        assert_eq!(decide(&warm, at(1000), MIN), Plan { act: None, next: None });
        let mut claimed = machine(json!({"maxLifetimeSeconds": 10}));
        labelled(&mut claimed, true, Some(100));
        assert_eq!(decide(&claimed, at(50), MIN), Plan { act: None, next: Some(at(110)) });
        assert_eq!(
            decide(&claimed, at(110), MIN).act,
            Some(Act::Expire { why: "max lifetime of 10s since lifecycle start reached".into() })
        );
        // Claimed without lifecycle-start: from creation.
        let mut no_start = machine(json!({"maxLifetimeSeconds": 10}));
        labelled(&mut no_start, true, None);
        assert_eq!(decide(&no_start, at(5), MIN).next, Some(at(10)));
        // Lifecycle-start on an unpooled Machine is ignored for lifetime.
        let mut plain = machine(json!({"maxLifetimeSeconds": 10}));
        plain.metadata.annotations =
            Some([(annotations::LIFECYCLE_START.to_string(), at(100).to_string())].into_iter().collect());
        assert_eq!(decide(&plain, at(5), MIN).next, Some(at(10)));
    }

    /// A member that sat warm (and quiet) in its pool for longer than its idle timeout.
    fn long_warm_member(action: IdleAction, claim_at: Option<i64>) -> Machine {
        let mut m = machine(json!({"idleTimeoutSeconds": 60, "idleAction": action.as_str(), "wakeOnConnect": false}));
        labelled(&mut m, claim_at.is_some(), claim_at);
        m.status.as_mut().unwrap().lifecycle = Some(kairon_model::LifecycleStatus {
            last_activity_time: Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(at(5))),
            ..Default::default()
        });
        m
    }

    #[test]
    fn a_warm_pool_member_is_never_idle_suspended() {
        for action in IdleAction::ALL {
            let warm = long_warm_member(action, None);
            assert_eq!(decide(&warm, at(10_000), MIN), Plan { act: None, next: None }, "{action:?}");
        }
    }

    #[test]
    fn a_claimed_pool_member_is_idle_only_from_its_claim() {
        for action in IdleAction::ALL {
            // Warm and quiet since 5 s, claimed at 80 s: idle from 80, not from 5.
            let claimed = long_warm_member(action, Some(80));
            assert_eq!(idle_since(&claimed), Some(at(80)), "{action:?}");
            assert_eq!(decide(&claimed, at(88), MIN), Plan { act: None, next: Some(at(140)) }, "{action:?}");
            assert_eq!(decide(&claimed, at(140), MIN).act, idle(action, 60, 60), "{action:?}");
            // Activity after the claim moves the deadline as for any Machine.
            let mut busy = long_warm_member(action, Some(80));
            busy.metadata.annotations.as_mut().unwrap().insert(annotations::LAST_ACTIVITY.into(), at(120).to_string());
            assert_eq!(decide(&busy, at(140), MIN), Plan { act: None, next: Some(at(180)) }, "{action:?}");
        }
        // lifecycle-start on a Machine outside any pool does not postpone its idleness.
        let mut plain = machine(json!({"idleTimeoutSeconds": 60}));
        plain.metadata.annotations =
            Some([(annotations::LIFECYCLE_START.to_string(), at(100).to_string())].into_iter().collect());
        plain.status.as_mut().unwrap().lifecycle = Some(kairon_model::LifecycleStatus {
            last_activity_time: Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(at(5))),
            ..Default::default()
        });
        assert_eq!(idle_since(&plain), Some(at(5)));
    }

    #[test]
    fn ttl_expires_from_creation_and_the_earliest_end_wins() {
        let mut m = machine(json!({"maxLifetimeSeconds": 100}));
        m.spec.ttl_seconds = Some(30);
        assert_eq!(decide(&m, at(10), MIN).next, Some(at(30)));
        assert_eq!(
            decide(&m, at(30), MIN).act,
            Some(Act::Expire { why: "ttlSeconds of 30s since creation reached".into() })
        );
        let mut ttl_only = machine(json!({}));
        ttl_only.spec.lifecycle = None;
        ttl_only.spec.ttl_seconds = Some(30);
        assert!(matches!(decide(&ttl_only, at(31), MIN).act, Some(Act::Expire { .. })));
    }

    #[test]
    fn next_is_the_earliest_of_idle_and_lifetime_and_expiry_beats_idle() {
        let m = machine(json!({"idleTimeoutSeconds": 600, "maxLifetimeSeconds": 300}));
        assert_eq!(decide(&m, at(0), MIN).next, Some(at(300)));
        let m = machine(json!({"idleTimeoutSeconds": 60, "maxLifetimeSeconds": 300}));
        assert_eq!(decide(&m, at(0), MIN).next, Some(at(60)));
        // Both due: delete rather than suspend.
        assert!(matches!(decide(&m, at(400), MIN).act, Some(Act::Expire { .. })));
        // Idle acted on, lifetime still pending: next carries it.
        let m = machine(json!({"idleTimeoutSeconds": 60, "maxLifetimeSeconds": 3000}));
        let p = decide(&m, at(100), MIN);
        assert_eq!(p.act, idle(IdleAction::Pause, 100, 60));
        assert_eq!(p.next, Some(at(3000)));
    }

    #[test]
    fn notes_read_like_durations() {
        assert_eq!(fmt_duration(Duration::from_secs(600)), "10m0s");
        assert_eq!(fmt_duration(Duration::from_secs(3661)), "1h1m1s");
        assert_eq!(fmt_duration(Duration::from_secs(5)), "5s");
        let note = format!(
            "idle for {} (threshold {}): {}",
            fmt_duration(Duration::from_secs(600)),
            fmt_duration(Duration::from_secs(600)),
            done_word(IdleAction::Pause)
        );
        assert_eq!(note, "idle for 10m0s (threshold 10m0s): paused");
        for a in IdleAction::ALL {
            assert_eq!(a.power_state().is_none(), done_word(a) == "deleted");
        }
    }
}
