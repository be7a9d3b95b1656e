//! One place that decides a Machine's power transitions: which track it is on, whether a
//! change of `spec.powerState` is possible, and which runtime step makes it. The REST power
//! operations and the node agent consult [`plan`]; nothing else keeps a table of its own.

use crate::machine::{MachineSpec, PowerState};

/// How a Machine runs, as far as power goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Track {
    /// `spec.sandbox.templateName`: a runc sandbox. No RAM image to save and no guest to power
    /// off, so it can run, pause and stop, but not hibernate or halt.
    TemplateSandbox,
    /// `spec.image` (or `spec.sandbox` with an image, the microvm track): a QEMU VM.
    Vm,
}

impl Track {
    pub const ALL: [Track; 2] = [Track::TemplateSandbox, Track::Vm];

    /// Whether a Machine on this track can be in `state` at all.
    pub fn can_hold(self, state: PowerState) -> bool {
        plan(state, state, self).is_ok()
    }
}

impl MachineSpec {
    /// The track this spec runs on.
    pub fn track(&self) -> Track {
        if self.sandbox.as_ref().is_some_and(|s| s.template_name.is_some()) {
            Track::TemplateSandbox
        } else {
            Track::Vm
        }
    }
}

/// The one runtime operation that moves an instance from one power state to another.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Step {
    /// Boot (from Stopped or Halted) or restore (from Hibernated), and run.
    Start,
    /// The same, then pause at once.
    StartPaused,
    Pause,
    Resume,
    Stop,
    Hibernate,
    Halt,
}

/// Why a transition is refused. `reason()` is what API answers carry.
#[derive(Clone, Copy, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Refusal {
    /// Hibernated and Halted need a VM; a template sandbox cannot hold them.
    #[error("{to} needs a VM; a template sandbox (runc) can pause or stop instead")]
    NeedsVm { to: PowerState },
    /// Not reachable from the current state (Halt needs a running guest; Hibernate needs a
    /// booted one).
    #[error("cannot go from {from} to {to}")]
    Invalid { from: PowerState, to: PowerState },
}

impl Refusal {
    pub fn reason(self) -> &'static str {
        match self {
            Refusal::NeedsVm { .. } => "PowerStateUnsupported",
            Refusal::Invalid { .. } => "InvalidTransition",
        }
    }
}

/// What it takes to go from `have` to `want` on `track`: no step (already there), one step, or
/// a refusal.
///
/// Halt powers the guest off from inside, so it needs a running guest; Hibernate saves the
/// memory of a booted guest, so there is nothing to save from Halted or Stopped. Every other
/// change is reachable: a boot or restore, then a pause when Paused is asked for.
pub fn plan(want: PowerState, have: PowerState, track: Track) -> Result<Option<Step>, Refusal> {
    use PowerState::*;
    if track == Track::TemplateSandbox && matches!(want, Hibernated | Halted) {
        return Err(Refusal::NeedsVm { to: want });
    }
    if want == have {
        return Ok(None);
    }
    let step = match (have, want) {
        (Paused, Running) => Step::Resume,
        (Stopped | Halted | Hibernated, Running) => Step::Start,
        (Running, Paused) => Step::Pause,
        (Stopped | Halted | Hibernated, Paused) => Step::StartPaused,
        (_, Stopped) => Step::Stop,
        (Running | Paused, Hibernated) => Step::Hibernate,
        (Running, Halted) => Step::Halt,
        (from, to) => return Err(Refusal::Invalid { from, to }),
    };
    Ok(Some(step))
}

#[cfg(test)]
mod tests {
    use super::*;
    use PowerState::*;

    /// Every (from, to, track) triple, written out: the table a reviewer checks.
    #[test]
    fn every_transition_on_every_track() {
        let vm = |from, to| plan(to, from, Track::Vm);
        type Row = (PowerState, PowerState, Result<Option<Step>, &'static str>);
        let expected: [Row; 25] = [
            (Running, Running, Ok(None)),
            (Running, Paused, Ok(Some(Step::Pause))),
            (Running, Stopped, Ok(Some(Step::Stop))),
            (Running, Hibernated, Ok(Some(Step::Hibernate))),
            (Running, Halted, Ok(Some(Step::Halt))),
            (Paused, Running, Ok(Some(Step::Resume))),
            (Paused, Paused, Ok(None)),
            (Paused, Stopped, Ok(Some(Step::Stop))),
            (Paused, Hibernated, Ok(Some(Step::Hibernate))),
            (Paused, Halted, Err("InvalidTransition")),
            (Stopped, Running, Ok(Some(Step::Start))),
            (Stopped, Paused, Ok(Some(Step::StartPaused))),
            (Stopped, Stopped, Ok(None)),
            (Stopped, Hibernated, Err("InvalidTransition")),
            (Stopped, Halted, Err("InvalidTransition")),
            (Hibernated, Running, Ok(Some(Step::Start))),
            (Hibernated, Paused, Ok(Some(Step::StartPaused))),
            (Hibernated, Stopped, Ok(Some(Step::Stop))),
            (Hibernated, Hibernated, Ok(None)),
            (Hibernated, Halted, Err("InvalidTransition")),
            (Halted, Running, Ok(Some(Step::Start))),
            (Halted, Paused, Ok(Some(Step::StartPaused))),
            (Halted, Stopped, Ok(Some(Step::Stop))),
            (Halted, Hibernated, Err("InvalidTransition")),
            (Halted, Halted, Ok(None)),
        ];
        for (from, to, want) in expected {
            assert_eq!(vm(from, to).map_err(Refusal::reason), want, "VM {from} → {to}");
            let sandbox = plan(to, from, Track::TemplateSandbox).map_err(Refusal::reason);
            if matches!(to, Hibernated | Halted) {
                assert_eq!(sandbox, Err("PowerStateUnsupported"), "template sandbox {from} → {to}");
            } else {
                assert_eq!(sandbox, want, "template sandbox {from} → {to}");
            }
        }
        // The table is complete: every pair appears once.
        for from in PowerState::ALL {
            for to in PowerState::ALL {
                assert_eq!(expected.iter().filter(|(f, t, _)| (*f, *t) == (from, to)).count(), 1);
            }
        }
    }

    #[test]
    fn refusals_say_what_and_why() {
        let e = plan(Halted, Paused, Track::Vm).unwrap_err();
        assert_eq!(e.to_string(), "cannot go from Paused to Halted");
        let e = plan(Hibernated, Running, Track::TemplateSandbox).unwrap_err();
        assert_eq!(e.to_string(), "Hibernated needs a VM; a template sandbox (runc) can pause or stop instead");
    }

    #[test]
    fn the_track_follows_the_spec() {
        let mut spec = MachineSpec::default();
        assert_eq!(spec.track(), Track::Vm);
        spec.sandbox = Some(crate::SandboxSpec { template_name: Some("busybox".into()) });
        assert_eq!(spec.track(), Track::TemplateSandbox);
        spec.sandbox = Some(crate::SandboxSpec { template_name: None });
        assert_eq!(spec.track(), Track::Vm, "a sandbox with an image is the microvm track");
    }
}
