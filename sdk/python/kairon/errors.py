"""Typed errors: every failed API call raises an ApiError subclass carrying the server's reason
and message (the REST API's `{reason, message}` body, or a Kubernetes `Status`)."""

from __future__ import annotations

import builtins
import json
from typing import Any

from kairon_api.models.reason import Reason


class KaironError(Exception):
    """Base of every error the SDK raises."""


class KaironConnectionError(KaironError, builtins.ConnectionError):
    """The server could not be reached (refused, reset, unresolvable, TLS failure), after the
    retries a request may have: connection failures before anything was sent are retried for
    every call, others only for idempotent ones (GET). Also a builtin `ConnectionError`."""


class KaironTimeoutError(KaironError, builtins.TimeoutError):
    """Something did not happen in time: a wait of the SDK ran out (`Sandbox` readiness, a
    process wait), the server did not answer within the read timeout, or (as
    `GatewayTimeoutError`) the server's own wait did. Also a builtin `TimeoutError`, so
    `except TimeoutError` catches it; the SDK never shadows that name in `from kairon import *`."""


class ApiError(KaironError):
    """The server refused a request.

    `status` is the HTTP status, `reason` the machine-readable reason: a `Reason` (the REST API's
    enum in its OpenAPI document, e.g. `Reason.NOTFOUND`, which also compares equal to
    `"NotFound"`), or the plain string of a Kubernetes `Status`. `message` is what the server says
    to do about it.
    """

    def __init__(self, status: int, reason: str, message: str, body: Any = None) -> None:
        super().__init__(f"{reason} ({status}): {message}")
        self.status = status
        self.reason: Reason | str = Reason(reason) if reason in _REASONS else reason
        self.message = message
        self.body = body

    @property
    def transient(self) -> bool:
        """Whether this refusal may go away by itself, so a wait may try again: a 409 for an
        object still on its way (`Conflict`, `NotScheduled`, `NotProvisioned`), 429, and the
        server's or the node's failures (500, 502, 503, 504) other than `NotSupported`. Every other
        4xx (`GuestAgentDisabled`, `MachineSuspended`, `NotFound`, `Forbidden`, ...) is the
        server's answer and the SDK raises it at once."""
        if self.status == 409:
            return self.reason in _TRANSIENT_CONFLICTS
        if self.status == 429:
            return True
        return self.status in (500, 502, 503, 504) and self.reason != Reason.NOTSUPPORTED


class BadRequestError(ApiError):
    """400 or 422: the request itself is wrong; the message says what to fix."""


class UnauthorizedError(ApiError):
    """401: no token, or one the server does not accept."""


class ForbiddenError(ApiError):
    """403: the token's role or namespaces do not allow this."""


class NotFoundError(ApiError):
    """404: no such object (or file, or process)."""


class PayloadTooLargeError(ApiError):
    """413: a file or body larger than the server takes; the message says the limit."""


class ConflictError(ApiError):
    """409: the object exists already, or is in a state that does not allow this."""


class GatewayTimeoutError(ApiError, KaironTimeoutError):
    """504: the server waited for something that did not happen in time."""


# The name this error had before 0.2: `kairon.TimeoutError` still works, but it is not in
# `__all__`, so `from kairon import *` leaves Python's builtin `TimeoutError` alone.
TimeoutError = GatewayTimeoutError


class ServerError(ApiError):
    """5xx other than 504."""


class MachineSuspendedError(ConflictError):
    """409 `MachineSuspended`: the Machine is suspended and is not woken on connect."""


class QuotaExceededError(ForbiddenError):
    """403 `QuotaExceeded`: the namespace's KaironQuota does not allow this much (the message
    names the limit and the use); free something there, or ask an admin to raise it."""


class GuestAgentDisabledError(ConflictError):
    """409 `GuestAgentDisabled`: the Machine has no guest agent to run commands or move files."""


class PowerStateUnsupportedError(ConflictError):
    """409 `PowerStateUnsupported`: the Machine cannot take that power state (a sandbox cannot hibernate
    or halt; pause or stop it instead)."""


class WakeTimeoutError(GatewayTimeoutError):
    """504 `WakeTimeout`: a wake-on-connect did not finish within `wakeTimeoutSeconds`."""


class CommandError(KaironError):
    """`run(..., check=True)` of a command that exited non-zero."""

    def __init__(self, command: list[str], exit_code: int, stdout: str, stderr: str) -> None:
        tail = stderr.strip()[-500:] or stdout.strip()[-500:]
        super().__init__(f"command {command!r} exited with {exit_code}" + (f": {tail}" if tail else ""))
        self.command = command
        self.exit_code = exit_code
        self.stdout = stdout
        self.stderr = stderr


_REASONS = {r.value for r in Reason}
_TRANSIENT_CONFLICTS = {Reason.CONFLICT.value, Reason.NOTSCHEDULED.value, Reason.NOTPROVISIONED.value}

_BY_REASON: dict[str, type[ApiError]] = {
    Reason.MACHINESUSPENDED: MachineSuspendedError,
    Reason.GUESTAGENTDISABLED: GuestAgentDisabledError,
    Reason.WAKETIMEOUT: WakeTimeoutError,
    Reason.QUOTAEXCEEDED: QuotaExceededError,
    Reason.POWERSTATEUNSUPPORTED: PowerStateUnsupportedError,
}

_BY_STATUS: dict[int, type[ApiError]] = {
    400: BadRequestError,
    401: UnauthorizedError,
    403: ForbiddenError,
    404: NotFoundError,
    409: ConflictError,
    413: PayloadTooLargeError,
    422: BadRequestError,
    504: GatewayTimeoutError,
}


def error_from(status: int, content: bytes) -> ApiError:
    """The typed error for a failed response's status and body."""
    body: Any = None
    reason = ""
    message = ""
    try:
        body = json.loads(content)
    except ValueError:
        message = content.decode("utf-8", "replace").strip()
    if isinstance(body, dict):
        reason = str(body.get("reason") or "")
        message = str(body.get("message") or message)
    if not reason:
        reason = {400: "BadRequest", 401: "Unauthorized", 403: "Forbidden", 404: "NotFound", 409: "Conflict",
                  413: "RequestEntityTooLarge", 422: "Invalid", 504: "Timeout"}.get(status, f"HTTP{status}")
    cls = _BY_REASON.get(reason) or _BY_STATUS.get(status, ServerError if status >= 500 else ApiError)
    return cls(status, reason, message or f"HTTP {status}", body)
