//! Leak checks at the end of a scenario, as assertions: what a run left behind on the host (runc
//! instances, mounts, loop devices, cgroups of its node) and in the database (resource rows).
//!
//! Other tests may run sandboxes on the same host at the same time, so every check is scoped to
//! this run's node: its runtime state dir (runc root, disks, and the overlay roots under
//! `/run/kairon/sandboxes`, whose mount options name that state dir) and its cgroup parent
//! `kairon-<node>`.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};

/// One node runtime's footprint on the host.
pub struct NodeFootprint {
    /// The runtime's state dir (`kairon runtime --state-dir`, or `<data dir>/runtime/<node>`
    /// under `kairon up`).
    pub state_dir: PathBuf,
    /// The cgroup parent of its sandboxes (`kairon-<node>`, see runtime/src/sandbox).
    pub cgroup_parent: String,
}

impl NodeFootprint {
    pub fn new(state_dir: &Path, node: &str) -> NodeFootprint {
        NodeFootprint { state_dir: state_dir.to_path_buf(), cgroup_parent: format!("kairon-{node}") }
    }

    pub fn runc_root(&self) -> PathBuf {
        self.state_dir.join("runc")
    }

    /// A cgroup v1 file of one sandbox, e.g. `("memory", id, "memory.usage_in_bytes")`.
    pub fn cgroup_file(&self, controller: &str, id: &str, file: &str) -> PathBuf {
        Path::new("/sys/fs/cgroup").join(controller).join(&self.cgroup_parent).join(id).join(file)
    }

    /// Everything this node left on the host; empty when it left nothing.
    pub fn leaks(&self) -> Vec<String> {
        let mut found = Vec::new();
        let prefix = format!("{}/", self.state_dir.to_string_lossy());

        // runc instances.
        let root = self.runc_root();
        if root.exists() {
            match Command::new("runc").arg("--root").arg(&root).args(["list", "--quiet"]).output() {
                Ok(o) if o.status.success() => {
                    let ids: Vec<String> = String::from_utf8_lossy(&o.stdout)
                        .lines()
                        .map(str::trim)
                        .filter(|l| !l.is_empty())
                        .map(String::from)
                        .collect();
                    if !ids.is_empty() {
                        found.push(format!(
                            "`runc --root {} list` shows {} instance(s): {}",
                            root.display(),
                            ids.len(),
                            sample(&ids)
                        ));
                    }
                }
                Ok(o) => found.push(format!(
                    "`runc --root {} list` failed: {}",
                    root.display(),
                    String::from_utf8_lossy(&o.stderr).trim()
                )),
                Err(e) => found.push(format!("running runc list: {e}")),
            }
        }

        // Mounts: the disks (mounted under the state dir) and the overlay roots (mounted under
        // /run/kairon/sandboxes, their lower and upper dirs in the state dir).
        let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
        let mounts: Vec<String> = mountinfo
            .lines()
            .filter(|l| l.contains(&prefix))
            .filter_map(|l| l.split(' ').nth(4).map(String::from))
            .collect();
        if !mounts.is_empty() {
            found.push(format!("{} mount(s) of {prefix} left: {}", mounts.len(), sample(&mounts)));
        }

        // Loop devices backed by the sandboxes' disk images.
        let mut loops = Vec::new();
        for dev in std::fs::read_dir("/sys/block").into_iter().flatten().flatten() {
            let name = dev.file_name().to_string_lossy().into_owned();
            if !name.starts_with("loop") {
                continue;
            }
            if let Ok(backing) = std::fs::read_to_string(dev.path().join("loop/backing_file"))
                && backing.trim().starts_with(&prefix)
            {
                loops.push(format!("/dev/{name} ({})", backing.trim()));
            }
        }
        if !loops.is_empty() {
            found.push(format!("{} loop device(s) left: {}", loops.len(), sample(&loops)));
        }

        // Cgroups: a sandbox's cgroup under the node's parent, in any hierarchy.
        let mut cgroups = Vec::new();
        for controller in std::fs::read_dir("/sys/fs/cgroup").into_iter().flatten().flatten() {
            let parent = controller.path().join(&self.cgroup_parent);
            for child in std::fs::read_dir(&parent).into_iter().flatten().flatten() {
                if child.file_type().is_ok_and(|t| t.is_dir()) {
                    cgroups.push(child.path().display().to_string());
                }
            }
        }
        if !cgroups.is_empty() {
            found.push(format!("{} sandbox cgroup(s) left: {}", cgroups.len(), sample(&cgroups)));
        }
        found
    }

    /// Removes the node's cgroup parents once they are empty (the runtime leaves them, and a
    /// bench run's node name is its own).
    pub fn remove_cgroup_parents(&self) {
        for controller in std::fs::read_dir("/sys/fs/cgroup").into_iter().flatten().flatten() {
            let _ = std::fs::remove_dir(controller.path().join(&self.cgroup_parent));
        }
    }
}

fn sample(items: &[String]) -> String {
    let mut s = items.iter().take(3).cloned().collect::<Vec<_>>().join(", ");
    if items.len() > 3 {
        s.push_str(&format!(" and {} more", items.len() - 3));
    }
    s
}

/// Rows of the resource store (`objects`) per `group/resource`.
pub fn object_counts(db_url: &str) -> Result<BTreeMap<String, i64>> {
    let out = psql(db_url, "SELECT api_group || '/' || resource, count(*) FROM objects GROUP BY 1 ORDER BY 1")?;
    let mut counts = BTreeMap::new();
    for line in out.lines().filter(|l| !l.trim().is_empty()) {
        let (k, v) = line.rsplit_once('|').with_context(|| format!("psql line {line:?}"))?;
        counts.insert(k.to_string(), v.trim().parse()?);
    }
    Ok(counts)
}

/// Events stay an hour after their last write (`kairon up --event-ttl`), longer than a run, so
/// they are counted, not compared.
pub const EVENTS: &str = "events.k8s.io/events";

/// The resources whose row count differs from the baseline (events aside).
pub fn count_changes(before: &BTreeMap<String, i64>, after: &BTreeMap<String, i64>) -> Vec<String> {
    let keys: std::collections::BTreeSet<&String> = before.keys().chain(after.keys()).collect();
    keys.into_iter()
        .filter(|k| k.as_str() != EVENTS)
        .filter_map(|k| {
            let (b, a) = (before.get(k).copied().unwrap_or(0), after.get(k).copied().unwrap_or(0));
            (a != b).then(|| format!("{k}: {a} rows, {b} before the run"))
        })
        .collect()
}

/// Waits until the system objects a scenario's baseline must include exist: the node's
/// KaironNode and the controllers' Lease (so that the baseline is not taken before them).
pub async fn settled_counts(db_url: &str) -> Result<BTreeMap<String, i64>> {
    let deadline = Instant::now() + Duration::from_secs(120);
    loop {
        let c = object_counts(db_url)?;
        let has = |k: &str| c.get(k).copied().unwrap_or(0) > 0;
        if has("kairon.zyvor.dev/kaironnodes") && has("coordination.k8s.io/leases") {
            return Ok(c);
        }
        if Instant::now() > deadline {
            bail!("no KaironNode and controller Lease in the store after 2 minutes: {c:?}");
        }
        tokio::time::sleep(Duration::from_millis(200)).await;
    }
}

pub fn psql(db_url: &str, sql: &str) -> Result<String> {
    let out = Command::new("psql").arg(db_url).args(["-v", "ON_ERROR_STOP=1", "-qAtc", sql]).output()?;
    if !out.status.success() {
        bail!("psql {sql:?}: {}", String::from_utf8_lossy(&out.stderr).trim());
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// Waits for `check` to hold, polling every `every`, for at most `timeout`.
pub async fn wait_until<F, Fut>(what: &str, timeout: Duration, every: Duration, mut check: F) -> Result<()>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = Result<bool>>,
{
    let deadline = Instant::now() + timeout;
    loop {
        if check().await? {
            return Ok(());
        }
        if Instant::now() > deadline {
            bail!("timed out after {timeout:?} waiting for {what}");
        }
        tokio::time::sleep(every).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn count_changes_names_what_differs_and_ignores_events() {
        let before: BTreeMap<String, i64> =
            [("a/x".into(), 2), ("b/y".into(), 1), (EVENTS.into(), 3)].into_iter().collect();
        let after: BTreeMap<String, i64> =
            [("a/x".into(), 2), ("c/z".into(), 4), (EVENTS.into(), 30)].into_iter().collect();
        assert_eq!(count_changes(&before, &after), ["b/y: 0 rows, 1 before the run", "c/z: 4 rows, 0 before the run"]);
        assert!(count_changes(&before, &before).is_empty());
    }
}
