//! Bearer tokens: server-signed JWTs carrying who is asking (`sub`), their role and the
//! namespaces they may use; and the one place that decides what each role may touch.

use jsonwebtoken::{Algorithm, DecodingKey, EncodingKey, Header, Validation};
use serde::{Deserialize, Serialize};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// Everything, everywhere.
    Admin,
    /// Reads and writes in their namespaces.
    Operator,
    /// Reads in their namespaces.
    Viewer,
    /// A node agent (`sub` = the node's name): reads everything, writes the status, the
    /// freeze confirmation, the activity stamp and its finalizer of the Machines on its node,
    /// Events, and its own KaironNode. Nothing else (`crate::guard`).
    Node,
    /// The controllers: read everything, write what the controllers own (status, claim and
    /// pool bindings, ownerReferences, lifecycle-start, pool members, leases, Events).
    Controller,
    /// A Prometheus scraper: reads `/metrics` and nothing else.
    Metrics,
}

impl std::str::FromStr for Role {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "admin" => Ok(Role::Admin),
            "operator" => Ok(Role::Operator),
            "viewer" => Ok(Role::Viewer),
            "node" => Ok(Role::Node),
            "controller" => Ok(Role::Controller),
            "metrics" => Ok(Role::Metrics),
            _ => Err(format!("unknown role {s:?}: use admin, operator, viewer, node, controller or metrics")),
        }
    }
}

/// The claims of a Kairon token.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Claims {
    pub sub: String,
    pub role: Role,
    /// Namespaces an operator or viewer may use; `*` means all.
    #[serde(default)]
    pub namespaces: Vec<String>,
    pub iss: String,
    pub aud: String,
    pub exp: i64,
    #[serde(default)]
    pub iat: i64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub nbf: Option<i64>,
}

/// Who is asking.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Identity {
    pub sub: String,
    pub role: Role,
    pub namespaces: Vec<String>,
    /// The legacy shared token: an operator in every namespace with no identity of its own.
    pub legacy: bool,
}

impl Identity {
    /// The caller behind the legacy shared token.
    pub fn legacy() -> Self {
        Identity { sub: "legacy-token".into(), role: Role::Operator, namespaces: vec!["*".into()], legacy: true }
    }

    pub fn may_use_namespace(&self, ns: &str) -> bool {
        self.is_system() || self.namespaces.iter().any(|n| n == "*" || n == ns)
    }

    pub fn all_namespaces(&self) -> bool {
        self.is_system() || self.namespaces.iter().any(|n| n == "*")
    }

    /// An admin, node or controller identity: not a tenant.
    pub fn is_system(&self) -> bool {
        !self.legacy && matches!(self.role, Role::Admin | Role::Node | Role::Controller)
    }

    /// A tenant: an operator or viewer scoped to namespaces (the legacy token included).
    pub fn is_tenant(&self) -> bool {
        !self.is_system()
    }
}

pub const ISSUER: &str = "kairon";
pub const AUDIENCE: &str = "kairon-api";

/// Signs and checks tokens with one HS256 secret.
#[derive(Clone)]
pub struct TokenKeys {
    encoding: EncodingKey,
    decoding: DecodingKey,
}

#[derive(Debug, thiserror::Error)]
#[error("invalid bearer token: {0}")]
pub struct TokenError(String);

impl TokenKeys {
    pub fn from_secret(secret: &[u8]) -> Result<Self, TokenError> {
        let bad = |e: jsonwebtoken::errors::Error| TokenError(format!("unusable signing secret: {e}"));
        Ok(TokenKeys {
            encoding: EncodingKey::from_secret(secret).map_err(bad)?,
            decoding: DecodingKey::from_secret(secret).map_err(bad)?,
        })
    }

    pub fn mint(&self, sub: &str, role: Role, namespaces: Vec<String>, ttl_seconds: i64) -> Result<String, TokenError> {
        let now = chrono::Utc::now().timestamp();
        let claims = Claims {
            sub: sub.into(),
            role,
            namespaces,
            iss: ISSUER.into(),
            aud: AUDIENCE.into(),
            exp: now + ttl_seconds,
            iat: now,
            nbf: Some(now - 5),
        };
        jsonwebtoken::encode(&Header::new(Algorithm::HS256), &claims, &self.encoding)
            .map_err(|e| TokenError(e.to_string()))
    }

    pub fn verify(&self, token: &str) -> Result<Identity, TokenError> {
        let mut v = Validation::new(Algorithm::HS256);
        v.set_issuer(&[ISSUER]);
        v.set_audience(&[AUDIENCE]);
        v.validate_nbf = true;
        v.set_required_spec_claims(&["exp", "iss", "aud", "sub"]);
        let data = jsonwebtoken::decode::<Claims>(token, &self.decoding, &v).map_err(|e| TokenError(e.to_string()))?;
        let c = data.claims;
        Ok(Identity { sub: c.sub, role: c.role, namespaces: c.namespaces, legacy: false })
    }
}

/// What a request does, for authorisation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verb {
    Read,
    Write,
}

/// The rule for the Kubernetes-compatible resource paths. `namespace` is `None` for
/// cluster-scoped objects and for lists across all namespaces (filtered by the caller).
pub fn may_access(id: &Identity, verb: Verb, namespace: Option<&str>, cluster_scoped: bool) -> Result<(), String> {
    if id.role == Role::Admin {
        return Ok(());
    }
    if id.role == Role::Metrics {
        return Err(metrics_only(&id.sub));
    }
    if verb == Verb::Write && id.role == Role::Viewer {
        return Err(format!("{} is a viewer and may not change anything", id.sub));
    }
    if matches!(id.role, Role::Node | Role::Controller) {
        // They read everything; their writes go through the Kubernetes-compatible paths, where
        // `crate::guard` decides them field by field.
        return match verb {
            Verb::Read => Ok(()),
            Verb::Write => Err(format!(
                "{} is {} and writes only through the Kubernetes-compatible API (what its role allows there)",
                id.sub,
                role_name(id.role)
            )),
        };
    }
    if cluster_scoped {
        return match verb {
            Verb::Read => Ok(()),
            Verb::Write => Err(format!("{} may not change cluster-scoped objects: that needs an admin token", id.sub)),
        };
    }
    match namespace {
        Some(ns) if !id.may_use_namespace(ns) => {
            Err(format!("{} may not use namespace {ns:?} (allowed: {})", id.sub, id.namespaces.join(", ")))
        }
        _ => Ok(()),
    }
}

/// What a metrics token of `sub` is told anywhere but `/metrics`.
pub fn metrics_only(sub: &str) -> String {
    format!("{sub} is a metrics scraper: its token reads /metrics and nothing else")
}

/// Who may read `/metrics`: an admin or a metrics scraper. A tenant may not: the counters name
/// every namespace's pools and Machines.
pub fn may_scrape(id: &Identity) -> Result<(), String> {
    match id.role {
        Role::Admin | Role::Metrics if !id.legacy => Ok(()),
        _ => Err(format!(
            "{} is {}: /metrics is read with an admin token or a metrics token (kairon token --role metrics)",
            id.sub,
            role_name(id.role)
        )),
    }
}

/// Admin-only operations (node-scoped writes, creating sandbox-track Machines, snapshots).
pub fn admin_only(id: &Identity, what: &str) -> Result<(), String> {
    if id.role == Role::Admin {
        return Ok(());
    }
    Err(format!("{what} is admin-only: use an admin token ({} is {})", id.sub, role_name(id.role)))
}

pub fn role_name(r: Role) -> &'static str {
    match r {
        Role::Admin => "an admin",
        Role::Operator => "an operator",
        Role::Viewer => "a viewer",
        Role::Node => "a node",
        Role::Controller => "a controller",
        Role::Metrics => "a metrics scraper",
    }
}

/// How an admin opens the guest routes to operators, for a refusal to say.
pub const OPERATOR_EXEC_HOW: &str = "An admin lets operators use them on Machines labelled \
    kairon.zyvor.dev/sandbox=true by running the server with --sandbox-operator-exec (environment \
    KAIRON_UI_SANDBOX_OPERATOR_EXEC=true; Helm value ui.auth.sandboxOperatorExec=true), or runs the \
    command with an admin token.";

/// What a guest operation needs to know about its Machine.
pub struct GuestTarget<'a> {
    pub namespace: &'a str,
    /// Whether the Machine carries `kairon.zyvor.dev/sandbox=true`.
    pub sandbox_labelled: bool,
}

/// Guest exec, file transfer and the sandbox HTTP proxy: admin-only, except that with
/// `operator_exec` (`KAIRON_UI_SANDBOX_OPERATOR_EXEC`) a named operator may use them on
/// sandbox-labelled Machines in namespaces they can use. The legacy token has no identity and
/// stays refused.
pub fn may_use_guest(id: &Identity, target: &GuestTarget<'_>, operator_exec: bool) -> Result<(), String> {
    if id.role == Role::Admin && !id.legacy {
        return Ok(());
    }
    if id.legacy {
        return Err("guest exec, files and the sandbox HTTP proxy need a named token: the legacy shared token \
                    has no identity (mint one with `kairon token`)"
            .into());
    }
    if id.role != Role::Operator {
        return Err(format!(
            "{} is {} and may not use guest exec, files or the sandbox HTTP proxy",
            id.sub,
            role_name(id.role)
        ));
    }
    if !operator_exec {
        return Err(format!(
            "guest exec, processes, terminals, files and the sandbox HTTP proxy are admin-only on this server ({} is \
             an operator). {OPERATOR_EXEC_HOW}",
            id.sub
        ));
    }
    if !target.sandbox_labelled {
        return Err(format!(
            "only Machines labelled {}=true are open to operators' guest access; this one is admin-only ({} is an \
             operator): create it with that label (the SDKs, MCP and `kaironctl create --sandbox` do)",
            kairon_model::keys::labels::SANDBOX,
            id.sub
        ));
    }
    if !id.may_use_namespace(target.namespace) {
        return Err(format!(
            "{} may not use namespace {:?} (allowed: {})",
            id.sub,
            target.namespace,
            id.namespaces.join(", ")
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn id(role: Role, ns: &[&str]) -> Identity {
        Identity { sub: "u".into(), role, namespaces: ns.iter().map(|s| s.to_string()).collect(), legacy: false }
    }

    #[test]
    fn tokens_round_trip_and_expire() {
        let keys = TokenKeys::from_secret(b"0123456789abcdef0123456789abcdef").unwrap();
        let t = keys.mint("alice", Role::Operator, vec!["agents".into()], 60).unwrap();
        let who = keys.verify(&t).unwrap();
        assert_eq!((who.sub.as_str(), who.role), ("alice", Role::Operator));
        let expired = keys.mint("bob", Role::Admin, vec![], -120).unwrap();
        assert!(keys.verify(&expired).is_err());
        let other = TokenKeys::from_secret(b"another secret another secret!!").unwrap();
        assert!(other.verify(&t).is_err());
    }

    #[test]
    fn rules() {
        let op = id(Role::Operator, &["agents"]);
        assert!(may_access(&op, Verb::Write, Some("agents"), false).is_ok());
        assert!(may_access(&op, Verb::Read, Some("other"), false).is_err());
        assert!(may_access(&op, Verb::Write, None, true).is_err());
        assert!(may_access(&op, Verb::Read, None, true).is_ok());
        let viewer = id(Role::Viewer, &["*"]);
        assert!(may_access(&viewer, Verb::Read, Some("x"), false).is_ok());
        assert!(may_access(&viewer, Verb::Write, Some("x"), false).is_err());
        assert!(may_access(&id(Role::Admin, &[]), Verb::Write, Some("x"), false).is_ok());
    }

    #[test]
    fn guest_rules() {
        let sandbox = GuestTarget { namespace: "agents", sandbox_labelled: true };
        let plain = GuestTarget { namespace: "agents", sandbox_labelled: false };
        let elsewhere = GuestTarget { namespace: "other", sandbox_labelled: true };
        let admin = id(Role::Admin, &[]);
        let op = id(Role::Operator, &["agents"]);
        let viewer = id(Role::Viewer, &["*"]);
        let legacy = Identity::legacy();
        for flag in [false, true] {
            assert!(may_use_guest(&admin, &plain, flag).is_ok());
            assert!(may_use_guest(&legacy, &sandbox, flag).is_err(), "legacy refused (flag {flag})");
            assert!(may_use_guest(&viewer, &sandbox, flag).is_err());
            assert!(may_use_guest(&op, &plain, flag).is_err(), "unlabelled stays admin-only");
            assert!(may_use_guest(&op, &elsewhere, flag).is_err(), "namespace rule holds");
        }
        assert!(may_use_guest(&op, &sandbox, false).is_err());
        assert!(may_use_guest(&op, &sandbox, true).is_ok());
        assert!(admin_only(&admin, "x").is_ok());
        assert!(admin_only(&op, "x").unwrap_err().contains("admin-only"));
        assert!(admin_only(&legacy, "x").is_err());
    }
}
