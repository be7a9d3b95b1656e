//! Waiting, in the tests: a wait polls the condition it waits for and, when it gives up, says
//! what it waited for and the last state it saw; a wait that lets time pass on purpose (to show
//! that something does *not* happen) is a [`hold`], which says why.

use std::fmt::Debug;
use std::future::Future;
use std::time::Duration;

/// The timeout most waits in the tests use.
pub const MINUTE: Duration = Duration::from_secs(60);

/// How often the async waits poll.
pub const POLL: Duration = Duration::from_millis(100);

/// Polls `check` every [`POLL`] until it returns `Ok`, or panics after `timeout` with `what` and
/// the last `Err` it returned (the state seen instead).
pub async fn wait_for<T, S, F, Fut>(what: &str, timeout: Duration, check: F) -> T
where
    S: Debug,
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, S>>,
{
    wait_for_and_report(what, timeout, check, String::new).await
}

/// [`wait_for`], with `report` (say, the server's log) added to the panic when it times out.
pub async fn wait_for_and_report<T, S, F, Fut, R>(what: &str, timeout: Duration, mut check: F, report: R) -> T
where
    S: Debug,
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T, S>>,
    R: FnOnce() -> String,
{
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        let last = match check().await {
            Ok(v) => return v,
            Err(seen) => seen,
        };
        if tokio::time::Instant::now() >= deadline {
            timed_out(what, timeout, &last, report());
        }
        tokio::time::sleep(POLL).await;
    }
}

/// Polls `check` every 100 ms until it returns Some, or panics with `what` after `timeout`.
/// (When the check can say what it saw instead, [`wait_for`] puts that in the panic.)
pub async fn eventually<T, F, Fut>(what: &str, timeout: Duration, mut check: F) -> T
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Option<T>>,
{
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        if let Some(v) = check().await {
            return v;
        }
        assert!(tokio::time::Instant::now() < deadline, "timed out after {timeout:?} waiting for {what}");
        tokio::time::sleep(POLL).await;
    }
}

/// [`wait_for`] for tests that are not async (kubectl, curl): polls `check` every `every`.
pub fn wait_for_sync<T, S: Debug>(
    what: &str,
    timeout: Duration,
    every: Duration,
    mut check: impl FnMut() -> Result<T, S>,
) -> T {
    let deadline = std::time::Instant::now() + timeout;
    loop {
        let last = match check() {
            Ok(v) => return v,
            Err(seen) => seen,
        };
        if std::time::Instant::now() >= deadline {
            timed_out(what, timeout, &last, String::new());
        }
        std::thread::sleep(every);
    }
}

fn timed_out(what: &str, timeout: Duration, last: &dyn Debug, report: String) -> ! {
    let report = if report.is_empty() { report } else { format!("\n{report}") };
    panic!("timed out after {timeout:?} waiting for {what}; last seen: {last:?}{report}")
}

/// Lets `duration` pass on purpose, for the reason given: to show that something does *not*
/// happen within it (never to wait for something that should: that is [`wait_for`]).
pub async fn hold(duration: Duration, why: &str) {
    eprintln!("holding {duration:?}: {why}");
    tokio::time::sleep(duration).await;
}

/// [`hold`] for tests that are not async.
pub fn hold_sync(duration: Duration, why: &str) {
    eprintln!("holding {duration:?}: {why}");
    std::thread::sleep(duration);
}

/// A window of time a test watches, every `every`, for something that must not happen (or for
/// what it sees meanwhile): `let mut w = during(..); while w.tick().await { check }`.
pub fn during(duration: Duration, every: Duration) -> Window {
    Window { until: tokio::time::Instant::now() + duration, every, started: false }
}

/// See [`during`].
pub struct Window {
    until: tokio::time::Instant,
    every: Duration,
    started: bool,
}

impl Window {
    /// Whether the window is still open; from the second call on, after waiting `every`.
    pub async fn tick(&mut self) -> bool {
        if std::mem::replace(&mut self.started, true) {
            tokio::time::sleep(self.every).await;
        }
        tokio::time::Instant::now() < self.until
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_wait_returns_what_the_check_found() {
        let mut n = 0;
        let got = wait_for("the third poll", Duration::from_secs(5), || {
            n += 1;
            let n = n;
            async move { if n >= 3 { Ok(n) } else { Err(n) } }
        })
        .await;
        assert_eq!(got, 3);
    }

    #[tokio::test]
    #[should_panic(expected = "waiting for never; last seen: \"still no\"")]
    async fn a_timeout_says_what_was_awaited_and_what_was_seen() {
        wait_for("never", Duration::from_millis(250), || async { Err::<(), _>("still no") }).await;
    }

    #[test]
    #[should_panic(expected = "waiting for never; last seen: 7")]
    fn the_sync_wait_says_the_same() {
        wait_for_sync("never", Duration::from_millis(50), Duration::from_millis(10), || Err::<(), _>(7));
    }

    #[tokio::test]
    async fn a_window_ticks_until_it_closes() {
        let mut w = during(Duration::from_millis(250), Duration::from_millis(100));
        let mut ticks = 0;
        while w.tick().await {
            ticks += 1;
        }
        assert!((2..=4).contains(&ticks), "{ticks}");
    }
}
