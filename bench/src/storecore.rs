//! The `store-core` scenario: the resource store in-process (kairon-db on its own PostgreSQL
//! database, every write of intent flushed, no HTTP): creates a second with 8 writers, a list
//! of 10,000 Machines (from the watch cache at the latest revision, and as it is), and watch
//! delivery to 100 watchers, from the start of a write to the event in each watcher's hands.

use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use futures::StreamExt;
use serde_json::json;

use kairon_db::{Freshness, ObjectRef, Store};

use crate::{Cli, Report, machine, machine_name, ms};

const S: &str = "store-core";
const G: &str = "kairon.zyvor.dev";
const R: &str = "machines";

pub async fn run(cli: &Cli, report: &mut Report) -> Result<()> {
    let db = format!("kairon_bench_{}", std::process::id());
    let admin = kairon_e2e::database_url();
    kairon_e2e::psql_query(&admin, &format!("CREATE DATABASE {db}"))?;
    let store = Store::connect(&kairon_e2e::with_database(&admin, &db)).await.context("connecting to the store")?;
    let result = measure(cli, &store, report).await;
    store.close().await;
    kairon_e2e::psql_query(&admin, &format!("DROP DATABASE {db} WITH (FORCE)"))?;
    result
}

fn key<'a>(ns: &'a str, name: &'a str) -> ObjectRef<'a> {
    ObjectRef { group: G, resource: R, namespace: ns, name }
}

async fn measure(cli: &Cli, store: &Store, report: &mut Report) -> Result<()> {
    let (n, ns) = (cli.machines, cli.namespace.as_str());

    // 1. Creates from 8 writers.
    const WRITERS: usize = 8;
    eprintln!("store-core: {n} creates from {WRITERS} writers");
    let t = Instant::now();
    let writers = (0..WRITERS).map(|w| {
        let store = store.clone();
        let ns = ns.to_string();
        tokio::spawn(async move {
            let mut latencies = Vec::new();
            for i in (w..n).step_by(WRITERS) {
                let name = machine_name(i);
                let object = serde_json::to_value(machine(&name)?)?;
                let t = Instant::now();
                store.create(key(&ns, &name), object).await?;
                latencies.push(ms(t.elapsed()));
            }
            anyhow::Ok(latencies)
        })
    });
    let mut latencies = Vec::with_capacity(n);
    for w in futures::future::join_all(writers).await {
        latencies.extend(w??);
    }
    let wall = t.elapsed();
    report.add(S, "create rate (8 writers)", n as f64 / wall.as_secs_f64(), "creates/s");
    report.latencies(S, "create latency", &mut latencies);

    // 2. Lists of every Machine.
    for (what, fresh) in [("latest", Freshness::Latest), ("resourceVersion=0", Freshness::Any)] {
        let mut samples = Vec::new();
        for _ in 0..cli.list_reps.max(1) {
            let t = Instant::now();
            let page = store.list_with(G, R, Some(ns), None, None, fresh).await?;
            samples.push(ms(t.elapsed()));
            if page.items.len() != n {
                report.anomaly(format!("list ({what}) returned {} of {n} Machines", page.items.len()));
            }
        }
        report.latencies(S, &format!("list of {n} ({what})"), &mut samples);
    }
    let mut gets = Vec::new();
    for i in 0..1000.min(n) {
        let t = Instant::now();
        store.get_json(key(ns, &machine_name(i)), Freshness::Latest).await?.context("a created Machine is there")?;
        gets.push(ms(t.elapsed()));
    }
    report.latencies(S, "get (latest)", &mut gets);

    // 3. Watch delivery: every watcher from the same revision, one writer at a steady pace.
    let (watchers, updates) = (cli.watchers, cli.updates);
    eprintln!("store-core: {watchers} watchers, {updates} updates at {}/s", cli.update_rate);
    let from = store.current_rv().await?;
    let mut tasks = Vec::with_capacity(watchers);
    for _ in 0..watchers {
        let mut stream = Box::pin(store.watch(G, R, Some(ns), from).await?);
        tasks.push(tokio::spawn(async move {
            let mut seen = Vec::with_capacity(updates);
            while seen.len() < updates {
                match tokio::time::timeout(Duration::from_secs(30), stream.next()).await {
                    Ok(Some(Ok(ev))) => seen.push((ev.rv, Instant::now())),
                    _ => break,
                }
            }
            seen
        }));
    }
    let mut started = std::collections::HashMap::with_capacity(updates);
    let mut tick = tokio::time::interval(Duration::from_secs_f64(1.0 / cli.update_rate.max(0.001)));
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    let name = machine_name(0);
    let mut commits = Vec::with_capacity(updates);
    for u in 0..updates {
        tick.tick().await;
        let mut object = store.get(key(ns, &name)).await?.context("the watched Machine")?;
        object["spec"]["ttlSeconds"] = json!(1_000_000_000 + u as i64);
        let t = Instant::now();
        let stored = store.update(key(ns, &name), object, None).await?;
        commits.push(ms(t.elapsed()));
        let rv: i64 = stored["metadata"]["resourceVersion"].as_str().unwrap_or_default().parse()?;
        started.insert(rv, t);
    }
    let mut delivery = Vec::with_capacity(watchers * updates);
    for task in tasks {
        let seen = task.await?;
        if seen.len() != updates {
            report.anomaly(format!("a watcher saw {} of {updates} updates", seen.len()));
        }
        delivery.extend(seen.iter().filter_map(|(rv, at)| Some(ms(at.saturating_duration_since(*started.get(rv)?)))));
    }
    // Delivery counts from the start of the write: its commit (flushed) is the first part.
    report.latencies(S, "watch: the write's commit", &mut commits);
    report.latencies(S, &format!("watch delivery to {watchers} watchers"), &mut delivery);
    Ok(())
}
