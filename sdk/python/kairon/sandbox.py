"""`Sandbox`: one Machine an agent works in, as a context manager.

    with Sandbox.create(kube, ui, image="/var/lib/fluxvm/images/kairon-hw.qcow2",
                        idle_timeout=600, max_lifetime=3600) as sb:
        print(sb.run("uname -a", check=True).stdout)

What boots is one of two things, by one rule shared with the TypeScript SDK and the MCP tools
(`machine_source`): `template="python"` names a sandbox template built on the node
(`spec.sandbox.templateName`, a runc sandbox), and `image="/var/lib/..."` is the path, on the node,
of a VM disk image (`spec.image.path`), so it starts with `/`. Anything else given as `image`
(`"python"`, `"ghcr.io/org/app:1"`) is refused before any request, saying which to use: an OCI
image is built into a template first (`k.templates.build(NAME, image=REF, steps=[...])`).

With `k = Kairon()` the same reads `k.sandbox.create(template=...)`, `k.sandbox.claim_from(pool)`,
`k.sandbox.connect(name)` and `k.sandbox.list()`.

Waits retry only what may go away by itself (`ApiError.transient`): a Machine not yet scheduled,
a guest agent not yet up. A refusal such as `GuestAgentDisabledError` is raised at once.
"""

from __future__ import annotations

import builtins
import datetime
import enum
import logging
import threading
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import Any
from urllib.parse import quote

import httpx
from kairon_api.models import Machine, MachineMetrics, Preview, ProcessState

from ._http import EXEC_DEFAULT_TIMEOUT
from .client import Client, UIClient
from .code import CONTEXT_SCRIPT, CodeContext
from .errors import ApiError, CommandError, KaironConnectionError, KaironError, KaironTimeoutError, NotFoundError
from .files import Files
from .forward import PortForward
from .pty import Pty

#: The label `Sandbox.create` puts on its Machines (and the operator-exec rule looks for).
SANDBOX_LABEL = "kairon.zyvor.dev/sandbox"
#: The label naming the MachineClaim a pool member is bound to.
CLAIM_LABEL = "kairon.zyvor.dev/claim"

log = logging.getLogger("kairon")


class _Default(enum.Enum):
    """A sandbox's deadline when its maker gives none (`timeout=None` for none)."""

    TIMEOUT = 300


#: Seconds a sandbox lives when `create`/`claim_from` give no `timeout`, `max_lifetime` or claim
#: TTL: a forgotten sandbox does not run forever. `set_timeout` and `extend` change it.
DEFAULT_TIMEOUT = _Default.TIMEOUT.value


def _ttl(timeout: int | None | _Default, other_deadline: bool) -> int | None:
    """The `ttlSeconds` to ask for: `timeout`, else the default unless another deadline is set."""
    if isinstance(timeout, _Default):
        return None if other_deadline else timeout.value
    return None if timeout is None else int(timeout)


def machine_source(image: str | None = None, template: str | None = None) -> dict[str, Any]:
    """The part of a Machine's spec saying what boots: `{"sandbox": {"templateName": template}}`
    or `{"image": {"path": image}}`. Exactly one of the two; `image` is an absolute path on the
    node. Raises `ValueError` saying what to pass instead."""
    if image is not None and template is not None:
        raise ValueError("pass template= (a sandbox template) or image= (a VM disk image on the node), not both")
    if template is not None:
        if not template or "/" in template or ":" in template:
            raise ValueError(
                f"template={template!r} is not a template name: name a template built on the node "
                "(kaironctl get templates --node NODE), such as 'python'")
        return {"sandbox": {"templateName": template}}
    if image is None:
        raise ValueError("pass template= (a sandbox template such as 'python') or image= (the path of a VM "
                         "disk image on the node, such as /var/lib/fluxvm/images/kairon-hw.qcow2)")
    if not image.startswith("/"):
        hint = (f"for the sandbox template {image!r} pass template={image!r}" if "/" not in image and ":" not in image
                else "an OCI image is built into a template first (k.templates.build('NAME', "
                     f"image={image!r}, steps=[...])), then passed as template='NAME'")
        raise ValueError(f"image={image!r} is not a path on the node: image= takes the path of a VM disk image, "
                         f"such as /var/lib/fluxvm/images/kairon-hw.qcow2; {hint}")
    return {"image": {"path": image}}


def network_spec(network: str | Sequence[str] | None) -> dict[str, Any] | None:
    """The `spec.network` for `network=`: `None` or `"internet"` leaves the node's egress policy
    (the internet, never the inside; returns `None`), `"none"` reaches nothing, and a list of hosts
    (`["pypi.org", ".pythonhosted.org", "198.51.100.0/24"]`) only those. A Machine only narrows
    its node's policy. Raises `ValueError` saying what to pass instead."""
    if network is None or network == "internet":
        return None
    if network == "none":
        return {"egress": {"mode": "None"}}
    if isinstance(network, str):
        raise ValueError(f"network={network!r}: pass 'internet', 'none', or a list of hosts to allow "
                         f"(network=[{network!r}] allows that one)")
    hosts = list(network)
    if not hosts or not all(isinstance(h, str) and h for h in hosts):
        raise ValueError("network= as a list names the hosts to allow (such as ['pypi.org', '.pythonhosted.org']); "
                         "for no network at all pass network='none'")
    return {"egress": {"mode": "Allowlist", "allow": hosts}}


def secret_env(secrets: dict[str, str] | None) -> dict[str, dict[str, str]]:
    """The `spec.secretEnv` for `secrets=`: `{"OPENAI_API_KEY": "my-secret/api-key"}` gives the
    variable the key `api-key` of the Secret `my-secret` in the sandbox's namespace (an Opaque
    Secret labelled `kairon.zyvor.dev/secret-env=true`). Raises `ValueError` saying what to pass."""
    out: dict[str, dict[str, str]] = {}
    for var, ref in (secrets or {}).items():
        name, _, key = ref.partition("/")
        if not name or not key or "/" in key:
            raise ValueError(f"secrets[{var!r}]={ref!r}: write it as 'SECRET/KEY' (a Secret of the sandbox's "
                             "namespace and one of its keys)")
        out[var] = {"name": name, "key": key}
    return out


@dataclass(frozen=True)
class RunResult:
    """What a finished command printed and how it exited."""

    stdout: str
    stderr: str
    exit_code: int
    timed_out: bool = False


def _argv(cmd: str | list[str]) -> list[str]:
    # A string is a shell command line, as a person types it; a list is argv as is.
    return ["/bin/sh", "-c", cmd] if isinstance(cmd, str) else list(cmd)


def _phase(m: Machine | None) -> str | None:
    status = m.status if m is not None else None
    phase = getattr(status, "phase", None)
    return str(phase.value) if phase is not None and hasattr(phase, "value") else None


@dataclass(frozen=True)
class Output:
    """A piece of a process's output, as it was produced: `stream` is `stdout` or `stderr`."""

    stream: str
    data: str


class SandboxProcess:
    """A background process: from `Sandbox.start`, or re-attached by its id with
    `Sandbox.process(pid)` (from another client, after a reconnect: its output is kept by the
    server). Iterating it yields its `Output` as it is produced until it exits, then sets
    `exit_code`; a dropped connection is resumed where it stopped, and iterating again goes on
    from there."""

    def __init__(self, sandbox: Sandbox, pid: str, command: list[str]) -> None:
        self.sandbox = sandbox
        self.pid = pid
        self.command = command
        self.exit_code: int | None = None
        self.exited = False
        # Where this handle has read each stream up to (byte offsets the server gave).
        self.offsets = {"stdout": 0, "stderr": 0}

    def __iter__(self) -> Iterator[Output]:
        return self.output()

    def output(self, *, reconnect_for: float = 60.0) -> Iterator[Output]:
        """The process's output from where this handle stopped, as it comes, until it exits. A
        connection that breaks is opened again from the offsets seen, for `reconnect_for`
        seconds at most."""
        ui, name, ns = self.sandbox.ui, self.sandbox.name, self.sandbox.namespace
        broken_since: float | None = None
        while not self.exited:
            try:
                for ev in ui.process_events(name, self.pid, stdout_offset=self.offsets["stdout"],
                                            stderr_offset=self.offsets["stderr"], namespace=ns):
                    broken_since = None
                    kind = ev.get("type")
                    if kind in ("stdout", "stderr"):
                        self.offsets[kind] = int(ev["end"])
                        yield Output(str(kind), str(ev.get("data", "")))
                    elif kind == "exit":
                        code = ev.get("exitCode")
                        self.exit_code = code if isinstance(code, int) else None
                        self.exited = True
                return
            except (KaironConnectionError, httpx.TransportError) as e:
                now = time.monotonic()
                broken_since = broken_since or now
                if now - broken_since > reconnect_for:
                    raise KaironConnectionError(f"process {self.pid}: the stream broke and did not come back: {e}") from e
                log.debug("process %s: stream broke (%s); resuming from %s", self.pid, e, self.offsets)
                time.sleep(0.5)

    def wait(self, timeout: float = 600.0) -> int | None:
        """Waits for the process to exit and returns its exit code (None when killed by a signal)."""
        ui, name = self.sandbox.ui, self.sandbox.name
        deadline = time.monotonic() + timeout
        while True:
            left = max(1, min(300, int(deadline - time.monotonic())))
            p = ui.wait_process(name, self.pid, timeout=left, namespace=self.sandbox.namespace)
            if p.state == ProcessState.EXITED:
                self.exit_code = p.exit_code if isinstance(p.exit_code, int) else None
                return self.exit_code
            if time.monotonic() >= deadline:
                raise KaironTimeoutError(f"process {self.pid} ({self.command!r}) still running after {timeout:.0f} s")

    def running(self) -> bool:
        """Whether the process is still running."""
        p = self.sandbox.ui.get_process(self.sandbox.name, self.pid, namespace=self.sandbox.namespace)
        return p.state == ProcessState.RUNNING

    def logs(self, stream: str = "stdout") -> str:
        """The process's output so far: `stdout` (default), `stderr`, or `both` (stdout then stderr)."""
        out = self.sandbox.ui.process_logs(self.sandbox.name, self.pid, namespace=self.sandbox.namespace)
        if stream == "stderr":
            return out.stderr
        if stream == "both":
            return out.stdout + out.stderr
        return out.stdout

    def write(self, data: str | bytes) -> None:
        """Writes to the process's stdin (one started with `stdin=True`, or with text for it);
        a `ConflictError` with reason `StdinClosed` once it is closed or the process is gone."""
        raw = data.encode() if isinstance(data, str) else data
        self.sandbox.ui.write_stdin(self.sandbox.name, self.pid, raw, namespace=self.sandbox.namespace)

    def close_stdin(self) -> None:
        """Closes the process's stdin: it reads end of file."""
        self.sandbox.ui.write_stdin(self.sandbox.name, self.pid, b"", close=True, namespace=self.sandbox.namespace)

    def kill(self, signal: str | None = None) -> None:
        """Sends `signal` (default KILL) to the process."""
        self.sandbox.ui.kill_process(self.sandbox.name, self.pid, signal, namespace=self.sandbox.namespace)

    def __repr__(self) -> str:
        return f"SandboxProcess({self.pid!r}, {self.command!r})"


class Sandbox:
    """A Machine to work in. Make one with `Sandbox.create` or `Sandbox.claim_from`, or attach to
    one with `Sandbox.connect`; `close()` (or leaving the `with` block) deletes it, or releases the
    claim it came from."""

    def __init__(self, kube: Client, ui: UIClient, name: str, *, namespace: str | None = None,
                 claim: str | None = None) -> None:
        """Wraps the Machine `name` as is (no request); prefer `create`, `claim_from` or `connect`."""
        self.kube = kube
        self.ui = ui
        self.name = name
        self.namespace = namespace or kube.namespace
        self.claim = claim
        self.closed = False

    # Making one.

    @classmethod
    def create(
        cls,
        kube: Client,
        ui: UIClient,
        image: str | None = None,
        *,
        template: str | None = None,
        idle_timeout: int | None = None,
        max_lifetime: int | None = None,
        idle_action: str | None = None,
        wake_on_connect: bool = True,
        cpu: str | None = None,
        memory: str | None = None,
        name: str | None = None,
        labels: dict[str, str] | None = None,
        env: dict[str, str] | None = None,
        timeout: int | None | _Default = _Default.TIMEOUT,
        network: str | Sequence[str] | None = None,
        secrets: dict[str, str] | None = None,
        ready_timeout: float = 300.0,
    ) -> Sandbox:
        """Creates a Machine (labelled `kairon.zyvor.dev/sandbox=true`, guest agent on) from a
        sandbox `template` or a VM `image` (see `machine_source`) and waits until commands run in
        it. `idle_timeout` and `max_lifetime` are seconds. `timeout` deletes it that many seconds
        after creation (`spec.ttlSeconds`): 300 when neither it nor `max_lifetime` is given,
        `timeout=None` for no deadline; `set_timeout` and `extend` change it later, and the
        earliest deadline wins. `env` is set for every command and process in it (a run's own
        `env` wins); not for secrets: every reader of the namespace sees it. `network` narrows
        what it reaches (see `network_spec`): by default the internet its node allows; a refusal
        shows in `events("EgressDenied")`. `secrets` maps variables to `SECRET/KEY` (see
        `secret_env`): read by the server for each command, never stored on the Machine."""
        source = machine_source(image, template)
        net = network_spec(network)
        secret_refs = secret_env(secrets)
        name = name or f"sb-{uuid.uuid4().hex[:10]}"
        spec: dict[str, Any] = {"guestAgent": {"enabled": True, "console": True}, **source}
        if "image" in source:
            spec["resources"] = {"cpu": cpu or "1", "memory": memory or "512Mi"}
        elif cpu or memory:
            spec["resources"] = {k: v for k, v in (("cpu", cpu), ("memory", memory)) if v}
        lifecycle: dict[str, Any] = {"wakeOnConnect": wake_on_connect}
        if idle_timeout is not None:
            lifecycle["idleTimeoutSeconds"] = int(idle_timeout)
        if max_lifetime is not None:
            lifecycle["maxLifetimeSeconds"] = int(max_lifetime)
        if idle_action is not None:
            lifecycle["idleAction"] = idle_action
        spec["lifecycle"] = lifecycle
        ttl = _ttl(timeout, max_lifetime is not None)
        if ttl is not None:
            spec["ttlSeconds"] = ttl
        if env:
            spec["env"] = dict(env)
        if net is not None:
            spec["network"] = net
        if secret_refs:
            spec["secretEnv"] = secret_refs
        meta = {"name": name, "labels": {SANDBOX_LABEL: "true", **(labels or {})}}
        kube.create_machine({"metadata": meta, "spec": spec})
        sb = cls(kube, ui, name)
        try:
            sb._wait_ready(ready_timeout)
        except BaseException:
            sb.close()
            raise
        return sb

    @classmethod
    def claim_from(cls, kube: Client, ui: UIClient, pool: str, *, timeout: int | None | _Default = _Default.TIMEOUT,
                   ttl: int | None = None, env: dict[str, str] | None = None,
                   secrets: dict[str, str] | None = None, ready_timeout: float = 300.0) -> Sandbox:
        """Claims a warm member of the MachinePool `pool`; `close()` releases the claim. The claim
        ends `timeout` seconds after it binds (300 when not given, `timeout=None` for none; `ttl`
        is the older name of the same). `env` is set for every command and process of this
        claimant (over the pool template's), without a cold start; `secrets` likewise (see
        `secret_env`)."""
        secret_refs = secret_env(secrets)
        claim = f"{pool}-{uuid.uuid4().hex[:8]}"
        spec: dict[str, Any] = {"poolName": pool}
        claim_ttl = int(ttl) if ttl is not None else _ttl(timeout, False)
        if claim_ttl is not None:
            spec["ttlSeconds"] = claim_ttl
        if env:
            spec["env"] = dict(env)
        if secret_refs:
            spec["secretEnv"] = secret_refs
        created = kube.create_claim({"metadata": {"name": claim}, "spec": spec})
        try:
            # A claim binds in its create request when a member is warm; else wait for it.
            status = created.get("status") or {}
            machine = status.get("machineName") if status.get("phase") == "Bound" else None
            if machine is None:
                bound = ui.wait_claim(claim, phase="Bound", timeout=ready_timeout)
                machine = getattr(bound.status, "machine_name", None)
            if not isinstance(machine, str):
                raise KaironError(f"claim {claim} is Bound but names no Machine")
            sb = cls(kube, ui, machine, claim=claim)
            # A warm member needs no waiting for Running: its first exec resumes it.
            sb._wait_ready(ready_timeout, warm=True)
        except BaseException:
            try:
                kube.delete_claim(claim)
            except NotFoundError:
                pass
            raise
        return sb

    @classmethod
    def connect(cls, kube: Client, ui: UIClient, name: str, *, namespace: str | None = None,
                ready_timeout: float | None = None) -> Sandbox:
        """Attaches to the existing Machine `name` (`NotFoundError` if there is none). A pool
        member bound by a claim is attached with its claim, so `close()` releases the claim; else
        `close()` deletes the Machine, as for any Sandbox (just don't close it to leave it be).
        With `ready_timeout`, also waits (seconds) until commands run in it."""
        ns = namespace or kube.namespace
        m = kube.get_machine(name, namespace=ns)
        labels = (m.get("metadata") or {}).get("labels") or {}
        claim = labels.get(CLAIM_LABEL)
        sb = cls(kube, ui, name, namespace=ns, claim=claim if isinstance(claim, str) and claim else None)
        if ready_timeout is not None:
            sb._wait_ready(ready_timeout)
        return sb

    @classmethod
    def list(cls, kube: Client, ui: UIClient, *, labels: dict[str, str] | None = None,
             namespace: str | None = None) -> builtins.list[Sandbox]:
        """The sandboxes (Machines labelled `kairon.zyvor.dev/sandbox=true`) of the namespace
        that also carry every one of `labels`, as `connect` would attach to them."""
        ns = namespace or kube.namespace
        out: builtins.list[Sandbox] = []
        for m in kube.list_machines(ns, labels={SANDBOX_LABEL: "true", **(labels or {})}):
            meta = m.get("metadata") or {}
            claim = (meta.get("labels") or {}).get(CLAIM_LABEL)
            out.append(cls(kube, ui, str(meta.get("name")), namespace=ns,
                           claim=claim if isinstance(claim, str) and claim else None))
        return out

    def _wait_ready(self, timeout: float, *, warm: bool = False) -> None:
        # Running, then the guest agent answers (a VM's boots a moment after its VMM runs). Only
        # what may pass is retried (`ApiError.transient`): GuestAgentDisabled, MachineSuspended,
        # NotFound and every other refusal are raised at once.
        deadline = time.monotonic() + timeout
        if not warm:
            self.ui.wait_machine(self.name, phase="Running", timeout=timeout, namespace=self.namespace)
        last: ApiError | None = None
        while True:
            try:
                r = self.ui.exec(self.name, ["true"], timeout=10, namespace=self.namespace)
                if r.exit_code == 0:
                    return
            except ApiError as e:
                if not e.transient:
                    raise
                if last is None or last.reason != e.reason:
                    log.debug("sandbox %s not ready yet: %s", self.name, e)
                last = e
            if time.monotonic() >= deadline:
                why = f" (last: {last})" if last is not None else ""
                raise KaironTimeoutError(
                    f"sandbox {self.name}: the guest agent did not answer within {timeout:.0f} s{why}"
                ) from last
            time.sleep(0.5)

    # Working in it.

    def run(self, cmd: str | builtins.list[str], *, check: bool = False, stdin: str | None = None,
            cwd: str | None = None, env: dict[str, str] | None = None, timeout: int | None = None,
            on_stdout: Callable[[str], None] | None = None,
            on_stderr: Callable[[str], None] | None = None, user: str | None = None) -> RunResult:
        """Runs `cmd` to completion (a string goes through `/bin/sh -c`). With `check`, a non-zero
        exit raises `CommandError` carrying the output. `timeout` is the command's, in seconds
        (300 when None, buffered or streamed; the server allows up to 3600); the client waits as
        long as the command may run. `user` runs it as `uid[:gid]` or a name the guest knows (default
        root).

        With `on_stdout` / `on_stderr`, the output is handed to them as it is produced (text,
        in pieces as they come, not split into lines) and the command runs as a background
        process; after `timeout` seconds it is killed and the result, `timed_out`, holds the
        output so far. Streaming takes no `stdin`."""
        argv = _argv(cmd)
        if on_stdout is not None or on_stderr is not None:
            if stdin is not None:
                raise ValueError("a streamed run takes no stdin: write it to a file and redirect, or run without on_stdout/on_stderr")
            result = self._run_streamed(argv, cwd=cwd, env=env, user=user, timeout=timeout, on_stdout=on_stdout,
                                        on_stderr=on_stderr)
            if check and (result.exit_code != 0 or result.timed_out):
                raise CommandError(argv, result.exit_code, result.stdout, result.stderr)
            return result
        r = self.ui.exec(self.name, argv, stdin=stdin, cwd=cwd, env=env, user=user, timeout=timeout,
                         namespace=self.namespace)
        timed_out = r.timed_out if isinstance(r.timed_out, bool) else False
        result = RunResult(stdout=r.stdout, stderr=r.stderr, exit_code=r.exit_code, timed_out=timed_out)
        if check and (result.exit_code != 0 or timed_out):
            raise CommandError(argv, result.exit_code, result.stdout, result.stderr)
        return result

    def _run_streamed(self, argv: builtins.list[str], *, cwd: str | None, env: dict[str, str] | None,
                      user: str | None, timeout: int | None, on_stdout: Callable[[str], None] | None,
                      on_stderr: Callable[[str], None] | None) -> RunResult:
        p = self.start(argv, cwd=cwd, env=env, user=user)
        got: dict[str, builtins.list[str]] = {"stdout": [], "stderr": []}
        hands = {"stdout": on_stdout, "stderr": on_stderr}
        failed: builtins.list[BaseException] = []

        def follow() -> None:
            # One stream carries both outputs and the exit (the process keeps it server-side).
            try:
                for out in p:
                    got[out.stream].append(out.data)
                    hand = hands.get(out.stream)
                    if hand is not None:
                        hand(out.data)
            except BaseException as e:  # handed to the caller's thread below
                failed.append(e)

        reader = threading.Thread(target=follow, daemon=True)
        reader.start()
        timed_out = False
        try:
            code = p.wait(timeout=float(timeout if timeout is not None else EXEC_DEFAULT_TIMEOUT))
        except KaironTimeoutError:
            timed_out = True
            p.kill()
            code = p.wait(timeout=60.0)
        reader.join(timeout=60.0)
        if failed:
            raise failed[0]
        return RunResult(stdout="".join(got["stdout"]), stderr="".join(got["stderr"]),
                         exit_code=code if code is not None else -1, timed_out=timed_out)

    def start(self, cmd: str | builtins.list[str], *, cwd: str | None = None, env: dict[str, str] | None = None,
              stdin: bool | str = False, user: str | None = None) -> SandboxProcess:
        """Starts `cmd` in the background; iterate the handle for its output as it comes. With
        `stdin=True` (or text to write first) its stdin stays open: `p.write(...)`, then
        `p.close_stdin()`."""
        argv = _argv(cmd)
        first = stdin if isinstance(stdin, str) else None
        p = self.ui.start_process(self.name, argv, cwd=cwd, env=env, stdin=first, keep_stdin_open=stdin is not False,
                                  user=user, namespace=self.namespace)
        return SandboxProcess(self, p.id, argv)

    def code_context(self, language: str = "python", *, id: str | None = None, cwd: str | None = None,
                     env: dict[str, str] | None = None, user: str | None = None) -> CodeContext:
        """A code context: an interpreter (`python`, or `javascript` where the template has Node)
        whose variables outlive each `ctx.run(code)`; with `id`, the running one of that id
        (from this or another client). A `KaironError` says so when the guest has no such
        interpreter. `ctx.close()` (or `with`) ends it."""
        if id is not None:
            p = self.process(id)
            return CodeContext(self, p, p.command[-1] if p.command else language)
        p = self.start(["/bin/sh", "-c", CONTEXT_SCRIPT, "context", language], cwd=cwd, env=env, stdin=True,
                       user=user)
        ctx = CodeContext(self, p, language)
        ctx.wait_ready()
        return ctx

    def process(self, pid: str) -> SandboxProcess:
        """Re-attaches to the background process `pid` (one this or another client started; its
        output so far is kept by the server): `NotFoundError` if there is none."""
        p = self.ui.get_process(self.name, pid, namespace=self.namespace)
        handle = SandboxProcess(self, p.id, list(p.command))
        if p.state == ProcessState.EXITED:
            handle.exit_code = p.exit_code if isinstance(p.exit_code, int) else None
        return handle

    def processes(self) -> builtins.list[SandboxProcess]:
        """Every background process of the sandbox, running or exited, oldest first."""
        return [self.process(p.id) for p in self.ui.list_processes(self.name, namespace=self.namespace)]

    def pty(self, cols: int = 80, rows: int = 24, *, on_data: Callable[[bytes], None] | None = None,
            command: str | builtins.list[str] | None = None, env: dict[str, str] | None = None,
            cwd: str | None = None, user: str | None = None) -> Pty:
        """A terminal of `cols` x `rows` running `command` (default a login shell; a string goes
        through `/bin/sh -c`), with `TERM=xterm-256color` unless `env` names another. What it shows
        goes to `on_data` as it comes and is kept in `output`; `write` types into it, `resize`,
        `read_until`, `wait` and `kill` as their names say. Sandboxes, and VMs whose image runs
        kairon-agent.

            with sb.pty(on_data=sys.stdout.buffer.write) as term:
                term.write("tput cols\n")
                term.resize(120, 40)
                term.write("exit 3\n")
                assert term.wait() == 3
        """
        argv = _argv(command) if command is not None else None
        return Pty(self.ui, self.namespace, self.name, cols=cols, rows=rows, command=argv, env=env, cwd=cwd,
                   user=user, on_data=on_data)

    def metrics(self, window: float = 0.5) -> MachineMetrics:
        """What the sandbox uses now, sampled on its node: `cpu_percent` (of one core, over
        `window` seconds), `memory_used_bytes` of `memory_limit_bytes`, `disk_used_bytes`,
        `network_rx_bytes`/`network_tx_bytes`, `process_count`. Reading them does not wake it or
        keep it awake."""
        return self.ui.metrics(self.name, window=window, namespace=self.namespace)

    def metrics_stream(self, interval: float = 1.0) -> Iterator[MachineMetrics]:
        """`metrics()` one after another, each measured over the `interval` seconds before it:
        a continuous record, for as long as it is iterated."""
        while True:
            yield self.metrics(window=interval)

    @property
    def files(self) -> Files:
        """The sandbox's files: read, read_stream, write, write_many, upload, download, upload_dir,
        download_dir, list, exists, remove, make_dir."""
        return Files(self)

    def write_file(self, path: str, data: bytes | str, *, mode: str | None = None) -> None:
        """Writes `data` to the absolute `path` in the sandbox (`mode` is octal, e.g. `755`);
        `files.write` also takes file objects and iterables, streamed."""
        self.files.write(path, data, mode=mode)

    def read_file(self, path: str) -> bytes:
        """The bytes of the sandbox's file at the absolute `path`."""
        return self.ui.read_file(self.name, path, namespace=self.namespace)

    # Power and copies.

    def pause(self, timeout: float = 300.0) -> None:
        """Pauses the sandbox (memory kept, no CPU) and waits until it is Paused."""
        self.ui.pause(self.name, namespace=self.namespace)
        self.ui.wait_machine(self.name, phase="Paused", timeout=timeout, namespace=self.namespace)

    def resume(self, timeout: float = 300.0) -> None:
        """Resumes a paused sandbox and waits until commands run again."""
        self.ui.resume(self.name, namespace=self.namespace)
        self._wait_ready(timeout)

    def hibernate(self, timeout: float = 300.0) -> None:
        """Hibernates a VM (memory to disk, nothing runs, nothing held but the disk) and waits
        until it is Hibernated; `resume()` brings it back as it was. A sandbox cannot hibernate:
        `PowerStateUnsupportedError` (a `ConflictError`), raised at once."""
        self.ui.hibernate(self.name, namespace=self.namespace)
        self.ui.wait_machine(self.name, phase="Hibernated", timeout=timeout, namespace=self.namespace)

    def halt(self, timeout: float = 300.0) -> None:
        """Powers a VM's guest off (its disk kept) and waits until it is Halted; `resume()` boots
        it again. A sandbox cannot halt:
        `PowerStateUnsupportedError` (a `ConflictError`), raised at once."""
        self.ui.halt(self.name, namespace=self.namespace)
        self.ui.wait_machine(self.name, phase="Halted", timeout=timeout, namespace=self.namespace)

    def restart(self, timeout: float = 300.0) -> None:
        """Restarts the guest (processes end, the disk stays) and waits until commands run."""
        self.ui.restart(self.name, namespace=self.namespace)
        self._wait_ready(timeout)

    @property
    def labels(self) -> dict[str, str]:
        """The Machine's labels now."""
        labels = self.kube.get_machine(self.name, namespace=self.namespace).get("metadata", {}).get("labels") or {}
        return dict(labels)

    def set_labels(self, labels: dict[str, str | None]) -> dict[str, str]:
        """Sets (or, with None, removes) labels on the Machine; its labels afterwards. Kairon's
        own (`kairon.zyvor.dev/...`) are refused by the server where they are not yours to set."""
        m = self.kube.patch_machine(self.name, {"metadata": {"labels": labels}}, namespace=self.namespace)
        return dict(m.get("metadata", {}).get("labels") or {})

    def url(self, port: int, path: str = "/") -> str:
        """The HTTPS URL of a server listening on `port` in the sandbox, through Kairon's
        authenticated proxy (send the same bearer token; a paused sandbox with wake-on-connect
        wakes)."""
        if not 1 <= port <= 65535:
            raise ValueError(f"port {port} is not from 1 to 65535")
        ns, name = quote(self.namespace, safe=""), quote(self.name, safe="")
        return f"{self.ui.url}/api/v1/machines/{ns}/{name}/sandbox-http/{port}/{path.lstrip('/')}"

    def preview(self, port: int, *, ttl: float | None = None) -> Preview:
        """A preview link to the server listening on `port` in the sandbox: `.url` opens in any
        browser with no header (send it to a person), on a host of its own, for `ttl` seconds
        (an hour when None, at most 7 days); revoke it with `revoke_preview`. It dies with the
        sandbox; a paused sandbox with wake-on-connect wakes when it is opened."""
        if not 1 <= port <= 65535:
            raise ValueError(f"port {port} is not from 1 to 65535")
        return self.ui.preview_create(self.name, port, ttl=ttl, namespace=self.namespace)

    def preview_url(self, port: int, *, ttl: float | None = None) -> str:
        """The URL of a new preview link to `port` (see `preview`)."""
        url = self.preview(port, ttl=ttl).url
        if not isinstance(url, str):
            raise ApiError(500, "UnexpectedResponse", "the server made a preview link without its URL")
        return url

    def previews(self) -> builtins.list[Preview]:
        """The sandbox's live preview links, newest first (their URLs are given only when made)."""
        return self.ui.previews(self.name, namespace=self.namespace)

    def revoke_preview(self, preview: Preview | str) -> None:
        """Revokes a preview link (a `Preview` or its `id`): it answers 404 from now on."""
        self.ui.preview_revoke(self.name, preview if isinstance(preview, str) else preview.id, namespace=self.namespace)

    def extend(self, seconds: int) -> datetime.datetime:
        """Moves the sandbox's end `seconds` later and returns the new end: each deadline that
        would end it sooner (its max lifetime, ttlSeconds, its claim's ttl) is lengthened. A
        sandbox with no deadline raises `ConflictError` (reason `NoDeadline`)."""
        return self.ui.extend(self.name, int(seconds), namespace=self.namespace).expires_at

    def set_timeout(self, seconds: int) -> datetime.datetime:
        """Ends the sandbox `seconds` from now, whether it had a deadline or not, sooner or later
        than before (its `spec.ttlSeconds`); its max lifetime and claim TTL stay, and the earliest
        deadline wins. Returns when it now ends."""
        return self.ui.set_timeout(self.name, int(seconds), namespace=self.namespace).expires_at

    @property
    def expires_at(self) -> datetime.datetime | None:
        """When the sandbox will be deleted (the earliest of its max lifetime, ttlSeconds and its
        claim's ttl), as the server last recorded it (`status.lifecycle.expiresAt`); None when it
        has no deadline."""
        status = self.info().status
        lifecycle = getattr(status, "lifecycle", None)
        at = getattr(lifecycle, "expires_at", None)
        return at if isinstance(at, datetime.datetime) else None

    def port_forward(self, port: int, local_port: int = 0) -> PortForward:
        """Carries 127.0.0.1:`local_port` (0: any free port; see `.local_port` and `.url`) to
        `port` in the sandbox, each connection through its own authenticated relay; `close()`
        it (or use `with`). The sandbox must exist; a closed guest port ends each connection."""
        self.info()
        return PortForward(self.ui, self.namespace, self.name, port, local_port)

    def fork(self, name: str | None = None, ready_timeout: float = 300.0) -> Sandbox:
        """A copy of this sandbox (live on a VM: memory and disk; the filesystem of a runc
        sandbox) as a new Sandbox; its `close()` deletes the copy."""
        name = name or f"{self.name}-f{uuid.uuid4().hex[:6]}"
        self.ui.fork(self.name, name, namespace=self.namespace)
        child = Sandbox(self.kube, self.ui, name, namespace=self.namespace)
        try:
            child._wait_ready(ready_timeout)
        except BaseException:
            child.close()
            raise
        return child

    def info(self) -> Machine:
        """The Machine as the server has it now: `spec`, `status` (phase, node, conditions,
        lifecycle) and `metadata`."""
        return self.ui.get_machine(self.name, namespace=self.namespace)

    def machine(self) -> Machine:
        """The same as `info()` (its earlier name)."""
        return self.info()

    def events(self, reason: str | None = None) -> builtins.list[dict[str, Any]]:
        """The Machine's Events, oldest first (each with `reason`, `message`, `type`, `count`):
        `events("EgressDenied")` says which host the guest could not reach, and why."""
        return self.kube.list_events(self.name, namespace=self.namespace, reason=reason)

    @property
    def phase(self) -> str | None:
        """The Machine's phase now (`Running`, `Paused`, ...), None before it has one."""
        return _phase(self.info())

    def close(self, timeout: float = 300.0) -> None:
        """Deletes the Machine (or releases the claim) and waits until it is gone."""
        if self.closed:
            return
        self.closed = True
        try:
            if self.claim is not None:
                self.kube.delete_claim(self.claim, namespace=self.namespace)
            else:
                self.kube.delete_machine(self.name, namespace=self.namespace)
        except NotFoundError:
            return
        if self.claim is None:
            self.ui.wait_machine(self.name, deleted=True, timeout=timeout, namespace=self.namespace)

    def __enter__(self) -> Sandbox:
        """The sandbox; leaving the block closes it."""
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        """Closes the sandbox (see `close`)."""
        self.close()

    def __repr__(self) -> str:
        return f"Sandbox({self.namespace}/{self.name}{', claim ' + self.claim if self.claim else ''})"


__all__ = ["RunResult", "Sandbox", "SandboxProcess"]
