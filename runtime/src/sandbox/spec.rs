//! The OCI runtime config (config.json) of a sandbox: its own PID, mount, UTS, IPC and network
//! namespaces, cgroup limits, and the usual hardening. Pure: tested without runc.

use serde_json::{Value, json};

/// What goes into one sandbox's config.
pub struct SandboxConfig<'a> {
    pub hostname: &'a str,
    pub rootfs: &'a str,
    /// The host directory mounted read-only at /.kairon (tini, busybox).
    pub tools_dir: &'a str,
    /// The host directory mounted read-write at /.kairon/procs (background process state).
    pub procs_dir: &'a str,
    pub cgroups_path: &'a str,
    pub env: &'a [String],
    pub cwd: &'a str,
    /// CPU limit in millicores (0 = none).
    pub cpu_millis: i64,
    /// Memory limit in bytes (0 = none).
    pub memory_bytes: u64,
    /// An existing network namespace to join (for guest networking), else a new empty one.
    pub netns_path: Option<&'a str>,
}

/// Capabilities a sandbox keeps: Docker's default set without NET_RAW (no raw sockets) and
/// MKNOD (no device nodes). Everything else (SYS_ADMIN for mount, SYS_MODULE…) is dropped.
pub const CAPABILITIES: [&str; 11] = [
    "CAP_CHOWN",
    "CAP_DAC_OVERRIDE",
    "CAP_FSETID",
    "CAP_FOWNER",
    "CAP_SETGID",
    "CAP_SETUID",
    "CAP_SETPCAP",
    "CAP_SETFCAP",
    "CAP_NET_BIND_SERVICE",
    "CAP_KILL",
    "CAP_AUDIT_WRITE",
];

/// Syscalls refused with EPERM on top of the dropped capabilities (defence in depth: each
/// of these reconfigures the kernel or escapes the sandbox's namespaces).
pub const DENIED_SYSCALLS: [&str; 37] = [
    "acct",
    "add_key",
    "bpf",
    "clock_adjtime",
    "clock_settime",
    "create_module",
    "delete_module",
    "finit_module",
    "fsconfig",
    "fsmount",
    "fsopen",
    "fspick",
    "init_module",
    "ioperm",
    "iopl",
    "kexec_file_load",
    "kexec_load",
    "keyctl",
    "lookup_dcookie",
    "mount",
    "mount_setattr",
    "move_mount",
    "name_to_handle_at",
    "open_by_handle_at",
    "open_tree",
    "perf_event_open",
    "pivot_root",
    "quotactl",
    "reboot",
    "request_key",
    "setns",
    "settimeofday",
    "swapoff",
    "swapon",
    "syslog",
    "umount2",
    "userfaultfd",
];

/// Paths of /proc and /sys a sandbox must not read (masked) or write (read-only).
pub const MASKED_PATHS: [&str; 10] = [
    "/proc/acpi",
    "/proc/asound",
    "/proc/kcore",
    "/proc/keys",
    "/proc/latency_stats",
    "/proc/timer_list",
    "/proc/timer_stats",
    "/proc/sched_debug",
    "/proc/scsi",
    "/sys/firmware",
];
pub const READONLY_PATHS: [&str; 6] =
    ["/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys", "/proc/sysrq-trigger", "/sys/fs/cgroup"];

/// The init process: tini reaps every orphan in the sandbox, and the sandbox idles until
/// something is exec'd into it.
pub fn init_args() -> Vec<String> {
    ["/.kairon/tini", "-s", "--", "/.kairon/busybox", "sleep", "2147483647"].iter().map(|s| s.to_string()).collect()
}

pub fn config(c: &SandboxConfig<'_>) -> Value {
    let caps = json!(CAPABILITIES);
    let mut resources = json!({"devices": [{"allow": false, "access": "rwm"}]});
    if c.cpu_millis > 0 {
        // A 100 ms period; the quota is the share of it the sandbox may use.
        resources["cpu"] = json!({"period": 100_000, "quota": c.cpu_millis * 100});
    }
    if c.memory_bytes > 0 {
        resources["memory"] = json!({"limit": c.memory_bytes, "swap": c.memory_bytes});
    }
    resources["pids"] = json!({"limit": 4096});
    let network = match c.netns_path {
        Some(p) => json!({"type": "network", "path": p}),
        None => json!({"type": "network"}),
    };
    json!({
        "ociVersion": "1.0.2",
        "process": {
            "terminal": false,
            "user": {"uid": 0, "gid": 0},
            "args": init_args(),
            "env": c.env,
            "cwd": c.cwd,
            "capabilities": {"bounding": caps, "effective": caps, "permitted": caps},
            "noNewPrivileges": true
        },
        "root": {"path": c.rootfs, "readonly": false},
        "hostname": c.hostname,
        "mounts": [
            {"destination": "/proc", "type": "proc", "source": "proc", "options": ["nosuid", "noexec", "nodev"]},
            {"destination": "/dev", "type": "tmpfs", "source": "tmpfs", "options": ["nosuid", "strictatime", "mode=755", "size=65536k"]},
            {"destination": "/dev/pts", "type": "devpts", "source": "devpts",
             "options": ["nosuid", "noexec", "newinstance", "ptmxmode=0666", "mode=0620"]},
            {"destination": "/dev/shm", "type": "tmpfs", "source": "shm", "options": ["nosuid", "noexec", "nodev", "mode=1777", "size=65536k"]},
            {"destination": "/dev/mqueue", "type": "mqueue", "source": "mqueue", "options": ["nosuid", "noexec", "nodev"]},
            {"destination": "/sys", "type": "sysfs", "source": "sysfs", "options": ["nosuid", "noexec", "nodev", "ro"]},
            {"destination": "/.kairon", "type": "bind", "source": c.tools_dir, "options": ["rbind", "ro", "nosuid", "nodev"]},
            {"destination": "/.kairon/procs", "type": "bind", "source": c.procs_dir, "options": ["rbind", "rw", "nosuid", "nodev", "noexec"]}
        ],
        "linux": {
            "cgroupsPath": c.cgroups_path,
            "resources": resources,
            "namespaces": [{"type": "pid"}, network, {"type": "ipc"}, {"type": "uts"}, {"type": "mount"}],
            "maskedPaths": MASKED_PATHS,
            "readonlyPaths": READONLY_PATHS,
            "seccomp": {
                "defaultAction": "SCMP_ACT_ALLOW",
                "architectures": ["SCMP_ARCH_X86_64", "SCMP_ARCH_X86", "SCMP_ARCH_X32"],
                "syscalls": [{"names": DENIED_SYSCALLS.to_vec(), "action": "SCMP_ACT_ERRNO", "errnoRet": 1}]
            }
        }
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_and_hardening() {
        let env = vec!["PATH=/bin".to_string()];
        let c = config(&SandboxConfig {
            hostname: "agent",
            rootfs: "/r",
            tools_dir: "/t",
            procs_dir: "/p",
            cgroups_path: "/kairon-local/x",
            env: &env,
            cwd: "/",
            cpu_millis: 500,
            memory_bytes: 512 << 20,
            netns_path: None,
        });
        assert_eq!(c["linux"]["resources"]["cpu"]["quota"], 50_000);
        assert_eq!(c["linux"]["resources"]["memory"]["limit"], 512u64 << 20);
        assert_eq!(c["process"]["noNewPrivileges"], true);
        let caps = c["process"]["capabilities"]["bounding"].as_array().unwrap();
        assert!(!caps.iter().any(|c| c == "CAP_SYS_ADMIN" || c == "CAP_NET_RAW"));
        let ns: Vec<_> =
            c["linux"]["namespaces"].as_array().unwrap().iter().map(|n| n["type"].as_str().unwrap()).collect();
        assert_eq!(ns, ["pid", "network", "ipc", "uts", "mount"]);
        assert!(c["linux"]["readonlyPaths"].as_array().unwrap().iter().any(|p| p == "/proc/sys"));
    }
}
