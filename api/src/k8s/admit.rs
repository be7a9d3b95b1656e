//! Admission: every object written is decoded into its typed form (which prunes unknown
//! fields and fills defaults, as a CRD's structural schema does), validated, and encoded back.

use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Namespace, Secret};
use k8s_openapi::api::events::v1::Event;
use kairon_model::binding;
use kairon_model::keys::finalizers;
use kairon_model::validate::{self, ErrorType, FieldError, ValidationOptions};
use kairon_model::{KaironNode, KaironQuota, KaironTemplate, Machine, MachineClaim, MachinePool};

/// How strictly unknown fields are treated (`fieldValidation`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum FieldValidation {
    Ignore,
    #[default]
    Warn,
    Strict,
}

pub struct AdmitCtx {
    pub opts: ValidationOptions,
    pub field_validation: FieldValidation,
}

#[derive(Debug)]
pub enum AdmitError {
    Invalid(Vec<FieldError>),
    BadRequest(String),
}

/// Normalises and validates `obj` (the whole object) given the stored `old` one; returns
/// warnings for the `Warning` header.
pub type Admit = fn(&mut Value, Option<&Value>, &AdmitCtx) -> Result<Vec<String>, AdmitError>;

fn invalid(field: String, value: Option<String>, detail: String) -> AdmitError {
    AdmitError::Invalid(vec![FieldError { field, kind: ErrorType::Invalid, value, detail }])
}

/// Decodes `obj` as `K`, reporting the path of a bad field, then re-encodes it.
fn round_trip<K: DeserializeOwned + Serialize>(
    obj: &mut Value,
    ctx: &AdmitCtx,
) -> Result<(K, Vec<String>), AdmitError> {
    let mut unknown = Vec::new();
    // kube's derived kinds read apiVersion and kind through their own paths.
    let mut track = |path: serde_ignored::Path| {
        let p = path.to_string();
        if p != "apiVersion" && p != "kind" {
            unknown.push(p)
        }
    };
    let de = serde_ignored::Deserializer::new(&*obj, &mut track);
    let typed: K = serde_path_to_error::deserialize(de).map_err(|e| {
        let path = e.path().to_string();
        let inner = e.into_inner().to_string();
        // An enum value outside its variants reads as Kubernetes words it.
        if let Some((variant, expected)) =
            inner.strip_prefix("unknown variant `").and_then(|rest| rest.split_once("`, expected "))
        {
            let supported = expected.trim_start_matches("one of ").replace('`', "\"");
            return AdmitError::Invalid(vec![FieldError {
                field: path,
                kind: ErrorType::NotSupported,
                value: Some(format!("{variant:?}")),
                detail: format!("supported values: {supported}"),
            }]);
        }
        // serde names the offending value in its message; keep it as the detail.
        let (value, detail) = match inner.split_once(", expected") {
            Some((v, rest)) => (Some(v.trim_start_matches("invalid value: ").to_string()), format!("expected{rest}")),
            None => (None, inner),
        };
        invalid(path, value, detail)
    })?;
    let warnings: Vec<String> = unknown.into_iter().map(|p| format!("unknown field \"{p}\"")).collect();
    if ctx.field_validation == FieldValidation::Strict && !warnings.is_empty() {
        return Err(AdmitError::BadRequest(format!("strict decoding error: {}", warnings.join(", "))));
    }
    // The times the server stamped keep their milliseconds (k8s-openapi writes whole seconds).
    let stamped: Vec<(&str, Value)> = ["creationTimestamp", "deletionTimestamp"]
        .into_iter()
        .filter_map(|k| Some((k, obj["metadata"].get(k).filter(|v| v.is_string())?.clone())))
        .collect();
    *obj = serde_json::to_value(&typed).map_err(|e| AdmitError::BadRequest(e.to_string()))?;
    for (k, v) in stamped {
        obj["metadata"][k] = v;
    }
    let warnings = if ctx.field_validation == FieldValidation::Ignore { vec![] } else { warnings };
    Ok((typed, warnings))
}

fn old_typed<K: DeserializeOwned>(old: Option<&Value>) -> Option<K> {
    old.and_then(|o| serde_json::from_value(o.clone()).ok())
}

fn check(errors: Vec<FieldError>, warnings: Vec<String>) -> Result<Vec<String>, AdmitError> {
    if errors.is_empty() { Ok(warnings) } else { Err(AdmitError::Invalid(errors)) }
}

pub fn machine(obj: &mut Value, old: Option<&Value>, ctx: &AdmitCtx) -> Result<Vec<String>, AdmitError> {
    let (m, warnings) = round_trip::<Machine>(obj, ctx)?;
    let old: Option<Machine> = old_typed(old);
    check(validate::validate_machine_spec("spec", &m.spec, old.as_ref().map(|o| &o.spec), ctx.opts), warnings)
}

pub fn pool(obj: &mut Value, _old: Option<&Value>, ctx: &AdmitCtx) -> Result<Vec<String>, AdmitError> {
    let (p, mut warnings) = round_trip::<MachinePool>(obj, ctx)?;
    warnings.extend(validate::pool_warnings(&p.spec));
    check(validate::validate_pool_spec(&p.spec, ctx.opts), warnings)
}

pub fn claim(obj: &mut Value, old: Option<&Value>, ctx: &AdmitCtx) -> Result<Vec<String>, AdmitError> {
    let (c, warnings) = round_trip::<MachineClaim>(obj, ctx)?;
    let created = old.is_none();
    let old: Option<MachineClaim> = old_typed(old);
    let warnings = check(validate::validate_claim_spec(&c.spec, old.as_ref().map(|o| &o.spec)), warnings)?;
    // A claim is created with the finalizer its release needs (what the claim controller would
    // add first), so the controller binds it on its first look: no extra write and watch round
    // trip on the claim's hot path.
    if created {
        let mut present = obj["metadata"]["finalizers"].as_array().cloned().unwrap_or_default();
        if !present.iter().any(|f| f.as_str() == Some(finalizers::CLAIM)) {
            present.push(Value::String(finalizers::CLAIM.into()));
            obj["metadata"]["finalizers"] = Value::Array(present);
        }
        // The create request binds it next (`super::bind`): marked so, the controller leaves
        // it to that request and cannot take a second member for it meanwhile.
        if let Some(since) = obj["metadata"]["creationTimestamp"].as_str().map(str::to_string) {
            let message = binding::binding_message(&c.spec.pool_name);
            if let Some(status) = binding::pending_status(&c, binding::BINDING, message, &since) {
                obj["status"] = status;
            }
        }
    }
    Ok(warnings)
}

pub fn node(obj: &mut Value, _old: Option<&Value>, ctx: &AdmitCtx) -> Result<Vec<String>, AdmitError> {
    let (n, warnings) = round_trip::<KaironNode>(obj, ctx)?;
    check(validate::validate_node_spec(&n.spec), warnings)
}

pub fn quota(obj: &mut Value, _old: Option<&Value>, ctx: &AdmitCtx) -> Result<Vec<String>, AdmitError> {
    let (q, warnings) = round_trip::<KaironQuota>(obj, ctx)?;
    check(validate::validate_quota_spec(&q.spec), warnings)
}

pub fn template(obj: &mut Value, old: Option<&Value>, ctx: &AdmitCtx) -> Result<Vec<String>, AdmitError> {
    let (t, warnings) = round_trip::<KaironTemplate>(obj, ctx)?;
    let old: Option<KaironTemplate> = old_typed(old);
    let name = t.metadata.name.as_deref().unwrap_or_default();
    check(validate::validate_template(name, &t.spec, old.as_ref().map(|o| &o.spec)), warnings)
}

pub fn event(obj: &mut Value, _old: Option<&Value>, ctx: &AdmitCtx) -> Result<Vec<String>, AdmitError> {
    Ok(round_trip::<Event>(obj, ctx)?.1)
}

pub fn lease(obj: &mut Value, _old: Option<&Value>, ctx: &AdmitCtx) -> Result<Vec<String>, AdmitError> {
    Ok(round_trip::<Lease>(obj, ctx)?.1)
}

/// A core Event is stored as an `events.k8s.io/v1` Event.
pub fn core_event(obj: &mut Value, old: Option<&Value>, ctx: &AdmitCtx) -> Result<Vec<String>, AdmitError> {
    *obj = super::events::from_core(obj.take()).map_err(AdmitError::BadRequest)?;
    event(obj, old, ctx)
}

pub fn namespace(obj: &mut Value, _old: Option<&Value>, ctx: &AdmitCtx) -> Result<Vec<String>, AdmitError> {
    let warnings = round_trip::<Namespace>(obj, ctx)?.1;
    obj["status"] = serde_json::json!({"phase": "Active"});
    Ok(warnings)
}

/// The most a Secret's data may hold in all, as Kubernetes allows.
const MAX_SECRET_BYTES: usize = 1024 * 1024;

/// A core Secret: `stringData` folded into `data` (as base64, `stringData` winning), `type`
/// `Opaque` unless given, keys as Kubernetes writes them, 1 MiB at most.
pub fn secret(obj: &mut Value, _old: Option<&Value>, ctx: &AdmitCtx) -> Result<Vec<String>, AdmitError> {
    let (secret, warnings) = round_trip::<Secret>(obj, ctx)?;
    let mut data = secret.data.unwrap_or_default();
    for (k, v) in secret.string_data.unwrap_or_default() {
        data.insert(k, k8s_openapi::ByteString(v.into_bytes()));
    }
    for k in data.keys() {
        if k.is_empty()
            || k.len() > 253
            || !k.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
        {
            return Err(invalid(
                format!("data[{k}]"),
                Some(format!("{k:?}")),
                "a key is letters, digits, '-', '_' and '.' (at most 253)".into(),
            ));
        }
    }
    let size: usize = data.values().map(|v| v.0.len()).sum();
    if size > MAX_SECRET_BYTES {
        return Err(invalid(
            "data".into(),
            Some(format!("{size} bytes")),
            format!("must hold at most {MAX_SECRET_BYTES} bytes"),
        ));
    }
    let map = obj.as_object_mut().ok_or_else(|| AdmitError::BadRequest("a Secret is a JSON object".into()))?;
    map.remove("stringData");
    map.insert("data".into(), serde_json::to_value(&data).map_err(|e| AdmitError::BadRequest(e.to_string()))?);
    map.entry("type").or_insert_with(|| Value::String("Opaque".into()));
    Ok(warnings)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ctx() -> AdmitCtx {
        AdmitCtx { opts: ValidationOptions::default(), field_validation: FieldValidation::Warn }
    }

    #[test]
    fn a_claim_is_created_with_its_release_finalizer_once() {
        let fresh = serde_json::json!({
            "apiVersion": "kairon.zyvor.dev/v1", "kind": "MachineClaim",
            "metadata": {"name": "job", "namespace": "agents", "finalizers": ["example.com/mine"]},
            "spec": {"poolName": "warm"}
        });
        let mut created = fresh.clone();
        claim(&mut created, None, &ctx()).unwrap();
        assert_eq!(created["metadata"]["finalizers"], serde_json::json!(["example.com/mine", finalizers::CLAIM]));
        // Admitted again (a retried create) it is not added twice; an update adds nothing.
        claim(&mut created, None, &ctx()).unwrap();
        assert_eq!(created["metadata"]["finalizers"].as_array().map(Vec::len), Some(2));
        let mut updated = fresh.clone();
        claim(&mut updated, Some(&fresh), &ctx()).unwrap();
        assert_eq!(updated["metadata"]["finalizers"], serde_json::json!(["example.com/mine"]));
        assert!(updated["status"].is_null(), "an update leaves the status alone");
    }

    #[test]
    fn a_new_claim_is_marked_as_being_bound_by_its_create_request() {
        let mut created = serde_json::json!({
            "apiVersion": "kairon.zyvor.dev/v1", "kind": "MachineClaim",
            "metadata": {"name": "job", "namespace": "agents", "creationTimestamp": "2026-01-01T00:00:00Z"},
            "spec": {"poolName": "warm"}
        });
        claim(&mut created, None, &ctx()).unwrap();
        let c: MachineClaim = serde_json::from_value(created.clone()).unwrap();
        let until = binding::binding_until(&c).expect("marked as being bound");
        assert_eq!(until, kairon_model::warm::parse_ms("2026-01-01T00:00:00Z").unwrap() + binding::BINDING_GRACE_MS);
        claim(&mut created, None, &ctx()).unwrap();
        assert_eq!(created["status"]["conditions"].as_array().map(Vec::len), Some(1), "marked once");
    }

    #[test]
    fn the_times_the_server_stamped_keep_their_milliseconds() {
        let mut created = serde_json::json!({
            "apiVersion": "kairon.zyvor.dev/v1", "kind": "MachineClaim",
            "metadata": {"name": "job", "namespace": "agents", "creationTimestamp": "2026-01-01T00:00:00.250Z",
                         "deletionTimestamp": "2026-01-01T00:00:01.500Z"},
            "spec": {"poolName": "warm"}
        });
        claim(&mut created, None, &ctx()).unwrap();
        assert_eq!(created["metadata"]["creationTimestamp"], "2026-01-01T00:00:00.250Z");
        assert_eq!(created["metadata"]["deletionTimestamp"], "2026-01-01T00:00:01.500Z");
        let c: MachineClaim = serde_json::from_value(created).unwrap();
        // A claim bound 12 ms after its creation waited 12 ms, not 262.
        let at = kairon_model::warm::parse_ms("2026-01-01T00:00:00.262Z").unwrap();
        assert_eq!(binding::wait_seconds(&c, at), 0.012);
    }
}
