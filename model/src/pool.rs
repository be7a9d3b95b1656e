//! MachinePool: warm members ready to be claimed.

use std::collections::BTreeMap;

use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::machine::MachineSpec;
use crate::meta::Condition;

pub const DEFAULT_WARMUP_SECONDS: i64 = 30;

fn default_warmup_seconds() -> i64 {
    DEFAULT_WARMUP_SECONDS
}

/// Keeps `replicas` warm members, Running or Paused, for MachineClaims to take.
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema, ToSchema)]
#[kube(
    group = "kairon.zyvor.dev",
    version = "v1",
    kind = "MachinePool",
    namespaced,
    status = "MachinePoolStatus",
    shortname = "mpool",
    category = "kairon",
    doc = "A pool of warm Machines, Running or Paused, ready for a MachineClaim.",
    printcolumn(name = "Replicas", type_ = "integer", json_path = ".spec.replicas"),
    printcolumn(name = "Warm", type_ = "integer", json_path = ".status.warm"),
    printcolumn(name = "Claimed", type_ = "integer", json_path = ".status.claimed"),
    printcolumn(name = "Warm-State", type_ = "string", json_path = ".spec.warmPowerState"),
    printcolumn(name = "Age", type_ = "date", json_path = ".metadata.creationTimestamp")
)]
#[serde(rename_all = "camelCase")]
pub struct MachinePoolSpec {
    /// How many unclaimed members to keep.
    pub replicas: i32,
    /// The power state warm members wait in.
    #[serde(default)]
    pub warm_power_state: WarmPowerState,
    /// How long a member runs after booting before it is paused (Paused pools).
    #[serde(default = "default_warmup_seconds")]
    pub warmup_seconds: i64,
    /// What every member is made from.
    pub template: MachineTemplate,
    /// Size the pool from its claims: the pool controller then writes `replicas`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub autoscale: Option<PoolAutoscale>,
}

pub const DEFAULT_TARGET_HIT_RATE: f64 = 0.95;
pub const DEFAULT_WINDOW_SECONDS: i64 = 600;
pub const DEFAULT_SCALE_DOWN_DELAY_SECONDS: i64 = 300;

fn default_target_hit_rate() -> f64 {
    DEFAULT_TARGET_HIT_RATE
}
fn default_window_seconds() -> i64 {
    DEFAULT_WINDOW_SECONDS
}
fn default_scale_down_delay_seconds() -> i64 {
    DEFAULT_SCALE_DOWN_DELAY_SECONDS
}

/// How a pool sizes itself: the smallest `replicas` in `[minReplicas, maxReplicas]` expected to
/// serve `targetHitRate` of claims from a warm member, at the rate claims arrived over
/// `windowSeconds` (or faster lately) and the time a member takes to become warm; it shrinks only
/// after needing fewer members for `scaleDownDelaySeconds`.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, JsonSchema, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct PoolAutoscale {
    pub min_replicas: i32,
    pub max_replicas: i32,
    /// Share of claims to serve warm, in (0, 1].
    #[serde(default = "default_target_hit_rate")]
    pub target_hit_rate: f64,
    /// How far back claim arrivals count.
    #[serde(default = "default_window_seconds")]
    pub window_seconds: i64,
    /// How long the pool must need fewer members before it shrinks.
    #[serde(default = "default_scale_down_delay_seconds")]
    pub scale_down_delay_seconds: i64,
}

impl PoolAutoscale {
    pub fn bounds(&self) -> crate::autoscale::Bounds {
        crate::autoscale::Bounds {
            min_replicas: self.min_replicas,
            max_replicas: self.max_replicas,
            target_hit_rate: self.target_hit_rate,
            window_seconds: self.window_seconds,
            scale_down_delay_seconds: self.scale_down_delay_seconds,
        }
    }
}

#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema, ToSchema)]
pub enum WarmPowerState {
    #[default]
    Running,
    Paused,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct MachineTemplate {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata: Option<TemplateMeta>,
    pub spec: MachineSpec,
}

/// Labels and annotations copied onto every member.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct TemplateMeta {
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub labels: BTreeMap<String, String>,
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub annotations: BTreeMap<String, String>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct MachinePoolStatus {
    /// Unclaimed members, in any phase.
    #[serde(default)]
    pub replicas: i32,
    /// Unclaimed members that have booted (Running or Paused).
    #[serde(default)]
    pub ready: i32,
    /// Unclaimed members warmed up and in the warm power state: what a claim can take now.
    #[serde(default)]
    pub warm: i32,
    /// Members bound to a claim.
    #[serde(default)]
    pub claimed: i32,
    /// Share of the claims that arrived over the autoscale window (10 minutes without autoscale)
    /// and were served by a warm member; absent before any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hit_rate: Option<f64>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
}
