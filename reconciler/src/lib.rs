//! kairon-reconciler: the controllers. Each decides in a pure function of the objects and the
//! clock, and acts at the edge.

pub mod arrivals;
pub mod claims;
pub mod leader;
pub mod lifecycle;
/// The process's Prometheus registry, shared with the API (which binds claims too).
pub use kairon_model::metrics;
pub mod pools;
pub mod quota;
pub mod scheduler;
pub mod usage;

use std::time::Duration;

pub use tokio_util::sync::CancellationToken;

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

/// Lets the controllers finish what is in flight for [`FINISH_GRACE`], then drops the rest, so
/// the caller still has time to hand the Lease over before its own grace runs out (a controller
/// aborted with the Lease held leaves the others waiting out the lease duration).
async fn finish(controllers: &mut Controllers) {
    let rest = async { while controllers.set.join_next().await.is_some() {} };
    if tokio::time::timeout(FINISH_GRACE, rest).await.is_err() {
        let running: String =
            controllers.running.lock().map(|r| r.iter().copied().collect::<Vec<_>>().join(", ")).unwrap_or_default();
        tracing::warn!(
            still_running = running,
            "controllers still running {FINISH_GRACE:?} after the stop; dropping them"
        );
        controllers.set.shutdown().await;
    }
}

/// The running controllers, by name (for what a slow stop names).
#[derive(Default)]
struct Controllers {
    set: tokio::task::JoinSet<()>,
    running: std::sync::Arc<std::sync::Mutex<std::collections::BTreeSet<&'static str>>>,
}

impl Controllers {
    fn spawn(&mut self, name: &'static str, work: impl std::future::Future<Output = ()> + Send + 'static) {
        let running = self.running.clone();
        if let Ok(mut r) = running.lock() {
            r.insert(name);
        }
        self.set.spawn(async move {
            work.await;
            if let Ok(mut r) = running.lock() {
                r.remove(name);
            }
        });
    }
}

/// How long the controllers get, once asked to stop, to finish the reconciles in flight.
/// Shorter than the grace the process gives its workers, so releasing the Lease fits after it.
pub const FINISH_GRACE: Duration = Duration::from_secs(3);

/// Runs every controller while this process holds the leader Lease, so two controllers never
/// both act; when leadership is lost they stop, and the process campaigns again.
///
/// Returns once `shutdown` is cancelled: the controllers take no new work then, finish the
/// reconciles in flight and end their watches (the caller may then release the Lease with
/// [`leader::release`]).
pub async fn run_all(client: kube::Client, cfg: ControllerConfig, shutdown: CancellationToken) {
    loop {
        let lost = tokio::select! {
            lost = leader::lead(client.clone(), &cfg) => lost,
            _ = shutdown.cancelled() => return,
        };
        // The controllers stop on the first of: leadership lost (dropped at once, so nothing
        // acts without the Lease), one of them ending on its own (all start over), or shutdown
        // (each finishes what it is doing first).
        let mut controllers = Controllers::default();
        controllers.spawn("scheduler", scheduler::run(client.clone(), shutdown.clone()));
        controllers.spawn("lifecycle", lifecycle::run(client.clone(), cfg.clone(), shutdown.clone()));
        controllers.spawn("pools", pools::run(client.clone(), cfg.clone(), shutdown.clone()));
        controllers.spawn("claims", claims::run(client.clone(), cfg.clone(), shutdown.clone()));
        controllers.spawn("usage", usage::run(client.clone(), cfg.clone(), shutdown.clone()));
        controllers.spawn("quota", quota::run(client.clone(), shutdown.clone()));
        tokio::select! {
            _ = lost => {
                tracing::warn!("lost the controller lease; standing by");
                controllers.set.shutdown().await;
            }
            // The stop counts from when it is asked for, not from when a first controller
            // happens to end: one that never ends must not hold the others (and the Lease).
            _ = shutdown.cancelled() => {
                finish(&mut controllers).await;
                return;
            }
            _ = controllers.set.join_next() => {
                if shutdown.is_cancelled() {
                    finish(&mut controllers).await;
                    return;
                }
                controllers.set.shutdown().await;
            }
        }
        tokio::select! {
            _ = tokio::time::sleep(Duration::from_secs(1)) => {}
            _ = shutdown.cancelled() => return,
        }
    }
}
