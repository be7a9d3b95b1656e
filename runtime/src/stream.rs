//! Streams into a running sandbox over WebSocket: a TCP port tunnel and an interactive console.
//!
//! * Tunnel (`GET /v1/vms/{id}/tunnel/{port}`): binary frames carry raw TCP bytes both ways
//!   between the client and `127.0.0.1:<port>` inside the sandbox, dialled in its network
//!   namespace (see [`dial_in_netns`]). Port-forwarding and SSH over a forwarded port ride on
//!   it. The port is dialled *before* the upgrade, so a closed port is a plain 502 JSON error
//!   (`GuestUnreachable`) rather than a socket that opens and closes at once.
//! * Console (`GET /v1/vms/{id}/console`): an interactive shell in the sandbox; client frames
//!   are its stdin, its stdout and stderr come back as binary frames as they are produced, and
//!   its exit ends the socket with a Close frame whose reason is `exit <code>`.
//!
//! A sandbox that is not running (paused, stopped, still creating) answers 409 with the
//! engine's message, before any upgrade. Both relays hold at most one frame in flight per
//! direction: a slow reader on one side slows the writer on the other, nothing piles up.

use std::collections::BTreeMap;
use std::io;
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use std::time::Duration;

use axum::body::Bytes;
use axum::extract::ws::rejection::WebSocketUpgradeRejection;
use axum::extract::ws::{CloseFrame, Message, WebSocket, WebSocketUpgrade, close_code};
use axum::response::{IntoResponse, Response};
use futures::stream::{SplitSink, SplitStream};
use futures::{SinkExt, StreamExt};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;
use tokio::process::Child;

use crate::api::ExecRequest;
use crate::backend::BackendKind;
use crate::engine::{Runtime, RuntimeError};
use crate::proxy::ProxyError;
use crate::sandbox::{AttachedCommand, pid_alive};

/// The upgrade as the route extracts it: a request that is not a WebSocket handshake is only
/// refused after the sandbox checks, so e.g. a paused sandbox is a 409 either way.
pub type Upgrade = Result<WebSocketUpgrade, WebSocketUpgradeRejection>;

/// Largest frame sent to the client: one read from the guest.
const FRAME_BYTES: usize = 64 * 1024;
/// How long the other side gets to answer our Close frame (or to flush its own) at the end.
const CLOSE_GRACE: Duration = Duration::from_secs(5);
/// How often the console checks whether its shell has exited.
const SHELL_POLL: Duration = Duration::from_millis(50);
/// How long `runc exec` gets to exit by itself once its shell has exited, before the jobs the
/// shell left behind (holding runc's output pipes) are killed.
const JOBS_GRACE: Duration = Duration::from_millis(100);
/// How long `runc exec` gets to exit once its shell (and the shell's process group) is gone.
const RUNC_EXIT_GRACE: Duration = Duration::from_secs(3);

type WsTx = SplitSink<WebSocket, Message>;
type WsRx = SplitStream<WebSocket>;

/// A Close frame; the reason is cut to the protocol's 123 bytes (at a character boundary).
fn close(code: u16, reason: &str) -> Message {
    let mut end = reason.len().min(123);
    while !reason.is_char_boundary(end) {
        end -= 1;
    }
    Message::Close(Some(CloseFrame { code, reason: reason[..end].into() }))
}

/// Sends our Close (when there is one) and flushes whatever tungstenite has queued (e.g. its
/// reply to the client's Close), bounded by [`CLOSE_GRACE`].
async fn finish(ws_tx: &mut WsTx, last: Option<Message>) {
    let _ = tokio::time::timeout(CLOSE_GRACE, async {
        if let Some(m) = last {
            let _ = ws_tx.send(m).await;
        }
        let _ = ws_tx.close().await;
    })
    .await;
}

/// What the client sent, as bytes for the other side; `None` when it closed or went away.
/// Pings are answered by the WebSocket layer itself.
async fn next_client_bytes(ws_rx: &mut WsRx) -> Option<Bytes> {
    loop {
        match ws_rx.next().await? {
            Ok(Message::Binary(b)) => return Some(b),
            Ok(Message::Text(t)) => return Some(Bytes::copy_from_slice(t.as_str().as_bytes())),
            Ok(Message::Ping(_) | Message::Pong(_)) => {}
            Ok(Message::Close(_)) | Err(_) => return None,
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Port tunnel

/// `GET /v1/vms/{id}/tunnel/{port}`: checks the sandbox runs, dials the port inside it, and
/// only then upgrades to the byte pipe.
pub async fn tunnel(rt: &Runtime, id: &str, port: u16, ws: Upgrade) -> Response {
    let target = match rt.guest_target(id, port).await {
        Ok(t) => t,
        Err(e) => return e.into_response(),
    };
    let ws = match ws {
        Ok(ws) => ws,
        Err(rejection) => return rejection.into_response(),
    };
    let guest = match crate::proxy::dial(target, port).await {
        Ok(s) => s,
        Err(e) => return ProxyError::GuestUnreachable(e.to_string()).into_response(),
    };
    ws.on_upgrade(move |socket| pipe_tcp(socket, guest, port))
}

/// How the client-to-guest direction ended.
enum Up {
    /// Close frame, end of stream or a broken WebSocket.
    ClientClosed,
    /// The guest stopped taking bytes.
    GuestWriteFailed(io::Error),
}

async fn client_to_guest<W: AsyncWrite + Unpin>(ws_rx: &mut WsRx, guest: &mut W) -> Up {
    while let Some(bytes) = next_client_bytes(ws_rx).await {
        if let Err(e) = guest.write_all(&bytes).await {
            return Up::GuestWriteFailed(e);
        }
    }
    Up::ClientClosed
}

/// Relays the guest's bytes until it closes its side (then our Close frame is sent) or the
/// client can no longer be written to.
async fn guest_to_client<R: AsyncRead + Unpin>(guest: &mut R, ws_tx: &mut WsTx, port: u16) {
    let mut buf = vec![0u8; FRAME_BYTES];
    loop {
        let msg = match guest.read(&mut buf).await {
            Ok(0) => close(close_code::NORMAL, &format!("port {port} inside the sandbox closed the connection")),
            Ok(n) => Message::Binary(Bytes::copy_from_slice(&buf[..n])),
            Err(e) => close(close_code::ERROR, &format!("reading from port {port} inside the sandbox: {e}")),
        };
        let last = matches!(msg, Message::Close(_));
        if ws_tx.send(msg).await.is_err() || last {
            return;
        }
    }
}

/// The tunnel proper. The guest closing its side sends a Close frame (the client may still
/// deliver what it has in flight until it answers); the client closing shuts down the TCP
/// write side, so the guest reads end-of-file.
async fn pipe_tcp(socket: WebSocket, guest: TcpStream, port: u16) {
    pipe(socket, guest, port).await
}

/// `GET /v1/vms/{id}/console` and `/vnc` of a VM: the WebSocket carries the raw bytes of the
/// VM's serial console or VNC server (QEMU's unix sockets), both ways.
pub async fn unix_relay(rt: &Runtime, id: &str, socket: &str, ws: Upgrade) -> Response {
    let path = match rt.vm_socket(id, socket).await {
        Ok(p) => p,
        Err(e) => return e.into_response(),
    };
    let ws = match ws {
        Ok(ws) => ws,
        Err(rejection) => return rejection.into_response(),
    };
    let stream = match tokio::net::UnixStream::connect(&path).await {
        Ok(s) => s,
        Err(e) => {
            return ProxyError::GuestUnreachable(format!("connecting to the VM's {socket}: {e}")).into_response();
        }
    };
    ws.on_upgrade(move |s| pipe(s, stream, 0))
}

async fn pipe<S: AsyncRead + AsyncWrite + Send + 'static>(socket: WebSocket, guest: S, port: u16) {
    let (mut ws_tx, mut ws_rx) = socket.split();
    let (mut guest_rx, mut guest_tx) = tokio::io::split(guest);
    let up_end = {
        let up = client_to_guest(&mut ws_rx, &mut guest_tx);
        let down = guest_to_client(&mut guest_rx, &mut ws_tx, port);
        tokio::pin!(up, down);
        tokio::select! {
            end = &mut up => Some(end),
            () = &mut down => {
                // Our Close is out: take what the client still sends until it answers.
                let _ = tokio::time::timeout(CLOSE_GRACE, &mut up).await;
                None
            }
        }
    };
    let _ = guest_tx.shutdown().await;
    let last = match up_end {
        Some(Up::GuestWriteFailed(e)) => {
            Some(close(close_code::ERROR, &format!("writing to port {port} inside the sandbox: {e}")))
        }
        Some(Up::ClientClosed) | None => None,
    };
    finish(&mut ws_tx, last).await;
}

// ---------------------------------------------------------------------------------------------
// Interactive console

/// `GET /v1/vms/{id}/console`: checks the sandbox runs, starts the shell, then upgrades.
///
/// The shell is `/bin/sh -i` (the sandbox's own, as the guest resolves it), or the sandbox
/// tools' `/.kairon/busybox sh -i` when the template has no `/bin/sh`. It runs under an
/// attached `runc exec` with plain pipes and **no terminal**: `runc exec --tty` needs a
/// console socket to hand the pseudo-terminal's master to, which this runtime does not set
/// up. So there is no line editing, no echo of the input, no job control and no window size;
/// programs that insist on a terminal (e.g. `vi`, `top`) will not work.
///
/// The session ends when the shell exits: whatever the shell left running in its process
/// group (background jobs) is killed with it, and the socket closes with reason
/// `exit <code>`. When the client closes (or goes away), the shell and its process group are
/// killed.
pub async fn console(rt: &Runtime, id: &str, ws: Upgrade) -> Response {
    if rt.get(id).await.is_ok_and(|vm| BackendKind::of(&vm) == BackendKind::Qemu) {
        return unix_relay(rt, id, "console.sock", ws).await;
    }
    if let Err(e) = rt.guest_pid(id).await {
        return e.into_response();
    }
    let vm = match rt.get(id).await {
        Ok(vm) => vm,
        Err(e) => return e.into_response(),
    };
    let ws = match ws {
        Ok(ws) => ws,
        Err(rejection) => return rejection.into_response(),
    };
    let host = rt.sandbox_host();
    let shell: &[&str] =
        if guest_has(&host.rootfs(&vm.id), "bin/sh") { &["/bin/sh", "-i"] } else { &["/.kairon/busybox", "sh", "-i"] };
    let shell = AttachedCommand { argv: shell.iter().map(|a| a.to_string()).collect(), ..Default::default() };
    let pid_file = PidFile(
        host.instance_dir(&vm.id).join(format!("console-{}.pid", uuid::Uuid::new_v4().simple())),
        vm.id.to_string(),
        host.clone(),
    );
    let mut cmd = host.attached_exec(&vm.id, &pid_file.0, &shell);
    cmd.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped()).kill_on_drop(true);
    let child = match cmd.spawn() {
        Ok(c) => c,
        Err(e) => return RuntimeError::Internal(format!("starting the console shell: {e}")).into_response(),
    };
    ws.on_upgrade(move |socket| console_session(socket, child, pid_file))
}

/// The command of `exec-stream`'s query: `command` a JSON array of strings, `env` a JSON object
/// of strings, `user` (`uid[:gid]` or a name) and `cwd` as given.
pub fn attached_command(
    command: &str,
    env: Option<&str>,
    user: Option<String>,
    cwd: Option<String>,
) -> Result<AttachedCommand, RuntimeError> {
    let argv: Vec<String> = serde_json::from_str(command).map_err(|_| {
        RuntimeError::Invalid("command must be a JSON array of strings, e.g. [\"sh\",\"-c\",\"cat\"]".into())
    })?;
    if argv.is_empty() || argv[0].is_empty() {
        return Err(RuntimeError::Invalid("command must name a program".into()));
    }
    let env: BTreeMap<String, String> = env
        .map(serde_json::from_str)
        .transpose()
        .map_err(|_| RuntimeError::Invalid("env must be a JSON object of strings, e.g. {\"MODE\":\"fast\"}".into()))?
        .unwrap_or_default();
    if env.keys().any(|k| k.is_empty() || k.contains('=')) {
        return Err(RuntimeError::Invalid("env names must be non-empty and contain no '='".into()));
    }
    let fields = argv.iter().chain(env.values()).chain(user.iter()).chain(cwd.iter());
    if fields.into_iter().any(|f| f.contains('\0')) {
        return Err(RuntimeError::Invalid("no argument, env value, user or cwd may hold a NUL byte".into()));
    }
    Ok(AttachedCommand { argv, env, user, cwd })
}

/// `GET /v1/vms/{id}/exec-stream?command=["prog","arg"]`: one command in a sandbox or a VM
/// (through kairon-agent: [`vm_session`]), streamed.
/// Client frames are its stdin (an empty frame closes stdin), its stdout and stderr come back
/// as binary frames as they are produced, and its exit closes the socket with reason
/// `exit <code>`; the client closing kills it.
///
/// With `tty` (a size), the command runs on a terminal ([`crate::tty`]): binary frames are
/// what is typed (an empty frame is ^D), what comes back is the terminal's output (stdout and
/// stderr together, as on any terminal), and a text frame `{"resize":{"cols":C,"rows":R}}`
/// resizes it.
pub async fn exec_stream(
    rt: &Runtime,
    id: &str,
    command: AttachedCommand,
    tty: Option<crate::tty::Size>,
    ws: Upgrade,
) -> Response {
    if let Ok(vm) = rt.get(id).await
        && BackendKind::of(&vm) == BackendKind::Qemu
    {
        let ws = match ws {
            Ok(ws) => ws,
            Err(rejection) => return rejection.into_response(),
        };
        let req = ExecRequest {
            command: command.argv,
            env: command.env,
            user: command.user,
            cwd: command.cwd,
            ..Default::default()
        };
        let size = tty.map(|s| (s.cols, s.rows));
        return match rt.inner.vms.attach(&vm.id, &req, size).await {
            Ok(pid) => {
                let rt = rt.clone();
                ws.on_upgrade(move |socket| vm_session(socket, rt, vm.id.to_string(), pid, tty.is_some()))
            }
            Err(e) => RuntimeError::from(e).into_response(),
        };
    }
    if let Err(e) = rt.guest_pid(id).await {
        return e.into_response();
    }
    let ws = match ws {
        Ok(ws) => ws,
        Err(rejection) => return rejection.into_response(),
    };
    let host = rt.sandbox_host();
    let pid_file = PidFile(
        host.instance_dir(id).join(format!("exec-{}.pid", uuid::Uuid::new_v4().simple())),
        id.to_string(),
        host.clone(),
    );
    if let Some(size) = tty {
        return match spawn_on_tty(host, id, &pid_file, &command, size) {
            Ok((child, master)) => ws.on_upgrade(move |socket| tty_session(socket, child, master, pid_file)),
            Err(e) => RuntimeError::Internal(format!("starting the command on a terminal: {e}")).into_response(),
        };
    }
    let mut cmd = host.attached_exec(id, &pid_file.0, &command);
    cmd.stdin(Stdio::piped()).stdout(Stdio::piped()).stderr(Stdio::piped()).kill_on_drop(true);
    let child = match cmd.spawn() {
        Ok(c) => c,
        Err(e) => return RuntimeError::Internal(format!("starting the command: {e}")).into_response(),
    };
    ws.on_upgrade(move |socket| console_session(socket, child, pid_file))
}

/// Relays a command attached in a VM (`exec -i`/`-it` through kairon-agent) and a client's
/// WebSocket, as the sandboxes' sessions do: output as the guest agent reads it (polled, soon
/// after each change, less often while quiet), frames from the client as its stdin (on a
/// terminal an empty one is ^D, a text one a resize), its exit as `exit <code>`; the client
/// leaving kills it (its whole process group on a terminal).
async fn vm_session(socket: WebSocket, rt: Runtime, id: String, pid: i64, tty: bool) {
    const QUICK: Duration = Duration::from_millis(10);
    const QUIET: Duration = Duration::from_millis(100);
    let vms = &rt.inner.vms;
    let (mut ws_tx, mut ws_rx) = socket.split();
    let (mut out, mut err) = (0u64, 0u64);
    let mut pause = QUICK;
    let reason = 'session: loop {
        let mut fresh = false;
        if let Ok(o) = vms.attached_output(&id, pid, out, err).await {
            for chunk in [o.stdout, o.stderr] {
                if chunk.is_empty() {
                    continue;
                }
                fresh = true;
                if ws_tx.send(Message::Binary(chunk.into())).await.is_err() {
                    vms.detach(&id, pid, tty).await;
                    return;
                }
            }
            (out, err) = (o.stdout_end, o.stderr_end);
        }
        if !fresh {
            match vms.attached_status(&id, pid).await {
                Ok(st) if st.exited => {
                    // What came after the last read: on a terminal the agent let go of what was
                    // read, elsewhere it hands the whole output over again.
                    let skip =
                        |b: Vec<u8>, at: u64| if tty { b } else { b.get(at as usize..).unwrap_or_default().to_vec() };
                    for rest in [skip(st.stdout, out), skip(st.stderr, err)] {
                        if !rest.is_empty() {
                            let _ = ws_tx.send(Message::Binary(rest.into())).await;
                        }
                    }
                    break 'session format!("exit {}", st.exit_code.or(st.signal.map(|s| 128 + s)).unwrap_or(-1));
                }
                Ok(_) => {}
                Err(e) => break format!("exit -1 (the guest agent: {e})"),
            }
        }
        pause = if fresh { QUICK } else { (pause * 2).min(QUIET) };
        tokio::select! {
            msg = ws_rx.next() => match msg {
                Some(Ok(Message::Binary(b))) => {
                    // An empty frame ends input: ^D on a terminal, closing stdin elsewhere.
                    let (data, close) = match (b.is_empty(), tty) {
                        (true, true) => (&[4u8][..], false),
                        (true, false) => (&[][..], true),
                        (false, _) => (&b[..], false),
                    };
                    let _ = vms.attached_input(&id, pid, data, close).await;
                    pause = QUICK;
                }
                Some(Ok(Message::Text(t))) if tty => {
                    if let Ok(c) = serde_json::from_str::<crate::tty::Control>(t.as_str())
                        && let Some(size) = crate::tty::Size::checked(c.resize.cols, c.resize.rows)
                    {
                        let _ = vms.attached_resize(&id, pid, (size.cols, size.rows)).await;
                    }
                }
                Some(Ok(Message::Close(_)) | Err(_)) | None => {
                    vms.detach(&id, pid, tty).await;
                    finish(&mut ws_tx, None).await;
                    return;
                }
                Some(Ok(_)) => {}
            },
            () = tokio::time::sleep(pause) => {}
        }
    };
    finish(&mut ws_tx, Some(close(close_code::NORMAL, &reason))).await;
}

/// `runc exec` on a terminal, with a pseudo-terminal's slave as its stdio and controlling terminal; the
/// child and the master.
fn spawn_on_tty(
    host: &crate::sandbox::SandboxHost,
    id: &str,
    pid_file: &PidFile,
    command: &AttachedCommand,
    size: crate::tty::Size,
) -> io::Result<(Child, std::os::fd::OwnedFd)> {
    let pty = crate::tty::open(size)?;
    let mut cmd = host.attached_exec_on_tty(id, &pid_file.0, command, (size.cols, size.rows))?;
    cmd.stdin(Stdio::from(pty.slave.try_clone()?))
        .stdout(Stdio::from(pty.slave.try_clone()?))
        .stderr(Stdio::from(pty.slave))
        .kill_on_drop(true);
    let child = cmd.spawn()?;
    // The slave's copies went to the child with the command; none stays here, so the master
    // reads EIO once the command and runc are gone.
    drop(cmd);
    Ok((child, pty.master))
}

/// Relays a terminal's master and a client's WebSocket until the command exits (the socket
/// closes with `exit <code>`) or the client goes (the command and its group are killed).
async fn tty_session(socket: WebSocket, mut child: Child, master: std::os::fd::OwnedFd, pid_file: PidFile) {
    let (mut ws_tx, mut ws_rx) = socket.split();
    // Blocking reads and writes on two copies of the master, on tokio's blocking threads.
    let copies = master.try_clone().and_then(|r| Ok((r, master.try_clone()?)));
    let (mut reader, mut writer) = match copies {
        Ok((r, w)) => (tokio::fs::File::from_std(r.into()), tokio::fs::File::from_std(w.into())),
        Err(e) => {
            let _ = child.start_kill();
            finish(&mut ws_tx, Some(close(close_code::ERROR, &format!("the terminal failed: {e}")))).await;
            return;
        }
    };
    let typed = async {
        while let Some(Ok(msg)) = ws_rx.next().await {
            let data = match msg {
                // ^D: what ends input on a terminal.
                Message::Binary(b) if b.is_empty() => Bytes::from_static(&[4]),
                Message::Binary(b) => b,
                Message::Text(t) => {
                    if let Ok(c) = serde_json::from_str::<crate::tty::Control>(t.as_str())
                        && let Some(size) = crate::tty::Size::checked(c.resize.cols, c.resize.rows)
                    {
                        let _ = crate::tty::set_size(&master, size);
                    }
                    continue;
                }
                Message::Close(_) => break,
                _ => continue,
            };
            if writer.write_all(&data).await.is_err() || writer.flush().await.is_err() {
                break;
            }
        }
    };
    let shown = async {
        let mut buf = vec![0u8; 64 * 1024];
        loop {
            match reader.read(&mut buf).await {
                Ok(n) if n > 0 => {
                    if ws_tx.send(Message::Binary(Bytes::copy_from_slice(&buf[..n]))).await.is_err() {
                        return false;
                    }
                }
                // End of file or EIO: every slave is closed, the command and runc are gone.
                _ => return true,
            }
        }
    };
    let exited = tokio::select! {
        () = typed => false,
        client_ok = shown => client_ok,
    };
    let status = end_session(&mut child, &pid_file, exited).await;
    let last = exited.then(|| close(close_code::NORMAL, &exit_reason(status)));
    finish(&mut ws_tx, last).await;
}

/// Whether `path` (relative to the root) exists as the guest sees it: symlinks are followed
/// inside the sandbox's root, never out of it.
fn guest_has(rootfs: &Path, path: &str) -> bool {
    use rustix::fs::{Mode, OFlags, ResolveFlags};
    let Ok(root) = rustix::fs::open(rootfs, OFlags::PATH | OFlags::DIRECTORY | OFlags::CLOEXEC, Mode::empty()) else {
        return false;
    };
    rustix::fs::openat2(
        &root,
        path,
        OFlags::PATH | OFlags::CLOEXEC,
        Mode::empty(),
        ResolveFlags::IN_ROOT | ResolveFlags::NO_MAGICLINKS,
    )
    .is_ok()
}

/// Where runc writes the shell's host pid; removed with the session (also when the upgrade
/// never happens).
/// The file, the sandbox's id, and its host (whose cgroup bounds what may be killed).
struct PidFile(PathBuf, String, crate::sandbox::SandboxHost);

impl PidFile {
    fn pid(&self) -> Option<u32> {
        std::fs::read_to_string(&self.0).ok()?.trim().parse().ok().filter(|p| *p > 1)
    }
}

impl Drop for PidFile {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.0);
        let _ = std::fs::remove_file(crate::sandbox::process_spec_path(&self.0));
    }
}

/// Kills the shell's process group: runc makes the exec'd shell a session leader, and without
/// a terminal (no job control) everything it starts stays in its group. Only members of the
/// sandbox's cgroup are signalled, so a recycled pid never reaches a host process group.
fn kill_shell_group(pid_file: &PidFile, pid: u32) {
    pid_file.2.kill_group_in_sandbox(&pid_file.1, pid);
}

/// Kills the shell and its process group. runc writes the pid file only once it has finished
/// starting the shell, which may be a little after the shell has begun to run (and print), so
/// a missing file is waited for; if runc ends or never writes it, runc itself is killed.
async fn kill_shell(child: &mut Child, pid_file: &PidFile) {
    let deadline = tokio::time::Instant::now() + RUNC_EXIT_GRACE;
    loop {
        if let Some(pid) = pid_file.pid() {
            kill_shell_group(pid_file, pid);
            return;
        }
        if !matches!(child.try_wait(), Ok(None)) || tokio::time::Instant::now() >= deadline {
            let _ = child.start_kill();
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Waits until the shell has exited; returns its pid (still its process group's id).
async fn shell_gone(pid_file: &PidFile) -> u32 {
    let mut pid = None;
    loop {
        tokio::time::sleep(SHELL_POLL).await;
        if pid.is_none() {
            pid = pid_file.pid();
        }
        if let Some(p) = pid
            && !pid_alive(p)
        {
            return p;
        }
    }
}

/// Relays the shell's stdout and stderr, as produced, until both end (runc exited) or the
/// client can no longer be written to (then `false`).
async fn output_to_client<O, E>(stdout: Option<O>, stderr: Option<E>, ws_tx: &mut WsTx) -> bool
where
    O: AsyncRead + Unpin,
    E: AsyncRead + Unpin,
{
    let (mut out, mut err) = (stdout, stderr);
    let (mut out_buf, mut err_buf) = (vec![0u8; FRAME_BYTES], vec![0u8; FRAME_BYTES]);
    while out.is_some() || err.is_some() {
        let got = tokio::select! {
            r = async { out.as_mut()?.read(&mut out_buf).await.ok() }, if out.is_some() => match r {
                Some(n) if n > 0 => Some(Bytes::copy_from_slice(&out_buf[..n])),
                _ => { out = None; None }
            },
            r = async { err.as_mut()?.read(&mut err_buf).await.ok() }, if err.is_some() => match r {
                Some(n) if n > 0 => Some(Bytes::copy_from_slice(&err_buf[..n])),
                _ => { err = None; None }
            },
        };
        if let Some(bytes) = got
            && ws_tx.send(Message::Binary(bytes)).await.is_err()
        {
            return false;
        }
    }
    true
}

/// Feeds the client's frames to the shell's stdin until the client closes. Input the shell
/// no longer takes (it is exiting) is dropped.
async fn client_to_stdin<W: AsyncWrite + Unpin>(ws_rx: &mut WsRx, stdin: Option<W>) {
    let mut stdin = stdin;
    while let Some(bytes) = next_client_bytes(ws_rx).await {
        // An empty frame is end-of-file: the program reads EOF, the session stays open.
        if bytes.is_empty() {
            stdin = None;
            continue;
        }
        if let Some(w) = stdin.as_mut()
            && w.write_all(&bytes).await.is_err()
        {
            stdin = None;
        }
    }
}

fn exit_reason(status: io::Result<ExitStatus>) -> String {
    match status {
        Ok(s) => match (s.code(), s.signal()) {
            (Some(code), _) => format!("exit {code}"),
            (None, Some(sig)) => format!("exit {}", 128 + sig),
            (None, None) => "exit -1".into(),
        },
        Err(e) => format!("exit -1 (waiting for the shell: {e})"),
    }
}

/// runc's exit status once a session is over. When the program did not exit (the client closed
/// or went away) it is ended with all it started first; a runc that lingers (something outside
/// the program's group still holds its pipes) is killed.
async fn end_session(child: &mut Child, pid_file: &PidFile, exited: bool) -> io::Result<ExitStatus> {
    if !exited {
        kill_shell(child, pid_file).await;
    }
    match tokio::time::timeout(RUNC_EXIT_GRACE, child.wait()).await {
        Ok(s) => s,
        Err(_) => {
            let _ = child.start_kill();
            child.wait().await
        }
    }
}

async fn console_session(socket: WebSocket, mut child: Child, pid_file: PidFile) {
    let (mut ws_tx, mut ws_rx) = socket.split();
    let (stdin, stdout, stderr) = (child.stdin.take(), child.stdout.take(), child.stderr.take());
    let shell_exited = {
        let up = client_to_stdin(&mut ws_rx, stdin);
        let down = output_to_client(stdout, stderr, &mut ws_tx);
        let gone = shell_gone(&pid_file);
        tokio::pin!(up, down, gone);
        // Output ends when runc exits, which it does (with the shell's status) once the
        // shell's output pipes are closed. Jobs the shell left running hold them open: once
        // the shell is gone they are killed with its process group, and if something outside
        // the group still holds the pipes, runc itself is killed.
        let output = async {
            let shell = tokio::select! {
                client_ok = &mut down => return client_ok,
                pid = &mut gone => pid,
            };
            if let Ok(client_ok) = tokio::time::timeout(JOBS_GRACE, &mut down).await {
                return client_ok;
            }
            // runc still runs, so something holds the pipes: the group is not empty.
            kill_shell_group(&pid_file, shell);
            match tokio::time::timeout(RUNC_EXIT_GRACE, &mut down).await {
                Ok(client_ok) => client_ok,
                Err(_) => {
                    let _ = child.start_kill();
                    down.await
                }
            }
        };
        tokio::select! {
            () = &mut up => false,
            client_ok = output => client_ok,
        }
    };
    let status = end_session(&mut child, &pid_file, shell_exited).await;
    if !shell_exited {
        finish(&mut ws_tx, None).await;
        return;
    }
    let reason = exit_reason(status);
    let _ = ws_tx.send(close(close_code::NORMAL, &reason)).await;
    // Let the client answer our Close; its input goes nowhere now.
    let _ = tokio::time::timeout(CLOSE_GRACE, client_to_stdin::<tokio::process::ChildStdin>(&mut ws_rx, None)).await;
    finish(&mut ws_tx, None).await;
}
