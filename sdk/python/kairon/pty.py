"""`Sandbox.pty`: a command on a terminal in the sandbox or VM, over the WebSocket that
`kaironctl exec -it` uses (`.../exec/stream?tty=true`)."""

from __future__ import annotations

import json
import logging
import re
import threading
import time
from collections.abc import Callable
from types import TracebackType
from typing import TYPE_CHECKING
from urllib.parse import urlencode

from .errors import KaironConnectionError, KaironTimeoutError

if TYPE_CHECKING:
    from websockets.sync.client import ClientConnection

    from .client import UIClient

log = logging.getLogger("kairon")

#: What a terminal runs unless told otherwise: a login shell, bash where the image has it.
LOGIN_SHELL = ["/bin/sh", "-c", "if command -v bash >/dev/null 2>&1; then exec bash -l; else exec sh -l; fi"]
#: The terminal type a program in it sees unless `env` names another (curses programs and
#: `tput` need one; Debian's and Alpine's base images know it).
DEFAULT_TERM = "xterm-256color"
#: How much of the terminal's output `output` keeps (the most recent part).
KEEP_BYTES = 1 << 20
_EXIT = re.compile(r"^exit (-?\d+)")
#: `wait()`'s answer after `kill()`: the command was killed (SIGKILL), as `subprocess` says it.
KILLED = -9


def _size(cols: int, rows: int) -> tuple[int, int]:
    for what, v in (("cols", cols), ("rows", rows)):
        if not 1 <= v <= 1000:
            raise ValueError(f"{what}={v} is not from 1 to 1000")
    return cols, rows


class Pty:
    """A command on a terminal of `cols` x `rows` (`Sandbox.pty`). What the terminal shows
    (stdout and stderr together, with the terminal's own echo and line endings) goes to `on_data`
    as it comes, on a reader thread, and the last MiB of it is kept in `output`.

    `write` types into it (`"\\x03"` is ^C, `"\\x04"` ^D at an empty line), `resize` changes
    its size (the program gets SIGWINCH), `wait` returns the exit code, `kill` ends the command
    and everything it started. Leaving a `with` block kills a command still running."""

    def __init__(self, ui: UIClient, namespace: str, name: str, *, cols: int = 80, rows: int = 24,
                 command: list[str] | None = None, env: dict[str, str] | None = None, cwd: str | None = None,
                 user: str | None = None, on_data: Callable[[bytes], None] | None = None) -> None:
        cols, rows = _size(cols, rows)
        query: dict[str, str] = {
            "command": json.dumps(command or LOGIN_SHELL),
            "env": json.dumps({"TERM": DEFAULT_TERM, **(env or {})}),
            "tty": "true",
            "cols": str(cols),
            "rows": str(rows),
        }
        if cwd is not None:
            query["cwd"] = cwd
        if user is not None:
            query["user"] = user
        self.cols, self.rows = cols, rows
        self._on_data = on_data
        self._out = bytearray()
        self._read_from = 0  # where the next read_until starts, in `_out`'s terms
        self._dropped = 0  # bytes let go from the front of `_out`
        self._changed = threading.Condition()
        self._exit: int | None = None
        self._ended: str | None = None  # why the socket ended without an exit code
        self._killed = False
        self._ws: ClientConnection = ui.relay(name, f"exec/stream?{urlencode(query)}", namespace=namespace)
        self._reader = threading.Thread(target=self._read, name=f"kairon-pty-{name}", daemon=True)
        self._reader.start()

    def _read(self) -> None:
        try:
            with self._ws:
                self._pump()
        except Exception as e:  # the connection broke: said by wait()
            log.debug("pty: %s", e)
        reason = self._ws.close_reason or ""
        with self._changed:
            if (m := _EXIT.match(reason)) is not None:
                self._exit = int(m.group(1))
            elif self._killed:
                self._exit = KILLED
            else:
                self._ended = reason or f"the connection closed (code {self._ws.close_code})"
            self._changed.notify_all()

    def _pump(self) -> None:
        """The terminal's output into `output` and `on_data`, until the socket closes."""
        for message in self._ws:
            data = message.encode() if isinstance(message, str) else message
            with self._changed:
                self._out += data
                if len(self._out) > KEEP_BYTES:
                    cut = len(self._out) - KEEP_BYTES
                    del self._out[:cut]
                    self._dropped += cut
                self._changed.notify_all()
            if self._on_data is not None:
                self._on_data(data)

    @property
    def output(self) -> bytes:
        """What the terminal showed so far (its last MiB)."""
        with self._changed:
            return bytes(self._out)

    @property
    def exit_code(self) -> int | None:
        """The command's exit code once it has exited (`-9` after `kill()`), else None."""
        with self._changed:
            return self._exit

    def write(self, data: bytes | str) -> None:
        """Types `data` into the terminal, as keys: `"ls\\n"`, `"\\x03"` for ^C."""
        self._ws.send(data.encode() if isinstance(data, str) else bytes(data))

    def resize(self, cols: int, rows: int) -> None:
        """Makes the terminal `cols` x `rows` (1 to 1000 each); the program is told (SIGWINCH)."""
        self.cols, self.rows = _size(cols, rows)
        self._ws.send(json.dumps({"resize": {"cols": cols, "rows": rows}}))

    def read_until(self, marker: bytes | str, timeout: float = 30.0) -> bytes:
        """Waits until the terminal shows `marker` after what earlier calls returned, and returns
        the output up to and including it. Raises `KaironTimeoutError` (with what was shown) if it
        does not come within `timeout` seconds, `KaironConnectionError` if the command ends first."""
        want = marker.encode() if isinstance(marker, str) else marker
        deadline = time.monotonic() + timeout
        with self._changed:
            while True:
                start = max(self._read_from - self._dropped, 0)
                at = self._out.find(want, start)
                if at >= 0:
                    end = at + len(want)
                    self._read_from = self._dropped + end
                    return bytes(self._out[start:end])
                if self._exit is not None or self._ended is not None:
                    raise KaironConnectionError(
                        f"the terminal ended ({self._ended or f'exit {self._exit}'}) before showing {want!r}; "
                        f"it showed: {bytes(self._out[start:])[-500:]!r}")
                left = deadline - time.monotonic()
                if left <= 0:
                    raise KaironTimeoutError(
                        f"the terminal did not show {want!r} within {timeout:.0f} s; it showed: "
                        f"{bytes(self._out[start:])[-500:]!r}")
                self._changed.wait(left)

    def wait(self, timeout: float | None = None) -> int:
        """Waits for the command to exit and returns its exit code (`-9` after `kill()`). Raises
        `KaironTimeoutError` if it is still running after `timeout` seconds (None: no limit),
        `KaironConnectionError` if the connection broke first."""
        self._reader.join(timeout)
        with self._changed:
            if self._exit is not None:
                return self._exit
            if self._ended is not None:
                raise KaironConnectionError(f"the terminal's connection ended without an exit code: {self._ended}")
        raise KaironTimeoutError(f"the terminal's command is still running after {timeout} s")

    def kill(self) -> None:
        """Ends the command and everything it started (the server kills its process group) by
        closing the terminal; `wait()` then returns `-9`."""
        with self._changed:
            if self._exit is not None or self._ended is not None:
                return
            self._killed = True
        self._ws.close()
        self._reader.join(30.0)

    def __enter__(self) -> Pty:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.kill()

    def __repr__(self) -> str:
        state = "running" if self.exit_code is None else f"exit {self.exit_code}"
        return f"<Pty {self.cols}x{self.rows} {state}>"
