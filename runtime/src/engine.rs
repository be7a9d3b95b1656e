//! The runtime's state: instances, templates and their life. The HTTP server is a thin layer
//! over this; everything a node asks for happens here.

use std::collections::BTreeMap;
use std::io::Seek as _;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use kairon_model::egress::GuestEgress;
use tokio::sync::Mutex;

use crate::api::{
    CreateTemplateRequest, CreateVmRequest, ExecRequest, ExecResult, FileEntry, ImageConfig, PowerAction, Process,
    Stats, Template, TemplateState, Vm, VmState,
};
use crate::backend::BackendKind;
use crate::files::{ByteStream, FileRead};
use crate::oci;
use crate::sandbox::backend::copy_tree;
use crate::sandbox::{SandboxError, SandboxHost, fs::FsError};

/// What a template-based sandbox gets: the template's own pre-baked spec.
pub const TEMPLATE_CPU_MILLIS: i64 = 1000;
pub const TEMPLATE_MEMORY_BYTES: u64 = 512 * 1024 * 1024;
/// The template every node has, built locally from the host's busybox-static with no network.
pub const BUSYBOX_TEMPLATE: &str = "busybox";
pub const BUILTIN_BUSYBOX: &str = "builtin:busybox";
/// A minimal Debian with python3 (agents expect Python), built on first use and cached.
pub const PYTHON_TEMPLATE: &str = "python";
pub const BUILTIN_PYTHON: &str = "builtin:python";
/// The label on the throwaway sandbox a template's build steps run in (its value: the template).
pub const TEMPLATE_BUILD_LABEL: &str = "kairon.zyvor.dev/template-build";
const MAX_BUILD_STEPS: usize = 64;
/// One build step's limit (a `pip install` of a data stack takes minutes, not hours).
const BUILD_STEP_TIMEOUT: Duration = Duration::from_secs(30 * 60);
/// What is kept of a step's output, for the message of a failed build.
const BUILD_STEP_OUTPUT: u64 = 64 << 10;

#[derive(Debug, thiserror::Error)]
pub enum RuntimeError {
    #[error("{0}")]
    NotFound(String),
    #[error("{0}")]
    Conflict(String),
    /// A process's stdin is not open (never kept open, closed, or lost with a runtime restart).
    #[error("{0}")]
    StdinClosed(String),
    /// A power request for an older Machine generation than one already applied.
    #[error("{0}")]
    Stale(String),
    /// The instance is not the one of the Machine a request acts for (its owner differs).
    #[error("{0}")]
    NotOwned(String),
    #[error("{0}")]
    Invalid(String),
    #[error("{0}")]
    NotSupported(String),
    #[error("{0}")]
    Internal(String),
}

impl RuntimeError {
    pub fn reason(&self) -> &'static str {
        match self {
            RuntimeError::NotFound(_) => "NotFound",
            RuntimeError::Conflict(_) => "Conflict",
            RuntimeError::StdinClosed(_) => "StdinClosed",
            RuntimeError::Stale(_) => "Stale",
            // The api's reason: to its caller the Machine has no instance of its own yet.
            RuntimeError::NotOwned(_) => "NotProvisioned",
            RuntimeError::Invalid(_) => "Invalid",
            RuntimeError::NotSupported(_) => "NotSupported",
            RuntimeError::Internal(_) => "InternalError",
        }
    }
}

impl From<SandboxError> for RuntimeError {
    fn from(e: SandboxError) -> Self {
        match e {
            SandboxError::NoProcess(_) => RuntimeError::NotFound(e.to_string()),
            SandboxError::StdinClosed(_) => RuntimeError::StdinClosed(e.to_string()),
            SandboxError::NotInSandbox { .. } => RuntimeError::Conflict(e.to_string()),
            SandboxError::Refused(_) => RuntimeError::Invalid(e.to_string()),
            other => RuntimeError::Internal(other.to_string()),
        }
    }
}

impl From<FsError> for RuntimeError {
    fn from(e: FsError) -> Self {
        match e {
            FsError::NotFound(_) => RuntimeError::NotFound(e.to_string()),
            FsError::Escape(_) | FsError::SymlinkEscape { .. } | FsError::IsDir(_) | FsError::TooLong(_) => {
                RuntimeError::Invalid(e.to_string())
            }
            FsError::NotEmpty(_) => RuntimeError::Conflict(e.to_string()),
            FsError::Io { .. } => RuntimeError::Internal(e.to_string()),
        }
    }
}

impl From<std::io::Error> for RuntimeError {
    fn from(e: std::io::Error) -> Self {
        RuntimeError::Internal(e.to_string())
    }
}

type Result<T> = std::result::Result<T, RuntimeError>;

#[derive(Clone)]
pub struct RuntimeConfig {
    pub state_dir: PathBuf,
    pub node_name: String,
    pub registry: oci::RegistryConfig,
    /// From the node's config file (`[sandbox] egress_allow_domains`, `inject_authorization`).
    pub egress: crate::egress::EgressPolicy,
    /// The node config's `[network]` table.
    pub network: crate::net::NetworkSettings,
}

struct TemplateEntry {
    meta: Template,
    progress: Arc<oci::Progress>,
}

pub(crate) struct Inner {
    pub(crate) cfg: RuntimeConfig,
    pub(crate) host: SandboxHost,
    /// Instances by id (each behind its own lock so one slow operation does not stall others)
    /// and the index of their runtime names.
    pub(crate) instances: std::sync::Mutex<Instances>,
    templates: std::sync::Mutex<BTreeMap<String, TemplateEntry>>,
    pub(crate) pools: std::sync::Mutex<BTreeMap<String, crate::pools::PoolEntry>>,
    /// The QEMU backend.
    pub(crate) vms: crate::vm::VmHost,
    /// Freezes with a deadline, by instance id.
    pub(crate) freezes: std::sync::Mutex<BTreeMap<String, crate::vm::ops::FreezeTimer>>,
    /// The guest network's plan (checked at startup) and, once a sandbox needed it, the
    /// running network.
    pub(crate) net_plan: crate::net::Plan,
    net: tokio::sync::OnceCell<Arc<crate::net::GuestNetwork>>,
    /// Refused egress, for the node agent.
    denials: Arc<crate::net::denials::DenialLog>,
    /// Cold migrations announced to this node and not yet sent, by import id.
    pub(crate) imports: std::sync::Mutex<BTreeMap<String, crate::migration::PendingImport>>,
}

#[derive(Clone)]
pub struct Runtime {
    pub(crate) inner: Arc<Inner>,
}

/// The narrowing a spec's `network.egress` asks for (an entry the api's validation would have
/// refused narrows to nothing: the safe direction).
fn guest_egress(spec: &CreateVmRequest) -> Option<Arc<GuestEgress>> {
    let egress = spec.network.as_ref()?.egress.as_ref()?;
    let narrowing = GuestEgress::compile(egress).unwrap_or(Some(GuestEgress::Nothing));
    narrowing.map(Arc::new)
}

/// Every instance by id, and which id holds each runtime name. Both change under one lock, so
/// a name is free or taken, never "busy": of any number of creates of one name, one wins.
#[derive(Default)]
pub(crate) struct Instances {
    by_id: BTreeMap<String, Arc<Mutex<Vm>>>,
    names: BTreeMap<String, String>,
    /// Guest IPs of sandboxes (their leases: a lease lives exactly as long as its instance
    /// here), and where the next search for a free one starts.
    guest_ips: BTreeMap<std::net::Ipv4Addr, String>,
    next_ip: u32,
    /// The narrowing of each instance whose spec asks its egress to be narrower than the node's.
    egress: BTreeMap<String, Arc<GuestEgress>>,
}

impl Instances {
    /// Adds an instance under its name; refuses a name another instance holds.
    pub(crate) fn insert(&mut self, vm: &Vm, slot: Arc<Mutex<Vm>>) -> Result<()> {
        if self.names.get(&vm.name).is_some_and(|holder| *holder != *vm.id) {
            return Err(RuntimeError::Conflict(format!("an instance named {:?} already exists", vm.name)));
        }
        self.names.insert(vm.name.clone(), vm.id.to_string());
        self.by_id.insert(vm.id.to_string(), slot);
        if let Some(ip) = vm.guest_ip.as_deref().and_then(|ip| ip.parse().ok()) {
            self.guest_ips.insert(ip, vm.id.to_string());
        }
        if let Some(narrowing) = guest_egress(&vm.spec) {
            self.egress.insert(vm.id.to_string(), narrowing);
        }
        Ok(())
    }

    pub(crate) fn remove(&mut self, id: &str) -> Option<Arc<Mutex<Vm>>> {
        self.names.retain(|_, holder| holder != id);
        self.guest_ips.retain(|_, holder| holder != id);
        self.egress.remove(id);
        self.by_id.remove(id)
    }

    /// A free guest IP for instance `id`, the next after the last one given (so an address
    /// just released is the last to be used again).
    pub(crate) fn lease(&mut self, id: &str, plan: &crate::net::Plan) -> Option<std::net::Ipv4Addr> {
        let capacity = plan.capacity();
        for step in 0..capacity {
            let n = (self.next_ip + step) % capacity;
            let ip = plan.guest_ip(n);
            if let std::collections::btree_map::Entry::Vacant(free) = self.guest_ips.entry(ip) {
                free.insert(id.to_string());
                self.next_ip = (n + 1) % capacity;
                return Some(ip);
            }
        }
        None
    }

    /// The instance a guest IP is leased to, with its narrowing.
    pub(crate) fn guest(&self, ip: std::net::Ipv4Addr) -> Option<crate::net::Guest> {
        let id = self.guest_ips.get(&ip)?;
        Some(crate::net::Guest { instance: id.clone(), egress: self.egress.get(id).cloned() })
    }

    /// Every leased guest IP whose instance narrows its egress.
    pub(crate) fn narrowed_guests(&self) -> Vec<(std::net::Ipv4Addr, Arc<GuestEgress>)> {
        self.guest_ips.iter().filter_map(|(ip, id)| Some((*ip, self.egress.get(id)?.clone()))).collect()
    }

    /// How many guest IPs are leased.
    pub(crate) fn leased(&self) -> usize {
        self.guest_ips.len()
    }

    /// Moves `id` to `new_name` (a claim's rename); refuses a name another instance holds.
    pub(crate) fn rename(&mut self, id: &str, new_name: &str) -> Result<()> {
        if self.names.get(new_name).is_some_and(|holder| holder != id) {
            return Err(RuntimeError::Conflict(format!("an instance named {new_name:?} already exists")));
        }
        self.names.retain(|_, holder| holder != id);
        self.names.insert(new_name.to_string(), id.to_string());
        Ok(())
    }

    /// The instance holding runtime name `name`.
    pub(crate) fn named(&self, name: &str) -> Option<&Arc<Mutex<Vm>>> {
        self.names.get(name).and_then(|id| self.by_id.get(id))
    }

    pub(crate) fn get(&self, id: &str) -> Option<&Arc<Mutex<Vm>>> {
        self.by_id.get(id)
    }

    pub(crate) fn keys(&self) -> impl Iterator<Item = &String> {
        self.by_id.keys()
    }

    pub(crate) fn values(&self) -> impl Iterator<Item = &Arc<Mutex<Vm>>> {
        self.by_id.values()
    }
}

/// The RFC 3339 instant `ttl` seconds from now.
/// What a new sandbox's writable layer starts with.
pub(crate) enum Seed {
    /// A copy of a directory laid out like an overlay upper dir (a fork on this node).
    Copy(PathBuf),
    /// A layer tar read as it arrives (a cold migration from another node).
    Layer(Box<dyn std::io::Read + Send>),
}

pub(crate) fn expiry(ttl: i64) -> String {
    (chrono::Utc::now() + chrono::Duration::seconds(ttl)).to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

pub(crate) fn now() -> String {
    chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Millis, true)
}

pub(crate) fn lock<T>(m: &std::sync::Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// Refuses an instance that is not Running (guest operations need a running guest).
pub(crate) fn require_running(vm: &Vm) -> Result<()> {
    match vm.state {
        VmState::Running => Ok(()),
        VmState::Paused => Err(RuntimeError::Conflict(format!("{} is paused: resume it first", vm.name))),
        s => Err(RuntimeError::Conflict(format!("{} is {s:?}: start it first", vm.name))),
    }
}

pub(crate) fn valid_name(s: &str) -> bool {
    kairon_model::validate::is_dns_subdomain(s)
}

impl Runtime {
    /// Opens the node's state, adopts the sandboxes that still run, and makes sure the
    /// built-in busybox template exists.
    pub async fn open(mut cfg: RuntimeConfig) -> Result<Runtime> {
        let net_plan =
            crate::net::Plan::new(&cfg.node_name, &cfg.network).map_err(|e| RuntimeError::Invalid(e.to_string()))?;
        cfg.egress = cfg.egress.deny_guest_subnet(net_plan.subnet);
        std::fs::create_dir_all(cfg.state_dir.join("templates"))?;
        let host = SandboxHost::new(&cfg.state_dir, &cfg.node_name)?;
        let vms = crate::vm::VmHost::new(&cfg.state_dir);
        let rt = Runtime {
            inner: Arc::new(Inner {
                cfg,
                host,
                vms,
                freezes: std::sync::Mutex::new(BTreeMap::new()),
                instances: std::sync::Mutex::new(Instances::default()),
                templates: std::sync::Mutex::new(BTreeMap::new()),
                pools: std::sync::Mutex::new(BTreeMap::new()),
                net_plan,
                net: tokio::sync::OnceCell::new(),
                denials: Default::default(),
                imports: std::sync::Mutex::new(BTreeMap::new()),
            }),
        };
        rt.load_templates();
        let weak = Arc::downgrade(&rt.inner);
        let hook: crate::vm::NetHook = Arc::new(move |pid, ip| {
            let weak = weak.clone();
            Box::pin(async move {
                let inner = weak.upgrade().ok_or("the runtime is gone")?;
                let net = Runtime { inner }.network().await.map_err(|e| e.to_string())?;
                net.attach_vm(pid, ip).await.map_err(|e| e.to_string())
            })
        });
        let node_netns = rt.inner.net_plan.netns.as_ref().map(|n| PathBuf::from("/run/netns").join(n));
        rt.inner.vms.set_net_hook(hook, node_netns);
        rt.adopt().await?;
        if lock(&rt.inner.instances).leased() > 0 {
            // Adopted guests keep their addresses; their resolver and proxy must answer again.
            rt.network().await?;
        }
        rt.load_pools();
        // What a guest prints on its console is kept under a cap, whatever it prints.
        let weak = Arc::downgrade(&rt.inner);
        tokio::spawn(async move {
            loop {
                tokio::time::sleep(crate::vm::CONSOLE_LOG_CHECK).await;
                let Some(inner) = weak.upgrade() else { return };
                let _ = tokio::task::spawn_blocking(move || inner.vms.rotate_console_logs(crate::vm::CONSOLE_LOG_CAP))
                    .await;
            }
        });
        if rt.template(BUSYBOX_TEMPLATE).is_err() {
            rt.create_template(CreateTemplateRequest {
                name: BUSYBOX_TEMPLATE.into(),
                image_ref: BUILTIN_BUSYBOX.into(),
                ..Default::default()
            })?;
        }
        Ok(rt)
    }

    pub(crate) fn state_dir(&self) -> &Path {
        &self.inner.cfg.state_dir
    }

    pub fn node_name(&self) -> &str {
        &self.inner.cfg.node_name
    }

    /// Every `runc` process this runtime has started.
    pub fn runc_invocations(&self) -> u64 {
        self.inner.host.runc_invocations()
    }

    fn templates_dir(&self) -> PathBuf {
        self.inner.cfg.state_dir.join("templates")
    }

    // -----------------------------------------------------------------------------------
    // Templates

    fn load_templates(&self) {
        let Ok(entries) = std::fs::read_dir(self.templates_dir()) else { return };
        let mut map = lock(&self.inner.templates);
        for e in entries.flatten() {
            let Ok(raw) = std::fs::read(e.path().join("template.json")) else { continue };
            let Ok(mut meta) = serde_json::from_slice::<Template>(&raw) else { continue };
            if meta.state == TemplateState::Building || meta.state == TemplateState::Pending {
                // The build was cut off by a restart.
                meta.state = TemplateState::Failed;
                meta.message = Some("the build was interrupted by a runtime restart: build it again".into());
            }
            map.insert(meta.name.clone(), TemplateEntry { meta, progress: Arc::new(oci::Progress::default()) });
        }
    }

    pub fn templates(&self) -> Vec<Template> {
        lock(&self.inner.templates).values().map(live_template).collect()
    }

    pub fn template(&self, name: &str) -> Result<Template> {
        lock(&self.inner.templates).get(name).map(live_template).ok_or_else(|| {
            RuntimeError::NotFound(format!(
                "template {name:?} does not exist on node {}: build it first (POST /api/v1/nodes/{}/templates)",
                self.node_name(),
                self.node_name()
            ))
        })
    }

    /// Starts building a template in the background; the returned record shows progress.
    pub fn create_template(&self, req: CreateTemplateRequest) -> Result<Template> {
        let name = req.name.clone();
        if !valid_name(&name) {
            return Err(RuntimeError::Invalid(format!("template name {name:?} must be a lowercase DNS name")));
        }
        if req.image_ref.trim().is_empty() {
            return Err(RuntimeError::Invalid("imageRef is required, e.g. docker.io/library/alpine:3.19".into()));
        }
        if req.steps.len() > MAX_BUILD_STEPS {
            return Err(RuntimeError::Invalid(format!(
                "{} build steps: at most {MAX_BUILD_STEPS} (join commands with && in one step)",
                req.steps.len()
            )));
        }
        if let Some(i) = req.steps.iter().position(|s| s.trim().is_empty()) {
            return Err(RuntimeError::Invalid(format!("build step {} is empty: give a shell command", i + 1)));
        }
        let progress = Arc::new(oci::Progress::default());
        let meta = {
            let mut map = lock(&self.inner.templates);
            if let Some(existing) = map.get(&name)
                && existing.meta.state != TemplateState::Failed
            {
                return Err(RuntimeError::Conflict(format!(
                    "template {name:?} already exists (state {:?})",
                    existing.meta.state
                )));
            }
            let meta = Template {
                name: name.clone(),
                image_ref: req.image_ref.clone(),
                state: TemplateState::Building,
                bytes_done: 0,
                bytes_total: None,
                digest: None,
                message: None,
                config: ImageConfig::default(),
                created_at: now(),
                steps: req.steps.clone(),
                steps_done: 0,
            };
            map.insert(name.clone(), TemplateEntry { meta: meta.clone(), progress: progress.clone() });
            meta
        };
        let rt = self.clone();
        tokio::spawn(async move {
            let dir = rt.templates_dir().join(&name);
            let result = async {
                let (digest, config) = rt.build_template(&dir, &req, &progress).await?;
                // Owned by the template's own id range before any sandbox runs on it.
                rt.template_idmap(&name).await?;
                if !req.steps.is_empty() {
                    rt.run_build_steps(&name, &config, &req.steps).await?;
                }
                Ok::<_, RuntimeError>((digest, config))
            }
            .await;
            let mut map = lock(&rt.inner.templates);
            if let Some(entry) = map.get_mut(&name) {
                match result {
                    Ok((digest, config)) => {
                        entry.meta.state = TemplateState::Ready;
                        entry.meta.digest = digest;
                        entry.meta.config = config;
                    }
                    Err(e) => {
                        tracing::warn!(template = %name, error = %e, "template build failed");
                        entry.meta.state = TemplateState::Failed;
                        entry.meta.message = Some(e.to_string());
                    }
                }
                entry.meta.bytes_done = progress.bytes_done.load(Ordering::Relaxed);
                let total = progress.bytes_total.load(Ordering::Relaxed);
                entry.meta.bytes_total = (total > 0).then_some(total);
                if let Ok(raw) = serde_json::to_vec_pretty(&entry.meta) {
                    let _ = std::fs::write(dir.join("template.json"), raw);
                }
            }
        });
        Ok(meta)
    }

    async fn build_template(
        &self,
        dir: &Path,
        req: &CreateTemplateRequest,
        progress: &oci::Progress,
    ) -> Result<(Option<String>, ImageConfig)> {
        let image_ref = req.image_ref.as_str();
        let rootfs = dir.join("rootfs");
        if dir.exists() {
            std::fs::remove_dir_all(dir)?;
        }
        std::fs::create_dir_all(&rootfs)?;
        if image_ref == BUILTIN_BUSYBOX {
            let rootfs2 = rootfs.clone();
            let config = tokio::task::spawn_blocking(move || oci::build_busybox_rootfs(&rootfs2))
                .await
                .map_err(|e| RuntimeError::Internal(e.to_string()))?
                .map_err(|e| RuntimeError::Internal(e.to_string()))?;
            return Ok((None, config));
        }
        if image_ref == BUILTIN_PYTHON {
            let config = oci::debian::build_python_rootfs(&rootfs, progress)
                .await
                .map_err(|e| RuntimeError::Internal(format!("building the python template: {e}")))?;
            return Ok((None, config));
        }
        let mut registry = self.inner.cfg.registry.clone();
        // A tenant's reference to a registry the node's admin did not configure: every
        // connection the pull makes is checked against the node's egress policy.
        let guard = match req.tenant_source && !registry.names_registry_of(image_ref) {
            true => {
                let guard = oci::PullGuard::start(Arc::new(self.inner.cfg.egress.clone())).await?;
                registry.proxy = Some(guard.url());
                Some(guard)
            }
            false => None,
        };
        let pulled = oci::pull(image_ref, &rootfs, &registry, progress).await.map_err(|e| {
            let refused = guard.as_ref().map(|g| g.refusals()).unwrap_or_default();
            match refused.first() {
                // The client's own error only says the proxy answered 403: say why.
                Some(why) => RuntimeError::Invalid(format!("pulling {image_ref}: {why}")),
                None => RuntimeError::Invalid(format!("pulling {image_ref}: {e}")),
            }
        })?;
        Ok((Some(pulled.digest), pulled.config))
    }

    /// Runs a build's steps in a throwaway sandbox of the template's rootfs, then applies what
    /// they changed (the sandbox's upper directory, as a layer: whiteouts remove, opaque
    /// directories replace) onto the rootfs. The template is not Ready meanwhile, so no other
    /// sandbox sees the rootfs change under it.
    async fn run_build_steps(&self, name: &str, config: &ImageConfig, steps: &[String]) -> Result<()> {
        let template = Template { state: TemplateState::Ready, config: config.clone(), ..self.template(name)? };
        let req = CreateVmRequest {
            name: format!("build-{}", &kairon_runtime_api::InstanceId::random().as_str()[..12]),
            sandbox: Some(kairon_model::SandboxSpec { template_name: Some(name.to_string()) }),
            labels: [(TEMPLATE_BUILD_LABEL.to_string(), name.to_string())].into(),
            ..Default::default()
        };
        let vm = self.create_on(&template, req, None).await?;
        let ran = self.run_steps(&vm.id, name, steps).await;
        let committed = match ran {
            Ok(()) => self.commit_upper(&vm.id, name).await,
            Err(e) => Err(e),
        };
        if let Err(e) = self.delete(vm.id.as_str()).await {
            tracing::warn!(template = %name, error = %e, "removing a template's build sandbox");
        }
        committed
    }

    async fn run_steps(&self, id: &kairon_runtime_api::InstanceId, name: &str, steps: &[String]) -> Result<()> {
        for (i, step) in steps.iter().enumerate() {
            let req = ExecRequest {
                command: vec!["/bin/sh".into(), "-c".into(), step.clone()],
                timeout_seconds: Some(BUILD_STEP_TIMEOUT.as_secs()),
                ..Default::default()
            };
            let out = self.exec_bounded(id.as_str(), &req, BUILD_STEP_OUTPUT).await?;
            if out.exit_code != 0 {
                let tail = |s: &str| {
                    let s = s.trim_end();
                    let start = s.char_indices().rev().nth(2000).map_or(0, |(i, _)| i);
                    s[start..].to_string()
                };
                return Err(RuntimeError::Invalid(format!(
                    "build step {} of {} ({step:?}) exited with code {}{}: {}{}",
                    i + 1,
                    steps.len(),
                    out.exit_code,
                    if out.timed_out { " (timed out)" } else { "" },
                    tail(&out.stderr),
                    if out.stdout.is_empty() { String::new() } else { format!("\nstdout: {}", tail(&out.stdout)) },
                )));
            }
            if let Some(entry) = lock(&self.inner.templates).get_mut(name) {
                entry.meta.steps_done = (i + 1) as u32;
            }
        }
        Ok(())
    }

    /// Stops the build sandbox and applies its upper directory onto the template's rootfs.
    async fn commit_upper(&self, id: &kairon_runtime_api::InstanceId, name: &str) -> Result<()> {
        self.inner.host.stop(id.as_str()).await?;
        self.inner.host.unmount_root(id.as_str()).await?;
        let map = self.template_idmap(name).await?;
        let upper = self.inner.host.upper_dir(id.as_str());
        let rootfs = self.templates_dir().join(name).join("rootfs");
        tokio::task::spawn_blocking(move || -> Result<()> {
            // The layer as an OCI tar (guest owners, whiteouts as .wh. names), applied with the
            // pull's own rules, then its files moved into the template's id range.
            let mut tar = tempfile::tempfile_in(rootfs.parent().unwrap_or(&rootfs))?;
            crate::sandbox::layer::write_layer(&upper, &mut tar, &map)?;
            tar.seek(std::io::SeekFrom::Start(0))?;
            oci::apply_layer(std::io::BufReader::new(tar), oci::LAYER_TAR, &rootfs)
                .map_err(|e| RuntimeError::Internal(format!("applying the build steps' layer: {e}")))?;
            crate::sandbox::idmap::shift_rootfs(&rootfs, &map)?;
            Ok(())
        })
        .await
        .map_err(|e| RuntimeError::Internal(e.to_string()))?
    }

    /// The host id range of a template's sandboxes (see `sandbox::idmap`): read from beside its
    /// rootfs, or, the first time, picked and the rootfs chowned into it (a template built by
    /// an older runtime is shifted on its first use).
    pub(crate) async fn template_idmap(&self, name: &str) -> Result<crate::sandbox::idmap::IdMap> {
        use crate::sandbox::idmap::{self, IdMap};
        static PICKING: std::sync::Mutex<()> = std::sync::Mutex::new(());
        let templates = self.templates_dir();
        let dir = templates.join(name);
        if let Some(m) = IdMap::load(&dir) {
            return Ok(m);
        }
        let state_dir = self.inner.cfg.state_dir.clone();
        let name = name.to_string();
        tokio::task::spawn_blocking(move || {
            let _one_at_a_time = lock(&PICKING);
            if let Some(m) = IdMap::load(&dir) {
                return Ok(m);
            }
            let taken: Vec<IdMap> = std::fs::read_dir(&templates)
                .map(|d| d.flatten().filter_map(|e| IdMap::load(&e.path())).collect())
                .unwrap_or_default();
            let m = idmap::pick(idmap::preferred_slot(&state_dir, &name), &taken);
            let started = std::time::Instant::now();
            let changed = idmap::shift_rootfs(&dir.join("rootfs"), &m)
                .map_err(|e| RuntimeError::Internal(format!("giving template {name:?} its id range: {e}")))?;
            m.save(&dir)?;
            tracing::info!(template = %name, host_base = m.host_base, changed, seconds = started.elapsed().as_secs_f64(), "template rootfs moved into its id range");
            Ok(m)
        })
        .await
        .map_err(|e| RuntimeError::Internal(e.to_string()))?
    }

    /// Where VM images, kernels and initrds may lie (the node config's `[vm] image_dirs`),
    /// besides the runtime's own images directory.
    pub fn set_image_dirs(&self, dirs: Vec<PathBuf>) {
        self.inner.vms.set_image_dirs(dirs);
    }

    /// The largest new empty volume a VM may ask of this node (`[vm] max_volume_size`).
    pub fn set_max_volume_bytes(&self, bytes: u64) {
        self.inner.vms.set_max_volume_bytes(bytes);
    }

    /// The disk limit of each sandbox created from now on: its writable layer and its logs
    /// (default `sandbox::DEFAULT_DISK_LIMIT`, or `KAIRON_SANDBOX_DISK_LIMIT`).
    pub fn set_sandbox_disk_limit(&self, bytes: u64) {
        self.inner.host.set_disk_limit(bytes);
    }

    /// Waits until a template is Ready (or fails).
    pub async fn wait_template(&self, name: &str, timeout: Duration) -> Result<Template> {
        let deadline = tokio::time::Instant::now() + timeout;
        loop {
            let t = self.template(name)?;
            match t.state {
                TemplateState::Ready => return Ok(t),
                TemplateState::Failed => {
                    return Err(RuntimeError::Invalid(format!(
                        "template {name:?} failed to build: {}",
                        t.message.unwrap_or_default()
                    )));
                }
                _ if tokio::time::Instant::now() >= deadline => {
                    return Err(RuntimeError::Conflict(format!("template {name:?} is still building")));
                }
                _ => tokio::time::sleep(Duration::from_millis(50)).await,
            }
        }
    }

    // -----------------------------------------------------------------------------------
    // Instances

    fn vm_file(&self, id: &str) -> PathBuf {
        self.inner.host.instance_dir(id).join("vm.json")
    }

    pub(crate) fn save(&self, vm: &Vm) -> Result<()> {
        let raw = serde_json::to_vec_pretty(vm).map_err(|e| RuntimeError::Internal(e.to_string()))?;
        let path = self.vm_file(&vm.id);
        let tmp = path.with_extension("json.tmp");
        std::fs::write(&tmp, raw)?;
        std::fs::rename(tmp, path)?;
        Ok(())
    }

    /// After a restart (even a kill -9): every instance on disk is matched with what its
    /// backend (runc or QEMU) still runs, so nothing is created twice and nothing is lost.
    async fn adopt(&self) -> Result<()> {
        let Ok(entries) = std::fs::read_dir(self.inner.cfg.state_dir.join("instances")) else { return Ok(()) };
        for e in entries.flatten() {
            let Ok(raw) = std::fs::read(e.path().join("vm.json")) else { continue };
            let Ok(mut vm) = serde_json::from_slice::<Vm>(&raw) else { continue };
            self.backend(&vm).adopt(&mut vm).await?;
            self.save(&vm)?;
            if let Some(at) = &vm.expires_at {
                self.arm_ttl(&vm.id, at);
            }
            let slot = Arc::new(Mutex::new(vm.clone()));
            if let Err(e) = lock(&self.inner.instances).insert(&vm, slot) {
                tracing::warn!(id = %vm.id, error = %e, "not adopting an instance whose name another holds");
            }
        }
        Ok(())
    }

    pub async fn list(&self) -> Vec<Vm> {
        let all: Vec<Arc<Mutex<Vm>>> = lock(&self.inner.instances).values().cloned().collect();
        let mut out = Vec::with_capacity(all.len());
        for vm in all {
            out.push(vm.lock().await.clone());
        }
        out
    }

    /// The instance with this id. Never by name: a name is tenant-influenced (a Machine's
    /// `kairon-<namespace>-<name>`), so nothing that acts on an instance resolves one.
    pub(crate) fn slot(&self, id: &str) -> Result<Arc<Mutex<Vm>>> {
        lock(&self.inner.instances)
            .get(id)
            .cloned()
            .ok_or_else(|| RuntimeError::NotFound(format!("no instance {id:?} on node {}", self.node_name())))
    }

    pub async fn get(&self, id: &str) -> Result<Vm> {
        Ok(self.slot(id)?.lock().await.clone())
    }

    /// Refuses unless instance `id` belongs to the Machine with UID `owner`.
    pub async fn check_owner(&self, id: &str, owner: &str) -> Result<()> {
        let slot = self.slot(id)?;
        let vm = slot.lock().await;
        if vm.owner_uid.as_deref() == Some(owner) {
            return Ok(());
        }
        Err(RuntimeError::NotOwned(format!(
            "instance {id:?} is not the instance of Machine UID {owner} (the Machine has no runtime instance of \
             its own yet): wait for it to start"
        )))
    }

    /// Sets the owner (the owning Machine's UID) if the current one is `expected`.
    pub async fn set_owner(&self, id: &str, expected: Option<&str>, owner: &str) -> Result<Vm> {
        if owner.is_empty() || owner.len() > 128 {
            return Err(RuntimeError::Invalid("owner must be a Machine UID".into()));
        }
        let slot = self.slot(id)?;
        let mut vm = slot.lock().await;
        if vm.owner_uid.as_deref() != expected {
            return Err(RuntimeError::Conflict(match &vm.owner_uid {
                Some(_) => format!("instance {id:?} has another owner"),
                None => format!("instance {id:?} is unowned"),
            }));
        }
        vm.owner_uid = Some(owner.to_string());
        // Generations are the old owner's: the new one starts its own count.
        vm.power_generation = None;
        self.save(&vm)?;
        Ok(vm.clone())
    }

    pub async fn create(&self, req: CreateVmRequest) -> Result<Vm> {
        self.create_seeded(req, None).await
    }

    /// Creates an instance; with `seed`, a sandbox whose root starts with another sandbox's
    /// changes.
    pub(crate) async fn create_seeded(&self, req: CreateVmRequest, seed: Option<Seed>) -> Result<Vm> {
        if !valid_name(&req.name) {
            return Err(RuntimeError::Invalid(format!("name {:?} must be a lowercase DNS name", req.name)));
        }
        if seed.is_none() && crate::vm::wants_vm(&req) {
            return self.create_vm(req).await;
        }
        let Some(sandbox) = &req.sandbox else {
            return Err(RuntimeError::Invalid(
                "nothing to run: give spec.image (a VM; e.g. /var/lib/fluxvm/images/kairon-hw.qcow2) or spec.sandbox.templateName (a sandbox)".into(),
            ));
        };
        let Some(template_name) = sandbox.template_name.clone() else {
            return Err(RuntimeError::Invalid(
                "a sandbox needs spec.sandbox.templateName, or spec.image to boot on the lightweight VM track".into(),
            ));
        };
        let template = match self.template(&template_name) {
            Err(RuntimeError::NotFound(_)) if template_name == PYTHON_TEMPLATE => {
                self.create_template(CreateTemplateRequest {
                    name: PYTHON_TEMPLATE.into(),
                    image_ref: BUILTIN_PYTHON.into(),
                    ..Default::default()
                })?;
                return Err(RuntimeError::Conflict(format!(
                    "template {PYTHON_TEMPLATE:?} is being built on first use (about a minute): follow GET /v1/templates/{PYTHON_TEMPLATE} and retry when it is Ready"
                )));
            }
            other => other?,
        };
        if template.state != TemplateState::Ready {
            return Err(RuntimeError::Conflict(format!(
                "template {template_name:?} is not ready yet ({:?}): wait for it to finish building",
                template.state
            )));
        }
        self.create_on(&template, req, seed).await
    }

    /// Creates a sandbox of `template` (whatever its state: a build's own sandbox runs on a
    /// template that is not Ready yet).
    async fn create_on(&self, template: &Template, mut req: CreateVmRequest, seed: Option<Seed>) -> Result<Vm> {
        let template_name = template.name.clone();
        let id = kairon_runtime_api::InstanceId::random();
        let vm = Vm {
            id: id.clone(),
            name: req.name.clone(),
            backend: BackendKind::Runc.as_str().into(),
            state: VmState::Creating,
            guest_ip: None,
            pid: None,
            created_at: now(),
            template: Some(template_name.clone()),
            message: None,
            expires_at: None,
            owner_uid: req.owner_uid.take(),
            power_generation: None,
            spec: req,
        };
        let slot = Arc::new(Mutex::new(vm.clone()));
        let mut guard = slot.lock().await;
        lock(&self.inner.instances).insert(&vm, slot.clone())?;
        std::fs::create_dir_all(self.inner.host.instance_dir(&id))?;
        self.save(&guard)?;
        if let Some(seed) = seed {
            let upper = self.inner.host.upper_dir(&id);
            let seeded = async {
                let map = self.template_idmap(&template.name).await?;
                self.inner.host.prepare_disk(&id, &map).await?;
                match seed {
                    Seed::Copy(from) => copy_tree(&from, &upper).await,
                    Seed::Layer(layer) => tokio::task::spawn_blocking(move || {
                        crate::sandbox::layer::read_layer(layer, &upper, &map)
                            .map_err(|e| RuntimeError::Invalid(format!("the sandbox's layer: {e}")))
                    })
                    .await
                    .map_err(|e| RuntimeError::Internal(e.to_string()))?
                    .map(|_| ()),
                }
            };
            if let Err(e) = seeded.await {
                drop(guard);
                let _ = self.inner.host.destroy(&id).await;
                lock(&self.inner.instances).remove(id.as_str());
                return Err(e);
            }
        }
        match self.boot(&mut guard, template).await {
            Ok(()) => {
                if let Some(ttl) = guard.spec.ttl_seconds {
                    let at = expiry(ttl);
                    guard.expires_at = Some(at.clone());
                    self.save(&guard)?;
                    self.arm_ttl(&id, &at);
                }
                Ok(guard.clone())
            }
            Err(e) => {
                drop(guard);
                let _ = self.inner.host.destroy(&id).await;
                lock(&self.inner.instances).remove(id.as_str());
                Err(e)
            }
        }
    }

    /// Starts a sandbox from its template (paused with `spec.startPaused`) and saves it. An
    /// attached sandbox keeps its guest IP across restarts; it gets one at its first boot.
    pub(crate) async fn boot(&self, vm: &mut Vm, template: &Template) -> Result<()> {
        let rootfs = self.templates_dir().join(&template.name).join("rootfs");
        let map = self.template_idmap(&template.name).await?;
        let network = match self.wants_network(&vm.spec) {
            true => Some(self.network().await?),
            false => None,
        };
        let mut guest_net = None;
        if let Some(net) = &network {
            if vm.guest_ip.is_none() {
                vm.guest_ip = Some(self.lease_guest_addr(&vm.id)?.ip.to_string());
                self.save(vm)?;
            }
            let path = self.inner.host.instance_dir(&vm.id).join("resolv.conf");
            std::fs::write(&path, net.resolv_conf())?;
            guest_net = Some(crate::sandbox::GuestNet {
                resolv_conf: path,
                ca_bundle: net.guest_bundle().map(Path::to_path_buf),
            });
        }
        let pid = self
            .inner
            .host
            .start(
                &vm.id,
                &rootfs,
                &template.config,
                TEMPLATE_CPU_MILLIS,
                TEMPLATE_MEMORY_BYTES,
                &map,
                guest_net.as_ref(),
            )
            .await?;
        vm.pid = Some(pid);
        if let (Some(net), Some(ip)) = (&network, vm.guest_ip.as_deref().and_then(|ip| ip.parse().ok())) {
            net.attach(pid, ip)
                .await
                .map_err(|e| RuntimeError::Internal(format!("attaching the guest network: {e}")))?;
        }
        vm.state = VmState::Running;
        if vm.spec.start_paused {
            self.inner.host.set_frozen(&vm.id, true).await?;
            vm.state = VmState::Paused;
        }
        self.save(vm)
    }

    /// Whether a sandbox with this spec gets a guest IP: the node attaches every sandbox, or
    /// its `spec.network` asks for `Tap`/`Bridge`; `None` never.
    fn wants_network(&self, spec: &CreateVmRequest) -> bool {
        use kairon_model::NetworkMode;
        match spec.network.as_ref().map(|n| n.mode) {
            Some(NetworkMode::Tap | NetworkMode::Bridge) => true,
            Some(NetworkMode::None) => false,
            Some(NetworkMode::User) | None => self.inner.cfg.network.attach_sandboxes == Some(true),
        }
    }

    /// The node's guest network, set up by the first sandbox that needs it.
    pub(crate) async fn network(&self) -> Result<Arc<crate::net::GuestNetwork>> {
        self.inner
            .net
            .get_or_try_init(|| async {
                // Weak: the network lives in the runtime it looks instances up in.
                let inner = Arc::downgrade(&self.inner);
                let guest_of: crate::net::proxy::GuestOf = Arc::new(move |ip| {
                    let std::net::IpAddr::V4(ip) = ip else { return None };
                    inner.upgrade().and_then(|inner| lock(&inner.instances).guest(ip))
                });
                let narrowed = lock(&self.inner.instances).narrowed_guests();
                crate::net::GuestNetwork::start(
                    self.inner.net_plan.clone(),
                    Arc::new(self.inner.cfg.egress.clone()),
                    self.inner.denials.clone(),
                    guest_of,
                    narrowed,
                    &self.inner.cfg.state_dir.join("egress-ca"),
                    self.inner.cfg.network.upstream_ca_file.as_deref(),
                )
                .await
                .map_err(|e| RuntimeError::Internal(format!("setting up the guest network: {e}")))
            })
            .await
            .cloned()
    }

    /// A guest address for instance `id` on this node's guest network (its lease lives as
    /// long as the instance's record).
    pub(crate) fn lease_guest_addr(&self, id: &str) -> Result<crate::vm::GuestAddr> {
        let plan = &self.inner.net_plan;
        let ip = lock(&self.inner.instances).lease(id, plan).ok_or_else(|| {
            RuntimeError::Conflict(format!(
                "the guest subnet {} of node {} has no free address",
                plan.subnet,
                self.node_name()
            ))
        })?;
        Ok(crate::vm::GuestAddr { ip, gateway: plan.gateway })
    }

    /// How many guest IPs are leased (tests check that none leak).
    pub fn guest_ips_leased(&self) -> usize {
        lock(&self.inner.instances).leased()
    }

    /// The guest network's refusals so far, by reason.
    pub fn egress_denials(&self) -> BTreeMap<&'static str, u64> {
        self.inner.denials.totals()
    }

    /// Refusals to show after sequence number `after`, waiting up to `wait` for one.
    pub async fn egress_denials_since(&self, after: u64, wait: Duration) -> kairon_runtime_api::types::EgressDenials {
        self.inner.denials.since(after, wait).await
    }

    /// Deletes the instance at `expires_at` (RFC 3339), unless it is gone by then.
    pub(crate) fn arm_ttl(&self, id: &str, expires_at: &str) {
        let Ok(due) = chrono::DateTime::parse_from_rfc3339(expires_at) else { return };
        let due = due.with_timezone(&chrono::Utc);
        let wait = (due - chrono::Utc::now()).to_std().unwrap_or_default();
        let rt = self.clone();
        let id = id.to_string();
        tokio::spawn(async move {
            tokio::time::sleep(wait).await;
            // A later claim may have moved the deadline; only the current one counts.
            let current = rt.get(&id).await.ok().and_then(|vm| vm.expires_at);
            let due_now = current.and_then(|at| chrono::DateTime::parse_from_rfc3339(&at).ok()).is_some_and(|at| {
                at.with_timezone(&chrono::Utc) <= chrono::Utc::now() + chrono::Duration::milliseconds(50)
            });
            if !due_now {
                return;
            }
            if let Err(e) = rt.delete(&id).await
                && !matches!(e, RuntimeError::NotFound(_))
            {
                tracing::warn!(instance = %id, error = %e, "deleting an expired instance failed");
            }
        });
    }

    pub async fn delete(&self, id_or_name: &str) -> Result<()> {
        let slot = self.slot(id_or_name)?;
        let vm = slot.lock().await;
        lock(&self.inner.freezes).remove(vm.id.as_str());
        self.backend(&vm).destroy(&vm).await?;
        lock(&self.inner.instances).remove(vm.id.as_str());
        Ok(())
    }

    /// One power action: refused when `model::power::plan` refuses the change of power state it
    /// makes ([`BackendKind::check_transition`]); how it is carried out is the backend's.
    pub async fn power(&self, id_or_name: &str, action: PowerAction, paused: bool) -> Result<Vm> {
        self.power_at(id_or_name, action, paused, None).await
    }

    /// A power action on behalf of the Machine at `generation` (none: unconditionally). Under
    /// the instance's lock, so of a direct thaw and a reconcile racing it, the older generation
    /// is refused rather than applied after the newer one.
    pub async fn power_at(
        &self,
        id_or_name: &str,
        action: PowerAction,
        paused: bool,
        generation: Option<i64>,
    ) -> Result<Vm> {
        let slot = self.slot(id_or_name)?;
        let mut vm = slot.lock().await;
        if let (Some(asked), Some(applied)) = (generation, vm.power_generation)
            && asked < applied
        {
            return Err(RuntimeError::Stale(format!(
                "{action:?} for generation {asked} of the Machine is stale: generation {applied} was applied already"
            )));
        }
        BackendKind::of(&vm).check_transition(vm.state, action, paused)?;
        let before = vm.clone();
        self.backend(&vm).power(self, &mut vm, action, paused).await?;
        vm.message = None;
        if generation.is_some() {
            vm.power_generation = generation.max(vm.power_generation);
        }
        // An action that changed nothing (the node agent resuming what a claim's direct thaw
        // resumed already) writes nothing either: the file write would hold the instance's lock,
        // and the exec waiting on it, for nothing.
        if *vm != before {
            self.save(&vm)?;
        }
        Ok(vm.clone())
    }

    pub(crate) async fn running(&self, id_or_name: &str) -> Result<Vm> {
        let vm = self.get(id_or_name).await?;
        require_running(&vm)?;
        Ok(vm)
    }

    /// Runs a command to completion, keeping at most the default 16 MiB of each stream.
    pub async fn exec(&self, id_or_name: &str, req: &ExecRequest) -> Result<ExecResult> {
        self.exec_bounded(id_or_name, req, kairon_runtime_api::types::DEFAULT_MAX_EXEC_OUTPUT_BYTES).await
    }

    /// Runs a command to completion, keeping at most `max_output` bytes of each stream.
    pub async fn exec_bounded(&self, id_or_name: &str, req: &ExecRequest, max_output: u64) -> Result<ExecResult> {
        let vm = self.running(id_or_name).await?;
        self.backend(&vm).exec(&vm, req, max_output).await
    }

    pub async fn start_process(&self, id_or_name: &str, req: &ExecRequest) -> Result<Process> {
        let vm = self.running(id_or_name).await?;
        self.backend(&vm).start_process(&vm, req).await
    }

    pub async fn processes(&self, id_or_name: &str) -> Result<Vec<Process>> {
        let vm = self.get(id_or_name).await?;
        self.backend(&vm).processes(&vm).await
    }

    pub async fn process(&self, id_or_name: &str, pid: &str) -> Result<Process> {
        let vm = self.get(id_or_name).await?;
        self.backend(&vm).process(&vm, pid).await
    }

    pub async fn process_logs(&self, id_or_name: &str, pid: &str) -> Result<(String, String)> {
        let vm = self.get(id_or_name).await?;
        self.backend(&vm).logs(&vm, pid).await
    }

    /// One output stream of a process from byte `offset`.
    pub async fn process_log_chunk(
        &self,
        id_or_name: &str,
        pid: &str,
        stderr: bool,
        offset: u64,
    ) -> Result<kairon_runtime_api::types::LogChunk> {
        let vm = self.get(id_or_name).await?;
        self.backend(&vm).log_chunk(&vm, pid, stderr, offset).await
    }

    pub async fn wait_process(&self, id_or_name: &str, pid: &str, timeout: Duration) -> Result<Process> {
        let vm = self.get(id_or_name).await?;
        self.backend(&vm).wait_process(&vm, pid, timeout).await
    }

    /// Writes to a background process's kept-open stdin; `close` closes it afterwards.
    pub async fn write_stdin(&self, id_or_name: &str, pid: &str, data: Vec<u8>, close: bool) -> Result<()> {
        let vm = self.running(id_or_name).await?;
        self.backend(&vm).write_stdin(&vm, pid, data, close).await
    }

    pub async fn kill_process(&self, id_or_name: &str, pid: &str, signal: &str) -> Result<()> {
        let vm = self.running(id_or_name).await?;
        if !matches!(signal, "TERM" | "KILL" | "INT" | "HUP" | "QUIT" | "USR1" | "USR2") {
            return Err(RuntimeError::Invalid(format!(
                "signal {signal:?}: use TERM, KILL, INT, HUP, QUIT, USR1 or USR2"
            )));
        }
        self.backend(&vm).kill_process(&vm, pid, signal).await
    }

    /// A guest file's bytes, streamed ([`crate::files`]).
    pub async fn read_file(&self, id_or_name: &str, path: &str) -> Result<FileRead> {
        let vm = self.get(id_or_name).await?;
        self.backend(&vm).read_file(&vm, path).await
    }

    /// Writes a guest file from a stream; the bytes written.
    pub async fn write_file(&self, id_or_name: &str, path: &str, data: ByteStream, mode: Option<u32>) -> Result<u64> {
        let vm = self.get(id_or_name).await?;
        self.backend(&vm).write_file(&vm, path, data, mode).await
    }

    pub async fn list_files(&self, id_or_name: &str, path: &str) -> Result<Vec<FileEntry>> {
        let vm = self.get(id_or_name).await?;
        self.backend(&vm).list_files(&vm, path).await
    }

    /// Removes a file, or a directory (an empty one, or with `recursive` everything in it).
    pub async fn delete_file(&self, id_or_name: &str, path: &str, recursive: bool) -> Result<()> {
        let vm = self.get(id_or_name).await?;
        self.backend(&vm).delete_file(&vm, path, recursive).await
    }

    /// What is at `path` (a symlink itself, with its target).
    pub async fn file_info(&self, id_or_name: &str, path: &str) -> Result<FileEntry> {
        let vm = self.get(id_or_name).await?;
        self.backend(&vm).file_info(&vm, path).await
    }

    /// Moves `from` to `to` in the guest.
    pub async fn rename_file(&self, id_or_name: &str, from: &str, to: &str) -> Result<()> {
        let vm = self.get(id_or_name).await?;
        self.backend(&vm).rename_file(&vm, from, to).await
    }

    /// A copy of an instance named `name`: a VM is forked live (memory and disk, see
    /// `vm/backend.rs`); a sandbox gets its files copied into a fresh sandbox from the same
    /// template, without its processes (no live fork of runc containers: CRIU fails on this
    /// kernel; see `sandbox/backend.rs`).
    pub async fn fork(&self, id_or_name: &str, name: &str) -> Result<Vm> {
        let vm = self.get(id_or_name).await?;
        self.backend(&vm).fork(self, &vm.id, name).await
    }

    /// Writes the sandbox's root filesystem as it is now to a tar file at `path` on the node
    /// (the source is frozen meanwhile, so the export is consistent). Returns the bytes written.
    pub async fn snapshot(&self, id_or_name: &str, path: &str) -> Result<u64> {
        let target = PathBuf::from(path);
        if !target.is_absolute() || target.file_name().is_none() {
            return Err(RuntimeError::Invalid(format!(
                "snapshot path {path:?} must be an absolute file path on the node"
            )));
        }
        let parent = target.parent().unwrap_or(Path::new("/"));
        if !parent.is_dir() {
            return Err(RuntimeError::Invalid(format!(
                "the directory {} does not exist on the node",
                parent.display()
            )));
        }
        if target.starts_with(&self.inner.cfg.state_dir) {
            return Err(RuntimeError::Invalid(
                "the snapshot path may not be inside the runtime's state directory".into(),
            ));
        }
        let slot = self.slot(id_or_name)?;
        let vm = slot.lock().await;
        self.backend(&vm).snapshot(&vm, &target).await
    }

    /// The host pid of a running instance's init (the proxy dials in its network namespace).
    pub async fn guest_pid(&self, id_or_name: &str) -> Result<u32> {
        let vm = self.running(id_or_name).await?;
        vm.pid.ok_or_else(|| RuntimeError::Conflict(format!("{} has no running process", vm.name)))
    }

    /// How the host reaches `port` in a running instance: inside a sandbox's network
    /// namespace, or a VM's forward on its QEMU's loopback (see [`crate::vm::VmHost::target`]).
    pub async fn guest_target(&self, id_or_name: &str, port: u16) -> Result<crate::proxy::Target> {
        let vm = self.running(id_or_name).await?;
        self.backend(&vm).guest_target(&vm, port).await
    }

    /// Whether a sandbox on this node may reach `host`: a stateless check against the node's
    /// config, which no API changes.
    pub fn egress_check(&self, host: &str) -> Result<crate::api::EgressDecision> {
        self.inner.cfg.egress.check(host).map_err(|e| RuntimeError::Invalid(e.to_string()))
    }

    /// The instance's counters; with `footprint`, its disk and network footprint too.
    pub async fn stats(&self, id_or_name: &str, footprint: bool) -> Result<Stats> {
        let vm = self.get(id_or_name).await?;
        let backend = self.backend(&vm);
        let mut stats = backend.stats(&vm).await;
        if footprint {
            let f = backend.footprint(&vm).await;
            stats.disk_used_bytes = f.disk_used_bytes;
            stats.network_rx_bytes = f.network_rx_bytes;
            stats.network_tx_bytes = f.network_tx_bytes;
        }
        Ok(stats)
    }

    /// The host directory of an instance (tests check cleanup against it).
    pub fn instance_dir(&self, id: &str) -> PathBuf {
        self.inner.host.instance_dir(id)
    }

    pub fn sandbox_host(&self) -> &SandboxHost {
        &self.inner.host
    }
}

fn live_template(e: &TemplateEntry) -> Template {
    let mut t = e.meta.clone();
    if t.state == TemplateState::Building {
        t.bytes_done = e.progress.bytes_done.load(Ordering::Relaxed);
        let total = e.progress.bytes_total.load(Ordering::Relaxed);
        t.bytes_total = (total > 0).then_some(total);
    }
    t
}
