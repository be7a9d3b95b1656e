//! The Machine: a VM or lightweight sandbox, its lifecycle and its power states.

use std::collections::BTreeMap;

use k8s_openapi::apimachinery::pkg::apis::meta::v1::Time;
use kube::CustomResource;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use crate::meta::Condition;
use crate::quantity::Quantity;

/// A Machine: a VM (`spec.image`) or a sandbox (`spec.sandbox`).
#[derive(CustomResource, Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema, ToSchema)]
#[kube(
    group = "kairon.zyvor.dev",
    version = "v1",
    kind = "Machine",
    namespaced,
    status = "MachineStatus",
    shortname = "mach",
    category = "kairon",
    doc = "A VM or lightweight sandbox that an agent or a developer uses for a while.",
    printcolumn(name = "Phase", type_ = "string", json_path = ".status.phase"),
    printcolumn(name = "Power", type_ = "string", json_path = ".spec.powerState"),
    printcolumn(name = "Node", type_ = "string", json_path = ".status.nodeName"),
    printcolumn(name = "IP", type_ = "string", json_path = ".status.guestIP", priority = 1),
    printcolumn(name = "Age", type_ = "date", json_path = ".metadata.creationTimestamp"),
    // Each node agent watches the Machines on its node (`status.nodeName=NODE`): a cluster's
    // API server serves that field selector for a custom resource only when it is declared.
    selectable = ".status.nodeName"
)]
#[serde(rename_all = "camelCase")]
pub struct MachineSpec {
    /// The disk image a VM boots from (qcow2). Ignored by a template-based sandbox.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<ImageSource>,
    /// vCPUs and memory. Ignored by a template-based sandbox.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resources: Option<Resources>,
    /// The guest agent: exec, files and filesystem freeze go through it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub guest_agent: Option<GuestAgent>,
    /// Idle suspension, max lifetime and wake-on-connect. Opt-in: unset means none of it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lifecycle: Option<Lifecycle>,
    /// The power state asked for; unset means Running.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub power_state: Option<PowerState>,
    /// Delete the Machine this many seconds after creation.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ttl_seconds: Option<i64>,
    /// Environment variables of every exec and process in the guest (a request's own `env`
    /// wins). A claimed pool member also gets its claim's. Not for secrets (see `secretEnv`): every reader of the
    /// namespace sees them (SECURITY.md).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub env: BTreeMap<String, String>,
    /// Environment variables whose values are keys of Secrets in the Machine's namespace: the
    /// api reads them when it relays an exec, process or terminal and sends them to the
    /// Machine's runtime in that request alone (never stored on the Machine, its status, Events
    /// or logs). Only Opaque Secrets labelled `kairon.zyvor.dev/secret-env=true` are read; over
    /// `env`, under a request's own.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub secret_env: BTreeMap<String, SecretKeyRef>,
    /// Opts into the lightweight sandbox track.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sandbox: Option<SandboxSpec>,
    /// Backend and direct kernel boot.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runtime: Option<RuntimeSpec>,
    /// Guest networking.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub network: Option<NetworkSpec>,
    /// Disks that outlive Stop.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub volumes: Vec<Volume>,
    /// PCI passthrough (VFIO) devices; refused on a sandbox.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub device_claims: Vec<DeviceClaim>,
    /// Host NUMA node to bind to (admin-only, QEMU backend).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub numa: Option<NumaSpec>,
    /// Host CPUs to pin vCPUs to, e.g. `0-3,6` (admin-only, QEMU backend).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu_set: Option<String>,
    /// Back guest memory with hugepages (admin-only, QEMU backend).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hugepages: Option<Hugepages>,
    /// Pin the Machine to a node; unset lets the scheduler choose.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_name: Option<String>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct ImageSource {
    /// Path of the qcow2 image on the node, e.g. `/var/lib/fluxvm/images/kairon-hw.qcow2`.
    pub path: String,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Resources {
    /// vCPUs (`"2"`, or `500m` for a sandbox).
    #[schema(value_type = Option<String>)]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu: Option<Quantity>,
    /// Memory (`2Gi`, `512Mi`).
    #[schema(value_type = Option<String>)]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub memory: Option<Quantity>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct GuestAgent {
    /// Run the guest agent (exec, files, freeze, readiness).
    #[serde(default)]
    pub enabled: bool,
    /// Unlock Kairon's file, exec and console access.
    #[serde(default)]
    pub console: bool,
}

/// What the controller does to a Machine that has been idle for `idleTimeoutSeconds`.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, Hash, JsonSchema, ToSchema)]
pub enum IdleAction {
    #[default]
    Pause,
    Hibernate,
    Halt,
    Stop,
    Delete,
}

impl IdleAction {
    pub const ALL: [IdleAction; 5] =
        [IdleAction::Pause, IdleAction::Hibernate, IdleAction::Halt, IdleAction::Stop, IdleAction::Delete];

    /// The power state this action sets; `None` for Delete.
    pub fn power_state(self) -> Option<PowerState> {
        match self {
            IdleAction::Pause => Some(PowerState::Paused),
            IdleAction::Hibernate => Some(PowerState::Hibernated),
            IdleAction::Halt => Some(PowerState::Halted),
            IdleAction::Stop => Some(PowerState::Stopped),
            IdleAction::Delete => None,
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            IdleAction::Pause => "Pause",
            IdleAction::Hibernate => "Hibernate",
            IdleAction::Halt => "Halt",
            IdleAction::Stop => "Stop",
            IdleAction::Delete => "Delete",
        }
    }
}

pub const DEFAULT_IDLE_CPU_MILLICORES: i64 = 50;
pub const DEFAULT_WAKE_TIMEOUT_SECONDS: i64 = 60;
/// The smallest idle timeout a user may ask for (test builds may lower it by flag).
pub const MIN_IDLE_TIMEOUT_SECONDS: i64 = 60;
/// Disk I/O above this rate counts as activity.
pub const IDLE_DISK_BYTES_PER_SECOND: u64 = 256 * 1024;

fn default_idle_cpu_millicores() -> i64 {
    DEFAULT_IDLE_CPU_MILLICORES
}
fn default_wake_timeout_seconds() -> i64 {
    DEFAULT_WAKE_TIMEOUT_SECONDS
}

#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Lifecycle {
    /// Suspend after this many idle seconds (min 60). Unset: never idle-suspend.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub idle_timeout_seconds: Option<i64>,
    /// What to do when idle.
    #[serde(default)]
    pub idle_action: IdleAction,
    /// Guest CPU use below this counts as idle.
    #[serde(rename = "idleCPUMillicores", default = "default_idle_cpu_millicores")]
    pub idle_cpu_millicores: i64,
    /// Delete the Machine this many seconds after creation (or after a claim binds it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_lifetime_seconds: Option<i64>,
    /// Relay routes resume a Machine the controller idle-suspended.
    #[serde(default)]
    pub wake_on_connect: bool,
    /// How long a wake may take before the route answers 504.
    #[serde(default = "default_wake_timeout_seconds")]
    pub wake_timeout_seconds: i64,
}

impl Default for Lifecycle {
    fn default() -> Self {
        Lifecycle {
            idle_timeout_seconds: None,
            idle_action: IdleAction::Pause,
            idle_cpu_millicores: DEFAULT_IDLE_CPU_MILLICORES,
            max_lifetime_seconds: None,
            wake_on_connect: false,
            wake_timeout_seconds: DEFAULT_WAKE_TIMEOUT_SECONDS,
        }
    }
}

/// The power state a user (or the controller) asks for.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, Hash, JsonSchema, ToSchema)]
pub enum PowerState {
    #[default]
    Running,
    Paused,
    Hibernated,
    Halted,
    Stopped,
}

impl PowerState {
    pub const ALL: [PowerState; 5] =
        [PowerState::Running, PowerState::Paused, PowerState::Hibernated, PowerState::Halted, PowerState::Stopped];

    pub fn as_str(self) -> &'static str {
        match self {
            PowerState::Running => "Running",
            PowerState::Paused => "Paused",
            PowerState::Hibernated => "Hibernated",
            PowerState::Halted => "Halted",
            PowerState::Stopped => "Stopped",
        }
    }
}

impl std::fmt::Display for PowerState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct SandboxSpec {
    /// Boot from a template built on the node (`POST /api/v1/nodes/{node}/templates`). A
    /// template carries its own spec: `spec.image`, `spec.resources` and `spec.runtime.kernel`
    /// are then ignored.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub template_name: Option<String>,
}

/// Which hypervisor or container runtime runs the Machine.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash, JsonSchema, ToSchema)]
pub enum Backend {
    #[serde(rename = "qemu")]
    Qemu,
    #[serde(rename = "flux-vm")]
    FluxVm,
    #[serde(rename = "runc")]
    Runc,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct RuntimeSpec {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub backend: Option<Backend>,
    /// Direct kernel boot.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub kernel: Option<KernelSpec>,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct KernelSpec {
    /// Kernel image path on the node.
    pub path: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub initrd: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cmdline: Option<String>,
}

/// How the guest is networked. `User` (SLIRP-like) has no guest IP; `Tap` and `Bridge` give
/// the guest an address the sandbox HTTP proxy can dial.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema, ToSchema)]
pub enum NetworkMode {
    #[default]
    User,
    Tap,
    Bridge,
    None,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct NetworkSpec {
    #[serde(default)]
    pub mode: NetworkMode,
    /// Host bridge to attach to (mode Bridge).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bridge: Option<String>,
    /// Fixed MAC address; generated when unset.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mac_address: Option<String>,
    /// What the guest may reach, within its node's egress policy (it can only narrow it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub egress: Option<EgressSpec>,
}

/// A key of a Secret in the Machine's namespace.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, Eq, JsonSchema, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct SecretKeyRef {
    /// The Secret's name.
    pub name: String,
    /// The key in its `data`.
    pub key: String,
}

/// A Machine's own egress rule, enforced by its node below the node's policy: `Internet`
/// leaves the node's policy alone; `None` refuses every host; `Allowlist` admits only the
/// hosts of `allow` (names and patterns for DNS, HTTP and HTTPS; IPv4 addresses and CIDRs
/// also for other protocols). A refusal is an `EgressDenied` Event on the Machine.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct EgressSpec {
    #[serde(default)]
    pub mode: EgressMode,
    /// Host patterns (`pypi.org`, `.pythonhosted.org`, `*.example.com`), IP addresses or
    /// CIDRs; read in mode `Allowlist` only (at most 64).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub allow: Vec<String>,
}

#[derive(Serialize, Deserialize, Clone, Copy, Debug, Default, PartialEq, Eq, JsonSchema, ToSchema)]
pub enum EgressMode {
    /// Whatever the node's policy allows.
    #[default]
    Internet,
    /// Nothing.
    None,
    /// Only the hosts in `allow`.
    Allowlist,
}

/// A disk that keeps its contents across Stop.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Volume {
    pub name: String,
    /// Size of a new empty disk.
    #[schema(value_type = Option<String>)]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub size: Option<Quantity>,
    /// An existing disk image on the node.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// Where a sandbox sees it (sandboxes mount; VMs see a block device).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mount_path: Option<String>,
}

/// A PCI device passed through with VFIO.
#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct DeviceClaim {
    pub name: String,
    /// The device class or resource name, e.g. `nvidia.com/gpu`.
    pub resource_name: String,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct NumaSpec {
    /// Host NUMA node whose CPUs and memory the VM uses.
    pub node: u32,
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct Hugepages {
    /// `2Mi` or `1Gi`.
    pub page_size: String,
}

/// Where a Machine is in its life. Transitional phases (`Starting`, `Pausing`…) advance the
/// usage clock without accruing.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, Hash, JsonSchema, ToSchema)]
pub enum MachinePhase {
    /// Not yet placed on a node.
    Pending,
    /// Placed; the runtime instance is being created.
    Provisioning,
    Starting,
    Running,
    Pausing,
    Paused,
    Resuming,
    Hibernating,
    Hibernated,
    Halting,
    Halted,
    Stopping,
    Stopped,
    Migrating,
    Failed,
    Terminating,
}

/// How a phase is billed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum UsageClass {
    Active,
    Suspended,
    None,
}

impl MachinePhase {
    pub fn usage_class(self) -> UsageClass {
        use MachinePhase::*;
        match self {
            Running => UsageClass::Active,
            Stopped | Paused | Hibernated | Halted => UsageClass::Suspended,
            _ => UsageClass::None,
        }
    }

    /// The settled phase that matches a power state.
    pub fn for_power_state(p: PowerState) -> MachinePhase {
        match p {
            PowerState::Running => MachinePhase::Running,
            PowerState::Paused => MachinePhase::Paused,
            PowerState::Hibernated => MachinePhase::Hibernated,
            PowerState::Halted => MachinePhase::Halted,
            PowerState::Stopped => MachinePhase::Stopped,
        }
    }
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct MachineStatus {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<MachinePhase>,
    /// The node the scheduler placed the Machine on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub node_name: Option<String>,
    /// The runtime's id of the instance.
    #[serde(rename = "runtimeID", default, skip_serializing_if = "Option::is_none")]
    pub runtime_id: Option<String>,
    #[serde(rename = "guestIP", default, skip_serializing_if = "Option::is_none")]
    pub guest_ip: Option<String>,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub conditions: Vec<Condition>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lifecycle: Option<LifecycleStatus>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub observed_generation: Option<i64>,
    /// A migration under way: set by the api when it begins, removed when it ends.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub migration: Option<MigrationStatus>,
    /// The vCPUs and memory its node started the instance with, as that node reports them. A
    /// change of `spec.resources` takes effect at the next start; until then quota, placement
    /// and usage count the larger of the two, so shrinking the spec frees nothing early.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub resources: Option<Resources>,
}

/// How a Machine moves between nodes.
#[derive(Serialize, Deserialize, Clone, Copy, Debug, PartialEq, Eq, JsonSchema, ToSchema)]
pub enum MigrationMode {
    /// A sandbox: stopped, its writable layer copied, started on the target (processes restart).
    Cold,
    /// A VM: its memory and disk copied while it runs, then a short pause to switch over.
    Live,
}

/// A migration under way.
#[derive(Serialize, Deserialize, Clone, Debug, PartialEq, JsonSchema, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct MigrationStatus {
    /// The node the Machine is moving to.
    pub target_node: String,
    pub mode: MigrationMode,
    /// When it began. A migration still marked past [`MigrationStatus::DEADLINE_SECONDS`]
    /// was abandoned (its api stopped): the Machine's node agent takes it back.
    #[schema(value_type = String, format = DateTime)]
    pub started_at: Time,
}

impl MigrationStatus {
    pub const DEADLINE_SECONDS: i64 = 900;

    /// Whether this migration is still the api's to finish at `now`.
    pub fn in_progress(&self, now: k8s_openapi::jiff::Timestamp) -> bool {
        now.as_second() - self.started_at.0.as_second() < Self::DEADLINE_SECONDS
    }
}

#[derive(Serialize, Deserialize, Clone, Debug, Default, PartialEq, JsonSchema, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct LifecycleStatus {
    /// Last guest activity kairon-node saw (written at most every 30 s).
    #[schema(value_type = Option<String>, format = DateTime)]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_activity_time: Option<Time>,
    /// When the Machine will be deleted: the earliest of its max lifetime, its `ttlSeconds` and
    /// its claim's `ttlSeconds` (written by the lifecycle controller; unset: no deadline).
    /// `POST .../extend` moves it.
    #[schema(value_type = Option<String>, format = DateTime)]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub expires_at: Option<Time>,
    /// The VMM (or sandbox init) process id last sampled; a new one counts as activity.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vmm_pid: Option<i64>,
}

impl MachineSpec {
    /// A sandbox-track Machine.
    pub fn is_sandbox(&self) -> bool {
        self.sandbox.is_some()
    }

    /// The power state asked for (unset = Running).
    pub fn desired_power_state(&self) -> PowerState {
        self.power_state.unwrap_or_default()
    }
}

impl Machine {
    /// The runtime name of this Machine: `kairon-<namespace>-<name>`, so a restarted node adopts
    /// what already runs.
    pub fn runtime_name(&self) -> String {
        runtime_name(
            self.metadata.namespace.as_deref().unwrap_or("default"),
            self.metadata.name.as_deref().unwrap_or_default(),
        )
    }

    pub fn annotations(&self) -> &BTreeMap<String, String> {
        static EMPTY: BTreeMap<String, String> = BTreeMap::new();
        self.metadata.annotations.as_ref().unwrap_or(&EMPTY)
    }
}

/// The node runtime's name for a Machine's instance, a DNS name the runtime accepts for every
/// namespace and Machine name (each a DNS label of at most 63 characters):
/// `kairon-<namespace>-<name>` while that is one label (every instance that ran before, so
/// they are still found by it), else `<name>.<namespace>.kairon`, three labels, which the first
/// form (no dot) can never equal. The first form alone refused long names (a 55-character
/// Machine in `default` never ran).
pub fn runtime_name(namespace: &str, name: &str) -> String {
    let label = format!("kairon-{namespace}-{name}");
    if label.len() <= 63 { label } else { format!("{name}.{namespace}.kairon") }
}

/// What boots, by the rule the SDKs (`machine_source`, `machineSource`) and the MCP tools share
/// (kaironctl has a flag for each, `--sandbox-template` and `--image`): a sandbox `template` built on the node (`spec.sandbox.templateName`), or a VM
/// disk `image` at an absolute path on the node (`spec.image.path`); exactly one. The spec fields,
/// or what to give instead (an OCI reference is built into a template first).
pub fn boot_source(image: Option<&str>, template: Option<&str>) -> Result<serde_json::Value, String> {
    match (image, template) {
        (Some(_), Some(_)) => {
            Err("give template (a sandbox template) or image (a VM disk image on the node), not both".into())
        }
        (None, Some(t)) if t.is_empty() || t.contains(['/', ':']) => Err(format!(
            "template {t:?} is not a template name: name a template built on the node (kaironctl get templates --node \
             NODE), such as 'python'"
        )),
        (None, Some(t)) => Ok(serde_json::json!({ "sandbox": { "templateName": t } })),
        (None, None) => {
            Err("give template (a sandbox template such as 'python') or image (the path of a VM disk image \
                             on the node, such as /var/lib/fluxvm/images/kairon-hw.qcow2)"
                .into())
        }
        (Some(i), None) if !i.starts_with('/') => {
            let hint = if i.contains(['/', ':']) {
                format!(
                    "an OCI image is built into a template first (kaironctl build template NAME --node NODE --image {i}), \
                     then given as template 'NAME'"
                )
            } else {
                format!("for the sandbox template '{i}' give template '{i}'")
            };
            Err(format!(
                "image {i:?} is not a path on the node: image takes the path of a VM disk image, such as \
                 /var/lib/fluxvm/images/kairon-hw.qcow2; {hint}"
            ))
        }
        (Some(i), None) => Ok(serde_json::json!({ "image": { "path": i } })),
    }
}

#[cfg(test)]
mod boot_source_tests {
    use super::boot_source;

    #[test]
    fn one_rule_says_what_boots_a_template_or_a_vm_image() {
        assert_eq!(boot_source(None, Some("python")), Ok(serde_json::json!({"sandbox": {"templateName": "python"}})));
        let vm = "/var/lib/fluxvm/images/kairon-hw.qcow2";
        assert_eq!(boot_source(Some(vm), None), Ok(serde_json::json!({"image": {"path": vm}})));
        // The same refusals as the SDKs' tests (sdk/python/tests/test_kairon.py, kairon.test.ts).
        let refusals = [
            (Some("python"), None, "give template 'python'"),
            (Some("ghcr.io/org/app:1"), None, "kaironctl build template NAME --node NODE --image ghcr.io/org/app:1"),
            (Some("images/vm.qcow2"), None, "is not a path on the node"),
            (Some(vm), Some("python"), "not both"),
            (None, None, "give template"),
            (None, Some("ghcr.io/org/app:1"), "is not a template name"),
        ];
        for (image, template, says) in refusals {
            let e = boot_source(image, template).unwrap_err();
            assert!(e.contains(says), "{image:?} {template:?}: {e}");
        }
    }
}

#[cfg(test)]
mod runtime_name_tests {
    use super::runtime_name;
    use crate::validate::{is_dns_label, is_dns_subdomain};

    #[test]
    fn every_namespace_and_name_has_a_runtime_name_the_runtime_accepts() {
        assert_eq!(runtime_name("default", "web"), "kairon-default-web");
        let long = "n".repeat(63);
        for (ns, name) in [("default", long.as_str()), (long.as_str(), long.as_str()), (long.as_str(), "a")] {
            let r = runtime_name(ns, name);
            assert!(is_dns_subdomain(&r), "{r}");
            assert_eq!(r, format!("{name}.{ns}.kairon"));
        }
        // The longest that stays one label, and the shortest that does not.
        let fits = "m".repeat(63 - "kairon-default-".len());
        assert!(is_dns_label(&runtime_name("default", &fits)));
        assert_eq!(runtime_name("default", &format!("{fits}m")), format!("{fits}m.default.kairon"));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_fill_in() {
        let l: Lifecycle = serde_json::from_str(r#"{"idleTimeoutSeconds": 600}"#).unwrap();
        assert_eq!(l.idle_action, IdleAction::Pause);
        assert_eq!(l.idle_cpu_millicores, 50);
        assert_eq!(l.wake_timeout_seconds, 60);
        assert!(!l.wake_on_connect);
        let v = serde_json::to_value(&l).unwrap();
        assert_eq!(v["idleCPUMillicores"], 50);
        assert_eq!(v["idleAction"], "Pause");
    }

    #[test]
    fn usage_classes() {
        assert_eq!(MachinePhase::Running.usage_class(), UsageClass::Active);
        for p in [MachinePhase::Paused, MachinePhase::Stopped, MachinePhase::Hibernated, MachinePhase::Halted] {
            assert_eq!(p.usage_class(), UsageClass::Suspended);
        }
        assert_eq!(MachinePhase::Starting.usage_class(), UsageClass::None);
    }
}
