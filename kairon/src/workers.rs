//! A process's background work (node agent, controllers, compactor) and its orderly stop.
//!
//! Every worker ends when the shared [`CancellationToken`] is cancelled, after finishing what it
//! is doing. A process stops its workers *before* the API they talk to: in `kairon up` the node
//! agent and the controllers are clients of the very server that is shutting down, so they must
//! be done before it stops answering, or they log failures and leave half-done work behind.

use std::future::Future;
use std::sync::OnceLock;
use std::time::Duration;

use tokio::runtime::Runtime;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;

/// How long the workers get to finish the work in flight before they are aborted (the
/// controllers stop theirs sooner, `kairon_reconciler::FINISH_GRACE`, to release the Lease).
pub const GRACE: Duration = Duration::from_secs(5);

pub struct Workers {
    token: CancellationToken,
    tasks: JoinSet<()>,
}

impl Workers {
    pub fn new() -> Workers {
        Workers { token: CancellationToken::new(), tasks: JoinSet::new() }
    }

    /// Cancelled when the workers are to stop.
    pub fn token(&self) -> CancellationToken {
        self.token.clone()
    }

    /// Runs `work` on the background threads ([`background`]).
    pub fn spawn(&mut self, work: impl Future<Output = ()> + Send + 'static) {
        self.tasks.spawn_on(work, background().handle());
    }

    /// Asks every worker to stop and waits for them, at most `grace`; any still running then is
    /// aborted.
    pub async fn stop(mut self, grace: Duration) {
        self.token.cancel();
        let all = async { while self.tasks.join_next().await.is_some() {} };
        if tokio::time::timeout(grace, all).await.is_err() {
            eprintln!(
                "note: background work still running {}s after the stop was asked for; aborting it",
                grace.as_secs()
            );
            self.tasks.shutdown().await;
        }
    }
}

/// Waits `period` or until `token` is cancelled; true when cancelled.
pub async fn pause(token: &CancellationToken, period: Duration) -> bool {
    tokio::select! {
        _ = tokio::time::sleep(period) => false,
        _ = token.cancelled() => true,
    }
}

/// The niceness of the background threads.
const BACKGROUND_NICENESS: i32 = 10;

/// Where the workers run: threads of their own at a lower CPU priority. Each change a client
/// makes (a claim taking a pool member) sets off reconciles in every worker that watches it
/// (the pool's refill, the node agent's report, the claim's label), and on a small node they
/// ran beside the client's next request on the same threads; at niceness 10 the requests a
/// client waits on get the CPU first and the reconciles the rest. What a worker spawns runs
/// there too. Never dropped (a runtime may not be dropped inside another).
fn background() -> &'static Runtime {
    static BACKGROUND: OnceLock<Runtime> = OnceLock::new();
    BACKGROUND.get_or_init(|| {
        tokio::runtime::Builder::new_multi_thread()
            .thread_name("kairon-background")
            .enable_all()
            .on_thread_start(|| {
                // Linux keeps a niceness per thread: this one's.
                if let Err(e) = rustix::process::setpriority_process(None, BACKGROUND_NICENESS) {
                    tracing::debug!(error = %e, "lowering a background thread's priority failed");
                }
            })
            .build()
            .expect("starting the background threads")
    })
}
