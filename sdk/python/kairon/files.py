"""`sb.files`: a sandbox's files, by absolute path.

    sb.files.write_many({"/work/app.py": "print('hi')", "/work/data.bin": b"\\x00\\x01"})
    sb.files.list("/work")                     # [FileEntry(name="app.py", ...), ...]
    sb.files.exists("/work/app.py")            # True
    sb.files.read_text("/work/app.py")         # "print('hi')"
    sb.files.remove("/work/data.bin")
    sb.files.upload("model.bin", "/work/model.bin")      # streamed from disk, never whole in memory
    sb.files.download("/work/out.csv", "out.csv")
    sb.files.upload_dir("src", "/work/src")              # a directory, as one tar
    sb.files.download_dir("/work/results", "results")

A file larger than the server takes raises `PayloadTooLargeError`, whose message says the limit.
"""

from __future__ import annotations

import builtins
import os
import posixpath
import shlex
import tarfile
import tempfile
import uuid
import json
import socket
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from types import TracebackType
from typing import TYPE_CHECKING, BinaryIO

import attrs
import httpx

from kairon_api.models import FileEntry

from .errors import NotFoundError

if TYPE_CHECKING:
    from .sandbox import Sandbox


@dataclass(frozen=True)
class WatchEvent:
    """One change `Files.watch` saw: `type` is `create`, `modify`, `remove` or `rename` (then
    `from_path` is where it was), at the absolute `path`."""

    type: str
    path: str
    is_dir: bool
    from_path: str | None = None


class FileWatch:
    """A watch of a directory (`sb.files.watch`): iterate it for `WatchEvent`s as they happen,
    or it hands them to its `on_event` on a thread of its own; `stop()` ends it (from any
    thread), as does the directory being removed."""

    def __init__(self, client: httpx.Client, answer: httpx.Response,
                 on_event: Callable[[WatchEvent], None] | None = None) -> None:
        """Reads `answer` on its own `client` (`UIClient.watch_files`); `Files.watch` makes this
        for you."""
        self._client, self._answer = client, answer
        self._stopped = threading.Event()
        self._thread: threading.Thread | None = None
        #: Why the watch ended by itself (an error the guest reported), if it did.
        self.error: str | None = None
        if on_event is not None:
            hand = on_event

            def deliver() -> None:
                for event in self:
                    hand(event)

            self._thread = threading.Thread(target=deliver, name="kairon-watch", daemon=True)
            self._thread.start()

    def __iter__(self) -> Iterator[WatchEvent]:
        try:
            for line in self._answer.iter_lines():
                if not line:
                    continue
                v = json.loads(line)
                kind = v.get("type")
                if kind == "error":
                    self.error = str(v.get("message"))
                    return
                if kind in ("create", "modify", "remove", "rename"):
                    yield WatchEvent(kind, str(v["path"]), bool(v.get("isDir")), v.get("from"))
        except (httpx.HTTPError, RuntimeError):
            # stop() closed the answer under the reader: the watch is over.
            if not self._stopped.is_set():
                raise

    def stop(self) -> None:
        """Ends the watch (the guest's watcher goes with the connection)."""
        self._stopped.set()
        # A reader blocked on the connection wakes only when its socket is shut down (closing
        # the client waits for it); the connection is the watch's own, so nothing else is cut.
        stream = self._answer.extensions.get("network_stream")
        raw = stream.get_extra_info("socket") if stream is not None else None
        if isinstance(raw, socket.socket):
            try:
                raw.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass
        self._client.close()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(10.0)

    def __enter__(self) -> FileWatch:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.stop()


class Files:
    """The files of one sandbox (`sb.files`). Every path is absolute."""

    def __init__(self, sandbox: Sandbox) -> None:
        """Binds `sandbox`; `Sandbox.files` makes this for you."""
        self._sb = sandbox

    def read(self, path: str) -> bytes:
        """The bytes of the file at `path` (`NotFoundError` if there is none)."""
        return self._sb.ui.read_file(self._sb.name, path, namespace=self._sb.namespace)

    def read_stream(self, path: str, *, chunk_size: int = 1 << 20) -> Iterator[bytes]:
        """The file at `path` in chunks as they arrive, for files too large to hold whole."""
        return self._sb.ui.read_file_stream(self._sb.name, path, chunk_size=chunk_size,
                                            namespace=self._sb.namespace)

    def download(self, path: str, dest: str | os.PathLike[str] | BinaryIO) -> int:
        """Streams the file at `path` into `dest` (a local path, or a binary file object); the
        bytes written. A local file is written whole or not at all."""
        if not isinstance(dest, (str, os.PathLike)):
            return _copy(self.read_stream(path), dest)
        target = os.fspath(dest)
        fd, part = tempfile.mkstemp(prefix=".kairon-download-", dir=os.path.dirname(os.path.abspath(target)))
        try:
            with os.fdopen(fd, "wb") as f:
                n = _copy(self.read_stream(path), f)
            os.replace(part, target)
            return n
        except BaseException:
            os.unlink(part)
            raise

    def upload(self, src: str | os.PathLike[str], path: str, *, mode: str | None = None) -> None:
        """Streams the local file `src` to `path`, never holding it whole."""
        with open(src, "rb") as f:
            self.write(path, f, mode=mode)

    def read_text(self, path: str, encoding: str = "utf-8") -> str:
        """The file at `path`, decoded."""
        return self.read(path).decode(encoding)

    def write(self, path: str, data: bytes | str | BinaryIO | Iterable[bytes], *, mode: str | None = None) -> None:
        """Writes `data` to `path`, replacing what is there: text (UTF-8), bytes, a binary file
        object or an iterable of bytes (both sent as they are read, never whole). `mode` is
        octal, e.g. `755`; without it an existing file keeps its own. Missing directories are
        made; the old file is replaced only once all of the new one arrived."""
        raw = data.encode() if isinstance(data, str) else data
        self._sb.ui.write_file(self._sb.name, path, raw, mode=mode, namespace=self._sb.namespace)

    def write_many(self, files: Mapping[str, bytes | str], *, mode: str | None = None) -> None:
        """Writes each path's data, making the directories they need first."""
        dirs = sorted({posixpath.dirname(p) for p in files} - {"/", ""})
        if dirs:
            self.make_dir(*dirs)
        for path, data in files.items():
            self.write(path, data, mode=mode)

    def list(self, path: str, *, depth: int = 1) -> builtins.list[FileEntry]:
        """The entries of the directory at `path` (`NotFoundError` if there is none); with
        `depth` > 1 those of its subdirectories too, that many levels down, each named by its
        path below `path` (`sub/file.txt`). Symlinks to directories are not followed."""
        if depth < 1:
            raise ValueError(f"depth={depth}: give 1 (the directory's own entries) or more")
        out: builtins.list[FileEntry] = []
        for e in self._sb.ui.list_files(self._sb.name, path, namespace=self._sb.namespace):
            out.append(e)
            if e.is_dir and depth > 1:
                below = self.list(posixpath.join(path, e.name), depth=depth - 1)
                out.extend(attrs.evolve(b, name=f"{e.name}/{b.name}") for b in below)
        return out

    def info(self, path: str) -> FileEntry:
        """What is at `path`, not following a symlink there: `name`, `size`, `mode`, `is_dir`,
        `link_target`, `modified` (RFC 3339). `NotFoundError` if nothing is."""
        return self._sb.ui.file_info(self._sb.name, path, namespace=self._sb.namespace)

    def exists(self, path: str) -> bool:
        """Whether a file, directory or symlink is at `path` (one stat in the guest)."""
        try:
            self.info(path)
            return True
        except NotFoundError:
            return False

    def rename(self, src: str, dst: str) -> None:
        """Moves `src` to `dst` in the guest (a file at `dst` is replaced; a directory there
        must be empty)."""
        self._sb.ui.rename_file(self._sb.name, src, dst, namespace=self._sb.namespace)

    def remove(self, path: str, *, recursive: bool = False) -> None:
        """Deletes the file or empty directory at `path` (`NotFoundError` if there is none); with
        `recursive`, a directory and everything in it (otherwise a non-empty one is a
        `ConflictError`)."""
        self._sb.ui.delete_file(self._sb.name, path, recursive=recursive, namespace=self._sb.namespace)

    def watch(self, path: str, *, recursive: bool = False,
              on_event: Callable[[WatchEvent], None] | None = None) -> FileWatch:
        """Watches the directory at `path` (and, with `recursive`, every directory below, made
        later ones included): its changes as they happen, from inotify in the guest. Returns once
        the watch is in place (`NotFoundError` if there is no such directory). Iterate the handle
        for `WatchEvent`s, or give `on_event` to have them handed over on a thread of its own;
        `stop()` (or leaving a `with` block) ends it.

            with sb.files.watch("/work", recursive=True) as w:
                for event in w:
                    print(event.type, event.path)   # create / modify / remove / rename
        """
        _absolute(path)
        client, answer = self._sb.ui.watch_files(self._sb.name, path, recursive=recursive,
                                                 namespace=self._sb.namespace)
        return FileWatch(client, answer, on_event)

    def upload_dir(self, src: str | os.PathLike[str], path: str) -> None:
        """Copies the local directory `src` into `path` (made if missing), as one tar archive
        streamed from a temporary local file and unpacked in the guest."""
        _absolute(path)
        remote = f"/tmp/.kairon-upload-{uuid.uuid4().hex}.tar"
        with tempfile.TemporaryFile() as archive:
            with tarfile.open(fileobj=archive, mode="w") as tar:
                tar.add(os.fspath(src), arcname=".")
            archive.seek(0)
            self.write(remote, archive)
        script = 'mkdir -p -- "$1" && tar -xf "$2" -C "$1"; rc=$?; rm -f -- "$2"; exit $rc'
        self._sb.run(["sh", "-c", script, "sh", path, remote], check=True)

    def download_dir(self, path: str, dest: str | os.PathLike[str]) -> None:
        """Copies the guest directory `path` into the local `dest` (made if missing), as one tar
        archive streamed to a temporary local file. Entries that would land outside `dest`
        (absolute paths, `..`, links out) are refused."""
        _absolute(path)
        remote = f"/tmp/.kairon-download-{uuid.uuid4().hex}.tar"
        self._sb.run(["sh", "-c", f"tar -cf {shlex.quote(remote)} -C \"$1\" .", "sh", path], check=True)
        try:
            with tempfile.TemporaryFile() as archive:
                _copy(self.read_stream(remote), archive)
                archive.seek(0)
                os.makedirs(dest, exist_ok=True)
                with tarfile.open(fileobj=archive, mode="r") as tar:
                    _extract(tar, os.fspath(dest))
        finally:
            self.remove(remote)

    def make_dir(self, *paths: str) -> None:
        """Makes each directory, with its parents (no error when it exists)."""
        for p in paths:
            _absolute(p)
        self._sb.run(["mkdir", "-p", "--", *paths], check=True)


def _absolute(path: str) -> None:
    if not path.startswith("/"):
        raise ValueError(f"{path!r} is not an absolute path: paths in a sandbox start with /")


def _copy(chunks: Iterable[bytes], out: BinaryIO) -> int:
    n = 0
    for chunk in chunks:
        out.write(chunk)
        n += len(chunk)
    return n


def _inside(root: str, path: str) -> bool:
    return path == root or path.startswith(root + os.sep)


def _extract(tar: tarfile.TarFile, dest: str) -> None:
    """Unpacks `tar` into `dest`, refusing any entry that would land or point outside it (the
    guest wrote the archive: it is not trusted), and devices."""
    if hasattr(tarfile, "data_filter"):
        tar.extractall(dest, filter="data")
        return
    root = os.path.realpath(dest)
    for m in tar.getmembers():
        target = os.path.realpath(os.path.join(root, m.name))
        if not _inside(root, target) or m.isdev():
            raise ValueError(f"the archive's entry {m.name!r} would land outside {dest}")
        if m.issym() or m.islnk():
            base = os.path.dirname(target) if m.issym() else root
            if not _inside(root, os.path.realpath(os.path.join(base, m.linkname))):
                raise ValueError(f"the archive's link {m.name!r} -> {m.linkname!r} points outside {dest}")
        m.mode &= 0o777  # no set-id bits from the guest
    tar.extractall(dest)
