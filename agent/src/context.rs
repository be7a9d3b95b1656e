//! `kairon-agent context LANGUAGE`: a code context — one long-lived interpreter whose state
//! outlives each run (E2B's `run_code`, without Jupyter in the image). The SDKs start it as a
//! background process with its stdin open, so it lasts as long as the sandbox (a pause freezes it
//! with everything else) and any client can re-attach to it.
//!
//! The protocol, the same for every language: a request is one JSON line on stdin,
//! `{"id":…,"code":"…","timeoutSeconds":N}`; each answer is one line on stdout starting with the
//! record separator and `kairon-context `, then JSON: `{"id","text","error","stdout","stderr"}`
//! (`text` the last expression's value, `error` `{name, value, traceback}`). First comes
//! `{"ready":true,"language","version"}`. Anything else on stdout (a subprocess writing past the
//! capture) belongs to the run in progress.

use std::os::unix::process::CommandExt;
use std::process::Command;

/// The drivers, run by the guest's own interpreter (see each file).
const PYTHON: &str = include_str!("context/driver.py");
const JAVASCRIPT: &str = include_str!("context/driver.js");

const USAGE: &str = "usage: kairon-agent context python|javascript";

/// Replaces this process with the language's interpreter running its driver; returns the exit
/// code only when that cannot be done (the reason is said on stdout, in the protocol).
pub fn run(args: &[String]) -> i32 {
    let (programs, flag, driver): (&[&str], &str, &str) = match args {
        [lang] if lang == "python" => (&["python3", "python"], "-c", PYTHON),
        [lang] if lang == "javascript" || lang == "js" || lang == "node" => (&["node", "nodejs"], "-e", JAVASCRIPT),
        [lang] => return fail(&format!("no code context for {lang:?}: use python or javascript")),
        _ => return fail(USAGE),
    };
    for program in programs {
        let Some(path) = find(program) else { continue };
        let mut cmd = Command::new(&path);
        if *program == "python3" || *program == "python" {
            // Unbuffered, so every answer leaves at once.
            cmd.arg("-u");
        }
        let err = cmd.args([flag, driver]).exec();
        return fail(&format!("starting {}: {err}", path.display()));
    }
    fail(&format!("this guest has no {} to run {} in: use a template that has it", programs[0], args[0]))
}

/// `program` on `$PATH` (or the usual directories when there is none).
fn find(program: &str) -> Option<std::path::PathBuf> {
    let path = std::env::var("PATH").unwrap_or_else(|_| "/usr/local/bin:/usr/bin:/bin".into());
    std::env::split_paths(&path).map(|d| d.join(program)).find(|p| {
        use std::os::unix::fs::PermissionsExt;
        p.metadata().is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    })
}

fn fail(message: &str) -> i32 {
    let error =
        serde_json::json!({"ready": false, "error": {"name": "ContextError", "value": message, "traceback": ""}});
    println!("\x1ekairon-context {error}");
    127
}
