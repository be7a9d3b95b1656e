//! The node's record of refused egress: every refusal counted by reason, and the ones worth
//! showing on a Machine (at most one per instance and host a minute) kept for the node agent,
//! which turns them into Events and the `kairon_egress_denied_total` metric.

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use kairon_runtime_api::types::{EgressDenial, EgressDenials};

use super::proxy::DenyKind;

/// How many shown denials are kept for a node agent that fell behind.
const KEPT: usize = 1024;
/// One Event per instance and host in this window.
const SHOWN_EVERY: Duration = Duration::from_secs(60);

#[derive(Default)]
struct State {
    seq: u64,
    totals: BTreeMap<&'static str, u64>,
    kept: VecDeque<EgressDenial>,
    last_shown: HashMap<(String, String), Instant>,
}

pub struct DenialLog {
    state: Mutex<State>,
    changed: tokio::sync::watch::Sender<u64>,
}

impl Default for DenialLog {
    fn default() -> Self {
        DenialLog { state: Mutex::new(State::default()), changed: tokio::sync::watch::Sender::new(0) }
    }
}

impl DenialLog {
    /// Counts a refusal; keeps it to show when its instance is known and it was not shown for
    /// this host in the last minute.
    pub fn record(&self, instance: Option<String>, host: &str, kind: DenyKind, message: &str) {
        let mut st = self.state.lock().unwrap_or_else(|e| e.into_inner());
        *st.totals.entry(kind.as_str()).or_default() += 1;
        let Some(instance) = instance else { return };
        let now = Instant::now();
        let key = (instance.clone(), host.to_string());
        if st.last_shown.get(&key).is_some_and(|at| now.duration_since(*at) < SHOWN_EVERY) {
            return;
        }
        if st.last_shown.len() > 4 * KEPT {
            st.last_shown.retain(|_, at| now.duration_since(*at) < SHOWN_EVERY);
        }
        st.last_shown.insert(key, now);
        st.seq += 1;
        let denial = EgressDenial {
            seq: st.seq,
            instance,
            host: host.to_string(),
            reason: kind.as_str().to_string(),
            message: message.to_string(),
            at: chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true),
        };
        st.kept.push_back(denial);
        if st.kept.len() > KEPT {
            st.kept.pop_front();
        }
        let seq = st.seq;
        drop(st);
        self.changed.send_replace(seq);
    }

    /// Refusals so far, by reason.
    pub fn totals(&self) -> BTreeMap<&'static str, u64> {
        self.state.lock().unwrap_or_else(|e| e.into_inner()).totals.clone()
    }

    /// The shown denials after `after`, waiting up to `wait` for one.
    pub async fn since(&self, after: u64, wait: Duration) -> EgressDenials {
        let mut rx = self.changed.subscribe();
        let _ = tokio::time::timeout(wait, rx.wait_for(|seq| *seq > after)).await;
        let st = self.state.lock().unwrap_or_else(|e| e.into_inner());
        EgressDenials {
            next: st.seq,
            totals: st.totals.iter().map(|(k, v)| (k.to_string(), *v)).collect(),
            denials: st.kept.iter().filter(|d| d.seq > after).cloned().collect(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn refusals_are_counted_and_shown_once_a_minute_per_instance_and_host() {
        let log = DenialLog::default();
        for _ in 0..3 {
            log.record(Some("i1".into()), "a.test", DenyKind::NotAllowed, "no");
        }
        log.record(Some("i1".into()), "b.test", DenyKind::Dns, "no");
        log.record(Some("i2".into()), "a.test", DenyKind::NotAllowed, "no");
        log.record(None, "c.test", DenyKind::NoHost, "no");
        let got = log.since(0, Duration::ZERO).await;
        assert_eq!(got.totals.get("NotAllowed"), Some(&4));
        assert_eq!(got.totals.get("NoHost"), Some(&1));
        let shown: Vec<_> = got.denials.iter().map(|d| (d.instance.as_str(), d.host.as_str())).collect();
        assert_eq!(shown, [("i1", "a.test"), ("i1", "b.test"), ("i2", "a.test")]);
        assert_eq!(got.next, 3);
        assert!(log.since(3, Duration::ZERO).await.denials.is_empty());
        // A waiting reader wakes for the next one.
        let waiting = log.since(3, Duration::from_secs(5));
        let record = async {
            tokio::time::sleep(Duration::from_millis(50)).await;
            log.record(Some("i3".into()), "a.test", DenyKind::DenySet, "no");
        };
        let (got, ()) = tokio::join!(waiting, record);
        assert_eq!(got.denials.len(), 1);
    }
}
