"""asyncio: `AsyncKairon`, `AsyncSandbox`, `AsyncSandboxProcess` and `AsyncFiles`, the sync API's
surface to `await`.

    from kairon.aio import AsyncKairon

    async with AsyncKairon() as k:
        async with await k.sandbox.create(template="busybox") as sb:
            print((await sb.run("uname -a", check=True)).stdout)
            p = await sb.start("for i in 1 2 3; do echo $i; sleep 1; done")
            async for out in p:
                print(out.stream, out.data)

One core, not two copies of the logic: each call runs the sync implementation (its retries,
typed errors, waits and rollbacks) on a worker thread with `asyncio.to_thread`, so the event
loop never waits on the network, and many sandboxes are driven at once with `asyncio.gather`.
Streams (a process's output, a file's chunks) are async iterators; `run`'s `on_stdout` /
`on_stderr` callbacks are called on the event loop's thread.
"""

from __future__ import annotations

import asyncio
import builtins
import datetime
import os
from collections.abc import AsyncIterable, AsyncIterator, Callable, Iterable, Iterator, Mapping, Sequence
from types import TracebackType
from typing import Any, BinaryIO, TypeVar

from kairon_api.models import FileEntry, KaironTemplate, Machine, MachineMetrics, Preview

from ._http import DEFAULT_RETRIES
from ._kairon import Kairon
from .client import Client, UIClient
from .code import CodeContext, CodeResult
from .files import FileWatch, WatchEvent
from .forward import PortForward
from .pty import Pty
from .sandbox import Output, RunResult, Sandbox, SandboxProcess, _Default
from .templates import Templates

T = TypeVar("T")
_END = object()


async def _iterate(it: Iterator[T]) -> AsyncIterator[T]:
    """`it`, each step taken on a worker thread."""
    while True:
        item = await asyncio.to_thread(next, it, _END)
        if item is _END:
            return
        yield item  # type: ignore[misc]


def _blocking(chunks: AsyncIterable[bytes], loop: asyncio.AbstractEventLoop) -> Iterator[bytes]:
    """An async iterable read from a worker thread: each step runs on `loop`."""
    it = aiter(chunks)
    while True:
        try:
            yield asyncio.run_coroutine_threadsafe(anext(it), loop).result()  # type: ignore[arg-type]
        except StopAsyncIteration:
            return


def _on_loop(hand: Callable[[str], None] | None, loop: asyncio.AbstractEventLoop) -> Callable[[str], None] | None:
    """`hand`, called on `loop`'s thread whichever thread calls the result."""
    if hand is None:
        return None
    target = hand

    def on_loop(data: str) -> None:
        loop.call_soon_threadsafe(target, data)

    return on_loop


class AsyncSandboxProcess:
    """A background process (`await sb.start(...)`, `await sb.process(pid)`): `async for out in p`
    yields its `Output` as it is produced until it exits, resuming where it stopped after a broken
    connection."""

    def __init__(self, sync: SandboxProcess) -> None:
        """Wraps the sync handle (`AsyncSandbox.start` makes this for you)."""
        self.sync = sync

    @property
    def pid(self) -> str:
        """The process's id (re-attach with `AsyncSandbox.process(pid)`)."""
        return self.sync.pid

    @property
    def command(self) -> builtins.list[str]:
        """The command it runs."""
        return self.sync.command

    @property
    def exit_code(self) -> int | None:
        """The exit code, once the output was read to the end or `wait` returned."""
        return self.sync.exit_code

    def __aiter__(self) -> AsyncIterator[Output]:
        return self.output()

    def output(self, *, reconnect_for: float = 60.0) -> AsyncIterator[Output]:
        """The output from where this handle stopped, as it comes, until the process exits."""
        return _iterate(self.sync.output(reconnect_for=reconnect_for))

    async def wait(self, timeout: float = 600.0) -> int | None:
        """Waits for the process to exit; its exit code (None when a signal ended it)."""
        return await asyncio.to_thread(self.sync.wait, timeout)

    async def running(self) -> bool:
        """Whether the process is still running."""
        return await asyncio.to_thread(self.sync.running)

    async def logs(self, stream: str = "stdout") -> str:
        """Its output so far: `stdout` (default), `stderr`, or `both`."""
        return await asyncio.to_thread(self.sync.logs, stream)

    async def write(self, data: str | bytes) -> None:
        """Writes to the process's kept-open stdin."""
        await asyncio.to_thread(self.sync.write, data)

    async def close_stdin(self) -> None:
        """Closes its stdin: it reads end of file."""
        await asyncio.to_thread(self.sync.close_stdin)

    async def kill(self, signal: str | None = None) -> None:
        """Sends `signal` (default KILL)."""
        await asyncio.to_thread(self.sync.kill, signal)

    def __repr__(self) -> str:
        return f"AsyncSandboxProcess({self.pid!r}, {self.command!r})"


class AsyncCodeContext:
    """A code context (`await sb.code_context("python")`): the sync `CodeContext`'s calls to
    `await`."""

    def __init__(self, sync: CodeContext) -> None:
        """Wraps the sync handle (`AsyncSandbox.code_context` makes this for you)."""
        self.sync = sync

    @property
    def id(self) -> str:
        """The context's id (re-attach with `AsyncSandbox.code_context(id=...)`)."""
        return self.sync.id

    @property
    def language(self) -> str:
        """Its language."""
        return self.sync.language

    async def run(self, code: str, *, timeout: int = 300) -> CodeResult:
        """`CodeContext.run`: runs `code` and returns its `CodeResult`."""
        return await asyncio.to_thread(self.sync.run, code, timeout=timeout)

    async def close(self) -> None:
        """Ends the interpreter."""
        await asyncio.to_thread(self.sync.close)

    async def __aenter__(self) -> AsyncCodeContext:
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        await self.close()

    def __repr__(self) -> str:
        return f"AsyncCodeContext({self.id!r}, {self.language!r})"


class AsyncPty:
    """A terminal (`await sb.pty(...)`): the sync `Pty`'s calls to `await`; `on_data` is called on
    the event loop's thread. `async with` kills a command still running at the end."""

    def __init__(self, sync: Pty) -> None:
        """Wraps the sync handle (`AsyncSandbox.pty` makes this for you)."""
        self.sync = sync

    @property
    def output(self) -> bytes:
        """What the terminal showed so far (its last MiB)."""
        return self.sync.output

    @property
    def exit_code(self) -> int | None:
        """The command's exit code once it has exited (`-9` after `kill()`), else None."""
        return self.sync.exit_code

    async def write(self, data: bytes | str) -> None:
        """Types `data` into the terminal."""
        await asyncio.to_thread(self.sync.write, data)

    async def resize(self, cols: int, rows: int) -> None:
        """Makes the terminal `cols` x `rows`."""
        await asyncio.to_thread(self.sync.resize, cols, rows)

    async def read_until(self, marker: bytes | str, timeout: float = 30.0) -> bytes:
        """`Pty.read_until`: the output up to and including `marker`, once shown."""
        return await asyncio.to_thread(self.sync.read_until, marker, timeout)

    async def wait(self, timeout: float | None = None) -> int:
        """Waits for the command to exit; its exit code (`-9` after `kill()`)."""
        return await asyncio.to_thread(self.sync.wait, timeout)

    async def kill(self) -> None:
        """Ends the command and everything it started."""
        await asyncio.to_thread(self.sync.kill)

    async def __aenter__(self) -> AsyncPty:
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        await self.kill()

    def __repr__(self) -> str:
        return f"Async{self.sync!r}"


class AsyncFiles:
    """A sandbox's files (`sb.files`), as `kairon.Files`, awaitable. Large files stream both
    ways: `write` takes an async iterable of bytes too."""

    def __init__(self, sandbox: Sandbox) -> None:
        self._files = sandbox.files

    async def read(self, path: str) -> bytes:
        """The bytes of the file at `path`."""
        return await asyncio.to_thread(self._files.read, path)

    async def read_text(self, path: str, encoding: str = "utf-8") -> str:
        """The file at `path`, decoded."""
        return await asyncio.to_thread(self._files.read_text, path, encoding)

    def read_stream(self, path: str, *, chunk_size: int = 1 << 20) -> AsyncIterator[bytes]:
        """The file in chunks as they arrive."""
        return _iterate(self._files.read_stream(path, chunk_size=chunk_size))

    async def download(self, path: str, dest: str | os.PathLike[str] | BinaryIO) -> int:
        """Streams the file at `path` into `dest` (a local path, written whole or not at all, or a binary file object); the bytes written."""
        return await asyncio.to_thread(self._files.download, path, dest)

    async def upload(self, src: str | os.PathLike[str], path: str, *, mode: str | None = None) -> None:
        """Streams the local file `src` to `path`."""
        await asyncio.to_thread(self._files.upload, src, path, mode=mode)

    async def write(self, path: str, data: bytes | str | BinaryIO | Iterable[bytes] | AsyncIterable[bytes], *,
                    mode: str | None = None) -> None:
        """Writes `data` (text, bytes, a file object, or an iterable or async iterable of bytes,
        sent as produced) to `path`."""
        if isinstance(data, AsyncIterable):
            data = _blocking(data, asyncio.get_running_loop())
        await asyncio.to_thread(self._files.write, path, data, mode=mode)

    async def write_many(self, files: Mapping[str, bytes | str], *, mode: str | None = None) -> None:
        """Writes each path's data, making the directories they need first."""
        await asyncio.to_thread(self._files.write_many, files, mode=mode)

    async def list(self, path: str, *, depth: int = 1) -> builtins.list[FileEntry]:
        """The entries of the directory at `path` (`depth` levels down)."""
        return await asyncio.to_thread(self._files.list, path, depth=depth)

    async def info(self, path: str) -> FileEntry:
        """What is at `path`: size, mode, kind, modified time."""
        return await asyncio.to_thread(self._files.info, path)

    async def exists(self, path: str) -> bool:
        """Whether a file or directory is at `path`."""
        return await asyncio.to_thread(self._files.exists, path)

    async def rename(self, src: str, dst: str) -> None:
        """Moves `src` to `dst` in the guest."""
        await asyncio.to_thread(self._files.rename, src, dst)

    async def remove(self, path: str, *, recursive: bool = False) -> None:
        """Deletes the file (or, with `recursive`, the directory) at `path`."""
        await asyncio.to_thread(self._files.remove, path, recursive=recursive)

    async def make_dir(self, *paths: str) -> None:
        """Makes each directory, with its parents."""
        await asyncio.to_thread(self._files.make_dir, *paths)

    async def upload_dir(self, src: str | os.PathLike[str], path: str) -> None:
        """Copies the local directory `src` into `path`, as one tar."""
        await asyncio.to_thread(self._files.upload_dir, src, path)

    async def download_dir(self, path: str, dest: str | os.PathLike[str]) -> None:
        """Copies the guest directory `path` into the local `dest`, as one tar (entries landing outside `dest` are refused)."""
        await asyncio.to_thread(self._files.download_dir, path, dest)

    async def watch(self, path: str, *, recursive: bool = False) -> AsyncFileWatch:
        """`Files.watch`: the changes under the directory `path` as they happen."""
        return AsyncFileWatch(await asyncio.to_thread(self._files.watch, path, recursive=recursive))


class AsyncFileWatch:
    """A watch of a directory (`await sb.files.watch(...)`): `async for event in w` yields its
    `WatchEvent`s as they happen; `await w.stop()` (or `async with`) ends it."""

    def __init__(self, sync: FileWatch) -> None:
        """Wraps the sync handle (`AsyncFiles.watch` makes this for you)."""
        self.sync = sync

    def __aiter__(self) -> AsyncIterator[WatchEvent]:
        return _iterate(iter(self.sync))

    async def stop(self) -> None:
        """Ends the watch."""
        await asyncio.to_thread(self.sync.stop)

    async def __aenter__(self) -> AsyncFileWatch:
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        await self.stop()


class AsyncSandbox:
    """A Machine to work in, as `kairon.Sandbox`, awaitable: `await AsyncSandbox.create(...)`,
    `claim_from`, `connect`, `list`; `async with` closes it (deletes it, or releases its claim)."""

    def __init__(self, sync: Sandbox) -> None:
        """Wraps a sync `Sandbox` (the constructors make this for you)."""
        self.sync = sync
        self.files = AsyncFiles(sync)

    @property
    def name(self) -> str:
        """The Machine's name."""
        return self.sync.name

    @property
    def namespace(self) -> str:
        """The Machine's namespace."""
        return self.sync.namespace

    @property
    def claim(self) -> str | None:
        """The MachineClaim it came from (`claim_from`), released on `close()`."""
        return self.sync.claim

    # Making one.

    @classmethod
    async def create(
        cls, kube: Client, ui: UIClient, image: str | None = None, *, template: str | None = None,
        idle_timeout: int | None = None, max_lifetime: int | None = None, idle_action: str | None = None,
        wake_on_connect: bool = True, cpu: str | None = None, memory: str | None = None, name: str | None = None,
        labels: dict[str, str] | None = None, env: dict[str, str] | None = None,
        timeout: int | None | _Default = _Default.TIMEOUT, network: str | Sequence[str] | None = None,
        secrets: dict[str, str] | None = None, ready_timeout: float = 300.0,
    ) -> AsyncSandbox:
        """`Sandbox.create`, with the same options; returns once commands run in it."""
        sb = await asyncio.to_thread(
            Sandbox.create, kube, ui, image, template=template, idle_timeout=idle_timeout, max_lifetime=max_lifetime,
            idle_action=idle_action, wake_on_connect=wake_on_connect, cpu=cpu, memory=memory, name=name,
            labels=labels, env=env, timeout=timeout, network=network, secrets=secrets,
            ready_timeout=ready_timeout)
        return cls(sb)

    @classmethod
    async def claim_from(cls, kube: Client, ui: UIClient, pool: str, *,
                         timeout: int | None | _Default = _Default.TIMEOUT, ttl: int | None = None,
                         env: dict[str, str] | None = None, secrets: dict[str, str] | None = None,
                         ready_timeout: float = 300.0) -> AsyncSandbox:
        """`Sandbox.claim_from`: a warm member of the pool."""
        sb = await asyncio.to_thread(Sandbox.claim_from, kube, ui, pool, timeout=timeout, ttl=ttl, env=env,
                                     secrets=secrets, ready_timeout=ready_timeout)
        return cls(sb)

    @classmethod
    async def connect(cls, kube: Client, ui: UIClient, name: str, *, namespace: str | None = None,
                      ready_timeout: float | None = None) -> AsyncSandbox:
        """`Sandbox.connect`: attaches to an existing Machine."""
        sb = await asyncio.to_thread(Sandbox.connect, kube, ui, name, namespace=namespace, ready_timeout=ready_timeout)
        return cls(sb)

    @classmethod
    async def list(cls, kube: Client, ui: UIClient, *, labels: dict[str, str] | None = None,
                   namespace: str | None = None) -> builtins.list[AsyncSandbox]:
        """`Sandbox.list`: the namespace's sandboxes."""
        found = await asyncio.to_thread(Sandbox.list, kube, ui, labels=labels, namespace=namespace)
        return [cls(sb) for sb in found]

    # Working in it.

    async def run(self, cmd: str | builtins.list[str], *, check: bool = False, stdin: str | None = None,
                  cwd: str | None = None, env: dict[str, str] | None = None, timeout: int | None = None,
                  on_stdout: Callable[[str], None] | None = None,
                  on_stderr: Callable[[str], None] | None = None, user: str | None = None) -> RunResult:
        """`Sandbox.run`; `on_stdout` / `on_stderr` are called on the event loop's thread."""
        loop = asyncio.get_running_loop()
        return await asyncio.to_thread(self.sync.run, cmd, check=check, stdin=stdin, cwd=cwd, env=env, user=user,
                                       timeout=timeout, on_stdout=_on_loop(on_stdout, loop),
                                       on_stderr=_on_loop(on_stderr, loop))

    async def start(self, cmd: str | builtins.list[str], *, cwd: str | None = None,
                    env: dict[str, str] | None = None, stdin: bool | str = False,
                    user: str | None = None) -> AsyncSandboxProcess:
        """`Sandbox.start`: a background process; `async for out in p` for its output."""
        p = await asyncio.to_thread(self.sync.start, cmd, cwd=cwd, env=env, stdin=stdin, user=user)
        return AsyncSandboxProcess(p)

    async def events(self, reason: str | None = None) -> builtins.list[dict[str, Any]]:
        """`Sandbox.events`: the Machine's Events (`events("EgressDenied")`)."""
        return await asyncio.to_thread(self.sync.events, reason)

    async def code_context(self, language: str = "python", *, id: str | None = None, cwd: str | None = None,
                           env: dict[str, str] | None = None, user: str | None = None) -> AsyncCodeContext:
        """`Sandbox.code_context`: an interpreter whose state outlives each `await ctx.run(code)`."""
        return AsyncCodeContext(await asyncio.to_thread(self.sync.code_context, language, id=id, cwd=cwd, env=env,
                                                        user=user))

    async def process(self, pid: str) -> AsyncSandboxProcess:
        """Re-attaches to the background process `pid`."""
        return AsyncSandboxProcess(await asyncio.to_thread(self.sync.process, pid))

    async def processes(self) -> builtins.list[AsyncSandboxProcess]:
        """Every background process of the sandbox, running or exited, oldest first."""
        return [AsyncSandboxProcess(p) for p in await asyncio.to_thread(self.sync.processes)]

    async def write_file(self, path: str, data: bytes | str, *, mode: str | None = None) -> None:
        """Writes `data` to the absolute `path` (`files.write` takes streams too)."""
        await self.files.write(path, data, mode=mode)

    async def read_file(self, path: str) -> bytes:
        """The bytes of the file at the absolute `path`."""
        return await self.files.read(path)

    # Power, lifetime and copies.

    async def pause(self, timeout: float = 300.0) -> None:
        """Pauses it (memory kept, no CPU) and waits until it is."""
        await asyncio.to_thread(self.sync.pause, timeout)

    async def resume(self, timeout: float = 300.0) -> None:
        """Resumes it and waits until it runs."""
        await asyncio.to_thread(self.sync.resume, timeout)

    async def hibernate(self, timeout: float = 300.0) -> None:
        """Hibernates it (a VM's memory to disk) and waits until it is."""
        await asyncio.to_thread(self.sync.hibernate, timeout)

    async def halt(self, timeout: float = 300.0) -> None:
        """Halts it (powered off, disk kept) and waits until it is."""
        await asyncio.to_thread(self.sync.halt, timeout)

    async def restart(self, timeout: float = 300.0) -> None:
        """Restarts it and waits until it runs."""
        await asyncio.to_thread(self.sync.restart, timeout)

    async def labels(self) -> dict[str, str]:
        """The Machine's labels."""
        return await asyncio.to_thread(lambda: self.sync.labels)

    async def set_labels(self, labels: dict[str, str | None]) -> dict[str, str]:
        """Sets labels (None removes one); the labels after."""
        return await asyncio.to_thread(self.sync.set_labels, labels)

    def url(self, port: int, path: str = "/") -> str:
        """The sandbox-http URL of `port` (no request is sent)."""
        return self.sync.url(port, path)

    async def preview(self, port: int, *, ttl: float | None = None) -> Preview:
        """`Sandbox.preview`: a preview link to `port`, opened in a browser with no header."""
        return await asyncio.to_thread(lambda: self.sync.preview(port, ttl=ttl))

    async def preview_url(self, port: int, *, ttl: float | None = None) -> str:
        """`Sandbox.preview_url`: the URL of a new preview link to `port`."""
        return await asyncio.to_thread(lambda: self.sync.preview_url(port, ttl=ttl))

    async def previews(self) -> builtins.list[Preview]:
        """`Sandbox.previews`: the live preview links."""
        return await asyncio.to_thread(self.sync.previews)

    async def revoke_preview(self, preview: Preview | str) -> None:
        """`Sandbox.revoke_preview`: the link answers 404 from now on."""
        await asyncio.to_thread(self.sync.revoke_preview, preview)

    async def extend(self, seconds: int) -> datetime.datetime:
        """Moves the sandbox's end `seconds` later; the new end."""
        return await asyncio.to_thread(self.sync.extend, seconds)

    async def set_timeout(self, seconds: int) -> datetime.datetime:
        """Ends the sandbox `seconds` from now (`Sandbox.set_timeout`); the new end."""
        return await asyncio.to_thread(self.sync.set_timeout, seconds)

    async def expires_at(self) -> datetime.datetime | None:
        """When the sandbox ends (its earliest deadline), None without one."""
        return await asyncio.to_thread(lambda: self.sync.expires_at)

    async def pty(self, cols: int = 80, rows: int = 24, *, on_data: Callable[[bytes], None] | None = None,
                  command: str | builtins.list[str] | None = None, env: dict[str, str] | None = None,
                  cwd: str | None = None, user: str | None = None) -> AsyncPty:
        """`Sandbox.pty`: a terminal of `cols` x `rows` running `command` (default a login shell);
        `on_data` gets what it shows, on the event loop's thread."""
        loop = asyncio.get_running_loop()
        hand: Callable[[bytes], None] | None = None
        if on_data is not None:
            target = on_data

            def on_loop(data: bytes) -> None:
                loop.call_soon_threadsafe(target, data)

            hand = on_loop
        sync = await asyncio.to_thread(self.sync.pty, cols, rows, on_data=hand, command=command, env=env, cwd=cwd,
                                       user=user)
        return AsyncPty(sync)

    async def metrics(self, window: float = 0.5) -> MachineMetrics:
        """`Sandbox.metrics`: what the sandbox uses now."""
        return await asyncio.to_thread(self.sync.metrics, window)

    async def metrics_stream(self, interval: float = 1.0) -> AsyncIterator[MachineMetrics]:
        """`Sandbox.metrics_stream`: `metrics()` one after another, each over `interval` seconds."""
        while True:
            yield await self.metrics(interval)

    async def port_forward(self, port: int, local_port: int = 0) -> PortForward:
        """`Sandbox.port_forward`: a local port relayed to `port` in the guest (close it when done)."""
        return await asyncio.to_thread(self.sync.port_forward, port, local_port)

    async def fork(self, name: str | None = None, ready_timeout: float = 300.0) -> AsyncSandbox:
        """A copy of the sandbox (a VM live, a sandbox's files), ready for commands."""
        return AsyncSandbox(await asyncio.to_thread(self.sync.fork, name, ready_timeout))

    async def info(self) -> Machine:
        """The Machine as the server has it now."""
        return await asyncio.to_thread(self.sync.info)

    async def phase(self) -> str | None:
        """The Machine's phase now."""
        return await asyncio.to_thread(lambda: self.sync.phase)

    async def close(self, timeout: float = 300.0) -> None:
        """Deletes the sandbox, or releases the claim it came from."""
        await asyncio.to_thread(self.sync.close, timeout)

    async def __aenter__(self) -> AsyncSandbox:
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        await self.close()

    def __repr__(self) -> str:
        return f"AsyncSandbox({self.name!r}, namespace={self.namespace!r})"


class AsyncSandboxes:
    """`AsyncSandbox`'s constructors bound to an `AsyncKairon`'s clients."""

    def __init__(self, kube: Client, ui: UIClient) -> None:
        self.kube = kube
        self.ui = ui

    async def create(
        self, image: str | None = None, *, template: str | None = None, idle_timeout: int | None = None,
        max_lifetime: int | None = None, idle_action: str | None = None, wake_on_connect: bool = True,
        cpu: str | None = None, memory: str | None = None, name: str | None = None,
        labels: dict[str, str] | None = None, env: dict[str, str] | None = None,
        timeout: int | None | _Default = _Default.TIMEOUT, network: str | Sequence[str] | None = None,
        secrets: dict[str, str] | None = None, ready_timeout: float = 300.0,
    ) -> AsyncSandbox:
        """`AsyncSandbox.create(kube, ui, image, ...)`: a new Machine, ready for commands."""
        return await AsyncSandbox.create(
            self.kube, self.ui, image, template=template, idle_timeout=idle_timeout, max_lifetime=max_lifetime,
            idle_action=idle_action, wake_on_connect=wake_on_connect, cpu=cpu, memory=memory, name=name,
            labels=labels, env=env, timeout=timeout, network=network, secrets=secrets,
            ready_timeout=ready_timeout)

    async def claim_from(self, pool: str, *, timeout: int | None | _Default = _Default.TIMEOUT, ttl: int | None = None,
                         env: dict[str, str] | None = None, secrets: dict[str, str] | None = None,
                         ready_timeout: float = 300.0) -> AsyncSandbox:
        """`AsyncSandbox.claim_from(kube, ui, pool, ...)`: a warm member of the pool."""
        return await AsyncSandbox.claim_from(self.kube, self.ui, pool, timeout=timeout, ttl=ttl, env=env,
                                             secrets=secrets, ready_timeout=ready_timeout)

    async def connect(self, name: str, *, namespace: str | None = None,
                      ready_timeout: float | None = None) -> AsyncSandbox:
        """`AsyncSandbox.connect(kube, ui, name)`: attaches to an existing Machine."""
        return await AsyncSandbox.connect(self.kube, self.ui, name, namespace=namespace, ready_timeout=ready_timeout)

    async def list(self, *, labels: dict[str, str] | None = None,
                   namespace: str | None = None) -> builtins.list[AsyncSandbox]:
        """`AsyncSandbox.list(kube, ui, labels=...)`: the namespace's sandboxes."""
        return await AsyncSandbox.list(self.kube, self.ui, labels=labels, namespace=namespace)


class AsyncTemplates:
    """`k.templates` of an `AsyncKairon`: the sync `Templates`' calls to `await`."""

    def __init__(self, sync: Templates) -> None:
        """Wraps `sync`; `AsyncKairon` makes this for you."""
        self.sync = sync

    async def build(self, name: str, *, image: str, steps: Sequence[str] = (), wait: bool = True,
                    timeout: float = 1800.0, on_progress: Callable[[str], None] | None = None,
                    namespace: str | None = None) -> KaironTemplate:
        """`Templates.build`: declares the template and, with `wait`, returns once it is built."""
        return await asyncio.to_thread(self.sync.build, name, image=image, steps=steps, wait=wait, timeout=timeout,
                                       on_progress=on_progress, namespace=namespace)

    async def get(self, name: str, *, namespace: str | None = None) -> KaironTemplate:
        """`Templates.get`."""
        return await asyncio.to_thread(self.sync.get, name, namespace=namespace)

    async def list(self, *, namespace: str | None = None) -> builtins.list[KaironTemplate]:
        """`Templates.list`."""
        return await asyncio.to_thread(self.sync.list, namespace=namespace)

    async def delete(self, name: str, *, namespace: str | None = None) -> None:
        """`Templates.delete`."""
        await asyncio.to_thread(self.sync.delete, name, namespace=namespace)


class AsyncKairon:
    """`kairon.Kairon`, for asyncio: the same configuration (arguments, else `KAIRON_*`, else
    the kubeconfig `kairon up` writes); `k.sandbox` makes `AsyncSandbox`es; `async with` closes
    the connections."""

    def __init__(self, url: str | None = None, token: str | None = None, namespace: str | None = None, *,
                 ca_file: str | None = None, kubeconfig: str | os.PathLike[str] | None = None,
                 context: str | None = None, retries: int = DEFAULT_RETRIES) -> None:
        self.sync = Kairon(url, token, namespace, ca_file=ca_file, kubeconfig=kubeconfig, context=context,
                           retries=retries)
        self.config = self.sync.config
        self.kube, self.ui = self.sync.kube, self.sync.ui
        self.sandbox = AsyncSandboxes(self.kube, self.ui)
        self.templates = AsyncTemplates(self.sync.templates)

    @property
    def url(self) -> str:
        """The server's URL."""
        return self.sync.url

    @property
    def namespace(self) -> str:
        """The namespace calls use unless given another."""
        return self.sync.namespace

    async def close(self) -> None:
        """Closes the connections (sandboxes are left as they are)."""
        await asyncio.to_thread(self.sync.close)

    async def __aenter__(self) -> AsyncKairon:
        return self

    async def __aexit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                        tb: TracebackType | None) -> None:
        await self.close()

    def __repr__(self) -> str:
        return f"AsyncKairon({self.url!r}, namespace={self.namespace!r})"
