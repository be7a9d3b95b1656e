//! The power planner (`kairon_model::power::plan`) is the one transition table: for every
//! (from, to, track) triple the REST power operations answer, with `dryRun=All`, exactly what
//! the planner says. The Machines are pinned to a node that does not exist, so nothing runs and
//! only the decision is under test.

use serde_json::{Value, json};

use kairon_e2e::Kairon;
use kairon_model::PowerState;
use kairon_model::power::{self, Track};

fn machine(name: &str, track: Track, from: PowerState) -> Value {
    let spec = match track {
        Track::TemplateSandbox => json!({"sandbox": {"templateName": "busybox"}}),
        Track::Vm => json!({"image": {"path": "/var/lib/fluxvm/images/kairon-hw.qcow2"}}),
    };
    let mut m = json!({"metadata": {"name": name}, "spec": spec});
    m["spec"]["powerState"] = json!(from.as_str());
    m["spec"]["nodeName"] = json!("nowhere");
    m
}

/// The REST operation that asks for `to`.
fn route(to: PowerState) -> &'static str {
    match to {
        PowerState::Running => "start",
        PowerState::Paused => "start?paused=true",
        PowerState::Stopped => "stop",
        PowerState::Hibernated => "hibernate",
        PowerState::Halted => "halt",
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn rest_power_operations_answer_what_the_planner_says() {
    let k = Kairon::start_with(&["--no-controllers"]).unwrap();
    let rest = k.rest().unwrap();
    let mut checked = 0;
    for track in Track::ALL {
        for from in PowerState::ALL {
            let name = format!("{}-{}", if track == Track::Vm { "vm" } else { "sb" }, from.as_str().to_lowercase());
            let created = rest.post("/api/v1/machines/power", machine(&name, track, from)).await;
            if !track.can_hold(from) {
                // Admission refuses what the track cannot hold, with the field named.
                assert_eq!(created.status, 422, "{track:?} {from}: {created:?}");
                continue;
            }
            assert_eq!(created.status, 201, "{track:?} {from}: {created:?}");
            for to in PowerState::ALL {
                let path = format!("/api/v1/machines/power/{name}/{}", route(to));
                let sep = if path.contains('?') { '&' } else { '?' };
                let answer = rest.post(&format!("{path}{sep}dryRun=All"), json!({})).await;
                match power::plan(to, from, track) {
                    Ok(_) => {
                        assert_eq!(answer.status, 200, "{track:?} {from} → {to}: {answer:?}");
                        assert_eq!(answer.body["spec"]["powerState"], to.as_str(), "{track:?} {from} → {to}");
                    }
                    Err(refusal) => {
                        assert_eq!(
                            (answer.status, answer.reason()),
                            (409, refusal.reason()),
                            "{track:?} {from} → {to}: {answer:?}"
                        );
                        assert!(answer.message().contains(&refusal.to_string()), "{}", answer.message());
                    }
                }
                checked += 1;
            }
            // A dry run stores nothing.
            let stored = rest.get(&format!("/api/v1/machines/power/{name}")).await.ok();
            assert_eq!(stored["spec"]["powerState"], from.as_str());
        }
    }
    // Three states on a template sandbox and five on a VM, each to all five.
    assert_eq!(checked, (3 + 5) * 5);
}
