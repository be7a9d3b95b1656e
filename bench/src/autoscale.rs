//! The `autoscale` scenario: one arrival trace of claims (a compressed day: night, a morning
//! ramp, the day with a busier spell, an evening ramp, night; Poisson arrivals, each claim held a
//! while and released) replayed against `kairon up` with a
//! Paused pool of runc sandboxes, once per fixed size and once autoscaled, printing for each the
//! hit rate (claims served warm), claim → Bound p50/p99 (the claims' `status.waitSeconds`) and
//! the member-seconds held (unclaimed members, booting or warm, integrated over the run). The
//! autoscaled pool should reach the target with fewer member-seconds than the smallest fixed size
//! that does; when it does not, that is an anomaly.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use k8s_openapi::api::events::v1::Event;
use kube::api::{Api, DeleteParams, ListParams, PostParams};
use serde_json::json;

use kairon_e2e::Kairon;
use kairon_model::{LaunchType, Machine, MachineClaim, MachinePool};

use crate::{Cli, Report, percentile};

const S: &str = "autoscale";
const NS: &str = "bench-autoscale";
const TARGET: f64 = 0.95;
/// How long each claim is held before it is released.
const HOLD: Duration = Duration::from_secs(10);

/// Claims per minute over the trace, by the share of it elapsed (a compressed day): night, a
/// morning ramp, the day with a busier spell, an evening ramp, night. What a pool's size should
/// follow; a fixed pool is sized for the busiest spell all day. (A sharp 10x burst of a few
/// seconds is no test of it: no pool that reacts serves the burst's first refill period warm,
/// however it estimates the rate; only stock held all along does.)
fn rate_per_minute(at: f64) -> f64 {
    let ramp = |from: f64, to: f64, a: f64, b: f64| from + (to - from) * ((at - a) / (b - a));
    match at {
        a if a < 0.15 => 2.0,
        a if a < 0.3 => ramp(2.0, 30.0, 0.15, 0.3),
        a if a < 0.45 => 30.0,
        a if a < 0.55 => 45.0,
        a if a < 0.7 => 30.0,
        a if a < 0.85 => ramp(30.0, 2.0, 0.7, 0.85),
        _ => 2.0,
    }
}

/// Arrival offsets (ms) over `seconds`: a Poisson process at [`rate_per_minute`], from a fixed
/// seed so every run of a report replays the same trace.
pub fn trace(seconds: u64) -> Vec<u64> {
    let mut state: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut uniform = move || {
        // xorshift64*: enough for a benchmark's arrivals.
        state ^= state >> 12;
        state ^= state << 25;
        state ^= state >> 27;
        (state.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 11) as f64 / (1u64 << 53) as f64
    };
    let total = seconds as f64 * 1000.0;
    // Thinning: candidates at the peak rate, each kept with its time's share of it.
    let peak = PEAK_PER_MINUTE / 60_000.0;
    let (mut t, mut out) = (0.0, Vec::new());
    loop {
        t += -(1.0 - uniform()).ln() / peak;
        if t >= total {
            return out;
        }
        if uniform() < rate_per_minute(t / total) / PEAK_PER_MINUTE {
            out.push(t as u64);
        }
    }
}

/// The highest rate of [`rate_per_minute`].
const PEAK_PER_MINUTE: f64 = 45.0;

struct Run {
    label: String,
    hit_rate: f64,
    member_seconds: f64,
}

pub async fn run(cli: &Cli, report: &mut Report) -> Result<()> {
    let k = tokio::task::spawn_blocking(|| {
        Kairon::start_with(&["--node-tick", "1s", "--heartbeat-interval", "1s", "--activity-write-interval", "1s"])
    })
    .await??;
    let client = k.client().await?;
    let arrivals = trace(cli.autoscale_seconds);
    report.add(S, "claims in the trace", arrivals.len() as f64, "count");
    let mut runs = Vec::new();
    let result = async {
        for size in cli.autoscale_fixed.iter().copied() {
            runs.push(replay(&client, report, &arrivals, &format!("fixed-{size}"), size, None).await?);
        }
        let autoscale = json!({"minReplicas": 1, "maxReplicas": cli.autoscale_max, "targetHitRate": TARGET,
                               "windowSeconds": 120, "scaleDownDelaySeconds": 30});
        runs.push(replay(&client, report, &arrivals, "autoscaled", 1, Some(autoscale)).await?);
        anyhow::Ok(())
    }
    .await;
    tokio::task::spawn_blocking(move || drop(k)).await?;
    result?;
    let smallest = runs
        .iter()
        .filter(|r| r.label.starts_with("fixed") && r.hit_rate >= TARGET)
        .min_by(|a, b| a.member_seconds.total_cmp(&b.member_seconds));
    let auto = runs.last().context("no autoscaled run")?;
    match smallest {
        None => report.info.insert(
            "autoscale verdict".into(),
            json!(format!("no fixed size reached {TARGET}; autoscaled: {:.3}", auto.hit_rate)),
        ),
        Some(f) if auto.hit_rate >= TARGET && auto.member_seconds < f.member_seconds => report.info.insert(
            "autoscale verdict".into(),
            json!(format!(
                "autoscaled reached {:.3} with {:.0} member-s; the cheapest fixed pool reaching the target, {}, held {:.0}",
                auto.hit_rate, auto.member_seconds, f.label, f.member_seconds
            )),
        ),
        Some(f) => {
            report.anomaly(format!(
                "autoscaled: hit rate {:.3} with {:.0} member-s; {} reached {:.3} with {:.0}",
                auto.hit_rate, auto.member_seconds, f.label, f.hit_rate, f.member_seconds
            ));
            None
        }
    };
    Ok(())
}

/// Replays `arrivals` against a new pool `name` (`replicas`, or autoscaled), then deletes it.
async fn replay(
    client: &kube::Client,
    report: &mut Report,
    arrivals: &[u64],
    name: &str,
    replicas: u32,
    autoscale: Option<serde_json::Value>,
) -> Result<Run> {
    let pools: Api<MachinePool> = Api::namespaced(client.clone(), NS);
    let claims: Api<MachineClaim> = Api::namespaced(client.clone(), NS);
    let machines: Api<Machine> = Api::namespaced(client.clone(), NS);
    let mut spec = json!({"replicas": replicas, "warmPowerState": "Paused", "warmupSeconds": 1,
                          "template": {"metadata": {"labels": {"kairon.zyvor.dev/sandbox": "true"}},
                                       "spec": {"sandbox": {"templateName": "busybox"}}}});
    if let Some(a) = autoscale {
        spec["autoscale"] = a;
    }
    let pool: MachinePool = serde_json::from_value(json!({
        "apiVersion": "kairon.zyvor.dev/v1", "kind": "MachinePool", "metadata": {"name": name}, "spec": spec,
    }))?;
    pools.create(&PostParams::default(), &pool).await?;
    crate::claims::wait_full_with(&pools, name, replicas as i32, Duration::from_secs(300), |_| {}).await?;
    eprintln!("  {name}: {} claims over {:.0} s", arrivals.len(), arrivals.last().copied().unwrap_or(0) as f64 / 1e3);

    // Member-seconds: the pool's unclaimed members (booting or warm), sampled four times a second.
    let done = Arc::new(AtomicBool::new(false));
    let sampler = {
        let (pools, name, done) = (pools.clone(), name.to_string(), done.clone());
        tokio::spawn(async move {
            let (mut held, mut last) = (0.0, Instant::now());
            while !done.load(Ordering::Relaxed) {
                tokio::time::sleep(Duration::from_millis(250)).await;
                let unclaimed = pools.get(&name).await.ok().and_then(|p| p.status).map_or(0, |s| s.replicas);
                held += f64::from(unclaimed) * last.elapsed().as_secs_f64();
                last = Instant::now();
            }
            held
        })
    };
    let start = Instant::now();
    let mut tasks = tokio::task::JoinSet::new();
    for (i, at) in arrivals.iter().enumerate() {
        tokio::time::sleep_until((start + Duration::from_millis(*at)).into()).await;
        let claims = claims.clone();
        let claim: MachineClaim = serde_json::from_value(json!({
            "apiVersion": "kairon.zyvor.dev/v1", "kind": "MachineClaim",
            "metadata": {"name": format!("{name}-{i}")}, "spec": {"poolName": name}
        }))?;
        claims.create(&PostParams::default(), &claim).await?;
        let cname = format!("{name}-{i}");
        tasks.spawn(async move {
            tokio::time::sleep(HOLD).await;
            // Released once bound (a claim still waiting is held until it binds), read first
            // for how it was served.
            let deadline = Instant::now() + Duration::from_secs(300);
            let mut status = None;
            while Instant::now() < deadline {
                status = claims.get(&cname).await.ok().and_then(|c| c.status);
                if status.as_ref().is_some_and(|s| s.launch_type.is_some()) {
                    break;
                }
                tokio::time::sleep(Duration::from_millis(500)).await;
            }
            let _ = claims.delete(&cname, &DeleteParams::default()).await;
            status
        });
    }
    let mut waits = Vec::new();
    let mut warm = 0usize;
    while let Some(status) = tasks.join_next().await {
        let Some(s) = status? else { continue };
        if s.launch_type == Some(LaunchType::Warm) {
            warm += 1;
        }
        if let Some(w) = s.wait_seconds {
            waits.push(w * 1000.0);
        }
    }
    done.store(true, Ordering::Relaxed);
    let member_seconds = sampler.await?;
    let hit_rate = warm as f64 / arrivals.len().max(1) as f64;
    waits.sort_by(f64::total_cmp);
    let label = name.to_string();
    let metric = |m: &str| format!("{label}: {m}");
    report.add(S, metric("hit rate"), hit_rate, "ratio");
    if !waits.is_empty() {
        report.add(S, metric("claim to Bound p50"), percentile(&waits, 50.0), "ms");
        report.add(S, metric("claim to Bound p99"), percentile(&waits, 99.0), "ms");
    }
    report.add(S, metric("member-seconds held"), member_seconds, "s");
    if waits.len() != arrivals.len() {
        report.anomaly(format!("{label}: {} of {} claims bound", waits.len(), arrivals.len()));
    }
    eprintln!("  {label}: hit rate {hit_rate:.3}, {member_seconds:.0} member-s");
    // How the autoscaled pool got there: its resizes, and the last one's reason (the rate and
    // the refill it measured).
    let events: Api<Event> = Api::namespaced(client.clone(), NS);
    let mut scaled: Vec<Event> = events
        .list(&ListParams::default())
        .await?
        .items
        .into_iter()
        .filter(|e| e.reason.as_deref() == Some("Scaled"))
        .filter(|e| e.regarding.as_ref().and_then(|r| r.name.as_deref()) == Some(name))
        .collect();
    if !scaled.is_empty() {
        scaled.sort_by_key(|e| e.event_time.as_ref().map(|t| t.0));
        report.add(
            S,
            metric("resizes"),
            scaled.iter().map(|e| f64::from(e.series.as_ref().map_or(1, |s| s.count))).sum(),
            "count",
        );
        let last = scaled.last().and_then(|e| e.note.clone()).unwrap_or_default();
        report.info.insert(format!("{label}: last resize"), json!(last));
    }

    pools.delete(name, &DeleteParams::default()).await?;
    let deadline = Instant::now() + Duration::from_secs(120);
    while Instant::now() < deadline && !machines.list(&ListParams::default()).await?.items.is_empty() {
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
    Ok(Run { label, hit_rate, member_seconds })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_trace_has_its_shape_and_replays_the_same() {
        let t = trace(600);
        assert_eq!(t, trace(600));
        let per_minute = |from: f64, to: f64| {
            t.iter().filter(|a| (from * 600_000.0..to * 600_000.0).contains(&(**a as f64))).count() as f64
                / ((to - from) * 10.0)
        };
        assert!((0.5..5.0).contains(&per_minute(0.0, 0.15)), "night: {}", per_minute(0.0, 0.15));
        assert!((30.0..60.0).contains(&per_minute(0.45, 0.55)), "the busy spell: {}", per_minute(0.45, 0.55));
        assert!(t.windows(2).all(|w| w[0] <= w[1]));
    }
}
