//! KaironTemplate: a sandbox template a namespace builds for itself from an OCI image and build
//! steps, beside the admin's shared templates that are built per node
//! (`POST /api/v1/nodes/{node}/templates`). A Machine of the namespace that names it in
//! `spec.sandbox.templateName` gets it, shadowing a shared template of the same name in that
//! namespace only; no other namespace sees or uses it. Nodes build it on demand (the pull obeys
//! the node's egress policy) under a node-side name of its own ([`node_template_name`]).

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::meta::Condition;

/// The most build steps one template takes (the runtime's own limit).
pub const MAX_BUILD_STEPS: usize = 64;
/// The longest image reference and build step accepted.
pub const MAX_IMAGE_LEN: usize = 1024;
pub const MAX_STEP_LEN: usize = 16 << 10;
/// The prefix of node-side names of namespaced templates: an admin's shared template may not
/// start with it.
pub const NODE_NAME_PREFIX: &str = "tenant.";

/// A namespace's own sandbox template: an image plus build steps.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema, ToSchema)]
#[kube(
    group = "kairon.zyvor.dev",
    version = "v1",
    kind = "KaironTemplate",
    namespaced,
    status = "KaironTemplateStatus",
    shortname = "ktemplate",
    category = "kairon",
    doc = "A sandbox template of one namespace, built from an OCI image and build steps on the nodes that run its Machines.",
    printcolumn(name = "Image", type_ = "string", json_path = ".spec.image"),
    printcolumn(name = "Phase", type_ = "string", json_path = ".status.phase"),
    printcolumn(name = "Age", type_ = "date", json_path = ".metadata.creationTimestamp")
)]
#[serde(rename_all = "camelCase")]
pub struct KaironTemplateSpec {
    /// The OCI image to start from, e.g. `docker.io/library/python:3.12-slim`. A registry the
    /// node's config does not name is reached under the node's egress policy: never at a private
    /// address.
    pub image: String,
    /// Shell commands (`/bin/sh -c`) run in order as root over the image, with the node's guest
    /// network; what they change becomes the template's top layer.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub steps: Vec<String>,
}

/// Where a template's builds stand.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema, ToSchema)]
pub enum TemplatePhase {
    /// No node has built it yet.
    #[default]
    Pending,
    Building,
    /// Built on at least one node.
    Ready,
    /// Its last build failed (see `message`): fix the spec, or delete and create it again.
    Failed,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct KaironTemplateStatus {
    #[serde(default)]
    pub phase: TemplatePhase,
    /// What the last build said: its progress, or why it failed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
    /// Each node's build.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub nodes: Vec<TemplateNodeBuild>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
}

/// A template's build on one node.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct TemplateNodeBuild {
    pub node: String,
    pub phase: TemplatePhase,
    #[serde(default)]
    pub bytes_done: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bytes_total: Option<u64>,
    #[serde(default)]
    pub steps_done: u32,
    /// The image's digest, once pulled.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub digest: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub message: Option<String>,
}

/// The runtime's name of a namespace's template on a node: apart from every shared template
/// (whose names may not start with [`NODE_NAME_PREFIX`]) and from every other namespace's
/// (namespaces and template names are DNS labels, without dots). The UID's first 8 characters
/// tell a template from one of the same name deleted before it: a node never starts a Machine
/// from what an older spec built.
pub fn node_template_name(ns: &str, name: &str, uid: &str) -> String {
    let uid: String = uid.chars().filter(char::is_ascii_alphanumeric).take(8).collect::<String>().to_lowercase();
    format!("{NODE_NAME_PREFIX}{ns}.{name}.{uid}")
}

/// A template's phase and message from its nodes' builds: Ready once built anywhere, else the
/// build under way, else the failure; Pending with none. Whoever writes `status.nodes` writes
/// these with it (and the api checks a node agent's write agrees).
pub fn summarize(nodes: &[TemplateNodeBuild]) -> (TemplatePhase, Option<String>) {
    let ready: Vec<&str> = nodes.iter().filter(|n| n.phase == TemplatePhase::Ready).map(|n| n.node.as_str()).collect();
    if !ready.is_empty() {
        return (TemplatePhase::Ready, Some(format!("built on {}", ready.join(", "))));
    }
    for phase in [TemplatePhase::Building, TemplatePhase::Failed] {
        if let Some(n) = nodes.iter().find(|n| n.phase == phase) {
            return (phase, n.message.clone());
        }
    }
    (TemplatePhase::Pending, None)
}

/// Which of `nodes` builds a new template as soon as it exists (others build it when a Machine
/// of it lands on them): the highest of a hash of the template's UID and each node's name, so
/// every node agent agrees without asking, and templates spread over the nodes.
pub fn first_builder<'a>(uid: &str, nodes: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    // FNV-1a: stable across builds and versions, unlike std's hasher.
    let score = |node: &str| {
        uid.bytes()
            .chain([0])
            .chain(node.bytes())
            .fold(0xcbf2_9ce4_8422_2325_u64, |h, b| (h ^ u64::from(b)).wrapping_mul(0x100_0000_01b3))
    };
    nodes.into_iter().max_by_key(|n| (score(n), *n))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_first_builder_whatever_the_order_and_the_phase_follows_the_builds() {
        let nodes = ["a", "b", "c"];
        let first = first_builder("uid-1", nodes).unwrap();
        assert_eq!(first_builder("uid-1", nodes.iter().rev().copied()), Some(first));
        let spread: std::collections::BTreeSet<_> =
            (0..32).filter_map(|i| first_builder(&format!("uid-{i}"), nodes)).collect();
        assert_eq!(spread.len(), 3, "templates spread over the nodes");
        assert_eq!(first_builder("uid-1", []), None);

        let build = |node: &str, phase, message: &str| TemplateNodeBuild {
            node: node.into(),
            phase,
            message: Some(message.into()),
            ..Default::default()
        };
        assert_eq!(summarize(&[]), (TemplatePhase::Pending, None));
        let failed = build("a", TemplatePhase::Failed, "step 1 exited with code 2");
        let building = build("b", TemplatePhase::Building, "pulling");
        assert_eq!(summarize(std::slice::from_ref(&failed)).0, TemplatePhase::Failed);
        assert_eq!(summarize(&[failed.clone(), building.clone()]), (TemplatePhase::Building, Some("pulling".into())));
        let ready = build("c", TemplatePhase::Ready, "");
        assert_eq!(summarize(&[failed, building, ready]), (TemplatePhase::Ready, Some("built on c".into())));
    }

    #[test]
    fn node_names_are_dns_subdomains_apart_from_shared_ones() {
        let n = node_template_name("team-a", "py312", "0b4fd7c2-9a1e-4c1a-8f7e-2d5b6c7a8e9f");
        assert_eq!(n, "tenant.team-a.py312.0b4fd7c2");
        assert!(crate::validate::is_dns_subdomain(&n));
        let longest = node_template_name(&"a".repeat(63), &"b".repeat(63), "C0FFEE11-2222");
        assert!(crate::validate::is_dns_subdomain(&longest), "{longest}");
    }
}
