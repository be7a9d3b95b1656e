//! Which pool member is warm (claimable): the pure decisions the pool controller and claim
//! binding share. Times are Unix milliseconds; the caller brings the clock.

use kube::ResourceExt;

use crate::keys::labels;
use crate::{Machine, MachinePhase, MachinePool, PowerState, WarmPowerState};

/// Set by the pool controller when it first sees a member Running: where warm-up counts from.
pub const WARM_SINCE: &str = "kairon.zyvor.dev/warm-since";

/// Set by the pool controller on each member it makes, to the millisecond (creationTimestamp has
/// whole seconds, and a member's boot, which sizes an autoscaled pool, takes about one).
pub const CREATED_AT: &str = "kairon.zyvor.dev/created-at";

/// A pool member as the pure decisions see it. Times are Unix milliseconds.
#[derive(Clone, Debug, PartialEq)]
pub struct MemberView {
    pub name: String,
    pub created_ms: i64,
    pub claimed: bool,
    pub deleting: bool,
    pub phase: Option<MachinePhase>,
    pub power_state: PowerState,
    pub warm_since_ms: Option<i64>,
}

impl MemberView {
    pub fn of(m: &Machine) -> MemberView {
        MemberView {
            name: m.name_any(),
            created_ms: m
                .annotations()
                .get(CREATED_AT)
                .and_then(|s| parse_ms(s))
                .or_else(|| m.metadata.creation_timestamp.as_ref().map(|t| t.0.as_millisecond()))
                .unwrap_or(0),
            claimed: m.labels().contains_key(labels::CLAIM),
            deleting: m.metadata.deletion_timestamp.is_some(),
            phase: m.status.as_ref().and_then(|s| s.phase),
            power_state: m.spec.desired_power_state(),
            warm_since_ms: m.annotations().get(WARM_SINCE).and_then(|s| parse_ms(s)),
        }
    }

    /// When warm-up ends, if the member has started it.
    pub fn warm_at_ms(&self, warmup_seconds: i64) -> Option<i64> {
        self.warm_since_ms.map(|t| t + warmup_seconds.max(0) * 1000)
    }
}

pub fn parse_ms(s: &str) -> Option<i64> {
    s.parse::<k8s_openapi::jiff::Timestamp>().ok().map(|t| t.as_millisecond())
}

pub fn rfc3339(ms: i64) -> String {
    k8s_openapi::jiff::Timestamp::from_millisecond(ms).map(|t| t.to_string()).unwrap_or_default()
}

/// The phase a warm member is in: Paused for a Paused pool, and for a Running pool whose
/// template itself asks for Paused (the pool leaves those Paused); Running otherwise.
pub fn warm_phase(warm: WarmPowerState, template_paused: bool) -> MachinePhase {
    match warm {
        WarmPowerState::Paused => MachinePhase::Paused,
        WarmPowerState::Running if template_paused => MachinePhase::Paused,
        WarmPowerState::Running => MachinePhase::Running,
    }
}

/// Whether the pool's template itself asks for `powerState: Paused`.
pub fn template_paused(pool: &MachinePool) -> bool {
    pool.spec.template.spec.power_state == Some(PowerState::Paused)
}

/// Whether a member can be claimed now: unclaimed, past warm-up, and in the warm phase
/// ([`warm_phase`]).
pub fn is_warm(m: &MemberView, want: MachinePhase, warmup_seconds: i64, now_ms: i64) -> bool {
    if m.claimed || m.deleting {
        return false;
    }
    let past = m.warm_at_ms(warmup_seconds).is_some_and(|t| t <= now_ms);
    past && m.phase == Some(want)
}

/// Whether `m` is a member of `pool`: labelled with it and, once the pool has a uid, owned by
/// it (a Machine a tenant labels with a pool's name is not one of its members).
pub fn is_member_of(m: &Machine, pool: &MachinePool) -> bool {
    let labelled = m.labels().get(labels::POOL).is_some_and(|p| *p == pool.name_any());
    let uid = pool.metadata.uid.as_ref();
    labelled && (uid.is_none() || m.owner_references().iter().any(|o| Some(&o.uid) == uid))
}
