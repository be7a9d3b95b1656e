//! Nodes and what their runtimes hold: registrations, templates, sandboxes (redacted outside the
//! caller's namespaces), node pools and their claims (optionally creating a Machine the node
//! adopts), and the egress check. Reads are open to any authenticated caller; writes are
//! admin-only.

use kube::Api;
use kube::api::PostParams;
use serde::{Deserialize, Serialize};
use utoipa::ToSchema;

use kairon_model::{KaironNode, Machine, MachineSpec, RuntimeSpec};
use kairon_runtime_api::types::{
    ClaimRequest, CreatePoolRequest, CreateTemplateRequest, EgressDecision, Pool, Template, Vm, VmState,
};
use kairon_runtime_api::{PoolName, RuntimeClient, TemplateName};

use super::objects::{List, check_name};
use super::{Error, Machines, Result, allowed};
use crate::auth::{self, Identity, Verb};

/// A sandbox in the node's list: in full when it belongs to a Machine in one of the caller's
/// namespaces (admins: every one), else only its ID, state and backend.
#[derive(Serialize, ToSchema)]
#[serde(untagged)]
pub enum SandboxItem {
    Full(Box<Vm>),
    Redacted(RedactedSandbox),
}

/// A sandbox outside the caller's namespaces (or owned by no Machine): what it is, not whose.
#[derive(Serialize, ToSchema)]
pub struct RedactedSandbox {
    pub id: String,
    pub state: VmState,
    pub backend: String,
}

#[derive(Deserialize, Serialize, ToSchema, Default)]
#[serde(rename_all = "camelCase")]
pub struct PoolClaimRequest {
    /// The claimed instance's new runtime name (replaced when createMachine is set).
    pub name: Option<String>,
    /// Delete the claimed instance this many seconds after the claim.
    pub ttl_seconds: Option<i64>,
    /// Also create a Machine for the claimed instance, which this node then adopts.
    #[serde(default)]
    pub create_machine: bool,
    /// The Machine's namespace (default `default`).
    pub namespace: Option<String>,
    /// The Machine's name (required with createMachine).
    pub machine_name: Option<String>,
}

/// The answer of a node pool claim: the VM alone, or with `createMachine` the Machine made for
/// it (or why none could be made: the claim happened either way).
#[derive(Serialize, ToSchema)]
#[serde(untagged)]
pub enum PoolClaim {
    WithMachine(Box<PoolClaimResult>),
    Vm(Box<Vm>),
}

/// The answer of a claim with `createMachine`.
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "camelCase")]
pub struct PoolClaimResult {
    pub vm: Vm,
    #[schema(value_type = Option<crate::rest::schema::Machine>)]
    pub machine: Option<Machine>,
    pub machine_error: Option<String>,
}

impl Machines {
    /// A node's runtime, the node's name checked first.
    async fn node_runtime(&self, node: &str) -> Result<RuntimeClient> {
        check_name("node", node)?;
        self.runtime(node).await
    }

    /// A watch of the nodes (see [`Machines::watch_all`]).
    pub async fn watch_nodes(
        &self,
        resource_version: Option<&str>,
        timeout: std::time::Duration,
    ) -> Result<futures::stream::BoxStream<'static, bytes::Bytes>> {
        super::objects::watch_apis(vec![Api::<KaironNode>::all(self.kube.clone())], None, resource_version, timeout)
            .await
    }

    pub async fn nodes(&self) -> Result<List<KaironNode>> {
        let nodes: Api<KaironNode> = Api::all(self.kube.clone());
        Ok(List { items: nodes.list(&Default::default()).await?.items })
    }

    pub async fn node(&self, node: &str) -> Result<KaironNode> {
        check_name("node", node)?;
        let nodes: Api<KaironNode> = Api::all(self.kube.clone());
        nodes.get_opt(node).await?.ok_or_else(|| Error::not_found(format!("node {node:?} is not registered")))
    }

    pub async fn templates(&self, node: &str) -> Result<Vec<Template>> {
        Ok(self.node_runtime(node).await?.templates().await?)
    }

    pub async fn template(&self, node: &str, name: &str) -> Result<Template> {
        Ok(self.node_runtime(node).await?.template(&TemplateName::new(name)?).await?)
    }

    /// Starts a template build on a node (admin-only); answers at once with its progress.
    pub async fn build_template(
        &self,
        id: &Identity,
        node: &str,
        req: impl FnOnce() -> Result<CreateTemplateRequest>,
    ) -> Result<Template> {
        allowed(auth::admin_only(id, "building a template"))?;
        check_name("node", node)?;
        let req = req()?;
        check_name("template", &req.name)?;
        if req.name.starts_with(kairon_model::template::NODE_NAME_PREFIX) {
            return Err(Error::bad_request(format!(
                "template names beginning with {:?} are the nodes' names of namespaces' own templates (KaironTemplate): choose another name",
                kairon_model::template::NODE_NAME_PREFIX
            )));
        }
        if req.image_ref.trim().is_empty() {
            return Err(Error::bad_request("imageRef must name an OCI image, e.g. docker.io/library/alpine:3.19"));
        }
        let rt = self.runtime(node).await?;
        TemplateName::new(req.name.as_str())?;
        // The admin's own reference: pulled as the node's config says, never as a tenant's.
        Ok(rt.build_template(&CreateTemplateRequest { tenant_source: false, ..req }).await?)
    }

    /// Every sandbox on a node as its runtime sees it (including ones made outside Kairon).
    /// Which Machine owns one is told by the owner UID the node agent or the api stamped on it,
    /// never by its name.
    pub async fn sandboxes(&self, id: &Identity, node: &str) -> Result<Vec<SandboxItem>> {
        let vms = self.node_runtime(node).await?.list_sandboxes().await?;
        if id.all_namespaces() {
            return Ok(vms.into_iter().map(|vm| SandboxItem::Full(Box::new(vm))).collect());
        }
        let mut mine = std::collections::BTreeSet::new();
        for ns in &id.namespaces {
            for m in self.api::<Machine>(ns).list(&Default::default()).await?.items {
                mine.extend(m.metadata.uid);
            }
        }
        Ok(vms
            .into_iter()
            .map(|vm| match &vm.owner_uid {
                Some(uid) if mine.contains(uid) => SandboxItem::Full(Box::new(vm)),
                _ => SandboxItem::Redacted(RedactedSandbox {
                    id: vm.id.to_string(),
                    state: vm.state,
                    backend: vm.backend,
                }),
            })
            .collect())
    }

    pub async fn pools(&self, node: &str) -> Result<Vec<Pool>> {
        Ok(self.node_runtime(node).await?.pools().await?)
    }

    pub async fn pool(&self, node: &str, name: &str) -> Result<Pool> {
        Ok(self.node_runtime(node).await?.pool(&PoolName::new(name)?).await?)
    }

    /// Creates a node pool (admin-only); its members boot in the background.
    pub async fn create_pool(
        &self,
        id: &Identity,
        node: &str,
        req: impl FnOnce() -> Result<CreatePoolRequest>,
    ) -> Result<Pool> {
        allowed(auth::admin_only(id, "creating a node pool"))?;
        check_name("node", node)?;
        let req = req()?;
        check_name("pool", &req.name)?;
        Ok(self.runtime(node).await?.create_pool(&req).await?)
    }

    /// Deletes a node pool and every member it holds, claimed or not (admin-only).
    pub async fn delete_pool(&self, id: &Identity, node: &str, name: &str) -> Result<()> {
        allowed(auth::admin_only(id, "deleting a node pool"))?;
        Ok(self.node_runtime(node).await?.delete_pool(&PoolName::new(name)?).await?)
    }

    /// Takes one ready member of a node pool, resumed (admin-only); with `createMachine`, also a
    /// Machine the node adopts once the member carries its UID.
    pub async fn claim_from_node_pool(
        &self,
        id: &Identity,
        node: &str,
        pool: &str,
        req: impl FnOnce() -> Result<Option<PoolClaimRequest>>,
    ) -> Result<PoolClaim> {
        allowed(auth::admin_only(id, "claiming from a node pool"))?;
        check_name("node", node)?;
        let req = req()?.unwrap_or_default();
        let rt = self.runtime(node).await?;
        let pool_name = PoolName::new(pool)?;
        if !req.create_machine {
            let vm = rt.claim(&pool_name, &ClaimRequest { name: req.name, ttl_seconds: req.ttl_seconds }).await?;
            return Ok(PoolClaim::Vm(Box::new(vm)));
        }
        let ns = req.namespace.clone().unwrap_or_else(|| "default".into());
        let machine_name =
            req.machine_name.clone().ok_or_else(|| Error::bad_request("createMachine needs machineName"))?;
        check_name("namespace", &ns)?;
        check_name("machineName", &machine_name)?;
        allowed(auth::may_access(id, Verb::Write, Some(&ns), false))?;
        // Fetched fresh: the spec every member was booted from.
        let template = rt.pool(&pool_name).await?.template;
        let machines = self.api::<Machine>(&ns);
        // A taken name would also collide with that Machine's own instance on the node: the
        // claim then keeps its pool name and the answer says why no Machine was made.
        let taken = machines.get_opt(&machine_name).await?.is_some();
        let claim_name =
            if taken { req.name.clone() } else { Some(kairon_model::machine::runtime_name(&ns, &machine_name)) };
        let vm = rt.claim(&pool_name, &ClaimRequest { name: claim_name, ttl_seconds: req.ttl_seconds }).await?;
        let failed = |vm: Vm, why: String| {
            let machine_error = format!(
                "the claim succeeded, but Machine {ns}/{machine_name} could not be created: {why}. The VM {} runs on node {node}: \
                 claim again with another machineName, or delete the VM (DELETE it on the node) if it is not wanted",
                vm.name
            );
            PoolClaim::WithMachine(Box::new(PoolClaimResult { vm, machine: None, machine_error: Some(machine_error) }))
        };
        if taken {
            return Ok(failed(vm, format!("Machine {ns}/{machine_name} already exists")));
        }
        let spec = MachineSpec {
            image: template.image.clone(),
            resources: template.resources.clone(),
            runtime: template.runtime.as_ref().map(|r| RuntimeSpec { backend: r.backend, kernel: None }),
            sandbox: template.sandbox.clone(),
            guest_agent: template.guest_agent.clone(),
            node_name: Some(node.to_string()),
            ..Default::default()
        };
        let mut m = Machine::new(&machine_name, spec);
        m.metadata.namespace = Some(ns.clone());
        let pp = PostParams { field_manager: Some("kairon-api".into()), ..Default::default() };
        let created = match machines.create(&pp, &m).await {
            Ok(created) => created,
            Err(e) => return Ok(failed(vm, Error::from(e).message)),
        };
        // The member was unowned until now: the new Machine's UID makes it that Machine's, and
        // only then does the node agent adopt it.
        let uid = created.metadata.uid.clone().unwrap_or_default();
        Ok(match rt.set_owner(&vm.id, None, &uid).await {
            Ok(owned) => PoolClaim::WithMachine(Box::new(PoolClaimResult {
                vm: owned,
                machine: Some(created),
                machine_error: None,
            })),
            Err(e) => failed(vm, format!("the claimed instance could not be given to the new Machine: {e}")),
        })
    }

    /// Whether a sandbox on this node may reach `host` (admin-only); the decision carries the
    /// credential, which the edges never pass on.
    pub async fn egress_check(
        &self,
        id: &Identity,
        node: &str,
        host: impl FnOnce() -> Result<String>,
    ) -> Result<EgressDecision> {
        allowed(auth::admin_only(id, "the egress check"))?;
        check_name("node", node)?;
        let host = host()?;
        if host.trim().is_empty() {
            return Err(Error::bad_request("host must name a host, e.g. api.github.com"));
        }
        Ok(self.runtime(node).await?.egress_check(host.trim()).await?)
    }
}
