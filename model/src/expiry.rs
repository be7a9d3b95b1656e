//! When a Machine's life ends, and how `extend` moves that end.
//!
//! Up to three deadlines apply: `spec.lifecycle.maxLifetimeSeconds` (from creation, or from a
//! claimed pool member's lifecycle start), `spec.ttlSeconds` (from creation) and the binding
//! MachineClaim's `spec.ttlSeconds` (from its bound time). The earliest is the Machine's end,
//! recorded as `status.lifecycle.expiresAt`. A warm pool member has none: its life starts when
//! a claim binds it.

use k8s_openapi::jiff::{SignedDuration, Timestamp};

use crate::duration;
use crate::keys::{annotations, labels};
use crate::{Machine, MachineClaim};

/// Which setting a deadline comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Limit {
    /// The Machine's `spec.lifecycle.maxLifetimeSeconds`.
    MaxLifetime,
    /// The Machine's `spec.ttlSeconds`.
    Ttl,
    /// The binding MachineClaim's `spec.ttlSeconds`: its end releases the claim, which deletes
    /// the Machine.
    ClaimTtl,
}

/// One deadline: `seconds` after `since`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct End {
    pub limit: Limit,
    pub seconds: i64,
    pub since: Timestamp,
    /// What `since` is, for messages: "creation", "lifecycle start", "binding".
    pub from: &'static str,
}

impl End {
    pub fn at(&self) -> Timestamp {
        plus(self.since, self.seconds)
    }

    /// The Event note when this deadline deletes the Machine.
    pub fn why(&self) -> String {
        let took = duration::exact(self.seconds.max(0));
        match self.limit {
            Limit::MaxLifetime => format!("max lifetime of {took} since {} reached", self.from),
            Limit::Ttl => format!("ttlSeconds of {took} since creation reached"),
            Limit::ClaimTtl => format!("the claim's ttlSeconds of {took} since binding reached"),
        }
    }
}

/// `t` plus `secs` seconds, saturating.
pub fn plus(t: Timestamp, secs: i64) -> Timestamp {
    t.checked_add(SignedDuration::from_secs(secs)).unwrap_or(Timestamp::MAX)
}

/// A timestamp annotation of `m`, if set and well-formed.
pub fn annotation_time(m: &Machine, key: &str) -> Option<Timestamp> {
    m.metadata.annotations.as_ref()?.get(key).and_then(|v| v.trim().parse().ok())
}

fn has_label(m: &Machine, key: &str) -> bool {
    m.metadata.labels.as_ref().is_some_and(|l| l.contains_key(key))
}

/// A warm pool member (pool label, no claim label): no lifetime runs until a claim binds it.
/// Both labels are the controllers' to write (`api/src/guard.rs`), so a tenant can neither make
/// its own Machine exempt nor strip a member of its exemption.
pub fn warm_pool_member(m: &Machine) -> bool {
    has_label(m, labels::POOL) && !has_label(m, labels::CLAIM)
}

/// A pool member bound to a MachineClaim.
pub fn claimed_pool_member(m: &Machine) -> bool {
    has_label(m, labels::POOL) && has_label(m, labels::CLAIM)
}

/// The name of the MachineClaim bound to `m`, if it is a claimed pool member.
pub fn claim_name(m: &Machine) -> Option<&str> {
    if !claimed_pool_member(m) {
        return None;
    }
    m.metadata.labels.as_ref()?.get(labels::CLAIM).map(String::as_str)
}

/// Whether `claim` is the one bound to `m` (its status names the Machine): only then does
/// its TTL end the Machine.
pub fn binds(claim: &MachineClaim, m: &Machine) -> bool {
    let bound = claim.status.as_ref().and_then(|s| s.machine_name.as_deref());
    bound.is_some() && bound == m.metadata.name.as_deref()
}

/// The Machine's own deadlines (max lifetime and ttlSeconds), none for a warm pool member.
pub fn machine_ends(m: &Machine) -> Vec<End> {
    let mut ends = Vec::new();
    if warm_pool_member(m) {
        return ends;
    }
    let created = m.metadata.creation_timestamp.as_ref().map(|t| t.0);
    if let Some(max) = m.spec.lifecycle.as_ref().and_then(|l| l.max_lifetime_seconds) {
        let claimed_start =
            if claimed_pool_member(m) { annotation_time(m, annotations::LIFECYCLE_START) } else { None };
        let start = match (claimed_start, created) {
            (Some(s), _) => Some((s, "lifecycle start")),
            (None, c) => c.map(|c| (c, "creation")),
        };
        if let Some((since, from)) = start {
            ends.push(End { limit: Limit::MaxLifetime, seconds: max, since, from });
        }
    }
    if let (Some(ttl), Some(since)) = (m.spec.ttl_seconds, created) {
        ends.push(End { limit: Limit::Ttl, seconds: ttl, since, from: "creation" });
    }
    ends
}

/// The binding claim's deadline: its `ttlSeconds` from its bound time.
pub fn claim_end(claim: &MachineClaim) -> Option<End> {
    let ttl = claim.spec.ttl_seconds?;
    let since = claim.status.as_ref()?.bound_time.as_ref()?.0;
    Some(End { limit: Limit::ClaimTtl, seconds: ttl, since, from: "binding" })
}

/// Every deadline of `m`, with its binding claim's when given.
pub fn ends(m: &Machine, claim: Option<&MachineClaim>) -> Vec<End> {
    let mut all = machine_ends(m);
    if !warm_pool_member(m) {
        all.extend(claim.and_then(claim_end));
    }
    all
}

/// The earliest deadline.
pub fn earliest(ends: &[End]) -> Option<&End> {
    ends.iter().min_by_key(|e| e.at())
}

/// The `spec.ttlSeconds` that ends `m` `seconds` after `now` (ttlSeconds counts from creation),
/// rounded up to a whole second; None without a creation time.
pub fn ttl_from_now(m: &Machine, now: Timestamp, seconds: i64) -> Option<i64> {
    let created = m.metadata.creation_timestamp.as_ref()?.0;
    let ms = plus(now, seconds).as_millisecond() - created.as_millisecond();
    Some((ms + 999).div_euclid(1000).max(1))
}

/// The most `extend` moves an end at once: a year.
pub const MAX_EXTEND_SECONDS: i64 = 365 * 24 * 3600;

/// What an extension changes: the new seconds of each setting whose end must move, and the new
/// end.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Extension {
    pub expires_at: Timestamp,
    pub max_lifetime_seconds: Option<i64>,
    pub ttl_seconds: Option<i64>,
    pub claim_ttl_seconds: Option<i64>,
}

/// Moves the end of `ends` `seconds` later: every deadline before the new end is lengthened to
/// it, later ones are kept. `None` when there is no deadline to move.
pub fn extend(ends: &[End], seconds: i64) -> Option<Extension> {
    extend_to(ends, plus(earliest(ends)?.at(), seconds))
}

/// What makes `ends` end no sooner than `expires_at`: every deadline before it is lengthened to
/// it, later ones are kept. Applied again once done, it changes nothing (`expires_at` is a time,
/// not a distance). `None` when there is no deadline.
pub fn extend_to(ends: &[End], expires_at: Timestamp) -> Option<Extension> {
    earliest(ends)?;
    let mut ext = Extension { expires_at, max_lifetime_seconds: None, ttl_seconds: None, claim_ttl_seconds: None };
    for end in ends.iter().filter(|e| e.at() < expires_at) {
        // Whole seconds, rounded up so the new end is never before the promised one.
        let ms = expires_at.as_millisecond() - end.since.as_millisecond();
        let needed = (ms + 999).div_euclid(1000).max(end.seconds);
        let slot = match end.limit {
            Limit::MaxLifetime => &mut ext.max_lifetime_seconds,
            Limit::Ttl => &mut ext.ttl_seconds,
            Limit::ClaimTtl => &mut ext.claim_ttl_seconds,
        };
        *slot = Some(needed);
    }
    Some(ext)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn t(s: &str) -> Timestamp {
        s.parse().unwrap()
    }

    fn machine(spec: serde_json::Value, labels: serde_json::Value, annotations: serde_json::Value) -> Machine {
        serde_json::from_value(json!({
            "apiVersion": "kairon.zyvor.dev/v1", "kind": "Machine",
            "metadata": {"name": "m", "namespace": "default", "creationTimestamp": "2026-01-01T00:00:00Z",
                         "labels": labels, "annotations": annotations},
            "spec": spec,
        }))
        .unwrap()
    }

    fn claim(ttl: Option<i64>, bound: Option<&str>) -> MachineClaim {
        serde_json::from_value(json!({
            "apiVersion": "kairon.zyvor.dev/v1", "kind": "MachineClaim",
            "metadata": {"name": "c", "namespace": "default"},
            "spec": {"poolName": "p", "ttlSeconds": ttl},
            "status": {"phase": "Bound", "boundTime": bound},
        }))
        .unwrap()
    }

    const CLAIMED: &str = r#"{"kairon.zyvor.dev/pool": "p", "kairon.zyvor.dev/claim": "c"}"#;

    #[test]
    fn the_earliest_deadline_is_the_end() {
        let m = machine(json!({"lifecycle": {"maxLifetimeSeconds": 600}, "ttlSeconds": 300}), json!({}), json!({}));
        let all = ends(&m, None);
        let end = earliest(&all).unwrap();
        assert_eq!(end.limit, Limit::Ttl);
        assert_eq!(end.at(), t("2026-01-01T00:05:00Z"));
        assert_eq!(end.why(), "ttlSeconds of 5m0s since creation reached");
        assert!(ends(&machine(json!({}), json!({}), json!({})), None).is_empty());
    }

    #[test]
    fn a_claimed_member_counts_from_its_lifecycle_start_and_its_claim() {
        let labels: serde_json::Value = serde_json::from_str(CLAIMED).unwrap();
        let m = machine(
            json!({"lifecycle": {"maxLifetimeSeconds": 3600}}),
            labels,
            json!({"kairon.zyvor.dev/lifecycle-start": "2026-01-01T01:00:00Z"}),
        );
        assert_eq!(claim_name(&m), Some("c"));
        let c = claim(Some(600), Some("2026-01-01T01:00:00Z"));
        let all = ends(&m, Some(&c));
        let end = earliest(&all).unwrap();
        assert_eq!((end.limit, end.at()), (Limit::ClaimTtl, t("2026-01-01T01:10:00Z")));
        assert_eq!(end.why(), "the claim's ttlSeconds of 10m0s since binding reached");
        // Unbound or TTL-less claims add no deadline.
        assert_eq!(ends(&m, Some(&claim(None, Some("2026-01-01T01:00:00Z")))).len(), 1);
        assert_eq!(ends(&m, Some(&claim(Some(5), None))).len(), 1);
    }

    #[test]
    fn a_warm_member_has_no_deadline() {
        let m =
            machine(json!({"lifecycle": {"maxLifetimeSeconds": 1}}), json!({"kairon.zyvor.dev/pool": "p"}), json!({}));
        assert!(ends(&m, Some(&claim(Some(1), Some("2026-01-01T00:00:00Z")))).is_empty());
        assert_eq!(claim_name(&m), None);
        assert_eq!(extend(&[], 60), None);
    }

    #[test]
    fn extending_to_an_end_again_once_it_is_reached_changes_nothing() {
        let m = machine(json!({"lifecycle": {"maxLifetimeSeconds": 600}, "ttlSeconds": 300}), json!({}), json!({}));
        let first = extend(&ends(&m, None), 400).unwrap();
        assert_eq!((first.ttl_seconds, first.max_lifetime_seconds), (Some(700), Some(700)));
        // Read again after the write (a retry after a conflict): aimed at the same end, nothing moves.
        let written =
            machine(json!({"lifecycle": {"maxLifetimeSeconds": 700}, "ttlSeconds": 700}), json!({}), json!({}));
        let again = extend_to(&ends(&written, None), first.expires_at).unwrap();
        assert_eq!((again.ttl_seconds, again.max_lifetime_seconds, again.expires_at), (None, None, first.expires_at));
        // Half-written (only the TTL moved): only the rest moves, to the same end.
        let half = machine(json!({"lifecycle": {"maxLifetimeSeconds": 600}, "ttlSeconds": 700}), json!({}), json!({}));
        let rest = extend_to(&ends(&half, None), first.expires_at).unwrap();
        assert_eq!((rest.ttl_seconds, rest.max_lifetime_seconds), (None, Some(700)));
    }

    #[test]
    fn extend_moves_every_earlier_deadline_to_the_new_end_and_keeps_later_ones() {
        let labels: serde_json::Value = serde_json::from_str(CLAIMED).unwrap();
        let m = machine(
            json!({"lifecycle": {"maxLifetimeSeconds": 3600}, "ttlSeconds": 700}),
            labels,
            json!({"kairon.zyvor.dev/lifecycle-start": "2026-01-01T00:10:00Z"}),
        );
        // Ends: claim at 00:20 (bound 00:10 + 600), ttl at 00:11:40, max lifetime at 01:10.
        let c = claim(Some(600), Some("2026-01-01T00:10:00Z"));
        let all = ends(&m, Some(&c));
        let ext = extend(&all, 900).unwrap();
        // From the earliest (00:11:40) by 15 min: 00:26:40.
        assert_eq!(ext.expires_at, t("2026-01-01T00:26:40Z"));
        assert_eq!(ext.ttl_seconds, Some(1600));
        assert_eq!(ext.claim_ttl_seconds, Some(1000));
        assert_eq!(ext.max_lifetime_seconds, None, "01:10 is already later");
        // Applied, the new earliest end is the promised one.
        let mut m2 = m.clone();
        m2.spec.ttl_seconds = ext.ttl_seconds;
        let mut c2 = c.clone();
        c2.spec.ttl_seconds = ext.claim_ttl_seconds;
        assert_eq!(earliest(&ends(&m2, Some(&c2))).unwrap().at(), ext.expires_at);
    }
}
