//! The CRDs' CEL rules (`model/src/rules.rs`) and Kairon's own validation (`validate.rs`, what
//! the embedded API's admission runs) agree on a table of good and bad objects. The rules are
//! evaluated by a CEL implementation (the `cel` crate: standard CEL with `matches`), as a
//! cluster's API server would: a rule is about the object at its path, is not evaluated where
//! that object is absent, and a transition rule only on an update where it existed before.
//!
//! Not checked here: the Kubernetes CEL libraries (`quantity()`, `isURL()`, …; the rules use
//! none), the API server's cost estimate and limits (the fields the rules read are bounded,
//! `rules::BOUNDS`), and the checks only Kairon's admission makes (names as DNS labels,
//! quantities that parse, environment variable names, volume names, and who may write what).

use serde_json::{Value, json};

use kairon_model::rules::{BOUNDS, Bound, CelRule, PLACED};
use kairon_model::validate::{ValidationOptions, validate_claim_spec, validate_machine_spec, validate_pool_spec};
use kairon_model::{MachineClaimSpec, MachinePoolSpec, MachineSpec};

fn at<'a>(v: &'a Value, path: &[&str]) -> Option<&'a Value> {
    path.iter().try_fold(v, |v, p| v.get(*p)).filter(|v| !v.is_null())
}

fn eval(rule: &CelRule, this: &Value, old: Option<&Value>) -> Result<bool, String> {
    let program = cel::Program::compile(rule.rule).map_err(|e| format!("{}: {e}", rule.rule))?;
    let mut ctx = cel::Context::default();
    ctx.add_variable("self", this.clone()).map_err(|e| e.to_string())?;
    if let Some(old) = old {
        ctx.add_variable("oldSelf", old.clone()).map_err(|e| e.to_string())?;
    }
    match program.execute(&ctx) {
        Ok(cel::Value::Bool(b)) => Ok(b),
        Ok(other) => Err(format!("{} answered {other:?}", rule.rule)),
        Err(e) => Err(format!("{}: {e}", rule.rule)),
    }
}

/// The messages of the rules of kind `plural` that `new` (an update of `old`) breaks.
fn cel_verdict(plural: &str, old: Option<&Value>, new: &Value) -> Vec<String> {
    let mut broken = Vec::new();
    for placed in PLACED.iter().filter(|p| p.plural == plural) {
        let Some(this) = at(new, placed.at) else { continue };
        let before = old.and_then(|o| at(o, placed.at));
        for rule in placed.rules {
            if rule.transition && before.is_none() {
                continue;
            }
            match eval(rule, this, before) {
                Ok(true) => {}
                Ok(false) => broken.push(rule.message.to_string()),
                Err(e) => panic!("evaluating a rule failed: {e}"),
            }
        }
    }
    // The OpenAPI bounds on the fields of each Machine spec in the object.
    let specs: &[&[&str]] = match plural {
        "machines" => &[&["spec"]],
        "machinepools" => &[&["spec", "template", "spec"]],
        _ => &[],
    };
    for spec in specs {
        for (_, path, bound) in BOUNDS.iter().filter(|(k, _, _)| *k == "machine-spec") {
            let full: Vec<&str> = spec.iter().chain(path.iter()).copied().collect();
            let Some(v) = at(new, &full) else { continue };
            let fits = match bound {
                Bound::MaxLength(n) => v.as_str().is_none_or(|s| s.chars().count() as i64 <= *n),
                Bound::MaxItems(n) => v.as_array().is_none_or(|a| a.len() as i64 <= *n),
                Bound::Minimum(n) => v.as_f64().is_none_or(|x| x >= *n),
            };
            if !fits {
                broken.push(format!("{} breaks {bound:?}", full.join(".")));
            }
        }
    }
    broken
}

/// What Kairon's own validation says of the same object.
fn rust_verdict(plural: &str, old: Option<&Value>, new: &Value) -> Vec<String> {
    let opts = ValidationOptions::default();
    let spec = |v: &Value| v["spec"].clone();
    let errs = match plural {
        "machines" => {
            let new: MachineSpec = serde_json::from_value(spec(new)).unwrap();
            let old: Option<MachineSpec> = old.map(|o| serde_json::from_value(spec(o)).unwrap());
            validate_machine_spec("spec", &new, old.as_ref(), opts)
        }
        "machinepools" => validate_pool_spec(&serde_json::from_value::<MachinePoolSpec>(spec(new)).unwrap(), opts),
        "machineclaims" => {
            let new: MachineClaimSpec = serde_json::from_value(spec(new)).unwrap();
            let old: Option<MachineClaimSpec> = old.map(|o| serde_json::from_value(spec(o)).unwrap());
            validate_claim_spec(&new, old.as_ref())
        }
        other => panic!("no validation for {other}"),
    };
    errs.iter().map(|e| e.to_string()).collect()
}

fn machine(spec: Value) -> Value {
    json!({ "spec": spec })
}

fn pool(template: Value) -> Value {
    json!({"spec": {"replicas": 1, "template": {"spec": template}}})
}

fn with(base: &Value, extra: Value) -> Value {
    let mut v = base.clone();
    for (k, x) in extra.as_object().unwrap() {
        v[k] = x.clone();
    }
    v
}

#[test]
fn the_cel_rules_and_kairons_validation_agree() {
    let vm = json!({"image": {"path": "/var/lib/fluxvm/images/kairon-hw.qcow2"}});
    let sandbox = json!({"sandbox": {"templateName": "busybox"}});
    let device = json!({"deviceClaims": [{"name": "gpu", "resourceName": "nvidia.com/gpu"}]});
    let m = |base: &Value, extra: Value| machine(with(base, extra));
    // (what, kind, old, new, valid)
    let cases: Vec<(&str, &str, Option<Value>, Value, bool)> = vec![
        ("a VM", "machines", None, machine(vm.clone()), true),
        ("a template sandbox", "machines", None, machine(sandbox.clone()), true),
        ("a VM of 2 vCPUs", "machines", None, m(&vm, json!({"resources": {"cpu": "2", "memory": "1Gi"}})), true),
        ("a VM of 2000m", "machines", None, m(&vm, json!({"resources": {"cpu": "2000m"}})), true),
        ("a VM of 2 as a number", "machines", None, m(&vm, json!({"resources": {"cpu": 2}})), true),
        ("a VM of 500m", "machines", None, m(&vm, json!({"resources": {"cpu": "500m"}})), false),
        ("a VM of 1.5", "machines", None, m(&vm, json!({"resources": {"cpu": "1.5"}})), false),
        ("a sandbox of 500m", "machines", None, m(&sandbox, json!({"resources": {"cpu": "500m"}})), true),
        ("a VM with nothing to boot", "machines", None, machine(json!({})), false),
        ("a sandbox with nothing to run", "machines", None, machine(json!({"sandbox": {}})), false),
        ("a sandbox VM from an image", "machines", None, m(&vm, json!({"sandbox": {}})), true),
        ("a sandbox with a device", "machines", None, m(&sandbox, device.clone()), false),
        ("a VM with a device", "machines", None, m(&vm, device.clone()), true),
        ("a sandbox pinned to CPUs", "machines", None, m(&sandbox, json!({"cpuSet": "0-1"})), false),
        ("a VM pinned to CPUs", "machines", None, m(&vm, json!({"cpuSet": "0-1"})), true),
        ("a sandbox on hugepages", "machines", None, m(&sandbox, json!({"hugepages": {"pageSize": "2Mi"}})), false),
        ("a hibernated template sandbox", "machines", None, m(&sandbox, json!({"powerState": "Hibernated"})), false),
        ("a halted template sandbox", "machines", None, m(&sandbox, json!({"powerState": "Halted"})), false),
        ("a paused template sandbox", "machines", None, m(&sandbox, json!({"powerState": "Paused"})), true),
        ("a hibernated VM", "machines", None, m(&vm, json!({"powerState": "Hibernated"})), true),
        ("an idle timeout of 30 s", "machines", None, m(&vm, json!({"lifecycle": {"idleTimeoutSeconds": 30}})), false),
        ("an idle timeout of 60 s", "machines", None, m(&vm, json!({"lifecycle": {"idleTimeoutSeconds": 60}})), true),
        ("a bridge without its name", "machines", None, m(&vm, json!({"network": {"mode": "Bridge"}})), false),
        (
            "a bridge with its name",
            "machines",
            None,
            m(&vm, json!({"network": {"mode": "Bridge", "bridge": "br0"}})),
            true,
        ),
        ("a tap", "machines", None, m(&vm, json!({"network": {"mode": "Tap"}})), true),
        (
            "a bridge of 16 characters",
            "machines",
            None,
            m(&vm, json!({"network": {"mode": "Bridge", "bridge": "bridge-of-16-chr"}})),
            false,
        ),
        (
            "17 devices",
            "machines",
            None,
            m(
                &vm,
                json!({"deviceClaims": (0..17).map(|i| json!({"name": format!("d{i}"), "resourceName": "nvidia.com/gpu"})).collect::<Vec<_>>()}),
            ),
            false,
        ),
        (
            "a 33-character quantity",
            "machines",
            None,
            m(&vm, json!({"resources": {"memory": format!("{}Mi", "1".repeat(31))}})),
            false,
        ),
        ("a CPU set of 300 characters", "machines", None, m(&vm, json!({"cpuSet": vec!["1"; 150].join(",")})), false),
        (
            "a sandbox's template changed",
            "machines",
            Some(machine(sandbox.clone())),
            machine(json!({"sandbox": {"templateName": "python"}})),
            false,
        ),
        ("a VM made a sandbox", "machines", Some(machine(vm.clone())), m(&vm, json!({"sandbox": {}})), false),
        ("a sandbox made a VM", "machines", Some(m(&vm, json!({"sandbox": {}}))), machine(vm.clone()), false),
        (
            "a sandbox paused",
            "machines",
            Some(machine(sandbox.clone())),
            m(&sandbox, json!({"powerState": "Paused"})),
            true,
        ),
        ("a pool of sandboxes", "machinepools", None, pool(sandbox.clone()), true),
        ("a pool of sandboxes with devices", "machinepools", None, pool(with(&sandbox, device.clone())), false),
        (
            "a pool idling at 10 s",
            "machinepools",
            None,
            pool(with(&vm, json!({"lifecycle": {"idleTimeoutSeconds": 10}}))),
            false,
        ),
        ("a pool of half vCPUs", "machinepools", None, pool(with(&vm, json!({"resources": {"cpu": "500m"}}))), false),
        ("a claim", "machineclaims", None, json!({"spec": {"poolName": "agents"}}), true),
        (
            "a claim moved to another pool",
            "machineclaims",
            Some(json!({"spec": {"poolName": "agents"}})),
            json!({"spec": {"poolName": "others"}}),
            false,
        ),
        (
            "a claim kept in its pool",
            "machineclaims",
            Some(json!({"spec": {"poolName": "agents"}})),
            json!({"spec": {"poolName": "agents", "ttlSeconds": 60}}),
            true,
        ),
    ];
    let mut wrong = Vec::new();
    for (what, plural, old, new, valid) in &cases {
        let cel = cel_verdict(plural, old.as_ref(), new);
        let rust = rust_verdict(plural, old.as_ref(), new);
        if cel.is_empty() != *valid {
            wrong.push(format!("{what}: the CEL rules say {cel:?}, want valid={valid}"));
        }
        if rust.is_empty() != *valid {
            wrong.push(format!("{what}: Kairon's validation says {rust:?}, want valid={valid}"));
        }
    }
    assert!(wrong.is_empty(), "{} disagreements:\n{}", wrong.len(), wrong.join("\n"));
}

/// Every rule is in the CRDs where it belongs, and the fields the rules read are bounded.
#[test]
fn the_crds_carry_every_rule_and_bound() {
    let crds = kairon_model::crds::all();
    for placed in PLACED {
        let crd = crds.iter().find(|c| c.spec.names.plural == placed.plural).unwrap();
        for version in &crd.spec.versions {
            let mut schema = version.schema.as_ref().unwrap().open_api_v3_schema.as_ref().unwrap();
            for p in placed.at {
                schema =
                    schema.properties.as_ref().unwrap().get(*p).unwrap_or_else(|| panic!("{p} in {}", placed.plural));
            }
            let carried: Vec<&str> =
                schema.x_kubernetes_validations.iter().flatten().map(|r| r.rule.as_str()).collect();
            for rule in placed.rules {
                assert!(
                    carried.contains(&rule.rule),
                    "{} {:?} {}: {}",
                    placed.plural,
                    placed.at,
                    version.name,
                    rule.rule
                );
            }
        }
    }
    let machines = crds.iter().find(|c| c.spec.names.plural == "machines").unwrap();
    let root = machines.spec.versions[0].schema.as_ref().unwrap().open_api_v3_schema.as_ref().unwrap();
    let props = root.properties.as_ref().unwrap()["spec"].properties.as_ref().unwrap();
    assert_eq!(props["resources"].properties.as_ref().unwrap()["cpu"].max_length, Some(32));
    assert_eq!(props["deviceClaims"].max_items, Some(16));
    assert_eq!(props["lifecycle"].properties.as_ref().unwrap()["idleTimeoutSeconds"].minimum, Some(60.0));
}
