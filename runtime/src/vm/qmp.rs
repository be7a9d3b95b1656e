//! QMP, QEMU's machine protocol: JSON lines over a unix socket. One command at a time; events
//! that arrive in between are skipped (the runtime asks for state rather than following it).
//!
//! [`Qmp::send_fd`] hands QEMU an open file (`getfd` with the descriptor as `SCM_RIGHTS` on the
//! same socket): QEMU runs unprivileged and under seccomp (no `exec:`), so the runtime opens the
//! files QEMU needs after start-up, such as migration state, and passes them.

use std::mem::MaybeUninit;
use std::os::fd::BorrowedFd;
use std::path::Path;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::{AsyncWriteExt, BufReader};
use tokio::net::UnixStream;
use tokio::net::unix::{OwnedReadHalf, OwnedWriteHalf};

pub struct Qmp {
    rx: BufReader<OwnedReadHalf>,
    tx: OwnedWriteHalf,
}

#[derive(Debug, thiserror::Error)]
pub enum QmpError {
    #[error("QMP: {0}")]
    Io(#[from] std::io::Error),
    #[error("QMP {command}: {desc}")]
    Command { command: String, desc: String },
    #[error("QMP: {0}")]
    Protocol(String),
}

const ANSWER_TIMEOUT: Duration = Duration::from_secs(60);

impl Qmp {
    /// Connects (retrying while QEMU creates the socket, up to `wait`) and leaves
    /// capabilities negotiation mode.
    pub async fn connect(path: &Path, wait: Duration) -> Result<Qmp, QmpError> {
        let deadline = tokio::time::Instant::now() + wait;
        let stream = loop {
            match UnixStream::connect(path).await {
                Ok(s) => break s,
                Err(e) if tokio::time::Instant::now() >= deadline => return Err(e.into()),
                Err(_) => tokio::time::sleep(Duration::from_millis(20)).await,
            }
        };
        let (rx, tx) = stream.into_split();
        let mut q = Qmp { rx: BufReader::new(rx), tx };
        // An event can come first: QEMU may emit one (a RESUME, seen in CI) to a client that
        // just connected before its greeting, when a previous client left a moment before.
        let greeting = loop {
            let line = q.read().await?;
            if line.get("event").is_none() {
                break line;
            }
        };
        if greeting.get("QMP").is_none() {
            return Err(QmpError::Protocol(format!("unexpected greeting {greeting}")));
        }
        q.execute("qmp_capabilities", json!({})).await?;
        Ok(q)
    }

    async fn read(&mut self) -> Result<Value, QmpError> {
        // QEMU runs the guest: its answers are bounded like the guest agent's.
        let mut line = Vec::new();
        let n = tokio::time::timeout(
            ANSWER_TIMEOUT,
            super::ga::read_line_bounded(&mut self.rx, &mut line, super::ga::MAX_LINE),
        )
        .await
        .map_err(|_| QmpError::Protocol("QEMU did not answer within 60 s".into()))??;
        if n == 0 {
            return Err(QmpError::Protocol("QEMU closed the QMP socket".into()));
        }
        serde_json::from_slice(&line)
            .map_err(|e| QmpError::Protocol(format!("bad JSON {:?}: {e}", String::from_utf8_lossy(&line))))
    }

    fn message(command: &str, arguments: Value) -> Vec<u8> {
        let mut msg = json!({"execute": command});
        if arguments.as_object().is_some_and(|o| !o.is_empty()) {
            msg["arguments"] = arguments;
        }
        let mut bytes = msg.to_string().into_bytes();
        bytes.push(b'\n');
        bytes
    }

    pub async fn execute(&mut self, command: &str, arguments: Value) -> Result<Value, QmpError> {
        let bytes = Self::message(command, arguments);
        self.tx.write_all(&bytes).await?;
        self.answer(command).await
    }

    /// Passes `fd` to QEMU under `name` (QMP `getfd`): the descriptor travels as `SCM_RIGHTS`
    /// with the command's bytes. Commands then name it, e.g. `migrate` with `fd:<name>`.
    pub async fn send_fd(&mut self, name: &str, fd: BorrowedFd<'_>) -> Result<(), QmpError> {
        let bytes = Self::message("getfd", json!({"fdname": name}));
        let sock: &tokio::net::UnixStream = self.tx.as_ref();
        let sent = loop {
            sock.writable().await?;
            let r = sock.try_io(tokio::io::Interest::WRITABLE, || {
                let fds = [fd];
                let mut space = [MaybeUninit::uninit(); rustix::cmsg_space!(ScmRights(1))];
                let mut control = rustix::net::SendAncillaryBuffer::new(&mut space);
                control.push(rustix::net::SendAncillaryMessage::ScmRights(&fds));
                rustix::net::sendmsg(
                    sock,
                    &[std::io::IoSlice::new(&bytes)],
                    &mut control,
                    rustix::net::SendFlags::NOSIGNAL,
                )
                .map_err(std::io::Error::from)
            });
            match r {
                Ok(n) => break n,
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => continue,
                Err(e) => return Err(e.into()),
            }
        };
        // The descriptor went with the first byte; the rest of a short write follows plainly.
        if sent < bytes.len() {
            self.tx.write_all(&bytes[sent..]).await?;
        }
        self.answer("getfd").await.map(|_| ())
    }

    async fn answer(&mut self, command: &str) -> Result<Value, QmpError> {
        loop {
            let v = self.read().await?;
            if let Some(r) = v.get("return") {
                return Ok(r.clone());
            }
            if let Some(e) = v.get("error") {
                return Err(QmpError::Command {
                    command: command.into(),
                    desc: e.get("desc").and_then(Value::as_str).unwrap_or("unknown error").into(),
                });
            }
            // An event: not the answer.
        }
    }

    /// `query-status`'s `status` (running, paused, postmigrate, inmigrate, shutdown, …).
    pub async fn status(&mut self) -> Result<String, QmpError> {
        let v = self.execute("query-status", json!({})).await?;
        Ok(v.get("status").and_then(Value::as_str).unwrap_or("unknown").to_string())
    }

    /// Waits for the current migration (outgoing or incoming) to finish.
    pub async fn wait_migration(&mut self, timeout: Duration) -> Result<(), QmpError> {
        let deadline = tokio::time::Instant::now() + timeout;
        let mut pause = Duration::from_millis(2);
        loop {
            let v = self.execute("query-migrate", json!({})).await?;
            match v.get("status").and_then(Value::as_str) {
                Some("completed") => return Ok(()),
                Some("failed") | Some("cancelled") => {
                    return Err(QmpError::Command {
                        command: "migrate".into(),
                        desc: v.get("error-desc").and_then(Value::as_str).unwrap_or("the migration failed").into(),
                    });
                }
                // An incoming migration that is done no longer reports a status.
                None if self.status().await? != "inmigrate" => return Ok(()),
                _ => {}
            }
            if tokio::time::Instant::now() >= deadline {
                return Err(QmpError::Protocol(format!("the migration did not finish within {timeout:?}")));
            }
            tokio::time::sleep(pause).await;
            pause = (pause * 2).min(Duration::from_millis(50));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use tokio::io::AsyncReadExt;

    /// QEMU's side of a connection whose first line is an event, not the greeting.
    #[tokio::test]
    async fn an_event_before_the_greeting_is_skipped() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("qmp.sock");
        let listener = tokio::net::UnixListener::bind(&path).unwrap();
        let qemu = tokio::spawn(async move {
            let (mut s, _) = listener.accept().await.unwrap();
            s.write_all(b"{\"event\": \"RESUME\", \"timestamp\": {\"seconds\": 1, \"microseconds\": 2}}\n")
                .await
                .unwrap();
            s.write_all(b"{\"QMP\": {\"version\": {}, \"capabilities\": []}}\n").await.unwrap();
            let mut asked = vec![0u8; 64];
            let n = s.read(&mut asked).await.unwrap();
            assert!(String::from_utf8_lossy(&asked[..n]).contains("qmp_capabilities"));
            s.write_all(b"{\"return\": {}}\n").await.unwrap();
        });
        Qmp::connect(&path, Duration::from_secs(5)).await.unwrap();
        qemu.await.unwrap();
    }
}
