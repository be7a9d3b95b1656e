"""Code contexts: `sb.code_context("python")`, an interpreter in the sandbox whose state outlives
each run (E2B's `run_code`, without Jupyter in the image).

    with sb.code_context("python") as ctx:
        ctx.run("x = 21")
        assert ctx.run("x * 2").text == "42"

Each context is the guest agent's `kairon-agent context LANGUAGE` running as a background process
with its stdin open: several per sandbox, none sharing state; a pause freezes it with the rest of
the sandbox, and another client re-attaches to it by its id (`sb.code_context(id=ctx.id)`).
Requests go in on its stdin as JSON lines; answers come back on its stdout after a marker, read
from the byte offset this handle reached (agent/src/context.rs has the protocol).
"""

from __future__ import annotations

import json
import uuid
from dataclasses import dataclass
from types import TracebackType
from typing import TYPE_CHECKING, Any

from .errors import KaironError

if TYPE_CHECKING:
    from .sandbox import Sandbox, SandboxProcess

#: What starts a context: the agent in a sandbox's tools directory, or a VM image's /sbin.
CONTEXT_SCRIPT = ('for a in /.kairon/kairon-agent /sbin/kairon-agent; do if [ -x "$a" ]; then exec "$a" context "$@"; '
                  'fi; done; printf \'\\036kairon-context {"ready":false,"error":{"name":"ContextError","value":'
                  '"this guest has no kairon-agent to run code in"}}\\n\'; exit 127')
MARK = "\x1ekairon-context "


@dataclass(frozen=True)
class CodeError:
    """What a run raised: its type's `name`, its message (`value`) and its `traceback` as text."""

    name: str
    value: str
    traceback: str


@dataclass(frozen=True)
class CodeResult:
    """A run's output: what it printed, the last expression's value as text (`repr` in Python,
    `util.inspect` in JavaScript; None when there is none), and its error if it raised one."""

    stdout: str
    stderr: str
    text: str | None
    error: CodeError | None

    def check(self) -> CodeResult:
        """This result, or a `CodeRunError` with the traceback when the run raised."""
        if self.error is not None:
            raise CodeRunError(self.error)
        return self


class CodeRunError(KaironError):
    """A run raised in the context (from `CodeResult.check()`); the context lives on."""

    def __init__(self, error: CodeError) -> None:
        super().__init__(f"{error.name}: {error.value}\n{error.traceback}")
        self.error = error


class CodeContext:
    """One interpreter in a sandbox (see the module). `run` one piece of code at a time."""

    def __init__(self, sandbox: Sandbox, process: SandboxProcess, language: str) -> None:
        """Wraps a started context (`Sandbox.code_context` makes this for you)."""
        self.sandbox = sandbox
        self.process = process
        self.language = language
        self._pending = ""

    @property
    def id(self) -> str:
        """The context's id: its process's (re-attach with `sb.code_context(id=...)`)."""
        return self.process.pid

    def _answer(self, want: str | None) -> dict[str, Any]:
        """The next answer carrying id `want` (any, with None); stdout that is not an answer (a
        subprocess that wrote past the capture) is kept for the run it belongs to."""
        stray: list[str] = []
        for out in self.process.output():
            if out.stream != "stdout":
                continue
            self._pending += out.data
            while "\n" in self._pending:
                line, self._pending = self._pending.split("\n", 1)
                if not line.startswith(MARK):
                    stray.append(line + "\n")
                    continue
                said: dict[str, Any] = json.loads(line[len(MARK):])
                if said.get("ready") is False:
                    err = said.get("error") or {}
                    raise KaironError(f"{self.language} context: {err.get('value', 'it did not start')}")
                if want is None or said.get("id") == want:
                    if stray:
                        said["stdout"] = "".join(stray) + str(said.get("stdout") or "")
                    return said
        code = self.process.exit_code
        raise KaironError(f"the {self.language} context {self.id} ended (exit code {code}): start another")

    def wait_ready(self) -> None:
        """Waits for the interpreter's first word: ready, or why it cannot start (a `KaironError`)."""
        self._answer(None)

    def run(self, code: str, *, timeout: int = 300) -> CodeResult:
        """Runs `code` in the context and returns its `CodeResult`; a run longer than `timeout`
        seconds is interrupted and returns a `TimeoutError` (0 for no limit)."""
        ask = uuid.uuid4().hex
        self.process.write(json.dumps({"id": ask, "code": code, "timeoutSeconds": timeout}) + "\n")
        said = self._answer(ask)
        err = said.get("error")
        return CodeResult(
            stdout=str(said.get("stdout") or ""),
            stderr=str(said.get("stderr") or ""),
            text=said.get("text") if isinstance(said.get("text"), str) else None,
            error=CodeError(str(err.get("name", "")), str(err.get("value", "")), str(err.get("traceback", "")))
            if isinstance(err, dict) else None,
        )

    def close(self) -> None:
        """Ends the interpreter (its state is gone)."""
        if not self.process.exited:
            self.process.kill()

    def __enter__(self) -> CodeContext:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"CodeContext({self.id!r}, {self.language!r})"
