//! A claim binds inside its own create request: the same [`binding::bind`] the claim controller
//! runs, here on the store directly, and in one transaction with the claim itself — the claim is
//! stored already Bound, with the member it took (under that member's resourceVersion
//! precondition), or Pending with why not — so one commit answers the create, and the reply says
//! Bound with its Machine. Every object goes through the handlers' own planning (admission, the
//! write guard) — the member with the controllers' identity. What cannot bind now (no warm member,
//! no pool) is stored Pending for the controller, which binds it when a member turns warm.

use axum::http::StatusCode;
use kube::ResourceExt;
use serde_json::Value;
use tracing::{Instrument, trace_span};

use kairon_model::binding::{self, Binding, BindingStore};
use kairon_model::keys::{labels, reasons};
use kairon_model::{Machine, MachineClaim, MachinePool};

use kairon_db::{Freshness, StoreError, Write, WriteError};

use super::Params;
use super::handlers::{Change, Ctx, Planned, plan};
use super::status::{ApiError, ApiResult};
use crate::auth::{Identity, Role};
use crate::state::AppState;

/// Who binds: the claim controller's rights, under the name the writes record.
const BINDER: &str = "kairon-claims";

fn binder() -> Identity {
    Identity { sub: BINDER.into(), role: Role::Controller, namespaces: Vec::new(), legacy: false }
}

/// The store as binding sees it, in the claim's namespace, with the claim about to be created.
struct StoreBinding<'a> {
    st: &'a AppState,
    id: &'a Identity,
    /// The claim as planned (admitted, not stored): stored with the member that binds it.
    claim: &'a Planned,
    claims: &'a Ctx<'a>,
    /// The claim and member as stored by the take that bound them.
    taken: std::sync::Mutex<Option<(Value, Value)>>,
    /// The store's latest revision when binding began: the reads it makes at once (the claim's
    /// member, the pool, its members) share one query for it.
    latest: tokio::sync::OnceCell<i64>,
}

impl StoreBinding<'_> {
    fn ctx(&self, plural: &str, ns: &str) -> ApiResult<Ctx<'_>> {
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
            status_sub: false,
            in_process: false,
        })
    }

    /// Every write committed before binding began, seen.
    async fn fresh(&self) -> ApiResult<Freshness> {
        let rv = self.latest.get_or_try_init(|| self.st.store.current_rv()).await?;
        Ok(Freshness::AtLeast(*rv))
    }

    /// The Machines of `ns` with label `key` = `value`.
    async fn labelled(&self, ns: &str, key: &str, value: &str) -> ApiResult<Vec<Machine>> {
        let fresh = self.fresh().await?;
        let found = self.st.store.labelled_with(kairon_model::GROUP, "machines", ns, key, value, fresh).await?;
        Ok(found.into_iter().filter_map(|v| serde_json::from_value(v).ok()).collect())
    }
}

impl BindingStore for StoreBinding<'_> {
    type Error = ApiError;

    async fn claimed_by(&self, ns: &str, claim: &str) -> ApiResult<Vec<Machine>> {
        self.labelled(ns, labels::CLAIM, claim).await
    }

    async fn pool(&self, ns: &str, name: &str) -> ApiResult<Option<MachinePool>> {
        let c = self.ctx("machinepools", ns)?;
        let stored = self.st.store.get_with(c.key(name), self.fresh().await?).await?;
        Ok(stored.and_then(|v| serde_json::from_value(v).ok()))
    }

    async fn labelled_for_pool(&self, ns: &str, pool: &str) -> ApiResult<Vec<Machine>> {
        self.labelled(ns, labels::POOL, pool).await
    }

    /// Stores the claim, Bound, and the member taken for it, in one transaction.
    async fn take(&self, ns: &str, name: &str, patch: &Value, bound: &Value) -> ApiResult<bool> {
        let members = self.ctx("machines", ns)?;
        let member = match plan(&members, name, &Change::Merge(patch.clone())).await {
            Ok(member) => member,
            Err(e) if e.code == StatusCode::CONFLICT || e.code == StatusCode::NOT_FOUND => return Ok(false),
            Err(e) => return Err(e),
        };
        let claim_name = self.claim.new["metadata"]["name"].as_str().unwrap_or_default();
        let mut claim = self.claim.new.clone();
        claim["status"] = bound.clone();
        binding::label_launch_type(&mut claim);
        let writes = vec![
            Write::Create(self.claims.key(claim_name), claim),
            Write::Update(members.key(name), member.new, member.precondition),
        ];
        match self.st.store.write_all(writes).await {
            Ok(mut stored) => {
                let member = stored.pop().unwrap_or_default();
                let claim = stored.pop().unwrap_or_default();
                *self.taken.lock().unwrap_or_else(|p| p.into_inner()) = Some((claim, member));
                Ok(true)
            }
            // Another claim (or the pool) changed the member first: the next is tried.
            Err(WriteError { index: 1, error: StoreError::Conflict { .. } | StoreError::NotFound }) => Ok(false),
            Err(WriteError { index: 0, error }) => {
                Err(ApiError::from_store(error, &self.claims.rt.qualified(), claim_name))
            }
            Err(WriteError { error, .. }) => Err(ApiError::from_store(error, &members.rt.qualified(), name)),
        }
    }
}

/// Creates claim `name` (the request's `c`) bound to a warm member of its pool when one is there,
/// in one transaction with the member's take; Pending with why not otherwise. The member is
/// resumed before the reply, so the claimant's first call finds it running.
pub async fn create_claim(c: &Ctx<'_>, name: &str, body: Value) -> ApiResult<(Value, Vec<String>)> {
    let planned = plan(c, name, &Change::Create(body)).instrument(trace_span!("hop.claim.admit")).await?;
    let claim: MachineClaim = serde_json::from_value(planned.new.clone())
        .map_err(|e| ApiError::internal(format!("an admitted claim does not read back: {e}")))?;
    let id = binder();
    let store = StoreBinding {
        st: c.st,
        id: &id,
        claim: &planned,
        claims: c,
        taken: Default::default(),
        latest: Default::default(),
    };
    let ns = c.ns.as_str();
    let now = k8s_openapi::jiff::Timestamp::now();
    let pending = |reason: &str, message: String| binding::pending_status(&claim, reason, message, &now.to_string());
    let mut served = None;
    let status = match binding::bind(&store, &claim, now.as_millisecond())
        .instrument(trace_span!("hop.claim.bind"))
        .await
    {
        Ok(Binding::Bound { machine, at }) => {
            let taken = store.taken.lock().unwrap_or_else(|p| p.into_inner()).take();
            match taken {
                Some((stored, member)) => {
                    binding::Served::of(&claim, &at).record(&claim.spec.pool_name);
                    bound(c.st, &claim, member).await;
                    return Ok((stored, planned.warnings));
                }
                // A live member already labelled for this name (no take was needed): the claim
                // is stored bound to it.
                None => {
                    served = Some(binding::Served::of(&claim, &at));
                    Some(binding::bound_status(&claim, &machine, &at))
                }
            }
        }
        Ok(Binding::PoolNotFound) => {
            pending(binding::POOL_NOT_FOUND, binding::pool_not_found_message(&claim.spec.pool_name, ns))
        }
        Ok(Binding::NoWarmMember) => {
            pending(binding::NO_WARM_MEMBER, binding::no_warm_member_message(&claim.spec.pool_name))
        }
        Ok(Binding::QuotaExceeded(message)) => pending(binding::QUOTA_EXCEEDED, message),
        // The claim is stored as admitted (being bound): the controller binds it once the
        // create request's hold has passed.
        Err(e) if e.code.is_server_error() => {
            tracing::warn!(claim = name, error = %e.message, "binding at create failed; the controller will bind it");
            None
        }
        Err(e) => return Err(e),
    };
    let mut new = planned.new;
    if let Some(status) = status {
        new["status"] = status;
        binding::label_launch_type(&mut new);
    }
    let stored =
        c.st.store.create(c.key(name), new).await.map_err(|e| ApiError::from_store(e, &c.rt.qualified(), name))?;
    if let Some(served) = served {
        served.record(&claim.spec.pool_name);
    }
    Ok((stored, planned.warnings))
}

/// After the commit: the member resumed at once (not at the node agent's next reconcile), its
/// first activity stamp already in the take, and the Bound Event recorded beside the reply.
async fn bound(st: &AppState, claim: &MachineClaim, member: Value) {
    let Some(machines) = st.machines.clone() else { return };
    let Ok(member) = serde_json::from_value::<Machine>(member) else { return };
    let name = member.name_any();
    tracing::info!(claim = ?claim.metadata.name, machine = %name, "claim bound in its create request");
    machines.claimed(&member);
    let (claim, note) = (claim.clone(), binding::bound_message(claim, &name));
    tokio::spawn(async move { machines.record(&claim, reasons::BOUND, note).await });
}
