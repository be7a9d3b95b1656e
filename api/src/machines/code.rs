//! Code contexts for the MCP `run_code` tool: the SDKs' `sb.code_context()` done on the server.
//! A context is the guest agent's `kairon-agent context LANGUAGE` (agent/src/context.rs has the
//! protocol) running as a background process with its stdin open; a run writes one request line
//! to its stdin and reads the process's kept output until the answer carrying its id.

use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use serde::Serialize;
use serde_json::{Value, json};

use kairon_runtime_api::types::ExecRequest;

use super::error::Reason;
use super::guest::{Offsets, ProcessEvent};
use super::{Error, Machines, Result};
use crate::auth::Identity;

/// What starts a context: the agent in a sandbox's tools directory, or a VM image's /sbin (the
/// SDKs start it the same way: `sdk/python/kairon/code.py`).
const CONTEXT_SCRIPT: &str = "for a in /.kairon/kairon-agent /sbin/kairon-agent; do \
    if [ -x \"$a\" ]; then exec \"$a\" context \"$@\"; fi; done; \
    printf '\\036kairon-context {\"ready\":false,\"error\":{\"name\":\"ContextError\",\"value\":\"this guest has no kairon-agent to run code in\"}}\\n'; exit 127";

/// The marker each of the context's answers starts with, on a line of its own.
const MARK: &str = "\u{1e}kairon-context ";

/// How long past the run's own timeout an answer is waited for.
const GRACE: Duration = Duration::from_secs(30);

/// A run's outcome: what the code printed, the last expression's value as text, and what it
/// raised; `context` names the context to run in next time (its state kept).
#[derive(Serialize, Debug, PartialEq)]
pub struct CodeRun {
    pub context: String,
    pub language: String,
    pub text: Option<String>,
    pub stdout: String,
    pub stderr: String,
    pub error: Option<Value>,
}

/// Reads a context's answers from its process's kept output, from where it stopped.
#[derive(Default)]
struct Answers {
    at: Offsets,
    pending: String,
}

impl Answers {
    /// The next answer whose id is `want` (any, with None). Stdout that is no answer (a
    /// subprocess writing past the capture) is put in front of the answer's stdout.
    async fn next(
        &mut self,
        machines: &Arc<Machines>,
        who: (&Identity, &str, &str),
        pid: &str,
        want: Option<&str>,
    ) -> Result<Value> {
        let (id, ns, name) = who;
        let from = Offsets { stdout: self.at.stdout, stderr: self.at.stderr };
        let mut events = Box::pin(machines.process_events(id, ns, name, pid, from).await?);
        let mut stray = String::new();
        while let Some(ev) = events.next().await {
            match ev? {
                ProcessEvent::Stdout { data, end } => {
                    self.at.stdout = end;
                    self.pending.push_str(&data);
                }
                ProcessEvent::Stderr { end, .. } => self.at.stderr = end,
                ProcessEvent::Exit { exit_code } => {
                    return Err(Error::new(
                        Reason::GuestClosed,
                        format!(
                            "code context {pid} ended (exit code {exit_code:?}): start another (leave out context)"
                        ),
                    ));
                }
                ProcessEvent::Error { reason, message } => return Err(Error::new(reason, message)),
            }
            while let Some(nl) = self.pending.find('\n') {
                let line: String = self.pending.drain(..=nl).collect();
                let line = line.trim_end_matches('\n');
                let Some(said) = line.strip_prefix(MARK) else {
                    stray.push_str(line);
                    stray.push('\n');
                    continue;
                };
                let mut said: Value = serde_json::from_str(said).map_err(|e| {
                    Error::new(Reason::GuestClosed, format!("code context {pid} answered {said:?}: {e}"))
                })?;
                if want.is_none() || said["id"].as_str() == want {
                    if !stray.is_empty() {
                        said["stdout"] = json!(stray + said["stdout"].as_str().unwrap_or_default());
                    }
                    return Ok(said);
                }
                // An earlier run's answer: what came before it was that run's.
                stray.clear();
            }
        }
        Err(Error::new(Reason::GuestClosed, format!("code context {pid}: its output ended without an answer")))
    }
}

impl Machines {
    /// Runs `code` in the code context `context` of Machine `ns/name`, or in a new one of
    /// `language`; the run is interrupted after `timeout` (see the module).
    #[allow(clippy::too_many_arguments)]
    pub async fn run_code(
        self: &Arc<Self>,
        id: &Identity,
        ns: &str,
        name: &str,
        language: &str,
        context: Option<&str>,
        code: &str,
        timeout: Duration,
    ) -> Result<CodeRun> {
        let who = (id, ns, name);
        let mut answers = Answers::default();
        let pid = match context {
            Some(pid) => pid.to_string(),
            None => {
                let command = ["/bin/sh", "-c", CONTEXT_SCRIPT, "context", language].map(String::from).to_vec();
                let req = ExecRequest { command, keep_stdin_open: true, ..Default::default() };
                let p = self.start_process(id, ns, name, || Ok(req)).await?;
                let hello =
                    tokio::time::timeout(GRACE, answers.next(self, who, &p.id, None)).await.map_err(|_| {
                        Error::new(Reason::Timeout, format!("the {language} context did not start within 30 s"))
                    })??;
                if hello["ready"] != true {
                    let why = hello["error"]["value"].as_str().unwrap_or("it did not start").to_string();
                    return Err(Error::bad_request(format!("a {language} code context: {why}")));
                }
                p.id.to_string()
            }
        };
        let ask = uuid::Uuid::new_v4().simple().to_string();
        let request = json!({"id": ask, "code": code, "timeoutSeconds": timeout.as_secs()});
        self.write_stdin(id, ns, name, &pid, format!("{request}\n").into_bytes(), false).await.map_err(|e| {
            if matches!(e.reason, Reason::StdinClosed) {
                Error::new(e.reason, format!("code context {pid} has ended: start another (leave out context)"))
            } else {
                e
            }
        })?;
        let said = tokio::time::timeout(timeout + GRACE, answers.next(self, who, &pid, Some(&ask)))
            .await
            .map_err(|_| Error::new(Reason::Timeout, format!("code context {pid} gave no answer in time")))??;
        let text = |k: &str| said[k].as_str().map(str::to_string);
        Ok(CodeRun {
            context: pid,
            language: language.to_string(),
            text: text("text"),
            stdout: text("stdout").unwrap_or_default(),
            stderr: text("stderr").unwrap_or_default(),
            error: Some(said["error"].clone()).filter(|e| !e.is_null()),
        })
    }
}
