"""`sb.files`: a sandbox's files, by absolute path.

    sb.files.write_many({"/work/app.py": "print('hi')", "/work/data.bin": b"\\x00\\x01"})
    sb.files.list("/work")                     # [FileEntry(name="app.py", ...), ...]
    sb.files.exists("/work/app.py")            # True
    sb.files.read_text("/work/app.py")         # "print('hi')"
    sb.files.remove("/work/data.bin")

A file larger than the server takes raises `PayloadTooLargeError`, whose message says the limit.
"""

from __future__ import annotations

import builtins
import posixpath
from collections.abc import Mapping
from typing import TYPE_CHECKING

from kairon_api.models import FileEntry

from .errors import NotFoundError

if TYPE_CHECKING:
    from .sandbox import Sandbox


class Files:
    """The files of one sandbox (`sb.files`). Every path is absolute."""

    def __init__(self, sandbox: Sandbox) -> None:
        """Binds `sandbox`; `Sandbox.files` makes this for you."""
        self._sb = sandbox

    def read(self, path: str) -> bytes:
        """The bytes of the file at `path` (`NotFoundError` if there is none)."""
        return self._sb.ui.read_file(self._sb.name, path, namespace=self._sb.namespace)

    def read_text(self, path: str, encoding: str = "utf-8") -> str:
        """The file at `path`, decoded."""
        return self.read(path).decode(encoding)

    def write(self, path: str, data: bytes | str, *, mode: str | None = None) -> None:
        """Writes `data` (text is UTF-8) to `path`, replacing what is there (`mode` is octal, e.g.
        `755`). Its directory must exist: `write_many` makes them."""
        raw = data.encode() if isinstance(data, str) else data
        self._sb.ui.write_file(self._sb.name, path, raw, mode=mode, namespace=self._sb.namespace)

    def write_many(self, files: Mapping[str, bytes | str], *, mode: str | None = None) -> None:
        """Writes each path's data, making the directories they need first."""
        dirs = sorted({posixpath.dirname(p) for p in files} - {"/", ""})
        if dirs:
            self.make_dir(*dirs)
        for path, data in files.items():
            self.write(path, data, mode=mode)

    def list(self, path: str) -> builtins.list[FileEntry]:
        """The entries of the directory at `path` (`NotFoundError` if there is none)."""
        return self._sb.ui.list_files(self._sb.name, path, namespace=self._sb.namespace)

    def exists(self, path: str) -> bool:
        """Whether a file or directory is at `path`."""
        parent, name = posixpath.split(posixpath.normpath(path))
        if not name:
            return True
        try:
            return any(e.name == name for e in self.list(parent))
        except NotFoundError:
            return False

    def remove(self, path: str) -> None:
        """Deletes the file at `path` (`NotFoundError` if there is none)."""
        self._sb.ui.delete_file(self._sb.name, path, namespace=self._sb.namespace)

    def make_dir(self, *paths: str) -> None:
        """Makes each directory, with its parents (no error when it exists)."""
        for p in paths:
            if not p.startswith("/"):
                raise ValueError(f"{p!r} is not an absolute path: paths in a sandbox start with /")
        self._sb.run(["mkdir", "-p", "--", *paths], check=True)
