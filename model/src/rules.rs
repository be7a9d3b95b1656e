//! What a Kubernetes API server enforces by itself from the CRDs, where Kairon's own admission
//! does not run (Kairon on a real cluster): CEL rules (`x-kubernetes-validations`) and OpenAPI
//! bounds. They say in CEL what `validate.rs` says in Rust; the test in `model/tests/rules.rs`
//! evaluates both on one table of objects with a CEL implementation and proves they agree.
//! What CEL cannot say (who may write what: `api/src/guard.rs`) is the webhook's.
//!
//! Every field a rule reads is bounded (`BOUNDS`): the API server estimates a rule's cost from
//! the largest value a field may hold and refuses a CRD whose rules could cost too much.

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    CustomResourceDefinition, JSONSchemaProps, ValidationRule,
};

/// One CEL rule on an object of the schema (`self`; `oldSelf` too in a transition rule).
#[derive(Clone, Copy, Debug)]
pub struct CelRule {
    pub rule: &'static str,
    pub message: &'static str,
    /// Reads `oldSelf`: evaluated on updates only, where the object existed before.
    pub transition: bool,
}

const fn rule(rule: &'static str, message: &'static str) -> CelRule {
    CelRule { rule, message, transition: false }
}

/// A set of rules and where it sits: a kind (its plural) and the path of properties to the
/// object the rules are about.
#[derive(Clone, Copy, Debug)]
pub struct Placed {
    pub plural: &'static str,
    pub at: &'static [&'static str],
    pub rules: &'static [CelRule],
}

/// A Machine's spec (also a pool template's): the track's rules.
pub const MACHINE_SPEC: &[CelRule] = &[
    rule(
        "has(self.sandbox) || has(self.image) || (has(self.runtime) && has(self.runtime.kernel))",
        "a VM needs spec.image.path (or spec.runtime.kernel for direct kernel boot); for a sandbox set spec.sandbox",
    ),
    rule(
        "!has(self.sandbox) || has(self.sandbox.templateName) || has(self.image)",
        "a sandbox needs spec.sandbox.templateName (a template built on the node) or spec.image",
    ),
    rule(
        "!has(self.sandbox) || !has(self.deviceClaims) || size(self.deviceClaims) == 0",
        "a sandbox Machine cannot use PCI passthrough (VFIO): remove spec.deviceClaims or spec.sandbox",
    ),
    rule(
        "!has(self.sandbox) || (!has(self.numa) && !has(self.cpuSet) && !has(self.hugepages))",
        "numa, cpuSet and hugepages need the qemu backend; a sandbox Machine cannot use them",
    ),
    rule(
        "has(self.sandbox) || !has(self.resources) || !has(self.resources.cpu) || string(self.resources.cpu).matches('^[+]?([0-9]+([.]0*)?|[0-9]*000m)$')",
        "a VM has whole vCPUs: write resources.cpu as a whole number such as \"2\"",
    ),
    rule(
        "!has(self.sandbox) || !has(self.sandbox.templateName) || !has(self.powerState) || self.powerState in ['Running', 'Paused', 'Stopped']",
        "a template sandbox runs under runc, which cannot hibernate or halt: use Paused or Stopped",
    ),
];

/// A Machine's spec on update.
pub const MACHINE_SPEC_CHANGES: &[CelRule] = &[CelRule {
    rule: "has(self.sandbox) == has(oldSelf.sandbox) && (!has(self.sandbox) || self.sandbox == oldSelf.sandbox)",
    message: "spec.sandbox is immutable: delete the Machine and create a new one instead",
    transition: true,
}];

/// `spec.lifecycle`.
pub const LIFECYCLE: &[CelRule] = &[rule(
    "!has(self.idleTimeoutSeconds) || self.idleTimeoutSeconds >= 60",
    "idleTimeoutSeconds must be greater than or equal to 60",
)];

/// `spec.network`.
pub const NETWORK: &[CelRule] = &[rule(
    "self.mode != 'Bridge' || (has(self.bridge) && self.bridge != '')",
    "mode Bridge needs the name of a host bridge",
)];

/// A MachineClaim's spec on update.
pub const CLAIM_SPEC_CHANGES: &[CelRule] = &[CelRule {
    rule: "self.poolName == oldSelf.poolName",
    message: "spec.poolName is immutable: create a new claim instead",
    transition: true,
}];

/// Every rule, where it sits.
pub const PLACED: &[Placed] = &[
    Placed { plural: "machines", at: &["spec"], rules: MACHINE_SPEC },
    Placed { plural: "machines", at: &["spec"], rules: MACHINE_SPEC_CHANGES },
    Placed { plural: "machines", at: &["spec", "lifecycle"], rules: LIFECYCLE },
    Placed { plural: "machines", at: &["spec", "network"], rules: NETWORK },
    Placed { plural: "machinepools", at: &["spec", "template", "spec"], rules: MACHINE_SPEC },
    Placed { plural: "machinepools", at: &["spec", "template", "spec", "lifecycle"], rules: LIFECYCLE },
    Placed { plural: "machinepools", at: &["spec", "template", "spec", "network"], rules: NETWORK },
    Placed { plural: "machineclaims", at: &["spec"], rules: CLAIM_SPEC_CHANGES },
];

/// An OpenAPI bound on one field.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Bound {
    MaxLength(i64),
    MaxItems(i64),
    Minimum(f64),
}

/// The bounds, by kind and path to the field (those of a Machine's spec hold in a pool
/// template's too).
pub const BOUNDS: &[(&str, &[&str], Bound)] = &[
    ("machine-spec", &["resources", "cpu"], Bound::MaxLength(crate::validate::MAX_QUANTITY_LEN as i64)),
    ("machine-spec", &["resources", "memory"], Bound::MaxLength(crate::validate::MAX_QUANTITY_LEN as i64)),
    ("machine-spec", &["sandbox", "templateName"], Bound::MaxLength(253)),
    ("machine-spec", &["deviceClaims"], Bound::MaxItems(crate::validate::MAX_DEVICE_CLAIMS as i64)),
    ("machine-spec", &["cpuSet"], Bound::MaxLength(256)),
    ("machine-spec", &["network", "bridge"], Bound::MaxLength(15)),
    ("machine-spec", &["nodeName"], Bound::MaxLength(253)),
    ("machine-spec", &["image", "path"], Bound::MaxLength(4096)),
    ("machine-spec", &["lifecycle", "idleTimeoutSeconds"], Bound::Minimum(60.0)),
    ("claim-spec", &["poolName"], Bound::MaxLength(253)),
];

/// Where a Machine's spec sits in each kind that holds one.
fn machine_specs(plural: &str) -> &'static [&'static [&'static str]] {
    match plural {
        "machines" => &[&["spec"]],
        "machinepools" => &[&["spec", "template", "spec"]],
        _ => &[],
    }
}

/// Adds the rules and bounds to every version of a Kairon CRD.
pub fn apply(crd: &mut CustomResourceDefinition) {
    let plural = crd.spec.names.plural.clone();
    for version in &mut crd.spec.versions {
        let Some(root) = version.schema.as_mut().and_then(|s| s.open_api_v3_schema.as_mut()) else { continue };
        for placed in PLACED.iter().filter(|p| p.plural == plural) {
            let Some(at) = find(root, placed.at) else { continue };
            let rules = at.x_kubernetes_validations.get_or_insert_with(Vec::new);
            rules.extend(placed.rules.iter().map(|r| ValidationRule {
                rule: r.rule.into(),
                message: Some(r.message.into()),
                ..Default::default()
            }));
        }
        let mut bounded: Vec<(Vec<&str>, Bound)> = Vec::new();
        for spec in machine_specs(&plural) {
            for (_, path, bound) in BOUNDS.iter().filter(|(k, _, _)| *k == "machine-spec") {
                bounded.push((spec.iter().chain(path.iter()).copied().collect(), *bound));
            }
        }
        if plural == "machineclaims" {
            for (_, path, bound) in BOUNDS.iter().filter(|(k, _, _)| *k == "claim-spec") {
                bounded.push((["spec"].iter().chain(path.iter()).copied().collect(), *bound));
            }
        }
        for (path, bound) in bounded {
            if let Some(field) = find(root, &path) {
                match bound {
                    Bound::MaxLength(n) => field.max_length = Some(n),
                    Bound::MaxItems(n) => field.max_items = Some(n),
                    Bound::Minimum(n) => field.minimum = Some(n),
                }
            }
        }
    }
}

/// The schema at a path of properties.
fn find<'a>(mut schema: &'a mut JSONSchemaProps, path: &[&str]) -> Option<&'a mut JSONSchemaProps> {
    for p in path {
        schema = schema.properties.as_mut()?.get_mut(*p)?;
    }
    Some(schema)
}
