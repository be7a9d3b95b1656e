//! The controllers' Prometheus counters, rendered as text for `/metrics`.

use std::collections::BTreeMap;
use std::fmt::Write;
use std::sync::{Mutex, OnceLock};

/// Counters by name and label set (labels rendered `k="v",…`, sorted).
#[derive(Default)]
pub struct Metrics {
    counters: Mutex<BTreeMap<(&'static str, String), f64>>,
    help: Mutex<BTreeMap<&'static str, &'static str>>,
}

/// The process-wide registry the controllers count into.
pub fn global() -> &'static Metrics {
    static M: OnceLock<Metrics> = OnceLock::new();
    M.get_or_init(Metrics::default)
}

fn label_text(labels: &[(&str, &str)]) -> String {
    let mut l: Vec<_> = labels.to_vec();
    l.sort();
    l.iter()
        .map(|(k, v)| format!("{k}=\"{}\"", v.replace('\\', "\\\\").replace('"', "\\\"")))
        .collect::<Vec<_>>()
        .join(",")
}

impl Metrics {
    pub fn describe(&self, name: &'static str, help: &'static str) {
        self.help.lock().unwrap_or_else(std::sync::PoisonError::into_inner).insert(name, help);
    }

    pub fn add(&self, name: &'static str, labels: &[(&str, &str)], v: f64) {
        let mut c = self.counters.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        *c.entry((name, label_text(labels))).or_default() += v;
    }

    pub fn get(&self, name: &'static str, labels: &[(&str, &str)]) -> f64 {
        let c = self.counters.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        c.get(&(name, label_text(labels))).copied().unwrap_or(0.0)
    }

    /// Prometheus text exposition format.
    pub fn render(&self) -> String {
        let c = self.counters.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let help = self.help.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let mut out = String::new();
        let mut last = "";
        for ((name, labels), v) in c.iter() {
            if *name != last {
                if let Some(h) = help.get(name) {
                    let _ = writeln!(out, "# HELP {name} {h}");
                }
                let _ = writeln!(out, "# TYPE {name} counter");
                last = name;
            }
            if labels.is_empty() {
                let _ = writeln!(out, "{name} {v}");
            } else {
                let _ = writeln!(out, "{name}{{{labels}}} {v}");
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn renders_counters_with_labels() {
        let m = Metrics::default();
        m.describe("kairon_lifecycle_actions_total", "Idle actions taken.");
        m.add("kairon_lifecycle_actions_total", &[("action", "Pause")], 1.0);
        m.add("kairon_lifecycle_actions_total", &[("action", "Pause")], 1.0);
        m.add("kairon_claim_usage_vcpu_seconds_total", &[], 2.5);
        let text = m.render();
        assert!(text.contains("kairon_lifecycle_actions_total{action=\"Pause\"} 2"), "{text}");
        assert!(text.contains(
            "# TYPE kairon_claim_usage_vcpu_seconds_total counter\nkairon_claim_usage_vcpu_seconds_total 2.5"
        ));
        assert_eq!(m.get("kairon_lifecycle_actions_total", &[("action", "Pause")]), 2.0);
    }
}
