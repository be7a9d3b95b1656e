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

use serde_json::Value;

use kairon_model::rules::{BOUNDS, Bound, CelRule, Example, PLACED, examples};

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
    // The bounds of the kind's own spec.
    let own: &[&[&str]] = &[&["spec"]];
    let placed = match plural {
        "machineclaims" => Some(("claim-spec", own)),
        "kairontemplates" => Some(("template-spec", own)),
        _ => None,
    };
    for (kind, at_specs) in [("machine-spec", specs)].into_iter().chain(placed) {
        for spec in at_specs {
            for (_, path, bound) in BOUNDS.iter().filter(|(k, _, _)| *k == kind) {
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
    }
    broken
}

#[test]
fn the_cel_rules_and_kairons_validation_agree() {
    let mut wrong = Vec::new();
    for example in &examples() {
        let Example { what, plural, old, new, valid } = example;
        let (valid, what) = (*valid, what.as_str());
        let cel = cel_verdict(plural, old.as_ref(), new);
        let rust: Vec<String> = example.kairon_errors().iter().map(|e| e.to_string()).collect();
        if cel.is_empty() != valid {
            wrong.push(format!("{what}: the CEL rules say {cel:?}, want valid={valid}"));
        }
        if rust.is_empty() != valid {
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
