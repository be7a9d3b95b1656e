//! The OCI runtime config (config.json) of a sandbox: its own user, PID, mount, UTS, IPC,
//! network and cgroup namespaces, cgroup limits, an allowlist seccomp profile, and the usual
//! hardening. Pure: tested without runc.

use serde_json::{Value, json};

/// What goes into one sandbox's config.
pub struct SandboxConfig<'a> {
    pub init: Init,
    pub hostname: &'a str,
    pub rootfs: &'a str,
    /// The host directory mounted read-only at /.kairon (kairon-agent, tini, busybox).
    pub tools_dir: &'a str,
    /// The host directory mounted read-write at /.kairon/procs: background processes' exit codes,
    /// the only thing the runtime reads from a guest-writable place (without following symlinks).
    pub procs_dir: &'a str,
    pub cgroups_path: &'a str,
    pub env: &'a [String],
    pub cwd: &'a str,
    /// CPU limit in millicores (0 = none).
    pub cpu_millis: i64,
    /// Memory limit in bytes (0 = none).
    pub memory_bytes: u64,
    /// An existing network namespace to join, else a new one.
    pub netns_path: Option<&'a str>,
    /// A host file (root's, read-only to the guest) mounted at `/etc/resolv.conf`: the node's
    /// resolver, for an attached sandbox.
    pub resolv_conf: Option<&'a str>,
    /// A host file (root's, read-only) mounted at `net::tls::GUEST_BUNDLE_PATH`: the CA bundle
    /// guests trust when the node terminates TLS; with `replace_system_store`, also over the
    /// template's system store.
    pub ca_bundle: Option<&'a str>,
    pub replace_system_store: bool,
    /// The host ids the sandbox's ids 0..size map to (its own user namespace); `None` runs it
    /// in the host's user namespace (guest root would be host root: tests of the config only).
    pub idmap: Option<super::idmap::IdMap>,
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

/// Syscalls a sandbox may make; everything else fails with EPERM (`defaultAction:
/// SCMP_ACT_ERRNO`). Modelled on the Docker/containerd default allowlist for a process without
/// CAP_SYS_ADMIN, CAP_SYS_PTRACE, CAP_SYS_CHROOT and the other capabilities a sandbox lacks,
/// and tighter than it: no io_uring (`io_uring_setup`, `io_uring_enter`, `io_uring_register`:
/// a long record of kernel bugs, and it bypasses syscall filtering), no `ptrace`,
/// `process_vm_readv`/`process_vm_writev`, no `name_to_handle_at`, no `fanotify_mark`, no
/// `clock_adjtime`. Never listed (so refused): `unshare`, `setns`, `mount` and the new mount
/// API, `keyctl`, `add_key`, `request_key`, `bpf`, `perf_event_open`, `userfaultfd`, module
/// and kexec calls, `reboot`, `swapon`, `acct`, `chroot`, `pivot_root`, `quotactl`.
/// `clone` is allowed only without namespace flags and `clone3` answers ENOSYS (see
/// [`seccomp`]), so glibc falls back to `clone`.
pub const ALLOWED_SYSCALLS: &[&str] = &[
    "accept",
    "accept4",
    "access",
    "adjtimex",
    "alarm",
    "arch_prctl",
    "bind",
    "brk",
    "capget",
    "capset",
    "chdir",
    "chmod",
    "chown",
    "chown32",
    "clock_getres",
    "clock_getres_time64",
    "clock_gettime",
    "clock_gettime64",
    "clock_nanosleep",
    "clock_nanosleep_time64",
    "close",
    "close_range",
    "connect",
    "copy_file_range",
    "creat",
    "dup",
    "dup2",
    "dup3",
    "epoll_create",
    "epoll_create1",
    "epoll_ctl",
    "epoll_ctl_old",
    "epoll_pwait",
    "epoll_pwait2",
    "epoll_wait",
    "epoll_wait_old",
    "eventfd",
    "eventfd2",
    "execve",
    "execveat",
    "exit",
    "exit_group",
    "faccessat",
    "faccessat2",
    "fadvise64",
    "fadvise64_64",
    "fallocate",
    "fchdir",
    "fchmod",
    "fchmodat",
    "fchmodat2",
    "fchown",
    "fchown32",
    "fchownat",
    "fcntl",
    "fcntl64",
    "fdatasync",
    "fgetxattr",
    "flistxattr",
    "flock",
    "fork",
    "fremovexattr",
    "fsetxattr",
    "fstat",
    "fstat64",
    "fstatat64",
    "fstatfs",
    "fstatfs64",
    "fsync",
    "ftruncate",
    "ftruncate64",
    "futex",
    "futex_time64",
    "futex_waitv",
    "futimesat",
    "getcpu",
    "getcwd",
    "getdents",
    "getdents64",
    "getegid",
    "getegid32",
    "geteuid",
    "geteuid32",
    "getgid",
    "getgid32",
    "getgroups",
    "getgroups32",
    "getitimer",
    "getpeername",
    "getpgid",
    "getpgrp",
    "getpid",
    "getppid",
    "getpriority",
    "getrandom",
    "getresgid",
    "getresgid32",
    "getresuid",
    "getresuid32",
    "getrlimit",
    "get_robust_list",
    "getrusage",
    "getsid",
    "getsockname",
    "getsockopt",
    "get_thread_area",
    "gettid",
    "gettimeofday",
    "getuid",
    "getuid32",
    "getxattr",
    "inotify_add_watch",
    "inotify_init",
    "inotify_init1",
    "inotify_rm_watch",
    "io_cancel",
    "ioctl",
    "io_destroy",
    "io_getevents",
    "io_pgetevents",
    "io_pgetevents_time64",
    "ioprio_get",
    "ioprio_set",
    "io_setup",
    "io_submit",
    "ipc",
    "kill",
    "landlock_add_rule",
    "landlock_create_ruleset",
    "landlock_restrict_self",
    "lchown",
    "lchown32",
    "lgetxattr",
    "link",
    "linkat",
    "listen",
    "listxattr",
    "llistxattr",
    "_llseek",
    "lremovexattr",
    "lseek",
    "lsetxattr",
    "lstat",
    "lstat64",
    "madvise",
    "membarrier",
    "memfd_create",
    "mincore",
    "mkdir",
    "mkdirat",
    "mknod",
    "mknodat",
    "mlock",
    "mlock2",
    "mlockall",
    "mmap",
    "mmap2",
    "modify_ldt",
    "mprotect",
    "mq_getsetattr",
    "mq_notify",
    "mq_open",
    "mq_timedreceive",
    "mq_timedreceive_time64",
    "mq_timedsend",
    "mq_timedsend_time64",
    "mq_unlink",
    "mremap",
    "msgctl",
    "msgget",
    "msgrcv",
    "msgsnd",
    "msync",
    "munlock",
    "munlockall",
    "munmap",
    "nanosleep",
    "newfstatat",
    "_newselect",
    "open",
    "openat",
    "openat2",
    "pause",
    "pidfd_open",
    "pidfd_send_signal",
    "pipe",
    "pipe2",
    "pkey_alloc",
    "pkey_free",
    "pkey_mprotect",
    "poll",
    "ppoll",
    "ppoll_time64",
    "prctl",
    "pread64",
    "preadv",
    "preadv2",
    "prlimit64",
    "process_mrelease",
    "pselect6",
    "pselect6_time64",
    "pwrite64",
    "pwritev",
    "pwritev2",
    "read",
    "readahead",
    "readlink",
    "readlinkat",
    "readv",
    "recv",
    "recvfrom",
    "recvmmsg",
    "recvmmsg_time64",
    "recvmsg",
    "remap_file_pages",
    "removexattr",
    "rename",
    "renameat",
    "renameat2",
    "restart_syscall",
    "rmdir",
    "rseq",
    "rt_sigaction",
    "rt_sigpending",
    "rt_sigprocmask",
    "rt_sigqueueinfo",
    "rt_sigreturn",
    "rt_sigsuspend",
    "rt_sigtimedwait",
    "rt_sigtimedwait_time64",
    "rt_tgsigqueueinfo",
    "sched_getaffinity",
    "sched_getattr",
    "sched_getparam",
    "sched_get_priority_max",
    "sched_get_priority_min",
    "sched_getscheduler",
    "sched_rr_get_interval",
    "sched_rr_get_interval_time64",
    "sched_setaffinity",
    "sched_setattr",
    "sched_setparam",
    "sched_setscheduler",
    "sched_yield",
    "seccomp",
    "select",
    "semctl",
    "semget",
    "semop",
    "semtimedop",
    "semtimedop_time64",
    "send",
    "sendfile",
    "sendfile64",
    "sendmmsg",
    "sendmsg",
    "sendto",
    "setfsgid",
    "setfsgid32",
    "setfsuid",
    "setfsuid32",
    "setgid",
    "setgid32",
    "setgroups",
    "setgroups32",
    "setitimer",
    "setpgid",
    "setpriority",
    "setregid",
    "setregid32",
    "setresgid",
    "setresgid32",
    "setresuid",
    "setresuid32",
    "setreuid",
    "setreuid32",
    "setrlimit",
    "set_robust_list",
    "setsid",
    "setsockopt",
    "set_thread_area",
    "set_tid_address",
    "setuid",
    "setuid32",
    "setxattr",
    "shmat",
    "shmctl",
    "shmdt",
    "shmget",
    "shutdown",
    "sigaltstack",
    "signalfd",
    "signalfd4",
    "sigprocmask",
    "sigreturn",
    "socketcall",
    "socketpair",
    "splice",
    "stat",
    "stat64",
    "statfs",
    "statfs64",
    "statx",
    "symlink",
    "symlinkat",
    "sync",
    "sync_file_range",
    "syncfs",
    "sysinfo",
    "tee",
    "tgkill",
    "time",
    "timer_create",
    "timer_delete",
    "timer_getoverrun",
    "timer_gettime",
    "timer_gettime64",
    "timer_settime",
    "timer_settime64",
    "timerfd_create",
    "timerfd_gettime",
    "timerfd_gettime64",
    "timerfd_settime",
    "timerfd_settime64",
    "times",
    "tkill",
    "truncate",
    "truncate64",
    "ugetrlimit",
    "umask",
    "uname",
    "unlink",
    "unlinkat",
    "utime",
    "utimensat",
    "utimensat_time64",
    "utimes",
    "vfork",
    "vmsplice",
    "wait4",
    "waitid",
    "waitpid",
    "write",
    "writev",
];

/// Syscalls that must stay refused whatever the allowlist says (checked by a unit test: a
/// future edit of [`ALLOWED_SYSCALLS`] cannot let one of these in).
pub const NEVER_ALLOWED: &[&str] = &[
    "acct",
    "add_key",
    "bpf",
    "chroot",
    "clock_adjtime",
    "clock_settime",
    "delete_module",
    "finit_module",
    "fsconfig",
    "fsmount",
    "fsopen",
    "fspick",
    "init_module",
    "io_uring_enter",
    "io_uring_register",
    "io_uring_setup",
    "ioperm",
    "iopl",
    "kcmp",
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
    "pidfd_getfd",
    "pivot_root",
    "process_madvise",
    "process_vm_readv",
    "process_vm_writev",
    "ptrace",
    "quotactl",
    "reboot",
    "request_key",
    "setns",
    "settimeofday",
    "swapoff",
    "swapon",
    "syslog",
    "umount2",
    "unshare",
    "userfaultfd",
];

/// Namespace flags `clone` may not carry (CLONE_NEWNS | NEWCGROUP | NEWUTS | NEWIPC | NEWUSER |
/// NEWPID | NEWNET), as Docker's profile masks them.
const CLONE_NAMESPACE_FLAGS: u64 = 0x7E02_0000;
const AF_VSOCK: u64 = 40;
const ENOSYS: u32 = 38;

/// The seccomp profile: an allowlist, everything else EPERM.
pub fn seccomp() -> Value {
    let personality: Vec<Value> = [0u64, 8, 0x20000, 0x20008, 0xffff_ffff]
        .iter()
        .map(|v| {
            json!({"names": ["personality"], "action": "SCMP_ACT_ALLOW",
                   "args": [{"index": 0, "value": v, "op": "SCMP_CMP_EQ"}]})
        })
        .collect();
    let mut syscalls = vec![
        json!({"names": ALLOWED_SYSCALLS, "action": "SCMP_ACT_ALLOW"}),
        // Any socket but AF_VSOCK (a way to the host's hypervisor services).
        json!({"names": ["socket"], "action": "SCMP_ACT_ALLOW",
               "args": [{"index": 0, "value": AF_VSOCK, "op": "SCMP_CMP_NE"}]}),
        // Threads and processes, but no new namespaces.
        json!({"names": ["clone"], "action": "SCMP_ACT_ALLOW",
               "args": [{"index": 0, "value": CLONE_NAMESPACE_FLAGS, "valueTwo": 0, "op": "SCMP_CMP_MASKED_EQ"}]}),
        // clone3 passes its flags in memory seccomp cannot read: ENOSYS makes libc use clone.
        json!({"names": ["clone3"], "action": "SCMP_ACT_ERRNO", "errnoRet": ENOSYS}),
    ];
    syscalls.extend(personality);
    json!({
        "defaultAction": "SCMP_ACT_ERRNO",
        "defaultErrnoRet": 1,
        // x86_64 only: the 32-bit (x86) and x32 syscall tables are refused outright. They are a
        // second kernel entry surface few sandboxes need, and listing them triples the filter
        // runc compiles on every start and exec (measured: 67 ms against 21 ms a `runc exec`).
        "architectures": ["SCMP_ARCH_X86_64"],
        "syscalls": syscalls
    })
}

/// Paths of /proc and /sys a sandbox must not read (masked) or write (read-only): runc's and
/// containerd's default lists.
pub const MASKED_PATHS: [&str; 11] = [
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
    "/sys/devices/virtual/powercap",
];
pub const READONLY_PATHS: [&str; 6] =
    ["/proc/bus", "/proc/fs", "/proc/irq", "/proc/sys", "/proc/sysrq-trigger", "/sys/fs/cgroup"];

/// What runs as the sandbox's init.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Init {
    /// `kairon-agent sandbox`: reaps every orphan and serves exec on the socket it is handed.
    Agent,
    /// tini reaps every orphan, and the sandbox idles until something is `runc exec`'d into it.
    Tini,
}

pub fn init_args(init: Init) -> Vec<String> {
    let args: &[&str] = match init {
        Init::Agent => &["/.kairon/kairon-agent", "sandbox"],
        Init::Tini => &["/.kairon/tini", "-s", "--", "/.kairon/busybox", "sleep", "2147483647"],
    };
    args.iter().map(|s| s.to_string()).collect()
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
    let mut namespaces = vec![json!({"type": "pid"}), network, json!({"type": "ipc"}), json!({"type": "uts"})];
    namespaces.push(json!({"type": "mount"}));
    namespaces.push(json!({"type": "cgroup"}));
    let mut linux = json!({
        "cgroupsPath": c.cgroups_path,
        "resources": resources,
        "maskedPaths": MASKED_PATHS,
        "readonlyPaths": READONLY_PATHS,
        "seccomp": seccomp()
    });
    if let Some(m) = &c.idmap {
        namespaces.push(json!({"type": "user"}));
        let map = json!([{"containerID": 0, "hostID": m.host_base, "size": m.size}]);
        linux["uidMappings"] = map.clone();
        linux["gidMappings"] = map;
    }
    linux["namespaces"] = json!(namespaces);
    let mut cfg = json!({
        "ociVersion": "1.0.2",
        "process": {
            "terminal": false,
            "user": {"uid": 0, "gid": 0},
            "args": init_args(c.init),
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
        "linux": linux
    });
    let read_only = |destination: &str, source: &str| json!({"destination": destination, "type": "bind", "source": source, "options": ["bind", "ro", "nosuid", "nodev", "noexec"]});
    let mounts = cfg["mounts"].as_array_mut().expect("mounts");
    if let Some(file) = c.resolv_conf {
        mounts.push(read_only("/etc/resolv.conf", file));
    }
    if let Some(file) = c.ca_bundle {
        mounts.push(read_only(crate::net::tls::GUEST_BUNDLE_PATH, file));
        if c.replace_system_store {
            mounts.push(read_only(crate::net::tls::SYSTEM_BUNDLE_PATH, file));
        }
    }
    cfg
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_and_hardening() {
        let env = vec!["PATH=/bin".to_string()];
        let c = config(&SandboxConfig {
            init: Init::Agent,
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
            resolv_conf: None,
            ca_bundle: None,
            replace_system_store: false,
            idmap: Some(super::super::idmap::IdMap { host_base: 1 << 30, size: 65536 }),
        });
        assert_eq!(c["linux"]["resources"]["cpu"]["quota"], 50_000);
        assert_eq!(c["linux"]["resources"]["memory"]["limit"], 512u64 << 20);
        assert_eq!(c["process"]["noNewPrivileges"], true);
        let caps = c["process"]["capabilities"]["bounding"].as_array().unwrap();
        assert!(!caps.iter().any(|c| c == "CAP_SYS_ADMIN" || c == "CAP_NET_RAW"));
        let ns: Vec<_> =
            c["linux"]["namespaces"].as_array().unwrap().iter().map(|n| n["type"].as_str().unwrap()).collect();
        assert_eq!(ns, ["pid", "network", "ipc", "uts", "mount", "cgroup", "user"]);
        assert_eq!(c["linux"]["uidMappings"], json!([{"containerID": 0, "hostID": 1u32 << 30, "size": 65536}]));
        assert_eq!(c["linux"]["gidMappings"], c["linux"]["uidMappings"]);
        assert!(c["linux"]["readonlyPaths"].as_array().unwrap().iter().any(|p| p == "/proc/sys"));
        let masked = c["linux"]["maskedPaths"].as_array().unwrap();
        assert!(masked.iter().any(|p| p == "/sys/devices/virtual/powercap"));
    }

    #[test]
    fn seccomp_is_an_allowlist_without_the_dangerous_calls() {
        let s = seccomp();
        assert_eq!(s["defaultAction"], "SCMP_ACT_ERRNO");
        assert_eq!(s["defaultErrnoRet"], 1);
        let mut allowed = std::collections::BTreeSet::new();
        for rule in s["syscalls"].as_array().unwrap() {
            if rule["action"] == "SCMP_ACT_ALLOW" {
                for n in rule["names"].as_array().unwrap() {
                    allowed.insert(n.as_str().unwrap().to_string());
                }
            }
        }
        for bad in NEVER_ALLOWED {
            assert!(!allowed.contains(*bad), "{bad} must not be allowed");
        }
        for needed in ["read", "write", "execve", "clone", "socket", "futex", "mmap", "openat", "wait4"] {
            assert!(allowed.contains(needed), "{needed} is needed by every program");
        }
        // clone only without namespace flags.
        let clone = s["syscalls"].as_array().unwrap().iter().find(|r| r["names"][0] == "clone").unwrap();
        assert_eq!(clone["args"][0]["op"], "SCMP_CMP_MASKED_EQ");
        assert_eq!(clone["args"][0]["value"], 0x7E02_0000u64);
        let unique: std::collections::BTreeSet<_> = ALLOWED_SYSCALLS.iter().collect();
        assert_eq!(unique.len(), ALLOWED_SYSCALLS.len(), "no duplicates");
    }
}
