//! Live metrics of a Machine (`GET …/metrics`): what it uses now, sampled from its node's
//! runtime (the instance's cgroup and /proc; a VM's QEMU process and disk overlay) twice, a
//! window apart. Reading them is reading the Machine: it neither wakes it nor counts as
//! activity, so a dashboard that polls never keeps a sandbox from suspending.

use std::time::{Duration, Instant};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use serde::Serialize;
use utoipa::ToSchema;

use kairon_model::Machine;
use kairon_runtime_api::types::Stats;

use super::{Error, Machines, Result};
use crate::auth::Identity;

/// The window `GET …/metrics` samples over unless asked for another, and its bounds.
pub const DEFAULT_WINDOW: Duration = Duration::from_millis(500);
pub const MIN_WINDOW_MILLIS: u64 = 100;
pub const MAX_WINDOW_MILLIS: u64 = 10_000;

/// What a Machine uses now.
#[derive(Serialize, ToSchema, Debug, Clone, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct MachineMetrics {
    /// CPU used over the window, in percent of one core (`top`'s way: 200 is two cores busy).
    #[schema(example = 12.5)]
    pub cpu_percent: f64,
    /// The CPU the Machine may use, in cores (its `resources.cpu`, or the default it runs with).
    #[schema(example = 1.0)]
    pub cpu_limit_cores: f64,
    /// Memory in use now: the sandbox's cgroup, or the VM's QEMU process (resident).
    pub memory_used_bytes: u64,
    /// The memory the Machine may use (its `resources.memory`, or the default it runs with).
    pub memory_limit_bytes: u64,
    /// What it takes on its node's disk: a sandbox's writable layer, a VM's disk overlay.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub disk_used_bytes: Option<u64>,
    /// Bytes read from and written to disk since it started.
    pub disk_read_bytes: u64,
    pub disk_write_bytes: u64,
    /// Bytes received and sent on its network since it started (sandboxes on a network; a
    /// VM's user network has no interface on the node to count).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub network_rx_bytes: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub network_tx_bytes: Option<u64>,
    /// Processes running (a VM counts as one: its QEMU).
    pub process_count: u32,
    /// The window the CPU was measured over.
    pub window_millis: u64,
    /// When the second sample was taken.
    #[schema(value_type = String, format = DateTime)]
    pub sampled_at: Time,
}

impl MachineMetrics {
    /// The metrics of `m` from samples `first` and `last`, `window` apart.
    pub fn from_samples(m: &Machine, first: &Stats, last: &Stats, window: Duration) -> Self {
        let (cpu_millis, memory_bytes) = kairon_model::quota::effective_resources(m);
        let cpu_nanos = last.cpu_time_nanos.saturating_sub(first.cpu_time_nanos) as f64;
        let window_nanos = window.as_nanos().max(1) as f64;
        MachineMetrics {
            cpu_percent: (cpu_nanos / window_nanos * 1000.0).round() / 10.0,
            cpu_limit_cores: cpu_millis as f64 / 1000.0,
            memory_used_bytes: last.memory_bytes,
            memory_limit_bytes: u64::try_from(memory_bytes).unwrap_or(0),
            disk_used_bytes: last.disk_used_bytes,
            disk_read_bytes: last.disk_read_bytes,
            disk_write_bytes: last.disk_write_bytes,
            network_rx_bytes: last.network_rx_bytes,
            network_tx_bytes: last.network_tx_bytes,
            process_count: last.process_count,
            window_millis: window.as_millis() as u64,
            sampled_at: Time(k8s_openapi::jiff::Timestamp::now()),
        }
    }
}

impl Machines {
    /// What Machine `ns/name` uses now, its CPU measured over `window` (see the module).
    pub async fn metrics(&self, id: &Identity, ns: &str, name: &str, window: Option<u64>) -> Result<MachineMetrics> {
        let window = match window {
            None => DEFAULT_WINDOW,
            Some(ms) if (MIN_WINDOW_MILLIS..=MAX_WINDOW_MILLIS).contains(&ms) => Duration::from_millis(ms),
            Some(ms) => {
                return Err(Error::bad_request(format!(
                    "windowMillis={ms} is out of range: give {MIN_WINDOW_MILLIS} to {MAX_WINDOW_MILLIS} (default {})",
                    DEFAULT_WINDOW.as_millis()
                )));
            }
        };
        let m: Machine = self.get(id, ns, name).await?;
        let (runtime, instance) = self.machine_runtime(&m).await?;
        let first = runtime.stats(&instance).await?;
        let started = Instant::now();
        tokio::time::sleep(window).await;
        // The runtime reads the counters first and walks the footprint after, outside the window.
        let elapsed = started.elapsed();
        let last = runtime.stats_with_footprint(&instance).await?;
        Ok(MachineMetrics::from_samples(&m, &first, &last, elapsed))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_is_a_percent_of_one_core_over_the_window() {
        let m: Machine = serde_json::from_value(serde_json::json!({
            "apiVersion": "kairon.zyvor.dev/v1", "kind": "Machine", "metadata": {"name": "m"},
            "spec": {"image": {"path": "/i.qcow2"}, "resources": {"cpu": "2", "memory": "512Mi"}}
        }))
        .unwrap();
        let first = Stats { cpu_time_nanos: 1_000_000_000, ..Stats::default() };
        let last = Stats {
            cpu_time_nanos: 1_750_000_000,
            memory_bytes: 100 << 20,
            process_count: 3,
            network_rx_bytes: Some(10),
            ..Stats::default()
        };
        let got = MachineMetrics::from_samples(&m, &first, &last, Duration::from_millis(500));
        assert_eq!(got.cpu_percent, 150.0);
        assert_eq!((got.cpu_limit_cores, got.memory_limit_bytes), (2.0, 512 << 20));
        assert_eq!((got.memory_used_bytes, got.process_count, got.window_millis), (100 << 20, 3, 500));
        assert_eq!((got.network_rx_bytes, got.disk_used_bytes), (Some(10), None));
        // A counter that went back (the instance restarted) is no negative use.
        let idle = MachineMetrics::from_samples(&m, &last, &first, Duration::from_millis(500));
        assert_eq!(idle.cpu_percent, 0.0);
    }
}
