//! Quota at admission: a write that makes a namespace's Machines hold more (a new Machine, more
//! CPU or memory, a warm pool member) is stored only if every KaironQuota of the namespace still
//! fits, judged inside the write's transaction (`kairon_db::Guard`), so racing writes cannot
//! together pass a limit that each alone fits.

use serde::Deserialize;
use serde_json::Value;

use kairon_db::Guard;
use kairon_model::quota::{self, Charge, Limits};
use kairon_model::{GROUP, KaironQuota, Machine};
use kube::ResourceExt;

fn charge_of(v: &Value) -> Option<Charge> {
    Machine::deserialize(v).ok().map(|m| quota::charge(&m))
}

/// The guard for creating a KaironTemplate in `namespace`: one more template than the namespace
/// has must fit every KaironQuota's `templates`.
pub(super) fn template_guard(namespace: &str) -> Guard<'_> {
    Guard {
        namespace,
        limits: (GROUP, "kaironquotas"),
        counted: (GROUP, "kairontemplates"),
        replaces: None,
        judge: Box::new(move |quotas, templates| {
            quotas
                .iter()
                .filter_map(|q| KaironQuota::deserialize(q).ok())
                .find_map(|q| quota::template_refusal(&q.name_any(), &q.spec.hard, templates.len() as i64))
        }),
    }
}

/// The guard for writing Machine `new` over `stored` (None: a create) in `namespace`, or None
/// when the write makes the namespace hold no more of anything.
pub(super) fn guard<'a>(namespace: &'a str, name: &'a str, stored: Option<&Value>, new: &Value) -> Option<Guard<'a>> {
    let after = charge_of(new)?;
    let before = stored.and_then(charge_of).unwrap_or_default();
    if !after.grows_from(&before) {
        return None;
    }
    Some(Guard {
        namespace,
        limits: (GROUP, "kaironquotas"),
        counted: (GROUP, "machines"),
        replaces: stored.map(|_| name),
        judge: Box::new(move |quotas, machines| {
            let others: Charge = machines.iter().filter_map(charge_of).sum();
            quotas
                .iter()
                .filter_map(|q| KaironQuota::deserialize(q).ok())
                .find_map(|q| quota::refusal(&q.name_any(), &Limits::of(&q.spec.hard), others + before, others + after))
        }),
    })
}
