"""The two clients the Sandbox class drives.

`Client` speaks the Kubernetes-compatible API (`/apis/kairon.zyvor.dev/v1/...`): Machines and
MachineClaims are created there, exactly as kubectl would. `UIClient` speaks the REST API
(`/api/v1/...`) through the client generated from `openapi/openapi.json` (`kairon_api`): power
operations, guest exec, processes, files, waits and usage.
"""

from __future__ import annotations

import json
import os
import socket
import threading
import time
from collections.abc import Iterable, Iterator
from urllib.parse import quote, urlencode, urlsplit
from uuid import UUID
from typing import TYPE_CHECKING, Any, BinaryIO, TypeVar, cast


import httpx
import kairon_api
from kairon_api.api.guest import (
    file_delete,
    file_info,
    file_list,
    file_rename,
    machine_exec,
    process_get,
    process_kill,
    process_list,
    process_logs,
    process_start,
    process_wait,
    preview_create,
    preview_list,
    preview_revoke,
)
from kairon_api.api.machine_claims import machineclaim_get, machineclaim_wait
from kairon_api.api.machines import machine_delete, machine_get, machine_wait
from kairon_api.api.power import (
    machine_extend,
    machine_fork,
    machine_halt,
    machine_hibernate,
    machine_pause,
    machine_restart,
    machine_resume,
    machine_set_timeout,
)
from kairon_api.api.usage import machine_metrics, usage_claim
from kairon_api.models import (
    ClaimUsageHistory,
    MachineMetrics,
    CopyRequest,
    CopyResult,
    ErrorBody,
    ExecRequest,
    ExecRequestEnv,
    ExecResult,
    ExtendRequest,
    Extended,
    FileEntry,
    Machine,
    MachineClaim,
    Preview,
    PreviewRequest,
    Process,
    ProcessKillSignal,
    ProcessLogs,
    RenameRequest,
    TimeoutRequest,
)
from kairon_api.types import UNSET, Response, Unset

from ._http import (
    DEFAULT_RETRIES,
    STREAMED,
    TIMEOUT,
    USER_AGENT,
    RetryTransport,
    exec_timeout,
    http_client,
    ssl_context,
)
from .errors import ApiError, GatewayTimeoutError, KaironConnectionError, KaironTimeoutError, error_from

if TYPE_CHECKING:
    from websockets.sync.client import ClientConnection

GROUP = "kairon.zyvor.dev/v1"
T = TypeVar("T")


def _ok(resp: Response[Any], want: type[T]) -> T:
    """The parsed body of a successful response, or the typed error of a failed one."""
    if resp.status_code >= 400 or isinstance(resp.parsed, ErrorBody):
        raise error_from(int(resp.status_code), resp.content)
    if not isinstance(resp.parsed, want):
        raise ApiError(int(resp.status_code), "UnexpectedResponse", f"expected {want.__name__}, got {resp.content[:200]!r}")
    return resp.parsed


#: The size of the chunks a file is sent and received in.
FILE_CHUNK = 1 << 20
#: How long a WebSocket relay (a terminal, a port forward, a console) may take to open.
RELAY_OPEN_TIMEOUT = 30.0


def _cut(sock: socket.socket, opened: threading.Lock) -> None:
    """A relay's deadline: unless it opened first, its socket is shut down, which wakes
    whatever reads it (`sock`: a duplicate of its descriptor)."""
    if opened.acquire(blocking=False):
        try:
            sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass


def _chunks_of(f: BinaryIO) -> Iterator[bytes]:
    while chunk := f.read(FILE_CHUNK):
        yield chunk


def _done(resp: Response[Any]) -> None:
    """Nothing for a successful response, the typed error of a failed one."""
    if resp.status_code >= 400:
        raise error_from(int(resp.status_code), resp.content)


class Client:
    """The Kubernetes-compatible API: `Client(url, token, namespace="agents")`.

    `url` is the API server (the `server:` of the kubeconfig `kairon up` writes), `token` a bearer
    token (`kairon token`), `ca_file` the CA to trust (default: `KAIRON_CA_FILE`, then the system)
    or `ca_data` its PEM text. `retries` bounds the retries of what is safe to retry (GETs, and
    connections that could not be made); a create is sent once. `Kairon()` makes one for you.
    """

    def __init__(self, url: str, token: str, namespace: str = "default", *, ca_file: str | None = None,
                 ca_data: str | None = None, retries: int = DEFAULT_RETRIES) -> None:
        self.url = url.rstrip("/")
        self.namespace = namespace
        self._http = http_client(
            self.url,
            {"Authorization": f"Bearer {token}", "Accept": "application/json"},
            ssl_context(ca_file, ca_data),
            retries,
        )

    def _path(self, plural: str, namespace: str | None, name: str | None = None) -> str:
        p = f"/apis/{GROUP}/namespaces/{namespace or self.namespace}/{plural}"
        return f"{p}/{name}" if name else p

    def _send(self, method: str, path: str, body: Any = None) -> dict[str, Any]:
        r = self._http.request(method, path, json=body)
        if r.status_code >= 400:
            raise error_from(r.status_code, r.content)
        out: dict[str, Any] = r.json()
        return out

    def create_machine(self, manifest: dict[str, Any], namespace: str | None = None) -> dict[str, Any]:
        """Creates a Machine from its manifest (apiVersion and kind are filled in)."""
        body = {"apiVersion": GROUP, "kind": "Machine", **manifest}
        return self._send("POST", self._path("machines", namespace), body)

    def get_machine(self, name: str, namespace: str | None = None) -> dict[str, Any]:
        """The Machine `name` as the Kubernetes API stores it."""
        return self._send("GET", self._path("machines", namespace, name))

    def patch_machine(self, name: str, patch: dict[str, Any], namespace: str | None = None) -> dict[str, Any]:
        """Applies a JSON merge patch (RFC 7386) to the Machine; the Machine afterwards."""
        r = self._http.request("PATCH", self._path("machines", namespace, name), json=patch,
                               headers={"Content-Type": "application/merge-patch+json"})
        if r.status_code >= 400:
            raise error_from(r.status_code, r.content)
        out: dict[str, Any] = r.json()
        return out

    def list_machines(self, namespace: str | None = None, *, labels: dict[str, str] | None = None) -> list[dict[str, Any]]:
        """The Machines of the namespace that carry every one of `labels`."""
        path = self._path("machines", namespace)
        if labels:
            path += "?" + urlencode({"labelSelector": ",".join(f"{k}={v}" for k, v in labels.items())})
        items: list[dict[str, Any]] = self._send("GET", path).get("items") or []
        return items

    def list_events(self, name: str, namespace: str | None = None, *, reason: str | None = None) -> list[dict[str, Any]]:
        """The Events about the Machine `name` (core/v1), oldest first; only `reason`'s if given."""
        selector = f"involvedObject.kind=Machine,involvedObject.name={name}"
        if reason:
            selector += f",reason={reason}"
        path = f"/api/v1/namespaces/{namespace or self.namespace}/events?" + urlencode({"fieldSelector": selector})
        items: list[dict[str, Any]] = self._send("GET", path).get("items") or []
        return sorted(items, key=lambda e: e.get("lastTimestamp") or e.get("eventTime") or "")

    def delete_machine(self, name: str, namespace: str | None = None) -> dict[str, Any]:
        """Deletes the Machine (its node agent removes the runtime instance first)."""
        return self._send("DELETE", self._path("machines", namespace, name))

    def create_claim(self, manifest: dict[str, Any], namespace: str | None = None) -> dict[str, Any]:
        """Creates a MachineClaim (`spec.poolName`, optional `spec.ttlSeconds`)."""
        body = {"apiVersion": GROUP, "kind": "MachineClaim", **manifest}
        return self._send("POST", self._path("machineclaims", namespace), body)

    def get_claim(self, name: str, namespace: str | None = None) -> dict[str, Any]:
        """The MachineClaim `name`."""
        return self._send("GET", self._path("machineclaims", namespace, name))

    def delete_claim(self, name: str, namespace: str | None = None) -> dict[str, Any]:
        """Deletes the MachineClaim, which releases (deletes) the Machine it bound."""
        return self._send("DELETE", self._path("machineclaims", namespace, name))

    def create_pool(self, manifest: dict[str, Any], namespace: str | None = None) -> dict[str, Any]:
        """Creates a MachinePool from its manifest (apiVersion and kind are filled in)."""
        body = {"apiVersion": GROUP, "kind": "MachinePool", **manifest}
        return self._send("POST", self._path("machinepools", namespace), body)

    def get_pool(self, name: str, namespace: str | None = None) -> dict[str, Any]:
        """The MachinePool `name`."""
        return self._send("GET", self._path("machinepools", namespace, name))

    def delete_pool(self, name: str, namespace: str | None = None) -> dict[str, Any]:
        """Deletes the MachinePool and, through it, its members."""
        return self._send("DELETE", self._path("machinepools", namespace, name))

    def close(self) -> None:
        """Closes the connections."""
        self._http.close()


class UIClient:
    """The REST API (`/api/v1`): `UIClient(url, token, namespace="agents")`.

    Every call raises an `ApiError` subclass with the server's reason and message on failure.
    `api` is the generated client (`kairon_api.AuthenticatedClient`) for everything else; it
    sends through the same retrying transport and User-Agent. The options are `Client`'s.
    """

    def __init__(self, url: str, token: str, namespace: str = "default", *, ca_file: str | None = None,
                 ca_data: str | None = None, retries: int = DEFAULT_RETRIES) -> None:
        self.url = url.rstrip("/")
        self.namespace = namespace
        verify = ssl_context(ca_file, ca_data)
        # The WebSocket relays (port-forward) authenticate and verify as the API calls do.
        self._token, self._verify = token, verify
        self.api = kairon_api.AuthenticatedClient(
            base_url=self.url, token=token, verify_ssl=verify, timeout=TIMEOUT,
            headers={"User-Agent": USER_AGENT},
            httpx_args={"transport": RetryTransport(verify, retries)},
        )

    def _ns(self, namespace: str | None) -> str:
        return namespace or self.namespace

    # Machines and claims.

    def get_machine(self, name: str, namespace: str | None = None) -> Machine:
        """The Machine `name` (its spec and status)."""
        return _ok(machine_get.sync_detailed(self._ns(namespace), name, client=self.api), Machine)

    def wait_machine(
        self,
        name: str,
        *,
        phase: str | None = None,
        condition: str | None = None,
        deleted: bool = False,
        timeout: float = 300.0,
        namespace: str | None = None,
    ) -> Machine | None:
        """Long-polls until the Machine reaches `phase` / `condition` or is gone (`deleted`);
        raises `GatewayTimeoutError` after `timeout` seconds, and any other refusal at once.
        Returns the Machine (None when deleted)."""
        deadline = time.monotonic() + timeout
        while True:
            left = max(1, min(120, int(deadline - time.monotonic())))
            resp = machine_wait.sync_detailed(
                self._ns(namespace),
                name,
                client=self.api,
                phase=phase if phase else UNSET,
                condition=condition if condition else UNSET,
                deleted=True if deleted else UNSET,
                timeout_seconds=left,
            )
            if deleted and resp.status_code == 404:
                return None
            try:
                m = _ok(resp, Machine)
                return None if deleted else m
            except GatewayTimeoutError:
                # The server's wait ran out ("not yet"): ask again until ours does.
                if time.monotonic() >= deadline:
                    raise

    def delete_machine(self, name: str, namespace: str | None = None) -> None:
        """Deletes the Machine."""
        _done(machine_delete.sync_detailed(self._ns(namespace), name, client=self.api))

    def pause(self, name: str, namespace: str | None = None) -> Machine:
        """Asks for the Machine to be Paused (memory kept, no CPU); returns at once."""
        return _ok(machine_pause.sync_detailed(self._ns(namespace), name, client=self.api), Machine)

    def resume(self, name: str, namespace: str | None = None) -> Machine:
        """Asks for the Machine to run again; returns at once."""
        return _ok(machine_resume.sync_detailed(self._ns(namespace), name, client=self.api), Machine)

    def hibernate(self, name: str, namespace: str | None = None) -> Machine:
        """Asks for a VM to be Hibernated (memory to disk, the VMM exits); returns at once. A
        sandbox is refused (reason `PowerStateUnsupported`): pause or stop it instead."""
        return _ok(machine_hibernate.sync_detailed(self._ns(namespace), name, client=self.api), Machine)

    def halt(self, name: str, namespace: str | None = None) -> Machine:
        """Asks for a VM's guest to power off (resume boots it again); returns at once."""
        return _ok(machine_halt.sync_detailed(self._ns(namespace), name, client=self.api), Machine)

    def restart(self, name: str, namespace: str | None = None) -> Machine:
        """Restarts a Running Machine's guest on its node; returns once the runtime has."""
        return _ok(machine_restart.sync_detailed(self._ns(namespace), name, client=self.api), Machine)

    def fork(self, name: str, new_name: str, namespace: str | None = None) -> CopyResult:
        """Forks the Machine into `new_name` (live on a VM, the filesystem of a runc sandbox)."""
        body = CopyRequest(name=new_name)
        return _ok(machine_fork.sync_detailed(self._ns(namespace), name, client=self.api, body=body), CopyResult)

    def extend(self, name: str, seconds: int, namespace: str | None = None) -> Extended:
        """Moves the Machine's end (`status.lifecycle.expiresAt`) `seconds` later: each of its
        deadlines that would end it sooner (max lifetime, ttlSeconds, its claim's ttlSeconds) is
        lengthened. A Machine with no deadline is refused (reason `NoDeadline`)."""
        body = ExtendRequest(seconds=seconds)
        return _ok(machine_extend.sync_detailed(self._ns(namespace), name, client=self.api, body=body), Extended)

    def set_timeout(self, name: str, seconds: int, namespace: str | None = None) -> Extended:
        """Ends the Machine `seconds` from now (its `spec.ttlSeconds`), with or without a deadline
        before; its other deadlines stay and the earliest wins (the answer's `expires_at`)."""
        body = TimeoutRequest(seconds=seconds)
        resp = machine_set_timeout.sync_detailed(self._ns(namespace), name, client=self.api, body=body)
        return _ok(resp, Extended)

    def get_claim(self, name: str, namespace: str | None = None) -> MachineClaim:
        """The MachineClaim `name`."""
        return _ok(machineclaim_get.sync_detailed(self._ns(namespace), name, client=self.api), MachineClaim)

    def wait_claim(self, name: str, *, phase: str, timeout: float = 300.0, namespace: str | None = None) -> MachineClaim:
        """Long-polls until the claim reaches `phase`; `GatewayTimeoutError` after `timeout` s."""
        deadline = time.monotonic() + timeout
        while True:
            left = max(1, min(120, int(deadline - time.monotonic())))
            resp = machineclaim_wait.sync_detailed(
                self._ns(namespace), name, client=self.api, phase=phase, timeout_seconds=left
            )
            try:
                return _ok(resp, MachineClaim)
            except GatewayTimeoutError:
                # The server's wait ran out ("not yet"): ask again until ours does.
                if time.monotonic() >= deadline:
                    raise

    def claim_usage(self, uid: str | UUID) -> ClaimUsageHistory:
        """What the claim with this uid used, with its history."""
        return _ok(usage_claim.sync_detailed(UUID(str(uid)), client=self.api), ClaimUsageHistory)

    def metrics(self, name: str, *, window: float | None = None, namespace: str | None = None) -> MachineMetrics:
        """What the Machine uses now: CPU over `window` seconds (0.1 to 10; the server's 0.5 when
        None), memory, disk, network, processes. Neither wakes it nor counts as activity."""
        window_millis = round(window * 1000) if window is not None else UNSET
        resp = machine_metrics.sync_detailed(self._ns(namespace), name, client=self.api, window_millis=window_millis)
        return _ok(resp, MachineMetrics)

    # The guest.

    def exec(
        self,
        name: str,
        command: list[str],
        *,
        stdin: str | None = None,
        cwd: str | None = None,
        env: dict[str, str] | None = None,
        user: str | None = None,
        timeout: int | None = None,
        namespace: str | None = None,
    ) -> ExecResult:
        """Runs `command` (argv) in the guest to completion; `timeout` in seconds (the server's
        default, 300, when None). The request waits as long as the command may run."""
        body = ExecRequest(
            command=command,
            stdin=stdin,
            cwd=cwd,
            env=ExecRequestEnv.from_dict(env) if env else UNSET,
            user=user if user is not None else UNSET,
            timeout_seconds=timeout,
        )
        kwargs = machine_exec._get_kwargs(self._ns(namespace), name, body=body)
        response = self.api.get_httpx_client().request(**kwargs, timeout=exec_timeout(timeout))
        return _ok(machine_exec._build_response(client=self.api, response=response), ExecResult)

    def start_process(
        self, name: str, command: list[str], *, cwd: str | None = None, env: dict[str, str] | None = None,
        stdin: str | None = None, keep_stdin_open: bool = False, user: str | None = None,
        namespace: str | None = None,
    ) -> Process:
        """Starts `command` (argv) in the background in the guest. `stdin` is written to it first;
        with `keep_stdin_open` its stdin stays open for `write_stdin`."""
        body = ExecRequest(command=command, cwd=cwd, env=ExecRequestEnv.from_dict(env) if env else UNSET,
                           stdin=stdin if stdin is not None else UNSET,
                           keep_stdin_open=True if keep_stdin_open else UNSET,
                           user=user if user is not None else UNSET)
        return _ok(process_start.sync_detailed(self._ns(namespace), name, client=self.api, body=body), Process)

    def write_stdin(self, name: str, pid: str, data: bytes, *, close: bool = False,
                    namespace: str | None = None) -> None:
        """Writes `data` to a background process's kept-open stdin (in order with earlier writes;
        at most 1 MiB a call); `close` closes it afterwards (the process reads end of file)."""
        path = (f"/api/v1/machines/{quote(self._ns(namespace), safe='')}/{quote(name, safe='')}"
                f"/processes/{quote(pid, safe='')}/stdin")
        r = self.api.get_httpx_client().post(path, params={"close": "true" if close else "false"}, content=data,
                                             headers={"Content-Type": "application/octet-stream"})
        if r.status_code >= 400:
            raise error_from(r.status_code, r.content)

    def list_processes(self, name: str, namespace: str | None = None) -> list[Process]:
        """Every background process of the Machine, oldest first."""
        resp = process_list.sync_detailed(self._ns(namespace), name, client=self.api)
        if resp.status_code >= 400 or not isinstance(resp.parsed, list):
            raise error_from(int(resp.status_code), resp.content)
        return resp.parsed

    def get_process(self, name: str, pid: str, namespace: str | None = None) -> Process:
        """A background process's state."""
        return _ok(process_get.sync_detailed(self._ns(namespace), name, pid, client=self.api), Process)

    def wait_process(self, name: str, pid: str, *, timeout: int = 60, namespace: str | None = None) -> Process:
        """Waits up to `timeout` s for the process to exit; returns its state either way."""
        resp = process_wait.sync_detailed(self._ns(namespace), name, pid, client=self.api, timeout_seconds=timeout)
        return _ok(resp, Process)

    def process_logs(self, name: str, pid: str, namespace: str | None = None) -> ProcessLogs:
        """A background process's output so far."""
        return _ok(process_logs.sync_detailed(self._ns(namespace), name, pid, client=self.api), ProcessLogs)

    def follow_logs(self, name: str, pid: str, stream: str = "stdout", namespace: str | None = None) -> Iterator[bytes]:
        """A background process's `stream` (`stdout` or `stderr`) from its start, as it is
        produced, until the process exits."""
        path = (f"/api/v1/machines/{quote(self._ns(namespace), safe='')}/{quote(name, safe='')}"
                f"/processes/{quote(pid, safe='')}/logs")
        http = self.api.get_httpx_client()
        with http.stream("GET", path, params={"follow": "true", "stream": stream}, timeout=None,
                         extensions={STREAMED: True}) as r:
            if r.status_code >= 400:
                raise error_from(r.status_code, r.read())
            yield from r.iter_bytes()

    def watch_files(self, name: str, path: str, *, recursive: bool = False,
                    namespace: str | None = None) -> tuple[httpx.Client, httpx.Response]:
        """The open answer of `GET …/files/watch` (its first line, `ready`, already sent by the
        server: every watch is in place), on a connection of its own: read its lines, close the
        client to stop (from any thread; the shared connections are never cut under another
        call). A refusal (a missing directory: `NotFoundError`) raises the typed error."""
        url = f"/api/v1/machines/{quote(self._ns(namespace), safe='')}/{quote(name, safe='')}/files/watch"
        params = {"path": path, "recursive": "true" if recursive else "false"}
        own = httpx.Client(base_url=self.url, verify=self._verify, timeout=httpx.Timeout(30.0, read=None),
                           headers={"Authorization": f"Bearer {self._token}", "User-Agent": USER_AGENT})
        try:
            r = own.send(own.build_request("GET", url, params=params), stream=True)
        except httpx.HTTPError as e:
            own.close()
            raise KaironConnectionError(f"GET {url}: the server is unreachable: {e}") from e
        if r.status_code >= 400:
            body = r.read()
            own.close()
            raise error_from(r.status_code, body)
        return own, r

    def process_events(self, name: str, pid: str, *, stdout_offset: int = 0, stderr_offset: int = 0,
                       namespace: str | None = None) -> Iterator[dict[str, Any]]:
        """A background process's stdout, stderr and exit as one stream of events, as they come:
        `{"type": "stdout"|"stderr", "data": str, "end": int}` (`end` is the byte offset to
        resume that stream from) and last `{"type": "exit", "exitCode": int | None}`. Starts at
        the offsets given (0: from the beginning); sandboxes and VMs."""
        path = (f"/api/v1/machines/{quote(self._ns(namespace), safe='')}/{quote(name, safe='')}"
                f"/processes/{quote(pid, safe='')}/stream")
        params = {"stdoutOffset": str(stdout_offset), "stderrOffset": str(stderr_offset)}
        http = self.api.get_httpx_client()
        with http.stream("GET", path, params=params, timeout=None, extensions={STREAMED: True}) as r:
            if r.status_code >= 400:
                raise error_from(r.status_code, r.read())
            for line in r.iter_lines():
                if not line:
                    continue
                event: dict[str, Any] = json.loads(line)
                if event.get("type") == "error":
                    # The stream broke off on the server's side (its runtime failed).
                    raise error_from(502, line.encode())
                yield event

    def relay(self, name: str, route: str, namespace: str | None = None) -> ClientConnection:
        """A WebSocket to one of the Machine's relays (`portforward/8080`, `console`): binary
        frames both ways. A refusal (not found, suspended, a closed port) raises the typed error."""
        from websockets.exceptions import InvalidStatus
        from websockets.sync.client import connect

        base = self.url.replace("https://", "wss://", 1).replace("http://", "ws://", 1)
        url = f"{base}/api/v1/machines/{quote(self._ns(namespace), safe='')}/{quote(name, safe='')}/{route}"
        secure = url.startswith("wss://")
        parts = urlsplit(url)
        try:
            sock = socket.create_connection((parts.hostname, parts.port or (443 if secure else 80)), RELAY_OPEN_TIMEOUT)
        except OSError as e:
            raise KaironConnectionError(f"{url}: the server is unreachable: {e}") from e
        sock.settimeout(None)  # the relay's frames come when they come
        # The deadline is kept here, not by websockets' open_timeout: on a handshake that times
        # out over TLS it closes the socket and joins its reader, which a close does not wake,
        # so the call never returned. Shutting the socket down does wake it; TLS takes `sock`'s
        # descriptor over, so the deadline holds a duplicate of it.
        opened = threading.Lock()
        deadline = socket.socket(fileno=os.dup(sock.fileno()))
        late = threading.Timer(RELAY_OPEN_TIMEOUT, _cut, (deadline, opened))
        late.daemon = True
        late.start()
        try:
            ws = connect(url, sock=sock, additional_headers={"Authorization": f"Bearer {self._token}"},
                         ssl=self._verify if secure else None, user_agent_header=USER_AGENT,
                         max_size=None, open_timeout=None)
        except InvalidStatus as e:
            raise error_from(e.response.status_code, bytes(e.response.body or b"")) from e
        except Exception as e:
            if not opened.acquire(blocking=False):
                raise KaironTimeoutError(
                    f"{url}: the server did not open the WebSocket within {RELAY_OPEN_TIMEOUT:.0f} s") from e
            if isinstance(e, OSError):
                raise KaironConnectionError(f"{url}: the server is unreachable: {e}") from e
            raise
        finally:
            late.cancel()
            late.join()
            deadline.close()
        if not opened.acquire(blocking=False):
            ws.close()
            raise KaironTimeoutError(f"{url}: the server did not open the WebSocket within {RELAY_OPEN_TIMEOUT:.0f} s")
        return ws

    def kill_process(self, name: str, pid: str, signal: str | None = None, namespace: str | None = None) -> None:
        """Sends `signal` (default KILL) to a background process."""
        # KILL unless told: the server's own default is TERM, which a process may ignore.
        signal = signal or "KILL"
        try:
            sig = ProcessKillSignal(signal)
        except ValueError:
            names = ", ".join(s.value for s in ProcessKillSignal)
            raise ValueError(f"signal {signal!r} is not one a process can be sent: use one of {names}") from None
        _done(process_kill.sync_detailed(self._ns(namespace), name, pid, client=self.api, signal=sig))

    def read_file(self, name: str, path: str, namespace: str | None = None) -> bytes:
        """The bytes of the guest's file at the absolute `path`."""
        return b"".join(self.read_file_stream(name, path, namespace=namespace))

    def read_file_stream(self, name: str, path: str, *, chunk_size: int = FILE_CHUNK,
                         namespace: str | None = None) -> Iterator[bytes]:
        """The guest's file at the absolute `path`, in chunks as they arrive: never held whole."""
        http = self.api.get_httpx_client()
        with http.stream("GET", self._files(name, namespace), params={"path": path},
                         extensions={STREAMED: True}) as r:
            if r.status_code >= 400:
                raise error_from(r.status_code, r.read())
            yield from r.iter_bytes(chunk_size)

    def write_file(self, name: str, path: str, data: bytes | BinaryIO | Iterable[bytes], *,
                   mode: str | None = None, namespace: str | None = None) -> None:
        """Writes `data` to the guest's absolute `path` (`mode` octal, e.g. `755`; without it an
        existing file keeps its mode). A binary file object or an iterable of bytes is sent as it
        is read, never whole; the old file is replaced only once all of it arrived."""
        content: bytes | Iterator[bytes]
        if isinstance(data, (bytes, bytearray, memoryview)):
            content = bytes(data)
        elif hasattr(data, "read"):
            content = _chunks_of(cast(BinaryIO, data))
        else:
            content = iter(data)
        params = {"path": path, **({"mode": mode} if mode else {})}
        r = self.api.get_httpx_client().put(self._files(name, namespace), params=params, content=content,
                                            headers={"Content-Type": "application/octet-stream"})
        if r.status_code >= 400:
            raise error_from(r.status_code, r.content)

    def _files(self, name: str, namespace: str | None) -> str:
        return f"/api/v1/machines/{quote(self._ns(namespace), safe='')}/{quote(name, safe='')}/files"

    def list_files(self, name: str, path: str, namespace: str | None = None) -> list[FileEntry]:
        """The entries of the guest's directory at the absolute `path`."""
        entries = _ok(file_list.sync_detailed(self._ns(namespace), name, client=self.api, path=path), list)
        return [e for e in entries if isinstance(e, FileEntry)]

    def delete_file(self, name: str, path: str, *, recursive: bool = False, namespace: str | None = None) -> None:
        """Deletes the guest's file (or empty directory) at the absolute `path`; with `recursive`,
        a directory and everything in it."""
        _done(file_delete.sync_detailed(self._ns(namespace), name, client=self.api, path=path, recursive=recursive))

    def file_info(self, name: str, path: str, namespace: str | None = None) -> FileEntry:
        """What is at the guest's absolute `path` (a symlink itself): size, mode, kind, modified."""
        return _ok(file_info.sync_detailed(self._ns(namespace), name, client=self.api, path=path), FileEntry)

    def rename_file(self, name: str, src: str, dst: str, namespace: str | None = None) -> None:
        """Moves the guest's `src` to `dst` (absolute paths; a file at `dst` is replaced)."""
        body = RenameRequest(from_=src, to=dst)
        _done(file_rename.sync_detailed(self._ns(namespace), name, client=self.api, body=body))

    def preview_create(self, name: str, port: int, *, ttl: float | None = None, namespace: str | None = None) -> Preview:
        """A preview link to the guest's `port`: its `url` opens in a browser with no header, for
        `ttl` seconds (the server's hour when None)."""
        body = PreviewRequest(port=port, ttl_seconds=round(ttl) if ttl is not None else UNSET)
        return _ok(preview_create.sync_detailed(self._ns(namespace), name, client=self.api, body=body), Preview)

    def previews(self, name: str, namespace: str | None = None) -> list[Preview]:
        """The Machine's live preview links, newest first (without their URLs)."""
        resp = preview_list.sync_detailed(self._ns(namespace), name, client=self.api)
        return cast(list[Preview], _ok(resp, list))

    def preview_revoke(self, name: str, preview_id: str, namespace: str | None = None) -> None:
        """Revokes a preview link: it answers 404 from now on."""
        _done(preview_revoke.sync_detailed(self._ns(namespace), name, preview_id, client=self.api))

    def close(self) -> None:
        """Closes the connections."""
        self.api.get_httpx_client().close()
