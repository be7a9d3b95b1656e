//! Usage queries for billing, over the claim usage history in PostgreSQL (limited to the
//! namespaces the caller may read).

use axum::Json;
use axum::extract::{Path, Query, State};
use chrono::{Datelike, NaiveDate, Utc};
use serde::{Deserialize, Serialize};
use utoipa::{IntoParams, ToSchema};
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;
use uuid::Uuid;

use kairon_db::usage::{self as history, UsageTotals};

use super::objects::ObjectPath;
use super::{Caller, ErrorBody};
use crate::auth::{self, Identity, Verb};
use crate::machines::metrics::MachineMetrics;
use crate::machines::quota::QuotaReport;
use crate::machines::{Error, Result};
use crate::state::AppState;

#[derive(Deserialize, IntoParams, Default)]
#[into_params(parameter_in = Query)]
#[serde(rename_all = "camelCase")]
pub struct UsageQuery {
    /// First UTC day, `YYYY-MM-DD` (default: the first of this month).
    pub from: Option<String>,
    /// Day after the last, `YYYY-MM-DD` (default: tomorrow).
    pub to: Option<String>,
    /// `namespace` (default), `claim` or `day`.
    pub group_by: Option<String>,
    /// Only this namespace.
    pub namespace: Option<String>,
}

/// Summed usage.
#[derive(Serialize, ToSchema, Default, Clone, Copy)]
#[serde(rename_all = "camelCase")]
pub struct Totals {
    pub active_seconds: i64,
    pub suspended_seconds: i64,
    pub vcpu_seconds: f64,
    #[serde(rename = "memoryGiBSeconds")]
    pub memory_gib_seconds: f64,
}

impl From<UsageTotals> for Totals {
    fn from(t: UsageTotals) -> Self {
        Totals {
            active_seconds: t.active_seconds,
            suspended_seconds: t.suspended_seconds,
            vcpu_seconds: t.vcpu_seconds,
            memory_gib_seconds: t.memory_gib_seconds,
        }
    }
}

/// One row of a usage report; which keys are set depends on `groupBy`.
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct UsageRow {
    pub namespace: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub claim_uid: Option<Uuid>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub claim_name: Option<String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub day: Option<NaiveDate>,
    #[serde(flatten)]
    pub totals: Totals,
}

#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct UsageReport {
    pub from: NaiveDate,
    pub to: NaiveDate,
    pub group_by: String,
    pub rows: Vec<UsageRow>,
}

fn day(s: Option<&str>, default: NaiveDate, what: &str) -> Result<NaiveDate> {
    match s {
        None | Some("") => Ok(default),
        Some(s) => NaiveDate::parse_from_str(s, "%Y-%m-%d")
            .map_err(|_| Error::bad_request(format!("{what}={s:?} is not a day: write YYYY-MM-DD"))),
    }
}

/// Usage totals over a range of UTC days, by namespace, claim or day.
#[utoipa::path(get, path = "/api/v1/usage", tag = "Usage", params(UsageQuery),
    responses((status = 200, description = "The report", body = UsageReport),
              (status = 400, description = "A bad day or groupBy", body = ErrorBody),
              (status = 403, description = "The caller may not read that namespace", body = ErrorBody)))]
async fn usage_report(c: Caller, State(st): State<AppState>, Query(q): Query<UsageQuery>) -> Result<Json<UsageReport>> {
    let today = Utc::now().date_naive();
    let first = today.with_day(1).unwrap_or(today);
    let from = day(q.from.as_deref(), first, "from")?;
    let to = day(q.to.as_deref(), today.succ_opt().unwrap_or(today), "to")?;
    if to <= from {
        return Err(Error::bad_request("to must be after from (it is the day after the last one counted)"));
    }
    if let Some(ns) = &q.namespace {
        crate::machines::check_namespace(ns)?;
        crate::machines::allowed(auth::may_access(&c.id, Verb::Read, Some(ns), false))?;
    }
    let may_read = |ns: &str| c.id.may_use_namespace(ns);
    let pool = st.store.pool();
    let group_by = q.group_by.clone().unwrap_or_else(|| "namespace".into());
    let rows: Vec<UsageRow> = match group_by.as_str() {
        "namespace" => history::namespace_totals(pool, q.namespace.as_deref(), from, to)
            .await?
            .into_iter()
            .filter(|(ns, _)| may_read(ns))
            .map(|(namespace, t)| UsageRow {
                namespace,
                claim_uid: None,
                claim_name: None,
                day: None,
                totals: t.into(),
            })
            .collect(),
        "claim" => history::claim_totals(pool, q.namespace.as_deref(), from, to)
            .await?
            .into_iter()
            .filter(|r| may_read(&r.namespace))
            .map(|r| UsageRow {
                namespace: r.namespace,
                claim_uid: Some(r.claim_uid),
                claim_name: Some(r.claim_name),
                day: None,
                totals: r.totals.into(),
            })
            .collect(),
        "day" => history::daily_totals(pool, q.namespace.as_deref(), from, to)
            .await?
            .into_iter()
            .filter(|r| may_read(&r.namespace))
            .map(|r| UsageRow {
                namespace: r.namespace,
                claim_uid: None,
                claim_name: None,
                day: Some(r.day),
                totals: r.totals.into(),
            })
            .collect(),
        other => return Err(Error::bad_request(format!("groupBy={other:?}: use namespace, claim or day"))),
    };
    Ok(Json(UsageReport { from, to, group_by, rows }))
}

#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct UsageIntervalRow {
    pub interval_start: chrono::DateTime<Utc>,
    pub interval_end: chrono::DateTime<Utc>,
    /// `active`, `suspended` or `none`.
    pub state: String,
    #[serde(flatten)]
    pub totals: Totals,
}

#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ClaimUsageHistory {
    pub claim_uid: Uuid,
    pub namespace: String,
    pub claim_name: String,
    pub intervals: Vec<UsageIntervalRow>,
    /// The intervals summed: what the claim's status.usage shows.
    pub total: Totals,
}

#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Path)]
pub struct ClaimUidPath {
    /// The MachineClaim's metadata.uid.
    pub uid: String,
}

/// One claim's accrual intervals and their sum.
#[utoipa::path(get, path = "/api/v1/usage/claims/{uid}", tag = "Usage", params(ClaimUidPath),
    responses((status = 200, description = "The history", body = ClaimUsageHistory),
              (status = 400, description = "Not a uid", body = ErrorBody),
              (status = 404, description = "Nothing recorded for this claim", body = ErrorBody)))]
async fn usage_claim(
    c: Caller,
    State(st): State<AppState>,
    Path(p): Path<ClaimUidPath>,
) -> Result<Json<ClaimUsageHistory>> {
    Ok(Json(claim_history(&st.store, &c.id, &p.uid).await?))
}

/// One claim's history, if it is in a namespace the caller may read.
pub(crate) async fn claim_history(store: &kairon_db::Store, id: &Identity, uid: &str) -> Result<ClaimUsageHistory> {
    let uid = Uuid::parse_str(uid).map_err(|_| Error::bad_request(format!("{uid:?} is not a claim uid")))?;
    let intervals = history::claim_history(store.pool(), uid).await?;
    let first = intervals.first().ok_or_else(|| Error::not_found(format!("no usage is recorded for claim {uid}")))?;
    // Same answer as for a claim that does not exist: what another namespace holds stays unseen.
    if !id.may_use_namespace(&first.namespace) {
        return Err(Error::not_found(format!("no usage is recorded for claim {uid}")));
    }
    let (namespace, claim_name) = (first.namespace.clone(), first.claim_name.clone());
    let mut total = Totals::default();
    let rows = intervals
        .into_iter()
        .map(|i| {
            let t = Totals {
                active_seconds: i.active_seconds,
                suspended_seconds: i.suspended_seconds,
                vcpu_seconds: i.vcpu_seconds,
                memory_gib_seconds: i.memory_gib_seconds,
            };
            total.active_seconds += t.active_seconds;
            total.suspended_seconds += t.suspended_seconds;
            total.vcpu_seconds += t.vcpu_seconds;
            total.memory_gib_seconds += t.memory_gib_seconds;
            UsageIntervalRow {
                interval_start: i.interval_start,
                interval_end: i.interval_end,
                state: i.state.as_str().into(),
                totals: t,
            }
        })
        .collect();
    Ok(ClaimUsageHistory { claim_uid: uid, namespace, claim_name, intervals: rows, total })
}

/// The namespace of a quota report.
#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Path)]
pub struct QuotaPath {
    /// The namespace.
    pub namespace: String,
}

/// What a namespace's Machines hold against its KaironQuotas' limits (Machines, CPU, memory,
/// warm pool members), counted now. Admins set the quotas (`kubectl apply` a KaironQuota); a
/// write beyond one is refused with 403 `QuotaExceeded`.
#[utoipa::path(get, path = "/api/v1/quota/{namespace}", tag = "Usage", params(QuotaPath),
    responses((status = 200, description = "Use against limits", body = QuotaReport),
              (status = 403, description = "The caller may not read that namespace", body = ErrorBody)))]
async fn quota(c: Caller, Path(p): Path<QuotaPath>) -> Result<Json<QuotaReport>> {
    Ok(Json(c.machines.quota(&c.id, &p.namespace).await?))
}

#[derive(Deserialize, IntoParams, Default)]
#[into_params(parameter_in = Query)]
#[serde(rename_all = "camelCase")]
pub struct MetricsQuery {
    /// How long to measure CPU over, in milliseconds (100 to 10000; default 500): the answer
    /// comes after it.
    #[param(minimum = 100, maximum = 10000)]
    pub window_millis: Option<u64>,
}

/// What a Machine uses now: CPU over a short window (percent of one core), memory against its
/// limit, its disk and network, its processes. Sampled on its node; reading them neither wakes
/// the Machine nor counts as activity. A paused Machine shows its memory and no CPU.
#[utoipa::path(get, path = "/api/v1/machines/{namespace}/{name}/metrics", tag = "Usage", params(ObjectPath, MetricsQuery),
    responses((status = 200, description = "Its use now", body = MachineMetrics),
              (status = 400, description = "windowMillis out of range", body = ErrorBody),
              (status = 403, description = "The caller may not read that namespace", body = ErrorBody),
              (status = 404, description = "No such Machine", body = ErrorBody),
              (status = 409, description = "Not on a node, or no instance running yet", body = ErrorBody)))]
async fn machine_metrics(
    c: Caller,
    Path(p): Path<ObjectPath>,
    Query(q): Query<MetricsQuery>,
) -> Result<Json<MachineMetrics>> {
    Ok(Json(c.machines.metrics(&c.id, &p.namespace, &p.name, q.window_millis).await?))
}

pub fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(usage_report))
        .routes(routes!(usage_claim))
        .routes(routes!(quota))
        .routes(routes!(machine_metrics))
}
