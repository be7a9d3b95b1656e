//! Namespaces' own templates (KaironTemplate) on this node. A new template is built at once by
//! one node, the one [`first_builder`] names among the fresh sandbox nodes, so its author sees
//! the build's progress and its end (`status`); every other node builds it when a Machine of
//! it lands there (`super::namespaced_template`). A node reports its own build in
//! `status.nodes`, with the phase and message they all give.

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use kube::api::{Api, ListParams, Patch, PatchParams};
use kube::runtime::controller::{Action, Controller};
use kube::runtime::watcher;
use kube::{Resource, ResourceExt};
use serde_json::json;
use tokio_util::sync::CancellationToken;

use kairon_model::template::{TemplateNodeBuild, first_builder, node_template_name, summarize};
use kairon_model::{KaironNode, KaironTemplate, NodeBackend, TemplatePhase};
use kairon_runtime_api::types::{CreateTemplateRequest, Template, TemplateState};
use kairon_runtime_api::{ClientError, RuntimeClient, TemplateName};

use crate::{NodeError, build_progress};

struct Ctx {
    client: kube::Client,
    runtime: RuntimeClient,
    node: String,
}

/// Follows every KaironTemplate until `shutdown`.
pub(crate) async fn run(client: kube::Client, runtime: RuntimeClient, node: String, shutdown: CancellationToken) {
    let ctx = Arc::new(Ctx { client: client.clone(), runtime, node });
    Controller::new(Api::<KaironTemplate>::all(client), watcher::Config::default())
        .graceful_shutdown_on(shutdown.cancelled_owned())
        .run(reconcile, error_policy, ctx)
        .for_each(|r| async move {
            if let Err(e) = r {
                tracing::debug!(error = %e, "template reconcile");
            }
        })
        .await;
}

fn error_policy(t: Arc<KaironTemplate>, e: &NodeError, _: Arc<Ctx>) -> Action {
    tracing::warn!(template = %t.name_any(), error = %e, "template reconcile failed; retrying");
    Action::requeue(Duration::from_secs(5))
}

async fn reconcile(t: Arc<KaironTemplate>, ctx: Arc<Ctx>) -> Result<Action, NodeError> {
    if t.meta().deletion_timestamp.is_some() {
        return Ok(Action::await_change());
    }
    let (ns, name, uid) = (t.namespace().unwrap_or_default(), t.name_any(), t.uid().unwrap_or_default());
    let on_node = node_template_name(&ns, &name, &uid);
    let id = TemplateName::new(on_node.as_str()).map_err(|e| NodeError::Runtime(ClientError::Decode(e.to_string())))?;
    let built = match ctx.runtime.template(&id).await {
        Ok(built) => Some(built),
        Err(e) if e.is_not_found() => None,
        Err(e) => return Err(e.into()),
    };
    let built = match built {
        Some(built) => built,
        None if builds_first(&uid, &ctx).await? => {
            let req = CreateTemplateRequest {
                name: on_node.clone(),
                image_ref: t.spec.image.clone(),
                steps: t.spec.steps.clone(),
                tenant_source: true,
            };
            tracing::info!(template = %on_node, "building a namespace's new template");
            match ctx.runtime.build_template(&req).await {
                Ok(started) => started,
                Err(ClientError::Api { status: 409, .. }) => ctx.runtime.template(&id).await?,
                Err(e) => return Err(e.into()),
            }
        }
        // Another node builds it first; this one when a Machine of it comes here.
        None => return Ok(Action::await_change()),
    };
    let mine = build_of(&ctx.node, &name, &built);
    let building = mine.phase == TemplatePhase::Building;
    report(&t, mine, &ctx).await?;
    Ok(if building { Action::requeue(Duration::from_secs(1)) } else { Action::await_change() })
}

/// Whether this node is the one that builds a new template at once.
async fn builds_first(uid: &str, ctx: &Ctx) -> Result<bool, NodeError> {
    let now = k8s_openapi::jiff::Timestamp::now();
    let nodes = Api::<KaironNode>::all(ctx.client.clone()).list(&ListParams::default()).await?.items;
    let candidates: Vec<String> = nodes
        .iter()
        .map(|n| kairon_model::placement::node_view(n, now))
        .filter(|v| v.fresh && v.backends.contains(&NodeBackend::Sandbox))
        .map(|v| v.name)
        .collect();
    Ok(first_builder(uid, candidates.iter().map(String::as_str)) == Some(ctx.node.as_str()))
}

/// This node's build as the template's status shows it.
fn build_of(node: &str, name: &str, t: &Template) -> TemplateNodeBuild {
    let (phase, message) = match t.state {
        TemplateState::Ready => (TemplatePhase::Ready, None),
        TemplateState::Failed => (
            TemplatePhase::Failed,
            Some(format!(
                "template {name:?} failed to build on node {node}: {}",
                t.message.clone().unwrap_or_default()
            )),
        ),
        TemplateState::Pending | TemplateState::Building => {
            (TemplatePhase::Building, Some(format!("building on node {node}: {}", build_progress(t))))
        }
    };
    TemplateNodeBuild {
        node: node.to_string(),
        phase,
        bytes_done: t.bytes_done,
        bytes_total: t.bytes_total,
        steps_done: t.steps_done,
        digest: t.digest.clone(),
        message,
    }
}

/// Writes this node's build into the template's status (with the phase all builds give), unless
/// it is there already. The write names the resourceVersion read: another node's report in
/// between makes it fail, and the next reconcile reads theirs.
async fn report(t: &KaironTemplate, mine: TemplateNodeBuild, ctx: &Ctx) -> Result<(), NodeError> {
    let mut status = t.status.clone().unwrap_or_default();
    if status.nodes.contains(&mine) {
        return Ok(());
    }
    status.nodes.retain(|n| n.node != mine.node);
    status.nodes.push(mine);
    status.nodes.sort_by(|a, b| a.node.cmp(&b.node));
    (status.phase, status.message) = summarize(&status.nodes);
    let api: Api<KaironTemplate> = Api::namespaced(ctx.client.clone(), &t.namespace().unwrap_or_default());
    let patch = json!({"metadata": {"resourceVersion": t.resource_version()}, "status": status});
    api.patch_status(&t.name_any(), &PatchParams::default(), &Patch::Merge(patch)).await?;
    Ok(())
}
