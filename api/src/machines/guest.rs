//! A Machine's guest: who may use it, wake-on-connect, the last-activity stamps of an open
//! session, and the operations through its runtime (exec, background processes, files). The
//! relays (console, port-forward, VNC, the sandbox HTTP proxy) open a [`Session`] here and pump
//! bytes at the edge.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use futures::{FutureExt, StreamExt};
use kube::ResourceExt;
use kube::api::{Patch, PatchParams};
use serde::{Deserialize, Serialize};
use serde_json::json;
use tracing::{Instrument, trace_span};
use utoipa::ToSchema;

use kairon_model::keys::{annotations, labels, reasons};
use kairon_model::{Machine, MachinePhase, PowerState};
use kairon_runtime_api::types::{ExecRequest, ExecResult, FileEntry, PowerAction, Process, ProcessState, VmState};
use kairon_runtime_api::{InstanceId, Pid, RuntimeClient};

use super::{Error, Machines, Reason, Result, Resuming, allowed, check_name};
use crate::auth::{self, GuestTarget, Identity};
use crate::limits::Limits;

/// What an operation needs of the guest.
#[derive(Clone, Copy, PartialEq, Eq, Debug)]
pub enum Needs {
    /// Exec, processes and files: the guest agent must be enabled on the Machine.
    GuestAgent,
    /// The HTTP proxy, console, VNC and port-forward: a running instance is enough.
    Instance,
}

/// An open session on a running guest; stamps last-activity until dropped.
pub struct Session {
    pub machine: Machine,
    pub runtime: RuntimeClient,
    pub id: InstanceId,
    _activity: ActivityGuard,
}

/// Stamps `last-activity` (throttled) every interval until dropped.
struct ActivityGuard(tokio::task::JoinHandle<()>);

impl Drop for ActivityGuard {
    fn drop(&mut self) {
        self.0.abort();
    }
}

pub use kairon_runtime_api::types::MAX_BUFFERED_FILE_BYTES;

/// A guest file being downloaded: its size when known, and its bytes as they come.
pub struct FileDownload {
    pub len: Option<u64>,
    pub body: futures::stream::BoxStream<'static, std::io::Result<bytes::Bytes>>,
}

/// A guest path must be absolute.
pub fn check_guest_path(path: &str) -> Result<()> {
    if !path.starts_with('/') {
        return Err(Error::bad_request(format!("path {path:?} must be absolute, e.g. /tmp/task.py")));
    }
    Ok(())
}

/// A command line cannot carry NUL bytes (the kernel ends strings there), and must name a
/// program.
pub fn check_command(req: &ExecRequest) -> Result<()> {
    if req.command.is_empty() || req.command[0].is_empty() {
        return Err(Error::bad_request("command must name a program, e.g. [\"sh\", \"-c\", \"echo hi\"]"));
    }
    let fields = req
        .command
        .iter()
        .map(|a| ("command", a.as_str()))
        .chain(req.env.iter().flat_map(|(k, v)| [("env", k.as_str()), ("env", v.as_str())]))
        .chain(req.cwd.iter().map(|c| ("cwd", c.as_str())))
        .chain(req.user.iter().map(|u| ("user", u.as_str())));
    for (field, value) in fields {
        if value.contains('\0') {
            return Err(Error::bad_request(format!("{field} contains a NUL byte, which no program can receive")));
        }
    }
    if req.env.keys().any(|k| k.is_empty() || k.contains('=')) {
        return Err(Error::bad_request("env names must be non-empty and contain no '='"));
    }
    Ok(())
}

/// Where a process's output stream is read from: byte offsets into stdout and stderr.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Offsets {
    pub stdout: u64,
    pub stderr: u64,
}

/// One event of a process's stream (one JSON line each).
#[derive(Serialize, Deserialize, ToSchema, Clone, Debug, PartialEq)]
#[serde(tag = "type", rename_all = "camelCase")]
pub enum ProcessEvent {
    /// Output on stdout: `data` (whole characters) ends at byte `end`, the offset to resume from.
    Stdout { data: String, end: u64 },
    /// Output on stderr, as for stdout.
    Stderr { data: String, end: u64 },
    /// The process exited (after all its output): its exit code, none when a signal ended it.
    #[serde(rename_all = "camelCase")]
    Exit { exit_code: Option<i32> },
    /// The stream broke off (the runtime failed): resume from the last offsets seen.
    Error { reason: Reason, message: String },
}

/// The most one write to a process's stdin carries.
pub const MAX_STDIN_WRITE: usize = 1024 * 1024;

/// How often a followed process is looked at when it printed nothing new.
const PROCESS_POLL: Duration = Duration::from_millis(100);

struct EventsState {
    s: Session,
    pid: Pid,
    at: Offsets,
    pending: std::collections::VecDeque<ProcessEvent>,
    done: bool,
}

impl EventsState {
    /// Reads what is new; true when there is something to send. The state is read before the
    /// output, so an exit is sent only after the output it left.
    async fn poll(&mut self) -> Result<bool> {
        let (rt, id, pid) = (&self.s.runtime, &self.s.id, &self.pid);
        let p = rt.process(id, pid).await?;
        let (out, err) = futures::try_join!(
            rt.process_log_chunk(id, pid, false, self.at.stdout),
            rt.process_log_chunk(id, pid, true, self.at.stderr)
        )?;
        if out.end > self.at.stdout {
            self.at.stdout = out.end;
            self.pending.push_back(ProcessEvent::Stdout { data: out.data, end: out.end });
        }
        if err.end > self.at.stderr {
            self.at.stderr = err.end;
            self.pending.push_back(ProcessEvent::Stderr { data: err.data, end: err.end });
        }
        if self.pending.is_empty() && p.state == ProcessState::Exited {
            self.pending.push_back(ProcessEvent::Exit { exit_code: p.exit_code });
            self.done = true;
        }
        Ok(!self.pending.is_empty())
    }
}

impl Machines {
    /// The environment a relayed command gets: the request's own, then the Machine's
    /// `spec.secretEnv` read from its Secrets now (only Opaque ones labelled
    /// `kairon.zyvor.dev/secret-env=true`), then its `spec.env`. The values go into this request
    /// to the Machine's runtime and nowhere else.
    pub async fn with_machine_env(&self, m: &Machine, env: &mut BTreeMap<String, String>) -> Result<()> {
        let ns = m.namespace().unwrap_or_default();
        let secrets: kube::Api<k8s_openapi::api::core::v1::Secret> = kube::Api::namespaced(self.kube.clone(), &ns);
        for (var, r) in &m.spec.secret_env {
            if env.contains_key(var) {
                continue;
            }
            let at = format!("Machine {ns}/{}: spec.secretEnv.{var} names Secret {:?}", m.name_any(), r.name);
            let secret = secrets.get_opt(&r.name).await.map_err(|e| {
                tracing::warn!(namespace = %ns, secret = %r.name, error = %e, "reading a Secret for spec.secretEnv");
                Error::unavailable(format!("{at}, which could not be read now: try again"))
            })?;
            let Some(secret) = secret else {
                return Err(Error::bad_request(format!("{at}, which does not exist in namespace {ns:?}")));
            };
            if secret.labels().get(labels::SECRET_ENV).map(String::as_str) != Some("true") {
                return Err(Error::bad_request(format!(
                    "{at}, which is not labelled {}=true: label it to let Machines read it (kubectl label secret {} {}=true -n {ns})",
                    labels::SECRET_ENV,
                    r.name,
                    labels::SECRET_ENV
                )));
            }
            if secret.type_.as_deref().is_some_and(|t| t != "Opaque") {
                return Err(Error::bad_request(format!("{at}, which is not an Opaque Secret")));
            }
            let value = secret
                .data
                .as_ref()
                .and_then(|d| d.get(&r.key))
                .ok_or_else(|| Error::bad_request(format!("{at}, which has no key {:?}", r.key)))?;
            let value = String::from_utf8(value.0.clone())
                .map_err(|_| Error::bad_request(format!("{at}: its key {:?} is not UTF-8 text", r.key)))?;
            env.insert(var.clone(), value);
        }
        // Last, the Machine's `spec.env` (its claim's included, written there at binding).
        for (k, v) in &m.spec.env {
            env.entry(k.clone()).or_insert_with(|| v.clone());
        }
        Ok(())
    }
}

/// The timeout of an exec: the default when the request gives none, refused above the most.
fn exec_timeout(limits: &Limits, asked: Option<u64>) -> Result<u64> {
    let max = limits.exec_max_timeout.as_secs();
    match asked {
        None => Ok(limits.exec_default_timeout.as_secs().min(max)),
        Some(t) if t > max => Err(Error::bad_request(format!(
            "timeoutSeconds={t} is more than the {max} s an exec may run: ask for at most {max}, run it as a \
             background process (POST …/processes) instead, or raise --exec-max-timeout (KAIRON_EXEC_MAX_TIMEOUT)"
        ))),
        Some(t) => Ok(t),
    }
}

fn phase(m: &Machine) -> Option<MachinePhase> {
    m.status.as_ref().and_then(|s| s.phase)
}

impl Machines {
    /// Stamps `last-activity` when due, beside the request rather than before it: the stamp
    /// only keeps the idle clock from running, and its write need not delay the guest call.
    fn stamp(self: &Arc<Self>, ns: &str, name: &str) {
        if !self.stamp_due(ns, name) {
            return;
        }
        let (this, ns, name) = (self.clone(), ns.to_string(), name.to_string());
        tokio::spawn(async move {
            let now = chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
            let patch = json!({ "metadata": { "annotations": { annotations::LAST_ACTIVITY: now } } });
            if let Err(e) = this.api::<Machine>(&ns).patch(&name, &PatchParams::default(), &Patch::Merge(&patch)).await
            {
                tracing::debug!(error = %e, ns, name, "stamping last-activity failed");
            }
        });
    }

    fn activity(self: &Arc<Self>, ns: &str, name: &str) -> ActivityGuard {
        let (this, ns, name) = (self.clone(), ns.to_string(), name.to_string());
        ActivityGuard(tokio::spawn(async move {
            loop {
                this.stamp(&ns, &name);
                tokio::time::sleep(this.activity_stamp_interval.max(Duration::from_millis(100))).await;
            }
        }))
    }

    /// Checks the caller, wakes the Machine if it may, and opens an activity session on it.
    pub async fn open(self: &Arc<Self>, id: &Identity, ns: &str, name: &str, needs: Needs) -> Result<Session> {
        let m = self.authorize(id, ns, name, needs).await?;
        self.connect(id, ns, name, m).await
    }

    /// Who may use this guest, and whether it has what the operation needs: the Machine as read.
    pub async fn authorize(&self, id: &Identity, ns: &str, name: &str, needs: Needs) -> Result<Machine> {
        // A caller who may use no guest here at all hears so before anything is read: first the
        // namespace (as reading the Machine would say), then the caller's role and the flag.
        check_name("namespace", ns)?;
        allowed(auth::may_access(id, auth::Verb::Read, Some(ns), false))?;
        let flag = self.sandbox_operator_exec;
        allowed(auth::may_use_guest(id, &GuestTarget { namespace: ns, sandbox_labelled: true }, flag))?;
        let m: Machine = self.get(id, ns, name).await?;
        let sandbox_labelled = m.labels().get(labels::SANDBOX).is_some_and(|v| v == "true");
        allowed(auth::may_use_guest(id, &GuestTarget { namespace: ns, sandbox_labelled }, flag))?;
        if needs == Needs::GuestAgent {
            let ga = m.spec.guest_agent.clone().unwrap_or_default();
            if !ga.enabled && !ga.console {
                return Err(Error::conflict(
                    Reason::GuestAgentDisabled,
                    format!(
                        "Machine {ns}/{name} has no guest agent: set spec.guestAgent.enabled (or spec.guestAgent.console for a sandbox) to true"
                    ),
                ));
            }
        }
        Ok(m)
    }

    /// A session on an authorized Machine: woken if it must be, its activity stamped.
    pub async fn connect(self: &Arc<Self>, id: &Identity, ns: &str, name: &str, m: Machine) -> Result<Session> {
        let (m, thawed) = self.wake_if_needed(id, ns, name, m).await?;
        self.stamp(ns, name);
        let (runtime, instance) = match thawed {
            Some(found) => found,
            None => self.machine_runtime(&m).await?,
        };
        let activity = self.activity(ns, name);
        Ok(Session { machine: m, runtime, id: instance, _activity: activity })
    }

    /// Wake-on-connect: an idle-suspended Machine with `wakeOnConnect` is set Running (clearing
    /// idle-suspended and stamping activity in the same write) and waited for; anything else
    /// that is not running is refused with what to do. With the Machine, its runtime when
    /// finding it was part of the wake.
    async fn wake_if_needed(
        self: &Arc<Self>,
        id: &Identity,
        ns: &str,
        name: &str,
        m: Machine,
    ) -> Result<(Machine, Option<(RuntimeClient, InstanceId)>)> {
        let desired = m.spec.desired_power_state();
        if desired == PowerState::Running && phase(&m) == Some(MachinePhase::Running) {
            return Ok((m, None));
        }
        // Running was asked for (a claim bound it, or a wake was written) and the node agent
        // has not reported it running yet: resume it here rather than wait for the next
        // reconcile, unless this server just did (the claim that bound it).
        if desired == PowerState::Running && phase(&m) == Some(MachinePhase::Paused) {
            let (uid, generation) = (m.metadata.uid.as_deref().unwrap_or_default(), m.metadata.generation);
            // The resume the claim that took this member started, still under way: joined.
            if let Some(resume) = generation.and_then(|g| self.resuming(uid, g))
                && resume.await
            {
                return Ok((m, None));
            }
            if generation.is_some_and(|g| self.resumed_lately(uid, g)) {
                return Ok((m, None));
            }
            if let Some(found) = self.thaw_now(&m).await {
                return Ok((m, Some(found)));
            }
        }
        let idle_suspended = m.annotations().contains_key(annotations::IDLE_SUSPENDED);
        let lifecycle = m.spec.lifecycle.clone().unwrap_or_default();
        if desired != PowerState::Running {
            if !idle_suspended {
                return Err(Error::conflict(
                    Reason::MachineSuspended,
                    format!(
                        "Machine {ns}/{name} is {desired} by request, so it is not woken on connect: resume it first (POST /api/v1/machines/{ns}/{name}/resume)"
                    ),
                ));
            }
            if !lifecycle.wake_on_connect {
                return Err(Error::conflict(
                    Reason::MachineSuspended,
                    format!(
                        "Machine {ns}/{name} was idle-suspended ({desired}) and has no spec.lifecycle.wakeOnConnect: resume it (POST .../resume) or set wakeOnConnect"
                    ),
                ));
            }
        }
        let timeout = Duration::from_secs(lifecycle.wake_timeout_seconds.max(1) as u64);
        let started = Instant::now();
        let api = self.api::<Machine>(ns);
        let woke_from = desired;
        if desired != PowerState::Running {
            let now = chrono::Utc::now().to_rfc3339_opts(chrono::SecondsFormat::Secs, true);
            let patch = json!({
                "metadata": { "annotations": { annotations::IDLE_SUSPENDED: null, annotations::LAST_ACTIVITY: now } },
                "spec": { "powerState": "Running" },
            });
            let woken = api
                .patch(name, &PatchParams::default(), &Patch::Merge(&patch))
                .instrument(trace_span!("hop.wake.write"))
                .await?;
            // That write stamped last-activity: the session's first stamp is due an interval on.
            let _ = self.stamp_due(ns, name);
            let (this, note) = (self.clone(), format!("woken on connect from {woke_from} by {}", id.sub));
            let event_of = woken.clone();
            tokio::spawn(async move { this.record(&event_of, reasons::WOKEN, note).await });
            // The spec's order: the one write above, then the thaw at once.
            if woke_from == PowerState::Paused
                && let Some(found) = self.thaw_now(&woken).await
            {
                return Ok((woken, Some(found)));
            }
        }
        // The connection counts as activity while it waits: a wake slower than the idle timeout
        // would otherwise let the lifecycle controller suspend the Machine again before the
        // connection that woke it is served (seen in the soak bench as "is paused" on exec).
        let _waking = (woke_from != PowerState::Running).then(|| self.activity(ns, name));
        let running = |o: Option<&Machine>| o.is_some_and(|m| phase(m) == Some(MachinePhase::Running));
        let waited =
            tokio::time::timeout(timeout, kube::runtime::wait::await_condition(api.clone(), name, running)).await;
        let m = match waited {
            Ok(Ok(Some(m))) => m,
            Ok(Ok(None)) => return Err(Error::not_found(format!("Machine {ns}/{name} was deleted while waking"))),
            Ok(Err(e)) => return Err(Error::unavailable(format!("watching the Machine while waking it failed: {e}"))),
            Err(_) => return Err(wake_timeout(ns, name, timeout, api.get_opt(name).await.ok().flatten().as_ref())),
        };
        // A wake from anything but Paused booted or restored the guest: wait for its agent too.
        if woke_from != PowerState::Paused && woke_from != PowerState::Running {
            let (rt, instance) = self.machine_runtime(&m).await?;
            loop {
                let probe =
                    ExecRequest { command: vec!["true".into()], timeout_seconds: Some(5), ..Default::default() };
                if rt.exec(&instance, &probe).await.is_ok_and(|r| r.exit_code == 0) {
                    break;
                }
                if started.elapsed() >= timeout {
                    return Err(wake_timeout(ns, name, timeout, Some(&m)));
                }
                tokio::time::sleep(Duration::from_millis(200)).await;
            }
            return Ok((m, Some((rt, instance))));
        }
        Ok((m, None))
    }

    /// A pool member just taken by a claim: resumed at once (what the node agent would do at its
    /// next reconcile), beside the claim's reply rather than before it: the claimant's first
    /// guest call joins the resume if it is still under way. Its activity counts as stamped
    /// (the take wrote last-activity), so that call writes nothing.
    pub(crate) fn claimed(self: &Arc<Self>, m: &Machine) {
        let _ = self.stamp_due(&m.namespace().unwrap_or_default(), &m.name_any());
        let (Some(uid), Some(generation)) = (m.metadata.uid.clone(), m.metadata.generation) else { return };
        if phase(m) != Some(MachinePhase::Paused) {
            return;
        }
        let (this, member) = (self.clone(), m.clone());
        let resume: Resuming = async move { this.thaw_now(&member).await.is_some() }
            .instrument(trace_span!("hop.claim.resume"))
            .boxed()
            .shared();
        self.resuming.lock().unwrap_or_else(|p| p.into_inner()).insert(uid.clone(), (generation, resume.clone()));
        let this = self.clone();
        tokio::spawn(async move {
            resume.await;
            let mut resuming = this.resuming.lock().unwrap_or_else(|p| p.into_inner());
            if resuming.get(&uid).is_some_and(|(g, _)| *g == generation) {
                resuming.remove(&uid);
            }
        });
    }

    /// Resumes a Paused instance whose Machine asks for Running, on behalf of the Machine's
    /// generation (the runtime refuses a later reconcile from an older view, so a stale pause
    /// cannot follow); the runtime, once the instance runs. Any failure leaves it to the node
    /// agent.
    async fn thaw_now(&self, m: &Machine) -> Option<(RuntimeClient, InstanceId)> {
        let (rt, instance) = self.machine_runtime(m).await.ok()?;
        let resume = rt.power_at(&instance, PowerAction::Resume, false, m.metadata.generation);
        match resume.instrument(trace_span!("hop.thaw")).await {
            Ok(vm) if vm.state == VmState::Running => {
                if let (Some(uid), Some(generation)) = (m.metadata.uid.as_deref(), m.metadata.generation) {
                    self.note_resumed(uid, generation);
                }
                Some((rt, instance))
            }
            Ok(_) => None,
            Err(e) => {
                tracing::debug!(error = %e, "resuming directly failed; waiting for the node agent");
                None
            }
        }
    }

    /// Runs a command to completion in the guest (the request is read once the caller may use
    /// the guest); its output capped at the server's limit.
    pub async fn exec(
        self: &Arc<Self>,
        id: &Identity,
        ns: &str,
        name: &str,
        limits: &Limits,
        req: impl FnOnce() -> Result<ExecRequest>,
    ) -> Result<ExecResult> {
        let m = self.authorize(id, ns, name, Needs::GuestAgent).instrument(trace_span!("hop.exec.authorize")).await?;
        let mut req = req()?;
        check_command(&req)?;
        if req.keep_stdin_open {
            return Err(Error::bad_request(
                "keepStdinOpen is for background processes (POST …/processes): an exec's stdin is the request's stdin",
            ));
        }
        self.with_machine_env(&m, &mut req.env).await?;
        req.timeout_seconds = Some(exec_timeout(limits, req.timeout_seconds)?);
        let s = self.connect(id, ns, name, m).instrument(trace_span!("hop.exec.connect")).await?;
        let run = s.runtime.exec_bounded(&s.id, &req, limits.max_exec_output_bytes);
        Ok(run.instrument(trace_span!("hop.exec.runtime")).await?)
    }

    /// Starts a background process (the request read as for [`exec`](Self::exec)).
    pub async fn start_process(
        self: &Arc<Self>,
        id: &Identity,
        ns: &str,
        name: &str,
        req: impl FnOnce() -> Result<ExecRequest>,
    ) -> Result<Process> {
        let m = self.authorize(id, ns, name, Needs::GuestAgent).await?;
        let mut req = req()?;
        check_command(&req)?;
        self.with_machine_env(&m, &mut req.env).await?;
        let s = self.connect(id, ns, name, m).await?;
        Ok(s.runtime.start_process(&s.id, &req).await?)
    }

    pub async fn processes(self: &Arc<Self>, id: &Identity, ns: &str, name: &str) -> Result<Vec<Process>> {
        let s = self.open(id, ns, name, Needs::GuestAgent).await?;
        Ok(s.runtime.processes(&s.id).await?)
    }

    pub async fn process(self: &Arc<Self>, id: &Identity, ns: &str, name: &str, pid: &str) -> Result<Process> {
        let pid = Pid::new(pid)?;
        let s = self.open(id, ns, name, Needs::GuestAgent).await?;
        Ok(s.runtime.process(&s.id, &pid).await?)
    }

    /// A process's stdout and stderr so far.
    pub async fn process_logs(
        self: &Arc<Self>,
        id: &Identity,
        ns: &str,
        name: &str,
        pid: &str,
    ) -> Result<(String, String)> {
        let pid = Pid::new(pid)?;
        let s = self.open(id, ns, name, Needs::GuestAgent).await?;
        Ok(s.runtime.process_logs(&s.id, &pid).await?)
    }

    /// A process's output and exit as one stream of [`ProcessEvent`]s: what each of stdout and
    /// stderr holds from the offsets given (a reconnecting client passes the `end` it saw last,
    /// so nothing is sent twice or lost), as it is produced, then the exit. The session (and its
    /// activity stamp) lives as long as the stream. Sandboxes and VMs alike: it reads the
    /// runtime's kept output, never the guest's pipes.
    pub async fn process_events(
        self: &Arc<Self>,
        id: &Identity,
        ns: &str,
        name: &str,
        pid: &str,
        from: Offsets,
    ) -> Result<impl futures::Stream<Item = Result<ProcessEvent>> + Send + 'static> {
        let pid = Pid::new(pid)?;
        let s = self.open(id, ns, name, Needs::GuestAgent).await?;
        // The process must exist: a 404 now, not an empty stream.
        s.runtime.process(&s.id, &pid).await?;
        let state = EventsState { s, pid, at: from, pending: std::collections::VecDeque::new(), done: false };
        Ok(futures::stream::unfold(state, |mut st| async move {
            loop {
                if let Some(ev) = st.pending.pop_front() {
                    return Some((Ok(ev), st));
                }
                if st.done {
                    return None;
                }
                match st.poll().await {
                    Ok(true) => {}
                    Ok(false) => tokio::time::sleep(PROCESS_POLL).await,
                    Err(e) => {
                        st.done = true;
                        return Some((Err(e), st));
                    }
                }
            }
        }))
    }

    /// Waits up to `timeout` for a process to exit; its state then.
    pub async fn wait_process(
        self: &Arc<Self>,
        id: &Identity,
        ns: &str,
        name: &str,
        pid: &str,
        timeout: Duration,
    ) -> Result<Process> {
        let pid = Pid::new(pid)?;
        let s = self.open(id, ns, name, Needs::GuestAgent).await?;
        Ok(s.runtime.wait_process(&s.id, &pid, timeout).await?)
    }

    pub async fn kill_process(
        self: &Arc<Self>,
        id: &Identity,
        ns: &str,
        name: &str,
        pid: &str,
        signal: &str,
    ) -> Result<()> {
        let pid = Pid::new(pid)?;
        let s = self.open(id, ns, name, Needs::GuestAgent).await?;
        Ok(s.runtime.kill_process(&s.id, &pid, signal).await?)
    }

    /// Writes `data` to a background process's kept-open stdin (`keepStdinOpen`); `close`
    /// closes it afterwards, and the process reads end of file.
    pub async fn write_stdin(
        self: &Arc<Self>,
        id: &Identity,
        ns: &str,
        name: &str,
        pid: &str,
        data: Vec<u8>,
        close: bool,
    ) -> Result<()> {
        let pid = Pid::new(pid)?;
        let s = self.open(id, ns, name, Needs::GuestAgent).await?;
        if data.len() > MAX_STDIN_WRITE {
            return Err(Error::new(
                Reason::PayloadTooLarge,
                format!(
                    "{} bytes is more than one write to stdin takes ({MAX_STDIN_WRITE}): send it in parts",
                    data.len()
                ),
            ));
        }
        Ok(s.runtime.process_stdin(&s.id, &pid, data, close).await?)
    }

    /// A guest file as it is read: nothing is held whole. The session (and the Machine's
    /// activity stamp) lives as long as the stream.
    pub async fn read_file_stream(
        self: &Arc<Self>,
        id: &Identity,
        ns: &str,
        name: &str,
        path: &str,
    ) -> Result<FileDownload> {
        check_guest_path(path)?;
        let s = self.open(id, ns, name, Needs::GuestAgent).await?;
        let resp = s.runtime.read_file_stream(&s.id, path).await?;
        let len = resp.content_length();
        let body = resp
            .bytes_stream()
            .map(move |chunk| {
                let _session = &s;
                chunk.map_err(std::io::Error::other)
            })
            .boxed();
        Ok(FileDownload { len, body })
    }

    /// A guest file whole, for callers that need it in memory (the MCP tools): at most
    /// [`MAX_BUFFERED_FILE_BYTES`].
    pub async fn read_file(self: &Arc<Self>, id: &Identity, ns: &str, name: &str, path: &str) -> Result<Vec<u8>> {
        let mut file = self.read_file_stream(id, ns, name, path).await?;
        let mut out = Vec::new();
        while let Some(chunk) = file.body.next().await {
            let chunk = chunk.map_err(|e| Error::internal(format!("reading {path} broke off: {e}")))?;
            if out.len() + chunk.len() > MAX_BUFFERED_FILE_BYTES {
                return Err(Error::new(
                    Reason::PayloadTooLarge,
                    format!(
                        "{path} is larger than {}, the most read here in one piece: download it with GET …/files, which streams",
                        crate::limits::human_bytes(MAX_BUFFERED_FILE_BYTES as u64)
                    ),
                ));
            }
            out.extend_from_slice(&chunk);
        }
        Ok(out)
    }

    /// Writes a guest file from `data` as it arrives, replacing the old one once all of it
    /// arrived. `mode` is an octal text like
    /// `644`; without it an existing file keeps its mode, a new one gets 644.
    pub async fn write_file(
        self: &Arc<Self>,
        id: &Identity,
        ns: &str,
        name: &str,
        path: &str,
        mode: Option<&str>,
        data: reqwest::Body,
    ) -> Result<()> {
        check_guest_path(path)?;
        let mode = match mode {
            None => None,
            Some(m) => Some(
                u32::from_str_radix(m, 8)
                    .ok()
                    .filter(|m| *m <= 0o7777)
                    .ok_or_else(|| Error::bad_request(format!("mode {m:?} is not an octal file mode like 644")))?,
            ),
        };
        let s = self.open(id, ns, name, Needs::GuestAgent).await?;
        Ok(s.runtime.write_file_stream(&s.id, path, data, mode).await?)
    }

    /// Removes a file, or a directory: an empty one, or with `recursive` everything in it.
    pub async fn delete_file(
        self: &Arc<Self>,
        id: &Identity,
        ns: &str,
        name: &str,
        path: &str,
        recursive: bool,
    ) -> Result<()> {
        check_guest_path(path)?;
        let s = self.open(id, ns, name, Needs::GuestAgent).await?;
        Ok(s.runtime.delete_path(&s.id, path, recursive).await?)
    }

    /// What is at `path` (a symlink itself, with its target): size, mode, kind, modified time.
    pub async fn file_info(self: &Arc<Self>, id: &Identity, ns: &str, name: &str, path: &str) -> Result<FileEntry> {
        check_guest_path(path)?;
        let s = self.open(id, ns, name, Needs::GuestAgent).await?;
        Ok(s.runtime.file_info(&s.id, path).await?)
    }

    /// Moves `from` to `to` in the guest.
    pub async fn rename_file(
        self: &Arc<Self>,
        id: &Identity,
        ns: &str,
        name: &str,
        from: &str,
        to: &str,
    ) -> Result<()> {
        check_guest_path(from)?;
        check_guest_path(to)?;
        let s = self.open(id, ns, name, Needs::GuestAgent).await?;
        Ok(s.runtime.rename_file(&s.id, from, to).await?)
    }

    pub async fn list_files(
        self: &Arc<Self>,
        id: &Identity,
        ns: &str,
        name: &str,
        path: &str,
    ) -> Result<Vec<FileEntry>> {
        check_guest_path(path)?;
        let s = self.open(id, ns, name, Needs::GuestAgent).await?;
        Ok(s.runtime.list_files(&s.id, path).await?)
    }
}

fn wake_timeout(ns: &str, name: &str, timeout: Duration, m: Option<&Machine>) -> Error {
    let now = m.and_then(phase).map(|p| format!("{p:?}")).unwrap_or_else(|| "unknown".into());
    Error::new(
        Reason::WakeTimeout,
        format!(
            "Machine {ns}/{name} did not wake within wakeTimeoutSeconds ({}s; its phase is {now}): try again, or raise spec.lifecycle.wakeTimeoutSeconds",
            timeout.as_secs()
        ),
    )
}
