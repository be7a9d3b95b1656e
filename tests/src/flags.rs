//! The `kairon up` flags the tests start with: one named set that makes the node agent quick,
//! and the intervals a test shortens on top of it, so each test file says which it uses.

use std::ops::Deref;

/// The node agent's tick and heartbeat at 1 s: a node registers and follows its Machines
/// quickly.
pub const NODE_FAST: &[&str] = &["--node-tick", "1s", "--heartbeat-interval", "1s"];

/// No node runtime, so no node agent and no controllers either (they start beside the runtime):
/// the API alone.
pub const API_ONLY: &[&str] = &["--no-runtime"];

/// A set of `kairon up` flags; derefs to the `&[&str]` that [`crate::Kairon::start_with`]
/// takes.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Flags<'a>(Vec<&'a str>);

impl<'a> Flags<'a> {
    /// No flags.
    pub fn none() -> Self {
        Flags(Vec::new())
    }

    /// [`NODE_FAST`].
    pub fn fast() -> Self {
        Flags(NODE_FAST.to_vec())
    }

    /// [`NODE_FAST`] with activity written to the Machine at most every `every`
    /// (`--activity-write-interval`).
    pub fn fast_activity(every: &'a str) -> Self {
        Self::fast().activity_writes(every)
    }

    /// `--activity-write-interval`: how often the node agent may write lastActivityTime.
    pub fn activity_writes(self, every: &'a str) -> Self {
        self.with(&["--activity-write-interval", every])
    }

    /// `--activity-stamp-interval`: how often guest sessions stamp last-activity.
    pub fn activity_stamps(self, every: &'a str) -> Self {
        self.with(&["--activity-stamp-interval", every])
    }

    /// `--test-usage-interval`: how often the usage controller accrues.
    pub fn usage_interval(self, every: &'a str) -> Self {
        self.with(&["--test-usage-interval", every])
    }

    /// `--test-min-idle-timeout-seconds`: the shortest idle timeout the server accepts.
    pub fn min_idle_timeout_seconds(self, seconds: &'a str) -> Self {
        self.with(&["--test-min-idle-timeout-seconds", seconds])
    }

    /// These flags as well (a flag and its value as two items).
    pub fn with(mut self, more: &[&'a str]) -> Self {
        self.0.extend_from_slice(more);
        self
    }

    pub fn to_vec(&self) -> Vec<&'a str> {
        self.0.clone()
    }
}

impl<'a> Deref for Flags<'a> {
    type Target = [&'a str];

    fn deref(&self) -> &[&'a str] {
        &self.0
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sets_compose_in_order() {
        let f = Flags::fast_activity("2s").with(&["--node-cpu", "100m"]);
        assert_eq!(
            &*f,
            &[
                "--node-tick",
                "1s",
                "--heartbeat-interval",
                "1s",
                "--activity-write-interval",
                "2s",
                "--node-cpu",
                "100m"
            ]
        );
        assert_eq!(&*Flags::none(), &[] as &[&str]);
    }
}
