//! Schemas of the Kubernetes objects as the REST API sends them. The objects themselves come from
//! kube's derive (with `ObjectMeta`, which has no schema of its own here); these document the
//! same JSON so generated clients get typed specs and statuses.

#![allow(dead_code)] // Only their schemas are used.

use serde::Serialize;
use utoipa::ToSchema;

use kairon_model::{
    KaironNodeSpec, KaironNodeStatus, KaironTemplateSpec, KaironTemplateStatus, MachineClaimSpec, MachineClaimStatus,
    MachinePoolSpec, MachinePoolStatus, MachineSpec, MachineStatus,
};

/// Kubernetes object metadata: `name`, `namespace`, `labels`, `annotations`, `uid`,
/// `resourceVersion`, `creationTimestamp`, `deletionTimestamp`, `ownerReferences`, `finalizers`.
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ObjectMeta {
    pub name: Option<String>,
    pub namespace: Option<String>,
    pub uid: Option<String>,
    pub resource_version: Option<String>,
    pub generation: Option<i64>,
    pub creation_timestamp: Option<String>,
    pub deletion_timestamp: Option<String>,
    pub labels: Option<std::collections::BTreeMap<String, String>>,
    pub annotations: Option<std::collections::BTreeMap<String, String>>,
    pub finalizers: Option<Vec<String>>,
    #[schema(value_type = Option<Vec<Object>>)]
    pub owner_references: Option<Vec<serde_json::Value>>,
}

/// What changed in a watch: `ADDED`, `MODIFIED`, `DELETED`, `BOOKMARK` (only a version), or
/// `ERROR` (the object is then a `Status`; code 410: the version is too old, watch again without one).
#[derive(Serialize, ToSchema)]
pub enum WatchEventType {
    #[serde(rename = "ADDED")]
    Added,
    #[serde(rename = "MODIFIED")]
    Modified,
    #[serde(rename = "DELETED")]
    Deleted,
    #[serde(rename = "BOOKMARK")]
    Bookmark,
    #[serde(rename = "ERROR")]
    Error,
}

macro_rules! watch_event_schema {
    ($event:ident, $doc:ident, $name:literal) => {
        #[derive(Serialize, ToSchema)]
        #[doc = concat!("One line of a watch of ", $name, "s (`application/x-ndjson`).")]
        pub struct $event {
            #[serde(rename = "type")]
            pub type_: WatchEventType,
            #[doc = concat!("The ", $name, " as it is now (as it was last, for `DELETED`).")]
            pub object: $doc,
        }
    };
}

macro_rules! paste_watch {
    (Machine, $name:literal) => {
        watch_event_schema!(MachineWatchEvent, Machine, $name);
    };
    (MachinePool, $name:literal) => {
        watch_event_schema!(MachinePoolWatchEvent, MachinePool, $name);
    };
    (MachineClaim, $name:literal) => {
        watch_event_schema!(MachineClaimWatchEvent, MachineClaim, $name);
    };
    (KaironTemplate, $name:literal) => {
        watch_event_schema!(KaironTemplateWatchEvent, KaironTemplate, $name);
    };
    (KaironNode, $name:literal) => {
        watch_event_schema!(KaironNodeWatchEvent, KaironNode, $name);
    };
}

macro_rules! object_schema {
    ($doc:ident, $name:literal, $spec:ty, $status:ty, $list:ident, $list_name:literal) => {
        #[derive(Serialize, ToSchema)]
        #[schema(as = $doc)]
        #[serde(rename_all = "camelCase")]
        #[doc = concat!("A ", $name, " (`kairon.zyvor.dev/v1`), the same JSON as the Kubernetes object.")]
        pub struct $doc {
            /// `kairon.zyvor.dev/v1` (filled in when omitted).
            pub api_version: Option<String>,
            #[doc = concat!("`", $name, "` (filled in when omitted).")]
            pub kind: Option<String>,
            pub metadata: ObjectMeta,
            pub spec: $spec,
            pub status: Option<$status>,
        }

        paste_watch!($doc, $name);

        #[derive(Serialize, ToSchema)]
        #[doc = concat!("A list of ", $name, "s.")]
        pub struct $list {
            pub items: Vec<$doc>,
        }
    };
}

object_schema!(Machine, "Machine", MachineSpec, MachineStatus, MachineList, "MachineList");
object_schema!(MachinePool, "MachinePool", MachinePoolSpec, MachinePoolStatus, MachinePoolList, "MachinePoolList");
object_schema!(
    MachineClaim,
    "MachineClaim",
    MachineClaimSpec,
    MachineClaimStatus,
    MachineClaimList,
    "MachineClaimList"
);
object_schema!(
    KaironTemplate,
    "KaironTemplate",
    KaironTemplateSpec,
    KaironTemplateStatus,
    KaironTemplateList,
    "KaironTemplateList"
);
object_schema!(KaironNode, "KaironNode", KaironNodeSpec, KaironNodeStatus, KaironNodeList, "KaironNodeList");

/// An Event about an object (`events.k8s.io/v1`).
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Event {
    pub metadata: ObjectMeta,
    /// `Normal` or `Warning`.
    #[serde(rename = "type")]
    pub type_: Option<String>,
    pub reason: Option<String>,
    pub note: Option<String>,
    pub action: Option<String>,
    pub event_time: Option<String>,
    pub series: Option<EventSeries>,
    pub reporting_controller: Option<String>,
    #[schema(value_type = Object)]
    pub regarding: Option<serde_json::Value>,
}

#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct EventSeries {
    pub count: i32,
    pub last_observed_time: String,
}

#[derive(Serialize, ToSchema)]
pub struct EventList {
    pub items: Vec<Event>,
}
