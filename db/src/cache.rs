//! The watch cache: every stored object as of a revision, kept by the watch listener as it
//! publishes the revision log, so reads are served from memory instead of PostgreSQL.
//!
//! A read that must see every committed write (`resourceVersion=""`, [`Freshness::Latest`])
//! first reads the store's current revision (one tiny query) and is served by the cache once
//! it has applied that revision, as Kubernetes serves consistent reads from its watch cache;
//! a read that accepts any recent state (`resourceVersion=0`, [`Freshness::Any`]) is served at
//! once. The entries are the feed's own events (shared, not copied).

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::sync::Arc;

use crate::{EventType, WatchEvent};

/// How recent a read must be.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Freshness {
    /// Every write committed before the read began (Kubernetes' `resourceVersion=""`).
    #[default]
    Latest,
    /// Whatever the cache holds now, which may trail the latest commits by the listener's
    /// delay (Kubernetes' `resourceVersion=0`).
    Any,
    /// At least this revision: a writer that names the resourceVersion it read needs no newer
    /// view to find out whether the object still has it (its write's precondition decides).
    AtLeast(i64),
}

type Kind = (String, String);
type Key = (String, String);
/// (kind, namespace, label key, label value).
type Label = (Kind, String, String, String);

/// Objects by kind, then by (namespace, name) in list order; and by label.
#[derive(Default)]
pub(crate) struct Cache {
    /// The revision the entries reflect; `None` until loaded, and after a gap in the feed
    /// until loaded again (reads then go to the database).
    rv: Option<i64>,
    kinds: HashMap<Kind, BTreeMap<Key, Arc<WatchEvent>>>,
    /// The names carrying each label, so finding a pool's members does not read a namespace
    /// whole. Kept with the entries: each entry's labels are read once, when it is applied.
    labelled: HashMap<Label, BTreeSet<String>>,
}

/// Just the labels of a stored object (the rest of its text is skipped, not built).
#[derive(serde::Deserialize)]
struct Labels {
    #[serde(default)]
    metadata: LabelsMeta,
}

#[derive(serde::Deserialize, Default)]
struct LabelsMeta {
    #[serde(default)]
    labels: Option<BTreeMap<String, String>>,
}

fn labels_of(ev: &WatchEvent) -> BTreeMap<String, String> {
    serde_json::from_str::<Labels>(&ev.object_json).ok().and_then(|l| l.metadata.labels).unwrap_or_default()
}

impl Cache {
    pub(crate) fn rv(&self) -> Option<i64> {
        self.rv
    }

    /// Replaces the contents with a snapshot taken at `rv`.
    pub(crate) fn load(&mut self, rv: i64, objects: Vec<WatchEvent>) {
        self.kinds.clear();
        self.labelled.clear();
        for ev in objects {
            self.insert(Arc::new(ev));
        }
        self.rv = Some(rv);
    }

    /// Forgets everything: the feed skipped revisions, so the entries can no longer be trusted.
    pub(crate) fn invalidate(&mut self) {
        self.rv = None;
        self.kinds.clear();
        self.labelled.clear();
    }

    /// Applies the next event of the feed (one the loaded snapshot already holds is skipped).
    pub(crate) fn apply(&mut self, ev: &Arc<WatchEvent>) {
        let Some(rv) = self.rv else { return };
        if ev.rv <= rv {
            return;
        }
        match ev.event_type {
            EventType::Deleted => self.remove(ev),
            EventType::Added | EventType::Modified => self.insert(Arc::clone(ev)),
        }
        self.rv = Some(ev.rv);
    }

    fn insert(&mut self, ev: Arc<WatchEvent>) {
        let kind = (ev.group.clone(), ev.resource.clone());
        let labels = labels_of(&ev);
        for (key, value) in &labels {
            let label = (kind.clone(), ev.namespace.clone(), key.clone(), value.clone());
            self.labelled.entry(label).or_default().insert(ev.name.clone());
        }
        let replaced = self.kinds.entry(kind).or_default().insert((ev.namespace.clone(), ev.name.clone()), ev);
        if let Some(old) = replaced {
            let kept = |k: &String, v: &String| labels.get(k) == Some(v);
            self.unlabel(&old, kept);
        }
    }

    fn remove(&mut self, ev: &WatchEvent) {
        let kind = (ev.group.clone(), ev.resource.clone());
        let Some(objects) = self.kinds.get_mut(&kind) else { return };
        let removed = objects.remove(&(ev.namespace.clone(), ev.name.clone()));
        if objects.is_empty() {
            self.kinds.remove(&kind);
        }
        if let Some(old) = removed {
            self.unlabel(&old, |_, _| false);
        }
    }

    /// Drops `old`'s entries from the label index, but for the labels `kept` says it still has.
    fn unlabel(&mut self, old: &WatchEvent, kept: impl Fn(&String, &String) -> bool) {
        let kind = (old.group.clone(), old.resource.clone());
        for (key, value) in labels_of(old) {
            if kept(&key, &value) {
                continue;
            }
            let label = (kind.clone(), old.namespace.clone(), key, value);
            if let Some(names) = self.labelled.get_mut(&label) {
                names.remove(&old.name);
                if names.is_empty() {
                    self.labelled.remove(&label);
                }
            }
        }
    }

    /// The objects of a kind in `namespace` labelled `key` = `value`, in name order.
    pub(crate) fn labelled(
        &self,
        (group, resource): (&str, &str),
        namespace: &str,
        key: &str,
        value: &str,
    ) -> Vec<Arc<str>> {
        let kind = (group.to_owned(), resource.to_owned());
        let label = (kind, namespace.to_owned(), key.to_owned(), value.to_owned());
        let (Some(names), Some(objects)) = (self.labelled.get(&label), self.kinds.get(&label.0)) else {
            return Vec::new();
        };
        names
            .iter()
            .filter_map(|name| objects.get(&(namespace.to_owned(), name.clone())))
            .map(|ev| Arc::clone(&ev.object_json))
            .collect()
    }

    pub(crate) fn get(&self, group: &str, resource: &str, namespace: &str, name: &str) -> Option<Arc<str>> {
        let objects = self.kinds.get(&(group.to_owned(), resource.to_owned()))?;
        objects.get(&(namespace.to_owned(), name.to_owned())).map(|ev| Arc::clone(&ev.object_json))
    }

    /// Up to `fetch` objects of a kind (in one namespace, or all) after `after` in
    /// (namespace, name) order, with their keys.
    pub(crate) fn list(
        &self,
        group: &str,
        resource: &str,
        namespace: Option<&str>,
        after: (&str, &str),
        fetch: Option<usize>,
    ) -> Vec<(Key, Arc<str>)> {
        let Some(objects) = self.kinds.get(&(group.to_owned(), resource.to_owned())) else { return Vec::new() };
        // Every stored name is non-empty, so ("", "") sorts before all entries.
        let start = match namespace {
            Some(ns) if ns > after.0 => (ns.to_owned(), String::new()),
            _ => (after.0.to_owned(), after.1.to_owned()),
        };
        objects
            .range((std::ops::Bound::Excluded(start), std::ops::Bound::Unbounded))
            .take_while(|((ns, _), _)| namespace.is_none_or(|want| want == ns))
            .take(fetch.unwrap_or(usize::MAX))
            .map(|(key, ev)| (key.clone(), Arc::clone(&ev.object_json)))
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ev(rv: i64, ns: &str, name: &str, event_type: EventType) -> WatchEvent {
        WatchEvent {
            rv,
            group: "g".into(),
            resource: "r".into(),
            namespace: ns.into(),
            name: name.into(),
            event_type,
            object_json: format!("{{\"rv\":{rv}}}").into(),
        }
    }

    fn names(c: &Cache, ns: Option<&str>, after: (&str, &str), fetch: Option<usize>) -> Vec<String> {
        c.list("g", "r", ns, after, fetch).into_iter().map(|((ns, n), _)| format!("{ns}/{n}")).collect()
    }

    #[test]
    fn applies_the_feed_after_its_snapshot_and_lists_in_key_order() {
        let mut c = Cache::default();
        // Not loaded: the feed is not applied.
        c.apply(&Arc::new(ev(1, "a", "x", EventType::Added)));
        assert_eq!((c.rv(), c.get("g", "r", "a", "x")), (None, None));
        c.load(3, vec![ev(2, "b", "y", EventType::Added), ev(3, "a", "x", EventType::Added)]);
        // Events the snapshot holds are skipped; later ones applied.
        c.apply(&Arc::new(ev(3, "a", "x", EventType::Deleted)));
        assert_eq!(c.get("g", "r", "a", "x").as_deref(), Some("{\"rv\":3}"));
        c.apply(&Arc::new(ev(4, "a", "z", EventType::Added)));
        c.apply(&Arc::new(ev(5, "b", "y", EventType::Modified)));
        c.apply(&Arc::new(ev(6, "c", "w", EventType::Added)));
        c.apply(&Arc::new(ev(7, "a", "x", EventType::Deleted)));
        assert_eq!(c.rv(), Some(7));
        assert_eq!(c.get("g", "r", "a", "x"), None);
        assert_eq!(c.get("g", "r", "b", "y").as_deref(), Some("{\"rv\":5}"));
        assert_eq!(names(&c, None, ("", ""), None), ["a/z", "b/y", "c/w"]);
        assert_eq!(names(&c, Some("b"), ("", ""), None), ["b/y"]);
        assert_eq!(names(&c, None, ("a", "z"), Some(1)), ["b/y"]);
        assert_eq!(names(&c, Some("a"), ("a", "z"), None), Vec::<String>::new());
        assert_eq!(names(&c, Some("c"), ("a", "z"), None), ["c/w"]);
        c.invalidate();
        assert_eq!((c.rv(), c.get("g", "r", "b", "y")), (None, None));
    }

    fn labelled(rv: i64, name: &str, labels: serde_json::Value, event_type: EventType) -> Arc<WatchEvent> {
        let object = serde_json::json!({"metadata": {"name": name, "labels": labels}, "rv": rv});
        Arc::new(WatchEvent { object_json: object.to_string().into(), ..ev(rv, "a", name, event_type) })
    }

    fn found(c: &Cache, ns: &str, key: &str, value: &str) -> Vec<String> {
        let texts = c.labelled(("g", "r"), ns, key, value);
        texts
            .iter()
            .map(|t| {
                serde_json::from_str::<serde_json::Value>(t).unwrap()["metadata"]["name"].as_str().unwrap().to_owned()
            })
            .collect()
    }

    #[test]
    fn the_label_index_follows_every_change_of_labels() {
        let mut c = Cache::default();
        c.load(0, Vec::new());
        c.apply(&labelled(1, "m1", serde_json::json!({"pool": "p", "warm": "yes"}), EventType::Added));
        c.apply(&labelled(2, "m0", serde_json::json!({"pool": "p"}), EventType::Added));
        c.apply(&labelled(3, "m2", serde_json::json!({"pool": "q"}), EventType::Added));
        assert_eq!(found(&c, "a", "pool", "p"), ["m0", "m1"]);
        assert_eq!(found(&c, "b", "pool", "p"), Vec::<String>::new(), "another namespace");
        // A label changed, one kept, one dropped.
        c.apply(&labelled(4, "m1", serde_json::json!({"pool": "p", "claim": "c"}), EventType::Modified));
        assert_eq!(found(&c, "a", "warm", "yes"), Vec::<String>::new());
        assert_eq!(found(&c, "a", "claim", "c"), ["m1"]);
        assert_eq!(found(&c, "a", "pool", "p"), ["m0", "m1"]);
        // Moved to another pool; then deleted; an object without labels.
        c.apply(&labelled(5, "m0", serde_json::json!({"pool": "q"}), EventType::Modified));
        assert_eq!(
            (found(&c, "a", "pool", "p"), found(&c, "a", "pool", "q")),
            (vec!["m1".to_owned()], vec!["m0".to_owned(), "m2".to_owned()])
        );
        c.apply(&labelled(6, "m1", serde_json::json!({"pool": "p", "claim": "c"}), EventType::Deleted));
        assert_eq!(
            (found(&c, "a", "pool", "p"), found(&c, "a", "claim", "c")),
            (Vec::<String>::new(), Vec::<String>::new())
        );
        c.apply(&Arc::new(ev(7, "a", "m2", EventType::Modified)));
        assert_eq!(found(&c, "a", "pool", "q"), ["m0"]);
        assert!(
            c.labelled.keys().all(|(_, _, k, v)| (k.as_str(), v.as_str()) == ("pool", "q")),
            "no empty entries left"
        );
    }
}
