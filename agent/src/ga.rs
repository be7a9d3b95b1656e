//! The qemu-guest-agent protocol (the subset Kairon's runtime uses, with qemu-ga's names and
//! shapes): one JSON command per line from the host, one JSON answer per command. A 0xFF byte
//! from the host discards a half-read command (resynchronisation), and `guest-sync-delimited`
//! puts a 0xFF before its answer so the host can skip stale bytes.

use std::collections::HashMap;
use std::fs::File;
use std::io::{Read, Seek, SeekFrom, Write};
use std::process::{Command, Stdio};
use std::time::Duration;

use base64::Engine;
use base64::engine::general_purpose::STANDARD as B64;
use serde_json::{Value, json};

use crate::procs::{self, Capture};

/// qemu-ga's cap on captured output per stream.
const OUTPUT_CAP: usize = 16 * 1024 * 1024;
/// The most of each stream `kairon-exec-output` hands over in one answer.
const OUTPUT_CHUNK: usize = 256 * 1024;
/// Largest read of one guest-file-read.
const READ_CAP: usize = 48 * 1024 * 1024;

const COMMANDS: &[&str] = &[
    "guest-sync",
    "guest-sync-delimited",
    "guest-ping",
    "guest-info",
    "guest-exec",
    "guest-exec-status",
    "guest-file-open",
    "guest-file-close",
    "guest-file-read",
    "guest-file-write",
    "guest-file-seek",
    "guest-file-flush",
    "guest-fsfreeze-status",
    "guest-fsfreeze-freeze",
    "guest-fsfreeze-thaw",
    "guest-shutdown",
    "guest-get-host-name",
    "kairon-exec-output",
    "kairon-exec-input",
    "kairon-exec-resize",
];

struct Exec {
    stdout: Option<Capture>,
    stderr: Option<Capture>,
    /// A kept-open stdin (`kairon-keep-stdin`): its writer thread takes data, `None` closes it.
    stdin: Option<std::sync::mpsc::Sender<Option<Vec<u8>>>>,
    /// The terminal's master, for a command on one (`kairon-tty`).
    tty: Option<std::os::fd::OwnedFd>,
}

#[derive(Default)]
pub struct Agent {
    execs: HashMap<u32, Exec>,
    files: HashMap<u64, File>,
    next_handle: u64,
    /// Mount points this agent froze, in freeze order.
    frozen: Vec<String>,
}

type Answer = Result<Value, String>;

fn arg<'a>(args: &'a Value, key: &str) -> Result<&'a Value, String> {
    args.get(key).ok_or_else(|| format!("Parameter '{key}' is missing"))
}

fn int(args: &Value, key: &str) -> Result<i64, String> {
    arg(args, key)?.as_i64().ok_or_else(|| format!("Parameter '{key}' expects an integer"))
}

fn string<'a>(args: &'a Value, key: &str) -> Result<&'a str, String> {
    arg(args, key)?.as_str().ok_or_else(|| format!("Parameter '{key}' expects a string"))
}

impl Agent {
    /// Handles one command line; `None` when no answer is due (guest-shutdown, like qemu-ga).
    /// The answer's bytes include the 0xFF of guest-sync-delimited.
    pub fn handle(&mut self, line: &[u8]) -> Option<Vec<u8>> {
        let req: Value = match serde_json::from_slice(line) {
            Ok(v) => v,
            Err(e) => return Some(error_bytes(&format!("JSON parse error, {e}"))),
        };
        let Some(cmd) = req.get("execute").and_then(Value::as_str) else {
            return Some(error_bytes("this is not a command: 'execute' is missing"));
        };
        let args = req.get("arguments").cloned().unwrap_or(json!({}));
        let mut out = Vec::new();
        let answer = match cmd {
            "guest-sync" => arg(&args, "id").cloned(),
            "guest-sync-delimited" => {
                out.push(0xFF);
                arg(&args, "id").cloned()
            }
            "guest-ping" => Ok(json!({})),
            "guest-info" => Ok(json!({
                "version": concat!("kairon-agent ", env!("CARGO_PKG_VERSION")),
                "supported_commands": COMMANDS.iter().map(|c| json!({"name": c, "enabled": true, "success-response": *c != "guest-shutdown"})).collect::<Vec<_>>(),
            })),
            "guest-exec" => self.exec(&args),
            "guest-exec-status" => self.exec_status(&args),
            "kairon-exec-output" => self.exec_output(&args),
            "kairon-exec-input" => self.exec_input(&args),
            "kairon-exec-resize" => self.exec_resize(&args),
            "guest-file-open" => self.file_open(&args),
            "guest-file-close" => self.file_close(&args),
            "guest-file-read" => self.file_read(&args),
            "guest-file-write" => self.file_write(&args),
            "guest-file-seek" => self.file_seek(&args),
            "guest-file-flush" => {
                self.file(&args).and_then(|f| f.flush().map_err(|e| e.to_string())).map(|()| json!({}))
            }
            "guest-fsfreeze-status" => Ok(json!(if self.frozen.is_empty() { "thawed" } else { "frozen" })),
            "guest-fsfreeze-freeze" => self.freeze(),
            "guest-fsfreeze-thaw" => Ok(json!(self.thaw())),
            "guest-shutdown" => {
                let mode = args.get("mode").and_then(Value::as_str).unwrap_or("powerdown").to_string();
                self.thaw();
                crate::init::shutdown(&mode);
                return None;
            }
            "guest-get-host-name" => Ok(json!({"host-name": crate::init::hostname()})),
            other => Err(format!("The command {other} has not been found")),
        };
        let body = match answer {
            Ok(v) => json!({"return": v}),
            Err(desc) => json!({"error": {"class": "GenericError", "desc": desc}}),
        };
        out.extend_from_slice(body.to_string().as_bytes());
        out.push(b'\n');
        Some(out)
    }

    fn exec(&mut self, args: &Value) -> Answer {
        let path = string(args, "path")?;
        // Kairon's own: on a terminal of this size, its slave the command's stdio.
        let tty = args.get("kairon-tty").map(crate::tty::size).transpose()?;
        let mut cmd = if tty.is_some() {
            let mut c = Command::new(crate::tty::SETSID);
            c.args(["--ctty", path]);
            c
        } else {
            Command::new(path)
        };
        if let Some(a) = args.get("arg").and_then(Value::as_array) {
            cmd.args(a.iter().filter_map(Value::as_str));
        }
        if let Some(env) = args.get("env").and_then(Value::as_array) {
            cmd.env_clear();
            for kv in env.iter().filter_map(Value::as_str) {
                if let Some((k, v)) = kv.split_once('=') {
                    cmd.env(k, v);
                }
            }
        }
        let input = match args.get("input-data").and_then(Value::as_str) {
            Some(b) => Some(B64.decode(b).map_err(|e| format!("input-data is not base64: {e}"))?),
            None => None,
        };
        let capture = args.get("capture-output").and_then(Value::as_bool).unwrap_or(false);
        let keep_stdin = args.get("kairon-keep-stdin").and_then(Value::as_bool).unwrap_or(false);
        if let Some((cols, rows)) = tty {
            return self.exec_on_tty(cmd, path, cols, rows, input);
        }
        cmd.stdin(if input.is_some() || keep_stdin { Stdio::piped() } else { Stdio::null() });
        if capture {
            cmd.stdout(Stdio::piped()).stderr(Stdio::piped());
        } else {
            cmd.stdout(Stdio::null()).stderr(Stdio::null());
        }
        let mut child = procs::spawn(&mut cmd)
            .map_err(|e| format!("Failed to execute child process \u{201c}{path}\u{201d} ({e})"))?;
        // Writes go through a thread of their own: a process that does not read its stdin
        // must not stall the agent.
        let mut writer = None;
        if let Some(mut stdin) = child.stdin.take() {
            let (tx, rx) = std::sync::mpsc::channel::<Option<Vec<u8>>>();
            if let Some(data) = input {
                let _ = tx.send(Some(data));
            }
            if keep_stdin {
                writer = Some(tx);
            } else {
                let _ = tx.send(None);
            }
            std::thread::spawn(move || {
                while let Ok(Some(data)) = rx.recv() {
                    if stdin.write_all(&data).and_then(|()| stdin.flush()).is_err() {
                        break;
                    }
                }
            });
        }
        let exec = Exec {
            stdout: child.stdout.take().map(|p| Capture::start(p, OUTPUT_CAP)),
            stderr: child.stderr.take().map(|p| Capture::start(p, OUTPUT_CAP)),
            stdin: writer,
            tty: None,
        };
        let pid = child.id();
        self.execs.insert(pid, exec);
        Ok(json!({"pid": pid}))
    }

    /// `cmd` on a new terminal of `cols` x `rows`: the screen (stdout and stderr as one) is its
    /// stdout capture, its stdin stays open for `kairon-exec-input` (what is typed), and
    /// `kairon-exec-resize` resizes it.
    fn exec_on_tty(&mut self, mut cmd: Command, path: &str, cols: u16, rows: u16, input: Option<Vec<u8>>) -> Answer {
        let failed =
            |e: std::io::Error| format!("Failed to execute child process \u{201c}{path}\u{201d} on a terminal ({e})");
        let pty = crate::tty::open(cols, rows).map_err(failed)?;
        cmd.stdin(Stdio::from(pty.slave.try_clone().map_err(failed)?))
            .stdout(Stdio::from(pty.slave.try_clone().map_err(failed)?))
            .stderr(Stdio::from(pty.slave));
        let child = procs::spawn(&mut cmd).map_err(failed)?;
        // The slave's copies went with the command: none stays here, so the master reads EIO
        // (the capture's end) once the command and whatever it left on the terminal are gone.
        drop(cmd);
        let screen = File::from(pty.master.try_clone().map_err(failed)?);
        let mut keys = File::from(pty.master.try_clone().map_err(failed)?);
        let (tx, rx) = std::sync::mpsc::channel::<Option<Vec<u8>>>();
        if let Some(data) = input {
            let _ = tx.send(Some(data));
        }
        std::thread::spawn(move || {
            while let Ok(Some(data)) = rx.recv() {
                if keys.write_all(&data).is_err() {
                    break;
                }
            }
        });
        let exec = Exec {
            stdout: Some(Capture::start(screen, OUTPUT_CAP)),
            stderr: None,
            stdin: Some(tx),
            tty: Some(pty.master),
        };
        let pid = child.id();
        self.execs.insert(pid, exec);
        Ok(json!({"pid": pid}))
    }

    /// Kairon's own command: resizes a command's terminal (`kairon-tty`) to `cols` x `rows`.
    fn exec_resize(&mut self, args: &Value) -> Answer {
        let pid = int(args, "pid")? as u32;
        let exec = self.execs.get(&pid).ok_or_else(|| format!("Invalid parameter 'pid': no such process {pid}"))?;
        let master = exec.tty.as_ref().ok_or_else(|| format!("process {pid} is not on a terminal"))?;
        let (cols, rows) = crate::tty::size(args)?;
        crate::tty::set_size(master, cols, rows).map_err(|e| format!("resizing the terminal of {pid}: {e}"))?;
        Ok(json!({}))
    }

    fn exec_status(&mut self, args: &Value) -> Answer {
        let pid = int(args, "pid")? as u32;
        if !self.execs.contains_key(&pid) {
            return Err(format!("Invalid parameter 'pid': no such process {pid}"));
        }
        let pipes_done = self.execs.get(&pid).is_some_and(|e| {
            e.stdout.as_ref().is_none_or(Capture::done) && e.stderr.as_ref().is_none_or(Capture::done)
        });
        // Exited means: reaped, and its output complete (a grandchild holding the pipe open
        // keeps it running for the host, as with qemu-ga).
        if !pipes_done || !procs::is_tracked(pid) {
            if !procs::is_tracked(pid) {
                self.execs.remove(&pid);
                return Err(format!("Invalid parameter 'pid': no such process {pid}"));
            }
            return Ok(json!({"exited": false}));
        }
        let Some(exit) = procs::take_exit(pid) else { return Ok(json!({"exited": false})) };
        let exec = self.execs.remove(&pid).expect("checked above");
        let mut out = json!({"exited": true});
        if let Some(code) = exit.code {
            out["exitcode"] = json!(code);
        }
        if let Some(sig) = exit.signal {
            out["signal"] = json!(sig);
        }
        for (key, cap) in [("out", exec.stdout), ("err", exec.stderr)] {
            if let Some(c) = cap {
                let (bytes, cut) = c.finish();
                out[format!("{key}-data")] = json!(B64.encode(bytes));
                if cut {
                    out[format!("{key}-truncated")] = json!(true);
                }
            }
        }
        Ok(out)
    }

    /// Kairon's own command: a running process's output from byte offsets (`out-offset`,
    /// `err-offset`), as it is produced, at most [`OUTPUT_CHUNK`] bytes of each, with the offset
    /// just past what is sent (`out-end`, `err-end`). qemu-ga hands output over only at exit;
    /// with this the host follows it. The bytes are those `guest-exec-status` hands over at exit.
    fn exec_output(&mut self, args: &Value) -> Answer {
        let pid = int(args, "pid")? as u32;
        let exec = self.execs.get(&pid).ok_or_else(|| format!("Invalid parameter 'pid': no such process {pid}"))?;
        let mut out = json!({});
        for (key, cap) in [("out", &exec.stdout), ("err", &exec.stderr)] {
            let from = args.get(format!("{key}-offset")).and_then(Value::as_u64).unwrap_or(0);
            // A terminal has one reader, which asks from what it has: what came before is let go.
            if let (Some(_), Some(c)) = (&exec.tty, cap) {
                c.forget_before(usize::try_from(from).unwrap_or(usize::MAX));
            }
            let (bytes, end) = cap
                .as_ref()
                .map(|c| c.since(usize::try_from(from).unwrap_or(usize::MAX), OUTPUT_CHUNK))
                .unwrap_or((Vec::new(), 0));
            out[format!("{key}-data")] = json!(B64.encode(bytes));
            out[format!("{key}-end")] = json!(end);
        }
        Ok(out)
    }

    /// Kairon's own command: writes `input-data` (base64) to a command's kept-open stdin
    /// (`kairon-keep-stdin`), in order; `close: true` closes it afterwards.
    fn exec_input(&mut self, args: &Value) -> Answer {
        let pid = int(args, "pid")? as u32;
        let exec = self.execs.get_mut(&pid).ok_or_else(|| format!("Invalid parameter 'pid': no such process {pid}"))?;
        let data = match args.get("input-data").and_then(Value::as_str) {
            Some(b) => B64.decode(b).map_err(|e| format!("input-data is not base64: {e}"))?,
            None => Vec::new(),
        };
        let close = args.get("close").and_then(Value::as_bool).unwrap_or(false);
        let tx = exec.stdin.as_ref().ok_or_else(|| format!("process {pid} has no open stdin"))?;
        if !data.is_empty() && tx.send(Some(data)).is_err() {
            exec.stdin = None;
            return Err(format!("process {pid} no longer reads its stdin"));
        }
        if close {
            let _ = tx.send(None);
            exec.stdin = None;
        }
        Ok(json!({}))
    }

    fn file(&mut self, args: &Value) -> Result<&mut File, String> {
        let h = int(args, "handle")? as u64;
        self.files.get_mut(&h).ok_or_else(|| format!("handle '{h}' has not been found"))
    }

    fn file_open(&mut self, args: &Value) -> Answer {
        let path = string(args, "path")?;
        let mode = args.get("mode").and_then(Value::as_str).unwrap_or("r").replace('b', "");
        let mut o = std::fs::OpenOptions::new();
        match mode.as_str() {
            "r" => o.read(true),
            "r+" => o.read(true).write(true),
            "w" => o.write(true).create(true).truncate(true),
            "w+" => o.read(true).write(true).create(true).truncate(true),
            "a" => o.append(true).create(true),
            "a+" => o.read(true).append(true).create(true),
            m => return Err(format!("invalid file open mode '{m}'")),
        };
        let f = o.open(path).map_err(|e| format!("failed to open file '{path}' (mode: '{mode}'): {e}"))?;
        self.next_handle += 1;
        self.files.insert(self.next_handle, f);
        Ok(json!(self.next_handle))
    }

    fn file_close(&mut self, args: &Value) -> Answer {
        let h = int(args, "handle")? as u64;
        match self.files.remove(&h) {
            Some(f) => {
                let _ = f.sync_all();
                Ok(json!({}))
            }
            None => Err(format!("handle '{h}' has not been found")),
        }
    }

    fn file_read(&mut self, args: &Value) -> Answer {
        let count = args.get("count").and_then(Value::as_u64).unwrap_or(4096) as usize;
        if count > READ_CAP {
            return Err(format!("value '{count}' is invalid for argument count"));
        }
        let f = self.file(args)?;
        let mut buf = vec![0u8; count];
        let mut n = 0;
        while n < count {
            match f.read(&mut buf[n..]) {
                Ok(0) => break,
                Ok(k) => n += k,
                Err(e) => return Err(format!("failed to read file: {e}")),
            }
        }
        buf.truncate(n);
        Ok(json!({"count": n, "buf-b64": B64.encode(&buf), "eof": n < count}))
    }

    fn file_write(&mut self, args: &Value) -> Answer {
        let data = B64.decode(string(args, "buf-b64")?).map_err(|e| format!("buf-b64 is not base64: {e}"))?;
        let count = args.get("count").and_then(Value::as_u64).map(|c| c as usize).unwrap_or(data.len());
        if count > data.len() {
            return Err(format!("value '{count}' is invalid for argument count"));
        }
        let f = self.file(args)?;
        f.write_all(&data[..count]).map_err(|e| format!("failed to write to file: {e}"))?;
        Ok(json!({"count": count, "eof": false}))
    }

    fn file_seek(&mut self, args: &Value) -> Answer {
        let offset = int(args, "offset")?;
        let whence = match args.get("whence") {
            Some(Value::String(s)) if s == "set" => SeekFrom::Start(offset as u64),
            Some(Value::String(s)) if s == "cur" => SeekFrom::Current(offset),
            Some(Value::String(s)) if s == "end" => SeekFrom::End(offset),
            Some(Value::Number(n)) if n.as_i64() == Some(0) => SeekFrom::Start(offset as u64),
            Some(Value::Number(n)) if n.as_i64() == Some(1) => SeekFrom::Current(offset),
            Some(Value::Number(n)) if n.as_i64() == Some(2) => SeekFrom::End(offset),
            _ => return Err("Parameter 'whence' expects set, cur or end".into()),
        };
        let f = self.file(args)?;
        let pos = f.seek(whence).map_err(|e| format!("failed to seek file: {e}"))?;
        Ok(json!({"position": pos, "eof": false}))
    }

    /// Freezes every mounted filesystem on a block device (deepest mount points first, so a
    /// filesystem is frozen after those mounted under it).
    fn freeze(&mut self) -> Answer {
        if !self.frozen.is_empty() {
            return Err("Command guest-fsfreeze-freeze has been disabled: the filesystems are already frozen".into());
        }
        let mut points = block_mounts();
        points.sort_by_key(|p| std::cmp::Reverse(p.len()));
        for p in points {
            // One sync first, so the freeze itself has little to write.
            rustix::fs::sync();
            match procs::run("fsfreeze", &["--freeze", &p]) {
                Ok(exit) if exit.success() => self.frozen.push(p),
                Ok(exit) => {
                    self.thaw();
                    return Err(format!("failed to freeze {p}: fsfreeze exited with {exit:?}"));
                }
                Err(e) => {
                    self.thaw();
                    return Err(format!("failed to freeze {p}: {e} (is util-linux's fsfreeze installed?)"));
                }
            }
        }
        Ok(json!(self.frozen.len()))
    }

    fn thaw(&mut self) -> usize {
        let mut n = 0;
        while let Some(p) = self.frozen.pop() {
            if procs::run("fsfreeze", &["--unfreeze", &p]).is_ok_and(|e| e.success()) {
                n += 1;
            }
        }
        n
    }
}

fn error_bytes(desc: &str) -> Vec<u8> {
    let mut v = json!({"error": {"class": "GenericError", "desc": desc}}).to_string().into_bytes();
    v.push(b'\n');
    v
}

/// Mount points of filesystems on real block devices (`/dev/...`), once each.
fn block_mounts() -> Vec<String> {
    let mounts = std::fs::read_to_string("/proc/self/mounts").unwrap_or_default();
    let mut seen = Vec::new();
    for l in mounts.lines() {
        let mut f = l.split(' ');
        let (Some(dev), Some(point)) = (f.next(), f.next()) else { continue };
        let point = point.replace("\\040", " ");
        if dev.starts_with("/dev/") && !seen.contains(&point) {
            seen.push(point);
        }
    }
    seen
}

/// The virtio-serial port named `org.qemu.guest_agent.0`, as `/dev/vportNpM`.
pub fn find_port(name: &str) -> Option<String> {
    let entries = std::fs::read_dir("/sys/class/virtio-ports").ok()?;
    for e in entries.flatten() {
        let n = std::fs::read_to_string(e.path().join("name")).unwrap_or_default();
        if n.trim() == name {
            return Some(format!("/dev/{}", e.file_name().to_string_lossy()));
        }
    }
    None
}

/// Serves the protocol on the port for ever. While no host is connected, reads end at once
/// (virtio-serial), so an empty read waits a little and reads again.
pub fn serve(port: &str) -> ! {
    let mut agent = Agent::default();
    loop {
        let mut f = match std::fs::OpenOptions::new().read(true).write(true).open(port) {
            Ok(f) => f,
            Err(e) => {
                warn!("kairon-agent: opening {port}: {e}");
                std::thread::sleep(Duration::from_secs(1));
                continue;
            }
        };
        let mut line = Vec::new();
        let mut buf = [0u8; 64 * 1024];
        loop {
            let n = match f.read(&mut buf) {
                Ok(0) => {
                    // No host on the other end: anything half-read is stale.
                    line.clear();
                    std::thread::sleep(Duration::from_millis(20));
                    continue;
                }
                Ok(n) => n,
                Err(e) => {
                    warn!("kairon-agent: reading {port}: {e}");
                    std::thread::sleep(Duration::from_millis(200));
                    break;
                }
            };
            for &b in &buf[..n] {
                match b {
                    0xFF => line.clear(),
                    b'\n' => {
                        let cmd = std::mem::take(&mut line);
                        if cmd.iter().all(u8::is_ascii_whitespace) {
                            continue;
                        }
                        // A command that panics is answered as failed; the agent (PID 1 in a
                        // VM) goes on serving.
                        let handled = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| agent.handle(&cmd)))
                            .unwrap_or_else(|panic| {
                                let why = panic
                                    .downcast_ref::<String>()
                                    .map(String::as_str)
                                    .or_else(|| panic.downcast_ref::<&str>().copied())
                                    .unwrap_or("a panic");
                                Some(error_bytes(&format!("the guest agent failed: {why}")))
                            });
                        if let Some(answer) = handled
                            && let Err(e) = f.write_all(&answer)
                        {
                            warn!("kairon-agent: writing {port}: {e}");
                        }
                    }
                    _ => line.push(b),
                }
            }
        }
    }
}
