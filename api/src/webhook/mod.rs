//! The validating admission webhook (`admission.k8s.io/v1`), for Kairon on a real cluster: the
//! cluster's API server POSTs an `AdmissionReview` to `/admission/v1/validate` for each write of
//! a Kairon kind, and the answer is what the embedded API decides on the same write. What CEL
//! in the CRDs cannot say lives here: who may write what (`guard::check_write`, the requester's
//! Kairon role read from its Kubernetes user), as Kubernetes' NodeRestriction does for nodes, and
//! the whole of each kind's validation (`k8s/admit.rs`).
//!
//! Who is asking, from `userInfo`:
//! - ServiceAccounts of the Kairon namespace ([`SYSTEM_NAMESPACE`]): `kairon-node` is the agent of
//!   the node its pod runs on, as the API server says in a bound token's
//!   `authentication.kubernetes.io/node-name` (a DaemonSet's pods share one ServiceAccount; the
//!   token names each pod's node); `kairon-node-<node>` is that node's agent (an identity made
//!   per node); `kairon-controller` the controllers; `kairon-api` the api itself (admin), or,
//!   for a write it makes for a caller, that caller as its `kairon.zyvor.dev/requester` extra
//!   names (`crate::requester`; believed from this ServiceAccount alone). The same names in any
//!   other namespace are nobody special.
//! - Members of [`ADMIN_GROUPS`] are admins.
//! - Anyone else is a tenant in the request's namespace (the cluster's RBAC already let them
//!   write there): tenants' rules apply, e.g. no sandbox-track Machines, no status.
//!
//! The route needs no Kairon token: the API server calls it with none. It is served on a listener
//! of its own, never the public API port, where a cluster can require the API server's client
//! certificate (`kairon api --webhook-client-ca`). It changes nothing and tells a caller only
//! whether a write it describes would be allowed.

use axum::Json;
use axum::extract::State;
use serde::Deserialize;
use serde_json::{Value, json};

use crate::auth::{Identity, Role};
use crate::guard::{self, KAIRON_GROUP, Kind};
use crate::k8s::admit::{self, AdmitCtx, AdmitError, FieldValidation};
use crate::state::AppState;

pub mod quota;
pub mod secrets;

/// The namespace Kairon's own ServiceAccounts live in (the chart's).
pub const SYSTEM_NAMESPACE: &str = "kairon-system";
/// Where the webhook answers, on its own listener (`server::webhook_router`).
pub const PATH: &str = "/admission/v1/validate";
/// Kubernetes groups whose members are Kairon admins.
pub const ADMIN_GROUPS: &[&str] = &["system:masters", "kairon:admins"];

#[derive(Deserialize)]
struct Review {
    request: Option<Request>,
}

#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct Request {
    resource: Resource,
    #[serde(default)]
    sub_resource: Option<String>,
    #[serde(default)]
    namespace: Option<String>,
    operation: String,
    #[serde(default)]
    user_info: UserInfo,
    #[serde(default)]
    object: Option<Value>,
    #[serde(default)]
    old_object: Option<Value>,
    #[serde(default)]
    dry_run: bool,
}

#[derive(Deserialize)]
struct Resource {
    group: String,
    resource: String,
}

#[derive(Deserialize, Default)]
pub(crate) struct UserInfo {
    #[serde(default)]
    pub username: String,
    #[serde(default)]
    pub uid: Option<String>,
    #[serde(default)]
    pub groups: Vec<String>,
    #[serde(default)]
    pub extra: std::collections::BTreeMap<String, Vec<String>>,
}

/// The `userInfo.extra` key a bound ServiceAccount token fills with its pod's node.
pub const NODE_NAME_EXTRA: &str = "authentication.kubernetes.io/node-name";

/// `POST /admission/v1/validate`: an `AdmissionReview` answered with its `response`.
pub async fn validate(State(st): State<AppState>, Json(review): Json<Value>) -> Json<Value> {
    let uid = review.pointer("/request/uid").and_then(Value::as_str).unwrap_or_default().to_string();
    let verdict = match serde_json::from_value::<Review>(review) {
        Ok(Review { request: Some(req) }) => decide(&st, &req).await,
        Ok(Review { request: None }) => Err((400, "BadRequest", "an AdmissionReview needs a request".to_string())),
        Err(e) => Err((400, "BadRequest", format!("not an admission.k8s.io/v1 AdmissionReview: {e}"))),
    };
    let response = match verdict {
        Ok(warnings) => json!({"uid": uid, "allowed": true, "warnings": warnings}),
        Err((code, reason, message)) => json!({
            "uid": uid, "allowed": false,
            "status": {"code": code, "reason": reason, "message": message},
        }),
    };
    Json(json!({"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "response": response}))
}

/// A refusal: the HTTP status, reason and message the API server relays.
pub(crate) type Refusal = (u16, &'static str, String);
type Verdict = Result<Vec<String>, Refusal>;

async fn decide(st: &AppState, req: &Request) -> Verdict {
    if !matches!(req.operation.as_str(), "CREATE" | "UPDATE") {
        // Deletes are RBAC's; Kairon's finalizers do the rest.
        return Ok(Vec::new());
    }
    if req.resource.resource == "events" && matches!(req.resource.group.as_str(), "" | "events.k8s.io") {
        return node_event(st, req).await;
    }
    let admit: admit::Admit = match (req.resource.group.as_str(), req.resource.resource.as_str()) {
        (KAIRON_GROUP, "machines") => admit::machine,
        (KAIRON_GROUP, "machinepools") => admit::pool,
        (KAIRON_GROUP, "machineclaims") => admit::claim,
        (KAIRON_GROUP, "kaironnodes") => admit::node,
        (KAIRON_GROUP, "kaironquotas") => admit::quota,
        (KAIRON_GROUP, "kairontemplates") => admit::template,
        (group, plural) => {
            return Err((400, "BadRequest", format!("this webhook reviews Kairon's kinds, not {plural}.{group}")));
        }
    };
    let kind = Kind {
        group: KAIRON_GROUP,
        plural: req.resource.resource.as_str(),
        namespaced: req.resource.resource != "kaironnodes",
    };
    let id = identity(&req.user_info, req.namespace.as_deref());
    let new =
        req.object.clone().ok_or((400, "BadRequest", "a CREATE or UPDATE review needs its object".to_string()))?;
    let old = req.old_object.as_ref();
    if names_a_requester(&req.user_info) {
        // The api wrote for a caller: only where that caller may write (a tenant's own
        // namespaces), as the REST path already checked.
        let ns = req.namespace.as_deref();
        crate::auth::may_access(&id, crate::auth::Verb::Write, ns, !kind.namespaced)
            .and_then(|()| guard::may_request(&id, kind, ns, guard::Op::Write))
            .map_err(|m| (403, "Forbidden", m))?;
    }
    if req.sub_resource.as_deref() == Some("status") {
        guard::may_write_status(&id, kind).map_err(|m| (403, "Forbidden", m))?;
    }
    guard::check_write(&id, kind, old, &new).map_err(|m| (403, "Forbidden", m))?;
    let ctx = AdmitCtx { opts: st.validation, field_validation: FieldValidation::Ignore };
    let mut typed = new.clone();
    let warnings = admit(&mut typed, old, &ctx).map_err(|e| match e {
        AdmitError::Invalid(errs) => {
            let what: Vec<String> = errs.iter().map(|e| e.to_string()).collect();
            (422, "Invalid", what.join("; "))
        }
        AdmitError::BadRequest(m) => (400, "BadRequest", m),
    })?;
    let kube = || {
        Ok::<_, Refusal>(
            &st.machines.as_ref().ok_or((503, "ServiceUnavailable", "no Kubernetes client".to_string()))?.kube,
        )
    };
    let ns = req.namespace.as_deref().unwrap_or_default();
    // A tenant's reference to a Secret: only one it may read itself.
    if id.role == Role::Operator && req.sub_resource.is_none() {
        secrets::check(kube()?, &req.user_info, ns, kind.plural, old, &new).await?;
    }
    // Last, once the write is otherwise allowed: a quota's charge is a reservation made.
    if kind.plural == "machines" && req.sub_resource.is_none() {
        quota::charge(kube()?, &st.quota_turns, ns, old, &new, req.dry_run).await?;
    }
    // A template's spec never changes: only its create takes a place.
    if kind.plural == "kairontemplates" && req.sub_resource.is_none() && req.operation == "CREATE" {
        quota::charge_template(kube()?, &st.quota_turns, ns, &new, req.dry_run).await?;
    }
    Ok(warnings)
}

/// An Event written by a node agent (the configuration sends only theirs, by `matchConditions`):
/// allowed only about a Machine on that node ([`guard::check_node_event`]). Anyone else's Events
/// are RBAC's.
async fn node_event(st: &AppState, req: &Request) -> Verdict {
    let id = identity(&req.user_info, req.namespace.as_deref());
    if id.role != Role::Node {
        return Ok(Vec::new());
    }
    let event =
        req.object.as_ref().ok_or((400, "BadRequest", "a CREATE or UPDATE review needs its object".to_string()))?;
    let machine = match guard::event_machine(event) {
        Some((namespace, name)) => {
            let kube =
                &st.machines.as_ref().ok_or((503, "ServiceUnavailable", "no Kubernetes client".to_string()))?.kube;
            let api: kube::Api<kairon_model::Machine> = kube::Api::namespaced(kube.clone(), &namespace);
            let found = api.get_opt(&name).await.map_err(|e| {
                tracing::warn!(error = %e, "webhook: reading the Machine an Event is about");
                (503, "ServiceUnavailable", format!("could not read Machine {namespace}/{name}; try again"))
            })?;
            found.map(|m| serde_json::to_value(m).unwrap_or_default())
        }
        None => None,
    };
    guard::check_node_event(&id, event, machine.as_ref()).map_err(|m| (403, "Forbidden", m))?;
    Ok(Vec::new())
}

/// Whether a request is the api's write for a caller (see [`identity`]).
fn names_a_requester(user: &UserInfo) -> bool {
    user.extra.contains_key(crate::requester::EXTRA)
        && user.username == format!("system:serviceaccount:{SYSTEM_NAMESPACE}:kairon-api")
}

/// No one: a tenant of no namespace (what a requester the api could not have sent is).
fn nobody(why: String, user: &str) -> Identity {
    tracing::warn!(%user, %why, "webhook: a request whose requester cannot be read is no one's");
    Identity { sub: format!("{user} (unreadable requester)"), role: Role::Operator, namespaces: vec![], legacy: false }
}

/// The Kairon identity of a Kubernetes user (see the module's comment).
fn identity(user: &UserInfo, namespace: Option<&str>) -> Identity {
    let who = |role: Role, sub: &str| Identity { sub: sub.into(), role, namespaces: vec!["*".into()], legacy: false };
    if let Some((ns, name)) = user.username.strip_prefix("system:serviceaccount:").and_then(|s| s.split_once(':'))
        && ns == SYSTEM_NAMESPACE
    {
        if let Some(node) = name.strip_prefix("kairon-node-") {
            return who(Role::Node, node);
        }
        if name == "kairon-node"
            && let Some([node]) = user.extra.get(NODE_NAME_EXTRA).map(Vec::as_slice)
        {
            return who(Role::Node, node);
        }
        match name {
            "kairon-controller" => return who(Role::Controller, name),
            // The api's writes made for a caller name it (crate::requester); its own are admin.
            "kairon-api" => {
                return match user.extra.get(crate::requester::EXTRA).map(Vec::as_slice) {
                    None => who(Role::Admin, name),
                    Some([value]) => crate::requester::decode(value).unwrap_or_else(|e| nobody(e, name)),
                    Some(_) => nobody(format!("several values of {}", crate::requester::EXTRA), name),
                };
            }
            _ => {}
        }
    }
    if user.groups.iter().any(|g| ADMIN_GROUPS.contains(&g.as_str())) {
        return who(Role::Admin, &user.username);
    }
    Identity {
        sub: user.username.clone(),
        role: Role::Operator,
        namespaces: namespace.into_iter().map(str::to_string).collect(),
        legacy: false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn user(name: &str, groups: &[&str]) -> UserInfo {
        UserInfo { username: name.into(), groups: groups.iter().map(|g| g.to_string()).collect(), ..Default::default() }
    }

    #[test]
    fn kubernetes_users_map_to_kairon_roles() {
        let node = identity(&user("system:serviceaccount:kairon-system:kairon-node-a", &[]), Some("team"));
        assert_eq!((node.role, node.sub.as_str()), (Role::Node, "a"));
        // The DaemonSet's shared ServiceAccount: the node its bound token names, else no node.
        let mut shared = user("system:serviceaccount:kairon-system:kairon-node", &[]);
        assert_eq!(identity(&shared, None).role, Role::Operator);
        shared.extra.insert(NODE_NAME_EXTRA.into(), vec!["b".into()]);
        let node = identity(&shared, None);
        assert_eq!((node.role, node.sub.as_str()), (Role::Node, "b"));
        let ctl = identity(&user("system:serviceaccount:kairon-system:kairon-controller", &[]), None);
        assert_eq!(ctl.role, Role::Controller);
        // The same names elsewhere are tenants.
        let fake = identity(&user("system:serviceaccount:team:kairon-node-a", &[]), Some("team"));
        assert_eq!((fake.role, fake.namespaces), (Role::Operator, vec!["team".to_string()]));
        let admin = identity(&user("alice", &["kairon:admins"]), Some("team"));
        assert_eq!(admin.role, Role::Admin);
        let tenant = identity(&user("bob", &["system:authenticated"]), Some("team"));
        assert_eq!((tenant.role, tenant.namespaces), (Role::Operator, vec!["team".to_string()]));
    }

    #[test]
    fn the_requester_of_a_write_is_believed_from_the_api_alone() {
        let bob = Identity { sub: "bob".into(), role: Role::Operator, namespaces: vec!["team".into()], legacy: false };
        let extra = |u: &mut UserInfo, values: Vec<String>| {
            u.extra.insert(crate::requester::EXTRA.into(), values);
        };
        let mut api = user("system:serviceaccount:kairon-system:kairon-api", &[]);
        assert_eq!(identity(&api, Some("team")).role, Role::Admin, "the api's own writes");
        extra(&mut api, vec![crate::requester::encode(&bob)]);
        let held = identity(&api, Some("other"));
        assert_eq!((held.role, held.sub.as_str(), held.namespaces), (Role::Operator, "bob", vec!["team".to_string()]));
        // Unreadable or doubled: no one, never the api's admin.
        extra(&mut api, vec!["admin".into()]);
        assert!(identity(&api, None).namespaces.is_empty());
        extra(&mut api, vec![crate::requester::encode(&bob), crate::requester::encode(&bob)]);
        assert!(identity(&api, None).namespaces.is_empty());
        // Anyone else's extra changes nothing: a tenant stays a tenant of the request's namespace.
        let mut mallory = user("mallory", &[]);
        let admin = Identity { sub: "x".into(), role: Role::Admin, namespaces: vec!["*".into()], legacy: false };
        extra(&mut mallory, vec![crate::requester::encode(&admin)]);
        let tenant = identity(&mallory, Some("team"));
        assert_eq!((tenant.role, tenant.namespaces), (Role::Operator, vec!["team".to_string()]));
        let mut elsewhere = user("system:serviceaccount:team:kairon-api", &[]);
        extra(&mut elsewhere, vec![crate::requester::encode(&admin)]);
        assert_eq!(identity(&elsewhere, Some("team")).role, Role::Operator);
    }
}
