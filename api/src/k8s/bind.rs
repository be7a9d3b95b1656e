//! A claim binds inside its own create request: the same [`binding::bind`] the claim controller
//! runs, here on the store directly (no watch delivery, no loopback round trips), so the reply
//! to the create already says Bound with its Machine. Every write goes through the handlers'
//! own write path (admission, the write guard, the member's resourceVersion precondition) with
//! the controllers' identity. What cannot bind now (no warm member, no pool, a failure) is left
//! Pending for the controller, which binds it when a member turns warm.

use std::sync::Arc;

use kube::ResourceExt;
use serde_json::{Value, json};

use kairon_model::binding::{self, Binding, BindingStore};
use kairon_model::keys::{labels, reasons};
use kairon_model::{Machine, MachineClaim, MachinePool};

use super::Params;
use super::handlers::{Change, Ctx, write};
use super::status::{ApiError, ApiResult};
use crate::auth::{Identity, Role};
use crate::state::AppState;

/// Who binds: the claim controller's rights, under the name the writes record.
const BINDER: &str = "kairon-claims";

fn binder() -> Identity {
    Identity { sub: BINDER.into(), role: Role::Controller, namespaces: Vec::new(), legacy: false }
}

/// The store as binding sees it, in the claim's namespace.
struct StoreBinding<'a> {
    st: &'a AppState,
    id: &'a Identity,
    /// The namespace's Machines, read once per binding: a member taken meanwhile by another
    /// claim only fails its resourceVersion precondition, and the next is tried.
    machines: tokio::sync::OnceCell<Vec<Value>>,
}

impl StoreBinding<'_> {
    fn ctx(&self, plural: &str, ns: &str, status_sub: bool) -> ApiResult<Ctx<'_>> {
        let rt = self
            .st
            .registry
            .get(kairon_model::GROUP, plural)
            .ok_or_else(|| ApiError::internal(format!("the registry has no {plural}")))?;
        let params = Params { field_manager: Some(BINDER.into()), ..Default::default() };
        Ok(Ctx {
            st: self.st,
            rt,
            version: rt.storage_version().into(),
            ns: ns.into(),
            id: self.id,
            params,
            status_sub,
        })
    }

    /// The Machines of `ns` with label `key` = `value`, decoded (only those: decoding is what
    /// costs in a namespace of thousands).
    async fn labelled(&self, ns: &str, key: &str, value: &str) -> ApiResult<Vec<Machine>> {
        let all = self
            .machines
            .get_or_try_init(|| async {
                let page = self.st.store.list(kairon_model::GROUP, "machines", Some(ns), None, None).await?;
                Ok::<_, ApiError>(page.items)
            })
            .await?;
        Ok(all
            .iter()
            .filter(|v| v["metadata"]["labels"][key].as_str() == Some(value))
            .filter_map(|v| serde_json::from_value(v.clone()).ok())
            .collect())
    }
}

impl BindingStore for StoreBinding<'_> {
    type Error = ApiError;

    async fn claimed_by(&self, ns: &str, claim: &str) -> ApiResult<Vec<Machine>> {
        self.labelled(ns, labels::CLAIM, claim).await
    }

    async fn pool(&self, ns: &str, name: &str) -> ApiResult<Option<MachinePool>> {
        let c = self.ctx("machinepools", ns, false)?;
        let stored = self.st.store.get(c.key(name)).await?;
        Ok(stored.and_then(|v| serde_json::from_value(v).ok()))
    }

    async fn members(&self, pool: &MachinePool) -> ApiResult<Vec<Machine>> {
        let (ns, name) = (pool.metadata.namespace.as_deref().unwrap_or_default(), pool.name_any());
        let mut machines = self.labelled(ns, labels::POOL, &name).await?;
        machines.retain(|m| kairon_model::warm::is_member_of(m, pool));
        Ok(machines)
    }

    async fn take(&self, ns: &str, name: &str, patch: &Value) -> ApiResult<bool> {
        match write(&self.ctx("machines", ns, false)?, name, Change::Merge(patch.clone())).await {
            Ok(_) => Ok(true),
            Err(e) if e.code == axum::http::StatusCode::CONFLICT || e.code == axum::http::StatusCode::NOT_FOUND => {
                Ok(false)
            }
            Err(e) => Err(e),
        }
    }
}

/// Binds a claim just created (`stored`), and returns it as it now is: Bound to a member, or
/// Pending with the reason. A failure leaves the claim as stored; the controller binds it once
/// the create request's hold ([`binding::BINDING_GRACE_MS`]) has passed.
pub async fn at_create(st: &AppState, stored: Value) -> Value {
    let Ok(claim) = serde_json::from_value::<MachineClaim>(stored.clone()) else { return stored };
    let id = binder();
    let store = StoreBinding { st, id: &id, machines: Default::default() };
    match bind_and_record(&store, &claim).await {
        Ok(updated) => updated,
        Err(e) => {
            tracing::warn!(claim = ?claim.metadata.name, error = %e.message, "binding at create failed; the controller will bind it");
            stored
        }
    }
}

async fn bind_and_record(store: &StoreBinding<'_>, claim: &MachineClaim) -> ApiResult<Value> {
    let ns = claim.metadata.namespace.clone().unwrap_or_default();
    let name = claim.metadata.name.clone().unwrap_or_default();
    let now = k8s_openapi::jiff::Timestamp::now();
    let pending = |reason: &str, message: String| binding::pending_status(claim, reason, message, &now.to_string());
    let (status, bound) = match binding::bind(store, claim, now.as_millisecond()).await? {
        Binding::Bound { machine, at } => (Some(binding::bound_status(claim, &machine, &at)), Some(machine)),
        Binding::PoolNotFound => {
            (pending(binding::POOL_NOT_FOUND, binding::pool_not_found_message(&claim.spec.pool_name, &ns)), None)
        }
        Binding::NoWarmMember => {
            (pending(binding::NO_WARM_MEMBER, binding::no_warm_member_message(&claim.spec.pool_name)), None)
        }
    };
    // The claim still carries the create request's hold, which every outcome replaces.
    let Some(status) = status else {
        return Err(ApiError::internal("the claim's status is already what binding found"));
    };
    // Only this request has written the claim since it stored it (the controller leaves it be),
    // so the status write names that version: anyone else's write in between wins.
    let patch = json!({"metadata": {"resourceVersion": claim.metadata.resource_version}, "status": status});
    let (updated, _) = write(&store.ctx("machineclaims", &ns, true)?, &name, Change::Merge(patch)).await?;
    if let (Some(machine), Some(rest)) = (bound, store.st.machines.clone()) {
        tracing::info!(claim = %name, machine = %machine, "claim bound in its create request");
        record_bound(rest, claim.clone(), binding::bound_message(claim, &machine));
    }
    Ok(updated)
}

/// The Bound Event is for people reading history: the claimant is not kept waiting for it.
fn record_bound(rest: Arc<crate::machines::Machines>, claim: MachineClaim, note: String) {
    tokio::spawn(async move { rest.record(&claim, reasons::BOUND, note).await });
}
