//! The host side of the qemu-guest-agent protocol, over the VM's virtio-serial chardev socket.
//! It works with a real `qemu-ga` as well as with Kairon's own `kairon-agent`: every command
//! is a documented qemu-ga command, and each (re)connection first resynchronises with a 0xFF
//! byte and `guest-sync-delimited`, so bytes left over from an earlier exchange are skipped.

use std::path::{Path, PathBuf};
use std::time::Duration;

use base64::Engine;
use base64::engine::general_purpose::STANDARD as B64;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};
use tokio::net::UnixStream;

#[derive(Debug, thiserror::Error)]
pub enum GaError {
    #[error("the guest agent is not answering: {0}")]
    Unreachable(String),
    #[error("the guest agent refused {command}: {desc}")]
    Command { command: String, desc: String },
}

type Result<T> = std::result::Result<T, GaError>;

/// The longest answer line read from a guest agent (a guest writes it, so it is bounded): 1 MiB,
/// beyond the answers that carry bytes, which are bounded by what they were asked for.
pub const MAX_LINE: u64 = 1 << 20;
/// qemu-ga's own cap on each captured stream `guest-exec-status` reports.
const EXEC_STREAM_CAP: u64 = 16 << 20;
/// Room for the JSON around base64 data in an answer.
const ANSWER_OVERHEAD: u64 = 64 << 10;

/// The longest answer carrying `bytes` of data in base64.
fn answer_cap(bytes: u64) -> u64 {
    bytes.div_ceil(3) * 4 + ANSWER_OVERHEAD
}

/// Reads one line of at most `max` bytes into `line`; a longer one is an error, and memory
/// stays at `max` whatever the guest sends. 0 at the end of the stream.
pub(crate) async fn read_line_bounded<R>(r: &mut R, line: &mut Vec<u8>, max: u64) -> std::io::Result<usize>
where
    R: tokio::io::AsyncBufRead + Unpin,
{
    line.clear();
    let n = (&mut *r).take(max + 1).read_until(b'\n', line).await?;
    if n as u64 > max {
        line.clear();
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidData,
            format!("the guest agent sent a line longer than {max} bytes"),
        ));
    }
    Ok(n)
}

/// One connection to a VM's guest agent socket; reconnects on the next call after an error.
pub struct GuestAgent {
    path: PathBuf,
    /// The QEMU serving the socket: a refused connection says whether it is still there.
    qemu_pid: u32,
    conn: Option<BufReader<UnixStream>>,
    /// Why the last connection was dropped: a refused reconnect names it.
    dropped: Option<String>,
    next_id: u64,
}

/// What `kairon-exec-output` hands over: each stream's bytes from the offset asked for, and the
/// offset just past them.
#[derive(Debug, Default)]
pub struct ExecOutput {
    pub stdout: Vec<u8>,
    pub stdout_end: u64,
    pub stderr: Vec<u8>,
    pub stderr_end: u64,
}

/// A command's output, as `guest-exec-status` reports it once the command has exited.
#[derive(Debug, Clone, Default)]
pub struct ExecStatus {
    pub exited: bool,
    pub exit_code: Option<i32>,
    pub signal: Option<i32>,
    pub stdout: Vec<u8>,
    pub stderr: Vec<u8>,
    /// The guest agent itself cut stdout or stderr (`out-truncated`, `err-truncated`).
    pub truncated: bool,
}

impl GuestAgent {
    pub fn new(path: &Path, qemu_pid: u32) -> GuestAgent {
        GuestAgent {
            path: path.to_path_buf(),
            qemu_pid,
            conn: None,
            dropped: None,
            next_id: rand::random::<u32>() as u64,
        }
    }

    /// Why a connection is refused for good, with the console's last telling lines: QEMU is
    /// gone (the guest powered off, or its kernel panicked: `panic=-1` with `-no-reboot`), or it
    /// still runs but no longer listens (it is shutting down).
    fn refused(&self, e: std::io::Error) -> GaError {
        let mut m = format!("connecting to {}: {e}", self.path.display());
        let console = self.path.with_file_name("console.log");
        let text = super::read_tail(&console, 64 << 10);
        // What ended it (the agent's panic, the kernel's), not the register dump after it.
        let telling = |l: &&str| {
            ["panicked at", "Kernel panic", "kairon-agent", "Attempted to kill", "reboot", "Power down"]
                .iter()
                .any(|k| l.contains(k))
        };
        let mut lines: Vec<&str> = text.lines().rev().filter(telling).take(6).collect();
        lines.reverse();
        let state = if crate::sandbox::pid_alive(self.qemu_pid) { "still runs" } else { "has exited" };
        m.push_str(&format!("; QEMU (pid {}) {state}; console: {}", self.qemu_pid, lines.join(" | ")));
        if let Some(why) = &self.dropped {
            m.push_str(&format!("; the previous connection was dropped: {why}"));
        }
        GaError::Unreachable(m)
    }

    async fn connect(&mut self, timeout: Duration) -> Result<()> {
        if self.conn.is_some() {
            return Ok(());
        }
        // QEMU's chardev server takes one client at a time and listens again only once it has
        // seen the previous one go: right after a dropped connection (a call that timed out) a
        // connect is refused for a moment: under TCG on a loaded host (five VMs on two cores)
        // that moment was seen to pass 3 s, so the call's own timeout bounds it, up to 15 s.
        let deadline = tokio::time::Instant::now() + timeout.min(Duration::from_secs(15));
        let stream = loop {
            match UnixStream::connect(&self.path).await {
                Ok(stream) => break stream,
                Err(e)
                    if e.kind() == std::io::ErrorKind::ConnectionRefused
                        && tokio::time::Instant::now() < deadline
                        && crate::sandbox::pid_alive(self.qemu_pid) =>
                {
                    tokio::time::sleep(Duration::from_millis(50)).await;
                }
                Err(e) => return Err(self.refused(e)),
            }
        };
        let mut conn = BufReader::new(stream);
        self.next_id += 1;
        let id = self.next_id;
        // A raw 0xFF byte first (not UTF-8): the agent drops whatever it had half-read.
        let mut bytes = vec![0xFFu8];
        bytes.extend_from_slice(
            json!({"execute": "guest-sync-delimited", "arguments": {"id": id}}).to_string().as_bytes(),
        );
        bytes.push(b'\n');
        conn.get_mut().write_all(&bytes).await.map_err(|e| GaError::Unreachable(e.to_string()))?;
        let synced = tokio::time::timeout(timeout, async {
            loop {
                // Skip to the delimiter, then read the answer line.
                let mut b = [0u8; 1];
                loop {
                    conn.read_exact(&mut b).await?;
                    if b[0] == 0xFF {
                        break;
                    }
                }
                let mut line = Vec::new();
                read_line_bounded(&mut conn, &mut line, MAX_LINE).await?;
                if let Ok(v) = serde_json::from_slice::<Value>(&line)
                    && v.get("return").and_then(Value::as_u64) == Some(id)
                {
                    return Ok::<(), std::io::Error>(());
                }
            }
        })
        .await;
        match synced {
            Ok(Ok(())) => {
                self.conn = Some(conn);
                Ok(())
            }
            Ok(Err(e)) => Err(GaError::Unreachable(format!("synchronising: {e}"))),
            Err(_) => Err(GaError::Unreachable(format!("no answer to guest-sync within {timeout:?}"))),
        }
    }

    /// Runs one command and returns its `return` value (an answer of at most [`MAX_LINE`]).
    pub async fn call(&mut self, command: &str, args: Value, timeout: Duration) -> Result<Value> {
        self.call_capped(command, args, timeout, MAX_LINE).await
    }

    /// [`Self::call`] for an answer of at most `max_line` bytes.
    async fn call_capped(&mut self, command: &str, args: Value, timeout: Duration, max_line: u64) -> Result<Value> {
        let r = self.call_inner(command, args, timeout, max_line).await;
        if let Err(GaError::Unreachable(why)) = &r
            && self.conn.take().is_some()
        {
            tracing::warn!(socket = %self.path.display(), command, %why, "dropping the guest agent connection");
            self.dropped = Some(format!("{command}: {why}"));
        }
        r
    }

    async fn call_inner(&mut self, command: &str, args: Value, timeout: Duration, max_line: u64) -> Result<Value> {
        self.connect(timeout).await?;
        let conn = self.conn.as_mut().expect("connected above");
        let mut msg = json!({"execute": command});
        if !args.is_null() {
            msg["arguments"] = args;
        }
        let mut bytes = msg.to_string().into_bytes();
        bytes.push(b'\n');
        conn.get_mut().write_all(&bytes).await.map_err(|e| GaError::Unreachable(e.to_string()))?;
        let mut line = Vec::new();
        let read = tokio::time::timeout(timeout, read_line_bounded(conn, &mut line, max_line)).await;
        match read {
            Ok(Ok(0)) => return Err(GaError::Unreachable("the guest agent closed the connection".into())),
            Ok(Ok(_)) => {}
            Ok(Err(e)) => return Err(GaError::Unreachable(e.to_string())),
            Err(_) => return Err(GaError::Unreachable(format!("no answer to {command} within {timeout:?}"))),
        }
        // A resynchronising 0xFF may lead the line (raw, or as U+00FF from an agent writing text).
        let mut answer = &line[..];
        while let Some(rest) = answer.strip_prefix(&[0xFF]).or_else(|| answer.strip_prefix("\u{ff}".as_bytes())) {
            answer = rest;
        }
        let v: Value = serde_json::from_slice(answer).map_err(|e| {
            let shown: String = String::from_utf8_lossy(answer).chars().take(200).collect();
            GaError::Unreachable(format!("bad answer {shown:?}: {e}"))
        })?;
        if let Some(e) = v.get("error") {
            return Err(GaError::Command {
                command: command.into(),
                desc: e.get("desc").and_then(Value::as_str).unwrap_or("unknown error").into(),
            });
        }
        Ok(v.get("return").cloned().unwrap_or(Value::Null))
    }

    /// Sends a command that has no answer (guest-shutdown).
    pub async fn send(&mut self, command: &str, args: Value, timeout: Duration) -> Result<()> {
        self.connect(timeout).await?;
        let conn = self.conn.as_mut().expect("connected above");
        let msg = json!({"execute": command, "arguments": args});
        let mut bytes = msg.to_string().into_bytes();
        bytes.push(b'\n');
        let r = conn.get_mut().write_all(&bytes).await.map_err(|e| GaError::Unreachable(e.to_string()));
        self.conn = None;
        r
    }

    pub async fn ping(&mut self, timeout: Duration) -> Result<()> {
        self.call("guest-ping", Value::Null, timeout).await.map(|_| ())
    }

    /// Starts a command; its guest pid. With `keep_stdin`, kairon-agent keeps the command's
    /// stdin open (after `input`) for `exec_input` (`kairon-keep-stdin`, which a stock qemu-ga
    /// refuses).
    pub async fn exec_start(
        &mut self,
        path: &str,
        args: &[String],
        env: &[String],
        input: Option<&[u8]>,
        capture: bool,
        keep_stdin: bool,
    ) -> Result<i64> {
        let mut a = json!({"path": path, "arg": args, "capture-output": capture});
        if keep_stdin {
            a["kairon-keep-stdin"] = json!(true);
        }
        if !env.is_empty() {
            a["env"] = json!(env);
        }
        if let Some(i) = input {
            a["input-data"] = json!(B64.encode(i));
        }
        let v = self.call("guest-exec", a, Duration::from_secs(30)).await?;
        v.get("pid")
            .and_then(Value::as_i64)
            .ok_or_else(|| GaError::Command { command: "guest-exec".into(), desc: format!("no pid in {v}") })
    }

    /// Starts a command on a terminal of `cols` x `rows` in the guest (kairon-agent's
    /// `kairon-tty`): its screen is its stdout, its stdin stays open for what is typed.
    pub async fn exec_start_tty(
        &mut self,
        path: &str,
        args: &[String],
        env: &[String],
        (cols, rows): (u16, u16),
    ) -> Result<i64> {
        let a = json!({"path": path, "arg": args, "env": env, "capture-output": true,
                       "kairon-tty": {"cols": cols, "rows": rows}});
        let v = self.call("guest-exec", a, Duration::from_secs(30)).await?;
        v.get("pid")
            .and_then(Value::as_i64)
            .ok_or_else(|| GaError::Command { command: "guest-exec".into(), desc: format!("no pid in {v}") })
    }

    /// Resizes a command's terminal (kairon-agent's `kairon-exec-resize`).
    pub async fn exec_resize(&mut self, pid: i64, (cols, rows): (u16, u16)) -> Result<()> {
        let args = json!({"pid": pid, "cols": cols, "rows": rows});
        self.call("kairon-exec-resize", args, Duration::from_secs(30)).await.map(|_| ())
    }

    pub async fn exec_status(&mut self, pid: i64) -> Result<ExecStatus> {
        let cap = answer_cap(2 * EXEC_STREAM_CAP);
        let v = self.call_capped("guest-exec-status", json!({"pid": pid}), Duration::from_secs(30), cap).await?;
        let data = |k: &str| v.get(k).and_then(Value::as_str).and_then(|s| B64.decode(s).ok()).unwrap_or_default();
        Ok(ExecStatus {
            exited: v.get("exited").and_then(Value::as_bool).unwrap_or(false),
            exit_code: v.get("exitcode").and_then(Value::as_i64).map(|c| c as i32),
            signal: v.get("signal").and_then(Value::as_i64).map(|c| c as i32),
            stdout: data("out-data"),
            stderr: data("err-data"),
            truncated: ["out-truncated", "err-truncated"]
                .iter()
                .any(|k| v.get(*k).and_then(Value::as_bool).unwrap_or(false)),
        })
    }

    /// A running process's output from byte offsets, through kairon-agent's own
    /// `kairon-exec-output`: `(stdout bytes, stdout end, stderr bytes, stderr end)`. A stock
    /// qemu-ga does not have it (an error naming the command): its output comes at exit.
    pub async fn exec_output(&mut self, pid: i64, out_offset: u64, err_offset: u64) -> Result<ExecOutput> {
        let args = json!({"pid": pid, "out-offset": out_offset, "err-offset": err_offset});
        let v = self.call("kairon-exec-output", args, Duration::from_secs(30)).await?;
        let data = |k: &str| v.get(k).and_then(Value::as_str).and_then(|s| B64.decode(s).ok()).unwrap_or_default();
        let end = |k: &str, from: u64| v.get(k).and_then(Value::as_u64).unwrap_or(from);
        Ok(ExecOutput {
            stdout: data("out-data"),
            stdout_end: end("out-end", out_offset),
            stderr: data("err-data"),
            stderr_end: end("err-end", err_offset),
        })
    }

    /// Writes to a command's kept-open stdin through kairon-agent's `kairon-exec-input`;
    /// `close` closes it afterwards.
    pub async fn exec_input(&mut self, pid: i64, data: &[u8], close: bool) -> Result<()> {
        let args = json!({"pid": pid, "input-data": B64.encode(data), "close": close});
        self.call("kairon-exec-input", args, Duration::from_secs(30)).await.map(|_| ())
    }

    pub async fn file_open(&mut self, path: &str, mode: &str) -> Result<i64> {
        let v = self.call("guest-file-open", json!({"path": path, "mode": mode}), Duration::from_secs(30)).await?;
        v.as_i64()
            .ok_or_else(|| GaError::Command { command: "guest-file-open".into(), desc: format!("no handle in {v}") })
    }

    pub async fn file_close(&mut self, handle: i64) -> Result<()> {
        self.call("guest-file-close", json!({"handle": handle}), Duration::from_secs(30)).await.map(|_| ())
    }

    /// One chunk; `(bytes, eof)`.
    pub async fn file_read(&mut self, handle: i64, count: usize) -> Result<(Vec<u8>, bool)> {
        let args = json!({"handle": handle, "count": count});
        let v = self.call_capped("guest-file-read", args, Duration::from_secs(60), answer_cap(count as u64)).await?;
        let buf = v.get("buf-b64").and_then(Value::as_str).and_then(|s| B64.decode(s).ok()).unwrap_or_default();
        let eof = v.get("eof").and_then(Value::as_bool).unwrap_or(buf.is_empty());
        Ok((buf, eof))
    }

    pub async fn file_write(&mut self, handle: i64, data: &[u8]) -> Result<()> {
        self.call("guest-file-write", json!({"handle": handle, "buf-b64": B64.encode(data)}), Duration::from_secs(60))
            .await
            .map(|_| ())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_guest_agent_line_is_read_up_to_its_cap_and_no_further() {
        let (mut guest, host) = tokio::io::duplex(64 << 10);
        let mut host = BufReader::new(host);
        let max = MAX_LINE;
        let writer = tokio::spawn(async move {
            let mut exact = vec![b'x'; max as usize - 1];
            exact.push(b'\n');
            guest.write_all(&exact).await.unwrap();
            // Then one byte more than the cap, and no newline: the reader stops at the cap.
            let _ = guest.write_all(&vec![b'y'; max as usize + 1]).await;
            guest
        });
        let mut line = Vec::new();
        assert_eq!(read_line_bounded(&mut host, &mut line, max).await.unwrap(), max as usize);
        let err = read_line_bounded(&mut host, &mut line, max).await.unwrap_err();
        assert!(err.to_string().contains("longer than 1048576 bytes"), "{err}");
        assert!(line.capacity() <= 2 * (max as usize + 1), "memory stays near the cap: {}", line.capacity());
        drop(host);
        writer.await.unwrap();
    }

    #[test]
    fn answers_with_data_are_capped_by_what_was_asked() {
        assert_eq!(answer_cap(3), 4 + ANSWER_OVERHEAD);
        assert!(answer_cap(2 * EXEC_STREAM_CAP) > 2 * EXEC_STREAM_CAP * 4 / 3);
    }
}
