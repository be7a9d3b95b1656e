//! kaironctl: the Kairon command line, on the REST client sdk-gen generates from
//! `openapi/openapi.json` (`generated.rs`, progenitor). Exit codes: 0 done, 1 the server refused
//! or the action failed (the server's reason and message on stderr), 2 a usage error (clap names
//! the flag), 3 the server could not be reached.

mod config;
mod dircopy;
mod duration;
mod jsonpath;
#[allow(clippy::all, clippy::pedantic, unused, missing_docs, unreachable_pub, rust_2018_idioms)]
#[rustfmt::skip]
mod generated;
mod complete;
mod output;
mod progress;
mod stream;
mod terminal;

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use anyhow::{Context, Result};
use clap::{Args, CommandFactory, Parser, Subcommand};
use futures::StreamExt;
use serde_json::{Value, json};

use generated::{Client, ClientInfo, Error, types};
use output::Format;

/// The exit codes, ending every verb's `--help`.
macro_rules! exit_codes {
    () => {
        "\n\nExit codes: 0 done, 1 refused or failed (the server's reason and message on stderr), 2 usage error, 3 server unreachable."
    };
}

#[derive(Parser)]
#[command(
    name = "kaironctl",
    version,
    about = "Drive Kairon Machines, pools and claims",
    propagate_version = true,
    after_help = concat!("Run `kaironctl VERB --help` for a verb's flags and examples.", exit_codes!())
)]
struct Cli {
    /// Kubeconfig to read (default: $KUBECONFIG, else the one `kairon up` writes,
    /// ~/.local/state/kairon/kubeconfig, else ~/.kube/config). Its token and CA are used only
    /// for its own server.
    #[arg(long, global = true, env = "KAIRONCTL_KUBECONFIG")]
    kubeconfig: Option<PathBuf>,
    /// Namespace (default: KAIRON_NAMESPACE, else the kubeconfig context's, else `default`).
    #[arg(short = 'n', long, global = true)]
    namespace: Option<String>,
    /// Server URL (default: KAIRON_URL, else the kubeconfig's).
    #[arg(long, global = true)]
    server: Option<String>,
    /// Bearer token (default: KAIRON_TOKEN, else the kubeconfig's).
    #[arg(long, global = true, hide_env_values = true)]
    token: Option<String>,
    /// The CA (PEM) to trust for the server (default: KAIRON_CA_FILE, else the kubeconfig's).
    #[arg(long, global = true)]
    ca_file: Option<PathBuf>,
    /// Output: table (default), wide (more columns), name (`kind/name` lines), json, yaml, or jsonpath=TEMPLATE (kubectl's: `-o jsonpath='{.items[*].metadata.name}'`, `{range .items[*]}{.metadata.name}{"\n"}{end}`).
    #[arg(short = 'o', long, global = true, value_parser = Format::parse, default_value = "table")]
    output: Format,
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Subcommand)]
enum ConfigCmd {
    /// The server, namespace, token and CA in use, each with its source (the token is not shown).
    View,
}

#[derive(Subcommand)]
enum Cmd {
    /// Create a Machine (`create NAME --image ...`), a MachinePool (`create machinepool NAME ...`) or a clone (`create clone SOURCE NAME`).
    #[command(after_help = concat!("Examples:\n  kaironctl create agent-42 --sandbox-template busybox --idle-timeout 10m --max-lifetime 24h --wake-on-connect\n  kaironctl create vm-1 --image /var/lib/fluxvm/images/kairon-hw.qcow2 --cpu 2 --memory 2Gi\n  kaironctl create agent-43 --sandbox --sandbox-template python --network pypi.org,.pythonhosted.org\n  kaironctl create agent-44 --sandbox --sandbox-template python --secret-env OPENAI_API_KEY=openai/api-key\n  kaironctl create machinepool agents --template busybox --replicas 5 --warm-power-state Paused\n  kaironctl create clone agent-42 agent-43", exit_codes!()))]
    Create(Box<CreateArgs>),
    /// List machines (m), machinepools (mp), machineclaims (mc), nodes, the namespace's quota; or, with --node, templates, sandboxes, pools.
    #[command(
        after_help = concat!("Examples:\n  kaironctl get m\n  kaironctl get machines -l team=a -o name\n  kaironctl get mp -o wide --show-labels\n  kaironctl get m -w\n  kaironctl get m agent-42 -o jsonpath='{.status.phase}'\n  kaironctl get templates --node local\n  kaironctl get quota -n team-a", exit_codes!())
    )]
    Get {
        kind: GetKind,
        name: Option<String>,
        /// The node, for templates, sandboxes and pools.
        #[arg(long)]
        node: Option<String>,
        /// All namespaces.
        #[arg(short = 'A', long)]
        all_namespaces: bool,
        /// Only objects with these labels (`k=v,k2=v2`).
        #[arg(short = 'l', long)]
        selector: Option<String>,
        /// A LABELS column.
        #[arg(long)]
        show_labels: bool,
        /// After the objects as they are, print each change as it happens, until interrupted (machines, machinepools, machineclaims).
        #[arg(short = 'w', long)]
        watch: bool,
    },
    /// Show one machine (with its Lifecycle line), machinepool (with its members) or machineclaim (with its usage).
    #[command(after_help = concat!("Examples:\n  kaironctl describe m agent-42\n  kaironctl describe mp agents\n  kaironctl describe mc agents-x7k2p", exit_codes!()))]
    Describe { kind: Kind, name: String },
    /// Delete a machine, machinepool or machineclaim: by NAME, by label (-l) or every one in the namespace (--all).
    #[command(
        after_help = concat!("Examples:\n  kaironctl delete m agent-42 --wait\n  kaironctl delete machines -l team=a\n  kaironctl delete mc --all", exit_codes!())
    )]
    #[command(group(clap::ArgGroup::new("which").required(true).args(["name", "selector", "all"])))]
    Delete {
        kind: Kind,
        name: Option<String>,
        /// Every object with these labels (`k=v,k2=v2`).
        #[arg(short = 'l', long)]
        selector: Option<String>,
        /// Every object of the kind in the namespace.
        #[arg(long)]
        all: bool,
        #[command(flatten)]
        dry: DryRun,
        /// Wait until it is gone.
        #[arg(long)]
        wait: bool,
    },
    /// Wait until a machine, machinepool or machineclaim reaches a phase, has a condition, or is gone.
    #[command(
        after_help = "Examples:\n  kaironctl wait m agent-42 --for phase=Running\n  kaironctl wait machine agent-42 --for condition=Ready --timeout 2m\n  kaironctl wait mc my-claim --for delete\n\nExit codes: 0 reached, 1 timed out or refused (e.g. NotFound), 2 usage error, 3 server unreachable."
    )]
    Wait {
        kind: Kind,
        name: String,
        /// `phase=PHASE`, `condition=TYPE` (its status True) or `delete`.
        #[arg(long = "for", value_parser = WaitFor::parse)]
        until: WaitFor,
        /// How long to wait (e.g. 90s, 5m).
        #[arg(long, value_parser = duration::parse, default_value = "5m")]
        timeout: Duration,
    },
    /// Start a Machine (`--paused` boots it and pauses it at once).
    #[command(after_help = concat!("Examples:\n  kaironctl start agent-42\n  kaironctl start agent-42 --paused", exit_codes!()))]
    Start {
        #[arg(add = complete::machines())]
        name: String,
        #[arg(long)]
        paused: bool,
        #[command(flatten)]
        dry: DryRun,
    },
    /// Stop a Machine (its disk is lost unless it is on spec.volumes).
    #[command(after_help = concat!("Examples:\n  kaironctl stop agent-42\n  kaironctl stop agent-42 --dry-run", exit_codes!()))]
    Stop(PowerArgs),
    /// Halt a VM (guest power-off; resume boots it).
    #[command(after_help = concat!("Examples:\n  kaironctl halt vm-1", exit_codes!()))]
    Halt(PowerArgs),
    /// Pause a Machine (memory kept, no CPU).
    #[command(after_help = concat!("Examples:\n  kaironctl pause agent-42", exit_codes!()))]
    Pause(PowerArgs),
    /// Resume a Machine.
    #[command(after_help = concat!("Examples:\n  kaironctl resume agent-42", exit_codes!()))]
    Resume(PowerArgs),
    /// Restart a Machine.
    #[command(after_help = concat!("Examples:\n  kaironctl restart agent-42", exit_codes!()))]
    Restart(PowerArgs),
    /// Hibernate a VM (memory to disk, the VMM exits).
    #[command(after_help = concat!("Examples:\n  kaironctl hibernate vm-1", exit_codes!()))]
    Hibernate(PowerArgs),
    /// Move a Machine to another node: a template sandbox cold (its files copied, its processes
    /// restart), a VM live. `--dry-run` prints the plan and, for every node, why it fits or not.
    #[command(after_help = concat!("Examples:\n  kaironctl migrate vm-1 --to node-b --dry-run\n  kaironctl migrate sb-1", exit_codes!()))]
    Migrate {
        #[arg(add = complete::machines())]
        name: String,
        /// The node to move to (default: the fitting node with the most free memory).
        #[arg(long, visible_alias = "to")]
        target_node: Option<String>,
        #[command(flatten)]
        dry: DryRun,
    },
    /// Open a port of a Machine to any browser with no header: print a new preview link (an origin
    /// of its own, for --ttl), or list or revoke the Machine's links.
    #[command(after_help = concat!("Examples:\n  kaironctl preview web-1 8000\n  kaironctl preview web-1 3000 --ttl 24h\n  kaironctl preview web-1 --list\n  kaironctl preview web-1 --revoke 3f9c2a1b7d4e", exit_codes!()))]
    Preview {
        #[arg(add = complete::machines())]
        name: String,
        /// The guest port the link opens.
        #[arg(required_unless_present_any = ["list", "revoke"])]
        port: Option<std::num::NonZeroU16>,
        /// How long the link lives, e.g. 30m, 24h (default: the server's hour; at most 7 days).
        #[arg(long, value_parser = duration::parse)]
        ttl: Option<Duration>,
        /// List the Machine's live links instead (their URLs are shown only when made).
        #[arg(long, conflicts_with_all = ["port", "ttl", "revoke"])]
        list: bool,
        /// Revoke the link with this id instead.
        #[arg(long, value_name = "ID", conflicts_with_all = ["port", "ttl"])]
        revoke: Option<String>,
    },
    /// Move a Machine's end (max lifetime, ttlSeconds, its claim's TTL) later by DURATION.
    #[command(after_help = concat!("Examples:\n  kaironctl extend agent-42 1h\n  kaironctl extend agent-42 90s --dry-run", exit_codes!()))]
    Extend {
        #[arg(add = complete::machines())]
        name: String,
        /// How much later, e.g. 30m, 1h, 90 (seconds).
        #[arg(value_parser = duration::parse)]
        by: Duration,
        #[command(flatten)]
        dry: DryRun,
    },
    /// Freeze a VM's filesystems through the guest agent, thawing on its own after the timeout.
    #[command(after_help = concat!("Examples:\n  kaironctl freeze vm-1 --unfreeze-timeout 2m", exit_codes!()))]
    Freeze {
        #[arg(add = complete::machines())]
        name: String,
        /// e.g. 5m (default: the server's).
        #[arg(long, value_parser = duration::parse)]
        unfreeze_timeout: Option<Duration>,
    },
    /// Thaw a frozen VM's filesystems.
    #[command(after_help = concat!("Examples:\n  kaironctl unfreeze vm-1", exit_codes!()))]
    Unfreeze {
        #[arg(add = complete::machines())]
        name: String,
    },
    /// Fork a running Machine into NEW (live on a VM; the filesystem of a sandbox).
    #[command(after_help = concat!("Examples:\n  kaironctl fork agent-42 agent-42-try", exit_codes!()))]
    Fork {
        #[arg(add = complete::machines())]
        name: String,
        new_name: String,
    },
    /// Claim a warm member of a MachinePool.
    #[command(after_help = concat!("Examples:\n  kaironctl claim agents\n  kaironctl claim agents --ttl 1h --name my-claim -e TASK=42\n  kaironctl claim agents --no-wait -o name", exit_codes!()))]
    Claim(ClaimArgs),
    /// Run a command in a Machine: `exec NAME -- CMD ARGS...`, its stdout and stderr shown as they are produced and its exit code kaironctl's (124 when `--timeout`, 300 s by default, kills it); with `-i`, stream this terminal's stdin to it and its output back as it comes (`echo ls | kaironctl exec -i NAME -- sh`); with `-it`, on a terminal of its own (a shell, vi, top). VMs need kairon-agent in their image (the default image has it).
    #[command(after_help = concat!("Examples:\n  kaironctl exec agent-42 -- uname -a\n  kaironctl exec agent-42 -e DEBUG=1 --cwd /tmp -- sh -c 'ls -l'\n  echo 'print(1+1)' | kaironctl exec -i agent-42 -- python3\n  kaironctl exec -it agent-42 -- sh\n  kaironctl exec -it -u 1000 -e TERM=xterm --cwd /tmp agent-42 -- sh", exit_codes!()))]
    Exec {
        #[arg(add = complete::machines())]
        name: String,
        #[arg(last = true, required = true)]
        command: Vec<String>,
        /// Stream stdin to the command and its output (stdout and stderr as one stream) back as it is produced.
        #[arg(short = 'i', long = "stdin", conflicts_with = "timeout")]
        interactive: bool,
        /// With -i: run the command on a terminal (`exec -it NAME -- sh`): keys go as typed (^C
        /// included), the guest's screen comes back, and resizing this terminal resizes it.
        #[arg(short = 't', long = "tty", requires = "interactive")]
        tty: bool,
        #[arg(long)]
        cwd: Option<String>,
        /// Kill the command after this long (`90s`, `10m`; default 300 s, as the server's).
        #[arg(long, value_parser = duration::parse)]
        timeout: Option<Duration>,
        /// An environment variable `KEY=VALUE` of the command; repeat for more.
        #[arg(short = 'e', long = "env", value_parser = parse_key_value)]
        env: Vec<(String, String)>,
        /// Run as `uid[:gid]` instead of root.
        #[arg(short = 'u', long)]
        user: Option<String>,
    },
    /// Attach to a Machine's console: a shell in a sandbox, the serial console of a VM; stdin goes to it, its output comes back, and the shell's exit code is kaironctl's.
    #[command(after_help = concat!("Examples:\n  kaironctl console agent-42\n  echo 'ls /' | kaironctl console agent-42", exit_codes!()))]
    Console {
        #[arg(add = complete::machines())]
        name: String,
    },
    /// Forward a local port to a port of the guest: `port-forward NAME 8080:80` (`:80` picks a free local port; `80` is 80:80). Each connection gets its own stream; runs until interrupted.
    #[command(after_help = concat!("Examples:\n  kaironctl port-forward agent-42 8080:80\n  kaironctl port-forward agent-42 :8888\n  kaironctl port-forward vm-1 2222:22 & ssh -p 2222 root@127.0.0.1", exit_codes!()))]
    PortForward {
        #[arg(add = complete::machines())]
        name: String,
        /// `LOCAL:REMOTE`, `:REMOTE` or `PORT`; with --stdio, the guest's PORT alone.
        ports: String,
        /// Carry one connection over this process's stdin and stdout instead of listening (an
        /// SSH ProxyCommand: `ssh -o ProxyCommand='kaironctl port-forward vm-1 --stdio 22' root@vm-1`).
        #[arg(long)]
        stdio: bool,
    },
    /// SSH into a VM (its image runs an SSH server; Kairon's own image runs dropbear) through the API's port-forward: no port of the guest is exposed. Host keys are kept in ~/.local/state/kairon/known_hosts. Sandboxes run no SSH server: use `exec -it NAME -- sh`.
    #[command(after_help = concat!("Examples:
  kaironctl ssh vm-1
  kaironctl ssh vm-1 -l admin -- -i ~/.ssh/id_ed25519 uname -a", exit_codes!()))]
    Ssh {
        #[arg(add = complete::machines())]
        name: String,
        /// The user to log in as.
        #[arg(short = 'l', long, default_value = "root")]
        user: String,
        /// The guest's SSH port.
        #[arg(long, default_value_t = 22)]
        port: u16,
        /// More arguments for ssh (options, then a remote command), after `--`.
        #[arg(last = true)]
        args: Vec<String>,
    },
    /// Copy a file or a directory: `cp LOCAL MACHINE:/path` or `cp MACHINE:/path LOCAL` (`-` is stdin/stdout; a directory streams as tar, so the guest needs `tar`).
    #[command(after_help = concat!("Examples:\n  kaironctl cp ./data.csv agent-42:/tmp/data.csv\n  kaironctl cp ./src agent-42:/work/src\n  kaironctl cp agent-42:/work/out ./out\n  kaironctl cp agent-42:/tmp/out.json -\n  tar c . | kaironctl cp - agent-42:/tmp/src.tar", exit_codes!()))]
    Cp {
        src: String,
        dst: String,
        /// Octal mode of an uploaded file.
        #[arg(long)]
        mode: Option<String>,
    },
    /// A background process's output: `logs MACHINE PID [--follow] [--stderr]`.
    #[command(after_help = concat!("Examples:\n  kaironctl logs agent-42 p-1 --follow\n  kaironctl logs agent-42 p-1 --stderr", exit_codes!()))]
    Logs {
        #[arg(add = complete::machines())]
        name: String,
        pid: String,
        #[arg(short, long)]
        follow: bool,
        #[arg(long)]
        stderr: bool,
    },
    /// Claim usage: totals grouped by namespace, claim or day (`usage --from 2026-11-01`), or one claim's history (`usage --claim UID`).
    #[command(after_help = concat!("Examples:\n  kaironctl usage\n  kaironctl usage --from 2026-11-01 --group-by day\n  kaironctl usage --claim 6f1c...-uid -o json", exit_codes!()))]
    Usage {
        #[arg(long)]
        from: Option<String>,
        #[arg(long)]
        to: Option<String>,
        #[arg(long, value_parser = ["namespace", "claim", "day"])]
        group_by: Option<String>,
        #[arg(long)]
        claim: Option<String>,
    },
    /// What machines use now: CPU (percent of one core, over a short window), memory against the limit, disk, network and processes, sampled on their nodes.
    #[command(after_help = concat!("Examples:\n  kaironctl top machines\n  kaironctl top m agent-42\n  kaironctl top m -A -l team=a\n  kaironctl top m agent-42 --window-ms 2000 -o json", exit_codes!()))]
    Top {
        #[arg(value_parser = ["machines", "machine", "m"])]
        kind: String,
        #[arg(add = complete::machines())]
        name: Option<String>,
        /// All namespaces.
        #[arg(short = 'A', long)]
        all_namespaces: bool,
        /// Only machines with these labels (`k=v,k2=v2`).
        #[arg(short = 'l', long)]
        selector: Option<String>,
        /// How long CPU is measured over, in milliseconds (100 to 10000; default 500).
        #[arg(long, value_name = "MS")]
        window_ms: Option<u64>,
    },
    /// Build a sandbox template from an OCI image and build steps: the namespace's own (a
    /// KaironTemplate, built by the nodes that run it), or with --node an admin's shared
    /// template on that node.
    #[command(after_help = concat!("Examples:\n  kaironctl build template py312 --image docker.io/library/python:3.12-slim --step 'pip install pandas' --wait\n  kaironctl build template python --node local --image docker.io/library/python:3.12-slim", exit_codes!()))]
    Build {
        #[arg(value_parser = ["template"])]
        kind: String,
        name: String,
        /// Build a shared template on this node (admin only) rather than the namespace's own.
        #[arg(long)]
        node: Option<String>,
        #[arg(long)]
        image: String,
        /// A shell command run as root over the image (repeat for several, run in order).
        #[arg(long = "step")]
        steps: Vec<String>,
        /// Return once it is built, showing how much of the image is in (on a terminal).
        #[arg(long)]
        wait: bool,
        /// With --wait: how long to wait.
        #[arg(long, value_parser = duration::parse, default_value = "30m")]
        timeout: Duration,
    },
    /// Ask a node's egress policy whether a sandbox may reach HOST.
    #[command(after_help = concat!("Examples:\n  kaironctl egress-check api.github.com --node local", exit_codes!()))]
    EgressCheck {
        host: String,
        #[arg(long)]
        node: String,
    },
    /// Print a shell completion script (bash, zsh, fish, elvish, powershell).
    #[command(after_help = concat!("Examples:\n  kaironctl completion bash > /etc/bash_completion.d/kaironctl\n  source <(kaironctl completion zsh)", exit_codes!()))]
    Completion { shell: clap_complete::Shell },
    /// Show where kaironctl connects and where each setting came from (flags, KAIRON_* or a
    /// kubeconfig): `kaironctl config view`.
    #[command(after_help = concat!("Examples:\n  kaironctl config view\n  KAIRON_URL=https://127.0.0.1:6443 kaironctl config view", exit_codes!()))]
    Config {
        #[command(subcommand)]
        cmd: ConfigCmd,
    },
}

#[derive(Args)]
struct ClaimArgs {
    #[arg(add = complete::pools())]
    pool: String,
    /// Release the claim this long after it binds (e.g. 1h).
    #[arg(long, value_parser = duration::parse)]
    ttl: Option<Duration>,
    /// The claim's name (default POOL-<random>).
    #[arg(long)]
    name: Option<String>,
    /// Return at once instead of waiting for the claim to bind.
    #[arg(long)]
    no_wait: bool,
    /// `KEY=VALUE` for every exec and process in the claimed Machine; repeat for more.
    #[arg(short = 'e', long = "env", value_parser = parse_key_value)]
    env: Vec<(String, String)>,
    /// `NAME=SECRET/KEY` for every exec in the claimed Machine (a labelled Secret of the
    /// namespace); repeat for more.
    #[arg(long = "secret-env", value_parser = parse_secret_ref)]
    secret_env: Vec<(String, String, String)>,
}

#[derive(Args)]
struct DryRun {
    /// Send the change with dryRun=All: print the result without storing it.
    #[arg(long)]
    dry_run: bool,
}

impl DryRun {
    fn param(&self) -> Option<&'static str> {
        self.dry_run.then_some("All")
    }
}

/// The kinds `describe`, `delete` and `wait` take, by kubectl's names: singular, plural or short.
#[derive(Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum Kind {
    #[value(aliases = ["machines", "m"])]
    Machine,
    #[value(aliases = ["machinepools", "mp"])]
    Machinepool,
    #[value(aliases = ["machineclaims", "mc"])]
    Machineclaim,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::Machine => "machine",
            Kind::Machinepool => "machinepool",
            Kind::Machineclaim => "machineclaim",
        }
    }
}

/// What `get` lists: the three kinds and what a node holds.
#[derive(Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum GetKind {
    #[value(aliases = ["machine", "m"])]
    Machines,
    #[value(aliases = ["machinepool", "mp"])]
    Machinepools,
    #[value(aliases = ["machineclaim", "mc"])]
    Machineclaims,
    #[value(alias = "node")]
    Nodes,
    #[value(alias = "template")]
    Templates,
    #[value(alias = "sandbox")]
    Sandboxes,
    #[value(alias = "pool")]
    Pools,
    /// The namespace's KaironQuotas: use against limits.
    #[value(aliases = ["quotas", "kquota", "kaironquota", "kaironquotas"])]
    Quota,
}

impl GetKind {
    fn name(self) -> &'static str {
        match self {
            GetKind::Machines => "machines",
            GetKind::Machinepools => "machinepools",
            GetKind::Machineclaims => "machineclaims",
            GetKind::Nodes => "nodes",
            GetKind::Templates => "templates",
            GetKind::Sandboxes => "sandboxes",
            GetKind::Pools => "pools",
            GetKind::Quota => "quota",
        }
    }
}

/// `wait --for`: what the server's `…/wait` waits for.
#[derive(Clone, PartialEq, Eq, Debug)]
enum WaitFor {
    Phase(String),
    Condition(String),
    Delete,
}

/// What was reached: `phase Running`, `condition Ready`, `deleted`.
impl std::fmt::Display for WaitFor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            WaitFor::Phase(p) => write!(f, "phase {p}"),
            WaitFor::Condition(c) => write!(f, "condition {c}"),
            WaitFor::Delete => f.write_str("deleted"),
        }
    }
}

impl WaitFor {
    fn parse(s: &str) -> std::result::Result<WaitFor, String> {
        match s.split_once('=') {
            Some(("phase", p)) if !p.is_empty() => Ok(WaitFor::Phase(p.into())),
            Some(("condition", c)) if !c.is_empty() => Ok(WaitFor::Condition(c.into())),
            None if s == "delete" => Ok(WaitFor::Delete),
            _ => Err(format!("{s:?}: use phase=PHASE, condition=TYPE or delete")),
        }
    }
}

#[derive(Args)]
struct PowerArgs {
    #[arg(add = complete::machines())]
    name: String,
    #[command(flatten)]
    dry: DryRun,
}

#[derive(Args)]
struct CreateArgs {
    /// NAME of a Machine, or `machinepool` / `clone`.
    what: String,
    /// The pool's name (`create machinepool NAME`), or the clone's source (`create clone SOURCE NEW`).
    name: Option<String>,
    /// The clone's name.
    new_name: Option<String>,
    /// VM image path on the node (qcow2).
    #[arg(long)]
    image: Option<String>,
    /// A sandbox template instead of an image (`python`, `busybox`, or one you built).
    #[arg(long, alias = "template")]
    sandbox_template: Option<String>,
    #[arg(long)]
    cpu: Option<String>,
    #[arg(long)]
    memory: Option<String>,
    /// Suspend after this long idle (e.g. 10m; at least 1m).
    #[arg(long, value_parser = duration::parse)]
    idle_timeout: Option<Duration>,
    #[arg(long, value_parser = ["Pause", "Hibernate", "Halt", "Stop", "Delete"])]
    idle_action: Option<String>,
    /// Guest CPU below this (millicores) counts as idle.
    #[arg(long)]
    idle_cpu: Option<i64>,
    /// Delete the Machine this long after creation (e.g. 24h).
    #[arg(long, value_parser = duration::parse)]
    max_lifetime: Option<Duration>,
    /// Relay routes resume the Machine when the controller idle-suspended it (on by default with
    /// --sandbox, as in the SDKs).
    #[arg(long, conflicts_with = "no_wake_on_connect")]
    wake_on_connect: bool,
    /// With --sandbox: leave wake-on-connect off.
    #[arg(long)]
    no_wake_on_connect: bool,
    /// Delete the Machine this long after creation (spec.ttlSeconds; `0`: no deadline). With
    /// --sandbox 5m unless given or --max-lifetime is, as in the SDKs.
    #[arg(long, value_parser = duration::parse)]
    ttl: Option<Duration>,
    #[arg(long, value_parser = duration::parse)]
    wake_timeout: Option<Duration>,
    /// Create it in this power state (Running, Paused, Stopped...).
    #[arg(long, value_parser = ["Running", "Paused", "Hibernated", "Halted", "Stopped"])]
    power_state: Option<String>,
    /// A sandbox as the SDKs make one: labelled kairon.zyvor.dev/sandbox=true, guest agent on,
    /// wake-on-connect on, deleted after 5m unless --ttl or --max-lifetime says otherwise.
    #[arg(long)]
    sandbox: bool,
    /// A label `KEY=VALUE` on the Machine (a pool's: on its members); repeat for more.
    #[arg(short = 'L', long = "label", value_parser = parse_key_value)]
    labels: Vec<(String, String)>,
    /// `KEY=VALUE` for every exec and process in the Machine (a pool's: its members); repeat for more.
    #[arg(short = 'e', long = "env", value_parser = parse_key_value)]
    env: Vec<(String, String)>,
    /// What the guest reaches: `internet` (what its node allows; the default), `none`, or the
    /// hosts to allow, comma-separated (`pypi.org,.pythonhosted.org,198.51.100.0/24`).
    #[arg(long, value_name = "internet|none|HOSTS")]
    network: Option<String>,
    /// `NAME=SECRET/KEY`: NAME is read from that key of a Secret of the namespace (labelled
    /// kairon.zyvor.dev/secret-env=true) for every exec; repeat for more.
    #[arg(long = "secret-env", value_parser = parse_secret_ref)]
    secret_env: Vec<(String, String, String)>,
    /// Pool size.
    #[arg(long)]
    replicas: Option<i64>,
    #[arg(long, value_parser = ["Running", "Paused"])]
    warm_power_state: Option<String>,
    /// How long a Paused pool's member runs before it is paused (e.g. 45s).
    #[arg(long, value_parser = duration::parse)]
    warmup: Option<Duration>,
    /// A pool: return once every replica is warm, showing how many are (on a terminal).
    #[arg(long)]
    wait: bool,
    /// With --wait: how long to wait.
    #[arg(long, value_parser = duration::parse, default_value = "10m")]
    timeout: Duration,
    #[command(flatten)]
    dry: DryRun,
}

/// What went wrong, for the exit code.
enum Failure {
    Refused(String),
    Unreachable(String),
}

fn main() -> ExitCode {
    let _ = rustls::crypto::ring::default_provider().install_default();
    // A shell asking for completions (COMPLETE=bash kaironctl -- WORDS...): answered, then exit.
    clap_complete::CompleteEnv::with_factory(Cli::command).complete();
    let cli = Cli::parse();
    if let Cmd::Completion { shell } = &cli.cmd {
        return match complete::register(*shell, &mut std::io::stdout()) {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => {
                eprintln!("error: {e}");
                ExitCode::from(1)
            }
        };
    }
    let rt = tokio::runtime::Builder::new_current_thread().enable_all().build().expect("tokio runtime");
    match rt.block_on(run(cli)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            let (code, msg) = match e.downcast_ref::<Failure>() {
                Some(Failure::Unreachable(m)) => (3, m.clone()),
                Some(Failure::Refused(m)) => (1, m.clone()),
                None => (1, format!("{e:#}")),
            };
            eprintln!("error: {msg}");
            ExitCode::from(code)
        }
    }
}

impl std::fmt::Debug for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Failure::Refused(m) | Failure::Unreachable(m) => f.write_str(m),
        }
    }
}
impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        std::fmt::Debug::fmt(self, f)
    }
}
impl std::error::Error for Failure {}

/// The server's `{reason, message}` as the error, or "could not reach" (exit 3).
fn fail(e: Error<types::ErrorBody>) -> anyhow::Error {
    match e {
        Error::ErrorResponse(r) => {
            let status = r.status().as_u16();
            let b = r.into_inner();
            anyhow::Error::new(Failure::Refused(format!("{} ({status}): {}", b.reason, b.message)))
        }
        Error::CommunicationError(e) => {
            anyhow::Error::new(Failure::Unreachable(format!("could not reach the server: {e}")))
        }
        Error::UnexpectedResponse(r) => {
            anyhow::Error::new(Failure::Refused(format!("unexpected response {}", r.status())))
        }
        other => anyhow::Error::new(Failure::Refused(format!("{other}"))),
    }
}

fn to_value<T: serde::Serialize>(v: &T) -> Value {
    serde_json::to_value(v).unwrap_or(Value::Null)
}

fn client(cli: &Cli) -> Result<(Client, String, config::Target)> {
    let t = config::load(config::Flags {
        kubeconfig: cli.kubeconfig.clone(),
        server: cli.server.clone(),
        token: cli.token.clone(),
        ca_file: cli.ca_file.clone(),
        namespace: cli.namespace.clone(),
    })?;
    let mut headers = reqwest::header::HeaderMap::new();
    if let Some(tok) = &t.token {
        let mut v = reqwest::header::HeaderValue::from_str(&format!("Bearer {tok}"))
            .context("the token has characters a header cannot carry")?;
        v.set_sensitive(true);
        headers.insert(reqwest::header::AUTHORIZATION, v);
    }
    let mut b = reqwest::Client::builder().default_headers(headers).connect_timeout(Duration::from_secs(15));
    if let Some(pem) = &t.ca_pem {
        let certs = reqwest::Certificate::from_pem_bundle(pem).context("the kubeconfig's CA is not PEM")?;
        b = b.tls_certs_merge(certs);
    }
    let ns = t.namespace.clone();
    Ok((Client::new_with_client(&t.server, b.build()?), ns, t))
}

fn manifest<T: serde::de::DeserializeOwned>(v: Value) -> Result<T> {
    serde_json::from_value(v).context("building the request")
}

async fn run(cli: Cli) -> Result<()> {
    let (c, ns, target) = client(&cli)?;
    let fmt = cli.output;
    match cli.cmd {
        Cmd::Completion { .. } => unreachable!("handled before connecting"),
        Cmd::Config { cmd: ConfigCmd::View } => {
            let mut rows = vec![vec!["server".to_string(), target.server.clone(), target.sources[0].1.clone()]];
            let token = if target.token.is_some() { "(set)" } else { "(none)" };
            rows.push(vec!["token".into(), token.into(), target.sources[1].1.clone()]);
            let ca = if target.ca_pem.is_some() { "(set)" } else { "(system roots)" };
            rows.push(vec!["ca".into(), ca.into(), target.sources[2].1.clone()]);
            rows.push(vec!["namespace".into(), target.namespace.clone(), target.sources[3].1.clone()]);
            output::print_rows(&["SETTING", "VALUE", "FROM"], &rows, true);
            Ok(())
        }
        Cmd::Create(a) => create(&c, &ns, fmt, *a).await,
        Cmd::Get { kind, name, node, all_namespaces, selector, show_labels, watch } => {
            let list = GetArgs {
                node: node.as_deref(),
                all: all_namespaces,
                selector: selector.as_deref(),
                show_labels,
                watch,
            };
            get(&c, &ns, fmt, kind, name.as_deref(), list).await
        }
        Cmd::Describe { kind, name } => describe(&c, &ns, fmt, kind, &name).await,
        Cmd::Delete { kind, name, selector, all: _, dry, wait } => {
            let names = match name {
                Some(n) => vec![n],
                // -l or --all: the namespace's objects of the kind, by label when -l gives them.
                None => list(&c, &ns, kind, false, selector.as_deref())
                    .await?
                    .iter()
                    .filter_map(|o| o["metadata"]["name"].as_str().map(String::from))
                    .collect(),
            };
            if names.is_empty() && fmt.is_table() {
                eprintln!("no {}s found in namespace {ns}", kind.name());
            }
            for name in names {
                let v = delete(&c, &ns, kind, &name, dry.param()).await?;
                if wait && !dry.dry_run {
                    wait_until(&c, &ns, kind, &name, &WaitFor::Delete, Duration::from_secs(600)).await?;
                }
                if fmt == Format::Name {
                    println!("{}/{name}", kind.name());
                } else {
                    output::done(fmt, &v, &format!("{} {name} deleted{}", kind.name(), dry_note(dry.dry_run)))?;
                }
            }
            Ok(())
        }
        Cmd::Wait { kind, name, until, timeout } => {
            let spinner = progress::Spinner::start(format!("waiting for {}/{name} ({until})", kind.name()));
            let v = wait_until(&c, &ns, kind, &name, &until, timeout).await;
            drop(spinner);
            let v = v?;
            if fmt == Format::Name {
                println!("{}/{name}", kind.name());
                return Ok(());
            }
            output::done(fmt, &v, &format!("{}/{name} {until}", kind.name()))
        }
        Cmd::Start { name, paused, dry } => {
            let m = c.machine_start(&ns, &name, dry.param(), paused.then_some(true)).await.map_err(fail)?.into_inner();
            power_done(fmt, &m, &name, if paused { "started paused" } else { "started" }, dry.dry_run)
        }
        Cmd::Stop(p) => power_done(
            fmt,
            &c.machine_stop(&ns, &p.name, p.dry.param()).await.map_err(fail)?.into_inner(),
            &p.name,
            "stopped",
            p.dry.dry_run,
        ),
        Cmd::Halt(p) => power_done(
            fmt,
            &c.machine_halt(&ns, &p.name, p.dry.param()).await.map_err(fail)?.into_inner(),
            &p.name,
            "halted",
            p.dry.dry_run,
        ),
        Cmd::Pause(p) => power_done(
            fmt,
            &c.machine_pause(&ns, &p.name, p.dry.param()).await.map_err(fail)?.into_inner(),
            &p.name,
            "paused",
            p.dry.dry_run,
        ),
        Cmd::Resume(p) => power_done(
            fmt,
            &c.machine_resume(&ns, &p.name, p.dry.param()).await.map_err(fail)?.into_inner(),
            &p.name,
            "resumed",
            p.dry.dry_run,
        ),
        Cmd::Restart(p) => power_done(
            fmt,
            &c.machine_restart(&ns, &p.name, p.dry.param()).await.map_err(fail)?.into_inner(),
            &p.name,
            "restarted",
            p.dry.dry_run,
        ),
        Cmd::Hibernate(p) => power_done(
            fmt,
            &c.machine_hibernate(&ns, &p.name, p.dry.param()).await.map_err(fail)?.into_inner(),
            &p.name,
            "hibernated",
            p.dry.dry_run,
        ),
        Cmd::Migrate { name, target_node, dry } => {
            let r =
                c.machine_migrate(&ns, &name, dry.param(), target_node.as_deref()).await.map_err(fail)?.into_inner();
            let v = to_value(&r);
            if !fmt.is_table() {
                return output::print(fmt, &v);
            }
            output::migration(&v, &name, dry.dry_run);
            Ok(())
        }
        Cmd::Preview { name, port, ttl, list, revoke } => {
            if list {
                let links = c.preview_list(&ns, &name).await.map_err(fail)?.into_inner();
                if !fmt.is_table() {
                    return output::print(fmt, &to_value(&links));
                }
                println!("{:<14} {:>5}  {:<25}  CREATED BY", "ID", "PORT", "EXPIRES");
                for l in &links {
                    println!("{:<14} {:>5}  {:<25}  {}", l.id, l.port, l.expires_at.to_rfc3339(), l.created_by);
                }
                return Ok(());
            }
            if let Some(id) = revoke {
                c.preview_revoke(&ns, &name, &id).await.map_err(fail)?;
                return output::done(fmt, &serde_json::json!({ "revoked": id }), &format!("preview {id} revoked"));
            }
            let port = port.expect("clap requires a port without --list or --revoke");
            let ttl_seconds = match ttl {
                Some(t) => Some(
                    std::num::NonZeroU64::new(t.as_secs())
                        .ok_or_else(|| anyhow::Error::new(Failure::Refused("--ttl must be at least 1s".into())))?,
                ),
                None => None,
            };
            let body = types::PreviewRequest { port: port.into(), ttl_seconds };
            let made = c.preview_create(&ns, &name, &body).await.map_err(fail)?.into_inner();
            if !fmt.is_table() {
                return output::print(fmt, &to_value(&made));
            }
            println!("{}", made.url.as_deref().unwrap_or_default());
            eprintln!(
                "preview {} of {name}:{port}, until {} (kaironctl preview {name} --revoke {0})",
                made.id,
                made.expires_at.to_rfc3339()
            );
            Ok(())
        }
        Cmd::Extend { name, by, dry } => {
            let seconds = std::num::NonZeroU64::new(by.as_secs())
                .ok_or_else(|| anyhow::Error::new(Failure::Refused("extend by at least 1s".into())))?;
            let body = types::ExtendRequest { seconds };
            let r = c.machine_extend(&ns, &name, dry.param(), &body).await.map_err(fail)?.into_inner();
            let note = format!("machine {name} now expires at {}{}", r.expires_at, dry_note(dry.dry_run));
            output::done(fmt, &to_value(&r), &note)
        }
        Cmd::Freeze { name, unfreeze_timeout } => {
            let t = unfreeze_timeout.map(|d| format!("{}s", d.as_secs()));
            let m = c.machine_freeze(&ns, &name, t.as_deref()).await.map_err(fail)?.into_inner();
            power_done(fmt, &m, &name, "freezing", false)
        }
        Cmd::Unfreeze { name } => {
            power_done(fmt, &c.machine_unfreeze(&ns, &name).await.map_err(fail)?.into_inner(), &name, "thawing", false)
        }
        Cmd::Fork { name, new_name } => {
            let copy = types::CopyRequest { name: copy_name(&new_name)? };
            let r = c.machine_fork(&ns, &name, &copy).await.map_err(fail)?.into_inner();
            let how = if r.live { "live: memory and disk" } else { "filesystem" };
            output::done(fmt, &to_value(&r), &format!("machine {new_name} forked from {name} ({how})"))
        }
        Cmd::Claim(a) => claim(&c, &ns, fmt, a).await,
        Cmd::Exec { name, command, interactive: true, tty, env, user, cwd, .. } => {
            let relays = stream::Relays::new(&target)?;
            let command = stream::StreamedExec { command, env, user, cwd };
            let code = if tty && terminal::interactive() {
                relays.exec_tty(&ns, &name, &command).await?
            } else {
                if tty {
                    eprintln!("warning: -t needs a terminal and stdin is not one: running without");
                }
                relays.exec(&ns, &name, &command).await?
            };
            exit_with(code)
        }
        Cmd::Console { name } => {
            let code = stream::Relays::new(&target)?.console(&ns, &name).await?;
            exit_with(code)
        }
        Cmd::PortForward { name, ports, stdio: true } => {
            let port: u16 = ports.parse().ok().filter(|p| *p > 0).ok_or_else(|| {
                anyhow::Error::new(Failure::Refused(format!(
                    "{ports:?}: with --stdio give the guest's port alone, e.g. 22"
                )))
            })?;
            stream::Relays::new(&target)?.port_forward_stdio(&ns, &name, port).await
        }
        Cmd::PortForward { name, ports, stdio: false } => {
            // A Machine that is not there is refused before anything listens.
            get_one(&c, &ns, Kind::Machine, &name).await?;
            std::sync::Arc::new(stream::Relays::new(&target)?).port_forward(&ns, &name, &ports).await
        }
        Cmd::Ssh { name, user, port, args } => {
            let m = get_one(&c, &ns, Kind::Machine, &name).await?;
            if m["spec"]["sandbox"].is_object() {
                return Err(anyhow::Error::new(Failure::Refused(format!(
                    "{name} is a sandbox, which runs no SSH server: use `kaironctl exec -it {name} -- sh`"
                ))));
            }
            let via = Via {
                kubeconfig: cli.kubeconfig.as_deref(),
                server: cli.server.as_deref(),
                token: cli.token.as_deref(),
            };
            ssh(&via, &ns, &name, &user, port, &args)
        }
        Cmd::Exec { name, command, cwd, timeout, env, user, interactive: false, .. } => {
            // Arguments from the command line carry no NUL byte (the server refuses one).
            let req = types::ExecRequest {
                command,
                cwd,
                env: env.into_iter().collect(),
                keep_stdin_open: None,
                stdin: None,
                timeout_seconds: timeout.map(|d| d.as_secs() as i64),
                user,
            };
            if fmt.is_table() {
                // As a terminal would: each stream's output as it comes.
                let code = exec_streamed(&c, &ns, &name, req, timeout).await?;
                std::process::exit(if (0..256).contains(&code) { code } else { 1 });
            }
            let r = c.machine_exec(&ns, &name, &req).await.map_err(fail)?.into_inner();
            output::print(fmt, &to_value(&r))
        }
        Cmd::Cp { src, dst, mode } => cp(&c, &target, &ns, &src, &dst, mode.as_deref()).await,
        Cmd::Logs { name, pid, follow, stderr } => {
            if follow {
                let stream = if stderr { "stderr" } else { "stdout" };
                let seg = stream::encode;
                let url =
                    format!("{}/api/v1/machines/{}/{}/processes/{}/logs", c.baseurl(), seg(&ns), seg(&name), seg(&pid));
                let resp = c.client().get(url).query(&[("follow", "true"), ("stream", stream)]).send().await?;
                if !resp.status().is_success() {
                    return Err(refusal(resp).await);
                }
                let mut body = resp.bytes_stream();
                let mut out = std::io::stdout();
                while let Some(chunk) = body.next().await {
                    let chunk: bytes::Bytes = chunk?;
                    out.write_all(&chunk)?;
                    out.flush()?;
                }
                return Ok(());
            }
            let l = c.process_logs(&ns, &name, &pid, None, None).await.map_err(fail)?.into_inner();
            if !fmt.is_table() {
                return output::print(fmt, &to_value(&l));
            }
            print!("{}", if stderr { &l.stderr } else { &l.stdout });
            Ok(())
        }
        Cmd::Usage { from, to, group_by, claim } => {
            if let Some(uid) = claim {
                let h = c.usage_claim(&uid).await.map_err(fail)?.into_inner();
                return output::print(if fmt.is_table() { Format::Yaml } else { fmt }, &to_value(&h));
            }
            let ns_filter = cli.namespace.as_deref();
            let r = c
                .usage_report(from.as_deref(), group_by.as_deref(), ns_filter, to.as_deref())
                .await
                .map_err(fail)?
                .into_inner();
            let v = to_value(&r);
            if !fmt.is_table() {
                return output::print(fmt, &v);
            }
            output::usage_table(&v);
            Ok(())
        }
        Cmd::Top { name, all_namespaces, selector, window_ms, .. } => {
            let targets = match name {
                Some(name) => vec![(ns.clone(), name)],
                None => list(&c, &ns, Kind::Machine, all_namespaces, selector.as_deref())
                    .await?
                    .iter()
                    // Only what runs on a node has anything to measure.
                    .filter(|m| m["status"]["runtimeID"].is_string())
                    .map(|m| {
                        let at = m["metadata"]["namespace"].as_str().unwrap_or(&ns).to_string();
                        (at, m["metadata"]["name"].as_str().unwrap_or_default().to_string())
                    })
                    .collect(),
            };
            top(&c, fmt, &targets, window_ms, all_namespaces).await
        }
        Cmd::Build { name, node: None, image, steps, wait, timeout, .. } => {
            let body: types::KaironTemplate =
                manifest(json!({ "metadata": {"name": name}, "spec": {"image": image, "steps": steps} }))?;
            let t = c.kairontemplate_create(&ns, None, &body).await.map_err(fail)?.into_inner();
            if !wait {
                return output::done(
                    fmt,
                    &to_value(&t),
                    &format!(
                        "template {name} declared in {ns}: a node builds it now (kaironctl build template {name} ... --wait follows it)"
                    ),
                );
            }
            let t = wait_own_template(&c, &ns, &name, timeout).await?;
            output::done(fmt, &t, &format!("template {name} built ({})", t["status"]["message"].as_str().unwrap_or("")))
        }
        Cmd::Build { name, node: Some(node), image, steps, wait, timeout, .. } => {
            let req: types::CreateTemplateRequest =
                manifest(json!({ "name": name, "imageRef": image, "steps": steps }))?;
            let t = c.template_build(&node, &req).await.map_err(fail)?.into_inner();
            if !wait {
                return output::done(
                    fmt,
                    &to_value(&t),
                    &format!("template {name} building on {node} (kaironctl get templates --node {node})"),
                );
            }
            let t = wait_template(&c, &node, &name, timeout).await?;
            output::done(fmt, &t, &format!("template {name} built on {node} ({})", t["digest"].as_str().unwrap_or("")))
        }
        Cmd::EgressCheck { host, node } => {
            let host_arg =
                host.parse().map_err(|_| anyhow::anyhow!("host {host:?} names no host, e.g. api.github.com"))?;
            let r = c.egress_check(&node, &types::EgressCheckBody { host: host_arg }).await.map_err(fail)?.into_inner();
            let v = to_value(&r);
            if !fmt.is_table() {
                return output::print(fmt, &v);
            }
            println!("{} {}: {}", if r.allow { "ALLOW" } else { "DENY" }, host, v["reason"].as_str().unwrap_or(""));
            if !r.allow {
                std::process::exit(1);
            }
            Ok(())
        }
    }
}

/// Ends kaironctl with a program's exit code (out of range: 1).
fn exit_with(code: i32) -> Result<()> {
    std::io::stdout().flush()?;
    std::process::exit(if (0..256).contains(&code) { code } else { 1 })
}

fn dry_note(dry: bool) -> &'static str {
    if dry { " (dry run: nothing stored)" } else { "" }
}

fn power_done(fmt: Format, m: &types::Machine, name: &str, what: &str, dry: bool) -> Result<()> {
    output::done(fmt, &to_value(m), &format!("machine {name} {what}{}", dry_note(dry)))
}

async fn create(c: &Client, ns: &str, fmt: Format, a: CreateArgs) -> Result<()> {
    match a.what.as_str() {
        "clone" => {
            let (Some(src), Some(new)) = (a.name.as_deref(), a.new_name.as_deref()) else {
                return Err(anyhow::Error::new(Failure::Refused("usage: kaironctl create clone SOURCE NEW".into())));
            };
            let copy = types::CopyRequest { name: copy_name(new)? };
            let r = c.machine_clone(ns, src, &copy).await.map_err(fail)?.into_inner();
            output::done(fmt, &to_value(&r), &format!("machine {new} cloned from {src}"))
        }
        "machinepool" => {
            let Some(name) = a.name.as_deref() else {
                return Err(anyhow::Error::new(Failure::Refused(
                    "usage: kaironctl create machinepool NAME --image PATH|--sandbox-template NAME --replicas N".into(),
                )));
            };
            let mut template = machine_spec(&a)?;
            template.as_object_mut().map(|o| o.remove("powerState"));
            // A member's deadline counts from its claim: only when asked (a claim has its own TTL).
            if a.ttl.is_none() {
                template.as_object_mut().map(|o| o.remove("ttlSeconds"));
            }
            let mut spec =
                json!({ "replicas": a.replicas.unwrap_or(1), "template": { "metadata": {}, "spec": template } });
            if let Some(labels) = labels(&a) {
                spec["template"]["metadata"] = json!({ "labels": labels });
            }
            if let Some(w) = &a.warm_power_state {
                spec["warmPowerState"] = json!(w);
            }
            if let Some(w) = a.warmup {
                spec["warmupSeconds"] = json!(w.as_secs());
            }
            let body: types::MachinePool =
                manifest(json!({ "metadata": { "name": name, "namespace": ns }, "spec": spec }))?;
            let p = c.machinepool_create(ns, a.dry.param(), &body).await.map_err(fail)?.into_inner();
            output::done(fmt, &to_value(&p), &format!("machinepool {name} created{}", dry_note(a.dry.dry_run)))?;
            if a.wait && !a.dry.dry_run {
                let want = a.replicas.unwrap_or(1);
                wait_pool_warm(c, ns, name, want, a.timeout).await?;
                if fmt.is_table() {
                    println!("machinepool {name}: {want} of {want} warm");
                }
            }
            Ok(())
        }
        name => {
            if a.name.is_some() {
                return Err(anyhow::Error::new(Failure::Refused(format!(
                    "unexpected argument {:?}: `create NAME` takes one name (or `create machinepool NAME`, `create clone SOURCE NEW`)",
                    a.name.unwrap_or_default()
                ))));
            }
            let spec = machine_spec(&a)?;
            let mut meta = json!({ "name": name, "namespace": ns });
            if let Some(labels) = labels(&a) {
                meta["labels"] = labels;
            }
            let body: types::Machine = manifest(json!({ "metadata": meta, "spec": spec }))?;
            let m = c.machine_create(ns, a.dry.param(), &body).await.map_err(fail)?.into_inner();
            output::done(fmt, &to_value(&m), &format!("machine {name} created{}", dry_note(a.dry.dry_run)))
        }
    }
}

/// The labels a created Machine (or a pool's members) carries: `--label`s and `--sandbox`'s.
fn labels(a: &CreateArgs) -> Option<Value> {
    let mut l: serde_json::Map<String, Value> = a.labels.iter().map(|(k, v)| (k.clone(), json!(v))).collect();
    if a.sandbox {
        l.insert("kairon.zyvor.dev/sandbox".into(), json!("true"));
    }
    (!l.is_empty()).then_some(Value::Object(l))
}

/// `--secret-env`: `NAME=SECRET/KEY`.
fn parse_secret_ref(s: &str) -> std::result::Result<(String, String, String), String> {
    let parsed = s.split_once('=').and_then(|(var, r)| {
        let (name, key) = r.split_once('/')?;
        (!var.is_empty() && !name.is_empty() && !key.is_empty() && !key.contains('/'))
            .then(|| (var.to_string(), name.to_string(), key.to_string()))
    });
    parsed.ok_or_else(|| format!("{s:?}: write it as NAME=SECRET/KEY"))
}

/// `--label` and `--env`: `KEY=VALUE`, the key not empty.
fn parse_key_value(s: &str) -> std::result::Result<(String, String), String> {
    match s.split_once('=') {
        Some((k, v)) if !k.is_empty() => Ok((k.into(), v.into())),
        _ => Err(format!("{s:?}: write it as KEY=VALUE")),
    }
}

fn machine_spec(a: &CreateArgs) -> Result<Value> {
    let mut spec = json!({});
    match (&a.image, &a.sandbox_template) {
        (Some(img), None) => {
            spec["image"] = json!({ "path": img });
            spec["resources"] = json!({ "cpu": a.cpu.clone().unwrap_or_else(|| "1".into()), "memory": a.memory.clone().unwrap_or_else(|| "512Mi".into()) });
        }
        (None, Some(t)) => {
            spec["sandbox"] = json!({ "templateName": t });
        }
        (Some(_), Some(_)) => {
            return Err(anyhow::Error::new(Failure::Refused("give --image or --sandbox-template, not both".into())));
        }
        (None, None) => {
            return Err(anyhow::Error::new(Failure::Refused(
                "give --image PATH (a VM) or --sandbox-template NAME (a sandbox)".into(),
            )));
        }
    }
    if a.sandbox {
        spec["guestAgent"] = json!({ "enabled": true, "console": true });
    }
    let mut lc = serde_json::Map::new();
    if let Some(d) = a.idle_timeout {
        lc.insert("idleTimeoutSeconds".into(), json!(d.as_secs()));
    }
    if let Some(x) = &a.idle_action {
        lc.insert("idleAction".into(), json!(x));
    }
    if let Some(x) = a.idle_cpu {
        lc.insert("idleCPUMillicores".into(), json!(x));
    }
    if let Some(d) = a.max_lifetime {
        lc.insert("maxLifetimeSeconds".into(), json!(d.as_secs()));
    }
    if a.wake_on_connect || (a.sandbox && !a.no_wake_on_connect) {
        lc.insert("wakeOnConnect".into(), json!(true));
    }
    if let Some(d) = a.wake_timeout {
        lc.insert("wakeTimeoutSeconds".into(), json!(d.as_secs()));
    }
    if !lc.is_empty() {
        spec["lifecycle"] = Value::Object(lc);
    }
    if let Some(p) = &a.power_state {
        spec["powerState"] = json!(p);
    }
    let ttl = match a.ttl {
        Some(t) => (!t.is_zero()).then_some(t.as_secs()),
        None => (a.sandbox && a.max_lifetime.is_none()).then_some(SANDBOX_TTL_SECONDS),
    };
    if let Some(t) = ttl {
        spec["ttlSeconds"] = json!(t);
    }
    if !a.env.is_empty() {
        spec["env"] = json!(a.env.iter().cloned().collect::<std::collections::BTreeMap<_, _>>());
    }
    if let Some(network) = a.network.as_deref().map(network_spec).transpose()?.flatten() {
        spec["network"] = network;
    }
    if !a.secret_env.is_empty() {
        spec["secretEnv"] =
            a.secret_env.iter().map(|(var, name, key)| (var.clone(), json!({ "name": name, "key": key }))).collect();
    }
    Ok(spec)
}

/// A sandbox's deadline when its maker gives none (the SDKs' and MCP's `timeout`): five minutes.
const SANDBOX_TTL_SECONDS: u64 = 300;

/// `--network`'s `spec.network`, as the SDKs' `network=` makes it (`None`: the node's policy).
fn network_spec(network: &str) -> Result<Option<Value>> {
    match network.trim() {
        "internet" => Ok(None),
        "none" => Ok(Some(json!({ "egress": { "mode": "None" } }))),
        "" => Err(anyhow::Error::new(Failure::Refused(
            "--network takes internet, none, or the hosts to allow (comma-separated)".into(),
        ))),
        hosts => {
            let allow: Vec<&str> = hosts.split(',').map(str::trim).filter(|h| !h.is_empty()).collect();
            Ok(Some(json!({ "egress": { "mode": "Allowlist", "allow": allow } })))
        }
    }
}

/// The label the pool controller puts on a pool's members (kairon-model's `keys::POOL`).
const POOL_LABEL: &str = "kairon.zyvor.dev/pool";

/// `get`'s flags beside the kind and name.
/// `top machines`: every target's metrics, sampled side by side (each takes the window). One
/// named Machine that cannot be measured is an error; of a listing, each such one is said on
/// stderr and left out.
async fn top(c: &Client, fmt: Format, targets: &[(String, String)], window: Option<u64>, all: bool) -> Result<()> {
    use futures::StreamExt as _;
    let sampled: Vec<_> = futures::stream::iter(targets)
        .map(|(ns, name)| async move { (ns, name, c.machine_metrics(ns, name, window.map(|w| w as i64)).await) })
        .buffered(32)
        .collect()
        .await;
    let mut rows = Vec::new();
    for (ns, name, got) in sampled {
        match got {
            Ok(m) => rows.push(json!({"namespace": ns, "name": name, "metrics": to_value(&m.into_inner())})),
            Err(e) if targets.len() == 1 => return Err(fail(e)),
            Err(e) => eprintln!("machine {ns}/{name}: {:#}", fail(e)),
        }
    }
    if !fmt.is_table() {
        return output::print(fmt, &Value::Array(rows));
    }
    output::top_table(&rows, all);
    Ok(())
}

struct GetArgs<'a> {
    node: Option<&'a str>,
    all: bool,
    selector: Option<&'a str>,
    show_labels: bool,
    watch: bool,
}

fn items(v: Value) -> Vec<Value> {
    match v {
        Value::Array(a) => a,
        mut v => v["items"].as_array_mut().map(std::mem::take).unwrap_or_default(),
    }
}

/// The objects of a kind in `ns` (every namespace with `all`), by label with `sel`.
async fn list(c: &Client, ns: &str, kind: Kind, all: bool, sel: Option<&str>) -> Result<Vec<Value>> {
    let v = match (kind, all) {
        (Kind::Machine, true) => to_value(&c.machine_list_all(sel, None, None).await.map_err(fail)?.into_inner()),
        (Kind::Machine, false) => to_value(&c.machine_list(ns, sel).await.map_err(fail)?.into_inner()),
        (Kind::Machinepool, true) => {
            to_value(&c.machinepool_list_all(sel, None, None).await.map_err(fail)?.into_inner())
        }
        (Kind::Machinepool, false) => to_value(&c.machinepool_list(ns, sel).await.map_err(fail)?.into_inner()),
        (Kind::Machineclaim, true) => {
            to_value(&c.machineclaim_list_all(sel, None, None).await.map_err(fail)?.into_inner())
        }
        (Kind::Machineclaim, false) => to_value(&c.machineclaim_list(ns, sel).await.map_err(fail)?.into_inner()),
    };
    Ok(items(v))
}

async fn get_one(c: &Client, ns: &str, kind: Kind, name: &str) -> Result<Value> {
    Ok(match kind {
        Kind::Machine => to_value(&c.machine_get(ns, name).await.map_err(fail)?.into_inner()),
        Kind::Machinepool => to_value(&c.machinepool_get(ns, name).await.map_err(fail)?.into_inner()),
        Kind::Machineclaim => to_value(&c.machineclaim_get(ns, name).await.map_err(fail)?.into_inner()),
    })
}

async fn delete(c: &Client, ns: &str, kind: Kind, name: &str, dry: Option<&str>) -> Result<Value> {
    Ok(match kind {
        Kind::Machine => to_value(&c.machine_delete(ns, name, dry).await.map_err(fail)?.into_inner()),
        Kind::Machinepool => to_value(&c.machinepool_delete(ns, name, dry).await.map_err(fail)?.into_inner()),
        Kind::Machineclaim => to_value(&c.machineclaim_delete(ns, name, dry).await.map_err(fail)?.into_inner()),
    })
}

/// Waits through the server's `…/wait` (at most a minute a request, its 504 asked again) until
/// `until` holds or `timeout` has passed; the object as it was then (the last one seen, for a
/// delete).
async fn wait_until(c: &Client, ns: &str, kind: Kind, name: &str, until: &WaitFor, timeout: Duration) -> Result<Value> {
    let (phase, condition, deleted) = match until {
        WaitFor::Phase(p) => (Some(p.as_str()), None, None),
        WaitFor::Condition(c) => (None, Some(c.as_str()), None),
        WaitFor::Delete => (None, None, Some(true)),
    };
    let deadline = std::time::Instant::now() + timeout;
    loop {
        let left = deadline.saturating_duration_since(std::time::Instant::now());
        let secs = Some(left.as_secs().clamp(1, 60));
        let r = match kind {
            Kind::Machine => {
                c.machine_wait(ns, name, condition, deleted, phase, secs).await.map(|v| to_value(&v.into_inner()))
            }
            Kind::Machinepool => {
                c.machinepool_wait(ns, name, condition, deleted, phase, secs).await.map(|v| to_value(&v.into_inner()))
            }
            Kind::Machineclaim => {
                c.machineclaim_wait(ns, name, condition, deleted, phase, secs).await.map(|v| to_value(&v.into_inner()))
            }
        };
        match r {
            Ok(v) => return Ok(v),
            // Already gone is what a wait for the delete wanted.
            Err(Error::ErrorResponse(r)) if r.status().as_u16() == 404 && *until == WaitFor::Delete => {
                return Ok(json!({ "kind": kind_title(kind), "metadata": { "name": name, "namespace": ns } }));
            }
            Err(Error::ErrorResponse(r)) if r.status().as_u16() == 504 => {
                if std::time::Instant::now() >= deadline {
                    return Err(anyhow::Error::new(Failure::Refused(format!(
                        "timed out after {} waiting for {} {name} ({until})",
                        duration::human(timeout.as_secs() as i64),
                        kind.name()
                    ))));
                }
            }
            Err(e) => return Err(fail(e)),
        }
    }
}

fn kind_title(kind: Kind) -> &'static str {
    match kind {
        Kind::Machine => "Machine",
        Kind::Machinepool => "MachinePool",
        Kind::Machineclaim => "MachineClaim",
    }
}

async fn get(c: &Client, ns: &str, fmt: Format, kind: GetKind, name: Option<&str>, a: GetArgs<'_>) -> Result<()> {
    let node_of = || {
        a.node.ok_or_else(|| {
            anyhow::Error::new(Failure::Refused(format!(
                "get {} needs --node NODE (kaironctl get nodes lists them)",
                kind.name()
            )))
        })
    };
    if kind == GetKind::Quota {
        let v = to_value(&c.quota(ns).await.map_err(fail)?.into_inner());
        if !fmt.is_table() {
            return output::print(fmt, &v);
        }
        output::quota_table(&v);
        return Ok(());
    }
    let object = |k: Kind, t: output::Table| (k, t);
    let objects = match kind {
        GetKind::Machines => Some(object(Kind::Machine, output::Table::Machines)),
        GetKind::Machinepools => Some(object(Kind::Machinepool, output::Table::Pools)),
        GetKind::Machineclaims => Some(object(Kind::Machineclaim, output::Table::Claims)),
        _ => None,
    };
    if a.watch {
        let Some((k, table)) = objects else {
            return Err(anyhow::Error::new(Failure::Refused(format!(
                "get -w watches machines, machinepools and machineclaims, not {}",
                kind.name()
            ))));
        };
        return watch(c, ns, fmt, (k, table), name, &a).await;
    }
    let (rows, items) = match objects {
        Some((k, table)) => {
            let items = match name {
                Some(n) => vec![get_one(c, ns, k, n).await?],
                None => list(c, ns, k, a.all, a.selector).await?,
            };
            (table, items)
        }
        None => match kind {
            GetKind::Nodes => {
                (output::Table::Nodes, items(to_value(&c.node_list(None, None).await.map_err(fail)?.into_inner())))
            }
            GetKind::Templates => {
                let n = node_of()?;
                let items = match name {
                    Some(t) => vec![to_value(&c.template_get(n, t).await.map_err(fail)?.into_inner())],
                    None => items(to_value(&c.template_list(n).await.map_err(fail)?.into_inner())),
                };
                (output::Table::Templates, items)
            }
            GetKind::Sandboxes => {
                let n = node_of()?;
                (output::Table::Sandboxes, items(to_value(&c.sandbox_list(n).await.map_err(fail)?.into_inner())))
            }
            _ => {
                let n = node_of()?;
                let items = match name {
                    Some(p) => vec![to_value(&c.pool_get(n, p).await.map_err(fail)?.into_inner())],
                    None => items(to_value(&c.pool_list(n).await.map_err(fail)?.into_inner())),
                };
                (output::Table::NodePools, items)
            }
        },
    };
    match fmt {
        _ if fmt.is_table() => {
            let view =
                output::View { all_ns: a.all, wide: fmt == Format::Wide, labels: a.show_labels, no_header: false };
            output::table(rows, &items, view);
            Ok(())
        }
        Format::Name => {
            for it in &items {
                println!("{}", output::name_of(rows.kind(), it));
            }
            Ok(())
        }
        _ => {
            let v = if name.is_some() && items.len() == 1 { items[0].clone() } else { json!({ "items": items }) };
            output::print(fmt, &v)
        }
    }
}

/// `get -w`: every object as it is, then each change as it happens, until interrupted. It rides
/// the REST watch of the kind (`GET /api/v1/<kind>s?watch=true`, the caller's namespaces),
/// resumed from the last version seen when a stream ends, and started over when the server says
/// that version is too old (410).
async fn watch(
    c: &Client,
    ns: &str,
    fmt: Format,
    (kind, table): (Kind, output::Table),
    name: Option<&str>,
    a: &GetArgs<'_>,
) -> Result<()> {
    let mut header = true;
    let mut rv: Option<String> = None;
    let url = format!("{}/api/v1/{}s", c.baseurl(), kind.name());
    loop {
        let mut query = vec![("watch", "true".to_string())];
        query.extend(a.selector.map(|s| ("labelSelector", s.to_string())));
        query.extend(rv.clone().map(|v| ("resourceVersion", v)));
        let resp = c
            .client()
            .get(&url)
            .query(&query)
            .send()
            .await
            .map_err(|e| anyhow::Error::new(Failure::Unreachable(format!("could not reach the server: {e}"))))?;
        if !resp.status().is_success() {
            return Err(refusal(resp).await);
        }
        let mut body = resp.bytes_stream();
        let mut buf = Vec::new();
        'stream: while let Some(chunk) = body.next().await {
            let chunk = chunk.map_err(|e| Failure::Unreachable(format!("the watch broke: {e}")))?;
            buf.extend_from_slice(&chunk);
            while let Some(end) = buf.iter().position(|b| *b == b'\n') {
                let line: Vec<u8> = buf.drain(..=end).collect();
                let ev: Value = serde_json::from_slice(&line).context("a watch event that is not JSON")?;
                let obj = &ev["object"];
                match ev["type"].as_str() {
                    Some("ERROR") if obj["code"] == 410 => {
                        rv = None;
                        break 'stream;
                    }
                    Some("ERROR") => {
                        return Err(anyhow::Error::new(Failure::Refused(format!(
                            "the watch failed: {}",
                            obj["message"].as_str().unwrap_or("")
                        ))));
                    }
                    _ => {}
                }
                rv = obj["metadata"]["resourceVersion"].as_str().map(String::from).or(rv);
                if ev["type"] == "BOOKMARK"
                    || (!a.all && obj["metadata"]["namespace"] != ns)
                    || name.is_some_and(|n| obj["metadata"]["name"] != n)
                {
                    continue;
                }
                match fmt {
                    _ if fmt.is_table() => {
                        let view = output::View {
                            all_ns: a.all,
                            wide: fmt == Format::Wide,
                            labels: a.show_labels,
                            no_header: !header,
                        };
                        output::table(table, std::slice::from_ref(obj), view);
                        header = false;
                    }
                    Format::Name => println!("{}", output::name_of(table.kind(), obj)),
                    _ => output::print(fmt, obj)?,
                }
                std::io::stdout().flush()?;
            }
        }
    }
}

/// A refusal answered outside the generated client, as its `{reason, message}`.
async fn refusal(resp: reqwest::Response) -> anyhow::Error {
    let status = resp.status().as_u16();
    let b: Value = resp.json().await.unwrap_or(Value::Null);
    anyhow::Error::new(Failure::Refused(format!(
        "{} ({status}): {}",
        b["reason"].as_str().unwrap_or("Error"),
        b["message"].as_str().unwrap_or("")
    )))
}

async fn describe(c: &Client, ns: &str, fmt: Format, kind: Kind, name: &str) -> Result<()> {
    let v = get_one(c, ns, kind, name).await?;
    if !fmt.is_table() {
        return output::print(fmt, &v);
    }
    match kind {
        Kind::Machine => {
            let events = c.machine_events(ns, name).await.map(|e| to_value(&e.into_inner())).unwrap_or(Value::Null);
            print!("{}", output::describe_machine(&v, &events, chrono::Utc::now()));
        }
        Kind::Machinepool => {
            let sel = format!("{POOL_LABEL}={name}");
            let members = list(c, ns, Kind::Machine, false, Some(&sel)).await?;
            print!("{}", output::describe_pool(&v, &members));
        }
        Kind::Machineclaim => {
            let events =
                c.machineclaim_events(ns, name).await.map(|e| to_value(&e.into_inner())).unwrap_or(Value::Null);
            print!("{}", output::describe_claim(&v, &events));
        }
    }
    Ok(())
}

async fn claim(c: &Client, ns: &str, fmt: Format, a: ClaimArgs) -> Result<()> {
    let ClaimArgs { pool, ttl, name, no_wait, env, secret_env } = a;
    let pool = pool.as_str();
    let name = name.unwrap_or_else(|| format!("{pool}-{}", &uuid::Uuid::new_v4().simple().to_string()[..8]));
    let mut spec = json!({ "poolName": pool });
    if let Some(t) = ttl {
        spec["ttlSeconds"] = json!(t.as_secs());
    }
    if !env.is_empty() {
        spec["env"] = json!(env.into_iter().collect::<std::collections::BTreeMap<_, _>>());
    }
    if !secret_env.is_empty() {
        spec["secretEnv"] =
            secret_env.into_iter().map(|(var, n, key)| (var, json!({ "name": n, "key": key }))).collect();
    }
    let body: types::MachineClaim = manifest(json!({ "metadata": { "name": name, "namespace": ns }, "spec": spec }))?;
    let mut cl = c.machineclaim_create(ns, None, &body).await.map_err(fail)?.into_inner();
    if !no_wait {
        // On a terminal a spinner says it; in a pipe, a line now and then.
        let _spinner = progress::Spinner::start(format!("waiting for claim {name} to bind a member of {pool}"));
        let say = fmt.is_table() && !progress::shown();
        if say {
            eprintln!("waiting for claim {name} to bind a member of {pool}...");
        }
        let deadline = std::time::Instant::now() + Duration::from_secs(600);
        loop {
            match c.machineclaim_wait(ns, &name, None, None, Some("Bound"), Some(60)).await {
                Ok(v) => {
                    cl = v.into_inner();
                    break;
                }
                Err(Error::ErrorResponse(r)) if r.status().as_u16() == 504 && std::time::Instant::now() < deadline => {
                    if say {
                        eprintln!("still waiting for claim {name}...");
                    }
                }
                Err(e) => return Err(fail(e)),
            }
        }
    }
    let v = to_value(&cl);
    let machine = v["status"]["machineName"].as_str().unwrap_or("(none yet)").to_string();
    output::done(fmt, &v, &format!("machineclaim {name} claimed {machine} from {pool}"))
}

async fn cp(c: &Client, target: &config::Target, ns: &str, src: &str, dst: &str, mode: Option<&str>) -> Result<()> {
    let remote = |s: &str| {
        s.split_once(':')
            .filter(|(m, p)| !m.is_empty() && p.starts_with('/'))
            .map(|(m, p)| (m.to_string(), p.to_string()))
    };
    match (remote(src), remote(dst)) {
        // A directory goes as a tar stream through the exec relay, both ways.
        (None, Some((m, path))) if std::path::Path::new(src).is_dir() => {
            dircopy::upload(&stream::Relays::new(target)?, ns, &m, std::path::Path::new(src), &path).await
        }
        (Some((m, path)), None) if c.file_list(ns, &m, &path).await.is_ok() => {
            dircopy::download(&stream::Relays::new(target)?, ns, &m, &path, std::path::Path::new(dst)).await
        }
        (None, Some((m, path))) => {
            // Streamed as it is read, never held whole (the server streams it on to the guest).
            let data = if src == "-" {
                reqwest::Body::wrap_stream(read_chunks(tokio::io::stdin()))
            } else {
                let f = tokio::fs::File::open(src).await.with_context(|| format!("reading {src}"))?;
                reqwest::Body::wrap_stream(read_chunks(f))
            };
            // The generated file_write takes the body as the documented `string`: send raw bytes.
            let url = format!("{}/api/v1/machines/{ns}/{m}/files", c.baseurl());
            let mut q = vec![("path", path.clone())];
            if let Some(md) = mode {
                q.push(("mode", md.to_string()));
            }
            let resp = c
                .client()
                .put(url)
                .query(&q)
                .header("content-type", "application/octet-stream")
                .body(data)
                .send()
                .await?;
            if !resp.status().is_success() {
                let status = resp.status().as_u16();
                let b: Value = resp.json().await.unwrap_or(Value::Null);
                return Err(anyhow::Error::new(Failure::Refused(format!(
                    "{} ({status}): {}",
                    b["reason"].as_str().unwrap_or("Error"),
                    b["message"].as_str().unwrap_or("")
                ))));
            }
            Ok(())
        }
        (Some((m, path)), None) => {
            let mut stream = c.file_read(ns, &m, None, &path).await.map_err(fail)?.into_inner();
            if dst == "-" {
                let mut out = std::io::stdout().lock();
                while let Some(chunk) = stream.next().await {
                    out.write_all(&chunk?)?;
                }
                out.flush()?;
                return Ok(());
            }
            // Into a temporary file beside `dst`, which takes its place once all of it arrived:
            // a broken download leaves `dst` as it was.
            let dir = std::path::Path::new(dst).parent().filter(|d| !d.as_os_str().is_empty());
            let mut part = tempfile::NamedTempFile::new_in(dir.unwrap_or(std::path::Path::new(".")))
                .with_context(|| format!("creating a file beside {dst}"))?;
            while let Some(chunk) = stream.next().await {
                part.write_all(&chunk?)?;
            }
            part.flush()?;
            // An existing file keeps its mode, as cp leaves it; a new one is 644, not the
            // temporary file's 600.
            let mode = std::fs::metadata(dst)
                .map(|m| m.permissions())
                .unwrap_or_else(|_| <std::fs::Permissions as std::os::unix::fs::PermissionsExt>::from_mode(0o644));
            part.as_file().set_permissions(mode)?;
            part.persist(dst).with_context(|| format!("writing {dst}"))?;
            Ok(())
        }
        _ => Err(anyhow::Error::new(Failure::Refused(
            "cp copies between here and a Machine: cp LOCAL MACHINE:/path or cp MACHINE:/path LOCAL".into(),
        ))),
    }
}

/// How often a wait with progress looks again.
const PROGRESS_POLL: Duration = Duration::from_millis(500);

/// Waits until pool `name` has `want` warm members, showing how many are.
async fn wait_pool_warm(c: &Client, ns: &str, name: &str, want: i64, timeout: Duration) -> Result<()> {
    let spinner = progress::Spinner::start(format!("warming pool {name}: 0 of {want} warm"));
    let deadline = std::time::Instant::now() + timeout;
    loop {
        let p = to_value(&c.machinepool_get(ns, name).await.map_err(fail)?.into_inner());
        let warm = p["status"]["warm"].as_i64().unwrap_or(0);
        if warm >= want {
            return Ok(());
        }
        let (done, total) = (warm.max(0) as u64, want.max(0) as u64);
        spinner.set(format!("warming pool {name}: {warm} of {want} warm {}", progress::bar(done, total, 20)));
        if std::time::Instant::now() >= deadline {
            return Err(anyhow::Error::new(Failure::Refused(format!(
                "pool {name} has {warm} of {want} members warm after {}: `kaironctl describe mp {name}` says why",
                duration::human(timeout.as_secs() as i64)
            ))));
        }
        tokio::time::sleep(PROGRESS_POLL).await;
    }
}

/// Waits until template `name` on `node` is built, showing how much of its image is in; the
/// template then.
/// Follows the namespace's template `name` until a node has built it, showing the build's
/// progress (the template's status message).
async fn wait_own_template(c: &Client, ns: &str, name: &str, timeout: Duration) -> Result<Value> {
    let spinner = progress::Spinner::start(format!("building template {name}"));
    let deadline = std::time::Instant::now() + timeout;
    loop {
        let t = to_value(&c.kairontemplate_get(ns, name).await.map_err(fail)?.into_inner());
        let message = t["status"]["message"].as_str().unwrap_or("waiting for a node to build it").to_string();
        match t["status"]["phase"].as_str() {
            Some("Ready") => return Ok(t),
            Some("Failed") => {
                return Err(anyhow::Error::new(Failure::Refused(format!(
                    "template {name} failed to build: {message}"
                ))));
            }
            _ => {}
        }
        spinner.set(format!("template {name}: {message}"));
        if std::time::Instant::now() >= deadline {
            return Err(anyhow::Error::new(Failure::Refused(format!(
                "template {name} is still building after {}: {message}",
                duration::human(timeout.as_secs() as i64)
            ))));
        }
        tokio::time::sleep(Duration::from_millis(500)).await;
    }
}

async fn wait_template(c: &Client, node: &str, name: &str, timeout: Duration) -> Result<Value> {
    let spinner = progress::Spinner::start(format!("building template {name} on {node}"));
    let deadline = std::time::Instant::now() + timeout;
    let mib = |n: u64| format!("{:.1} MiB", n as f64 / (1024.0 * 1024.0));
    loop {
        let t = to_value(&c.template_get(node, name).await.map_err(fail)?.into_inner());
        match t["state"].as_str() {
            Some("Ready") => return Ok(t),
            Some("Failed") => {
                return Err(anyhow::Error::new(Failure::Refused(format!(
                    "template {name} failed to build: {}",
                    t["message"].as_str().unwrap_or("no reason given")
                ))));
            }
            _ => {}
        }
        let done = t["bytesDone"].as_u64().unwrap_or(0);
        spinner.set(match t["bytesTotal"].as_u64() {
            Some(total) if total > 0 => format!(
                "building template {name} on {node}: {} of {} {}",
                mib(done),
                mib(total),
                progress::bar(done, total, 20)
            ),
            _ => format!("building template {name} on {node}: {} in", mib(done)),
        });
        if std::time::Instant::now() >= deadline {
            return Err(anyhow::Error::new(Failure::Refused(format!(
                "template {name} is still building after {}",
                duration::human(timeout.as_secs() as i64)
            ))));
        }
        tokio::time::sleep(PROGRESS_POLL).await;
    }
}

/// The server's timeout for a command that gives none (`kairon up --exec-default-timeout`).
const EXEC_DEFAULT_TIMEOUT: Duration = Duration::from_secs(300);

/// `exec NAME -- CMD...` without `-i`: the command as a background process of the guest, its
/// stdout and stderr followed to this process's as they are produced, killed after `timeout`
/// (300 s when not given, as the server's buffered exec); its exit code.
async fn exec_streamed(
    c: &Client,
    ns: &str,
    name: &str,
    mut req: types::ExecRequest,
    timeout: Option<Duration>,
) -> Result<i32> {
    req.timeout_seconds = None;
    let pid = c.process_start(ns, name, &req).await.map_err(fail)?.into_inner().id;
    let follow = |stream: &'static str| {
        let seg = stream::encode;
        let url = format!("{}/api/v1/machines/{}/{}/processes/{}/logs", c.baseurl(), seg(ns), seg(name), seg(&pid));
        let request = c.client().get(url).query(&[("follow", "true"), ("stream", stream)]);
        async move {
            let resp = request.send().await?;
            if !resp.status().is_success() {
                return Err(refusal(resp).await);
            }
            let mut body = resp.bytes_stream();
            while let Some(chunk) = body.next().await {
                let chunk: bytes::Bytes = chunk?;
                if stream == "stderr" {
                    let mut err = std::io::stderr();
                    err.write_all(&chunk)?;
                    err.flush()?;
                } else {
                    let mut out = std::io::stdout();
                    out.write_all(&chunk)?;
                    out.flush()?;
                }
            }
            Ok::<(), anyhow::Error>(())
        }
    };
    let both = async { tokio::try_join!(follow("stdout"), follow("stderr")).map(|_| ()) };
    let limit = timeout.unwrap_or(EXEC_DEFAULT_TIMEOUT);
    let timed_out = match tokio::time::timeout(limit, both).await {
        Ok(followed) => {
            followed?;
            false
        }
        Err(_) => {
            c.process_kill(ns, name, &pid, Some("KILL")).await.map_err(fail)?;
            true
        }
    };
    let p = c.process_wait(ns, name, &pid, Some(60)).await.map_err(fail)?.into_inner();
    if timed_out {
        eprintln!("kaironctl: the command timed out after {} s and was killed", limit.as_secs());
        return Ok(124);
    }
    Ok(p.exit_code.unwrap_or(1))
}

/// How this kaironctl reached the server, for a kaironctl it starts (ssh's ProxyCommand).
struct Via<'a> {
    kubeconfig: Option<&'a std::path::Path>,
    server: Option<&'a str>,
    token: Option<&'a str>,
}

/// Runs ssh (in this process's place) to `user@name`, its connection carried by
/// `kaironctl port-forward NAME --stdio PORT` as its ProxyCommand.
fn ssh(via: &Via<'_>, ns: &str, name: &str, user: &str, port: u16, args: &[String]) -> Result<()> {
    let exe = std::env::current_exe().context("finding kaironctl itself")?;
    let mut proxy = vec![exe.to_string_lossy().into_owned(), "-n".into(), ns.into()];
    if let Some(k) = via.kubeconfig {
        proxy.extend(["--kubeconfig".into(), k.to_string_lossy().into_owned()]);
    }
    if let Some(s) = via.server {
        proxy.extend(["--server".into(), s.into()]);
    }
    proxy.extend(["port-forward".into(), name.into(), "--stdio".into(), port.to_string()]);
    let proxy: Vec<String> = proxy.iter().map(|a| shell_quote(a)).collect();
    let state = std::env::var_os("HOME").map(PathBuf::from).unwrap_or_default().join(".local/state/kairon");
    std::fs::create_dir_all(&state).with_context(|| format!("creating {}", state.display()))?;
    let mut cmd = std::process::Command::new("ssh");
    cmd.args(["-o", &format!("ProxyCommand={}", proxy.join(" "))])
        // Host keys per Machine, not per address (every one is reached the same way).
        .args(["-o", &format!("HostKeyAlias=kairon.{ns}.{name}")])
        .args(["-o", "StrictHostKeyChecking=accept-new"])
        .args(["-o", &format!("UserKnownHostsFile={}", state.join("known_hosts").display())])
        .arg(format!("{user}@{name}"))
        .args(args);
    if let Some(t) = via.token {
        // To the ProxyCommand's kaironctl, not on its command line.
        cmd.env("KAIRON_TOKEN", t);
    }
    let err = std::os::unix::process::CommandExt::exec(&mut cmd);
    Err(anyhow::Error::new(Failure::Refused(format!("running ssh: {err} (is the OpenSSH client installed?)"))))
}

/// `s` single-quoted for a POSIX shell.
fn shell_quote(s: &str) -> String {
    format!("'{}'", s.replace('\'', "'\\''"))
}

/// `reader`'s bytes as a stream of chunks, for a request body sent as it is read.
fn read_chunks(
    reader: impl tokio::io::AsyncRead + Send + Unpin + 'static,
) -> impl futures::Stream<Item = std::io::Result<Vec<u8>>> + Send + 'static {
    futures::stream::unfold(Some(reader), |r| async move {
        let mut r = r?;
        let mut buf = vec![0u8; 256 * 1024];
        match tokio::io::AsyncReadExt::read(&mut r, &mut buf).await {
            Ok(0) => None,
            Ok(n) => {
                buf.truncate(n);
                Some((Ok(buf), Some(r)))
            }
            Err(e) => Some((Err(e), None)),
        }
    })
}

/// The name of a fork or clone, as the API takes it (a DNS label); a usage error otherwise.
fn copy_name(name: &str) -> Result<types::CopyRequestName> {
    name.parse().map_err(|e| {
        anyhow::Error::new(Failure::Refused(format!(
            "{name:?} cannot name a Machine ({e}): use at most 63 lowercase letters, digits and '-'"
        )))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wait_for_takes_a_phase_a_condition_or_delete() {
        assert_eq!(WaitFor::parse("phase=Running"), Ok(WaitFor::Phase("Running".into())));
        assert_eq!(WaitFor::parse("condition=Ready"), Ok(WaitFor::Condition("Ready".into())));
        assert_eq!(WaitFor::parse("delete"), Ok(WaitFor::Delete));
        for bad in ["phase=", "ready", "delete=true", "status=Running", ""] {
            assert!(WaitFor::parse(bad).is_err(), "{bad:?}");
        }
        assert_eq!(WaitFor::Phase("Bound".into()).to_string(), "phase Bound");
    }

    #[test]
    fn every_verb_has_examples_and_the_exit_codes() {
        let cli = Cli::command();
        for verb in cli.get_subcommands() {
            let help = verb.get_after_help().map(|h| h.to_string()).unwrap_or_default();
            assert!(help.contains("Examples:\n  kaironctl "), "{}: no examples", verb.get_name());
            assert!(help.contains("Exit codes: 0 "), "{}: no exit codes", verb.get_name());
        }
    }

    #[test]
    fn kinds_answer_to_kubectls_names() {
        for (name, kind) in
            [("m", Kind::Machine), ("machines", Kind::Machine), ("mp", Kind::Machinepool), ("mc", Kind::Machineclaim)]
        {
            assert!(<Kind as clap::ValueEnum>::from_str(name, false) == Ok(kind), "{name}");
        }
        assert!(<GetKind as clap::ValueEnum>::from_str("machineclaim", false) == Ok(GetKind::Machineclaims));
        assert!(<Kind as clap::ValueEnum>::from_str("widgets", false).is_err());
    }

    #[test]
    fn a_sandbox_gets_the_sdks_defaults_and_other_creates_the_specs() {
        let spec = |args: &[&str]| {
            let cli = Cli::try_parse_from([&["kaironctl", "create", "m"], args].concat()).expect("parses");
            let Cmd::Create(a) = cli.cmd else { panic!("create") };
            machine_spec(&a).unwrap()
        };
        let sb = spec(&["--sandbox", "--sandbox-template", "python"]);
        assert_eq!(sb["lifecycle"]["wakeOnConnect"], true);
        assert_eq!(sb["ttlSeconds"], 300);
        assert_eq!(sb["guestAgent"], json!({"enabled": true, "console": true}));
        assert_eq!(spec(&["--sandbox", "--sandbox-template", "python", "--ttl", "0"]).get("ttlSeconds"), None);
        assert_eq!(
            spec(&["--sandbox", "--sandbox-template", "python", "--max-lifetime", "1h"]).get("ttlSeconds"),
            None
        );
        assert_eq!(spec(&["--sandbox", "--sandbox-template", "python", "--ttl", "20m"])["ttlSeconds"], 1200);
        assert_eq!(spec(&["--sandbox", "--sandbox-template", "python", "--no-wake-on-connect"]).get("lifecycle"), None);
        let plain = spec(&["--sandbox-template", "python"]);
        assert_eq!(plain, json!({"sandbox": {"templateName": "python"}}), "no lifecycle, no deadline unless asked");
    }

    #[test]
    fn secret_env_names_a_secret_and_its_key() {
        assert_eq!(parse_secret_ref("K=openai/api-key"), Ok(("K".into(), "openai".into(), "api-key".into())));
        for bad in ["K=openai", "=a/b", "K=/b", "K=a/b/c", "K"] {
            assert!(parse_secret_ref(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn network_is_what_the_sdks_send() {
        assert_eq!(network_spec("internet").unwrap(), None);
        assert_eq!(network_spec("none").unwrap(), Some(json!({"egress": {"mode": "None"}})));
        assert_eq!(
            network_spec("pypi.org, .pythonhosted.org").unwrap(),
            Some(json!({"egress": {"mode": "Allowlist", "allow": ["pypi.org", ".pythonhosted.org"]}}))
        );
        assert!(network_spec(" ").is_err());
    }

    #[test]
    fn labels_are_key_value() {
        assert_eq!(parse_key_value("team=a"), Ok(("team".into(), "a".into())));
        assert_eq!(parse_key_value("empty="), Ok(("empty".into(), String::new())));
        assert!(parse_key_value("novalue").is_err());
        assert!(parse_key_value("=x").is_err());
        assert_eq!(
            output::name_of(None, &json!({"kind": "MachinePool", "metadata": {"name": "web"}})),
            "machinepool/web"
        );
        assert_eq!(output::name_of(Some("template"), &json!({"name": "busybox"})), "template/busybox");
    }
}
