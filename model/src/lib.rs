//! Kairon's resource model: the `kairon.zyvor.dev` kinds, the well-known keys the product
//! documents name, their defaults and their validation. No I/O lives here.

// kube's `printcolumn(type_ = …)` repeats the same keys once per column, by design.
#![allow(clippy::duplicated_attributes)]

pub mod autoscale;
pub mod binding;
pub mod claim;
pub mod crds;
pub mod duration;
pub mod egress;
pub mod expiry;
pub mod keys;
pub mod machine;
pub mod meta;
pub mod metrics;
pub mod node;
pub mod placement;
pub mod pool;
pub mod power;
pub mod quantity;
pub mod quota;
pub mod rules;
pub mod template;
pub mod validate;
pub mod warm;

pub use claim::{ClaimPhase, ClaimUsage, LaunchType, MachineClaim, MachineClaimSpec, MachineClaimStatus};
pub use machine::{
    Backend, EgressMode, EgressSpec, GuestAgent, IdleAction, ImageSource, KernelSpec, Lifecycle, LifecycleStatus,
    Machine, MachinePhase, MachineSpec, MachineStatus, MigrationMode, MigrationStatus, NetworkMode, NetworkSpec,
    PowerState, Resources, RuntimeSpec, SandboxSpec, SecretKeyRef, Volume, boot_source,
};
pub use meta::Condition;
pub use node::{KaironNode, KaironNodeSpec, KaironNodeStatus, NodeBackend};
pub use pool::{MachinePool, MachinePoolSpec, MachinePoolStatus, MachineTemplate, WarmPowerState};
pub use quantity::Quantity;
pub use quota::{KaironQuota, KaironQuotaSpec, KaironQuotaStatus, QuotaAmounts};
pub use template::{KaironTemplate, KaironTemplateSpec, KaironTemplateStatus, TemplatePhase};

/// The API group of every Kairon kind.
pub const GROUP: &str = "kairon.zyvor.dev";
/// The storage version. `v1alpha1` is served with the same schema.
pub const STORAGE_VERSION: &str = "v1";
/// Every version served, storage first.
pub const VERSIONS: [&str; 2] = ["v1", "v1alpha1"];
