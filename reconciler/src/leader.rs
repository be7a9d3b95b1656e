//! Leader election through the coordination.k8s.io/v1 Lease `kairon-controller` in namespace
//! `kairon-system`. Writes carry the Lease's resourceVersion, so of two contenders the server
//! lets one win and answers 409 to the other.

use std::future::Future;
use std::time::Duration;

use k8s_openapi::api::coordination::v1::{Lease, LeaseSpec};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::MicroTime;
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use kube::api::{Api, ObjectMeta, PostParams};

pub const LEASE_NAME: &str = "kairon-controller";
pub const LEASE_NAMESPACE: &str = "kairon-system";

/// Whether `me` may take (or keep) the Lease at `now`: it is unheld, already mine, or its
/// holder has not renewed within its lease duration.
pub fn may_take(spec: Option<&LeaseSpec>, me: &str, now: Timestamp) -> bool {
    let Some(s) = spec else { return true };
    match s.holder_identity.as_deref() {
        None | Some("") => true,
        Some(h) if h == me => true,
        Some(_) => {
            let Some(renewed) = s.renew_time.as_ref().or(s.acquire_time.as_ref()).map(|t| t.0) else {
                return true;
            };
            let secs = i64::from(s.lease_duration_seconds.unwrap_or(0));
            renewed.checked_add(SignedDuration::from_secs(secs)).is_ok_and(|end| end < now)
        }
    }
}

/// The Lease spec after `me` takes or renews it.
pub fn claimed(old: Option<&LeaseSpec>, me: &str, now: Timestamp, duration: Duration) -> LeaseSpec {
    let mine = old.and_then(|s| s.holder_identity.as_deref()) == Some(me);
    let transitions = old.and_then(|s| s.lease_transitions).unwrap_or(0);
    LeaseSpec {
        holder_identity: Some(me.to_string()),
        lease_duration_seconds: Some(duration.as_secs().max(1) as i32),
        acquire_time: if mine { old.and_then(|s| s.acquire_time.clone()) } else { Some(MicroTime(now)) },
        renew_time: Some(MicroTime(now)),
        lease_transitions: Some(if mine || old.is_none() { transitions } else { transitions + 1 }),
        ..LeaseSpec::default()
    }
}

fn holder(l: &Lease) -> Option<&str> {
    l.spec.as_ref().and_then(|s| s.holder_identity.as_deref())
}

/// One attempt to take or renew the Lease; Ok(true) when this process holds it afterwards.
async fn try_hold(api: &Api<Lease>, me: &str, duration: Duration) -> Result<bool, kube::Error> {
    let now = Timestamp::now();
    match api.get_opt(LEASE_NAME).await? {
        None => {
            let lease = Lease {
                metadata: ObjectMeta { name: Some(LEASE_NAME.into()), ..ObjectMeta::default() },
                spec: Some(claimed(None, me, now, duration)),
            };
            match api.create(&PostParams::default(), &lease).await {
                Ok(_) => Ok(true),
                Err(kube::Error::Api(s)) if s.code == 409 => Ok(false),
                Err(e) => Err(e),
            }
        }
        Some(old) => {
            if !may_take(old.spec.as_ref(), me, now) {
                return Ok(false);
            }
            let mut new = old.clone();
            new.spec = Some(claimed(old.spec.as_ref(), me, now, duration));
            // `replace` sends the resourceVersion read above: a concurrent writer makes it 409.
            match api.replace(LEASE_NAME, &PostParams::default(), &new).await {
                Ok(l) => Ok(holder(&l) == Some(me)),
                Err(kube::Error::Api(s)) if s.code == 409 => Ok(false),
                Err(e) => Err(e),
            }
        }
    }
}

/// Gives the Lease up if `me` holds it (on a clean stop), so another controller takes over at
/// once instead of after the lease duration. Ok(true) when it was held and is now released.
pub async fn release(client: kube::Client, me: &str) -> Result<bool, kube::Error> {
    let api: Api<Lease> = Api::namespaced(client, LEASE_NAMESPACE);
    let Some(old) = api.get_opt(LEASE_NAME).await? else { return Ok(false) };
    if holder(&old) != Some(me) {
        return Ok(false);
    }
    let mut new = old.clone();
    new.spec = Some(released(old.spec.as_ref()));
    match api.replace(LEASE_NAME, &PostParams::default(), &new).await {
        Ok(_) => Ok(true),
        // Someone took it meanwhile: nothing to give up.
        Err(kube::Error::Api(s)) if s.code == 409 => Ok(false),
        Err(e) => Err(e),
    }
}

/// The Lease spec after its holder gives it up: no holder, so anyone may take it.
pub fn released(old: Option<&LeaseSpec>) -> LeaseSpec {
    LeaseSpec {
        holder_identity: None,
        renew_time: None,
        acquire_time: None,
        lease_duration_seconds: old.and_then(|s| s.lease_duration_seconds),
        lease_transitions: old.and_then(|s| s.lease_transitions),
        ..LeaseSpec::default()
    }
}

/// Waits until this process leads; the returned future completes when leadership is lost.
pub async fn lead(client: kube::Client, cfg: &crate::ControllerConfig) -> impl Future<Output = ()> + use<> {
    let api: Api<Lease> = Api::namespaced(client, LEASE_NAMESPACE);
    let me = cfg.identity.clone();
    let duration = cfg.lease_duration.max(Duration::from_secs(1));
    let period = duration / 3;
    // A stand-by looks again every 2 s at most (client-go's retry period), so a released Lease
    // is taken over at once.
    let retry = period.min(Duration::from_secs(2));
    loop {
        match try_hold(&api, &me, duration).await {
            Ok(true) => break,
            Ok(false) => tracing::debug!(identity = %me, "another controller holds the lease; waiting"),
            Err(e) => tracing::warn!(identity = %me, error = %e, "campaigning for the controller lease failed"),
        }
        tokio::time::sleep(retry).await;
    }
    tracing::info!(identity = %me, "acquired the controller lease");
    async move {
        let mut last_ok = tokio::time::Instant::now();
        loop {
            tokio::time::sleep(period).await;
            match try_hold(&api, &me, duration).await {
                Ok(true) => last_ok = tokio::time::Instant::now(),
                Ok(false) => {
                    tracing::warn!(identity = %me, "another controller took the lease");
                    return;
                }
                Err(e) => {
                    tracing::warn!(identity = %me, error = %e, "renewing the controller lease failed");
                    // Stop before anyone else may take it over.
                    if last_ok.elapsed() + period >= duration {
                        return;
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(secs: i64) -> Timestamp {
        Timestamp::from_second(1_800_000_000 + secs).unwrap()
    }

    fn held(by: &str, renewed: i64, dur: i32) -> LeaseSpec {
        LeaseSpec {
            holder_identity: Some(by.into()),
            renew_time: Some(MicroTime(at(renewed))),
            acquire_time: Some(MicroTime(at(0))),
            lease_duration_seconds: Some(dur),
            lease_transitions: Some(2),
            ..LeaseSpec::default()
        }
    }

    #[test]
    fn an_unheld_or_own_lease_may_be_taken() {
        assert!(may_take(None, "a", at(0)));
        assert!(may_take(Some(&LeaseSpec::default()), "a", at(0)));
        assert!(may_take(Some(&held("a", 10, 15)), "a", at(11)));
    }

    #[test]
    fn another_holder_keeps_it_until_its_lease_runs_out() {
        let l = held("b", 10, 15);
        assert!(!may_take(Some(&l), "a", at(11)));
        assert!(!may_take(Some(&l), "a", at(25)), "exactly at the end it is still held");
        assert!(may_take(Some(&l), "a", at(26)));
        let mut no_times = held("b", 0, 15);
        no_times.renew_time = None;
        no_times.acquire_time = None;
        assert!(may_take(Some(&no_times), "a", at(0)));
        let mut acquired_only = held("b", 0, 15);
        acquired_only.renew_time = None;
        assert!(!may_take(Some(&acquired_only), "a", at(10)));
    }

    #[test]
    fn a_released_lease_may_be_taken_at_once() {
        let r = released(Some(&held("b", 10, 15)));
        assert_eq!(r.holder_identity, None);
        assert_eq!(r.lease_transitions, Some(2));
        assert!(may_take(Some(&r), "a", at(11)), "no need to wait for b's lease to run out");
        let taken = claimed(Some(&r), "a", at(11), Duration::from_secs(15));
        assert_eq!(taken.lease_transitions, Some(3));
    }

    #[test]
    fn taking_over_counts_a_transition_and_renewing_does_not() {
        let d = Duration::from_secs(15);
        let renewed = claimed(Some(&held("a", 10, 15)), "a", at(20), d);
        assert_eq!(renewed.acquire_time, Some(MicroTime(at(0))));
        assert_eq!(renewed.renew_time, Some(MicroTime(at(20))));
        assert_eq!(renewed.lease_transitions, Some(2));
        let taken = claimed(Some(&held("b", 10, 15)), "a", at(30), d);
        assert_eq!(taken.holder_identity.as_deref(), Some("a"));
        assert_eq!(taken.acquire_time, Some(MicroTime(at(30))));
        assert_eq!(taken.lease_transitions, Some(3));
        assert_eq!(taken.lease_duration_seconds, Some(15));
        let fresh = claimed(None, "a", at(0), d);
        assert_eq!(fresh.lease_transitions, Some(0));
    }
}
