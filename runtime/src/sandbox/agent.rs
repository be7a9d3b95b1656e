//! The host side of the agent inside each sandbox (`kairon-agent sandbox`, the container's init):
//! the listening socket the runtime creates and hands over, and the one-round-trip exec through
//! it. The socket lives in the sandbox's root-only instance directory, which is never mounted
//! into any container, so the sandbox that answers is the one whose socket was dialled; after a
//! runtime restart the same path reaches the same agent.
//!
//! Everything the agent says is guest input: an answer is read up to a cap derived from the
//! output cap asked for, and its fields are checked, never trusted to be well formed.

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use base64::Engine;
use base64::engine::general_purpose::STANDARD as B64;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};

use super::SandboxError;
use crate::api::{ExecRequest, ExecResult};

/// The socket's name in the sandbox's instance directory.
pub const SOCKET: &str = "agent.sock";
/// The agent binary's name in the tools directory (`/.kairon` in the sandbox).
pub const BINARY: &str = "kairon-agent";
/// Room for the JSON around the two base64 streams of an answer.
const ANSWER_OVERHEAD: u64 = 64 * 1024;
/// Beyond the command's own timeout, how long the agent may take to answer (it kills the
/// command at the timeout and then reports).
const ANSWER_GRACE: Duration = Duration::from_secs(10);

/// Binds a fresh listening socket at `path` (a stale one from an earlier start is replaced),
/// readable by root alone.
pub fn listen(path: &Path) -> std::io::Result<std::os::unix::net::UnixListener> {
    match std::fs::remove_file(path) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => return Err(e),
        _ => {}
    }
    let listener = std::os::unix::net::UnixListener::bind(path)?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))?;
    Ok(listener)
}

pub fn socket_path(instance_dir: &Path) -> PathBuf {
    instance_dir.join(SOCKET)
}

fn agent_err(what: impl std::fmt::Display) -> SandboxError {
    SandboxError::Setup(format!("the sandbox's agent {what}"))
}

/// Runs `req` to completion through the agent at `socket`, each output stream capped at
/// `max_output` bytes (past it the command's pipe is closed, as with `runc exec`).
pub async fn exec(socket: &Path, req: &ExecRequest, max_output: u64) -> Result<ExecResult, SandboxError> {
    let (path, args) = req.command.split_first().ok_or_else(|| SandboxError::Setup("exec needs a command".into()))?;
    let mut arguments = json!({
        "path": path,
        "arg": args,
        "env": req.env.iter().map(|(k, v)| format!("{k}={v}")).collect::<Vec<_>>(),
        "output-cap": max_output,
    });
    if let Some(cwd) = &req.cwd {
        arguments["cwd"] = json!(cwd);
    }
    if let Some(user) = &req.user {
        arguments["user"] = json!(user);
    }
    if let Some(input) = &req.stdin {
        arguments["input-data"] = json!(B64.encode(input));
    }
    if let Some(t) = req.timeout_seconds {
        arguments["timeout-ms"] = json!(t.saturating_mul(1000));
    }
    let mut line = json!({"execute": "kairon-exec", "arguments": arguments}).to_string().into_bytes();
    line.push(b'\n');

    let mut conn = tokio::net::UnixStream::connect(socket).await.map_err(|e| {
        agent_err(format!(
            "does not answer at {} ({e}): the sandbox's init has ended; restart the Machine",
            socket.display()
        ))
    })?;
    let talk = async {
        conn.write_all(&line).await?;
        // Two base64 streams of at most `max_output` bytes each, and the JSON around them.
        let cap = max_output.saturating_mul(2).saturating_mul(4) / 3 + ANSWER_OVERHEAD;
        let mut answer = Vec::new();
        BufReader::new(&mut conn).take(cap + 1).read_until(b'\n', &mut answer).await?;
        Ok::<_, std::io::Error>((answer, cap))
    };
    let limit = req.timeout_seconds.map(|t| Duration::from_secs(t) + ANSWER_GRACE);
    let (answer, cap) = match limit {
        Some(l) => {
            tokio::time::timeout(l, talk).await.map_err(|_| agent_err(format!("did not answer within {l:?}")))?
        }
        None => talk.await,
    }
    .map_err(|e| agent_err(format!("connection failed: {e}")))?;
    if answer.len() as u64 > cap {
        return Err(agent_err(format!("sent an answer longer than {cap} bytes")));
    }
    parse_answer(&answer, max_output, req.timeout_seconds)
}

/// The agent's answer as an [`ExecResult`]; anything malformed is an error, not a guess.
fn parse_answer(answer: &[u8], max_output: u64, timeout: Option<u64>) -> Result<ExecResult, SandboxError> {
    let v: Value =
        serde_json::from_slice(answer).map_err(|e| agent_err(format!("sent an answer that is not JSON: {e}")))?;
    if let Some(desc) = v.pointer("/error/desc") {
        let why = desc.as_str().unwrap_or("(no reason given)");
        return Err(SandboxError::Refused(format!("the sandbox's agent refused the exec: {why}")));
    }
    let r = v.get("return").filter(|r| r.is_object()).ok_or_else(|| agent_err("sent an answer without a result"))?;
    let stream = |key: &str| -> Result<String, SandboxError> {
        let b64 = r.get(key).and_then(Value::as_str).unwrap_or_default();
        let mut bytes = B64.decode(b64).map_err(|e| agent_err(format!("sent {key} that is not base64: {e}")))?;
        bytes.truncate(max_output as usize);
        Ok(String::from_utf8_lossy(&bytes).into_owned())
    };
    let flag = |key: &str| r.get(key).and_then(Value::as_bool).unwrap_or(false);
    let timed_out = flag("timed-out");
    let mut stderr = stream("err-data")?;
    if timed_out {
        if !stderr.is_empty() && !stderr.ends_with('\n') {
            stderr.push('\n');
        }
        stderr.push_str(&format!("timed out after {} s", timeout.unwrap_or_default()));
    }
    // A signal is reported as a shell does: 128 + its number.
    let code = |key: &str| r.get(key).and_then(Value::as_i64).and_then(|c| i32::try_from(c).ok());
    let exit_code = match (code("exitcode"), code("signal")) {
        _ if timed_out => -1,
        (Some(c), _) => c,
        (None, Some(s)) if (1..=64).contains(&s) => 128 + s,
        _ => -1,
    };
    Ok(ExecResult {
        exit_code,
        stdout: stream("out-data")?,
        stderr,
        timed_out,
        truncated: flag("out-truncated") || flag("err-truncated"),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn answers_are_checked_not_trusted() {
        let ok = br#"{"return":{"exitcode":3,"out-data":"aGk=","err-data":"","out-truncated":false}}"#;
        let r = parse_answer(ok, 1024, None).unwrap();
        assert_eq!((r.exit_code, r.stdout.as_str(), r.truncated), (3, "hi", false));
        // More output than was asked for is cut to the cap.
        let long = format!(r#"{{"return":{{"exitcode":0,"out-data":"{}"}}}}"#, B64.encode([b'y'; 100]));
        assert_eq!(parse_answer(long.as_bytes(), 10, None).unwrap().stdout.len(), 10);
        let killed = br#"{"return":{"signal":9,"out-data":"","err-data":""}}"#;
        assert_eq!(parse_answer(killed, 1024, None).unwrap().exit_code, 137);
        let timed = br#"{"return":{"timed-out":true,"out-data":"cGFydA==","err-data":""}}"#;
        let r = parse_answer(timed, 1024, Some(2)).unwrap();
        assert_eq!(
            (r.exit_code, r.timed_out, r.stdout.as_str(), r.stderr.as_str()),
            (-1, true, "part", "timed out after 2 s")
        );
        for bad in
            [&b"not json"[..], br#"{"return":{"out-data":"***"}}"#, br#"{"return":7}"#, br#"{"error":{"desc":"no"}}"#]
        {
            assert!(parse_answer(bad, 1024, None).is_err(), "{}", String::from_utf8_lossy(bad));
        }
    }
}
