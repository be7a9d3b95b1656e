//! The claims each pool has seen arrive, and how they were served: what an autoscaled pool is
//! sized from and every pool's hit rate is counted from. Kept in memory from the claims watch,
//! so a restart forgets the claims released within the last window (those still there are
//! listed again).

use std::collections::btree_map::Entry;
use std::collections::{BTreeMap, HashMap};
use std::sync::Mutex;

use kube::ResourceExt;

use kairon_model::{LaunchType, MachineClaim};

/// No window is longer (`spec.autoscale.windowSeconds` is at most a day).
const KEEP_MS: i64 = 86_400_000;

#[derive(Clone, Copy, Debug, PartialEq)]
struct Arrival {
    created_ms: i64,
    launch: Option<LaunchType>,
}

#[derive(Default)]
struct PoolLog {
    /// By claim uid.
    claims: BTreeMap<String, Arrival>,
    /// The autoscaler's memory of when the pool last needed its size ([`kairon_model::autoscale`]).
    last_needed_ms: Option<i64>,
}

/// A pool's claims over a window.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Window {
    /// When each arrived (Unix ms), oldest first.
    pub arrivals: Vec<i64>,
    /// Of those, bound from a warm member, and bound after waiting.
    pub warm: usize,
    pub cold: usize,
    pub last_needed_ms: Option<i64>,
}

impl Window {
    /// The share served warm, once any was bound.
    pub fn hit_rate(&self) -> Option<f64> {
        let bound = self.warm + self.cold;
        (bound > 0).then(|| self.warm as f64 / bound as f64)
    }
}

#[derive(Default)]
pub struct Arrivals(Mutex<HashMap<(String, String), PoolLog>>);

impl Arrivals {
    fn logs(&self) -> std::sync::MutexGuard<'_, HashMap<(String, String), PoolLog>> {
        self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Notes `claim` as seen now; true when that tells its pool something new (a claim not seen
    /// before, or how it was served). Claims older than a day are not kept.
    pub fn record(&self, claim: &MachineClaim, now_ms: i64) -> bool {
        let (Some(uid), Some(created)) = (claim.uid(), claim.metadata.creation_timestamp.as_ref()) else {
            return false;
        };
        let mut created_ms = created.0.as_millisecond();
        // creationTimestamp has whole seconds: a claim first seen within its second arrived now,
        // to the millisecond (the rates read gaps between claims shorter than a second).
        if (created_ms..created_ms + 1000).contains(&now_ms) {
            created_ms = now_ms;
        }
        if created_ms < now_ms - KEEP_MS {
            return false;
        }
        let key = (claim.namespace().unwrap_or_default(), claim.spec.pool_name.clone());
        let launch = claim.status.as_ref().and_then(|s| s.launch_type);
        let mut logs = self.logs();
        let log = logs.entry(key).or_default();
        log.claims.retain(|_, a| a.created_ms >= now_ms - KEEP_MS);
        match log.claims.entry(uid) {
            Entry::Vacant(v) => {
                v.insert(Arrival { created_ms, launch });
                true
            }
            // Learned once: a later (or stale) event never unlearns how the claim was served.
            Entry::Occupied(mut o) => {
                let learned = o.get().launch.is_none() && launch.is_some();
                if learned {
                    o.get_mut().launch = launch;
                }
                learned
            }
        }
    }

    /// `pool`'s claims that arrived after `since_ms`; older ones are forgotten.
    pub fn window(&self, ns: &str, pool: &str, since_ms: i64) -> Window {
        let mut logs = self.logs();
        let Some(log) = logs.get_mut(&(ns.to_string(), pool.to_string())) else { return Window::default() };
        log.claims.retain(|_, a| a.created_ms > since_ms);
        let mut w = Window { last_needed_ms: log.last_needed_ms, ..Window::default() };
        for a in log.claims.values() {
            w.arrivals.push(a.created_ms);
            match a.launch {
                Some(LaunchType::Warm) => w.warm += 1,
                Some(LaunchType::Cold) => w.cold += 1,
                None => {}
            }
        }
        w.arrivals.sort_unstable();
        w
    }

    pub fn set_last_needed(&self, ns: &str, pool: &str, at_ms: Option<i64>) {
        self.logs().entry((ns.to_string(), pool.to_string())).or_default().last_needed_ms = at_ms;
    }

    /// A deleted pool's log goes with it.
    pub fn forget(&self, ns: &str, pool: &str) {
        self.logs().remove(&(ns.to_string(), pool.to_string()));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn claim(uid: &str, created_ms: i64, launch: Option<&str>) -> MachineClaim {
        let created = k8s_openapi::jiff::Timestamp::from_millisecond(created_ms).unwrap().to_string();
        serde_json::from_value(serde_json::json!({
            "apiVersion": "kairon.zyvor.dev/v1", "kind": "MachineClaim",
            "metadata": {"name": uid, "namespace": "ns", "uid": uid, "creationTimestamp": created},
            "spec": {"poolName": "p"}, "status": {"launchType": launch},
        }))
        .unwrap()
    }

    const NOW: i64 = 1_800_000_000_000;

    #[test]
    fn a_pool_counts_each_claim_once_and_how_it_was_served() {
        let a = Arrivals::default();
        assert!(a.record(&claim("a", NOW - 5_000, None), NOW), "a new claim");
        assert!(!a.record(&claim("a", NOW - 5_000, None), NOW), "the same claim again");
        assert!(a.record(&claim("a", NOW - 5_000, Some("Warm")), NOW), "now bound");
        assert!(!a.record(&claim("a", NOW - 5_000, None), NOW), "a stale event unlearns nothing");
        assert!(a.record(&claim("b", NOW - 3_000, Some("Cold")), NOW));
        assert!(a.record(&claim("c", NOW - 1_000, None), NOW));
        assert!(a.record(&claim("old", NOW - 700_000, Some("Cold")), NOW));
        assert!(!a.record(&claim("ancient", NOW - 2 * KEEP_MS, None), NOW), "older than any window");
        let w = a.window("ns", "p", NOW - 600_000);
        assert_eq!(w.arrivals, [NOW - 5_000, NOW - 3_000, NOW - 1_000]);
        assert_eq!((w.warm, w.cold, w.hit_rate()), (1, 1, Some(0.5)));
        assert_eq!(a.window("ns", "q", 0), Window::default());
        a.set_last_needed("ns", "p", Some(NOW));
        assert_eq!(a.window("ns", "p", NOW - 600_000).last_needed_ms, Some(NOW));
        a.forget("ns", "p");
        assert_eq!(a.window("ns", "p", 0), Window::default());
    }

    #[test]
    fn a_claim_seen_within_its_second_arrives_to_the_millisecond() {
        let a = Arrivals::default();
        // creationTimestamp says NOW (whole seconds); the watch shows it 350 ms into that second.
        assert!(a.record(&claim("fresh", NOW, None), NOW + 350));
        // Listed again after a restart, long after: its creationTimestamp is all there is.
        assert!(a.record(&claim("listed", NOW - 60_000, None), NOW + 350));
        assert_eq!(a.window("ns", "p", NOW - 600_000).arrivals, [NOW - 60_000, NOW + 350]);
    }
}
