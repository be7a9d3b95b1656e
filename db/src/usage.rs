//! Claim usage history and the billing queries over it.
//!
//! Every accrual interval of a bound MachineClaim is one row of `claim_usage_intervals`,
//! keyed by `(claim_uid, interval_start)`: inserting the same interval twice counts it once.
//! The same transaction adds the interval to two daily rollups by the UTC day of its start:
//! `claim_usage_daily` (namespace, day, claim) for the per-claim reports and
//! `namespace_usage_daily` (namespace, day) for the per-namespace and per-day ones, so a month of
//! many claims stays cheap.

use chrono::{DateTime, NaiveDate, Utc};
use sqlx::PgPool;
use uuid::Uuid;

/// How the Machine was billed during an interval.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UsageState {
    /// Running.
    Active,
    /// Stopped, Paused, Hibernated or Halted.
    Suspended,
    /// Any other phase: the clock advances, nothing accrues.
    None,
}

impl UsageState {
    pub fn as_str(self) -> &'static str {
        match self {
            UsageState::Active => "active",
            UsageState::Suspended => "suspended",
            UsageState::None => "none",
        }
    }

    pub fn parse(s: &str) -> Option<UsageState> {
        match s {
            "active" => Some(UsageState::Active),
            "suspended" => Some(UsageState::Suspended),
            "none" => Some(UsageState::None),
            _ => None,
        }
    }
}

/// One accrual interval of one claim.
#[derive(Clone, Debug, PartialEq)]
pub struct UsageInterval {
    pub claim_uid: Uuid,
    pub interval_start: DateTime<Utc>,
    pub interval_end: DateTime<Utc>,
    pub namespace: String,
    pub claim_name: String,
    pub state: UsageState,
    pub active_seconds: i64,
    pub suspended_seconds: i64,
    pub vcpu_seconds: f64,
    pub memory_gib_seconds: f64,
}

/// Summed usage.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct UsageTotals {
    pub active_seconds: i64,
    pub suspended_seconds: i64,
    pub vcpu_seconds: f64,
    pub memory_gib_seconds: f64,
}

/// A claim's history summed: what `status.usage` must show.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct ClaimHistory {
    pub totals: UsageTotals,
    /// The end of the last recorded interval: usage is accrued up to here.
    pub accrued_until: DateTime<Utc>,
}

/// One claim's totals over a range.
#[derive(Clone, Debug, PartialEq)]
pub struct ClaimTotals {
    pub namespace: String,
    pub claim_uid: Uuid,
    pub claim_name: String,
    pub totals: UsageTotals,
}

/// One day's totals in one namespace.
#[derive(Clone, Debug, PartialEq)]
pub struct DayTotals {
    pub day: NaiveDate,
    pub namespace: String,
    pub totals: UsageTotals,
}

type TotalsRow = (i64, i64, f64, f64);

fn totals((active_seconds, suspended_seconds, vcpu_seconds, memory_gib_seconds): TotalsRow) -> UsageTotals {
    UsageTotals { active_seconds, suspended_seconds, vcpu_seconds, memory_gib_seconds }
}

/// The four summed columns, as one SQL select list (a macro so queries stay `&'static str`).
macro_rules! sums {
    () => {
        "COALESCE(SUM(active_seconds), 0)::bigint, COALESCE(SUM(suspended_seconds), 0)::bigint, \
         COALESCE(SUM(vcpu_seconds), 0)::float8, COALESCE(SUM(memory_gib_seconds), 0)::float8"
    };
}

/// Records an interval and adds it to the daily rollups (the claim's, the namespace's), in one
/// transaction. Returns false
/// (and changes nothing) when this claim already has an interval starting at the same instant.
pub async fn record(pool: &PgPool, i: &UsageInterval) -> Result<bool, sqlx::Error> {
    let mut tx = crate::begin(pool, None).await?;
    let inserted = sqlx::query(
        "INSERT INTO claim_usage_intervals (claim_uid, interval_start, interval_end, namespace, claim_name, state, \
             active_seconds, suspended_seconds, vcpu_seconds, memory_gib_seconds) \
         VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10) \
         ON CONFLICT (claim_uid, interval_start) DO NOTHING",
    )
    .bind(i.claim_uid)
    .bind(i.interval_start)
    .bind(i.interval_end)
    .bind(&i.namespace)
    .bind(&i.claim_name)
    .bind(i.state.as_str())
    .bind(i.active_seconds)
    .bind(i.suspended_seconds)
    .bind(i.vcpu_seconds)
    .bind(i.memory_gib_seconds)
    .execute(&mut *tx)
    .await?
    .rows_affected()
        == 1;
    if !inserted {
        tx.rollback().await?;
        return Ok(false);
    }
    sqlx::query(
        "INSERT INTO claim_usage_daily (namespace, day, claim_uid, claim_name, \
             active_seconds, suspended_seconds, vcpu_seconds, memory_gib_seconds) \
         VALUES ($1, ($2 AT TIME ZONE 'UTC')::date, $3, $4, $5, $6, $7, $8) \
         ON CONFLICT (namespace, day, claim_uid) DO UPDATE SET \
             active_seconds = claim_usage_daily.active_seconds + EXCLUDED.active_seconds, \
             suspended_seconds = claim_usage_daily.suspended_seconds + EXCLUDED.suspended_seconds, \
             vcpu_seconds = claim_usage_daily.vcpu_seconds + EXCLUDED.vcpu_seconds, \
             memory_gib_seconds = claim_usage_daily.memory_gib_seconds + EXCLUDED.memory_gib_seconds",
    )
    .bind(&i.namespace)
    .bind(i.interval_start)
    .bind(i.claim_uid)
    .bind(&i.claim_name)
    .bind(i.active_seconds)
    .bind(i.suspended_seconds)
    .bind(i.vcpu_seconds)
    .bind(i.memory_gib_seconds)
    .execute(&mut *tx)
    .await?;
    // Last: the namespace's row of the day is the one racing recorders share, held until commit.
    sqlx::query(
        "INSERT INTO namespace_usage_daily (namespace, day, active_seconds, suspended_seconds, vcpu_seconds, \
             memory_gib_seconds) \
         VALUES ($1, ($2 AT TIME ZONE 'UTC')::date, $3, $4, $5, $6) \
         ON CONFLICT (namespace, day) DO UPDATE SET \
             active_seconds = namespace_usage_daily.active_seconds + EXCLUDED.active_seconds, \
             suspended_seconds = namespace_usage_daily.suspended_seconds + EXCLUDED.suspended_seconds, \
             vcpu_seconds = namespace_usage_daily.vcpu_seconds + EXCLUDED.vcpu_seconds, \
             memory_gib_seconds = namespace_usage_daily.memory_gib_seconds + EXCLUDED.memory_gib_seconds",
    )
    .bind(&i.namespace)
    .bind(i.interval_start)
    .bind(i.active_seconds)
    .bind(i.suspended_seconds)
    .bind(i.vcpu_seconds)
    .bind(i.memory_gib_seconds)
    .execute(&mut *tx)
    .await?;
    tx.commit().await?;
    Ok(true)
}

/// A claim's whole history summed, or None when nothing is recorded for it.
pub async fn claim_history_totals(pool: &PgPool, claim_uid: Uuid) -> Result<Option<ClaimHistory>, sqlx::Error> {
    let row: (i64, i64, f64, f64, Option<DateTime<Utc>>) = sqlx::query_as(concat!(
        "SELECT ",
        sums!(),
        ", MAX(interval_end) FROM claim_usage_intervals WHERE claim_uid = $1"
    ))
    .bind(claim_uid)
    .fetch_one(pool)
    .await?;
    let (a, s, v, m, until) = row;
    Ok(until.map(|accrued_until| ClaimHistory { totals: totals((a, s, v, m)), accrued_until }))
}

/// The uid of the newest claim named `claim_name` in `namespace` that has usage recorded (a
/// claim deleted since; a name used again names the newest).
pub async fn latest_claim_uid(pool: &PgPool, namespace: &str, claim_name: &str) -> Result<Option<Uuid>, sqlx::Error> {
    let row: Option<(Uuid,)> = sqlx::query_as(
        "SELECT claim_uid FROM claim_usage_intervals WHERE namespace = $1 AND claim_name = $2 \
         ORDER BY interval_end DESC LIMIT 1",
    )
    .bind(namespace)
    .bind(claim_name)
    .fetch_optional(pool)
    .await?;
    Ok(row.map(|(uid,)| uid))
}

/// One claim's intervals, oldest first.
pub async fn claim_history(pool: &PgPool, claim_uid: Uuid) -> Result<Vec<UsageInterval>, sqlx::Error> {
    #[allow(clippy::type_complexity)]
    let rows: Vec<(Uuid, DateTime<Utc>, DateTime<Utc>, String, String, String, i64, i64, f64, f64)> = sqlx::query_as(
        "SELECT claim_uid, interval_start, interval_end, namespace, claim_name, state, \
             active_seconds, suspended_seconds, vcpu_seconds, memory_gib_seconds \
         FROM claim_usage_intervals WHERE claim_uid = $1 ORDER BY interval_start",
    )
    .bind(claim_uid)
    .fetch_all(pool)
    .await?;
    Ok(rows
        .into_iter()
        .map(|(claim_uid, interval_start, interval_end, namespace, claim_name, state, a, s, v, m)| UsageInterval {
            claim_uid,
            interval_start,
            interval_end,
            namespace,
            claim_name,
            state: UsageState::parse(&state).unwrap_or(UsageState::None),
            active_seconds: a,
            suspended_seconds: s,
            vcpu_seconds: v,
            memory_gib_seconds: m,
        })
        .collect())
}

/// One namespace's total over the UTC days `from..to` (end exclusive); zero when it used nothing.
pub async fn namespace_total(
    pool: &PgPool,
    namespace: &str,
    from: NaiveDate,
    to: NaiveDate,
) -> Result<UsageTotals, sqlx::Error> {
    let rows = namespace_totals(pool, Some(namespace), from, to).await?;
    Ok(rows.into_iter().next().map(|(_, t)| t).unwrap_or_default())
}

/// A report over a daily rollup as two statements, for every namespace and for one (`$3`).
/// One namespace gets a statement of its own: a cached generic plan of `$3 IS NULL OR
/// namespace = $3` reads every namespace's rows (8 ms against 2 at 100k claims a month).
macro_rules! scoped {
    ($select:expr, $table:expr, $rest:expr) => {
        (
            concat!($select, " FROM ", $table, " WHERE day >= $1 AND day < $2 ", $rest),
            concat!($select, " FROM ", $table, " WHERE day >= $1 AND day < $2 AND namespace = $3 ", $rest),
        )
    };
}

/// Runs the statement of a [`scoped!`] pair that fits `namespace`.
async fn fetch_scoped<T>(
    pool: &PgPool,
    (all, one): (&'static str, &'static str),
    namespace: Option<&str>,
    from: NaiveDate,
    to: NaiveDate,
) -> Result<Vec<T>, sqlx::Error>
where
    T: for<'r> sqlx::FromRow<'r, sqlx::postgres::PgRow> + Send + Unpin,
{
    let query = sqlx::query_as::<_, T>(if namespace.is_some() { one } else { all }).bind(from).bind(to);
    match namespace {
        Some(ns) => query.bind(ns).fetch_all(pool).await,
        None => query.fetch_all(pool).await,
    }
}

/// Every namespace's total over the UTC days `from..to`, by namespace, or only `namespace`'s
/// (no row when it used nothing).
pub async fn namespace_totals(
    pool: &PgPool,
    namespace: Option<&str>,
    from: NaiveDate,
    to: NaiveDate,
) -> Result<Vec<(String, UsageTotals)>, sqlx::Error> {
    let query = scoped!(
        concat!("SELECT namespace, ", sums!()),
        "namespace_usage_daily",
        "GROUP BY namespace ORDER BY namespace"
    );
    let rows: Vec<(String, i64, i64, f64, f64)> = fetch_scoped(pool, query, namespace, from, to).await?;
    Ok(rows.into_iter().map(|(ns, a, s, v, m)| (ns, totals((a, s, v, m)))).collect())
}

/// Per-claim totals over the UTC days `from..to`, optionally in one namespace.
pub async fn claim_totals(
    pool: &PgPool,
    namespace: Option<&str>,
    from: NaiveDate,
    to: NaiveDate,
) -> Result<Vec<ClaimTotals>, sqlx::Error> {
    let query = scoped!(
        concat!("SELECT namespace, claim_uid, MAX(claim_name), ", sums!()),
        "claim_usage_daily",
        "GROUP BY namespace, claim_uid ORDER BY namespace, MAX(claim_name), claim_uid"
    );
    let rows: Vec<(String, Uuid, String, i64, i64, f64, f64)> = fetch_scoped(pool, query, namespace, from, to).await?;
    Ok(rows
        .into_iter()
        .map(|(namespace, claim_uid, claim_name, a, s, v, m)| ClaimTotals {
            namespace,
            claim_uid,
            claim_name,
            totals: totals((a, s, v, m)),
        })
        .collect())
}

/// Per-day, per-namespace totals over the UTC days `from..to`, optionally in one namespace.
pub async fn daily_totals(
    pool: &PgPool,
    namespace: Option<&str>,
    from: NaiveDate,
    to: NaiveDate,
) -> Result<Vec<DayTotals>, sqlx::Error> {
    let query = scoped!(
        concat!("SELECT day, namespace, ", sums!()),
        "namespace_usage_daily",
        "GROUP BY day, namespace ORDER BY day, namespace"
    );
    let rows: Vec<(NaiveDate, String, i64, i64, f64, f64)> = fetch_scoped(pool, query, namespace, from, to).await?;
    Ok(rows
        .into_iter()
        .map(|(day, namespace, a, s, v, m)| DayTotals { day, namespace, totals: totals((a, s, v, m)) })
        .collect())
}
