//! A Machine's end (`status.lifecycle.expiresAt`) and `extend`, which moves it later.

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::ResourceExt;
use kube::api::{Patch, PatchParams};
use serde::{Deserialize, Serialize};
use serde_json::json;
use utoipa::ToSchema;

use kairon_model::expiry::{self, MAX_EXTEND_SECONDS};
use kairon_model::{Machine, MachineClaim};

use super::{Error, Machines, Reason, Result};
use crate::auth::Identity;

/// The answer of an extension.
#[derive(Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Extended {
    /// The Machine's new end (the lifecycle controller records it as
    /// `status.lifecycle.expiresAt`).
    #[schema(value_type = String, format = DateTime)]
    pub expires_at: Time,
    /// The Machine as changed.
    #[schema(value_type = crate::rest::schema::Machine)]
    pub machine: Machine,
}

impl Machines {
    /// Moves the Machine's end `seconds` later: each of its deadlines (max lifetime, ttlSeconds,
    /// its claim's ttlSeconds) that would end it sooner is lengthened. The new end is fixed
    /// from the first read; the claim is changed first, and each write is conditional on what
    /// was read. A write that meets a newer object (the lifecycle controller records the
    /// claim's change on the Machine's status at once) reads both again and aims at the same
    /// end, so what was already moved is not moved twice. `seconds` is read only once the
    /// caller may write.
    pub async fn extend(
        &self,
        id: &Identity,
        ns: &str,
        name: &str,
        seconds: impl FnOnce() -> Result<i64>,
        dry_run: bool,
    ) -> Result<Extended> {
        let mut m = self.writable(id, ns, name).await?;
        let seconds = in_range(seconds()?)?;
        lifetime_runs(&m, ns, name)?;
        let mut claim = self.binding_claim(ns, &m).await?;
        let target = expiry::extend(&expiry::ends(&m, claim.as_ref()), seconds)
            .ok_or_else(|| {
                Error::conflict(
                    Reason::NoDeadline,
                    format!(
                        "Machine {ns}/{name} has no deadline (no spec.lifecycle.maxLifetimeSeconds, spec.ttlSeconds or claim ttlSeconds): there is nothing to extend"
                    ),
                )
            })?
            .expires_at;
        let pp = PatchParams { dry_run, ..super::power::field_manager() };
        let mut attempt = 1;
        loop {
            let ext = expiry::extend_to(&expiry::ends(&m, claim.as_ref()), target).ok_or_else(|| {
                Error::conflict(Reason::NoDeadline, format!("Machine {ns}/{name} has no deadline any more"))
            })?;
            match self.apply_extension(ns, &m, claim.as_ref(), &ext, &pp).await {
                Ok(machine) => return Ok(Extended { expires_at: Time(target), machine }),
                Err(kube::Error::Api(s)) if s.code == 409 && attempt < EXTEND_ATTEMPTS => {
                    attempt += 1;
                    m = self.api::<Machine>(ns).get(name).await?;
                    claim = self.binding_claim(ns, &m).await?;
                }
                Err(e) => return Err(e.into()),
            }
        }
    }

    /// Sets the Machine's own deadline `seconds` from now: `spec.ttlSeconds` (counted from
    /// creation) becomes what ends it then, whether it had a deadline or not, longer or shorter.
    /// Its other deadlines (max lifetime, its claim's TTL) stay: the earliest still ends it, and
    /// the answer says when that is. A warm pool member has no lifetime until a claim binds it.
    pub async fn set_timeout(
        &self,
        id: &Identity,
        ns: &str,
        name: &str,
        seconds: impl FnOnce() -> Result<i64>,
        dry_run: bool,
    ) -> Result<Extended> {
        let mut m = self.writable(id, ns, name).await?;
        let seconds = in_range(seconds()?)?;
        let pp = PatchParams { dry_run, ..super::power::field_manager() };
        let mut attempt = 1;
        loop {
            lifetime_runs(&m, ns, name)?;
            let now = k8s_openapi::jiff::Timestamp::now();
            let ttl = expiry::ttl_from_now(&m, now, seconds).ok_or_else(|| {
                Error::conflict(Reason::NoDeadline, format!("Machine {ns}/{name} has no creation time yet"))
            })?;
            let patch = json!({"metadata": {"resourceVersion": m.resource_version()}, "spec": {"ttlSeconds": ttl}});
            match self.api::<Machine>(ns).patch(name, &pp, &Patch::Merge(&patch)).await {
                Ok(machine) => {
                    let claim = self.binding_claim(ns, &machine).await?;
                    let ends = expiry::ends(&machine, claim.as_ref());
                    let expires_at = expiry::earliest(&ends).map_or(expiry::plus(now, seconds), expiry::End::at);
                    return Ok(Extended { expires_at: Time(expires_at), machine });
                }
                Err(kube::Error::Api(s)) if s.code == 409 && attempt < EXTEND_ATTEMPTS => {
                    attempt += 1;
                    m = self.api::<Machine>(ns).get(name).await?;
                }
                Err(e) => return Err(e.into()),
            }
        }
    }

    /// The MachineClaim bound to `m`, if any.
    async fn binding_claim(&self, ns: &str, m: &Machine) -> Result<Option<MachineClaim>> {
        Ok(match expiry::claim_name(m) {
            Some(c) => self.api::<MachineClaim>(ns).get_opt(c).await?.filter(|c| expiry::binds(c, m)),
            None => None,
        })
    }

    /// Writes `ext`: the claim's TTL, then the Machine's deadlines, each conditional on the
    /// version read. The Machine as written.
    async fn apply_extension(
        &self,
        ns: &str,
        m: &Machine,
        claim: Option<&MachineClaim>,
        ext: &expiry::Extension,
        pp: &PatchParams,
    ) -> kube::Result<Machine> {
        if let (Some(ttl), Some(c)) = (ext.claim_ttl_seconds, claim) {
            let patch = json!({"metadata": {"resourceVersion": c.resource_version()}, "spec": {"ttlSeconds": ttl}});
            self.api::<MachineClaim>(ns).patch(&c.name_any(), pp, &Patch::Merge(&patch)).await?;
        }
        let mut spec = json!({});
        if let Some(max) = ext.max_lifetime_seconds {
            spec["lifecycle"] = json!({"maxLifetimeSeconds": max});
        }
        if let Some(ttl) = ext.ttl_seconds {
            spec["ttlSeconds"] = json!(ttl);
        }
        if spec.as_object().is_some_and(|s| s.is_empty()) {
            return Ok(m.clone());
        }
        let patch = json!({"metadata": {"resourceVersion": m.resource_version()}, "spec": spec});
        self.api::<Machine>(ns).patch(&m.name_any(), pp, &Patch::Merge(&patch)).await
    }
}

/// `seconds` of an extension or a timeout, checked: 1 to a year.
fn in_range(seconds: i64) -> Result<i64> {
    if !(1..=MAX_EXTEND_SECONDS).contains(&seconds) {
        return Err(Error::new(
            Reason::Invalid,
            format!("seconds: Invalid value: {seconds}: must be 1 to {MAX_EXTEND_SECONDS} (a year)"),
        ));
    }
    Ok(seconds)
}

/// Whether `m` has a lifetime to move: not being deleted, not a warm pool member (its lifetime
/// starts when a claim binds it).
fn lifetime_runs(m: &Machine, ns: &str, name: &str) -> Result<()> {
    if m.metadata.deletion_timestamp.is_some() {
        return Err(Error::conflict(Reason::Terminating, format!("Machine {ns}/{name} is being deleted")));
    }
    if expiry::warm_pool_member(m) {
        return Err(Error::conflict(
            Reason::NoDeadline,
            format!("Machine {ns}/{name} is a warm pool member: its lifetime starts when a claim binds it"),
        ));
    }
    Ok(())
}

/// How many times `extend` reads again after meeting a newer object.
const EXTEND_ATTEMPTS: u32 = 5;
