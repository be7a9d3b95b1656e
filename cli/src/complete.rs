//! Shell completion that knows the server's names: `kaironctl completion bash` prints a script
//! that asks kaironctl itself (`COMPLETE=bash kaironctl -- WORDS...`) for each completion, and
//! the Machine and pool arguments complete to the names in the namespace (`-n`, else the
//! kubeconfig's), listed from the server with a short timeout; anything that fails completes
//! to nothing rather than slowing the shell.

use std::ffi::OsStr;
use std::time::Duration;

use clap_complete::engine::{ArgValueCompleter, CompletionCandidate};

/// The longest a completion waits for the server.
const TIMEOUT: Duration = Duration::from_secs(3);

/// Completes a Machine's name.
pub fn machines() -> ArgValueCompleter {
    ArgValueCompleter::new(|current: &OsStr| names("machines", current))
}

/// Completes a MachinePool's name.
pub fn pools() -> ArgValueCompleter {
    ArgValueCompleter::new(|current: &OsStr| names("machinepools", current))
}

/// Prints the registration script for `shell`: what `COMPLETE=<shell> kaironctl` prints.
pub fn register(shell: clap_complete::Shell, out: &mut dyn std::io::Write) -> anyhow::Result<()> {
    let name = shell.to_string();
    let shells = clap_complete::env::Shells::builtins();
    let completer = shells.completer(&name).ok_or_else(|| anyhow::anyhow!("no dynamic completion for {name}"))?;
    completer.write_registration("COMPLETE", "kaironctl", "kaironctl", "kaironctl", out)?;
    Ok(())
}

/// The names of `plural` (`machines`, `machinepools`) in the namespace that start with `current`.
fn names(plural: &str, current: &OsStr) -> Vec<CompletionCandidate> {
    let prefix = current.to_string_lossy();
    let listed = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .ok()
        .and_then(|rt| rt.block_on(async { tokio::time::timeout(TIMEOUT, list(plural)).await.ok()?.ok() }))
        .unwrap_or_default();
    listed.into_iter().filter(|n| n.starts_with(prefix.as_ref())).map(CompletionCandidate::new).collect()
}

/// A flag's value on the command line being completed (`-n NS`, `--namespace NS`,
/// `--namespace=NS`): the shell hands the words over, not parsed.
fn flag_in(words: &[String], short: Option<&str>, long: &str) -> Option<String> {
    let mut it = words.iter();
    while let Some(w) = it.next() {
        if short == Some(w.as_str()) || w == long {
            return it.next().cloned();
        }
        if let Some(v) = w.strip_prefix(long).and_then(|r| r.strip_prefix('=')) {
            return Some(v.to_string());
        }
    }
    None
}

async fn list(plural: &str) -> anyhow::Result<Vec<String>> {
    let words: Vec<String> = std::env::args().collect();
    let kubeconfig = flag_in(&words, None, "--kubeconfig").or_else(|| std::env::var("KAIRONCTL_KUBECONFIG").ok());
    let t = crate::config::load(crate::config::Flags {
        kubeconfig: kubeconfig.map(Into::into),
        server: flag_in(&words, None, "--server"),
        token: flag_in(&words, None, "--token"),
        ca_file: flag_in(&words, None, "--ca-file").map(Into::into),
        namespace: flag_in(&words, Some("-n"), "--namespace"),
    })?;
    let mut b = reqwest::Client::builder().timeout(TIMEOUT);
    if let Some(pem) = &t.ca_pem {
        b = b.tls_certs_merge(reqwest::Certificate::from_pem_bundle(pem)?);
    }
    let url = format!("{}/api/v1/{plural}/{}", t.server, crate::stream::encode(&t.namespace));
    let mut req = b.build()?.get(url);
    if let Some(tok) = &t.token {
        req = req.bearer_auth(tok);
    }
    let v: serde_json::Value = req.send().await?.error_for_status()?.json().await?;
    let items = v.get("items").and_then(|i| i.as_array()).or_else(|| v.as_array()).cloned().unwrap_or_default();
    Ok(items.iter().filter_map(|o| o["metadata"]["name"].as_str().map(String::from)).collect())
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_namespace_comes_from_the_words_being_completed() {
        let words = |s: &str| s.split(' ').map(String::from).collect::<Vec<_>>();
        let ns = |w: &str| super::flag_in(&words(w), Some("-n"), "--namespace");
        assert_eq!(ns("kaironctl -n team-a exec ag"), Some("team-a".into()));
        assert_eq!(ns("kaironctl exec --namespace=b ag"), Some("b".into()));
        assert_eq!(ns("kaironctl exec --namespaced ag"), None);
        assert_eq!(ns("kaironctl exec ag"), None);
    }
}
