//! Waits on Kubernetes objects through kube-rs: each polls one object and, when it gives up,
//! shows the object's status as last seen.

use std::fmt::Debug;
use std::time::Duration;

use kube::Api;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use kairon_model::{Machine, MachinePhase};

use crate::wait::wait_for;

/// A Machine's phase, as its node reports it.
pub fn phase(m: &Machine) -> Option<MachinePhase> {
    m.status.as_ref().and_then(|s| s.phase)
}

/// What a wait shows of an object it last saw: its status (or, with none, its metadata).
fn seen<K: Serialize>(o: &K) -> Value {
    let v = serde_json::to_value(o).unwrap_or_default();
    match v.get("status") {
        Some(s) if !s.is_null() => s.clone(),
        _ => v.get("metadata").cloned().unwrap_or_default(),
    }
}

/// Polls `api` for `name` until `ok` holds, or panics after `timeout` with `what` and the
/// object's status last seen (or that it was missing, or the error).
pub async fn wait_for_object<K>(api: &Api<K>, name: &str, what: &str, timeout: Duration, ok: impl Fn(&K) -> bool) -> K
where
    K: Clone + DeserializeOwned + Serialize + Debug,
{
    wait_for(what, timeout, || async {
        match api.get_opt(name).await {
            Ok(Some(o)) if ok(&o) => Ok(o),
            Ok(Some(o)) => Err(seen(&o)),
            Ok(None) => Err(Value::String(format!("{name} not found"))),
            Err(e) => Err(Value::String(format!("GET {name}: {e}"))),
        }
    })
    .await
}

/// Waits until the Machine `name` reports phase `want`; returns it.
pub async fn wait_phase(api: &Api<Machine>, name: &str, want: MachinePhase, timeout: Duration) -> Machine {
    wait_for_object(api, name, &format!("{name} to be {want:?}"), timeout, |m| phase(m) == Some(want)).await
}

/// Waits until `name` is gone (deleted, finalizers and all).
pub async fn wait_gone<K>(api: &Api<K>, name: &str, timeout: Duration)
where
    K: Clone + DeserializeOwned + Serialize + Debug,
{
    wait_for(&format!("{name} to be deleted"), timeout, || async {
        match api.get_opt(name).await {
            Ok(None) => Ok(()),
            Ok(Some(o)) => {
                let v = serde_json::to_value(&o).unwrap_or_default();
                Err(serde_json::json!({"deletionTimestamp": v["metadata"]["deletionTimestamp"],
                                       "finalizers": v["metadata"]["finalizers"], "status": v["status"]}))
            }
            Err(e) => Err(Value::String(format!("GET {name}: {e}"))),
        }
    })
    .await
}
