//! The `billing` scenario: a month of claim usage (`--billing-claims` claims over 20
//! namespaces, 4 accrual intervals each, recorded through `kairon_db::usage::record` as the
//! controller does) in the database of a real `kairon up`, then the billing reports: a
//! namespace's month from the daily rollup, the same summed from the raw intervals (the naive
//! path), every namespace's month, a namespace's claims and days, and `GET /api/v1/usage` as a
//! client sees it. Every namespace's rollup total must equal its intervals' sum.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use chrono::{DateTime, NaiveDate, TimeZone, Utc};
use sqlx::PgPool;
use uuid::Uuid;

use kairon_db::usage::{self, UsageInterval, UsageState, UsageTotals};
use kairon_e2e::Kairon;

use crate::{Cli, Report, ms};

const S: &str = "billing";
const NAMESPACES: usize = 20;
const INTERVALS_PER_CLAIM: usize = 4;
/// Concurrent recorders seeding the history (the controller records from many reconciles).
const RECORDERS: usize = 16;
/// Samples of each query.
const SAMPLES: usize = 50;
/// The goal of issue 45: a month's per-namespace report over 100k claims.
const GOAL_MS: f64 = 20.0;

fn namespace(i: usize) -> String {
    format!("team-{:02}", i % NAMESPACES)
}

/// The month the history is in: November 2026, 30 UTC days.
fn month() -> (NaiveDate, NaiveDate) {
    (NaiveDate::from_ymd_opt(2026, 11, 1).unwrap(), NaiveDate::from_ymd_opt(2026, 12, 1).unwrap())
}

/// Claim `i`'s intervals: active, suspended, active, none, of a few minutes each, starting
/// anywhere in the month (some cross midnight, as real ones do).
fn intervals(i: usize) -> Vec<UsageInterval> {
    // A fixed spread (Knuth's multiplicative hash) keeps runs comparable without a RNG crate.
    let spread = (i as u64).wrapping_mul(2_654_435_761) % (30 * 86_400 - 4 * 900);
    let mut start: DateTime<Utc> = Utc.with_ymd_and_hms(2026, 11, 1, 0, 0, 0).unwrap() + Duration::from_secs(spread);
    let claim_uid = Uuid::new_v4();
    let states = [UsageState::Active, UsageState::Suspended, UsageState::Active, UsageState::None];
    states
        .into_iter()
        .enumerate()
        .map(|(k, state)| {
            let secs = 60 + ((i * 7 + k * 131) % 840) as i64;
            let end = start + chrono::Duration::seconds(secs);
            let (active, suspended) = match state {
                UsageState::Active => (secs, 0),
                UsageState::Suspended => (0, secs),
                UsageState::None => (0, 0),
            };
            let interval = UsageInterval {
                claim_uid,
                interval_start: start,
                interval_end: end,
                namespace: namespace(i),
                claim_name: format!("claim-{i:06}"),
                state,
                active_seconds: active,
                suspended_seconds: suspended,
                vcpu_seconds: active as f64 * 2.0,
                memory_gib_seconds: (active + suspended) as f64 * 0.5,
            };
            start = end;
            interval
        })
        .collect()
}

pub async fn run(cli: &Cli, report: &mut Report) -> Result<()> {
    let claims = cli.billing_claims;
    eprintln!("billing: starting kairon up (no node) and recording {claims} claims' usage");
    let k = tokio::task::spawn_blocking(|| Kairon::start_with(&["--no-runtime"])).await??;
    let url = k.database_url().context("kairon up runs on the bench's database")?.to_string();
    let store = kairon_db::Store::connect(&url).await.context("connecting to kairon up's database")?;
    let pool = store.pool().clone();

    let t = Instant::now();
    seed(&pool, claims).await?;
    let wall = t.elapsed();
    let rows = (claims * INTERVALS_PER_CLAIM) as f64;
    report.add(S, "claims recorded", claims as f64, "count");
    report.add(S, "intervals recorded", rows, "count");
    report.add(S, "record rate (16 recorders)", rows / wall.as_secs_f64(), "intervals/s");
    for (table, count) in [
        ("claim_usage_daily", "SELECT count(*) FROM claim_usage_daily"),
        ("namespace_usage_daily", "SELECT count(*) FROM namespace_usage_daily"),
    ] {
        let (rows,): (i64,) = sqlx::query_as(count).fetch_one(&pool).await?;
        report.add(S, format!("{table} rows"), rows as f64, "count");
    }
    sqlx::query("ANALYZE claim_usage_intervals, claim_usage_daily, namespace_usage_daily").execute(&pool).await?;

    exact(&pool, report).await?;
    measure_queries(&pool, report).await?;
    measure_rest(&k, claims, report).await?;
    report.add(S, "goal: a namespace's month", GOAL_MS, "ms");
    store.close().await;
    Ok(())
}

async fn seed(pool: &PgPool, claims: usize) -> Result<()> {
    let next = Arc::new(AtomicUsize::new(0));
    let tasks = (0..RECORDERS).map(|_| {
        let (pool, next) = (pool.clone(), next.clone());
        tokio::spawn(async move {
            loop {
                let i = next.fetch_add(1, Ordering::Relaxed);
                if i >= claims {
                    return anyhow::Ok(());
                }
                if i > 0 && i % 10_000 == 0 {
                    eprintln!("billing: {i} of {claims} claims recorded");
                }
                for interval in intervals(i) {
                    if !usage::record(&pool, &interval).await? {
                        bail!("claim {i}'s interval at {} was recorded twice", interval.interval_start);
                    }
                }
            }
        })
    });
    for t in futures::future::join_all(tasks).await {
        t??;
    }
    Ok(())
}

/// The naive path: a namespace's month summed from every raw interval.
async fn from_intervals(pool: &PgPool, ns: &str) -> Result<UsageTotals> {
    let (from, to) = month();
    let midnight = |d: NaiveDate| d.and_hms_opt(0, 0, 0).unwrap().and_utc();
    let (a, s, v, m): (i64, i64, f64, f64) = sqlx::query_as(
        "SELECT COALESCE(SUM(active_seconds), 0)::bigint, COALESCE(SUM(suspended_seconds), 0)::bigint, \
         COALESCE(SUM(vcpu_seconds), 0)::float8, COALESCE(SUM(memory_gib_seconds), 0)::float8 \
         FROM claim_usage_intervals WHERE namespace = $1 \
         AND interval_start >= $2 AND interval_start < $3",
    )
    .bind(ns)
    .bind(midnight(from))
    .bind(midnight(to))
    .fetch_one(pool)
    .await?;
    Ok(UsageTotals { active_seconds: a, suspended_seconds: s, vcpu_seconds: v, memory_gib_seconds: m })
}

/// The rollups are exact: every namespace's month from each (the namespace's days, its claims'
/// days) equals the sum of its intervals.
async fn exact(pool: &PgPool, report: &mut Report) -> Result<()> {
    let (from, to) = month();
    let close = |a: f64, b: f64| (a - b).abs() <= 1e-9 * a.abs().max(b.abs()).max(1.0);
    let same = |a: &UsageTotals, b: &UsageTotals| {
        a.active_seconds == b.active_seconds
            && a.suspended_seconds == b.suspended_seconds
            && close(a.vcpu_seconds, b.vcpu_seconds)
            && close(a.memory_gib_seconds, b.memory_gib_seconds)
    };
    for n in 0..NAMESPACES {
        let ns = namespace(n);
        let summed = from_intervals(pool, &ns).await?;
        let by_namespace = usage::namespace_total(pool, &ns, from, to).await?;
        let by_claim =
            usage::claim_totals(pool, Some(&ns), from, to).await?.iter().fold(UsageTotals::default(), |t, c| {
                UsageTotals {
                    active_seconds: t.active_seconds + c.totals.active_seconds,
                    suspended_seconds: t.suspended_seconds + c.totals.suspended_seconds,
                    vcpu_seconds: t.vcpu_seconds + c.totals.vcpu_seconds,
                    memory_gib_seconds: t.memory_gib_seconds + c.totals.memory_gib_seconds,
                }
            });
        for (rollup, rolled) in [("namespace", by_namespace), ("claim", by_claim)] {
            if !same(&rolled, &summed) {
                report.anomaly(format!("{ns}: the {rollup} rollup says {rolled:?}, its intervals sum to {summed:?}"));
            }
        }
    }
    Ok(())
}

async fn sample<F, Fut>(report: &mut Report, what: &str, mut query: F) -> Result<()>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<()>>,
{
    query().await?; // warm: the first run plans the statement and reads the pages in
    let mut samples = Vec::with_capacity(SAMPLES);
    for _ in 0..SAMPLES {
        let t = Instant::now();
        query().await?;
        samples.push(ms(t.elapsed()));
    }
    report.latencies(S, what, &mut samples);
    Ok(())
}

async fn measure_queries(pool: &PgPool, report: &mut Report) -> Result<()> {
    let (from, to) = month();
    let ns = namespace(3);
    sample(report, "a namespace's month (daily rollup)", || async {
        usage::namespace_totals(pool, Some(&ns), from, to).await?;
        Ok(())
    })
    .await?;
    sample(report, "a namespace's month (naive: raw intervals)", || async {
        from_intervals(pool, &ns).await?;
        Ok(())
    })
    .await?;
    sample(report, "every namespace's month", || async {
        usage::namespace_totals(pool, None, from, to).await?;
        Ok(())
    })
    .await?;
    sample(report, "a namespace's month by claim", || async {
        usage::claim_totals(pool, Some(&ns), from, to).await?;
        Ok(())
    })
    .await?;
    sample(report, "a namespace's month by day", || async {
        usage::daily_totals(pool, Some(&ns), from, to).await?;
        Ok(())
    })
    .await
}

/// The same reports over HTTPS, as a client sees them (`GET /api/v1/usage`).
async fn measure_rest(k: &Kairon, claims: usize, report: &mut Report) -> Result<()> {
    let rest = k.rest()?;
    let (from, to) = month();
    let ns = namespace(3);
    let per_ns = claims.div_ceil(NAMESPACES);
    for (what, query, rows) in [
        ("REST: a namespace's month", format!("namespace={ns}"), Some(1)),
        ("REST: every namespace's month", String::new(), Some(NAMESPACES.min(claims))),
        ("REST: a namespace's month by claim", format!("namespace={ns}&groupBy=claim"), Some(per_ns)),
        ("REST: a namespace's month by day", format!("namespace={ns}&groupBy=day"), None),
    ] {
        let path = format!("/api/v1/usage?from={from}&to={to}&{query}");
        let first = rest.get(&path).await;
        if first.status != 200 {
            bail!("GET {path}: {} {:?}", first.status, first.body);
        }
        let got = first.body["rows"].as_array().map_or(0, Vec::len);
        if rows.is_some_and(|want| want != got) {
            report.anomaly(format!("GET {path} answered {got} rows, not {rows:?}"));
        }
        let mut samples = Vec::with_capacity(SAMPLES);
        for _ in 0..SAMPLES {
            let t = Instant::now();
            let a = rest.get(&path).await;
            samples.push(ms(t.elapsed()));
            if a.status != 200 {
                report.anomaly(format!("GET {path}: {}", a.status));
            }
        }
        report.latencies(S, what, &mut samples);
    }
    Ok(())
}
