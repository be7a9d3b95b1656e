//! Usage history against a real PostgreSQL (DATABASE_URL; each test gets a fresh database):
//! an interval counts once however often it is recorded, and the billing totals add up.

use std::time::Instant;

use chrono::{DateTime, NaiveDate, Utc};
use kairon_db::usage::{self, UsageInterval, UsageState, UsageTotals};
use sqlx::PgPool;
use uuid::Uuid;

fn t(s: &str) -> DateTime<Utc> {
    DateTime::parse_from_rfc3339(s).unwrap().with_timezone(&Utc)
}

fn day(s: &str) -> NaiveDate {
    NaiveDate::parse_from_str(s, "%Y-%m-%d").unwrap()
}

fn active(uid: Uuid, ns: &str, name: &str, start: &str, secs: i64) -> UsageInterval {
    let start = t(start);
    UsageInterval {
        claim_uid: uid,
        interval_start: start,
        interval_end: start + chrono::Duration::seconds(secs),
        namespace: ns.into(),
        claim_name: name.into(),
        state: UsageState::Active,
        active_seconds: secs,
        suspended_seconds: 0,
        vcpu_seconds: secs as f64 * 2.0,
        memory_gib_seconds: secs as f64 * 0.5,
    }
}

fn suspended(uid: Uuid, ns: &str, name: &str, start: &str, secs: i64) -> UsageInterval {
    UsageInterval {
        state: UsageState::Suspended,
        active_seconds: 0,
        suspended_seconds: secs,
        vcpu_seconds: 0.0,
        memory_gib_seconds: 0.0,
        ..active(uid, ns, name, start, secs)
    }
}

#[sqlx::test(migrations = "./migrations")]
async fn the_same_interval_recorded_twice_counts_once(pool: PgPool) {
    let uid = Uuid::new_v4();
    let i = active(uid, "agents", "job-1", "2026-03-01T10:00:00Z", 30);
    assert!(usage::record(&pool, &i).await.unwrap());
    assert!(!usage::record(&pool, &i).await.unwrap(), "a retry inserts nothing");
    // Even a retry that computed different numbers for the same start is ignored.
    let mut other = i.clone();
    other.active_seconds = 31;
    assert!(!usage::record(&pool, &other).await.unwrap());

    let h = usage::claim_history_totals(&pool, uid).await.unwrap().unwrap();
    assert_eq!(
        h.totals,
        UsageTotals { active_seconds: 30, suspended_seconds: 0, vcpu_seconds: 60.0, memory_gib_seconds: 15.0 }
    );
    assert_eq!(h.accrued_until, t("2026-03-01T10:00:30Z"));
    let d = usage::namespace_total(&pool, "agents", day("2026-03-01"), day("2026-03-02")).await.unwrap();
    assert_eq!(d.active_seconds, 30, "the daily rollup counted it once too");
    assert_eq!(usage::claim_history(&pool, uid).await.unwrap(), vec![i]);
    assert!(usage::claim_history_totals(&pool, Uuid::new_v4()).await.unwrap().is_none());
}

#[sqlx::test(migrations = "./migrations")]
async fn totals_per_namespace_claim_and_day(pool: PgPool) {
    let (a, b, c) = (Uuid::new_v4(), Uuid::new_v4(), Uuid::new_v4());
    for i in [
        active(a, "agents", "job-a", "2026-03-01T23:59:30Z", 30),
        active(a, "agents", "job-a", "2026-03-02T00:00:00Z", 30),
        suspended(a, "agents", "job-a", "2026-03-02T00:00:30Z", 30),
        active(b, "agents", "job-b", "2026-03-02T12:00:00Z", 10),
        active(c, "ci", "job-c", "2026-03-02T12:00:00Z", 20),
        // Outside the range asked for below.
        active(c, "ci", "job-c", "2026-04-01T00:00:00Z", 1000),
    ] {
        assert!(usage::record(&pool, &i).await.unwrap());
    }
    let (from, to) = (day("2026-03-01"), day("2026-04-01"));

    let agents = usage::namespace_total(&pool, "agents", from, to).await.unwrap();
    assert_eq!(
        agents,
        UsageTotals { active_seconds: 70, suspended_seconds: 30, vcpu_seconds: 140.0, memory_gib_seconds: 35.0 }
    );
    let all = usage::namespace_totals(&pool, None, from, to).await.unwrap();
    assert_eq!(
        all.iter().map(|(ns, t)| (ns.as_str(), t.active_seconds)).collect::<Vec<_>>(),
        [("agents", 70), ("ci", 20)]
    );
    let one = usage::namespace_totals(&pool, Some("ci"), from, to).await.unwrap();
    assert_eq!(one.iter().map(|(ns, t)| (ns.as_str(), t.active_seconds)).collect::<Vec<_>>(), [("ci", 20)]);
    assert!(usage::namespace_totals(&pool, Some("idle"), from, to).await.unwrap().is_empty(), "no usage, no row");

    let claims = usage::claim_totals(&pool, Some("agents"), from, to).await.unwrap();
    let got: Vec<_> =
        claims.iter().map(|c| (c.claim_name.as_str(), c.totals.active_seconds, c.totals.suspended_seconds)).collect();
    assert_eq!(got, [("job-a", 60, 30), ("job-b", 10, 0)]);
    assert_eq!(usage::claim_totals(&pool, None, from, to).await.unwrap().len(), 3);

    let days = usage::daily_totals(&pool, Some("agents"), from, to).await.unwrap();
    let got: Vec<_> = days.iter().map(|d| (d.day, d.totals.active_seconds, d.totals.suspended_seconds)).collect();
    assert_eq!(got, [(day("2026-03-01"), 30, 0), (day("2026-03-02"), 40, 30)]);
    let days = usage::daily_totals(&pool, None, day("2026-03-02"), day("2026-03-03")).await.unwrap();
    assert_eq!(days.len(), 2, "agents and ci on 2026-03-02");

    // The history of one claim sums to the same totals as its rollup.
    let h = usage::claim_history(&pool, a).await.unwrap();
    assert_eq!(h.len(), 3);
    assert_eq!(h.iter().map(|i| i.active_seconds).sum::<i64>(), 60);
    let sum = usage::claim_history_totals(&pool, a).await.unwrap().unwrap();
    assert_eq!((sum.totals.active_seconds, sum.totals.suspended_seconds), (60, 30));
    assert_eq!(sum.accrued_until, t("2026-03-02T00:01:00Z"));
}

/// A month of 10,000 claims in one namespace (300,000 rollup rows, plus 90,000 elsewhere):
/// the per-namespace monthly total reads the rollup, well under a second.
#[sqlx::test(migrations = "./migrations")]
async fn a_month_of_ten_thousand_claims_totals_in_well_under_a_second(pool: PgPool) {
    sqlx::query(
        "INSERT INTO claim_usage_daily (namespace, day, claim_uid, claim_name, active_seconds, suspended_seconds, \
             vcpu_seconds, memory_gib_seconds) \
         SELECT CASE WHEN c <= 10000 THEN 'agents' ELSE 'other-' || (c % 30) END, \
                DATE '2026-03-01' + d, gen_random_uuid(), 'claim-' || c, 3600, 600, 7200.0, 1800.0 \
         FROM generate_series(1, 13000) AS c, generate_series(0, 29) AS d",
    )
    .execute(&pool)
    .await
    .unwrap();
    // The namespaces' rollup of those rows, as `record` keeps it (and the migration fills it).
    sqlx::query(
        "INSERT INTO namespace_usage_daily SELECT namespace, day, SUM(active_seconds), SUM(suspended_seconds), \
             SUM(vcpu_seconds), SUM(memory_gib_seconds) FROM claim_usage_daily GROUP BY namespace, day",
    )
    .execute(&pool)
    .await
    .unwrap();
    sqlx::query("ANALYZE claim_usage_daily, namespace_usage_daily").execute(&pool).await.unwrap();

    let (from, to) = (day("2026-03-01"), day("2026-04-01"));
    let started = Instant::now();
    let total = usage::namespace_total(&pool, "agents", from, to).await.unwrap();
    let took = started.elapsed();
    println!("per-namespace monthly total over 10,000 claims x 30 days: {took:?}");
    assert_eq!(total.active_seconds, 10_000 * 30 * 3600);
    assert_eq!(total.suspended_seconds, 10_000 * 30 * 600);
    assert_eq!(total.vcpu_seconds, 10_000.0 * 30.0 * 7200.0);
    assert!(took.as_secs_f64() < 1.0, "took {took:?}");

    let started = Instant::now();
    let all = usage::namespace_totals(&pool, None, from, to).await.unwrap();
    println!("all-namespace monthly totals over 13,000 claims x 30 days: {:?}", started.elapsed());
    assert_eq!(all.len(), 31);
}

#[sqlx::test(migrations = "./migrations")]
async fn a_deleted_claim_is_found_by_its_namespace_and_name_the_newest_first(pool: PgPool) {
    let (old, new, elsewhere) = (Uuid::new_v4(), Uuid::new_v4(), Uuid::new_v4());
    usage::record(&pool, &active(old, "agents", "job-1", "2026-03-01T10:00:00Z", 30)).await.unwrap();
    usage::record(&pool, &suspended(old, "agents", "job-1", "2026-03-01T10:00:30Z", 30)).await.unwrap();
    // The name used again later, and the same name in another namespace.
    usage::record(&pool, &active(new, "agents", "job-1", "2026-03-02T09:00:00Z", 10)).await.unwrap();
    usage::record(&pool, &active(elsewhere, "others", "job-1", "2026-03-05T09:00:00Z", 10)).await.unwrap();
    assert_eq!(usage::latest_claim_uid(&pool, "agents", "job-1").await.unwrap(), Some(new));
    assert_eq!(usage::latest_claim_uid(&pool, "others", "job-1").await.unwrap(), Some(elsewhere));
    assert_eq!(usage::latest_claim_uid(&pool, "agents", "job-2").await.unwrap(), None);
}
