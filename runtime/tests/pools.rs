//! Node pools on real runc: Paused members, millisecond claims, backfill, no double claims.

use std::collections::BTreeSet;
use std::path::Path;
use std::time::{Duration, Instant};

use kairon_model::SandboxSpec;
use kairon_runtime::api::{ClaimRequest, CreatePoolRequest, CreateVmRequest, ExecRequest, PoolMemberState, VmState};
use kairon_runtime_api::{ClientError, RuntimeClient};

mod common;

async fn serve(state_dir: &Path, node: &str) -> RuntimeClient {
    common::serve(state_dir, node, Default::default()).await.1
}

async fn ready(c: &RuntimeClient, pool: &str, want: usize) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let p = c.pool(&pool.try_into().unwrap()).await.unwrap();
        let n = p.members.iter().filter(|m| m.state == PoolMemberState::Ready).count();
        if n >= want {
            return;
        }
        if Instant::now() >= deadline {
            let vms: Vec<_> = c.list().await.unwrap().into_iter().map(|v| (v.name, v.state, v.message)).collect();
            let members: Vec<_> = p.members.iter().map(|m| (m.name.clone(), m.state)).collect();
            panic!("pool {pool} did not fill: members {members:?} message {:?}\ninstances: {vms:?}", p.message);
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn pools_fill_paused_claim_fast_backfill_and_never_double_claim() {
    let dir = tempfile::tempdir().unwrap();
    let c = serve(dir.path(), "pools").await;
    let template =
        CreateVmRequest { sandbox: Some(SandboxSpec { template_name: Some("busybox".into()) }), ..Default::default() };
    let pool = c.create_pool(&CreatePoolRequest { name: "agents".into(), size: 3, template }).await.unwrap();
    assert!(pool.members.is_empty(), "create returns at once, before members exist");
    ready(&c, "agents", 3).await;
    for m in c.pool(&"agents".try_into().unwrap()).await.unwrap().members {
        assert_eq!(c.get(&m.id).await.unwrap().state, VmState::Paused);
    }

    // A claim resumes a member and hands it over Running, renamed, in milliseconds.
    let t = Instant::now();
    let vm = c
        .claim(
            &"agents".try_into().unwrap(),
            &ClaimRequest { name: Some("kairon-agents-job-1".into()), ttl_seconds: Some(2) },
        )
        .await
        .unwrap();
    let took = t.elapsed();
    assert_eq!((vm.state, vm.name.as_str()), (VmState::Running, "kairon-agents-job-1"));
    assert!(took < Duration::from_millis(1000), "claim took {took:?}");
    let out =
        c.exec(&vm.id, &ExecRequest { command: vec!["echo".into(), "ok".into()], ..Default::default() }).await.unwrap();
    assert_eq!(out.stdout, "ok\n");

    // Backfill back to 3 ready members.
    ready(&c, "agents", 3).await;

    // Concurrent claims: 5 claims on 3 ready members → 3 distinct winners, 2 clear refusals.
    let claims = (0..5).map(|_| {
        let c = c.clone();
        tokio::spawn(async move { c.claim(&"agents".try_into().unwrap(), &ClaimRequest::default()).await })
    });
    let results: Vec<_> = futures::future::join_all(claims).await.into_iter().map(|r| r.unwrap()).collect();
    let won: BTreeSet<kairon_runtime_api::InstanceId> =
        results.iter().filter_map(|r| r.as_ref().ok()).map(|v| v.id.clone()).collect();
    let refused: Vec<&ClientError> = results.iter().filter_map(|r| r.as_ref().err()).collect();
    assert_eq!(won.len() + refused.len(), 5);
    assert_eq!(won.len(), results.iter().filter(|r| r.is_ok()).count(), "no member handed out twice");
    assert!(won.len() >= 3, "every ready member is claimable");
    for e in refused {
        match e {
            ClientError::Api { status: 409, message, .. } => assert!(message.contains("no ready member"), "{message}"),
            other => panic!("unexpected {other}"),
        }
    }

    // The claimed instance with a TTL is deleted when it runs out.
    tokio::time::sleep(Duration::from_secs(3)).await;
    assert!(c.get(&vm.id).await.unwrap_err().is_not_found(), "expired claim deleted");

    // An empty pool answers at once with a clear error, never a slow fallback.
    let empty =
        CreateVmRequest { sandbox: Some(SandboxSpec { template_name: Some("busybox".into()) }), ..Default::default() };
    c.create_pool(&CreatePoolRequest { name: "empty".into(), size: 0, template: empty }).await.unwrap();
    let t = Instant::now();
    match c.claim(&"empty".try_into().unwrap(), &ClaimRequest::default()).await {
        Err(ClientError::Api { status: 409, message, .. }) => {
            assert!(message.contains("pool \"empty\" has no ready member"), "{message}")
        }
        other => panic!("expected a 409, got {other:?}"),
    }
    assert!(t.elapsed() < Duration::from_millis(500));

    // Deleting the pool deletes every member, claimed or not.
    let all: Vec<kairon_runtime_api::InstanceId> =
        c.pool(&"agents".try_into().unwrap()).await.unwrap().members.into_iter().map(|m| m.id).collect();
    c.delete_pool(&"agents".try_into().unwrap()).await.unwrap();
    for id in all.iter().chain(won.iter()) {
        assert!(c.get(id).await.unwrap_err().is_not_found(), "{id} deleted with the pool");
    }
    assert!(c.pool(&"agents".try_into().unwrap()).await.unwrap_err().is_not_found());
}

/// One name index under one lock: of 64 concurrent creates of one runtime name exactly one
/// wins, and a claim renaming a member onto a taken name is refused without waiting for the
/// instances still booting.
#[tokio::test(flavor = "multi_thread")]
async fn one_name_one_instance_under_concurrent_creates_and_claims() {
    let dir = tempfile::tempdir().unwrap();
    let c = serve(dir.path(), "names").await;
    let request = |name: &str| CreateVmRequest {
        name: name.into(),
        sandbox: Some(SandboxSpec { template_name: Some("busybox".into()) }),
        ..Default::default()
    };
    let creates = (0..64).map(|_| {
        let (c, req) = (c.clone(), request("kairon-agents-one"));
        tokio::spawn(async move { c.create(&req).await })
    });
    let results: Vec<_> = futures::future::join_all(creates).await.into_iter().map(|r| r.unwrap()).collect();
    let won: Vec<_> = results.iter().filter_map(|r| r.as_ref().ok()).collect();
    assert_eq!(won.len(), 1, "exactly one create of a name succeeds");
    for e in results.iter().filter_map(|r| r.as_ref().err()) {
        match e {
            ClientError::Api { status: 409, message, .. } => assert!(message.contains("already exists"), "{message}"),
            other => panic!("expected a 409 for a taken name, got {other}"),
        }
    }
    let named: Vec<_> = c.list().await.unwrap().into_iter().filter(|v| v.name == "kairon-agents-one").collect();
    assert_eq!(named.len(), 1, "one instance holds the name");

    // A claim onto the taken name is refused; onto a free one it is answered while another
    // instance is still being created.
    let template =
        CreateVmRequest { sandbox: Some(SandboxSpec { template_name: Some("busybox".into()) }), ..Default::default() };
    c.create_pool(&CreatePoolRequest { name: "warm".into(), size: 2, template }).await.unwrap();
    ready(&c, "warm", 2).await;
    let taken = ClaimRequest { name: Some("kairon-agents-one".into()), ttl_seconds: None };
    match c.claim(&"warm".try_into().unwrap(), &taken).await {
        Err(ClientError::Api { status: 409, message, .. }) => assert!(message.contains("already exists"), "{message}"),
        other => panic!("expected a 409 for a taken name, got {other:?}"),
    }
    let booting = {
        let c = c.clone();
        tokio::spawn(async move { c.create(&request("kairon-agents-slow")).await })
    };
    let free = ClaimRequest { name: Some("kairon-agents-two".into()), ttl_seconds: None };
    let vm = c.claim(&"warm".try_into().unwrap(), &free).await.unwrap();
    assert_eq!(vm.name, "kairon-agents-two");
    assert_eq!(c.get(&vm.id).await.unwrap().name, "kairon-agents-two");
    booting.await.unwrap().unwrap();
    c.delete_pool(&"warm".try_into().unwrap()).await.unwrap();
    for v in c.list().await.unwrap() {
        c.delete(&v.id).await.unwrap();
    }
}

/// Deleting a pool while it makes a member: the member is finished and deleted, nothing of it
/// (an instance, a mount) is left behind.
#[tokio::test(flavor = "multi_thread")]
async fn a_pool_deleted_while_it_makes_a_member_leaves_nothing_behind() {
    let dir = tempfile::tempdir().unwrap();
    let c = serve(dir.path(), "pools-gone").await;
    for round in 0..3u64 {
        let template = CreateVmRequest {
            sandbox: Some(SandboxSpec { template_name: Some("busybox".into()) }),
            ..Default::default()
        };
        let name = format!("gone{round}");
        c.create_pool(&CreatePoolRequest { name: name.clone(), size: 1, template }).await.unwrap();
        // The filler starts its first member at once: delete at a few moments into it.
        tokio::time::sleep(Duration::from_millis(30 * round)).await;
        c.delete_pool(&name.as_str().try_into().unwrap()).await.unwrap();
    }
    let left: Vec<_> = c.list().await.unwrap().into_iter().map(|v| (v.name, v.state)).collect();
    assert!(left.is_empty(), "instances left behind: {left:?}");
    let state = dir.path().to_string_lossy().into_owned();
    let mounts: Vec<String> = std::fs::read_to_string("/proc/self/mountinfo")
        .unwrap()
        .lines()
        .filter(|l| l.contains(&state))
        .map(String::from)
        .collect();
    assert!(mounts.is_empty(), "mounts left behind: {mounts:#?}");
}
