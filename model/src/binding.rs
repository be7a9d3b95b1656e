//! Binding a MachineClaim to exactly one warm member of its pool: the one algorithm behind both
//! places a claim binds — the API, inside the claim's create request, and the claim controller
//! for any claim still unbound after that (no warm member then, or a cluster's own API server).
//! The caller brings the I/O ([`BindingStore`]) and the clock. Exactly once comes from the
//! member's resourceVersion: the patch that takes a member applies only to the version that was
//! seen warm and unclaimed.

use std::future::Future;
use std::hash::{DefaultHasher, Hash, Hasher};

use kube::ResourceExt;
use serde_json::{Value, json};

use crate::keys::{annotations, labels, metrics, reasons};
use crate::quota;
use crate::warm::{MemberView, is_warm, rfc3339, template_paused, warm_phase};
use crate::{ClaimPhase, LaunchType, Machine, MachineClaim, MachinePool};

/// The condition a claim reports its binding in.
pub const BOUND_CONDITION: &str = "Bound";
pub const NO_WARM_MEMBER: &str = "NoWarmMember";
pub const POOL_NOT_FOUND: &str = "PoolNotFound";
pub use crate::quota::QUOTA_EXCEEDED;
/// A claim the API is binding in its own create request: the claim is stored with this reason
/// first, and the controller leaves it alone for [`BINDING_GRACE_MS`], so the two never race to
/// take two members for one claim. Past it (the API stopped mid-way) the controller binds it.
pub const BINDING: &str = "Binding";
pub const BINDING_GRACE_MS: i64 = 5_000;

/// What binding reads and writes.
pub trait BindingStore: Sync {
    type Error: Send;
    /// The live Machines of namespace `ns` labelled for claim `claim`.
    fn claimed_by(&self, ns: &str, claim: &str) -> impl Future<Output = Result<Vec<Machine>, Self::Error>> + Send;
    fn pool(&self, ns: &str, name: &str) -> impl Future<Output = Result<Option<MachinePool>, Self::Error>> + Send;
    /// The live Machines of namespace `ns` labelled for pool `pool` (its members among them,
    /// [`crate::warm::is_member_of`]).
    fn labelled_for_pool(&self, ns: &str, pool: &str)
    -> impl Future<Output = Result<Vec<Machine>, Self::Error>> + Send;
    /// Applies the merge patch `patch` to Machine `ns/name` if it still has the resourceVersion
    /// the patch names: false when it has changed since, or is gone. `bound` is the claim's
    /// status once bound to it: a store that writes the claim in the same transaction (the API,
    /// binding in the claim's create request) stores it there; the controller writes it after.
    fn take(
        &self,
        ns: &str,
        name: &str,
        patch: &Value,
        bound: &Value,
    ) -> impl Future<Output = Result<bool, Self::Error>> + Send;
}

/// How a binding attempt ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Binding {
    /// Bound to `machine`; its lifecycle (and the claim's boundTime) starts at `at`.
    Bound {
        machine: String,
        at: String,
    },
    PoolNotFound,
    NoWarmMember,
    /// No warm member, and the pool cannot make one: its namespace's quota refused it (the
    /// pool's condition's message says which limit).
    QuotaExceeded(String),
}

/// Binds `claim` to a warm member of its pool, or says why it cannot now. A member already
/// labelled for the claim (a binding whose status write was lost) is its binding.
pub async fn bind<S: BindingStore>(store: &S, claim: &MachineClaim, now_ms: i64) -> Result<Binding, S::Error> {
    let ns = claim.namespace().unwrap_or_default();
    let name = claim.name_any();
    let at = rfc3339(now_ms);
    // The three reads at once: a claim's bind is on its create request's path.
    let pool_name = claim.spec.pool_name.as_str();
    let (claimed, pool, labelled) = futures::try_join!(
        store.claimed_by(&ns, &name),
        store.pool(&ns, pool_name),
        store.labelled_for_pool(&ns, pool_name)
    )?;
    if let Some(m) = claimed.into_iter().find(|m| m.metadata.deletion_timestamp.is_none()) {
        let at = m.annotations().get(annotations::LIFECYCLE_START).cloned().unwrap_or(at);
        return Ok(Binding::Bound { machine: m.name_any(), at });
    }
    let Some(pool) = pool else { return Ok(Binding::PoolNotFound) };
    let members: Vec<Machine> = labelled.into_iter().filter(|m| crate::warm::is_member_of(m, &pool)).collect();
    let want = warm_phase(pool.spec.warm_power_state, template_paused(&pool));
    let warm: Vec<String> = members
        .iter()
        .filter(|m| is_warm(&MemberView::of(m), want, pool.spec.warmup_seconds, now_ms))
        .map(|m| m.name_any())
        .collect();
    for member in try_order(warm, &name) {
        let Some(m) = members.iter().find(|m| m.name_any() == member) else { continue };
        if store.take(&ns, &member, &take_patch(m, claim, &at), &bound_status(claim, &member, &at)).await? {
            return Ok(Binding::Bound { machine: member, at });
        }
        // Another claim (or the pool) changed it first: try the next.
    }
    Ok(match quota_refusal(&pool) {
        Some(why) => Binding::QuotaExceeded(quota_exceeded_message(&pool.name_any(), why)),
        None => Binding::NoWarmMember,
    })
}

/// Why the pool cannot make the members it wants, when its namespace's quota refused them.
fn quota_refusal(pool: &MachinePool) -> Option<&str> {
    let conditions = &pool.status.as_ref()?.conditions;
    conditions.iter().find(|c| c.type_ == quota::QUOTA_EXCEEDED && c.status == "True").map(|c| c.message.as_str())
}

pub fn quota_exceeded_message(pool: &str, why: &str) -> String {
    format!("pool {pool} has no warm member and cannot make one: {why}; the claim binds when the quota allows one")
}

/// The patch that takes `member` for `claim`: only the resourceVersion seen warm and unclaimed,
/// labelled for the claim, its lifecycle starting now (no suspension from before stays; the
/// claim is its first activity, so its first guest call has no stamp to write), asked to run,
/// and given the claim's environment over its own (a merge patch merges the two maps).
pub fn take_patch(member: &Machine, claim: &MachineClaim, at: &str) -> Value {
    let mut patch = json!({
        "metadata": {
            "resourceVersion": member.resource_version(),
            "labels": {labels::CLAIM: claim.name_any()},
            "annotations": {
                annotations::LIFECYCLE_START: at,
                annotations::LAST_ACTIVITY: at,
                annotations::IDLE_SUSPENDED: null,
            },
        },
        "spec": {"powerState": "Running"},
    });
    if !claim.spec.env.is_empty() {
        patch["spec"]["env"] = json!(claim.spec.env);
    }
    if !claim.spec.secret_env.is_empty() {
        patch["spec"]["secretEnv"] = json!(claim.spec.secret_env);
    }
    patch
}

/// The order a claim tries warm members in: rotated by a hash of its name so many claims
/// racing spread over the members instead of all fighting for the first.
pub fn try_order(mut warm: Vec<String>, claim: &str) -> Vec<String> {
    warm.sort();
    if warm.is_empty() {
        return warm;
    }
    let mut h = DefaultHasher::new();
    claim.hash(&mut h);
    let k = (h.finish() % warm.len() as u64) as usize;
    warm.rotate_left(k);
    warm
}

pub fn no_warm_member_message(pool: &str) -> String {
    format!("pool {pool} has no warm member right now; the claim binds when one is ready")
}

pub fn pool_not_found_message(pool: &str, ns: &str) -> String {
    format!("MachinePool {pool} does not exist in namespace {ns}; the claim binds once it exists and has a warm member")
}

pub fn bound_message(claim: &MachineClaim, machine: &str) -> String {
    format!("bound Machine {machine} of pool {}", claim.spec.pool_name)
}

/// The claim's conditions with the Bound condition replaced by `bound`.
fn with_bound_condition(claim: &MachineClaim, bound: Value) -> Vec<Value> {
    let status = claim.status.as_ref();
    let mut conditions: Vec<Value> = status
        .map(|s| s.conditions.iter().filter(|c| c.type_ != BOUND_CONDITION).map(|c| json!(c)).collect())
        .unwrap_or_default();
    conditions.push(bound);
    conditions
}

/// How `claim`, binding now, was served: Cold when it was ever told to wait (no warm member,
/// or no pool), Warm otherwise. Decided from the claim's own status, which only the API and the
/// controllers write, so a restart or another binder decides the same.
pub fn launch_type(claim: &MachineClaim) -> LaunchType {
    let waited = claim.status.as_ref().is_some_and(|s| {
        s.conditions.iter().any(|c| {
            c.type_ == BOUND_CONDITION && [NO_WARM_MEMBER, POOL_NOT_FOUND, QUOTA_EXCEEDED].contains(&c.reason.as_str())
        })
    });
    if waited { LaunchType::Cold } else { LaunchType::Warm }
}

/// Seconds from the claim's creation to `at_ms`.
pub fn wait_seconds(claim: &MachineClaim, at_ms: i64) -> f64 {
    let created = claim.metadata.creation_timestamp.as_ref().map_or(at_ms, |t| t.0.as_millisecond());
    (at_ms - created).max(0) as f64 / 1000.0
}

/// Upper bounds of the claim wait histogram, in seconds: a warm claim takes milliseconds, a
/// cold one a member's boot (seconds for a sandbox, a minute or more for a VM under TCG).
const WAIT_BUCKETS: &[f64] = &[0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0];

/// Stamps a claim stored with a bound status ([`bound_status`]) with the launch-type label.
pub fn label_launch_type(claim: &mut Value) {
    if let Some(launch) = claim["status"]["launchType"].as_str().map(str::to_string) {
        claim["metadata"]["labels"][labels::LAUNCH_TYPE] = Value::String(launch);
    }
}

/// How a claim binding at some instant was served: its `status.launchType` and
/// `status.waitSeconds`, and what the pool metrics count.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Served {
    pub launch_type: LaunchType,
    pub wait_seconds: f64,
}

impl Served {
    /// `claim` binding at `at` (RFC 3339).
    pub fn of(claim: &MachineClaim, at: &str) -> Self {
        let at_ms = crate::warm::parse_ms(at).unwrap_or_default();
        Served { launch_type: launch_type(claim), wait_seconds: wait_seconds(claim, at_ms) }
    }

    /// Counts it for `pool` (wherever the claim was bound: the API or the controller), once
    /// its bound status is stored.
    pub fn record(&self, pool: &str) {
        let m = crate::metrics::global();
        m.describe(metrics::POOL_CLAIMS_TOTAL, "Claims bound, by pool and launch type (Warm: a member was ready).");
        m.describe(metrics::POOL_CLAIM_WAIT_SECONDS, "Seconds from a claim's creation to its binding, by pool.");
        m.add(metrics::POOL_CLAIMS_TOTAL, &[("pool", pool), ("launch_type", self.launch_type.as_str())], 1.0);
        m.observe(metrics::POOL_CLAIM_WAIT_SECONDS, &[("pool", pool)], WAIT_BUCKETS, self.wait_seconds);
    }
}

/// The status of `claim` bound to `machine` at `at`.
pub fn bound_status(claim: &MachineClaim, machine: &str, at: &str) -> Value {
    let conditions = with_bound_condition(
        claim,
        json!({
            "type": BOUND_CONDITION, "status": "True", "reason": reasons::BOUND,
            "message": bound_message(claim, machine),
            "lastTransitionTime": at, "observedGeneration": claim.metadata.generation,
        }),
    );
    let served = Served::of(claim, at);
    json!({
        "phase": ClaimPhase::Bound, "machineName": machine, "boundTime": at, "conditions": conditions,
        "launchType": served.launch_type, "waitSeconds": served.wait_seconds,
    })
}

/// The status of `claim` waiting for `reason` since `now`, or None when it says so already.
pub fn pending_status(claim: &MachineClaim, reason: &str, message: String, now: &str) -> Option<Value> {
    let status = claim.status.clone().unwrap_or_default();
    let same = status.phase == Some(ClaimPhase::Pending)
        && status.conditions.iter().any(|c| c.type_ == BOUND_CONDITION && c.reason == reason && c.message == message);
    if same {
        return None;
    }
    let conditions = with_bound_condition(
        claim,
        json!({
            "type": BOUND_CONDITION, "status": "False", "reason": reason, "message": message,
            "lastTransitionTime": now, "observedGeneration": claim.metadata.generation,
        }),
    );
    Some(json!({"phase": ClaimPhase::Pending, "conditions": conditions}))
}

pub fn binding_message(pool: &str) -> String {
    format!("binding a warm member of pool {pool}")
}

/// Until when (Unix ms) the API's create request has the binding of `claim` in hand.
pub fn binding_until(claim: &MachineClaim) -> Option<i64> {
    let status = claim.status.as_ref()?;
    if status.phase != Some(ClaimPhase::Pending) {
        return None;
    }
    let c = status.conditions.iter().find(|c| c.type_ == BOUND_CONDITION && c.reason == BINDING)?;
    Some(c.last_transition_time.as_ref()?.0.as_millisecond() + BINDING_GRACE_MS)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn try_order_is_a_rotation_of_all_warm_members() {
        let warm: Vec<String> = ["c", "a", "b"].iter().map(|s| s.to_string()).collect();
        for claim in ["x", "y", "claim-7"] {
            let o = try_order(warm.clone(), claim);
            assert_eq!(o, try_order(warm.clone(), claim), "stable for one claim");
            let mut sorted = o.clone();
            sorted.sort();
            assert_eq!(sorted, vec!["a", "b", "c"]);
            let i = o.iter().position(|s| s == "a").unwrap();
            assert_eq!(o[(i + 1) % 3], "b");
        }
        assert!(try_order(Vec::new(), "x").is_empty());
    }

    #[test]
    fn a_claim_being_bound_by_the_api_is_left_to_it_for_the_grace_only() {
        let mut claim = MachineClaim::new("c", crate::MachineClaimSpec { pool_name: "p".into(), ..Default::default() });
        assert_eq!(binding_until(&claim), None, "no status: nobody is binding it");
        let now = "2026-01-01T00:00:00Z";
        let status = pending_status(&claim, BINDING, binding_message("p"), now).unwrap();
        claim.status = Some(serde_json::from_value(status).unwrap());
        let t0 = crate::warm::parse_ms(now).unwrap();
        assert_eq!(binding_until(&claim), Some(t0 + BINDING_GRACE_MS));
        assert!(pending_status(&claim, BINDING, binding_message("p"), now).is_none(), "said already");
        let other = pending_status(&claim, NO_WARM_MEMBER, no_warm_member_message("p"), now).unwrap();
        claim.status = Some(serde_json::from_value(other).unwrap());
        assert_eq!(binding_until(&claim), None, "the API gave up: the controller binds it");
        let bound = bound_status(&claim, "m", now);
        claim.status = Some(serde_json::from_value(bound).unwrap());
        assert_eq!(binding_until(&claim), None);
        let s = claim.status.as_ref().unwrap();
        assert_eq!((s.phase, s.machine_name.as_deref()), (Some(ClaimPhase::Bound), Some("m")));
        assert_eq!(s.conditions.iter().filter(|c| c.type_ == BOUND_CONDITION).count(), 1);
    }

    #[test]
    fn a_claim_that_was_told_to_wait_is_cold_and_says_how_long() {
        let mut claim = MachineClaim::new("c", crate::MachineClaimSpec { pool_name: "p".into(), ..Default::default() });
        let created = "2026-01-01T00:00:00Z";
        claim.metadata.creation_timestamp =
            Some(k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(created.parse().unwrap()));
        let status = |claim: &MachineClaim, at: &str| -> crate::MachineClaimStatus {
            serde_json::from_value(bound_status(claim, "m", at)).unwrap()
        };
        let warm = status(&claim, "2026-01-01T00:00:00.012Z");
        assert_eq!((warm.launch_type, warm.wait_seconds), (Some(LaunchType::Warm), Some(0.012)));
        // The API's own "Binding" while it binds in the create request is not a wait.
        claim.status = Some(
            serde_json::from_value(pending_status(&claim, BINDING, binding_message("p"), created).unwrap()).unwrap(),
        );
        assert_eq!(status(&claim, "2026-01-01T00:00:00.020Z").launch_type, Some(LaunchType::Warm));
        for reason in [NO_WARM_MEMBER, POOL_NOT_FOUND, QUOTA_EXCEEDED] {
            let pending = pending_status(&claim, reason, "wait".into(), created).unwrap();
            let mut waited = claim.clone();
            waited.status = Some(serde_json::from_value(pending).unwrap());
            let cold = status(&waited, "2026-01-01T00:00:07.5Z");
            assert_eq!((cold.launch_type, cold.wait_seconds), (Some(LaunchType::Cold), Some(7.5)), "{reason}");
        }
    }
}
