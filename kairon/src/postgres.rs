//! A private PostgreSQL cluster under the data dir, for `kairon up` with no `DATABASE_URL`.
//! PostgreSQL refuses to run as root, so as root every step runs as the `postgres` user, and
//! the cluster lives where that user can reach it.

use std::path::{Path, PathBuf};
use std::process::Command;

use anyhow::{Context, Result, bail};

pub struct PrivatePostgres {
    bin: PathBuf,
    dir: PathBuf,
    pub url: String,
}

fn is_root() -> bool {
    // /proc/self belongs to our effective uid.
    std::fs::metadata("/proc/self").map(|m| std::os::unix::fs::MetadataExt::uid(&m) == 0).unwrap_or(false)
}

fn bin_dir() -> Result<PathBuf> {
    if let Ok(out) = Command::new("pg_config").arg("--bindir").output()
        && out.status.success()
    {
        let p = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
        if p.join("initdb").exists() {
            return Ok(p);
        }
    }
    let mut versions: Vec<PathBuf> = std::fs::read_dir("/usr/lib/postgresql")
        .map(|d| d.filter_map(|e| e.ok()).map(|e| e.path().join("bin")).filter(|p| p.join("initdb").exists()).collect())
        .unwrap_or_default();
    versions.sort();
    versions.pop().context("no PostgreSQL server found: install it (apt-get install postgresql) or set DATABASE_URL")
}

/// Runs a PostgreSQL tool, as the `postgres` user when we are root.
fn run(bin: &Path, tool: &str, args: &[&str]) -> Result<std::process::Output> {
    let exe = bin.join(tool);
    let mut cmd = if is_root() {
        let mut c = Command::new("runuser");
        c.args(["-u", "postgres", "--"]).arg(&exe);
        c
    } else {
        Command::new(&exe)
    };
    cmd.args(args).current_dir("/");
    let out = cmd.output().with_context(|| format!("running {}", exe.display()))?;
    Ok(out)
}

fn postgres_can_reach(dir: &Path) -> bool {
    !is_root()
        || Command::new("runuser")
            .args(["-u", "postgres", "--", "test", "-x"])
            .arg(dir)
            .status()
            .map(|s| s.success())
            .unwrap_or(false)
}

fn short_hash(p: &Path) -> String {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    p.hash(&mut h);
    format!("{:012x}", h.finish() & 0xffff_ffff_ffff)
}

impl PrivatePostgres {
    /// Initialises (first time) and starts the cluster for `data_dir`, and creates the
    /// `kairon` database.
    pub fn start(data_dir: &Path) -> Result<Self> {
        let bin = bin_dir()?;
        let dir = if postgres_can_reach(data_dir) {
            data_dir.join("postgres")
        } else {
            // Root's home is mode 700: keep the cluster where the postgres user can reach it.
            let d = PathBuf::from("/var/lib/kairon/postgres").join(short_hash(data_dir));
            tracing::info!(dir = %d.display(), "the postgres user cannot reach the data dir; keeping the database here");
            d
        };
        std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
        // Unix socket paths are limited to ~107 bytes, so the socket lives in a short dir.
        // Its mode is 0700 (owned by the server's user): with trust auth and no TCP listener
        // (`listen_addresses=''`), the socket's directory is what keeps other local users out.
        let sock = PathBuf::from(format!("/tmp/kairon-pg-{}", short_hash(&dir)));
        std::fs::create_dir_all(&sock)?;
        {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(&sock, std::fs::Permissions::from_mode(0o700))
                .with_context(|| format!("making {} private", sock.display()))?;
        }
        if is_root() {
            for d in [&dir, &sock] {
                let ok = Command::new("chown").args(["-R", "postgres:postgres"]).arg(d).status()?.success();
                if !ok {
                    bail!("could not give {} to the postgres user", d.display());
                }
            }
            if let Some(parent) = dir.parent() {
                let _ = Command::new("chmod").arg("755").arg(parent).status();
            }
        }
        let dir_s = dir.to_string_lossy().to_string();
        if !dir.join("PG_VERSION").exists() {
            eprintln!("Initialising PostgreSQL in {dir_s} …");
            let out = run(
                &bin,
                "initdb",
                &["-D", &dir_s, "--auth=trust", "-U", "postgres", "-E", "UTF8", "--no-instructions"],
            )?;
            if !out.status.success() {
                bail!("initdb failed: {}", String::from_utf8_lossy(&out.stderr));
            }
        }
        let status = run(&bin, "pg_ctl", &["-D", &dir_s, "status"])?;
        if !status.status.success() {
            let opts = format!("-c listen_addresses='' -k {} -p 5432", sock.display());
            let log = dir.join("postgres.log").to_string_lossy().to_string();
            let out = run(&bin, "pg_ctl", &["-D", &dir_s, "-o", &opts, "-l", &log, "-w", "-t", "60", "start"])?;
            if !out.status.success() {
                let tail = std::fs::read_to_string(&log).unwrap_or_default();
                let tail: Vec<&str> = tail.lines().rev().take(10).collect();
                bail!(
                    "PostgreSQL did not start: {}\n{}",
                    String::from_utf8_lossy(&out.stderr).trim(),
                    tail.into_iter().rev().collect::<Vec<_>>().join("\n")
                );
            }
        }
        let sock_s = sock.to_string_lossy().to_string();
        let out = run(
            &bin,
            "psql",
            &[
                "-h",
                &sock_s,
                "-U",
                "postgres",
                "-d",
                "postgres",
                "-tAc",
                "SELECT 1 FROM pg_database WHERE datname = 'kairon'",
            ],
        )?;
        if String::from_utf8_lossy(&out.stdout).trim() != "1" {
            let out = run(&bin, "createdb", &["-h", &sock_s, "-U", "postgres", "kairon"])?;
            if !out.status.success() {
                bail!("createdb failed: {}", String::from_utf8_lossy(&out.stderr));
            }
            // A new database leaves hundreds of files to sync; do it now rather than in the
            // shutdown checkpoint, so the first Ctrl-C is as quick as the others.
            let _ = run(&bin, "psql", &["-h", &sock_s, "-U", "postgres", "-d", "postgres", "-qc", "CHECKPOINT"]);
        }
        let url = format!("postgres://postgres@localhost/kairon?host={sock_s}");
        Ok(PrivatePostgres { bin, dir, url })
    }

    pub fn stop(&self) {
        let dir = self.dir.to_string_lossy().to_string();
        // A fast stop still writes a shutdown checkpoint, which a busy disk can make slow.
        match run(&self.bin, "pg_ctl", &["-D", &dir, "-m", "fast", "-w", "-t", "300", "stop"]) {
            Ok(out) if out.status.success() => {}
            Ok(out) => eprintln!("stopping PostgreSQL: {}", String::from_utf8_lossy(&out.stderr).trim()),
            Err(e) => eprintln!("stopping PostgreSQL: {e:#}"),
        }
    }
}
