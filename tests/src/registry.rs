//! A real OCI registry for the end-to-end tests (Debian's `docker-registry`, anonymous, on a
//! free loopback port) and an image pushed to it with Kairon's own OCI layout writer. The
//! runtime's tests keep a fuller one (htpasswd, hand-made manifests) in
//! `runtime/tests/common`.

use std::net::TcpListener;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};

pub struct Registry {
    child: Child,
    /// `127.0.0.1:PORT`.
    pub host: String,
    dir: tempfile::TempDir,
}

impl Registry {
    pub fn start() -> Result<Registry> {
        let dir = tempfile::tempdir()?;
        let port = TcpListener::bind("127.0.0.1:0")?.local_addr()?.port();
        let host = format!("127.0.0.1:{port}");
        let config = dir.path().join("config.yml");
        std::fs::write(
            &config,
            format!(
                "version: 0.1\nlog:\n  level: warn\nstorage:\n  filesystem:\n    rootdirectory: {}\nhttp:\n  addr: {host}\n",
                dir.path().join("storage").display()
            ),
        )?;
        let log = std::fs::File::create(dir.path().join("registry.log"))?;
        let child = Command::new("/usr/bin/docker-registry")
            .arg("serve")
            .arg(&config)
            .stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log)
            .spawn()
            .context("starting /usr/bin/docker-registry (Debian package docker-registry)")?;
        let mut registry = Registry { child, host, dir };
        let deadline = Instant::now() + Duration::from_secs(20);
        while std::net::TcpStream::connect(&registry.host).is_err() {
            if let Some(status) = registry.child.try_wait()? {
                bail!("the registry exited with {status}: {}", registry.log());
            }
            if Instant::now() > deadline {
                bail!("the registry did not listen: {}", registry.log());
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        Ok(registry)
    }

    pub fn log(&self) -> String {
        std::fs::read_to_string(self.dir.path().join("registry.log")).unwrap_or_default()
    }

    /// Pushes a busybox image (the host's static busybox, as the builtin template has it) as
    /// `REPOSITORY:TAG`; returns its full reference.
    pub async fn push_busybox(&self, repository_and_tag: &str) -> Result<String> {
        let work = tempfile::tempdir()?;
        let (tree, layout) = (work.path().join("rootfs"), work.path().join("layout"));
        let run = kairon_runtime::oci::build_busybox_rootfs(&tree)?;
        let layer = kairon_runtime::oci::layout::add_layer(&layout, &tree, "busybox")?;
        let tag = repository_and_tag.rsplit_once(':').map(|(_, t)| t).unwrap_or("latest");
        kairon_runtime::oci::layout::write_image(&layout, &[layer], &run, tag)?;
        let reference = format!("{}/{repository_and_tag}", self.host);
        let cfg = kairon_runtime::oci::RegistryConfig { insecure_hosts: vec![self.host.clone()], ..Default::default() };
        kairon_runtime::oci::layout::push(&layout, &reference, &cfg).await?;
        Ok(reference)
    }
}

impl Drop for Registry {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
