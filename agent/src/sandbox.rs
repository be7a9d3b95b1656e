//! Inside a runc sandbox (`kairon-agent sandbox`): the agent is the container's init, PID 1 of
//! its pid namespace, and serves the protocol on the listening Unix socket the runtime handed it
//! as standard input (inetd style). The socket's path is in a root-only host directory that is
//! never mounted into the container, so nothing in the sandbox can reach another sandbox's agent,
//! and the runtime knows which sandbox answers by which socket it dialled.
//!
//! Each connection is served on its own thread, one command per line and one answer per
//! command: `kairon-exec` runs on that thread (execs do not wait for each other), every other
//! command goes to the one shared [`Agent`].

use std::io::{BufRead, BufReader, Read, Write};
use std::os::fd::AsFd;
use std::os::unix::net::{UnixListener, UnixStream};
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};

use crate::ga::Agent;
use crate::procs;

/// The longest command line accepted (an exec's stdin travels in it, base64).
const MAX_LINE: u64 = 96 * 1024 * 1024;

pub fn serve() -> ! {
    procs::start_reaping();
    let listener = match take_listener() {
        Ok(l) => l,
        Err(e) => {
            warn!("kairon-agent: standard input is not the listening socket the runtime hands over: {e}");
            crate::init::idle();
        }
    };
    let agent = Arc::new(Mutex::new(Agent::default()));
    loop {
        match listener.accept() {
            Ok((conn, _)) => {
                let agent = agent.clone();
                std::thread::spawn(move || serve_connection(conn, &agent));
            }
            Err(e) => {
                warn!("kairon-agent: accepting a connection: {e}");
                std::thread::sleep(std::time::Duration::from_millis(100));
            }
        }
    }
}

/// The listener from fd 0, moved to a close-on-exec descriptor so no command ever inherits it;
/// fd 0 becomes /dev/null.
fn take_listener() -> std::io::Result<UnixListener> {
    let stdin = std::io::stdin();
    if !rustix::net::sockopt::socket_acceptconn(stdin.as_fd())? {
        return Err(std::io::Error::other("fd 0 is a socket that does not listen"));
    }
    let fd = rustix::io::fcntl_dupfd_cloexec(stdin.as_fd(), 3)?;
    let null = std::fs::File::open("/dev/null")?;
    rustix::stdio::dup2_stdin(&null)?;
    Ok(UnixListener::from(fd))
}

fn serve_connection(conn: UnixStream, agent: &Mutex<Agent>) {
    let Ok(mut out) = conn.try_clone() else { return };
    let mut reader = BufReader::new(conn);
    loop {
        let mut line = Vec::new();
        match (&mut reader).take(MAX_LINE + 1).read_until(b'\n', &mut line) {
            Ok(0) | Err(_) => return,
            Ok(_) => {}
        }
        if line.len() as u64 > MAX_LINE {
            let _ = out.write_all(&error_line(&format!("the command is longer than {MAX_LINE} bytes")));
            return;
        }
        if line.iter().all(u8::is_ascii_whitespace) {
            continue;
        }
        let answer = match serde_json::from_slice::<Value>(&line) {
            Ok(req) if req.get("execute").and_then(Value::as_str) == Some("kairon-exec") => {
                let body = match crate::exec::run(req.get("arguments").unwrap_or(&json!({}))) {
                    Ok(v) => json!({"return": v}),
                    Err(desc) => json!({"error": {"class": "GenericError", "desc": desc}}),
                };
                let mut bytes = body.to_string().into_bytes();
                bytes.push(b'\n');
                Some(bytes)
            }
            _ => agent.lock().unwrap_or_else(std::sync::PoisonError::into_inner).handle(&line),
        };
        if let Some(a) = answer
            && out.write_all(&a).is_err()
        {
            return;
        }
    }
}

fn error_line(desc: &str) -> Vec<u8> {
    let mut v = json!({"error": {"class": "GenericError", "desc": desc}}).to_string().into_bytes();
    v.push(b'\n');
    v
}
