//! Claim usage: every bound MachineClaim accrues `status.usage` from its Machine once per
//! usage interval. Running time is active (and counts vCPU- and GiB-seconds), Stopped, Paused,
//! Hibernated and Halted are suspended, other phases advance the clock without accruing.
//!
//! With a store, each interval is first inserted into the usage history (keyed by claim uid and
//! interval start, so a retry inserts nothing), then `status.usage` is patched with a
//! resourceVersion precondition. The status is always derived from the history (its sum, accrued
//! up to its last interval's end), so a controller that dies between the two writes neither
//! loses nor double counts the interval: the next run finds it in the history.

use std::sync::Arc;
use std::time::Duration;

use chrono::{DateTime, Utc};
use futures::StreamExt;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::api::{Api, Patch, PatchParams};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::watcher;
use kube::{Resource, ResourceExt};
use serde_json::json;

use kairon_db::usage::{self as history, ClaimHistory, UsageInterval, UsageState};
use kairon_model::keys::metrics as names;
use kairon_model::machine::UsageClass;
use kairon_model::{ClaimPhase, ClaimUsage, Machine, MachineClaim, MachineClaimStatus, MachinePhase};

/// The shortest requeue, so a clock at the edge of a second does not spin.
const MIN_REQUEUE: Duration = Duration::from_millis(200);

/// What one second of active time costs: vCPUs and GiB of memory.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Rates {
    pub vcpus: f64,
    pub memory_gib: f64,
}

/// A Machine's billing rates: what it holds ([`kairon_model::quota::effective_resources`]: its
/// `resources`, or one CPU and 512 MiB for a template sandbox and for what the spec leaves out,
/// or more while its node runs it at a larger size than a shrunk spec), in cores and GiB.
pub fn rates(m: &Machine) -> Rates {
    let (cpu_millis, memory_bytes) = kairon_model::quota::effective_resources(m);
    Rates { vcpus: cpu_millis as f64 / 1000.0, memory_gib: memory_bytes as f64 / (1u64 << 30) as f64 }
}

/// One accrued interval: whole seconds from `start` to `end`, billed as `class`.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Accrual {
    pub start: DateTime<Utc>,
    pub end: DateTime<Utc>,
    pub class: UsageClass,
    pub active_seconds: i64,
    pub suspended_seconds: i64,
    pub vcpu_seconds: f64,
    pub memory_gib_seconds: f64,
}

/// Accrues the whole seconds from `from` to `now` as `class`; the fraction stays for the next
/// interval (`end` is `from` plus the whole seconds). None when not a whole second has passed.
pub fn accrue(from: DateTime<Utc>, now: DateTime<Utc>, class: UsageClass, rates: Rates) -> Option<Accrual> {
    let secs = (now - from).num_seconds();
    if secs <= 0 {
        return None;
    }
    let end = from + chrono::Duration::seconds(secs);
    let (active, suspended) = match class {
        UsageClass::Active => (secs, 0),
        UsageClass::Suspended => (0, secs),
        UsageClass::None => (0, 0),
    };
    Some(Accrual {
        start: from,
        end,
        class,
        active_seconds: active,
        suspended_seconds: suspended,
        vcpu_seconds: active as f64 * rates.vcpus,
        memory_gib_seconds: active as f64 * rates.memory_gib,
    })
}

/// The end of the UTC day `from` falls in: an interval never crosses it, so the daily rollup
/// bills each second to the day it happened (a long gap, e.g. controller downtime, is accrued
/// one day at a time).
pub fn day_end(from: DateTime<Utc>) -> DateTime<Utc> {
    let next = from.date_naive() + chrono::Days::new(1);
    next.and_hms_opt(0, 0, 0).map(|t| t.and_utc()).unwrap_or(from + chrono::Duration::days(1))
}

/// Whether two usages agree (floats to rounding: the history's SQL sum may add in another order).
pub fn same_usage(a: &ClaimUsage, b: &ClaimUsage) -> bool {
    let close = |x: f64, y: f64| (x - y).abs() <= 1e-9 * x.abs().max(y.abs()).max(1.0);
    a.active_seconds == b.active_seconds
        && a.suspended_seconds == b.suspended_seconds
        && close(a.vcpu_seconds, b.vcpu_seconds)
        && close(a.memory_gib_seconds, b.memory_gib_seconds)
        && whole_seconds(a) == whole_seconds(b)
}

/// When accrual ran up to, as `status.usage` can say it: a Kubernetes time has whole seconds,
/// while the history's interval ends keep the bind's milliseconds. Compared finer, a status
/// written from the history never agreed with it, and its repair was written again forever.
fn whole_seconds(u: &ClaimUsage) -> Option<i64> {
    u.last_accrual_time.as_ref().map(|t| t.0.as_second())
}

/// `usage` plus one interval, accrued up to its end.
pub fn apply(usage: &ClaimUsage, a: &Accrual) -> ClaimUsage {
    ClaimUsage {
        active_seconds: usage.active_seconds + a.active_seconds,
        suspended_seconds: usage.suspended_seconds + a.suspended_seconds,
        vcpu_seconds: usage.vcpu_seconds + a.vcpu_seconds,
        memory_gib_seconds: usage.memory_gib_seconds + a.memory_gib_seconds,
        last_accrual_time: to_time(a.end),
    }
}

/// Where accrual stands for a bound claim: the usage so far and the instant it runs up to.
/// The history, when there is one, wins over `status.usage` (it is written first); otherwise
/// the status; otherwise nothing accrued yet, from `boundTime` (or `now` without one).
pub fn baseline(
    status: &MachineClaimStatus,
    recorded: Option<&ClaimHistory>,
    now: DateTime<Utc>,
) -> (ClaimUsage, DateTime<Utc>) {
    if let Some(h) = recorded {
        return (usage_of(h), h.accrued_until);
    }
    if let Some(u) = &status.usage
        && let Some(t) = u.last_accrual_time.as_ref().and_then(from_time)
    {
        return (u.clone(), t);
    }
    let from = status.bound_time.as_ref().and_then(from_time).unwrap_or(now);
    (ClaimUsage { last_accrual_time: to_time(from), ..ClaimUsage::default() }, from)
}

/// A claim's history as `status.usage`: its sums, accrued up to its last interval's end.
pub fn usage_of(h: &ClaimHistory) -> ClaimUsage {
    ClaimUsage {
        active_seconds: h.totals.active_seconds,
        suspended_seconds: h.totals.suspended_seconds,
        vcpu_seconds: h.totals.vcpu_seconds,
        memory_gib_seconds: h.totals.memory_gib_seconds,
        last_accrual_time: to_time(h.accrued_until),
    }
}

/// A claim's usage as recorded: its history when there is a store (the history is written
/// first, so it is never behind `status.usage`), otherwise `status.usage`.
pub async fn recorded_usage(
    store: Option<&kairon_db::Store>,
    c: &MachineClaim,
) -> Result<Option<ClaimUsage>, UsageError> {
    let from_status = c.status.as_ref().and_then(|s| s.usage.clone());
    let Some(store) = store else { return Ok(from_status) };
    let uid = c.uid().and_then(|u| uuid_of(&u)).ok_or(UsageError::NoUid)?;
    Ok(history::claim_history_totals(store.pool(), uid).await?.as_ref().map(usage_of).or(from_status))
}

/// When the next interval is due: `from` plus the interval (never sooner than a moment).
pub fn next_due(from: DateTime<Utc>, now: DateTime<Utc>, interval: Duration) -> Duration {
    let due = from + chrono::Duration::from_std(interval).unwrap_or(chrono::Duration::seconds(30));
    (due - now).to_std().unwrap_or(Duration::ZERO).max(MIN_REQUEUE)
}

/// How a Machine (or its absence) is billed right now.
pub fn class_of(machine: Option<&Machine>) -> UsageClass {
    machine
        .and_then(|m| m.status.as_ref())
        .and_then(|s| s.phase)
        .map(MachinePhase::usage_class)
        .unwrap_or(UsageClass::None)
}

pub fn state_of(class: UsageClass) -> UsageState {
    match class {
        UsageClass::Active => UsageState::Active,
        UsageClass::Suspended => UsageState::Suspended,
        UsageClass::None => UsageState::None,
    }
}

pub fn from_time(t: &Time) -> Option<DateTime<Utc>> {
    DateTime::from_timestamp(t.0.as_second(), u32::try_from(t.0.subsec_nanosecond()).unwrap_or(0))
}

pub fn to_time(t: DateTime<Utc>) -> Option<Time> {
    k8s_openapi::jiff::Timestamp::new(t.timestamp(), i32::try_from(t.timestamp_subsec_nanos()).unwrap_or(0))
        .ok()
        .map(Time)
}

#[derive(Debug, thiserror::Error)]
pub enum UsageError {
    #[error("kubernetes API: {0}")]
    Kube(#[from] kube::Error),
    #[error("usage history: {0}")]
    Database(#[from] sqlx::Error),
    #[error("claim has no valid uid")]
    NoUid,
}

struct Ctx {
    client: kube::Client,
    cfg: crate::ControllerConfig,
}

fn count(namespace: &str, a: &Accrual) {
    let m = crate::metrics::global();
    if a.active_seconds > 0 {
        m.add(
            names::CLAIM_USAGE_SECONDS_TOTAL,
            &[("namespace", namespace), ("state", "active")],
            a.active_seconds as f64,
        );
    }
    if a.suspended_seconds > 0 {
        m.add(
            names::CLAIM_USAGE_SECONDS_TOTAL,
            &[("namespace", namespace), ("state", "suspended")],
            a.suspended_seconds as f64,
        );
    }
    if a.vcpu_seconds > 0.0 {
        m.add(names::CLAIM_USAGE_VCPU_SECONDS_TOTAL, &[("namespace", namespace)], a.vcpu_seconds);
    }
    if a.memory_gib_seconds > 0.0 {
        m.add(names::CLAIM_USAGE_MEMORY_GIB_SECONDS_TOTAL, &[("namespace", namespace)], a.memory_gib_seconds);
    }
}

/// What one accrual attempt did.
#[derive(Clone, Debug, PartialEq)]
pub enum Accrued {
    /// Not a claim that accrues (not Bound to a Machine).
    NotBound,
    /// Nothing due yet: the next interval is due at `from` plus the interval.
    NotDue { from: DateTime<Utc> },
    /// An interval was recorded (and `status.usage` written): accrued up to `usage.lastAccrualTime`.
    Recorded { usage: ClaimUsage, end: DateTime<Utc> },
    /// Another writer recorded the same interval first; read again and retry.
    Raced,
}

/// Accrues one interval of a bound claim when at least `due_after` has passed since the last:
/// reads its Machine, records the interval in the history (when there is a store), then writes
/// `status.usage` with the claim's resourceVersion as precondition. `due_after` of zero accrues
/// whatever whole seconds have passed: the claims controller can call this (with the store from
/// its `ControllerConfig`) before releasing, so the Released Event carries the final usage.
/// `hold` is test-only (see [`crate::ControllerConfig::test_hold_after_record`]): zero in
/// production.
pub async fn accrue_claim(
    client: &kube::Client,
    store: Option<&kairon_db::Store>,
    c: &MachineClaim,
    due_after: Duration,
    hold: Duration,
) -> Result<Accrued, UsageError> {
    let Some(status) = c.status.as_ref() else { return Ok(Accrued::NotBound) };
    let Some(machine_name) = status.machine_name.as_deref() else { return Ok(Accrued::NotBound) };
    if status.phase != Some(ClaimPhase::Bound) {
        return Ok(Accrued::NotBound);
    }
    let namespace = c.namespace().unwrap_or_default();
    let uid = c.uid().and_then(|u| uuid_of(&u)).ok_or(UsageError::NoUid)?;
    let claims: Api<MachineClaim> = Api::namespaced(client.clone(), &namespace);
    let machines: Api<Machine> = Api::namespaced(client.clone(), &namespace);

    let recorded = match store {
        Some(store) => history::claim_history_totals(store.pool(), uid).await?,
        None => None,
    };
    let now = Utc::now();
    let (base, from) = baseline(status, recorded.as_ref(), now);
    if now - from < chrono::Duration::from_std(due_after).unwrap_or(chrono::Duration::seconds(30)) {
        // Not due yet; still repair a status the history is ahead of (a crash between writes).
        if recorded.is_some() && !status.usage.as_ref().is_some_and(|u| same_usage(u, &base)) {
            patch_usage(&claims, c, &base).await?;
        }
        return Ok(Accrued::NotDue { from });
    }
    let machine = machines.get_opt(machine_name).await?;
    let r = machine.as_ref().map(rates).unwrap_or(Rates { vcpus: 0.0, memory_gib: 0.0 });
    let class = class_of(machine.as_ref());
    let a = match accrue(from, now.min(day_end(from)), class, r) {
        Some(a) => a,
        // The final accrual of a claim that never lived a whole second: an empty interval, so
        // its history (describe_claim after it is gone, billing by claim) still knows it.
        None if due_after.is_zero() && recorded.is_none() => Accrual {
            start: from,
            end: from,
            class,
            active_seconds: 0,
            suspended_seconds: 0,
            vcpu_seconds: 0.0,
            memory_gib_seconds: 0.0,
        },
        None => return Ok(Accrued::NotDue { from }),
    };
    let usage = apply(&base, &a);
    if let Some(store) = store {
        let row = UsageInterval {
            claim_uid: uid,
            interval_start: a.start,
            interval_end: a.end,
            namespace: namespace.clone(),
            claim_name: c.name_any(),
            state: state_of(a.class),
            active_seconds: a.active_seconds,
            suspended_seconds: a.suspended_seconds,
            vcpu_seconds: a.vcpu_seconds,
            memory_gib_seconds: a.memory_gib_seconds,
        };
        if !history::record(store.pool(), &row).await? {
            return Ok(Accrued::Raced);
        }
        count(&namespace, &a);
        if !hold.is_zero() {
            tracing::warn!(
                claim = %c.name_any(), interval_start = %a.start, interval_end = %a.end,
                "TEST ONLY: holding {hold:?} between the history insert and the status write"
            );
            tokio::time::sleep(hold).await;
        }
        // The interval is durable; a failed patch is repaired from the history next time.
        patch_usage(&claims, c, &usage).await?;
    } else {
        patch_usage(&claims, c, &usage).await?;
        count(&namespace, &a);
    }
    Ok(Accrued::Recorded { usage, end: a.end })
}

async fn reconcile(c: Arc<MachineClaim>, ctx: Arc<Ctx>) -> Result<Action, UsageError> {
    if c.meta().deletion_timestamp.is_some() {
        // The claims controller releases it (and may take the final accrual with accrue_claim).
        return Ok(Action::await_change());
    }
    let interval = ctx.cfg.usage_interval;
    let hold = ctx.cfg.test_hold_after_record;
    Ok(match accrue_claim(&ctx.client, ctx.cfg.store.as_ref(), &c, interval, hold).await? {
        Accrued::NotBound => Action::await_change(),
        Accrued::NotDue { from } => Action::requeue(next_due(from, Utc::now(), interval)),
        // Someone recorded this interval already: derive again from the history.
        Accrued::Raced => Action::requeue(MIN_REQUEUE),
        Accrued::Recorded { end, .. } => Action::requeue(next_due(end, Utc::now(), interval)),
    })
}

/// Writes `status.usage`, only if nobody changed the claim since it was read.
async fn patch_usage(api: &Api<MachineClaim>, c: &MachineClaim, usage: &ClaimUsage) -> Result<(), kube::Error> {
    let patch = json!({
        "metadata": {"resourceVersion": c.resource_version()},
        "status": {"usage": usage},
    });
    api.patch_status(&c.name_any(), &PatchParams::default(), &Patch::Merge(&patch)).await?;
    Ok(())
}

fn uuid_of(s: &str) -> Option<sqlx::types::Uuid> {
    sqlx::types::Uuid::parse_str(s).ok()
}

fn error_policy(c: Arc<MachineClaim>, e: &UsageError, ctx: Arc<Ctx>) -> Action {
    // The status write is conditional on the claim as read: another writer (the claims
    // controller binding or releasing it) got there first. The interval is in the history
    // already; the next look derives the status from it.
    if matches!(e, UsageError::Kube(kube::Error::Api(s)) if s.code == 409) {
        tracing::debug!(claim = %c.name_any(), "the claim changed while its usage was written; again from the history");
        return Action::requeue(MIN_REQUEUE);
    }
    tracing::warn!(claim = %c.name_any(), error = %e, "accruing usage failed; retrying");
    Action::requeue(ctx.cfg.usage_interval.min(Duration::from_secs(5)).max(MIN_REQUEUE))
}

/// Accrues usage for every bound claim, every `cfg.usage_interval`.
pub async fn run(client: kube::Client, cfg: crate::ControllerConfig, shutdown: tokio_util::sync::CancellationToken) {
    let m = crate::metrics::global();
    m.describe(names::CLAIM_USAGE_SECONDS_TOTAL, "Seconds bound claims were active or suspended.");
    m.describe(names::CLAIM_USAGE_VCPU_SECONDS_TOTAL, "vCPU-seconds of active time of bound claims.");
    m.describe(names::CLAIM_USAGE_MEMORY_GIB_SECONDS_TOTAL, "GiB-seconds of memory of active time of bound claims.");
    let claims: Api<MachineClaim> = Api::all(client.clone());
    let ctx = Arc::new(Ctx { client, cfg });
    Controller::new(claims, watcher::Config::default())
        .graceful_shutdown_on(shutdown.cancelled_owned())
        .run(reconcile, error_policy, ctx)
        .for_each(|_| async {})
        .await;
}

#[cfg(test)]
mod tests {
    use super::*;
    use kairon_db::usage::UsageTotals;

    fn t(s: &str) -> DateTime<Utc> {
        DateTime::parse_from_rfc3339(s).unwrap().with_timezone(&Utc)
    }

    const ONE: Rates = Rates { vcpus: 2.0, memory_gib: 4.0 };

    fn machine(spec: serde_json::Value, phase: Option<&str>) -> Machine {
        let mut m =
            json!({"apiVersion": "kairon.zyvor.dev/v1", "kind": "Machine", "metadata": {"name": "m"}, "spec": spec});
        if let Some(p) = phase {
            m["status"] = json!({"phase": p});
        }
        serde_json::from_value(m).unwrap()
    }

    #[test]
    fn rates_from_resources_or_template_defaults() {
        let vm = machine(json!({"image": {"path": "/x.qcow2"}, "resources": {"cpu": "2", "memory": "4Gi"}}), None);
        assert_eq!(rates(&vm), Rates { vcpus: 2.0, memory_gib: 4.0 });
        let sb = machine(json!({"sandbox": {"templateName": "busybox"}}), None);
        assert_eq!(rates(&sb), Rates { vcpus: 1.0, memory_gib: 0.5 });
        let half = machine(json!({"sandbox": {}, "resources": {"cpu": "500m", "memory": "256Mi"}}), None);
        assert_eq!(rates(&half), Rates { vcpus: 0.5, memory_gib: 0.25 });
        // Shrunk under a running VM: billed at the size its node started it with until then.
        let mut shrunk =
            machine(json!({"image": {"path": "/x.qcow2"}, "resources": {"cpu": "1", "memory": "1Gi"}}), None);
        shrunk.status = serde_json::from_value(json!({"resources": {"cpu": "2", "memory": "4Gi"}})).unwrap();
        assert_eq!(rates(&shrunk), Rates { vcpus: 2.0, memory_gib: 4.0 });
    }

    #[test]
    fn running_accrues_active_time_and_resources() {
        let a = accrue(t("2026-01-01T00:00:00Z"), t("2026-01-01T00:00:30Z"), UsageClass::Active, ONE).unwrap();
        assert_eq!((a.active_seconds, a.suspended_seconds), (30, 0));
        assert_eq!((a.vcpu_seconds, a.memory_gib_seconds), (60.0, 120.0));
        assert_eq!(a.end, t("2026-01-01T00:00:30Z"));
    }

    #[test]
    fn suspended_phases_accrue_suspended_time_only() {
        for p in ["Stopped", "Paused", "Hibernated", "Halted"] {
            let m = machine(json!({"sandbox": {"templateName": "busybox"}}), Some(p));
            let a = accrue(t("2026-01-01T00:00:00Z"), t("2026-01-01T00:00:10Z"), class_of(Some(&m)), ONE).unwrap();
            assert_eq!(
                (a.active_seconds, a.suspended_seconds, a.vcpu_seconds, a.memory_gib_seconds),
                (0, 10, 0.0, 0.0)
            );
        }
    }

    #[test]
    fn other_phases_and_missing_machines_advance_the_clock_only() {
        for p in [Some("Starting"), Some("Pending"), Some("Migrating"), Some("Failed"), None] {
            let m = machine(json!({"sandbox": {"templateName": "busybox"}}), p);
            let a = accrue(t("2026-01-01T00:00:00Z"), t("2026-01-01T00:00:10Z"), class_of(Some(&m)), ONE).unwrap();
            assert_eq!((a.active_seconds, a.suspended_seconds, a.vcpu_seconds), (0, 0, 0.0), "{p:?}");
            assert_eq!(a.end, t("2026-01-01T00:00:10Z"));
        }
        let a = accrue(t("2026-01-01T00:00:00Z"), t("2026-01-01T00:00:10Z"), class_of(None), ONE).unwrap();
        assert_eq!((a.active_seconds, a.suspended_seconds), (0, 0));
    }

    #[test]
    fn fractions_carry_over_so_nothing_drifts() {
        // Sample every 1.3 s for 100 intervals: the clock advances by whole seconds only and
        // the total equals the whole seconds elapsed.
        let start = t("2026-01-01T00:00:00Z");
        let mut usage = ClaimUsage::default();
        let mut from = start;
        let mut now = start;
        for _ in 0..100 {
            now += chrono::Duration::milliseconds(1300);
            if let Some(a) = accrue(from, now, UsageClass::Active, ONE) {
                usage = apply(&usage, &a);
                from = a.end;
            }
        }
        assert_eq!(usage.active_seconds, 130);
        assert_eq!(usage.vcpu_seconds, 260.0);
        assert_eq!(from_time(usage.last_accrual_time.as_ref().unwrap()), Some(start + chrono::Duration::seconds(130)));
        assert!(accrue(from, from + chrono::Duration::milliseconds(999), UsageClass::Active, ONE).is_none());
    }

    #[test]
    fn baseline_prefers_history_then_status_then_bound_time() {
        let now = t("2026-01-01T01:00:00Z");
        let bound = MachineClaimStatus {
            phase: Some(ClaimPhase::Bound),
            bound_time: to_time(t("2026-01-01T00:00:00Z")),
            ..Default::default()
        };
        let (u, from) = baseline(&bound, None, now);
        assert_eq!((u.active_seconds, from), (0, t("2026-01-01T00:00:00Z")));

        let mut with_usage = bound.clone();
        with_usage.usage = Some(ClaimUsage {
            active_seconds: 60,
            last_accrual_time: to_time(t("2026-01-01T00:01:00Z")),
            ..Default::default()
        });
        let (u, from) = baseline(&with_usage, None, now);
        assert_eq!((u.active_seconds, from), (60, t("2026-01-01T00:01:00Z")));

        // The controller died after inserting 00:01:00–00:01:30 but before patching the status:
        // the history is ahead, and the next interval starts where it ends, so 30 s count once.
        let h = ClaimHistory {
            totals: UsageTotals {
                active_seconds: 90,
                suspended_seconds: 0,
                vcpu_seconds: 180.0,
                memory_gib_seconds: 360.0,
            },
            accrued_until: t("2026-01-01T00:01:30Z"),
        };
        let (u, from) = baseline(&with_usage, Some(&h), now);
        assert_eq!((u.active_seconds, u.vcpu_seconds, from), (90, 180.0, t("2026-01-01T00:01:30Z")));
        let a = accrue(from, t("2026-01-01T00:02:00Z"), UsageClass::Active, ONE).unwrap();
        assert_eq!(apply(&u, &a).active_seconds, 120);

        let unbound = MachineClaimStatus::default();
        assert_eq!(baseline(&unbound, None, now).1, now);
    }

    #[test]
    fn intervals_stop_at_midnight_utc() {
        assert_eq!(day_end(t("2026-01-01T23:59:59.5Z")), t("2026-01-02T00:00:00Z"));
        assert_eq!(day_end(t("2026-01-02T00:00:00Z")), t("2026-01-03T00:00:00Z"));
        let from = t("2026-01-01T23:00:00Z");
        let a = accrue(from, t("2026-01-02T05:00:00Z").min(day_end(from)), UsageClass::Active, ONE).unwrap();
        assert_eq!((a.active_seconds, a.end), (3600, t("2026-01-02T00:00:00Z")));
    }

    #[test]
    fn usage_compares_times_to_the_second_a_status_holds() {
        let at = |ms: i64| Some(Time(k8s_openapi::jiff::Timestamp::from_millisecond(ms).unwrap()));
        let history = ClaimUsage { active_seconds: 30, last_accrual_time: at(1_796_418_750_826), ..Default::default() };
        // As the status holds it after a write: the same instant, without its milliseconds.
        let written: ClaimUsage = serde_json::from_value(serde_json::to_value(&history).unwrap()).unwrap();
        assert_eq!(written.last_accrual_time, at(1_796_418_750_000));
        assert!(same_usage(&history, &written));
        assert!(!same_usage(&history, &ClaimUsage { last_accrual_time: at(1_796_418_751_000), ..history.clone() }));
    }

    #[test]
    fn usage_compares_floats_to_rounding() {
        let a = ClaimUsage { active_seconds: 3, vcpu_seconds: 0.1 + 0.2, ..Default::default() };
        let b = ClaimUsage { vcpu_seconds: 0.3, ..a.clone() };
        assert!(same_usage(&a, &b));
        assert!(!same_usage(&a, &ClaimUsage { active_seconds: 4, ..b.clone() }));
    }

    #[test]
    fn next_accrual_instant() {
        let from = t("2026-01-01T00:00:00Z");
        assert_eq!(next_due(from, t("2026-01-01T00:00:10Z"), Duration::from_secs(30)), Duration::from_secs(20));
        assert_eq!(next_due(from, t("2026-01-01T00:01:00Z"), Duration::from_secs(30)), MIN_REQUEUE);
    }
}
