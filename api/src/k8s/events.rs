//! Core `v1` Events as a view of `events.k8s.io/v1` Events, so `kubectl describe` lists what
//! the controllers record through kube-rs's `Recorder`.

use k8s_openapi::api::core::v1 as core;
use k8s_openapi::api::events::v1 as events;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{MicroTime, Time};
use serde_json::Value;

/// `events.k8s.io/v1` → core `v1`. Unparseable input is passed through unchanged.
pub fn to_core(v: Value) -> Value {
    let Ok(ev) = serde_json::from_value::<events::Event>(v.clone()) else {
        return v;
    };
    let event_time = ev.event_time.clone();
    let as_time = |t: &Option<MicroTime>| t.as_ref().map(|m| Time(m.0));
    let last = ev
        .deprecated_last_timestamp
        .clone()
        .or_else(|| ev.series.as_ref().map(|s| Time(s.last_observed_time.0)))
        .or_else(|| as_time(&event_time));
    let core = core::Event {
        metadata: ev.metadata,
        action: ev.action,
        count: Some(ev.series.as_ref().map(|s| s.count).or(ev.deprecated_count).unwrap_or(1)),
        first_timestamp: ev.deprecated_first_timestamp.or_else(|| as_time(&event_time)),
        last_timestamp: last,
        event_time,
        involved_object: ev.regarding.unwrap_or_default(),
        message: ev.note,
        reason: ev.reason,
        related: ev.related,
        reporting_component: ev.reporting_controller.clone(),
        reporting_instance: ev.reporting_instance.clone(),
        series: ev
            .series
            .map(|s| core::EventSeries { count: Some(s.count), last_observed_time: Some(s.last_observed_time) }),
        source: ev
            .deprecated_source
            .or(Some(core::EventSource { component: ev.reporting_controller, host: ev.reporting_instance })),
        type_: ev.type_,
    };
    let mut out = serde_json::to_value(core).unwrap_or(v);
    out["apiVersion"] = "v1".into();
    out["kind"] = "Event".into();
    out
}

/// core `v1` → `events.k8s.io/v1`, for a core Event written by an older client.
pub fn from_core(v: Value) -> Result<Value, String> {
    let ev: core::Event = serde_json::from_value(v).map_err(|e| format!("not a core v1 Event: {e}"))?;
    let now = MicroTime(k8s_openapi::jiff::Timestamp::now());
    let event_time =
        ev.event_time.or_else(|| ev.first_timestamp.as_ref().map(|t| MicroTime(t.0))).or(Some(now.clone()));
    let out = events::Event {
        metadata: ev.metadata,
        action: ev.action,
        deprecated_count: ev.count,
        deprecated_first_timestamp: ev.first_timestamp,
        deprecated_last_timestamp: ev.last_timestamp,
        deprecated_source: ev.source.clone(),
        event_time,
        note: ev.message,
        reason: ev.reason,
        regarding: Some(ev.involved_object),
        related: ev.related,
        reporting_controller: ev.reporting_component.or_else(|| ev.source.as_ref().and_then(|s| s.component.clone())),
        reporting_instance: ev.reporting_instance.or_else(|| ev.source.and_then(|s| s.host)),
        series: ev.series.map(|s| events::EventSeries {
            count: s.count.unwrap_or(1),
            last_observed_time: s.last_observed_time.unwrap_or(now),
        }),
        type_: ev.type_,
    };
    let mut out = serde_json::to_value(out).map_err(|e| e.to_string())?;
    out["apiVersion"] = "events.k8s.io/v1".into();
    out["kind"] = "Event".into();
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn recorder_event_reads_as_core() {
        let ev = json!({
            "apiVersion": "events.k8s.io/v1", "kind": "Event",
            "metadata": {"name": "agent-42.1", "namespace": "agents"},
            "eventTime": "2026-11-29T10:00:00.000000Z",
            "regarding": {"kind": "Machine", "name": "agent-42", "namespace": "agents", "uid": "u1"},
            "reason": "IdleSuspended", "note": "idle for 10m0s: paused", "type": "Normal",
            "reportingController": "kairon-controller", "reportingInstance": "kairon-controller-local",
            "action": "Pause", "series": {"count": 3, "lastObservedTime": "2026-11-29T10:05:00.000000Z"}
        });
        let core = to_core(ev);
        assert_eq!(core["apiVersion"], "v1");
        assert_eq!(core["involvedObject"]["name"], "agent-42");
        assert_eq!(core["message"], "idle for 10m0s: paused");
        assert_eq!(core["count"], 3);
        assert_eq!(core["source"]["component"], "kairon-controller");
        assert!(core["lastTimestamp"].as_str().unwrap().starts_with("2026-11-29T10:05:00"));
        let back = from_core(core).unwrap();
        assert_eq!(back["regarding"]["uid"], "u1");
        assert_eq!(back["series"]["count"], 3, "a series survives the round trip");
        assert_eq!(back["note"], "idle for 10m0s: paused");
    }
}
