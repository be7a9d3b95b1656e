//! `kairon-exec`: a command run to completion in one request, answered with its exit and its
//! capped output. One round trip per exec (no `guest-exec-status` polling), which is what makes
//! an exec through the agent cost a fraction of a millisecond.
//!
//! Arguments: `path`, `arg` (array), `env` (`K=V` strings added to the agent's own environment,
//! which is the sandbox's), `cwd`, `user` (`uid[:gid]` or names from the guest's `/etc/passwd`
//! and `/etc/group`), `input-data` (base64, written to stdin then closed), `timeout-ms`, and
//! `output-cap` (bytes kept per stream; past it the pipe is closed, as under `| head -c`).
//! Answer: `exitcode` or `signal`, `out-data`/`err-data` (base64), `out-truncated`,
//! `err-truncated`, `timed-out` (then the output so far; the command's process group is killed).

use std::io::Write;
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use base64::Engine;
use base64::engine::general_purpose::STANDARD as B64;
use serde_json::{Value, json};

use crate::procs::{self, Capture};

/// The output kept per stream when the host names no cap (the runtime's default).
const DEFAULT_CAP: usize = 16 * 1024 * 1024;
/// After a kill, how long the killed command gets to end and close its pipes.
const AFTER_KILL: Duration = Duration::from_secs(2);

pub fn run(args: &Value) -> Result<Value, String> {
    let path = args.get("path").and_then(Value::as_str).ok_or("Parameter 'path' is missing")?;
    if path.is_empty() {
        return Err("Parameter 'path' is empty: name the program to run".into());
    }
    let mut cmd = Command::new(path);
    if let Some(a) = args.get("arg").and_then(Value::as_array) {
        cmd.args(a.iter().filter_map(Value::as_str));
    }
    for kv in args.get("env").and_then(Value::as_array).into_iter().flatten().filter_map(Value::as_str) {
        if let Some((k, v)) = kv.split_once('=') {
            cmd.env(k, v);
        }
    }
    if let Some(cwd) = args.get("cwd").and_then(Value::as_str) {
        cmd.current_dir(cwd);
    }
    if let Some(user) = args.get("user").and_then(Value::as_str) {
        let (uid, gid) = resolve_user(user)?;
        cmd.uid(uid).gid(gid);
    }
    let input = match args.get("input-data").and_then(Value::as_str) {
        Some(b) => Some(B64.decode(b).map_err(|e| format!("input-data is not base64: {e}"))?),
        None => None,
    };
    let cap = args.get("output-cap").and_then(Value::as_u64).map_or(DEFAULT_CAP, |c| c as usize);
    let timeout = args.get("timeout-ms").and_then(Value::as_u64).map(Duration::from_millis);
    // Its own process group, so a timeout ends whatever the command started.
    cmd.process_group(0).stdout(Stdio::piped()).stderr(Stdio::piped());
    cmd.stdin(if input.is_some() { Stdio::piped() } else { Stdio::null() });
    let mut child = match procs::spawn(&mut cmd) {
        Ok(c) => c,
        // What a shell answers: 127 for a program that is not there, 126 for one that cannot run.
        Err(e) => {
            let code = if e.kind() == std::io::ErrorKind::NotFound { 127 } else { 126 };
            let at = args.get("cwd").and_then(Value::as_str).map(|c| format!(" (in {c})")).unwrap_or_default();
            return Ok(json!({
                "exitcode": code,
                "out-data": "",
                "err-data": B64.encode(format!("{path}: {e}{at}\n")),
            }));
        }
    };
    let pid = child.id();
    if let (Some(data), Some(mut stdin)) = (input, child.stdin.take()) {
        // A command that exits without reading its input is not an error.
        std::thread::spawn(move || {
            let _ = stdin.write_all(&data);
        });
    }
    let (Some(stdout), Some(stderr)) = (child.stdout.take(), child.stderr.take()) else {
        return Err("the command's output pipes are missing".into());
    };
    let out = Capture::start_closing(stdout, cap);
    let err = Capture::start_closing(stderr, cap);
    // Finished means exited and its output complete (a background child holding the pipes
    // keeps it running, as with `runc exec`).
    let deadline = timeout.map(|t| Instant::now() + t);
    let exit = match deadline {
        None => {
            let exit = procs::wait(pid, None);
            out.wait_until(far_future());
            err.wait_until(far_future());
            exit
        }
        Some(d) => procs::wait(pid, Some(d.saturating_duration_since(Instant::now())))
            .filter(|_| out.wait_until(d) && err.wait_until(d)),
    };
    let (exit, timed_out) = match exit {
        Some(e) => (Some(e), false),
        None => {
            let _ = rustix::process::kill_process_group(
                rustix::process::Pid::from_raw(pid as i32).ok_or("the command has no pid")?,
                rustix::process::Signal::KILL,
            );
            let exit = procs::wait(pid, Some(AFTER_KILL));
            let settle = Instant::now() + AFTER_KILL;
            out.wait_until(settle);
            err.wait_until(settle);
            (exit, true)
        }
    };
    let ((out_data, out_cut), (err_data, err_cut)) = (out.so_far(), err.so_far());
    let mut answer = json!({
        "out-data": B64.encode(out_data),
        "err-data": B64.encode(err_data),
        "out-truncated": out_cut,
        "err-truncated": err_cut,
        "timed-out": timed_out,
    });
    if let Some(e) = exit.filter(|_| !timed_out) {
        if let Some(code) = e.code {
            answer["exitcode"] = json!(code);
        }
        if let Some(sig) = e.signal {
            answer["signal"] = json!(sig);
        }
    }
    Ok(answer)
}

fn far_future() -> Instant {
    Instant::now() + Duration::from_secs(100 * 365 * 24 * 3600)
}

/// `uid[:gid]`, each a number or a name from the guest's own account files (what `runc exec
/// --user` accepts). A user without a group runs with the user's primary group.
fn resolve_user(spec: &str) -> Result<(u32, u32), String> {
    let (user, group) = match spec.split_once(':') {
        Some((u, g)) => (u, Some(g)),
        None => (spec, None),
    };
    let passwd = std::fs::read_to_string("/etc/passwd").unwrap_or_default();
    let (uid, primary) = match user.parse::<u32>() {
        // A number needs no entry; its entry, if any, gives the primary group.
        Ok(uid) => (uid, entry_number(&passwd, 2, &uid.to_string(), 3).unwrap_or(uid)),
        Err(_) => {
            let uid = entry_number(&passwd, 0, user, 2)
                .ok_or_else(|| format!("no user named {user:?} with a numeric uid in the sandbox's /etc/passwd"))?;
            (uid, entry_number(&passwd, 0, user, 3).unwrap_or(0))
        }
    };
    let gid = match group {
        None => primary,
        Some(g) => match g.parse::<u32>() {
            Ok(gid) => gid,
            Err(_) => entry_number(&std::fs::read_to_string("/etc/group").unwrap_or_default(), 0, g, 2)
                .ok_or_else(|| format!("no group named {g:?} in the sandbox's /etc/group"))?,
        },
    };
    Ok((uid, gid))
}

/// Field `want`, as a number, of the first line of a colon-separated database (passwd, group)
/// whose field `key` is `value`.
fn entry_number(db: &str, key: usize, value: &str, want: usize) -> Option<u32> {
    let fields = db.lines().map(|l| l.split(':').collect::<Vec<_>>()).find(|f| f.get(key) == Some(&value))?;
    fields.get(want)?.parse().ok()
}

#[cfg(test)]
mod tests {
    use super::entry_number;

    const PASSWD: &str =
        "root:x:0:0:root:/root:/bin/sh\nagent:x:1000:100::/home/agent:/bin/sh\nodd:x:nope:7::/:/bin/sh\n";

    #[test]
    fn database_lookups_match_the_whole_field() {
        assert_eq!(entry_number(PASSWD, 0, "agent", 2), Some(1000));
        assert_eq!(entry_number(PASSWD, 2, "1000", 3), Some(100));
        assert_eq!(entry_number(PASSWD, 0, "age", 2), None, "a prefix is not a name");
        assert_eq!(entry_number(PASSWD, 0, "odd", 2), None, "a uid that is not a number");
        assert_eq!(entry_number(PASSWD, 0, "odd", 3), Some(7));
        assert_eq!(entry_number("", 0, "root", 2), None);
    }
}
