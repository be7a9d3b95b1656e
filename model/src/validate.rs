//! Validation of the Kairon kinds. Each rule reports the field it is about, in the words
//! Kubernetes uses (`spec.x: Invalid value: 30: must be …`), so a user knows what to fix.

use std::collections::{BTreeMap, BTreeSet};
use std::fmt;

use crate::claim::MachineClaimSpec;
use crate::machine::{MIN_IDLE_TIMEOUT_SECONDS, MachineSpec, NetworkMode};
use crate::node::KaironNodeSpec;
use crate::pool::MachinePoolSpec;
use crate::power::{self, Refusal, Track};
use crate::quantity::Quantity;
use crate::quota::KaironQuotaSpec;
use crate::template::KaironTemplateSpec;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ErrorType {
    Invalid,
    Required,
    Forbidden,
    NotSupported,
    Duplicate,
    TooLong,
    TooMany,
}

impl ErrorType {
    /// The `reason` of a `metav1.StatusCause`.
    pub fn cause_reason(self) -> &'static str {
        match self {
            ErrorType::Invalid => "FieldValueInvalid",
            ErrorType::Required => "FieldValueRequired",
            ErrorType::Forbidden => "FieldValueForbidden",
            ErrorType::NotSupported => "FieldValueNotSupported",
            ErrorType::Duplicate => "FieldValueDuplicate",
            ErrorType::TooLong => "FieldValueTooLong",
            ErrorType::TooMany => "FieldValueTooMany",
        }
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FieldError {
    pub field: String,
    pub kind: ErrorType,
    /// The offending value, as the user wrote it (absent for Required/Forbidden).
    pub value: Option<String>,
    pub detail: String,
}

impl fmt::Display for FieldError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let (label, with_value) = match self.kind {
            ErrorType::Invalid => ("Invalid value", true),
            ErrorType::Required => ("Required value", false),
            ErrorType::Forbidden => ("Forbidden", false),
            ErrorType::NotSupported => ("Unsupported value", true),
            ErrorType::Duplicate => ("Duplicate value", true),
            ErrorType::TooLong => ("Too long", false),
            ErrorType::TooMany => ("Too many", false),
        };
        match (&self.value, with_value) {
            (Some(v), true) => write!(f, "{}: {label}: {v}: {}", self.field, self.detail),
            _ => write!(f, "{}: {label}: {}", self.field, self.detail),
        }
    }
}

/// Settings that tests may lower (documented as test-only on the command line).
#[derive(Clone, Copy, Debug)]
pub struct ValidationOptions {
    pub min_idle_timeout_seconds: i64,
}

impl Default for ValidationOptions {
    fn default() -> Self {
        ValidationOptions { min_idle_timeout_seconds: MIN_IDLE_TIMEOUT_SECONDS }
    }
}

struct Errors(Vec<FieldError>);

impl Errors {
    fn push(&mut self, field: impl Into<String>, kind: ErrorType, value: Option<String>, detail: impl Into<String>) {
        self.0.push(FieldError { field: field.into(), kind, value, detail: detail.into() });
    }
    fn invalid(&mut self, field: impl Into<String>, value: impl fmt::Display, detail: impl Into<String>) {
        self.push(field, ErrorType::Invalid, Some(value.to_string()), detail);
    }
    fn required(&mut self, field: impl Into<String>, detail: impl Into<String>) {
        self.push(field, ErrorType::Required, None, detail);
    }
    fn forbidden(&mut self, field: impl Into<String>, detail: impl Into<String>) {
        self.push(field, ErrorType::Forbidden, None, detail);
    }
    fn positive(&mut self, field: impl Into<String>, v: Option<i64>) {
        if let Some(v) = v
            && v <= 0
        {
            self.invalid(field, v, "must be greater than 0");
        }
    }
}

/// A DNS-1123 label: lowercase alphanumerics and '-', at most 63, alphanumeric at both ends.
pub fn is_dns_label(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 63
        && s.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !s.starts_with('-')
        && !s.ends_with('-')
}

/// A DNS-1123 subdomain: dot-separated labels, at most 253.
pub fn is_dns_subdomain(s: &str) -> bool {
    !s.is_empty() && s.len() <= 253 && s.split('.').all(is_dns_label)
}

fn quantity(errs: &mut Errors, field: &str, q: &Quantity) -> Option<f64> {
    if q.0.chars().count() > MAX_QUANTITY_LEN {
        errs.push(field, ErrorType::TooLong, None, format!("may have at most {MAX_QUANTITY_LEN} characters"));
        return None;
    }
    match q.to_f64() {
        Ok(v) if v > 0.0 => Some(v),
        Ok(_) => {
            errs.invalid(field, &q.0, "must be greater than 0");
            None
        }
        Err(e) => {
            errs.invalid(field, format!("{:?}", q.0), e.to_string());
            None
        }
    }
}

fn valid_cpu_set(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 256
        && s.split(',').all(|part| {
            let mut bounds = part.splitn(2, '-').map(|n| n.trim().parse::<u32>());
            match (bounds.next(), bounds.next()) {
                (Some(Ok(_)), None) => true,
                (Some(Ok(a)), Some(Ok(b))) => a <= b,
                _ => false,
            }
        })
}

fn valid_mac(s: &str) -> bool {
    let parts: Vec<&str> = s.split(':').collect();
    parts.len() == 6 && parts.iter().all(|p| p.len() == 2 && u8::from_str_radix(p, 16).is_ok())
}

/// Validates a Machine spec at `path` (`spec`, or `spec.template.spec` inside a pool). `old`
/// is the stored spec on update, for rules about changes.
pub fn validate_machine_spec(
    path: &str,
    spec: &MachineSpec,
    old: Option<&MachineSpec>,
    opts: ValidationOptions,
) -> Vec<FieldError> {
    let mut errs = Errors(Vec::new());
    let p = |f: &str| format!("{path}.{f}");

    if let Some(l) = &spec.lifecycle {
        if let Some(t) = l.idle_timeout_seconds
            && t < opts.min_idle_timeout_seconds
        {
            errs.invalid(
                p("lifecycle.idleTimeoutSeconds"),
                t,
                format!("must be greater than or equal to {}", opts.min_idle_timeout_seconds),
            );
        }
        if l.idle_cpu_millicores < 0 {
            errs.invalid(p("lifecycle.idleCPUMillicores"), l.idle_cpu_millicores, "must be 0 or more");
        }
        errs.positive(p("lifecycle.maxLifetimeSeconds"), l.max_lifetime_seconds);
        errs.positive(p("lifecycle.wakeTimeoutSeconds"), Some(l.wake_timeout_seconds));
    }
    errs.positive(p("ttlSeconds"), spec.ttl_seconds);
    validate_env(&mut errs, &p("env"), &spec.env);
    validate_secret_env(&mut errs, &p("secretEnv"), &spec.secret_env);

    let template_sandbox = spec.sandbox.as_ref().is_some_and(|s| s.template_name.is_some());
    if let Some(r) = &spec.resources {
        if let Some(cpu) = &r.cpu
            && quantity(&mut errs, &p("resources.cpu"), cpu).is_some()
            && !spec.is_sandbox()
            && cpu.is_whole() == Ok(false)
        {
            errs.invalid(p("resources.cpu"), &cpu.0, "a VM has whole vCPUs: write a whole number such as \"2\"");
        }
        if let Some(mem) = &r.memory {
            quantity(&mut errs, &p("resources.memory"), mem);
        }
    }
    if let Some(img) = &spec.image
        && !img.path.starts_with('/')
    {
        errs.invalid(p("image.path"), format!("{:?}", img.path), "must be an absolute path on the node");
    }
    if let Some(img) = spec.image.as_ref().filter(|i| i.path.chars().count() > 4096) {
        errs.push(
            p("image.path"),
            ErrorType::TooLong,
            None,
            format!("may have at most 4096 characters, not {}", img.path.chars().count()),
        );
    }
    if spec.device_claims.len() > MAX_DEVICE_CLAIMS {
        errs.push(
            p("deviceClaims"),
            ErrorType::TooMany,
            None,
            format!("may have at most {MAX_DEVICE_CLAIMS} items, not {}", spec.device_claims.len()),
        );
    }
    if let Some(k) = spec.runtime.as_ref().and_then(|r| r.kernel.as_ref())
        && !k.path.starts_with('/')
    {
        errs.invalid(p("runtime.kernel.path"), format!("{:?}", k.path), "must be an absolute path on the node");
    }
    match &spec.sandbox {
        Some(sb) => {
            if let Some(t) = &sb.template_name
                && !is_dns_subdomain(t)
            {
                errs.invalid(
                    p("sandbox.templateName"),
                    format!("{t:?}"),
                    "must be a lowercase DNS name (a-z, 0-9, '-', '.')",
                );
            }
            if sb.template_name.is_none() && spec.image.is_none() {
                errs.required(
                    p("sandbox"),
                    "a sandbox needs spec.sandbox.templateName (a template built on the node) or spec.image",
                );
            }
            if !spec.device_claims.is_empty() {
                errs.forbidden(
                    p("deviceClaims"),
                    "a sandbox Machine cannot use PCI passthrough (VFIO): remove spec.deviceClaims or spec.sandbox",
                );
            }
            for (field, set) in [
                ("numa", spec.numa.is_some()),
                ("cpuSet", spec.cpu_set.is_some()),
                ("hugepages", spec.hugepages.is_some()),
            ] {
                if set {
                    errs.forbidden(p(field), "needs the qemu backend; a sandbox Machine cannot use it");
                }
            }
        }
        None => {
            if spec.image.is_none() && spec.runtime.as_ref().and_then(|r| r.kernel.as_ref()).is_none() {
                errs.required(p("image"), "a VM needs spec.image.path (or spec.runtime.kernel for direct kernel boot); for a sandbox set spec.sandbox");
            }
        }
    }
    if template_sandbox {
        // A template sandbox always runs under runc: nothing to hibernate, no guest to halt.
        if let Some(ps) = spec.power_state
            && !Track::TemplateSandbox.can_hold(ps)
        {
            errs.push(
                p("powerState"),
                ErrorType::NotSupported,
                Some(format!("{:?}", ps.as_str())),
                "a template sandbox runs under runc, which cannot hibernate or halt: use Paused or Stopped",
            );
        }
        if let Some(l) = &spec.lifecycle
            && l.idle_action.power_state().is_some_and(|s| !Track::TemplateSandbox.can_hold(s))
        {
            errs.push(
                p("lifecycle.idleAction"),
                ErrorType::NotSupported,
                Some(format!("{:?}", l.idle_action.as_str())),
                "a template sandbox runs under runc, which cannot hibernate or halt: use Pause, Stop or Delete",
            );
        }
    }
    if let Some(n) = &spec.network {
        if n.mode == NetworkMode::Bridge && n.bridge.as_deref().unwrap_or("").is_empty() {
            errs.required(p("network.bridge"), "mode Bridge needs the name of a host bridge");
        }
        if let Some(b) = n.bridge.as_deref().filter(|b| b.chars().count() > 15) {
            errs.invalid(p("network.bridge"), format!("{b:?}"), "a Linux interface name has at most 15 characters");
        }
        if let Some(mac) = &n.mac_address
            && !valid_mac(mac)
        {
            errs.invalid(p("network.macAddress"), format!("{mac:?}"), "must look like 52:54:00:12:34:56");
        }
        if let Some(e) = &n.egress {
            validate_egress(e, n.mode, &p("network.egress"), &mut errs);
        }
    }
    let mut names = BTreeSet::new();
    for (i, v) in spec.volumes.iter().enumerate() {
        let f = p(&format!("volumes[{i}]"));
        if !is_dns_label(&v.name) {
            errs.invalid(format!("{f}.name"), format!("{:?}", v.name), "must be a DNS label (a-z, 0-9, '-')");
        } else if !names.insert(v.name.as_str()) {
            errs.push(
                format!("{f}.name"),
                ErrorType::Duplicate,
                Some(format!("{:?}", v.name)),
                "volume names must be unique",
            );
        }
        match (&v.size, &v.path) {
            (Some(_), Some(_)) => {
                errs.invalid(f.clone(), &v.name, "set size (a new disk) or path (an existing one), not both")
            }
            (None, None) => errs.required(f.clone(), "set size (a new disk) or path (an existing one)"),
            (Some(size), None) => {
                quantity(&mut errs, &format!("{f}.size"), size);
            }
            (None, Some(_)) => {}
        }
    }
    for (i, d) in spec.device_claims.iter().enumerate() {
        if d.resource_name.is_empty() {
            errs.required(p(&format!("deviceClaims[{i}].resourceName")), "name the device class, e.g. nvidia.com/gpu");
        }
    }
    if let Some(cs) = &spec.cpu_set
        && !valid_cpu_set(cs)
    {
        errs.invalid(p("cpuSet"), format!("{cs:?}"), "must be a list of CPUs and ranges such as 0-3,6");
    }
    if let Some(h) = &spec.hugepages
        && !matches!(h.page_size.as_str(), "2Mi" | "1Gi")
    {
        errs.push(
            p("hugepages.pageSize"),
            ErrorType::NotSupported,
            Some(format!("{:?}", h.page_size)),
            "supported values: \"2Mi\", \"1Gi\"",
        );
    }
    if let Some(n) = &spec.node_name
        && !is_dns_subdomain(n)
    {
        errs.invalid(p("nodeName"), format!("{n:?}"), "must be a lowercase DNS name");
    }
    if let Some(old) = old
        && old.sandbox != spec.sandbox
    {
        // The track decides which runtime runs the Machine and who may create it (admins).
        let shown = |s: &Option<crate::machine::SandboxSpec>| match s {
            None => "unset".to_string(),
            Some(s) => serde_json::to_string(s).unwrap_or_default(),
        };
        errs.invalid(
            p("sandbox"),
            shown(&spec.sandbox),
            format!(
                "field is immutable (it was {}): delete the Machine and create a new one instead",
                shown(&old.sandbox)
            ),
        );
    }
    if let Some(old) = old {
        let (from, to) = (old.desired_power_state(), spec.desired_power_state());
        // A template sandbox's Hibernated or Halted is refused above, whatever it comes from.
        if let Err(Refusal::Invalid { .. }) = power::plan(to, from, spec.track()) {
            errs.invalid(
                p("powerState"),
                to,
                format!("cannot go from {from} to {to}: resume the Machine (powerState Running) first"),
            );
        }
    }
    errs.0
}

/// The longest quantity (`resources.cpu`, `resources.memory`, a volume's size).
pub const MAX_QUANTITY_LEN: usize = 32;

/// The most PCI devices one Machine claims.
pub const MAX_DEVICE_CLAIMS: usize = 16;

/// The most members an autoscaled pool may ask for.
pub const MAX_POOL_REPLICAS: i32 = 1000;

/// What an admitted pool spec is told: bounds that say something other than what they do.
pub fn pool_warnings(spec: &MachinePoolSpec) -> Vec<String> {
    match &spec.autoscale {
        Some(a) if a.min_replicas > a.max_replicas => vec![format!(
            "spec.autoscale.minReplicas {} is above maxReplicas {}: the pool keeps {0} members; lower minReplicas or raise maxReplicas",
            a.min_replicas, a.max_replicas
        )],
        _ => Vec::new(),
    }
}

pub fn validate_pool_spec(spec: &MachinePoolSpec, opts: ValidationOptions) -> Vec<FieldError> {
    let mut errs = Errors(Vec::new());
    if spec.replicas < 0 {
        errs.invalid("spec.replicas", spec.replicas, "must be 0 or more");
    }
    if spec.warmup_seconds < 0 {
        errs.invalid("spec.warmupSeconds", spec.warmup_seconds, "must be 0 or more");
    }
    if let Some(a) = &spec.autoscale {
        // minReplicas above maxReplicas is not refused (a JSON Schema cannot say it): the
        // minimum wins, and the API warns (`autoscale_warnings`).
        if !(0..=MAX_POOL_REPLICAS).contains(&a.min_replicas) {
            errs.invalid("spec.autoscale.minReplicas", a.min_replicas, format!("must be 0 to {MAX_POOL_REPLICAS}"));
        }
        if !(1..=MAX_POOL_REPLICAS).contains(&a.max_replicas) {
            errs.invalid("spec.autoscale.maxReplicas", a.max_replicas, format!("must be 1 to {MAX_POOL_REPLICAS}"));
        }
        if !(a.target_hit_rate > 0.0 && a.target_hit_rate <= 1.0) {
            errs.invalid("spec.autoscale.targetHitRate", a.target_hit_rate, "must be more than 0 and at most 1");
        }
        if !(10..=86_400).contains(&a.window_seconds) {
            errs.invalid("spec.autoscale.windowSeconds", a.window_seconds, "must be 10 to 86400");
        }
        if !(0..=86_400).contains(&a.scale_down_delay_seconds) {
            errs.invalid("spec.autoscale.scaleDownDelaySeconds", a.scale_down_delay_seconds, "must be 0 to 86400");
        }
    }
    if spec.template.spec.ttl_seconds.is_some() {
        errs.forbidden(
            "spec.template.spec.ttlSeconds",
            "a warm member must not expire before it is claimed: set ttlSeconds on the MachineClaim",
        );
    }
    let mut all = errs.0;
    all.extend(validate_machine_spec("spec.template.spec", &spec.template.spec, None, opts));
    all
}

pub fn validate_claim_spec(spec: &MachineClaimSpec, old: Option<&MachineClaimSpec>) -> Vec<FieldError> {
    let mut errs = Errors(Vec::new());
    if spec.pool_name.is_empty() {
        errs.required("spec.poolName", "name the MachinePool to claim from");
    } else if !is_dns_subdomain(&spec.pool_name) {
        errs.invalid("spec.poolName", format!("{:?}", spec.pool_name), "must be a lowercase DNS name");
    }
    errs.positive("spec.ttlSeconds", spec.ttl_seconds);
    validate_env(&mut errs, "spec.env", &spec.env);
    validate_secret_env(&mut errs, "spec.secretEnv", &spec.secret_env);
    if let Some(old) = old {
        if old.pool_name != spec.pool_name {
            errs.invalid(
                "spec.poolName",
                format!("{:?}", spec.pool_name),
                "field is immutable: create a new claim instead",
            );
        }
        if old.env != spec.env {
            errs.forbidden("spec.env", "field is immutable (written onto the Machine when the claim binds): set the Machine's spec.env instead");
        }
        if old.secret_env != spec.secret_env {
            errs.forbidden(
                "spec.secretEnv",
                "field is immutable (written onto the Machine when the claim binds): set the Machine's spec.secretEnv instead",
            );
        }
    }
    errs.0
}

/// The most environment variables a Machine or claim carries, the longest name and the longest
/// value (in characters, as a JSON Schema's `maxLength` counts).
pub const MAX_ENV_VARS: usize = 128;
pub const MAX_ENV_NAME: usize = 128;
pub const MAX_ENV_VALUE: usize = 4096;
/// An environment variable's name as POSIX shells take it.
pub const ENV_NAME_PATTERN: &str = "^[A-Za-z_][A-Za-z0-9_]*$";

/// An environment variable's name as POSIX shells take it: a letter or `_`, then letters,
/// digits and `_`.
pub fn is_env_name(s: &str) -> bool {
    let mut chars = s.chars();
    s.len() <= MAX_ENV_NAME
        && chars.next().is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// `spec.secretEnv`: variable names as `env`'s, each naming a Secret of the namespace (a DNS
/// subdomain: no namespace, no path) and a key as Kubernetes writes them.
fn validate_secret_env(errs: &mut Errors, path: &str, env: &BTreeMap<String, crate::machine::SecretKeyRef>) {
    if env.len() > MAX_ENV_VARS {
        errs.invalid(path, env.len(), format!("must have at most {MAX_ENV_VARS} variables"));
    }
    for (k, r) in env {
        if !is_env_name(k) {
            errs.invalid(
                format!("{path}.{k}"),
                format!("{k:?}"),
                format!("a name must be a letter or '_', then letters, digits or '_' (at most {MAX_ENV_NAME})"),
            );
        }
        if !is_dns_subdomain(&r.name) {
            errs.invalid(
                format!("{path}.{k}.name"),
                format!("{:?}", r.name),
                "must name a Secret in the Machine's own namespace (a lowercase DNS name; no namespace/ prefix)",
            );
        }
        let key_ok = !r.key.is_empty()
            && r.key.len() <= 253
            && r.key.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'));
        if !key_ok {
            errs.invalid(
                format!("{path}.{k}.key"),
                format!("{:?}", r.key),
                "a Secret's key is letters, digits, '-', '_' and '.' (at most 253)",
            );
        }
    }
}

fn validate_env(errs: &mut Errors, path: &str, env: &BTreeMap<String, String>) {
    if env.len() > MAX_ENV_VARS {
        errs.invalid(path, env.len(), format!("must have at most {MAX_ENV_VARS} variables"));
    }
    for (k, v) in env {
        if !is_env_name(k) {
            errs.invalid(
                format!("{path}.{k}"),
                format!("{k:?}"),
                format!("a name must be a letter or '_', then letters, digits or '_' (at most {MAX_ENV_NAME})"),
            );
        }
        if v.contains('\0') {
            errs.invalid(format!("{path}.{k}"), "a NUL byte", "a value cannot hold a NUL byte");
        } else if v.chars().count() > MAX_ENV_VALUE {
            errs.invalid(
                format!("{path}.{k}"),
                format!("{} characters", v.chars().count()),
                format!("must be at most {MAX_ENV_VALUE}"),
            );
        }
    }
}

pub fn validate_node_spec(spec: &KaironNodeSpec) -> Vec<FieldError> {
    let mut errs = Errors(Vec::new());
    if spec.runtime_endpoint.is_empty() {
        errs.required("spec.runtimeEndpoint", "give the URL of this node's runtime API");
    }
    if let Some(pin) = &spec.runtime_certificate_sha256 {
        if pin.len() != 64 || !pin.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f')) {
            errs.invalid(
                "spec.runtimeCertificateSha256",
                format!("{:?}", pin.chars().take(80).collect::<String>()),
                "must be a SHA-256 in 64 lowercase hex digits",
            );
        }
        if !spec.runtime_endpoint.starts_with("https://") {
            errs.invalid(
                "spec.runtimeCertificateSha256",
                format!("{:?}", spec.runtime_endpoint),
                "a runtime with a certificate is reached over https: give an https:// spec.runtimeEndpoint",
            );
        }
    }
    if let Some(cap) = &spec.capacity {
        quantity(&mut errs, "spec.capacity.cpu", &cap.cpu);
        quantity(&mut errs, "spec.capacity.memory", &cap.memory);
    }
    errs.0
}

/// A quota's limits: counts and quantities of 0 or more (0 allows none).
pub fn validate_quota_spec(spec: &KaironQuotaSpec) -> Vec<FieldError> {
    let mut errs = Errors(Vec::new());
    let h = &spec.hard;
    for (field, v) in [
        ("spec.hard.machines", h.machines),
        ("spec.hard.warmMembers", h.warm_members),
        ("spec.hard.templates", h.templates),
    ] {
        if let Some(v) = v
            && v < 0
        {
            errs.invalid(field, v, "must be 0 or more");
        }
    }
    for (field, q) in [("spec.hard.cpu", &h.cpu), ("spec.hard.memory", &h.memory), ("spec.hard.storage", &h.storage)] {
        if let Some(q) = q
            && let Err(e) = q.to_f64()
        {
            errs.invalid(field, format!("{:?}", q.0), e.to_string());
        }
    }
    errs.0
}

/// A namespace's template: an image reference and build steps, each non-blank and bounded; the
/// name a DNS label (its node-side name joins it to the namespace with a dot); the spec fixed
/// once created (`old`: the stored spec on update).
pub fn validate_template(name: &str, spec: &KaironTemplateSpec, old: Option<&KaironTemplateSpec>) -> Vec<FieldError> {
    use crate::template::{MAX_BUILD_STEPS, MAX_IMAGE_LEN, MAX_STEP_LEN};
    let mut errs = Errors(Vec::new());
    if old.is_some_and(|old| old != spec) {
        errs.forbidden(
            "spec",
            "a template's spec cannot change (nodes build it once): create a template of another name, or delete this one and create it again",
        );
    }
    if !is_dns_label(name) {
        errs.invalid(
            "metadata.name",
            format!("{name:?}"),
            "a template's name must be a DNS label (lowercase letters, digits and '-', at most 63, no dots)",
        );
    }
    let image = spec.image.trim();
    if image.is_empty() {
        errs.required("spec.image", "give the OCI image to start from, e.g. docker.io/library/python:3.12-slim");
    } else if spec.image.len() > MAX_IMAGE_LEN {
        errs.push("spec.image", ErrorType::TooLong, None, format!("may have at most {MAX_IMAGE_LEN} characters"));
    } else if image != spec.image || spec.image.contains(char::is_whitespace) {
        errs.invalid("spec.image", format!("{:?}", spec.image), "an image reference holds no whitespace");
    }
    if spec.steps.len() > MAX_BUILD_STEPS {
        errs.push(
            "spec.steps",
            ErrorType::TooMany,
            None,
            format!("must have at most {MAX_BUILD_STEPS} items (join commands with && in one step)"),
        );
    }
    for (i, step) in spec.steps.iter().enumerate() {
        if step.trim().is_empty() {
            errs.required(format!("spec.steps[{i}]"), "a build step is a shell command: remove the empty one");
        } else if step.len() > MAX_STEP_LEN {
            errs.push(
                format!("spec.steps[{i}]"),
                ErrorType::TooLong,
                None,
                format!("may have at most {MAX_STEP_LEN} bytes (put a long script in the image)"),
            );
        }
    }
    errs.0
}

/// A Machine's own egress rule: `allow` in mode `Allowlist` only, each entry a host pattern,
/// an IP address or a CIDR.
fn validate_egress(e: &crate::machine::EgressSpec, network: NetworkMode, at: &str, errs: &mut Errors) {
    use crate::machine::EgressMode;
    if network == NetworkMode::None {
        errs.forbidden(
            at,
            "network.mode None gives the guest no network at all: leave out egress, or use egress.mode None on an attached guest",
        );
    }
    match e.mode {
        EgressMode::Allowlist if e.allow.is_empty() => errs.required(
            format!("{at}.allow"),
            "mode Allowlist needs the hosts to allow (for no egress at all use mode None)",
        ),
        EgressMode::Internet | EgressMode::None if !e.allow.is_empty() => errs.invalid(
            format!("{at}.allow"),
            format!("{} entries", e.allow.len()),
            "allow is read only in mode Allowlist: set mode: Allowlist, or leave out allow",
        ),
        _ => {}
    }
    if e.allow.len() > crate::egress::MAX_ALLOW_ENTRIES {
        errs.push(
            format!("{at}.allow"),
            ErrorType::TooMany,
            Some(e.allow.len().to_string()),
            format!("at most {} entries", crate::egress::MAX_ALLOW_ENTRIES),
        );
    }
    for (i, text) in e.allow.iter().enumerate() {
        if let Err(problem) = crate::egress::AllowEntry::parse(text) {
            errs.invalid(format!("{at}.allow[{i}]"), format!("{text:?}"), problem);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::machine::*;

    #[test]
    fn a_quota_takes_zero_or_more_of_each_amount() {
        let spec: KaironQuotaSpec =
            serde_json::from_value(serde_json::json!({"hard": {"machines": 0, "cpu": "500m", "memory": "0"}})).unwrap();
        assert_eq!(validate_quota_spec(&spec), []);
        let spec: KaironQuotaSpec = serde_json::from_value(
            serde_json::json!({"hard": {"machines": -1, "cpu": "lots", "memory": "-1Gi", "warmMembers": -2}}),
        )
        .unwrap();
        assert_eq!(
            fields(&validate_quota_spec(&spec)),
            ["spec.hard.machines", "spec.hard.warmMembers", "spec.hard.cpu", "spec.hard.memory"]
        );
    }

    fn vm() -> MachineSpec {
        MachineSpec {
            image: Some(ImageSource { path: "/var/lib/fluxvm/images/kairon-hw.qcow2".into() }),
            resources: Some(Resources { cpu: Some("2".into()), memory: Some("2Gi".into()) }),
            ..Default::default()
        }
    }

    fn fields(errs: &[FieldError]) -> Vec<String> {
        errs.iter().map(|e| e.field.clone()).collect()
    }

    #[test]
    fn a_machines_egress_rule_says_what_to_fix() {
        let with = |network: serde_json::Value| {
            let spec = MachineSpec { network: Some(serde_json::from_value(network).unwrap()), ..vm() };
            validate_machine_spec("spec", &spec, None, ValidationOptions::default())
        };
        assert_eq!(with(serde_json::json!({"egress": {"mode": "None"}})), []);
        assert_eq!(
            with(serde_json::json!({"egress": {"mode": "Allowlist", "allow": [".pypi.org", "10.1.0.0/16"]}})),
            []
        );
        let errs = with(serde_json::json!({"egress": {"mode": "Allowlist", "allow": ["ok.test", "https://x.test/"]}}));
        assert_eq!(fields(&errs), ["spec.network.egress.allow[1]"]);
        assert!(errs[0].detail.contains("scheme"), "{errs:?}");
        assert_eq!(fields(&with(serde_json::json!({"egress": {"mode": "Allowlist"}}))), ["spec.network.egress.allow"]);
        assert_eq!(fields(&with(serde_json::json!({"egress": {"allow": ["a.test"]}}))), ["spec.network.egress.allow"]);
        let errs = with(serde_json::json!({"mode": "None", "egress": {"mode": "None"}}));
        assert_eq!(fields(&errs), ["spec.network.egress"]);
        let many: Vec<String> = (0..65).map(|i| format!("h{i}.test")).collect();
        let errs = with(serde_json::json!({"egress": {"mode": "Allowlist", "allow": many}}));
        assert_eq!(fields(&errs), ["spec.network.egress.allow"]);
    }

    #[test]
    fn a_plain_vm_is_valid() {
        assert!(validate_machine_spec("spec", &vm(), None, Default::default()).is_empty());
    }

    #[test]
    fn idle_timeout_has_a_minimum() {
        let mut m = vm();
        m.lifecycle = Some(Lifecycle { idle_timeout_seconds: Some(30), ..Default::default() });
        let errs = validate_machine_spec("spec", &m, None, Default::default());
        assert_eq!(errs.len(), 1);
        assert_eq!(
            errs[0].to_string(),
            "spec.lifecycle.idleTimeoutSeconds: Invalid value: 30: must be greater than or equal to 60"
        );
        let lowered = ValidationOptions { min_idle_timeout_seconds: 1 };
        assert!(validate_machine_spec("spec", &m, None, lowered).is_empty());
    }

    #[test]
    fn sandbox_refuses_passthrough_and_qemu_only_fields() {
        let mut m = vm();
        m.sandbox = Some(SandboxSpec::default());
        m.device_claims = vec![DeviceClaim { name: "gpu".into(), resource_name: "nvidia.com/gpu".into() }];
        m.cpu_set = Some("0-1".into());
        let errs = validate_machine_spec("spec", &m, None, Default::default());
        assert_eq!(fields(&errs), ["spec.deviceClaims", "spec.cpuSet"]);
        assert!(errs[0].to_string().contains("PCI passthrough"));
    }

    #[test]
    fn template_sandbox_cannot_hibernate() {
        let m = MachineSpec {
            sandbox: Some(SandboxSpec { template_name: Some("busybox".into()) }),
            lifecycle: Some(Lifecycle { idle_action: IdleAction::Halt, ..Default::default() }),
            power_state: Some(PowerState::Hibernated),
            ..Default::default()
        };
        let errs = validate_machine_spec("spec", &m, None, Default::default());
        assert_eq!(fields(&errs), ["spec.powerState", "spec.lifecycle.idleAction"]);
    }

    #[test]
    fn a_vm_needs_an_image_and_whole_cpus() {
        let mut m = MachineSpec::default();
        assert_eq!(fields(&validate_machine_spec("spec", &m, None, Default::default())), ["spec.image"]);
        m = vm();
        m.resources = Some(Resources { cpu: Some("1500m".into()), memory: Some("lots".into()) });
        let errs = validate_machine_spec("spec", &m, None, Default::default());
        assert_eq!(fields(&errs), ["spec.resources.cpu", "spec.resources.memory"]);
        // A kernel to boot directly is a file on the node, named absolutely (the fuzz test's
        // replace with an empty path was stored).
        m = MachineSpec {
            image: None,
            runtime: Some(RuntimeSpec { kernel: Some(KernelSpec::default()), ..Default::default() }),
            ..vm()
        };
        assert_eq!(fields(&validate_machine_spec("spec", &m, None, Default::default())), ["spec.runtime.kernel.path"]);
        m = vm();
        // Past 2^52 a float has no halves: whole vCPUs are decided on the decimal text.
        m.resources = Some(Resources { cpu: Some("4503599627370496.5".into()), memory: None });
        let errs = validate_machine_spec("spec", &m, None, Default::default());
        assert_eq!(fields(&errs), ["spec.resources.cpu"]);
    }

    #[test]
    fn a_node_pins_its_runtime_certificate_only_over_https() {
        let pin = "0123456789abcdef".repeat(4);
        let node = |endpoint: &str, pin: &str| KaironNodeSpec {
            runtime_endpoint: endpoint.into(),
            runtime_certificate_sha256: Some(pin.into()),
            capacity: Some(crate::node::NodeCapacity { cpu: "2".into(), memory: "1Gi".into(), machines: None }),
            ..Default::default()
        };
        assert!(validate_node_spec(&node("https://10.0.0.2:7444", &pin)).is_empty());
        for bad in [pin.to_uppercase(), pin[1..].to_string(), format!("{pin}0"), "sha256:00".into()] {
            assert_eq!(
                fields(&validate_node_spec(&node("https://10.0.0.2:7444", &bad))),
                ["spec.runtimeCertificateSha256"]
            );
        }
        let errs = validate_node_spec(&node("http://10.0.0.2:7444", &pin));
        assert_eq!(fields(&errs), ["spec.runtimeCertificateSha256"]);
        assert!(errs[0].detail.contains("https"), "{}", errs[0].detail);
    }

    #[test]
    fn illegal_power_change_names_the_field() {
        let old = MachineSpec { power_state: Some(PowerState::Stopped), ..vm() };
        let new = MachineSpec { power_state: Some(PowerState::Halted), ..vm() };
        let errs = validate_machine_spec("spec", &new, Some(&old), Default::default());
        assert_eq!(fields(&errs), ["spec.powerState"]);
    }

    #[test]
    fn the_sandbox_track_is_immutable() {
        let plain = vm();
        let sandbox = MachineSpec { sandbox: Some(Default::default()), ..vm() };
        for (old, new) in [(&plain, &sandbox), (&sandbox, &plain)] {
            let errs = validate_machine_spec("spec", new, Some(old), Default::default());
            assert_eq!(fields(&errs), ["spec.sandbox"]);
            assert!(errs[0].detail.contains("immutable"));
        }
        assert!(validate_machine_spec("spec", &sandbox, Some(&sandbox), Default::default()).is_empty());
    }

    #[test]
    fn volumes_and_cpusets() {
        let mut m = vm();
        m.volumes = vec![
            Volume { name: "data".into(), size: Some("1Gi".into()), ..Default::default() },
            Volume { name: "data".into(), path: Some("/x".into()), ..Default::default() },
            Volume { name: "Bad_Name".into(), ..Default::default() },
        ];
        m.cpu_set = Some("3-1".into());
        let errs = validate_machine_spec("spec", &m, None, Default::default());
        assert_eq!(fields(&errs), ["spec.volumes[1].name", "spec.volumes[2].name", "spec.volumes[2]", "spec.cpuSet"]);
        assert!(valid_cpu_set("0-3,6"));
    }

    #[test]
    fn an_autoscaled_pool_has_sane_bounds() {
        let pool = |a: serde_json::Value| -> MachinePoolSpec {
            serde_json::from_value(serde_json::json!({
                "replicas": 1, "template": {"spec": {"sandbox": {"templateName": "busybox"}}}, "autoscale": a,
            }))
            .unwrap()
        };
        let ok = pool(serde_json::json!({"minReplicas": 0, "maxReplicas": 10}));
        assert!(validate_pool_spec(&ok, Default::default()).is_empty());
        let a = ok.autoscale.unwrap();
        assert_eq!((a.target_hit_rate, a.window_seconds, a.scale_down_delay_seconds), (0.95, 600, 300), "defaults");
        let bad = pool(serde_json::json!({"minReplicas": -1, "maxReplicas": 0, "targetHitRate": 0,
                                          "windowSeconds": 5, "scaleDownDelaySeconds": -1}));
        assert_eq!(
            fields(&validate_pool_spec(&bad, Default::default())),
            [
                "spec.autoscale.minReplicas",
                "spec.autoscale.maxReplicas",
                "spec.autoscale.targetHitRate",
                "spec.autoscale.windowSeconds",
                "spec.autoscale.scaleDownDelaySeconds"
            ]
        );
        let inverted = pool(serde_json::json!({"minReplicas": 5, "maxReplicas": 4, "targetHitRate": 1.5}));
        let errs = validate_pool_spec(&inverted, Default::default());
        assert_eq!(fields(&errs), ["spec.autoscale.targetHitRate"]);
        let warned = pool_warnings(&inverted);
        assert!(warned.len() == 1 && warned[0].contains("keeps 5 members"), "{warned:?}");
        assert!(pool_warnings(&ok).is_empty());
        let huge = pool(serde_json::json!({"minReplicas": 2000, "maxReplicas": 100_000}));
        let errs = validate_pool_spec(&huge, Default::default());
        assert_eq!(fields(&errs), ["spec.autoscale.minReplicas", "spec.autoscale.maxReplicas"]);
    }

    #[test]
    fn pool_checks_its_template() {
        let pool = MachinePoolSpec {
            replicas: -1,
            warm_power_state: Default::default(),
            warmup_seconds: 30,
            template: crate::pool::MachineTemplate { metadata: None, spec: MachineSpec::default() },
            autoscale: None,
        };
        assert_eq!(
            fields(&validate_pool_spec(&pool, Default::default())),
            ["spec.replicas", "spec.template.spec.image"]
        );
    }

    #[test]
    fn claim_pool_is_immutable() {
        let a = MachineClaimSpec { pool_name: "agents".into(), ttl_seconds: Some(3600), ..Default::default() };
        let b = MachineClaimSpec { pool_name: "other".into(), ttl_seconds: Some(0), ..Default::default() };
        assert_eq!(fields(&validate_claim_spec(&b, Some(&a))), ["spec.ttlSeconds", "spec.poolName"]);
        let mut c = a.clone();
        c.env.insert("MODE".into(), "fast".into());
        assert_eq!(fields(&validate_claim_spec(&c, Some(&a))), ["spec.env"]);
        assert!(validate_claim_spec(&c, None).is_empty());
    }

    #[test]
    fn env_names_sizes_and_values() {
        let mut m: MachineSpec = serde_json::from_value(serde_json::json!({"image": {"path": "/i.qcow2"}})).unwrap();
        for (k, v) in [("OK_1", "x"), ("_x", ""), ("1BAD", "x"), ("A-B", "x"), ("", "x"), ("NUL", "a\0b")] {
            m.env.insert(k.into(), v.into());
        }
        let errs = validate_machine_spec("spec", &m, None, Default::default());
        assert_eq!(fields(&errs), ["spec.env.", "spec.env.1BAD", "spec.env.A-B", "spec.env.NUL"]);
        m.env = (0..=MAX_ENV_VARS).map(|i| (format!("V{i}"), String::new())).collect();
        assert_eq!(fields(&validate_machine_spec("spec", &m, None, Default::default())), ["spec.env"]);
        m.env =
            [("BIG".to_string(), "x".repeat(MAX_ENV_VALUE + 1)), ("N".repeat(MAX_ENV_NAME + 1), String::new())].into();
        let long = format!("spec.env.{}", "N".repeat(MAX_ENV_NAME + 1));
        assert_eq!(
            fields(&validate_machine_spec("spec", &m, None, Default::default())),
            ["spec.env.BIG", long.as_str()]
        );
    }

    #[test]
    fn names() {
        assert!(is_dns_label("agent-42"));
        assert!(!is_dns_label("Agent"));
        assert!(!is_dns_label("-a"));
        assert!(is_dns_subdomain("a.b-c"));
    }
}
