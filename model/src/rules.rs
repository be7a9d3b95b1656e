//! What a Kubernetes API server enforces by itself from the CRDs, where Kairon's own admission
//! does not run (Kairon on a real cluster): CEL rules (`x-kubernetes-validations`) and OpenAPI
//! bounds. They say in CEL what `validate.rs` says in Rust; the test in `model/tests/rules.rs`
//! evaluates both on one table of objects with a CEL implementation and proves they agree.
//! What CEL cannot say (who may write what: `api/src/guard.rs`) is the webhook's.
//!
//! Every field a rule reads is bounded (`BOUNDS`): the API server estimates a rule's cost from
//! the largest value a field may hold and refuses a CRD whose rules could cost too much.

use serde_json::{Value, json};

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::{
    CustomResourceDefinition, JSONSchemaProps, ValidationRule,
};

/// One CEL rule on an object of the schema (`self`; `oldSelf` too in a transition rule).
#[derive(Clone, Copy, Debug)]
pub struct CelRule {
    pub rule: &'static str,
    pub message: &'static str,
    /// The field a refusal names, relative to the object the rule is about (the CRD's
    /// `fieldPath`, e.g. `.resources.cpu`): the one Kairon's own validation names.
    pub field: &'static str,
    /// Reads `oldSelf`: evaluated on updates only, where the object existed before.
    pub transition: bool,
}

const fn rule(rule: &'static str, field: &'static str, message: &'static str) -> CelRule {
    CelRule { rule, message, field, transition: false }
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
        ".image",
        "a VM needs spec.image.path (or spec.runtime.kernel for direct kernel boot); for a sandbox set spec.sandbox",
    ),
    rule(
        "!has(self.sandbox) || has(self.sandbox.templateName) || has(self.image)",
        ".sandbox",
        "a sandbox needs spec.sandbox.templateName (a template built on the node) or spec.image",
    ),
    rule(
        "!has(self.sandbox) || !has(self.deviceClaims) || size(self.deviceClaims) == 0",
        ".deviceClaims",
        "a sandbox Machine cannot use PCI passthrough (VFIO): remove spec.deviceClaims or spec.sandbox",
    ),
    rule(
        "!has(self.sandbox) || !has(self.numa)",
        ".numa",
        "numa needs the qemu backend; a sandbox Machine cannot use it",
    ),
    rule(
        "!has(self.sandbox) || !has(self.cpuSet)",
        ".cpuSet",
        "cpuSet needs the qemu backend; a sandbox Machine cannot use it",
    ),
    rule(
        "!has(self.sandbox) || !has(self.hugepages)",
        ".hugepages",
        "hugepages needs the qemu backend; a sandbox Machine cannot use it",
    ),
    rule(
        "has(self.sandbox) || !has(self.resources) || !has(self.resources.cpu) || string(self.resources.cpu).matches('^[+]?([0-9]+([.]0*)?|[0-9]*000m)$')",
        ".resources.cpu",
        "a VM has whole vCPUs: write resources.cpu as a whole number such as \"2\"",
    ),
    rule(
        "!has(self.sandbox) || !has(self.sandbox.templateName) || !has(self.powerState) || self.powerState in ['Running', 'Paused', 'Stopped']",
        ".powerState",
        "a template sandbox runs under runc, which cannot hibernate or halt: use Paused or Stopped",
    ),
];

/// A Machine's spec on update.
pub const MACHINE_SPEC_CHANGES: &[CelRule] = &[CelRule {
    rule: "has(self.sandbox) == has(oldSelf.sandbox) && (!has(self.sandbox) || self.sandbox == oldSelf.sandbox)",
    message: "spec.sandbox is immutable: delete the Machine and create a new one instead",
    field: ".sandbox",
    transition: true,
}];

/// `spec.lifecycle`.
pub const LIFECYCLE: &[CelRule] = &[rule(
    "!has(self.idleTimeoutSeconds) || self.idleTimeoutSeconds >= 60",
    ".idleTimeoutSeconds",
    "idleTimeoutSeconds must be greater than or equal to 60",
)];

/// `spec.network`.
pub const NETWORK: &[CelRule] = &[rule(
    "self.mode != 'Bridge' || (has(self.bridge) && self.bridge != '')",
    ".bridge",
    "mode Bridge needs the name of a host bridge",
)];

/// A MachineClaim's spec on update.
pub const CLAIM_SPEC_CHANGES: &[CelRule] = &[CelRule {
    rule: "self.poolName == oldSelf.poolName",
    message: "spec.poolName is immutable: create a new claim instead",
    field: ".poolName",
    transition: true,
}];

/// A KaironTemplate's spec: an image, and no change once nodes may have built it.
pub const TEMPLATE_SPEC: &[CelRule] = &[rule(
    "size(self.image) > 0 && !self.image.contains(' ')",
    ".image",
    "spec.image must name an OCI image, e.g. docker.io/library/python:3.12-slim",
)];

pub const TEMPLATE_SPEC_CHANGES: &[CelRule] = &[CelRule {
    rule: "self == oldSelf",
    message: "a template's spec cannot change (nodes build it once): create a template of another name, or delete this one and create it again",
    field: "",
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
    Placed { plural: "kairontemplates", at: &["spec"], rules: TEMPLATE_SPEC },
    Placed { plural: "kairontemplates", at: &["spec"], rules: TEMPLATE_SPEC_CHANGES },
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
    ("machine-spec", &["network", "egress", "allow"], Bound::MaxItems(crate::egress::MAX_ALLOW_ENTRIES as i64)),
    ("machine-spec", &["nodeName"], Bound::MaxLength(253)),
    ("machine-spec", &["image", "path"], Bound::MaxLength(4096)),
    ("machine-spec", &["lifecycle", "idleTimeoutSeconds"], Bound::Minimum(60.0)),
    ("claim-spec", &["poolName"], Bound::MaxLength(253)),
    ("template-spec", &["image"], Bound::MaxLength(crate::template::MAX_IMAGE_LEN as i64)),
    ("template-spec", &["steps"], Bound::MaxItems(crate::template::MAX_BUILD_STEPS as i64)),
    // Bounded, so the API server can price `self == oldSelf` on the spec.
    ("template-spec", &["steps", "[]"], Bound::MaxLength(crate::template::MAX_STEP_LEN as i64)),
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
                field_path: Some(r.field.into()),
                ..Default::default()
            }));
        }
        let mut bounded: Vec<(Vec<&str>, Bound)> = Vec::new();
        for spec in machine_specs(&plural) {
            for (_, path, bound) in BOUNDS.iter().filter(|(k, _, _)| *k == "machine-spec") {
                bounded.push((spec.iter().chain(path.iter()).copied().collect(), *bound));
            }
        }
        for (kind, of) in [("claim-spec", "machineclaims"), ("template-spec", "kairontemplates")] {
            if plural == of {
                for (_, path, bound) in BOUNDS.iter().filter(|(k, _, _)| *k == kind) {
                    bounded.push((["spec"].iter().chain(path.iter()).copied().collect(), *bound));
                }
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

/// The schema at a path of properties (`[]`: an array's items).
fn find<'a>(mut schema: &'a mut JSONSchemaProps, path: &[&str]) -> Option<&'a mut JSONSchemaProps> {
    use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::JSONSchemaPropsOrArray;
    for p in path {
        schema = match *p {
            "[]" => match schema.items.as_mut()? {
                JSONSchemaPropsOrArray::Schema(items) => items.as_mut(),
                JSONSchemaPropsOrArray::Schemas(_) => return None,
            },
            p => schema.properties.as_mut()?.get_mut(p)?,
        };
    }
    Some(schema)
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

/// An object that Kairon's validation and the CRDs' rules both take (`valid`) or both refuse:
/// the table the rules test, the webhook test and the docs share. `new` holds what a rule
/// reads (`spec`); `old` is the object before an update.
#[derive(Clone, Debug)]
pub struct Example {
    pub what: String,
    /// The kind, as its plural.
    pub plural: &'static str,
    pub old: Option<Value>,
    pub new: Value,
    pub valid: bool,
}

impl Example {
    /// What Kairon's own validation (the embedded API's admission) says of this example.
    pub fn kairon_errors(&self) -> Vec<crate::validate::FieldError> {
        use crate::validate::{
            ValidationOptions, validate_claim_spec, validate_machine_spec, validate_pool_spec, validate_template,
        };
        use crate::{KaironTemplateSpec, MachineClaimSpec, MachinePoolSpec, MachineSpec};
        fn spec<T: serde::de::DeserializeOwned>(v: &Value) -> T {
            serde_json::from_value(v["spec"].clone()).expect("an example's spec reads as its type")
        }
        let opts = ValidationOptions::default();
        let old = self.old.as_ref();
        match self.plural {
            "machines" => validate_machine_spec("spec", &spec::<MachineSpec>(&self.new), old.map(spec).as_ref(), opts),
            "machinepools" => validate_pool_spec(&spec::<MachinePoolSpec>(&self.new), opts),
            "machineclaims" => validate_claim_spec(&spec::<MachineClaimSpec>(&self.new), old.map(spec).as_ref()),
            "kairontemplates" => {
                validate_template("py312", &spec::<KaironTemplateSpec>(&self.new), old.map(spec).as_ref())
            }
            other => panic!("no validation for {other}"),
        }
    }
}

/// The examples (see [`Example`]).
pub fn examples() -> Vec<Example> {
    let vm = json!({"image": {"path": "/var/lib/fluxvm/images/kairon-hw.qcow2"}});
    let sandbox = json!({"sandbox": {"templateName": "busybox"}});
    let device = json!({"deviceClaims": [{"name": "gpu", "resourceName": "nvidia.com/gpu"}]});
    let m = |base: &Value, extra: Value| machine(with(base, extra));
    let template = json!({"spec": {"image": "docker.io/library/python:3.12-slim", "steps": ["pip install pandas"]}});
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
        ("a template", "kairontemplates", None, template.clone(), true),
        ("a template with no image", "kairontemplates", None, json!({"spec": {"image": ""}}), false),
        ("a template image with a space", "kairontemplates", None, json!({"spec": {"image": "a b"}}), false),
        (
            "65 build steps",
            "kairontemplates",
            None,
            json!({"spec": {"image": "alpine", "steps": vec!["true"; 65]}}),
            false,
        ),
        ("a template kept as it is", "kairontemplates", Some(template.clone()), template.clone(), true),
        (
            "a template's steps changed",
            "kairontemplates",
            Some(template.clone()),
            json!({"spec": {"image": "docker.io/library/python:3.12-slim", "steps": ["true"]}}),
            false,
        ),
    ];
    cases
        .into_iter()
        .map(|(what, plural, old, new, valid)| Example { what: what.into(), plural, old, new, valid })
        .collect()
}
