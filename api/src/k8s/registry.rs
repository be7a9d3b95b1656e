//! What the Kubernetes-compatible API serves: each resource type, its names, its printer
//! columns, its schema and the admission function that normalises and validates it.

use std::collections::BTreeMap;

use k8s_openapi::apiextensions_apiserver::pkg::apis::apiextensions::v1::CustomResourceDefinition;
use serde_json::{Value, json};

use super::admit::{self, Admit};
use super::status::Qualified;

/// One printer column (`kubectl get`), as a CRD declares it.
#[derive(Clone, Debug)]
pub struct Column {
    pub name: String,
    pub type_: String,
    pub format: String,
    pub description: String,
    pub priority: i32,
    pub json_path: String,
}

/// How a served resource maps onto the store.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum View {
    /// Stored as served.
    Native,
    /// Core `v1` Events: a view of the `events.k8s.io/v1` objects, converted on the way.
    CoreEvents,
    /// Core `v1` Namespaces: implicit in embedded mode, plus any created explicitly.
    Namespaces,
    /// Core `v1` Secrets: stored as served, but a viewer reads them without `data`.
    Secrets,
}

#[derive(Clone)]
pub struct ResourceType {
    pub group: &'static str,
    pub versions: Vec<&'static str>,
    pub kind: &'static str,
    pub plural: &'static str,
    pub singular: &'static str,
    pub namespaced: bool,
    pub short_names: Vec<String>,
    pub categories: Vec<String>,
    pub status_subresource: bool,
    /// Takes strategic merge patches, as a built-in kind does (a CRD does not).
    pub strategic_merge: bool,
    pub columns: Vec<Column>,
    /// The openAPIV3Schema of the object, for `/openapi/v3`.
    pub schema: Value,
    pub admit: Admit,
    pub view: View,
}

impl ResourceType {
    pub fn storage_version(&self) -> &'static str {
        self.versions[0]
    }

    /// `kairon.zyvor.dev/v1`, or `v1` for the core group.
    pub fn api_version(&self, version: &str) -> String {
        if self.group.is_empty() { version.to_string() } else { format!("{}/{version}", self.group) }
    }

    /// Where objects live in the store (group, resource).
    pub fn store_key(&self) -> (&'static str, &'static str) {
        match self.view {
            View::CoreEvents => ("events.k8s.io", "events"),
            _ => (self.group, self.plural),
        }
    }

    pub fn qualified(&self) -> Qualified {
        Qualified { group: self.group.to_string(), plural: self.plural.to_string(), kind: self.kind.to_string() }
    }

    fn from_crd(crd: CustomResourceDefinition, admit: Admit) -> Self {
        let leak = |s: String| -> &'static str { Box::leak(s.into_boxed_str()) };
        let names = crd.spec.names;
        let version = crd.spec.versions.first();
        let columns = version
            .and_then(|v| v.additional_printer_columns.clone())
            .unwrap_or_default()
            .into_iter()
            .map(|c| Column {
                name: c.name,
                type_: c.type_,
                format: c.format.unwrap_or_default(),
                description: c.description.unwrap_or_default(),
                priority: c.priority.unwrap_or(0),
                json_path: c.json_path,
            })
            .collect();
        let schema = version
            .and_then(|v| v.schema.as_ref())
            .and_then(|s| s.open_api_v3_schema.as_ref())
            .and_then(|s| serde_json::to_value(s).ok())
            .unwrap_or_else(|| json!({"type": "object"}));
        ResourceType {
            group: leak(crd.spec.group),
            versions: crd.spec.versions.iter().map(|v| leak(v.name.clone())).collect(),
            kind: leak(names.kind),
            plural: leak(names.plural),
            singular: leak(names.singular.unwrap_or_default()),
            namespaced: crd.spec.scope == "Namespaced",
            short_names: names.short_names.unwrap_or_default(),
            categories: names.categories.unwrap_or_default(),
            status_subresource: true,
            strategic_merge: false,
            columns,
            schema,
            admit,
            view: View::Native,
        }
    }

    fn builtin(
        group: &'static str,
        version: &'static str,
        kind: &'static str,
        plural: &'static str,
        admit: Admit,
    ) -> Self {
        ResourceType {
            group,
            versions: vec![version],
            kind,
            plural,
            singular: Box::leak(kind.to_lowercase().into_boxed_str()),
            namespaced: true,
            short_names: vec![],
            categories: vec![],
            status_subresource: false,
            strategic_merge: true,
            columns: vec![],
            schema: json!({"type": "object", "x-kubernetes-preserve-unknown-fields": true}),
            admit,
            view: View::Native,
        }
    }
}

/// Every served resource, indexed by (group, plural).
pub struct Registry {
    pub types: Vec<ResourceType>,
    index: BTreeMap<(String, String), usize>,
}

impl Registry {
    pub fn new() -> Self {
        let crds = kairon_model::crds::all();
        // In the order of `kairon_model::crds::all()`.
        let admits: [Admit; 6] =
            [admit::machine, admit::pool, admit::claim, admit::node, admit::quota, admit::template];
        let mut types: Vec<ResourceType> =
            crds.into_iter().zip(admits).map(|(crd, admit)| ResourceType::from_crd(crd, admit)).collect();

        types.push(ResourceType::builtin("events.k8s.io", "v1", "Event", "events", admit::event));
        let mut leases = ResourceType::builtin("coordination.k8s.io", "v1", "Lease", "leases", admit::lease);
        let column = |name: &str, type_: &str, description: &str, json_path: &str| Column {
            name: name.into(),
            type_: type_.into(),
            format: String::new(),
            description: description.into(),
            priority: 0,
            json_path: json_path.into(),
        };
        leases.columns = vec![
            column("Holder", "string", "The holder of the lease", ".spec.holderIdentity"),
            column("Age", "date", "When the lease was created", ".metadata.creationTimestamp"),
        ];
        types.push(leases);
        let mut core_events = ResourceType::builtin("", "v1", "Event", "events", admit::core_event);
        core_events.view = View::CoreEvents;
        core_events.short_names = vec!["ev".into()];
        types.push(core_events);
        let mut namespaces = ResourceType::builtin("", "v1", "Namespace", "namespaces", admit::namespace);
        namespaces.namespaced = false;
        namespaces.short_names = vec!["ns".into()];
        namespaces.view = View::Namespaces;
        namespaces.columns = vec![Column {
            name: "Status".into(),
            type_: "string".into(),
            format: String::new(),
            description: "The phase of the namespace".into(),
            priority: 0,
            json_path: ".status.phase".into(),
        }];
        types.push(namespaces);
        let mut secrets = ResourceType::builtin("", "v1", "Secret", "secrets", admit::secret);
        secrets.view = View::Secrets;
        secrets.strategic_merge = false;
        types.push(secrets);

        let index = types.iter().enumerate().map(|(i, t)| ((t.group.to_string(), t.plural.to_string()), i)).collect();
        Registry { types, index }
    }

    pub fn get(&self, group: &str, plural: &str) -> Option<&ResourceType> {
        self.index.get(&(group.to_string(), plural.to_string())).map(|&i| &self.types[i])
    }

    /// The API groups other than core, each with its versions, in a stable order.
    pub fn groups(&self) -> Vec<(&'static str, Vec<&'static str>)> {
        let mut out: Vec<(&'static str, Vec<&'static str>)> = Vec::new();
        for t in self.types.iter().filter(|t| !t.group.is_empty()) {
            match out.iter_mut().find(|(g, _)| *g == t.group) {
                Some((_, vs)) => {
                    for v in &t.versions {
                        if !vs.contains(v) {
                            vs.push(v);
                        }
                    }
                }
                None => out.push((t.group, t.versions.clone())),
            }
        }
        out
    }

    /// The resources served in one group version.
    pub fn in_group_version<'a>(&'a self, group: &'a str, version: &'a str) -> impl Iterator<Item = &'a ResourceType> {
        self.types.iter().filter(move |t| t.group == group && t.versions.contains(&version))
    }
}

impl Default for Registry {
    fn default() -> Self {
        Self::new()
    }
}
