//! The runtime API carries out the power planner's decisions (`kairon_model::power::plan`): for
//! every (from, to) pair on the template-sandbox track, a real runc sandbox brought to `from` and
//! sent the action `PowerAction::for_step` gives for the planned step ends in `to`; where the
//! planner refuses (Hibernated and Halted need a VM), the runtime refuses the action a VM would
//! get. The node agent sends exactly these actions, and the REST side of the same table is
//! `tests/tests/power.rs`.

use kairon_model::power::{self, Refusal, Track};
use kairon_model::{PowerState, SandboxSpec};
use kairon_runtime::api::{CreateVmRequest, PowerAction, VmState};
use kairon_runtime_api::{ClientError, InstanceId, RuntimeClient};

mod common;

fn vm_state(p: PowerState) -> VmState {
    match p {
        PowerState::Running => VmState::Running,
        PowerState::Paused => VmState::Paused,
        PowerState::Stopped => VmState::Stopped,
        PowerState::Hibernated => VmState::Hibernated,
        PowerState::Halted => VmState::Halted,
    }
}

/// Sends the planned step's action for `have` → `want` and answers the state the runtime
/// reports after it (no step: the state as it is).
async fn apply(c: &RuntimeClient, id: &InstanceId, have: PowerState, want: PowerState) -> VmState {
    match power::plan(want, have, Track::TemplateSandbox).expect("a transition the sandbox track holds") {
        None => c.get(id).await.expect("get").state,
        Some(step) => {
            let (action, paused) = PowerAction::for_step(step);
            c.power(id, action, paused).await.unwrap_or_else(|e| panic!("{have} → {want} ({action:?}): {e}")).state
        }
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn the_runtime_carries_out_every_step_the_planner_plans_for_a_sandbox() {
    let dir = tempfile::tempdir().unwrap();
    let (_rt, c, _) = common::serve(dir.path(), "power", Default::default()).await;
    let track = Track::TemplateSandbox;
    let mut checked = 0;
    for from in PowerState::ALL.into_iter().filter(|s| track.can_hold(*s)) {
        for to in PowerState::ALL {
            let name = format!("kairon-power-{}-{}", from.as_str().to_lowercase(), to.as_str().to_lowercase());
            let req = CreateVmRequest {
                name,
                sandbox: Some(SandboxSpec { template_name: Some("busybox".into()) }),
                ..Default::default()
            };
            let vm = c.create(&req).await.expect("create");
            assert_eq!(vm.state, VmState::Running);
            assert_eq!(apply(&c, &vm.id, PowerState::Running, from).await, vm_state(from), "reaching {from}");
            match power::plan(to, from, track) {
                Ok(_) => assert_eq!(apply(&c, &vm.id, from, to).await, vm_state(to), "{from} → {to}"),
                Err(refusal) => {
                    assert!(matches!(refusal, Refusal::NeedsVm { .. }), "{from} → {to}: {refusal}");
                    // The action that would reach `to` the runtime refuses on a sandbox (501
                    // NotSupported, as the planner's reason says), and the sandbox stays as it was.
                    let action = match to {
                        PowerState::Hibernated => PowerAction::Hibernate,
                        PowerState::Halted => PowerAction::Halt,
                        other => panic!("the planner refused {from} → {other} on a sandbox"),
                    };
                    match c.power(&vm.id, action, false).await {
                        Err(ClientError::Api { status, reason, .. }) => {
                            assert_eq!((status, reason.as_str()), (501, "NotSupported"), "{from} → {to} ({action:?})")
                        }
                        other => panic!("{from} → {to} ({action:?}) was not refused: {other:?}"),
                    }
                    assert_eq!(c.get(&vm.id).await.unwrap().state, vm_state(from), "{from} → {to} left it as it was");
                }
            }
            c.delete(&vm.id).await.expect("delete");
            checked += 1;
        }
    }
    assert_eq!(checked, 15, "three states a sandbox holds, five targets each");
}
