//! Node pools: members booted and Paused in the background, handed out by a claim in
//! milliseconds (resume = thaw the cgroup), and refilled after each claim.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::Notify;

use crate::api::{ClaimRequest, CreatePoolRequest, Pool, PoolMember, PoolMemberState, PowerAction, Vm, VmState};
use crate::engine::{Runtime, RuntimeError, expiry, lock, now, valid_name};

/// The most members one pool may keep.
pub const MAX_POOL_SIZE: u32 = 200;

pub(crate) struct PoolEntry {
    pub(crate) meta: Pool,
    refill: Arc<Notify>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for PoolEntry {
    fn drop(&mut self) {
        self.task.abort();
    }
}

type Result<T> = std::result::Result<T, RuntimeError>;

impl Runtime {
    fn pools_dir(&self) -> std::path::PathBuf {
        self.inner.cfg.state_dir.join("pools")
    }

    fn save_pool(&self, pool: &Pool) {
        let _ = std::fs::create_dir_all(self.pools_dir());
        if let Ok(raw) = serde_json::to_vec_pretty(pool) {
            let _ = std::fs::write(self.pools_dir().join(format!("{}.json", pool.name)), raw);
        }
    }

    /// After a restart: pools come back with the members that still exist.
    pub(crate) fn load_pools(&self) {
        let Ok(entries) = std::fs::read_dir(self.pools_dir()) else { return };
        for e in entries.flatten() {
            let Ok(raw) = std::fs::read(e.path()) else { continue };
            let Ok(mut pool) = serde_json::from_slice::<Pool>(&raw) else { continue };
            let known = lock(&self.inner.instances).keys().cloned().collect::<std::collections::BTreeSet<_>>();
            pool.members.retain(|m| known.contains(m.id.as_str()));
            self.start_pool(pool);
        }
    }

    fn start_pool(&self, pool: Pool) {
        let refill = Arc::new(Notify::new());
        self.save_pool(&pool);
        // Spawned under the lock, so the filler cannot look for its pool before it is listed.
        let mut pools = lock(&self.inner.pools);
        let task = tokio::spawn(fill(self.clone(), pool.name.clone(), refill.clone()));
        pools.insert(pool.name.clone(), PoolEntry { meta: pool, refill, task });
    }

    /// Creates a pool; members fill in the background.
    pub fn create_pool(&self, req: CreatePoolRequest) -> Result<Pool> {
        if !valid_name(&req.name) {
            return Err(RuntimeError::Invalid(format!("pool name {:?} must be a lowercase DNS name", req.name)));
        }
        if req.size > MAX_POOL_SIZE {
            return Err(RuntimeError::Invalid(format!("size {} is more than {MAX_POOL_SIZE}", req.size)));
        }
        if crate::vm::wants_vm(&req.template) {
            // Members are VMs: the image must be usable now, not at each member's boot.
            self.inner.vms.plan(&req.template)?;
        } else {
            let template_name =
                req.template.sandbox.as_ref().and_then(|s| s.template_name.clone()).ok_or_else(|| {
                    RuntimeError::Invalid(
                        "a pool's template needs sandbox.templateName (sandboxes) or image (VMs)".into(),
                    )
                })?;
            self.template(&template_name)?;
        }
        if lock(&self.inner.pools).contains_key(&req.name) {
            return Err(RuntimeError::Conflict(format!("pool {:?} already exists", req.name)));
        }
        let mut template = req.template;
        // Members must not expire while they wait; a claim sets the TTL.
        template.ttl_seconds = None;
        // Members are unowned until the claimer stamps its Machine's UID on one.
        template.owner_uid = None;
        let pool = Pool { name: req.name, size: req.size, template, members: vec![], message: None, created_at: now() };
        self.start_pool(pool.clone());
        Ok(pool)
    }

    pub fn pools(&self) -> Vec<Pool> {
        lock(&self.inner.pools).values().map(|e| e.meta.clone()).collect()
    }

    pub fn pool(&self, name: &str) -> Result<Pool> {
        lock(&self.inner.pools)
            .get(name)
            .map(|e| e.meta.clone())
            .ok_or_else(|| RuntimeError::NotFound(format!("no pool {name:?} on node {}", self.node_name())))
    }

    /// Takes one ready member, resumes it and hands it over, Running. Two claims never get the
    /// same member: the member is taken under the pool's lock.
    pub async fn claim(&self, pool_name: &str, req: ClaimRequest) -> Result<Vm> {
        if let Some(n) = &req.name
            && !valid_name(n)
        {
            return Err(RuntimeError::Invalid(format!("name {n:?} must be a lowercase DNS name")));
        }
        if let Some(t) = req.ttl_seconds
            && t <= 0
        {
            return Err(RuntimeError::Invalid(format!("ttlSeconds {t} must be greater than 0")));
        }
        let member = {
            let mut pools = lock(&self.inner.pools);
            let entry = pools
                .get_mut(pool_name)
                .ok_or_else(|| RuntimeError::NotFound(format!("no pool {pool_name:?} on node {}", self.node_name())))?;
            let Some(m) = entry.meta.members.iter_mut().find(|m| m.state == PoolMemberState::Ready) else {
                return Err(RuntimeError::Conflict(format!(
                    "pool {pool_name:?} has no ready member right now: retry shortly, or make the pool bigger"
                )));
            };
            m.state = PoolMemberState::Claimed;
            let member = m.clone();
            entry.refill.notify_one();
            member
        };
        let result = self.hand_over(&member, &req).await;
        let mut pools = lock(&self.inner.pools);
        if let Some(entry) = pools.get_mut(pool_name) {
            if result.is_err() {
                entry.meta.members.retain(|m| m.id != member.id);
            }
            self.save_pool(&entry.meta);
        }
        result
    }

    async fn hand_over(&self, member: &PoolMember, req: &ClaimRequest) -> Result<Vm> {
        // The new name is taken in the index before anything else happens to the member, so a
        // claim never waits on other instances (one still booting, say) to learn it is free.
        if let Some(new_name) = &req.name {
            let renamed = lock(&self.inner.instances).rename(&member.id, new_name);
            if let Err(e) = renamed {
                let _ = self.delete(&member.id).await;
                return Err(e);
            }
        }
        let vm = self.power(&member.id, PowerAction::Resume, false).await?;
        let slot = self.slot(&vm.id)?;
        let mut vm = slot.lock_owned().await;
        if let Some(n) = &req.name {
            vm.name = n.clone();
            vm.spec.name = n.clone();
        }
        if let Some(ttl) = req.ttl_seconds {
            let at = expiry(ttl);
            vm.spec.ttl_seconds = Some(ttl);
            vm.expires_at = Some(at.clone());
            self.arm_ttl(&vm.id, &at);
        }
        self.save(&vm)?;
        let out = vm.clone();
        // Whatever the copy needs before the claimer's first command (which waits for the
        // instance's lock): a VM's new identity.
        self.backend(&out).claimed(self, vm);
        Ok(out)
    }

    /// Deletes the pool and every member it holds, claimed or not.
    pub async fn delete_pool(&self, name: &str) -> Result<()> {
        let mut entry = lock(&self.inner.pools)
            .remove(name)
            .ok_or_else(|| RuntimeError::NotFound(format!("no pool {name:?} on node {}", self.node_name())))?;
        let _ = std::fs::remove_file(self.pools_dir().join(format!("{name}.json")));
        // Not aborted: a member the filler is making now would be left half made (its disk and
        // root mounted, no record of it). It finishes that member, finds the pool gone, deletes
        // the member and ends; woken here if it waits for a claim.
        entry.refill.notify_one();
        let _ = (&mut entry.task).await;
        for m in &entry.meta.members {
            match self.delete(&m.id).await {
                Ok(()) | Err(RuntimeError::NotFound(_)) => {}
                Err(e) => return Err(e),
            }
        }
        Ok(())
    }
}

fn set_members(rt: &Runtime, pool: &str, f: impl FnOnce(&mut Pool)) -> bool {
    let mut pools = lock(&rt.inner.pools);
    let Some(entry) = pools.get_mut(pool) else { return false };
    f(&mut entry.meta);
    rt.save_pool(&entry.meta);
    true
}

/// Keeps the pool at its size: boots a member to Paused whenever fewer than `size` are
/// waiting, and sleeps until a claim asks for a refill.
async fn fill(rt: Runtime, pool: String, refill: Arc<Notify>) {
    loop {
        // Forget members deleted since (a claimed one that expired, or one deleted by hand).
        let known: std::collections::BTreeSet<String> = lock(&rt.inner.instances).keys().cloned().collect();
        if !set_members(&rt, &pool, |p| p.members.retain(|m| known.contains(m.id.as_str()))) {
            return;
        }
        let Ok(meta) = rt.pool(&pool) else { return };
        // A member left Running (not yet paused) is paused now, so it becomes claimable.
        for m in meta.members.iter().filter(|m| m.state == PoolMemberState::Booting) {
            let state = match rt.get(&m.id).await {
                Ok(vm) if vm.state == VmState::Running => {
                    rt.power(&m.id, PowerAction::Pause, false).await.map(|v| v.state).ok()
                }
                Ok(vm) => Some(vm.state),
                Err(_) => None,
            };
            if state == Some(VmState::Paused) {
                let id = m.id.clone();
                set_members(&rt, &pool, |p| {
                    if let Some(x) = p.members.iter_mut().find(|x| x.id == id) {
                        x.state = PoolMemberState::Ready;
                    }
                });
            }
        }
        let Ok(meta) = rt.pool(&pool) else { return };
        let waiting = meta.members.iter().filter(|m| m.state != PoolMemberState::Claimed).count() as u32;
        if waiting >= meta.size {
            tokio::select! {
                _ = refill.notified() => {}
                _ = tokio::time::sleep(Duration::from_secs(5)) => {}
            }
            continue;
        }
        let mut req = meta.template.clone();
        req.owner_uid = None;
        req.name = format!("pool-{pool}-{}", &uuid::Uuid::new_v4().simple().to_string()[..8]);
        req.start_paused = true;
        req.labels.insert("kairon.zyvor.dev/node-pool".into(), pool.clone());
        match rt.create(req).await {
            Ok(vm) => {
                let state = if vm.state == VmState::Paused { PoolMemberState::Ready } else { PoolMemberState::Booting };
                let member = PoolMember { id: vm.id.clone(), name: vm.name.clone(), state };
                if !set_members(&rt, &pool, |p| {
                    p.members.push(member);
                    p.message = None;
                }) {
                    // Deleted while this member booted.
                    let _ = rt.delete(&vm.id).await;
                    return;
                }
            }
            Err(e) => {
                tracing::warn!(pool = %pool, error = %e, "filling the pool failed");
                set_members(&rt, &pool, |p| p.message = Some(format!("cannot add a member: {e}")));
                tokio::time::sleep(Duration::from_secs(2)).await;
            }
        }
    }
}
