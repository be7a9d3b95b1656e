//! A namespace's quota: its KaironQuotas' limits and what its Machines hold against them,
//! counted now (the quota controller's `status.used` may lag a second behind).

use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use kairon_model::quota::{self, Limits};
use kairon_model::{KaironQuota, Machine, QuotaAmounts};
use kube::ResourceExt;

use super::{Machines, Result, allowed, check_name};
use crate::auth::{self, Identity, Verb};

/// What a namespace's Machines hold, and each KaironQuota's limits on it.
#[derive(Serialize, Deserialize, ToSchema, Debug, Clone, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct QuotaReport {
    pub namespace: String,
    /// What the namespace's Machines hold now, every amount.
    pub used: QuotaAmounts,
    /// Each KaironQuota of the namespace, by name (none: nothing is limited).
    pub quotas: Vec<QuotaLimit>,
}

/// One KaironQuota's limits, and use against them.
#[derive(Serialize, Deserialize, ToSchema, Debug, Clone, PartialEq)]
#[serde(rename_all = "camelCase")]
pub struct QuotaLimit {
    pub name: String,
    /// The limits (an absent amount is not limited).
    pub hard: QuotaAmounts,
    /// Use against the limits, e.g. `machines: 3/10, cpu: 3/8`.
    pub summary: String,
}

impl Machines {
    /// The quota report of namespace `ns`, for a caller who may read it.
    pub async fn quota(&self, id: &Identity, ns: &str) -> Result<QuotaReport> {
        check_name("namespace", ns)?;
        allowed(auth::may_access(id, Verb::Read, Some(ns), false))?;
        let lp = kube::api::ListParams::default();
        let machines = self.api::<Machine>(ns).list(&lp).await?.items;
        let quotas = kube::Api::<KaironQuota>::namespaced(self.kube.clone(), ns).list(&lp).await?.items;
        let used = quota::total(&machines);
        let quotas = quotas
            .into_iter()
            .map(|q| QuotaLimit {
                name: q.name_any(),
                summary: quota::summary(&Limits::of(&q.spec.hard), used),
                hard: q.spec.hard,
            })
            .collect();
        Ok(QuotaReport { namespace: ns.to_string(), used: used.amounts(), quotas })
    }
}
