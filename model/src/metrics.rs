//! The process's Prometheus counters and histograms, rendered as text for `/metrics`. Here, not
//! in the controllers, because the API binds claims too and counts them into the same registry.

use std::collections::BTreeMap;
use std::fmt::Write;
use std::sync::{Mutex, OnceLock};

/// Counters and histograms by name and label set (labels rendered `k="v",…`, sorted).
#[derive(Default)]
pub struct Metrics {
    counters: Mutex<BTreeMap<(&'static str, String), f64>>,
    histograms: Mutex<BTreeMap<(&'static str, String), Histogram>>,
    help: Mutex<BTreeMap<&'static str, &'static str>>,
}

/// Cumulative bucket counts for upper bounds `le`, with the sum and count of observations.
struct Histogram {
    le: &'static [f64],
    buckets: Vec<u64>,
    sum: f64,
    count: u64,
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

    /// Records `v` in histogram `name` with bucket upper bounds `le` (ascending; `+Inf` is added).
    pub fn observe(&self, name: &'static str, labels: &[(&str, &str)], le: &'static [f64], v: f64) {
        let mut h = self.histograms.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let h = h.entry((name, label_text(labels))).or_insert_with(|| Histogram {
            le,
            buckets: vec![0; le.len()],
            sum: 0.0,
            count: 0,
        });
        for (bound, n) in h.le.iter().zip(h.buckets.iter_mut()) {
            if v <= *bound {
                *n += 1;
            }
        }
        h.sum += v;
        h.count += 1;
    }

    /// Observations in histogram `name` with these labels.
    pub fn count(&self, name: &'static str, labels: &[(&str, &str)]) -> u64 {
        let h = self.histograms.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        h.get(&(name, label_text(labels))).map_or(0, |h| h.count)
    }

    pub fn get(&self, name: &'static str, labels: &[(&str, &str)]) -> f64 {
        let c = self.counters.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        c.get(&(name, label_text(labels))).copied().unwrap_or(0.0)
    }

    /// Prometheus text exposition format. It opens with `kairon_build_info`, so a scrape of a
    /// process that has counted nothing yet still names the version it reached.
    pub fn render(&self) -> String {
        let c = self.counters.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let help = self.help.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let mut out = String::new();
        let _ = writeln!(out, "# HELP kairon_build_info The running Kairon's version; always 1.");
        let _ = writeln!(out, "# TYPE kairon_build_info gauge");
        let _ = writeln!(out, "kairon_build_info{{version=\"{}\"}} 1", env!("CARGO_PKG_VERSION"));
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
        let histograms = self.histograms.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        let mut last = "";
        for ((name, labels), h) in histograms.iter() {
            if *name != last {
                if let Some(help) = help.get(name) {
                    let _ = writeln!(out, "# HELP {name} {help}");
                }
                let _ = writeln!(out, "# TYPE {name} histogram");
                last = name;
            }
            let sep = if labels.is_empty() { "" } else { "," };
            for (bound, n) in h.le.iter().zip(&h.buckets) {
                let _ = writeln!(out, "{name}_bucket{{{labels}{sep}le=\"{bound}\"}} {n}");
            }
            let _ = writeln!(out, "{name}_bucket{{{labels}{sep}le=\"+Inf\"}} {}", h.count);
            let braces = if labels.is_empty() { String::new() } else { format!("{{{labels}}}") };
            let _ = writeln!(out, "{name}_sum{braces} {}", h.sum);
            let _ = writeln!(out, "{name}_count{braces} {}", h.count);
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

    #[test]
    fn an_empty_registry_still_names_its_version() {
        let text = Metrics::default().render();
        let line = format!("kairon_build_info{{version=\"{}\"}} 1", env!("CARGO_PKG_VERSION"));
        assert!(text.contains("# TYPE kairon_build_info gauge\n") && text.contains(&line), "{text}");
    }

    #[test]
    fn renders_histograms_with_cumulative_buckets() {
        let m = Metrics::default();
        m.describe("kairon_pool_claim_wait_seconds", "Claim waits.");
        for v in [0.25, 0.5, 4.0] {
            m.observe("kairon_pool_claim_wait_seconds", &[("pool", "p")], &[0.3, 1.0, 2.0], v);
        }
        let text = m.render();
        for line in [
            "# TYPE kairon_pool_claim_wait_seconds histogram",
            "kairon_pool_claim_wait_seconds_bucket{pool=\"p\",le=\"0.3\"} 1",
            "kairon_pool_claim_wait_seconds_bucket{pool=\"p\",le=\"1\"} 2",
            "kairon_pool_claim_wait_seconds_bucket{pool=\"p\",le=\"2\"} 2",
            "kairon_pool_claim_wait_seconds_bucket{pool=\"p\",le=\"+Inf\"} 3",
            "kairon_pool_claim_wait_seconds_sum{pool=\"p\"} 4.75",
            "kairon_pool_claim_wait_seconds_count{pool=\"p\"} 3",
        ] {
            assert!(text.contains(line), "{line} in:\n{text}");
        }
        assert_eq!(m.count("kairon_pool_claim_wait_seconds", &[("pool", "p")]), 3);
    }
}
