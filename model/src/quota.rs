//! KaironQuota: what the Machines of one namespace may add up to (how many, their CPU and
//! memory, and the warm pool members held for claims), and the arithmetic that admission, the
//! quota controller, the pool controller and the REST API share. No I/O: callers bring the
//! Machines.

use std::collections::{BTreeSet, HashMap};
use std::ops::{Add, Sub};

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::{CustomResource, ResourceExt};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::keys::labels;
use crate::machine::{Machine, MachineSpec};
use crate::quantity::Quantity;

/// What a Machine may use when its spec says nothing (and what a template sandbox may use, its
/// `spec.resources` being ignored): one CPU and 512 MiB, as its template's runtime limits.
pub const DEFAULT_CPU_MILLIS: i64 = 1000;
pub const DEFAULT_MEMORY_BYTES: i64 = 512 * 1024 * 1024;

/// How a refusal by quota begins (the words Kubernetes' ResourceQuota uses): what a writer
/// refused with 403 reads to tell a quota from a missing right.
pub const REFUSAL_PREFIX: &str = "exceeded quota: ";

/// The pool condition saying the pool cannot make the members it wants within its namespace's
/// quota, and the reason a claim waiting for such a pool gives.
pub const QUOTA_EXCEEDED: &str = "QuotaExceeded";

/// Limits on what the Machines of this namespace add up to. Every Machine counts, pool
/// members and claimed ones included, from its creation until it is gone.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema, ToSchema)]
#[kube(
    group = "kairon.zyvor.dev",
    version = "v1",
    kind = "KaironQuota",
    namespaced,
    status = "KaironQuotaStatus",
    shortname = "kquota",
    category = "kairon",
    doc = "Limits on what the Machines of one namespace add up to: Machines, CPU, memory and warm pool members.",
    printcolumn(name = "Used", type_ = "string", json_path = ".status.summary"),
    printcolumn(name = "Age", type_ = "date", json_path = ".metadata.creationTimestamp")
)]
#[serde(rename_all = "camelCase")]
pub struct KaironQuotaSpec {
    /// The limits; an amount left out is not limited.
    pub hard: QuotaAmounts,
}

/// Amounts of what a namespace's Machines hold. In a quota's `spec.hard` an absent amount is not
/// limited; in its status every amount is reported.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct QuotaAmounts {
    /// Machines, whatever their power state.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub machines: Option<i64>,
    /// The sum of the Machines' `resources.cpu` (a template sandbox counts 1).
    #[schema(value_type = Option<String>)]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu: Option<Quantity>,
    /// The sum of the Machines' `resources.memory` (a template sandbox counts 512Mi).
    #[schema(value_type = Option<String>)]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory: Option<Quantity>,
    /// Pool members not claimed: the warm (or warming) members pools hold for claims, Paused in
    /// a Paused pool, which hold node memory while nobody uses them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub warm_members: Option<i64>,
    /// The sum of the Machines' new empty volumes (`spec.volumes[].size`): disk the node
    /// allocates for them as they fill.
    #[schema(value_type = Option<String>)]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub storage: Option<Quantity>,
    /// The namespace's own templates (KaironTemplates): each costs its nodes a pull, a build
    /// and the disk of its rootfs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub templates: Option<i64>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct KaironQuotaStatus {
    /// The limits in force (`spec.hard` as last counted against).
    #[serde(default)]
    pub hard: QuotaAmounts,
    /// What the namespace's Machines hold now.
    #[serde(default)]
    pub used: QuotaAmounts,
    /// Use against limits in one line, e.g. `machines: 3/10, cpu: 3/8`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub summary: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// Writes of Machines the admission webhook allowed that the cluster may not hold yet (on
    /// a real cluster; the embedded API judges inside each write's transaction and keeps none).
    /// Racing writes are judged against the Machines that exist plus these, and each is added
    /// with a compare-and-swap on this quota, so two cannot pass a limit together.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub reservations: Vec<Reservation>,
}

/// A Machine write admitted against a quota, held until the Machine shows it or it lapses.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Reservation {
    /// The Machine's UID.
    pub uid: String,
    /// The Machine's name, for people reading the ledger.
    pub name: String,
    /// For an update, the resourceVersion it replaces: the reservation is spent once the
    /// Machine has another. None: a create, spent once the Machine exists.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replaces: Option<String>,
    /// What the Machine holds once written.
    pub amounts: QuotaAmounts,
    /// When the reservation lapses if its write never landed (it failed after admission).
    #[schema(value_type = String, format = DateTime)]
    pub expires: Time,
}

/// How long a reservation holds its share if its write never lands: admission runs just
/// before the API server stores the object, so a write that lands does so well within it.
pub const RESERVATION_LIFETIME: std::time::Duration = std::time::Duration::from_secs(30);

impl Reservation {
    /// A reservation of one KaironTemplate's place (`amounts.templates`), made for a template's
    /// create; the others are Machines'.
    pub fn template(uid: &str, name: &str, now: &Time) -> Reservation {
        Reservation {
            uid: uid.into(),
            name: name.into(),
            replaces: None,
            amounts: QuotaAmounts { templates: Some(1), ..Default::default() },
            expires: Time(now.0 + RESERVATION_LIFETIME),
        }
    }

    /// Whether this holds a KaironTemplate's place rather than a Machine's.
    pub fn is_template(&self) -> bool {
        self.amounts.templates.is_some()
    }

    /// Whether the quota no longer needs to hold this: it lapsed, or the Machine now shows
    /// its write (or another one since; a write that lost its race is admitted again), or the
    /// template is stored (`templates`: the UIDs of the namespace's KaironTemplates).
    pub fn spent(&self, machines: &[Machine], templates: &BTreeSet<String>, now: &Time) -> bool {
        if self.expires.0 <= now.0 {
            return true;
        }
        if self.is_template() {
            return templates.contains(&self.uid);
        }
        let stored = machines.iter().find(|m| m.metadata.uid.as_deref() == Some(self.uid.as_str()));
        match (&self.replaces, stored) {
            (None, stored) => stored.is_some(),
            // An update of a Machine since deleted holds nothing.
            (Some(_), None) => true,
            (Some(rv), Some(m)) => m.metadata.resource_version.as_ref() != Some(rv),
        }
    }
}

/// What each Machine of a namespace holds by UID, writes in flight included: a stored
/// Machine the larger of what it holds and what live reservations for it will hold, and a
/// Machine not stored yet what its reservations will hold.
pub fn held_by_uid(machines: &[Machine], reservations: &[Reservation], now: &Time) -> HashMap<String, Charge> {
    let mut held: HashMap<String, Charge> =
        machines.iter().map(|m| (m.metadata.uid.clone().unwrap_or_else(|| m.name_any()), charge(m))).collect();
    let of_machines = reservations.iter().filter(|r| !r.is_template());
    for r in of_machines.filter(|r| !r.spent(machines, &BTreeSet::new(), now)) {
        let c = Charge::of(&r.amounts);
        held.entry(r.uid.clone()).and_modify(|h| *h = h.max(c)).or_insert(c);
    }
    held
}

/// What Machines hold, in whole units: the numbers every comparison uses.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Charge {
    pub machines: i64,
    pub cpu_millis: i64,
    pub memory_bytes: i64,
    pub warm_members: i64,
    pub storage_bytes: i64,
}

impl Add for Charge {
    type Output = Charge;
    fn add(self, o: Charge) -> Charge {
        Charge {
            machines: self.machines.saturating_add(o.machines),
            cpu_millis: self.cpu_millis.saturating_add(o.cpu_millis),
            memory_bytes: self.memory_bytes.saturating_add(o.memory_bytes),
            warm_members: self.warm_members.saturating_add(o.warm_members),
            storage_bytes: self.storage_bytes.saturating_add(o.storage_bytes),
        }
    }
}

impl Sub for Charge {
    type Output = Charge;
    fn sub(self, o: Charge) -> Charge {
        Charge {
            machines: self.machines.saturating_sub(o.machines),
            cpu_millis: self.cpu_millis.saturating_sub(o.cpu_millis),
            memory_bytes: self.memory_bytes.saturating_sub(o.memory_bytes),
            warm_members: self.warm_members.saturating_sub(o.warm_members),
            storage_bytes: self.storage_bytes.saturating_sub(o.storage_bytes),
        }
    }
}

impl std::iter::Sum for Charge {
    fn sum<I: Iterator<Item = Charge>>(iter: I) -> Charge {
        iter.fold(Charge::default(), Add::add)
    }
}

/// The CPU (millicores) and memory (bytes) a Machine of this spec may use: its `resources`, or
/// [`DEFAULT_CPU_MILLIS`] and [`DEFAULT_MEMORY_BYTES`] for what it leaves out and for a template
/// sandbox (whose template sets its limits). What quota counts and usage bills.
pub fn resources_of(spec: &MachineSpec) -> (i64, i64) {
    let template = spec.sandbox.as_ref().is_some_and(|s| s.template_name.is_some());
    let r = spec.resources.as_ref().filter(|_| !template);
    let cpu = r.and_then(|r| r.cpu.as_ref()).and_then(|q| q.to_milli().ok()).unwrap_or(DEFAULT_CPU_MILLIS);
    let memory = r
        .and_then(|r| r.memory.as_ref())
        .and_then(|q| q.to_bytes().ok())
        .map_or(DEFAULT_MEMORY_BYTES, |b| i64::try_from(b).unwrap_or(i64::MAX));
    (cpu, memory)
}

/// Whether `m` is a pool member nobody has claimed: labelled with a pool and controlled by a
/// MachinePool (what the pool controller makes), with no claim label.
pub fn is_unclaimed_member(m: &Machine) -> bool {
    let pooled = m.labels().contains_key(labels::POOL)
        && m.owner_references().iter().any(|o| o.kind == "MachinePool" && o.controller == Some(true));
    pooled && !m.labels().contains_key(labels::CLAIM)
}

/// The CPU (millicores) and memory (bytes) a Machine holds: the larger of what its spec asks
/// ([`resources_of`]) and what its node started it with (`status.resources`), so a spec shrunk
/// under a running instance frees nothing before the node applies it (at the next start).
pub fn effective_resources(m: &Machine) -> (i64, i64) {
    let (cpu, memory) = resources_of(&m.spec);
    let started = m.status.as_ref().and_then(|s| s.resources.as_ref());
    let started_cpu = started.and_then(|r| r.cpu.as_ref()).and_then(|q| q.to_milli().ok()).unwrap_or(0);
    let started_memory = started
        .and_then(|r| r.memory.as_ref())
        .and_then(|q| q.to_bytes().ok())
        .map_or(0, |b| i64::try_from(b).unwrap_or(i64::MAX));
    (cpu.max(started_cpu), memory.max(started_memory))
}

/// The bytes of the new empty volumes a spec asks for (`volumes[].size`).
pub fn storage_of(spec: &MachineSpec) -> i64 {
    spec.volumes
        .iter()
        .filter_map(|v| v.size.as_ref()?.to_bytes().ok())
        .map(|b| i64::try_from(b).unwrap_or(i64::MAX))
        .fold(0i64, i64::saturating_add)
}

/// What one Machine holds.
pub fn charge(m: &Machine) -> Charge {
    let (cpu_millis, memory_bytes) = effective_resources(m);
    Charge {
        machines: 1,
        cpu_millis,
        memory_bytes,
        warm_members: i64::from(is_unclaimed_member(m)),
        storage_bytes: storage_of(&m.spec),
    }
}

/// What the Machines add up to.
pub fn total<'a>(machines: impl IntoIterator<Item = &'a Machine>) -> Charge {
    machines.into_iter().map(charge).sum()
}

/// `spec.hard` in whole units; None where not limited, or not a quantity (validation refuses
/// those, so a stored quota has none).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Limits {
    pub machines: Option<i64>,
    pub cpu_millis: Option<i64>,
    pub memory_bytes: Option<i64>,
    pub warm_members: Option<i64>,
    pub storage_bytes: Option<i64>,
}

impl Limits {
    pub fn of(hard: &QuotaAmounts) -> Limits {
        Limits {
            machines: hard.machines,
            cpu_millis: hard.cpu.as_ref().and_then(|q| q.to_milli().ok()),
            memory_bytes: hard
                .memory
                .as_ref()
                .and_then(|q| q.to_bytes().ok())
                .map(|b| i64::try_from(b).unwrap_or(i64::MAX)),
            warm_members: hard.warm_members,
            storage_bytes: hard
                .storage
                .as_ref()
                .and_then(|q| q.to_bytes().ok())
                .map(|b| i64::try_from(b).unwrap_or(i64::MAX)),
        }
    }

    /// Each amount with its name, limit and the value in `c`, in a fixed order.
    fn each(&self, c: Charge) -> [(&'static str, Option<i64>, i64); 5] {
        [
            ("machines", self.machines, c.machines),
            ("cpu", self.cpu_millis, c.cpu_millis),
            ("memory", self.memory_bytes, c.memory_bytes),
            ("warmMembers", self.warm_members, c.warm_members),
            ("storage", self.storage_bytes, c.storage_bytes),
        ]
    }
}

/// An amount as a quota writes it: CPU as cores or millicores, memory in the largest binary
/// unit that divides it, counts as numbers.
fn amount(name: &str, v: i64) -> String {
    match name {
        "cpu" if v % 1000 == 0 => format!("{}", v / 1000),
        "cpu" => format!("{v}m"),
        "memory" | "storage" => bytes(v),
        _ => v.to_string(),
    }
}

fn bytes(v: i64) -> String {
    const UNITS: [(&str, i64); 4] = [("Ti", 1 << 40), ("Gi", 1 << 30), ("Mi", 1 << 20), ("Ki", 1 << 10)];
    UNITS.iter().find(|(_, u)| v != 0 && v % u == 0).map_or(v.to_string(), |(s, u)| format!("{}{s}", v / u))
}

impl Charge {
    /// Amounts as a quota writes them (what [`Charge::amounts`] gives), in whole units; an
    /// absent amount is none.
    pub fn of(a: &QuotaAmounts) -> Charge {
        let l = Limits::of(a);
        Charge {
            machines: l.machines.unwrap_or(0),
            cpu_millis: l.cpu_millis.unwrap_or(0),
            memory_bytes: l.memory_bytes.unwrap_or(0),
            warm_members: l.warm_members.unwrap_or(0),
            storage_bytes: l.storage_bytes.unwrap_or(0),
        }
    }

    /// The larger of each amount.
    pub fn max(self, o: Charge) -> Charge {
        Charge {
            machines: self.machines.max(o.machines),
            cpu_millis: self.cpu_millis.max(o.cpu_millis),
            memory_bytes: self.memory_bytes.max(o.memory_bytes),
            warm_members: self.warm_members.max(o.warm_members),
            storage_bytes: self.storage_bytes.max(o.storage_bytes),
        }
    }

    /// Whether holding `self` instead of `before` holds more of anything: only such a write is
    /// judged against the quotas (less of everything always fits).
    pub fn grows_from(&self, before: &Charge) -> bool {
        self.machines > before.machines
            || self.cpu_millis > before.cpu_millis
            || self.memory_bytes > before.memory_bytes
            || self.warm_members > before.warm_members
            || self.storage_bytes > before.storage_bytes
    }

    /// As quota amounts (a status's `used`).
    pub fn amounts(&self) -> QuotaAmounts {
        QuotaAmounts {
            machines: Some(self.machines),
            cpu: Some(Quantity(amount("cpu", self.cpu_millis))),
            memory: Some(Quantity(amount("memory", self.memory_bytes))),
            warm_members: Some(self.warm_members),
            storage: Some(Quantity(amount("storage", self.storage_bytes))),
            // Counted by whoever counts templates (see `template_refusal`), not by a Charge.
            templates: None,
        }
    }
}

/// How many templates a namespace holds for quota judgement: those stored (`templates`, their
/// UIDs) and those admitted but not stored yet (the live template reservations of `ledger`),
/// each once, leaving out the template `judged` (the create under review).
pub fn templates_held(templates: &BTreeSet<String>, ledger: &[Reservation], judged: &str, now: &Time) -> i64 {
    let in_flight: BTreeSet<&str> = ledger
        .iter()
        .filter(|r| r.is_template() && r.uid != judged && !r.spent(&[], templates, now))
        .map(|r| r.uid.as_str())
        .collect();
    templates.iter().filter(|uid| *uid != judged).count() as i64 + in_flight.len() as i64
}

/// Why quota `name` refuses one more template in a namespace that has `existing`: None when
/// its `templates` limit (if any) still has room.
pub fn template_refusal(name: &str, hard: &QuotaAmounts, existing: i64) -> Option<String> {
    let limit = hard.templates?;
    (existing + 1 > limit).then(|| {
        format!(
            "{REFUSAL_PREFIX}{name}, requested: templates=1, used: templates={existing}, limited: templates={limit}: \
             delete a KaironTemplate in this namespace, or ask an admin to raise the KaironQuota"
        )
    })
}

/// Use against the limits in one line, limited amounts only: `machines: 3/10, cpu: 3/8`.
pub fn summary(limits: &Limits, used: Charge) -> String {
    let parts: Vec<String> = limits
        .each(used)
        .into_iter()
        .filter_map(|(name, limit, v)| limit.map(|l| format!("{name}: {}/{}", amount(name, v), amount(name, l))))
        .collect();
    if parts.is_empty() { "no limits".into() } else { parts.join(", ") }
}

/// Why quota `name` refuses a write that turns the namespace's use `before` into `after`: the
/// amounts that grow beyond their limit, in the words Kubernetes' ResourceQuota uses, and what
/// to do. None: it fits. An amount already over its limit (the limit lowered since) may stay or
/// shrink; it may not grow.
pub fn refusal(name: &str, limits: &Limits, before: Charge, after: Charge) -> Option<String> {
    // Each amount over: its name, and what is requested, used and limited.
    let over: Vec<(&str, [i64; 3])> = limits
        .each(before)
        .into_iter()
        .zip(limits.each(after))
        .filter_map(|((n, limit, was), (_, _, will))| {
            let limit = limit?;
            (will > was && will > limit).then_some((n, [will - was, was, limit]))
        })
        .collect();
    if over.is_empty() {
        return None;
    }
    let list = |i: usize| over.iter().map(|(n, v)| format!("{n}={}", amount(n, v[i]))).collect::<Vec<_>>().join(",");
    Some(format!(
        "{REFUSAL_PREFIX}{name}, requested: {}, used: {}, limited: {}: delete Machines (or release claims) in this \
         namespace, or ask an admin to raise the KaironQuota",
        list(0),
        list(1),
        list(2),
    ))
}

/// Whether a refusal's message is a quota's (a 403 that is not about rights).
pub fn is_refusal(message: &str) -> bool {
    message.contains(REFUSAL_PREFIX)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn machine(v: serde_json::Value) -> Machine {
        serde_json::from_value(json!({
            "apiVersion": "kairon.zyvor.dev/v1", "kind": "Machine",
            "metadata": v["metadata"].clone(), "spec": v["spec"].clone(),
        }))
        .unwrap()
    }

    fn member(claimed: bool) -> Machine {
        let mut labels = json!({labels::POOL: "warm"});
        if claimed {
            labels[labels::CLAIM] = json!("job");
        }
        machine(json!({
            "metadata": {"name": "warm-abcde", "labels": labels, "ownerReferences": [{
                "apiVersion": "kairon.zyvor.dev/v1", "kind": "MachinePool", "name": "warm", "uid": "u", "controller": true
            }]},
            "spec": {"sandbox": {"templateName": "busybox"}, "resources": {"cpu": "8", "memory": "64Gi"}},
        }))
    }

    #[test]
    fn a_running_machine_holds_the_larger_of_its_spec_and_what_its_node_started() {
        let started = |spec: serde_json::Value, status: serde_json::Value| -> Machine {
            let mut m = machine(json!({"metadata": {"name": "m"}, "spec": spec}));
            m.status = serde_json::from_value(status).unwrap();
            m
        };
        let shrunk = json!({"image": {"path": "/i"}, "resources": {"cpu": "1", "memory": "512Mi"}});
        let big = json!({"resources": {"cpu": "2", "memory": "2Gi"}});
        let m = started(shrunk.clone(), big);
        assert_eq!(effective_resources(&m), (2000, 2 << 30), "a shrink frees nothing before the next start");
        assert_eq!(charge(&m).cpu_millis, 2000);
        let grown = json!({"image": {"path": "/i"}, "resources": {"cpu": "4", "memory": "4Gi"}});
        let m = started(grown, json!({"resources": {"cpu": "2", "memory": "2Gi"}}));
        assert_eq!(effective_resources(&m), (4000, 4 << 30), "a growth is charged when asked for");
        assert_eq!(effective_resources(&started(shrunk, json!({}))), (1000, 512 << 20), "not started: its spec");
    }

    #[test]
    fn a_machine_holds_its_resources_or_the_template_limits() {
        let vm = machine(
            json!({"metadata": {"name": "vm"}, "spec": {"image": {"path": "/i"}, "resources": {"cpu": "2", "memory": "3Gi"}}}),
        );
        assert_eq!(
            charge(&vm),
            Charge { machines: 1, cpu_millis: 2000, memory_bytes: 3 << 30, warm_members: 0, storage_bytes: 0 }
        );
        let bare = machine(json!({"metadata": {"name": "vm"}, "spec": {"image": {"path": "/i"}}}));
        assert_eq!((charge(&bare).cpu_millis, charge(&bare).memory_bytes), (1000, 512 << 20));
        // A template sandbox's resources are its template's, whatever its spec says.
        assert_eq!(
            charge(&member(false)),
            Charge { machines: 1, cpu_millis: 1000, memory_bytes: 512 << 20, warm_members: 1, storage_bytes: 0 }
        );
        assert_eq!(charge(&member(true)).warm_members, 0, "a claimed member is not warm");
        // A pool label alone (a tenant's own Machine) makes no member.
        let labelled = machine(
            json!({"metadata": {"name": "x", "labels": {labels::POOL: "warm"}}, "spec": {"sandbox": {"templateName": "busybox"}}}),
        );
        assert_eq!(charge(&labelled).warm_members, 0);
        assert_eq!(total([&vm, &bare]).machines, 2);
    }

    #[test]
    fn a_write_is_refused_only_for_what_it_grows_beyond_a_limit() {
        let hard = QuotaAmounts {
            machines: Some(2),
            cpu: Some("2".into()),
            memory: None,
            warm_members: Some(0),
            storage: None,
            templates: None,
        };
        let limits = Limits::of(&hard);
        let one = Charge { machines: 1, cpu_millis: 1000, memory_bytes: 512 << 20, warm_members: 0, storage_bytes: 0 };
        assert_eq!(refusal("q", &limits, one, one + one), None, "at the limit fits");
        let message = refusal("q", &limits, one + one, one + one + one).unwrap();
        assert_eq!(
            message,
            "exceeded quota: q, requested: machines=1,cpu=1, used: machines=2,cpu=2, limited: machines=2,cpu=2: \
             delete Machines (or release claims) in this namespace, or ask an admin to raise the KaironQuota"
        );
        assert!(is_refusal(&message));
        // Over a limit lowered since: staying or shrinking is allowed, growing is not.
        let three = one + one + one;
        assert_eq!(refusal("q", &limits, three, three), None);
        assert_eq!(refusal("q", &limits, three, one + one), None);
        let warm = Charge { warm_members: 1, ..one };
        let message = refusal("q", &limits, one, one + warm).unwrap();
        assert!(message.contains("requested: warmMembers=1, used: warmMembers=0, limited: warmMembers=0"), "{message}");
        // Memory is not limited here: any amount fits.
        let big = Charge { memory_bytes: 1 << 40, ..Charge::default() };
        assert_eq!(refusal("q", &limits, one, one + big), None);
    }

    #[test]
    fn a_write_grows_when_any_amount_grows() {
        let one = Charge { machines: 1, cpu_millis: 1000, memory_bytes: 512 << 20, warm_members: 0, storage_bytes: 0 };
        assert!(!one.grows_from(&one), "the same");
        assert!(!Charge::default().grows_from(&one), "less of everything");
        assert!(Charge { cpu_millis: 2000, machines: 0, ..one }.grows_from(&one), "more CPU, though one Machine fewer");
        assert!(Charge { warm_members: 1, ..one }.grows_from(&one), "a member turned warm");
    }

    #[test]
    fn reservations_hold_their_share_until_the_machine_shows_them_or_they_lapse() {
        let now = Time("2026-01-01T00:00:00Z".parse().unwrap());
        let later = Time("2026-01-01T00:00:10Z".parse().unwrap());
        let stored = |uid: &str, rv: &str, cpu: &str| {
            machine(json!({"metadata": {"name": uid, "uid": uid, "resourceVersion": rv},
                           "spec": {"image": {"path": "/i"}, "resources": {"cpu": cpu}}}))
        };
        let two = Charge { machines: 1, cpu_millis: 2000, memory_bytes: 512 << 20, warm_members: 0, storage_bytes: 0 };
        let reserved = |uid: &str, replaces: Option<&str>| Reservation {
            uid: uid.into(),
            name: uid.into(),
            replaces: replaces.map(str::to_string),
            amounts: two.amounts(),
            expires: later.clone(),
        };
        let machines = [stored("a", "5", "1")];
        let none = BTreeSet::new();
        // A create: held until the Machine exists; an update: until the Machine has another
        // resourceVersion, or is gone; either lapses at its time.
        assert!(!reserved("new", None).spent(&machines, &none, &now));
        assert!(reserved("a", None).spent(&machines, &none, &now));
        assert!(!reserved("a", Some("5")).spent(&machines, &none, &now));
        assert!(reserved("a", Some("4")).spent(&machines, &none, &now));
        assert!(reserved("gone", Some("1")).spent(&machines, &none, &now));
        assert!(reserved("new", None).spent(&machines, &none, &later));

        // What each holds: the larger of the Machine and its update in flight, and the Machine
        // not stored yet.
        let held = held_by_uid(&machines, &[reserved("a", Some("5")), reserved("new", None)], &now);
        assert_eq!((held["a"], held["new"]), (two, two));
        let held = held_by_uid(&machines, &[reserved("a", Some("4"))], &now);
        assert_eq!((held["a"].cpu_millis, held.len()), (1000, 1), "a spent reservation holds nothing");
        // A template's reservation holds no Machine's share.
        let held = held_by_uid(&machines, &[Reservation::template("t", "t", &now)], &now);
        assert_eq!(held.len(), 1);
        assert_eq!(Charge::of(&two.amounts()), two);
    }

    #[test]
    fn templates_in_flight_count_until_stored_and_each_counts_once() {
        let now = Time("2026-01-01T00:00:00Z".parse().unwrap());
        let lapsed = Time("2026-01-01T00:01:00Z".parse().unwrap());
        let stored: BTreeSet<String> = ["a".to_string(), "b".to_string()].into();
        let ledger = [
            Reservation::template("b", "b", &now),
            Reservation::template("c", "c", &now),
            Reservation::template("c", "c", &now),
            Reservation::template("judged", "judged", &now),
        ];
        assert!(ledger[0].is_template() && ledger[0].spent(&[], &stored, &now), "b is stored");
        assert!(!ledger[1].spent(&[], &stored, &now) && ledger[1].spent(&[], &stored, &lapsed));
        // a, b stored; c in flight (twice in the ledger, one template); the one judged left out.
        assert_eq!(templates_held(&stored, &ledger, "judged", &now), 3);
        assert_eq!(templates_held(&stored, &ledger, "judged", &lapsed), 2, "a lapsed reservation holds nothing");
        assert!(template_refusal("q", &QuotaAmounts { templates: Some(3), ..Default::default() }, 3).is_some());
    }

    #[test]
    fn amounts_read_as_a_quota_writes_them() {
        let used =
            Charge { machines: 3, cpu_millis: 1500, memory_bytes: 1536 << 20, warm_members: 1, storage_bytes: 0 };
        let a = used.amounts();
        assert_eq!((a.cpu.unwrap().0, a.memory.unwrap().0), ("1500m".to_string(), "1536Mi".to_string()));
        let hard = QuotaAmounts {
            machines: Some(10),
            cpu: Some("8".into()),
            memory: Some("4Gi".into()),
            warm_members: None,
            storage: None,
            templates: None,
        };
        assert_eq!(summary(&Limits::of(&hard), used), "machines: 3/10, cpu: 1500m/8, memory: 1536Mi/4Gi");
        assert_eq!(summary(&Limits::default(), used), "no limits");
        assert_eq!(bytes(0), "0");
        assert_eq!(bytes(1000), "1000");
    }
}
