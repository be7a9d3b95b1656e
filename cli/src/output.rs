//! Tables (the columns of the spec and the CRDs' printer columns), `-o json|yaml`, describe.

use chrono::{DateTime, Utc};
use serde_json::Value;

use crate::duration::human;
use crate::jsonpath::Template;

#[derive(Clone, Copy, PartialEq)]
pub enum Format {
    Table,
    /// The table with more columns.
    Wide,
    /// `kind/name`, one object a line (what kubectl takes back: `kubectl get machine/NAME`).
    Name,
    Json,
    Yaml,
    /// `jsonpath=TEMPLATE`, parsed once (kaironctl prints one answer and exits, so the template
    /// lives as long as the process).
    JsonPath(&'static Template),
}

impl Format {
    /// `-o`'s value: `table`, `wide`, `name`, `json`, `yaml` or `jsonpath=TEMPLATE`.
    pub fn parse(s: &str) -> Result<Self, String> {
        Ok(match s {
            "table" => Format::Table,
            "wide" => Format::Wide,
            "name" => Format::Name,
            "json" => Format::Json,
            "yaml" => Format::Yaml,
            _ => match s.strip_prefix("jsonpath=") {
                Some(t) => Format::JsonPath(Box::leak(Box::new(Template::parse(t)?))),
                None => {
                    return Err(format!(
                        "{s:?} is not an output format: use table, wide, name, json, yaml or jsonpath='{{.metadata.name}}'"
                    ));
                }
            },
        })
    }

    /// A table or `wide`: text for a person, not a program.
    pub fn is_table(self) -> bool {
        matches!(self, Format::Table | Format::Wide)
    }
}

/// An object (or a list's `items`) as `-o` asks; `name` and the tables print JSON for what has
/// no name.
pub fn print(fmt: Format, v: &Value) -> anyhow::Result<()> {
    match fmt {
        Format::Yaml => print!("{}", serde_yaml::to_string(v)?),
        // As kubectl: exactly the template, no newline added (end it with `{"\n"}`).
        Format::JsonPath(t) => print!("{}", t.render(v)),
        Format::Name if v["metadata"]["name"].is_string() => println!("{}", name_of(None, v)),
        Format::Name if v["items"].is_array() => {
            for it in v["items"].as_array().into_iter().flatten() {
                println!("{}", name_of(None, it));
            }
        }
        _ => println!("{}", serde_json::to_string_pretty(v)?),
    }
    Ok(())
}

/// A mutating verb's answer: one line saying what happened (the tables), `kind/name`, or the
/// object.
pub fn done(fmt: Format, v: &Value, line: &str) -> anyhow::Result<()> {
    if fmt.is_table() {
        println!("{line}");
        Ok(())
    } else {
        print(fmt, v)
    }
}

/// `machine/NAME`: the object's kind (its `kind`, else `kind`) in lower case and its name.
pub fn name_of(kind: Option<&str>, v: &Value) -> String {
    let k = v["kind"].as_str().map(str::to_lowercase).or(kind.map(String::from)).unwrap_or_else(|| "object".into());
    let name = v["metadata"]["name"].as_str().or(v["name"].as_str()).or(v["id"].as_str()).unwrap_or("");
    format!("{k}/{name}")
}

/// A row's cells of extra columns.
type Cells = fn(&Value) -> Vec<String>;

/// What a table shows beside its columns.
#[derive(Clone, Copy, Default)]
pub struct View {
    /// A NAMESPACE column first.
    pub all_ns: bool,
    /// `-o wide`: the kind's extra columns.
    pub wide: bool,
    /// `--show-labels`: a LABELS column last.
    pub labels: bool,
    /// Rows only (`get -w` prints its header once, then a row per change).
    pub no_header: bool,
}

#[derive(Clone, Copy)]
pub enum Table {
    Machines,
    Pools,
    Claims,
    Nodes,
    Templates,
    Sandboxes,
    NodePools,
}

impl Table {
    /// The kind `-o name` prints for rows that carry no `kind`.
    pub fn kind(self) -> Option<&'static str> {
        Some(match self {
            Table::Machines => "machine",
            Table::Pools => "machinepool",
            Table::Claims => "machineclaim",
            Table::Nodes => "kaironnode",
            Table::Templates => "template",
            Table::Sandboxes => "sandbox",
            Table::NodePools => "pool",
        })
    }
}

/// Where a Machine (or a pool's template) boots from: `template NAME` or `image PATH`.
fn source(spec: &Value) -> String {
    spec["sandbox"]["templateName"]
        .as_str()
        .map(|t| format!("template:{t}"))
        .or_else(|| spec["image"]["path"].as_str().map(|p| format!("image:{p}")))
        .or_else(|| spec["runtime"]["kernel"]["path"].as_str().map(|p| format!("kernel:{p}")))
        .unwrap_or_else(|| "<none>".into())
}

fn labels_text(v: &Value) -> String {
    let labels: Vec<String> = v["metadata"]["labels"]
        .as_object()
        .map(|l| l.iter().map(|(k, v)| format!("{k}={}", v.as_str().unwrap_or_default())).collect())
        .unwrap_or_default();
    if labels.is_empty() { "<none>".into() } else { labels.join(",") }
}

fn s(v: &Value, path: &[&str]) -> String {
    let mut cur = v;
    for p in path {
        cur = &cur[*p];
    }
    match cur {
        Value::Null => "<none>".into(),
        Value::String(x) => x.clone(),
        Value::Number(n) => {
            n.as_f64().filter(|f| f.fract() != 0.0).map(|f| format!("{f:.1}")).unwrap_or_else(|| n.to_string())
        }
        other => other.to_string(),
    }
}

fn age(v: &Value) -> String {
    v["metadata"]["creationTimestamp"]
        .as_str()
        .or_else(|| v["createdAt"].as_str())
        .and_then(|t| DateTime::parse_from_rfc3339(t).ok())
        .map(|t| human((Utc::now() - t.with_timezone(&Utc)).num_seconds().max(0)))
        .unwrap_or_else(|| "<none>".into())
}

pub fn table(kind: Table, items: &[Value], view: View) {
    let (mut head, rows): (Vec<&str>, Vec<Vec<String>>) = match kind {
        Table::Machines => (
            vec!["NAME", "PHASE", "POWER", "NODE", "IP", "AGE"],
            items
                .iter()
                .map(|m| {
                    let power = m["spec"]["powerState"].as_str().unwrap_or("Running").to_string();
                    vec![
                        s(m, &["metadata", "name"]),
                        s(m, &["status", "phase"]),
                        power,
                        s(m, &["status", "nodeName"]),
                        s(m, &["status", "guestIP"]),
                        age(m),
                    ]
                })
                .collect(),
        ),
        Table::Pools => (
            vec!["NAME", "REPLICAS", "WARM", "CLAIMED", "WARM-STATE", "AGE"],
            items
                .iter()
                .map(|p| {
                    let ws = p["spec"]["warmPowerState"].as_str().unwrap_or("Running").to_string();
                    vec![
                        s(p, &["metadata", "name"]),
                        s(p, &["spec", "replicas"]),
                        s(p, &["status", "warm"]),
                        s(p, &["status", "claimed"]),
                        ws,
                        age(p),
                    ]
                })
                .collect(),
        ),
        Table::Claims => (
            vec!["NAME", "POOL", "PHASE", "MACHINE", "LAUNCH", "ACTIVE", "SUSPENDED", "VCPU-S", "AGE"],
            items
                .iter()
                .map(|c| {
                    let u = &c["status"]["usage"];
                    let secs = |k: &str| u[k].as_i64().map(human).unwrap_or_else(|| "0s".into());
                    let vcpu = u["vcpuSeconds"].as_f64().map(|f| format!("{f:.1}")).unwrap_or_else(|| "0.0".into());
                    vec![
                        s(c, &["metadata", "name"]),
                        s(c, &["spec", "poolName"]),
                        s(c, &["status", "phase"]),
                        s(c, &["status", "machineName"]),
                        s(c, &["status", "launchType"]),
                        secs("activeSeconds"),
                        secs("suspendedSeconds"),
                        vcpu,
                        age(c),
                    ]
                })
                .collect(),
        ),
        Table::Nodes => (
            vec!["NAME", "BACKENDS", "AGE"],
            items
                .iter()
                .map(|n| {
                    let backends = n["status"]["backends"]
                        .as_array()
                        .map(|b| {
                            b.iter().filter_map(|x| x["name"].as_str().or(x.as_str())).collect::<Vec<_>>().join(",")
                        })
                        .unwrap_or_default();
                    vec![s(n, &["metadata", "name"]), backends, age(n)]
                })
                .collect(),
        ),
        Table::Templates => (
            vec!["NAME", "STATE", "IMAGE", "BYTES", "AGE"],
            items
                .iter()
                .map(|t| vec![s(t, &["name"]), s(t, &["state"]), s(t, &["imageRef"]), s(t, &["bytesDone"]), age(t)])
                .collect(),
        ),
        Table::Sandboxes => (
            vec!["ID", "NAME", "BACKEND", "STATE", "TEMPLATE", "AGE"],
            items
                .iter()
                .map(|v| {
                    vec![
                        s(v, &["id"]),
                        s(v, &["name"]),
                        s(v, &["backend"]),
                        s(v, &["state"]),
                        s(v, &["template"]),
                        age(v),
                    ]
                })
                .collect(),
        ),
        Table::NodePools => (
            vec!["NAME", "TEMPLATE", "SIZE", "MEMBERS", "AGE"],
            items
                .iter()
                .map(|p| {
                    vec![
                        s(p, &["name"]),
                        s(p, &["template"]),
                        s(p, &["size"]),
                        p["members"].as_array().map(|m| m.len()).unwrap_or(0).to_string(),
                        age(p),
                    ]
                })
                .collect(),
        ),
    };
    let mut rows = rows;
    let objects = matches!(kind, Table::Machines | Table::Pools | Table::Claims);
    if view.wide {
        let (extra, cells): (Vec<&str>, Cells) = match kind {
            Table::Machines => (vec!["SOURCE", "RUNTIME-ID", "POOL", "CLAIM"], |m| {
                vec![
                    source(&m["spec"]),
                    s(m, &["status", "runtimeID"]),
                    s(m, &["metadata", "labels", "kairon.zyvor.dev/pool"]),
                    s(m, &["metadata", "labels", "kairon.zyvor.dev/claim"]),
                ]
            }),
            Table::Pools => {
                (vec!["SOURCE", "READY"], |p| vec![source(&p["spec"]["template"]["spec"]), s(p, &["status", "ready"])])
            }
            Table::Claims => (vec!["BOUND", "TTL"], |c| {
                let ttl = c["spec"]["ttlSeconds"].as_i64().map(human).unwrap_or_else(|| "<none>".into());
                vec![s(c, &["status", "boundTime"]), ttl]
            }),
            _ => (vec![], |_| vec![]),
        };
        head.extend(extra);
        for (r, item) in rows.iter_mut().zip(items) {
            r.extend(cells(item));
        }
    }
    if view.labels && objects {
        head.push("LABELS");
        for (r, item) in rows.iter_mut().zip(items) {
            r.push(labels_text(item));
        }
    }
    if view.all_ns && objects {
        head.insert(0, "NAMESPACE");
        for (r, item) in rows.iter_mut().zip(items) {
            r.insert(0, s(item, &["metadata", "namespace"]));
        }
    }
    print_rows(&head, &rows, !view.no_header);
}

pub fn print_rows(head: &[&str], rows: &[Vec<String>], with_head: bool) {
    let mut w: Vec<usize> = head.iter().map(|h| h.len()).collect();
    for r in rows {
        for (i, c) in r.iter().enumerate() {
            w[i] = w[i].max(c.len());
        }
    }
    let line = |cells: Vec<String>| {
        let parts: Vec<String> = cells.iter().enumerate().map(|(i, c)| format!("{c:<width$}", width = w[i])).collect();
        println!("{}", parts.join("   ").trim_end());
    };
    if with_head {
        line(head.iter().map(|h| h.to_string()).collect());
    }
    for r in rows {
        line(r.clone());
    }
}

pub fn usage_table(v: &Value) {
    let rows: Vec<Vec<String>> = v["rows"]
        .as_array()
        .map(|rows| {
            rows.iter()
                .map(|r| {
                    let key = r["namespace"]
                        .as_str()
                        .or(r["claimName"].as_str())
                        .or(r["day"].as_str())
                        .map(String::from)
                        .unwrap_or_else(|| s(r, &["claimUid"]));
                    vec![
                        key,
                        human(r["activeSeconds"].as_i64().unwrap_or(0)),
                        human(r["suspendedSeconds"].as_i64().unwrap_or(0)),
                        format!("{:.1}", r["vcpuSeconds"].as_f64().unwrap_or(0.0)),
                        format!("{:.1}", r["memoryGiBSeconds"].as_f64().unwrap_or(0.0)),
                    ]
                })
                .collect()
        })
        .unwrap_or_default();
    let by = v["groupBy"].as_str().unwrap_or("namespace").to_uppercase();
    print_rows(&[&by, "ACTIVE", "SUSPENDED", "VCPU-S", "MEM-GIB-S"], &rows, true);
}

/// A migration's answer: what moved where (or, on a dry run, what would), its steps, and for
/// every node whether it could take the Machine and why not.
pub fn migration(v: &Value, name: &str, dry: bool) {
    let plan = &v["plan"];
    let (from, to, mode) = (s(plan, &["source"]), s(plan, &["target"]), s(plan, &["mode"]).to_lowercase());
    if dry {
        println!("machine {name} would move from {from} to {to} ({mode}) (dry run: nothing changed)");
        for (i, step) in plan["steps"].as_array().into_iter().flatten().enumerate() {
            println!("  {}. {}", i + 1, step.as_str().unwrap_or_default());
        }
    } else {
        let copied =
            v["copiedBytes"].as_f64().map(|b| format!(", {:.1} MiB copied", b / 1048576.0)).unwrap_or_default();
        let took = v["seconds"].as_f64().map(|t| format!(" in {t:.1}s")).unwrap_or_default();
        let paused = v["downtimeMs"].as_u64().map(|d| format!(", paused {d} ms")).unwrap_or_default();
        println!("machine {name} moved from {from} to {to} ({mode}){took}{copied}{paused}");
    }
    let rows: Vec<Vec<String>> = plan["nodes"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|n| {
            let fits = if n["fits"].as_bool() == Some(true) { "yes" } else { "no" };
            vec![s(n, &["node"]), fits.to_string(), s(n, &["reason"])]
        })
        .collect();
    print_rows(&["NODE", "FITS", "WHY NOT"], &rows, true);
}

/// A quota report: for each quota, each amount it limits with the namespace's use; with no
/// quota, the use alone.
pub fn quota_table(v: &Value) {
    const AMOUNTS: [&str; 5] = ["machines", "cpu", "memory", "warmMembers", "storage"];
    let used = |a: &str| s(v, &["used", a]);
    let quotas = v["quotas"].as_array().cloned().unwrap_or_default();
    let rows: Vec<Vec<String>> = if quotas.is_empty() {
        AMOUNTS.iter().map(|a| vec!["<none>".into(), a.to_string(), used(a), "unlimited".into()]).collect()
    } else {
        quotas
            .iter()
            .flat_map(|q| {
                AMOUNTS
                    .iter()
                    .filter(|a| !q["hard"][**a].is_null())
                    .map(|a| vec![s(q, &["name"]), a.to_string(), used(a), s(q, &["hard", a])])
                    .collect::<Vec<_>>()
            })
            .collect()
    };
    print_rows(&["QUOTA", "RESOURCE", "USED", "LIMIT"], &rows, true);
}

fn events_text(events: &Value) -> String {
    let mut out = String::from("Events:\n");
    let items = events["items"].as_array().cloned().unwrap_or_default();
    if items.is_empty() {
        out.push_str("  <none>\n");
    }
    for e in items.iter().rev().take(10).rev() {
        out.push_str(&format!("  {:<8} {:<20} {}\n", s(e, &["type"]), s(e, &["reason"]), s(e, &["note"])));
    }
    out
}

/// The Lifecycle line: `idle 3m12s of 10m0s, expires in 23h…`. The end is the server's
/// (`status.lifecycle.expiresAt`, which counts the claim's TTL too); until the controller has
/// recorded it, the max lifetime's.
pub fn lifecycle_line(m: &Value, now: DateTime<Utc>) -> Option<String> {
    let ts = |v: &Value| v.as_str().and_then(|t| DateTime::parse_from_rfc3339(t).ok()).map(|t| t.with_timezone(&Utc));
    let expires = ts(&m["status"]["lifecycle"]["expiresAt"]);
    let empty = serde_json::Map::new();
    let lc = match m["spec"]["lifecycle"].as_object() {
        Some(lc) => lc,
        None if expires.is_some() => &empty,
        None => return None,
    };
    let mut parts = Vec::new();
    if let Some(timeout) = lc.get("idleTimeoutSeconds").and_then(Value::as_i64) {
        let guest = ts(&m["status"]["lifecycle"]["lastActivityTime"]);
        let relay = ts(&m["metadata"]["annotations"]["kairon.zyvor.dev/last-activity"]);
        let created = ts(&m["metadata"]["creationTimestamp"]);
        let last = [guest, relay].into_iter().flatten().max().or(created);
        let idle = last.map(|t| (now - t).num_seconds().max(0)).unwrap_or(0);
        parts.push(format!("idle {} of {}", human(idle), human(timeout)));
    }
    let end = expires.or_else(|| {
        let max = lc.get("maxLifetimeSeconds").and_then(Value::as_i64)?;
        let start = ts(&m["metadata"]["annotations"]["kairon.zyvor.dev/lifecycle-start"])
            .or(ts(&m["metadata"]["creationTimestamp"]))?;
        Some(start + chrono::Duration::seconds(max))
    });
    if let Some(end) = end {
        let left = (end - now).num_seconds();
        parts.push(if left >= 0 { format!("expires in {}", human(left)) } else { "expired".into() });
    }
    if m["metadata"]["annotations"]["kairon.zyvor.dev/idle-suspended"].is_string() {
        parts.push("idle-suspended".into());
    }
    let action = lc.get("idleAction").and_then(Value::as_str).unwrap_or("Pause");
    let wake = if lc.get("wakeOnConnect").and_then(Value::as_bool).unwrap_or(false) { ", wake on connect" } else { "" };
    Some(format!("{} (idle action {action}{wake})", parts.join(", ")))
}

pub fn describe_machine(m: &Value, events: &Value, now: DateTime<Utc>) -> String {
    let mut out = String::new();
    let row = |k: &str, v: String| format!("{:<14}{}\n", format!("{k}:"), v);
    out += &row("Name", s(m, &["metadata", "name"]));
    out += &row("Namespace", s(m, &["metadata", "namespace"]));
    let source = m["spec"]["sandbox"]["templateName"]
        .as_str()
        .map(|t| format!("sandbox template {t}"))
        .or_else(|| m["spec"]["image"]["path"].as_str().map(|p| format!("image {p}")))
        .unwrap_or_else(|| "<none>".into());
    out += &row("Source", source);
    out += &row("Phase", s(m, &["status", "phase"]));
    out += &row("Power", m["spec"]["powerState"].as_str().unwrap_or("Running").to_string());
    out += &row("Node", s(m, &["status", "nodeName"]));
    out += &row("IP", s(m, &["status", "guestIP"]));
    out += &row("Runtime ID", s(m, &["status", "runtimeID"]));
    if let Some(line) = lifecycle_line(m, now) {
        out += &row("Lifecycle", line);
    }
    if let Some(until) = m["metadata"]["annotations"]["kairon.zyvor.dev/fs-frozen-until"].as_str() {
        out += &row("Frozen until", until.to_string());
    }
    out += "Conditions:\n";
    for c in m["status"]["conditions"].as_array().cloned().unwrap_or_default() {
        out += &format!(
            "  {:<12} {:<6} {:<22} {}\n",
            s(&c, &["type"]),
            s(&c, &["status"]),
            s(&c, &["reason"]),
            s(&c, &["message"])
        );
    }
    out + &events_text(events)
}

pub fn describe_pool(p: &Value, members: &[Value]) -> String {
    let mut out = String::new();
    let row = |k: &str, v: String| format!("{:<19}{}\n", format!("{k}:"), v);
    out += &row("Name", s(p, &["metadata", "name"]));
    out += &row("Namespace", s(p, &["metadata", "namespace"]));
    out += &row("Source", source(&p["spec"]["template"]["spec"]));
    out += &row("Replicas", s(p, &["spec", "replicas"]));
    out += &row("Warm power state", p["spec"]["warmPowerState"].as_str().unwrap_or("Running").to_string());
    if let Some(w) = p["spec"]["warmupSeconds"].as_i64() {
        out += &row("Warm-up", human(w));
    }
    let st = &p["status"];
    let n = |k: &str| st[k].as_i64().unwrap_or(0);
    out += &row(
        "Status",
        format!("{} members, {} ready, {} warm, {} claimed", n("replicas"), n("ready"), n("warm"), n("claimed")),
    );
    out += "Members:\n";
    if members.is_empty() {
        out += "  <none>\n";
    }
    for m in members {
        let claim = m["metadata"]["labels"]["kairon.zyvor.dev/claim"].as_str().map(|c| format!("claimed by {c}"));
        out += &format!(
            "  {:<24} {:<12} {:<8} {}\n",
            s(m, &["metadata", "name"]),
            s(m, &["status", "phase"]),
            m["spec"]["powerState"].as_str().unwrap_or("Running"),
            claim.unwrap_or_else(|| "warm".into())
        );
    }
    out
}

pub fn describe_claim(c: &Value, events: &Value) -> String {
    let mut out = String::new();
    let row = |k: &str, v: String| format!("{:<14}{}\n", format!("{k}:"), v);
    out += &row("Name", s(c, &["metadata", "name"]));
    out += &row("Namespace", s(c, &["metadata", "namespace"]));
    out += &row("UID", s(c, &["metadata", "uid"]));
    out += &row("Pool", s(c, &["spec", "poolName"]));
    out += &row("Phase", s(c, &["status", "phase"]));
    out += &row("Machine", s(c, &["status", "machineName"]));
    out += &row("Bound", s(c, &["status", "boundTime"]));
    if let Some(ttl) = c["spec"]["ttlSeconds"].as_i64() {
        out += &row("TTL", human(ttl));
    }
    let u = &c["status"]["usage"];
    out += "Usage:\n";
    out += &format!("  Active:      {}\n", human(u["activeSeconds"].as_i64().unwrap_or(0)));
    out += &format!("  Suspended:   {}\n", human(u["suspendedSeconds"].as_i64().unwrap_or(0)));
    out += &format!("  vCPU-s:      {:.1}\n", u["vcpuSeconds"].as_f64().unwrap_or(0.0));
    out += &format!("  Memory GiB-s:{:.1}\n", u["memoryGiBSeconds"].as_f64().unwrap_or(0.0));
    out += &format!("  Accrued to:  {}\n", s(u, &["lastAccrualTime"]));
    out + &events_text(events)
}

/// Bytes as people read them, one word for a table's cell: `512B`, `3.2MiB`, `1.5GiB`.
pub fn human_bytes(b: u64) -> String {
    const UNITS: [&str; 4] = ["KiB", "MiB", "GiB", "TiB"];
    if b < 1024 {
        return format!("{b}B");
    }
    let mut v = b as f64 / 1024.0;
    let mut unit = 0;
    while v >= 1024.0 && unit < UNITS.len() - 1 {
        v /= 1024.0;
        unit += 1;
    }
    format!("{v:.1}{}", UNITS[unit])
}

/// `kaironctl top machines`: one line per Machine (`rows` as `top` gathers them).
pub fn top_table(rows: &[Value], with_namespace: bool) {
    let mut head = vec!["NAME", "CPU%", "CPUS", "MEMORY", "MEMORY%", "DISK", "NET-RX", "NET-TX", "PROCESSES"];
    if with_namespace {
        head.insert(0, "NAMESPACE");
    }
    let bytes = |v: &Value| v.as_u64().map_or_else(|| "-".to_string(), human_bytes);
    let table: Vec<Vec<String>> = rows
        .iter()
        .map(|r| {
            let m = &r["metrics"];
            let used = m["memoryUsedBytes"].as_u64().unwrap_or(0);
            let limit = m["memoryLimitBytes"].as_u64().unwrap_or(0);
            let share = if limit > 0 { format!("{:.0}%", used as f64 * 100.0 / limit as f64) } else { "-".into() };
            let mut row = vec![
                r["name"].as_str().unwrap_or_default().to_string(),
                format!("{:.1}", m["cpuPercent"].as_f64().unwrap_or(0.0)),
                format!("{}", m["cpuLimitCores"].as_f64().unwrap_or(0.0)),
                format!("{}/{}", human_bytes(used), human_bytes(limit)),
                share,
                bytes(&m["diskUsedBytes"]),
                bytes(&m["networkRxBytes"]),
                bytes(&m["networkTxBytes"]),
                m["processCount"].as_u64().unwrap_or(0).to_string(),
            ];
            if with_namespace {
                row.insert(0, r["namespace"].as_str().unwrap_or_default().to_string());
            }
            row
        })
        .collect();
    print_rows(&head, &table, true);
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn bytes_read_as_people_write_them() {
        assert_eq!(human_bytes(512), "512B");
        assert_eq!(human_bytes(3 * 1024 * 1024 + 200 * 1024), "3.2MiB");
        assert_eq!(human_bytes(3 << 30), "3.0GiB");
    }

    #[test]
    fn lifecycle_line_reads_like_the_spec() {
        let now = DateTime::parse_from_rfc3339("2026-01-01T00:10:00Z").unwrap().with_timezone(&Utc);
        let m = json!({
            "metadata": {"creationTimestamp": "2026-01-01T00:00:00Z"},
            "spec": {"lifecycle": {"idleTimeoutSeconds": 600, "maxLifetimeSeconds": 86400, "wakeOnConnect": true}},
            "status": {"lifecycle": {"lastActivityTime": "2026-01-01T00:06:48Z"}}
        });
        assert_eq!(
            lifecycle_line(&m, now).unwrap(),
            "idle 3m12s of 10m0s, expires in 23h50m (idle action Pause, wake on connect)"
        );
        // The server's end wins (it counts ttlSeconds and the claim's TTL too).
        let mut ended = m.clone();
        ended["status"]["lifecycle"]["expiresAt"] = json!("2026-01-01T01:10:00Z");
        assert_eq!(
            lifecycle_line(&ended, now).unwrap(),
            "idle 3m12s of 10m0s, expires in 1h0m (idle action Pause, wake on connect)"
        );
        // ttlSeconds alone, no spec.lifecycle: the line still says when.
        let ttl = json!({"status": {"lifecycle": {"expiresAt": "2026-01-01T00:15:00Z"}}});
        assert_eq!(lifecycle_line(&ttl, now).unwrap(), "expires in 5m0s (idle action Pause)");
        assert_eq!(lifecycle_line(&json!({"spec": {}}), now), None);
    }
}
