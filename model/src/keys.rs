//! Well-known names from the product documents: annotations, labels, event reasons, metrics.
//! Every component uses these constants so a rename happens in one place.

/// Annotations.
pub mod annotations {
    /// Stamped by relay sessions (console, exec, files, port-forward, sandbox proxy) while in use.
    pub const LAST_ACTIVITY: &str = "kairon.zyvor.dev/last-activity";
    /// Set by the controller when it suspends a Machine for idleness; wake-on-connect clears it.
    pub const IDLE_SUSPENDED: &str = "kairon.zyvor.dev/idle-suspended";
    /// Where a claimed pool member's max lifetime counts from.
    pub const LIFECYCLE_START: &str = "kairon.zyvor.dev/lifecycle-start";
    /// Deadline until which the guest's filesystems stay frozen.
    pub const FS_FROZEN_UNTIL: &str = "kairon.zyvor.dev/fs-frozen-until";
    /// Written by kairon-node once the guest's filesystems are frozen.
    pub const FS_FROZEN: &str = "kairon.zyvor.dev/fs-frozen";
}

/// Labels.
pub mod labels {
    /// Marks a Machine as an agent sandbox (the operator-exec rule applies to these only).
    pub const SANDBOX: &str = "kairon.zyvor.dev/sandbox";
    /// The MachinePool a member belongs to.
    pub const POOL: &str = "kairon.zyvor.dev/pool";
    /// The MachineClaim a pool member is bound to.
    pub const CLAIM: &str = "kairon.zyvor.dev/claim";
    /// On a bound MachineClaim: `Warm` or `Cold`, as its `status.launchType`.
    pub const LAUNCH_TYPE: &str = "kairon.zyvor.dev/launch-type";
    /// On a Secret: a Machine's `spec.secretEnv` may name it (unlabelled Secrets are never read
    /// for a guest).
    pub const SECRET_ENV: &str = "kairon.zyvor.dev/secret-env";
    /// On a runtime create request (not on Machines): the Machine's namespace, which picks the
    /// runtime's `volumes/<namespace>/` directory.
    pub const RUNTIME_NAMESPACE: &str = "kairon.zyvor.dev/namespace";
}

/// Finalizers.
pub mod finalizers {
    /// kairon-node removes the runtime instance before the Machine goes.
    pub const MACHINE: &str = "kairon.zyvor.dev/machine";
    /// The controller records final usage and releases the Machine before the claim goes.
    pub const CLAIM: &str = "kairon.zyvor.dev/claim";

    /// Whether adding or removing a finalizer was refused because another writer changed the
    /// object first: a 409 conflict, or 422 when the helper's JSON patch `test` finds a list the
    /// cache has not caught up with. Expected while claims, pools and nodes write the same
    /// Machines; the retry reads the new object.
    pub fn raced<E: std::error::Error + 'static>(e: &kube::runtime::finalizer::Error<E>) -> bool {
        use kube::runtime::finalizer::Error as F;
        match e {
            F::AddFinalizer(kube::Error::Api(s)) | F::RemoveFinalizer(kube::Error::Api(s)) => {
                s.code == 409 || s.code == 422
            }
            _ => false,
        }
    }

    /// Whether removing a finalizer found the object gone: a cleanup run again from a cache that
    /// had not seen the deletion yet, after an earlier run removed the finalizer. Nothing is left
    /// to do.
    pub fn gone<E: std::error::Error + 'static>(e: &kube::runtime::finalizer::Error<E>) -> bool {
        matches!(e, kube::runtime::finalizer::Error::RemoveFinalizer(kube::Error::Api(s)) if s.code == 404)
    }
}

/// Event reasons.
pub mod reasons {
    pub const IDLE_SUSPENDED: &str = "IdleSuspended";
    pub const LIFETIME_EXPIRED: &str = "LifetimeExpired";
    pub const RELEASED: &str = "Released";
    pub const WOKEN: &str = "Woken";
    pub const BOUND: &str = "Bound";
    pub const SCHEDULED: &str = "Scheduled";
    pub const FAILED_SCHEDULING: &str = "FailedScheduling";
    /// An autoscaled pool's replicas changed.
    pub const SCALED: &str = "Scaled";
    /// A guest's egress was refused by its node (at most one Event per host a minute).
    pub const EGRESS_DENIED: &str = "EgressDenied";
    /// A migration began, and each of its steps (on the Machine, from the api).
    pub const MIGRATING: &str = "Migrating";
    /// A migration ended with the Machine on its new node.
    pub const MIGRATED: &str = "Migrated";
    /// A migration failed; the Machine stays (or is back) on its node.
    pub const MIGRATION_FAILED: &str = "MigrationFailed";
}

/// Prometheus metric names.
pub mod metrics {
    pub const LIFECYCLE_ACTIONS_TOTAL: &str = "kairon_lifecycle_actions_total";
    pub const CLAIM_USAGE_SECONDS_TOTAL: &str = "kairon_claim_usage_seconds_total";
    pub const CLAIM_USAGE_VCPU_SECONDS_TOTAL: &str = "kairon_claim_usage_vcpu_seconds_total";
    pub const CLAIM_USAGE_MEMORY_GIB_SECONDS_TOTAL: &str = "kairon_claim_usage_memory_gib_seconds_total";
    pub const POOL_CLAIMS_TOTAL: &str = "kairon_pool_claims_total";
    pub const POOL_CLAIM_WAIT_SECONDS: &str = "kairon_pool_claim_wait_seconds";
    /// Guest connections and DNS questions a node's egress rules refused, by node and reason.
    pub const EGRESS_DENIED_TOTAL: &str = "kairon_egress_denied_total";
}

/// Environment variables the product documents name.
pub mod env {
    /// Lets a named operator use exec, files and the sandbox proxy on sandbox-labelled Machines.
    pub const UI_SANDBOX_OPERATOR_EXEC: &str = "KAIRON_UI_SANDBOX_OPERATOR_EXEC";
}
