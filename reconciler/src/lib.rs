//! kairon-reconciler: the controllers. Each decides in a pure function of the objects and the
//! clock, and acts at the edge.

pub mod claims;
pub mod leader;
pub mod lifecycle;
pub mod metrics;
pub mod pools;
pub mod scheduler;
pub mod usage;

use std::time::Duration;

/// Intervals the controllers use; tests shorten them (test-only flags of `kairon up`).
#[derive(Clone, Debug)]
pub struct ControllerConfig {
    /// How often a bound claim accrues usage (30 s in production).
    pub usage_interval: Duration,
    /// The smallest idleTimeoutSeconds honoured (60 s in production; the API enforces it too).
    pub min_idle_timeout: Duration,
    /// How long a lease is held before another controller may take over.
    pub lease_duration: Duration,
    /// This controller's identity in the leader-election Lease.
    pub identity: String,
    /// Where claim usage history goes (PostgreSQL); None keeps only `status.usage`.
    pub store: Option<kairon_db::Store>,
    /// TEST ONLY: after recording an interval in the history, wait this long before writing
    /// `status.usage`, so a test can kill the controller inside that window (zero: no wait).
    pub test_hold_after_record: Duration,
}

impl Default for ControllerConfig {
    fn default() -> Self {
        ControllerConfig {
            usage_interval: Duration::from_secs(30),
            min_idle_timeout: Duration::from_secs(60),
            lease_duration: Duration::from_secs(15),
            identity: format!("kairon-controller-{}", std::process::id()),
            store: None,
            test_hold_after_record: Duration::ZERO,
        }
    }
}

/// Runs every controller while this process holds the leader Lease, so two controllers never
/// both act; when leadership is lost they stop, and the process campaigns again.
pub async fn run_all(client: kube::Client, cfg: ControllerConfig) {
    loop {
        let lost = leader::lead(client.clone(), &cfg).await;
        tokio::select! {
            _ = lost => tracing::warn!("lost the controller lease; standing by"),
            _ = scheduler::run(client.clone()) => {}
            _ = lifecycle::run(client.clone(), cfg.clone()) => {}
            _ = pools::run(client.clone(), cfg.clone()) => {}
            _ = claims::run(client.clone(), cfg.clone()) => {}
            _ = usage::run(client.clone(), cfg.clone()) => {}
        }
        tokio::time::sleep(Duration::from_secs(1)).await;
    }
}
