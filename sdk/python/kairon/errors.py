"""Typed errors: every failed API call raises an ApiError subclass carrying the server's reason
and message (the REST API's `{reason, message}` body, or a Kubernetes `Status`)."""

from __future__ import annotations

import json
from typing import Any

from kairon_api.models.reason import Reason


class KaironError(Exception):
    """Base of every error the SDK raises."""


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


class BadRequestError(ApiError):
    """400 or 422: the request itself is wrong; the message says what to fix."""


class UnauthorizedError(ApiError):
    """401: no token, or one the server does not accept."""


class ForbiddenError(ApiError):
    """403: the token's role or namespaces do not allow this."""


class NotFoundError(ApiError):
    """404: no such object (or file, or process)."""


class ConflictError(ApiError):
    """409: the object exists already, or is in a state that does not allow this."""


class TimeoutError(ApiError):
    """504: the server waited for something that did not happen in time."""


class ServerError(ApiError):
    """5xx other than 504."""


class MachineSuspendedError(ConflictError):
    """409 `MachineSuspended`: the Machine is suspended and is not woken on connect."""


class GuestAgentDisabledError(ConflictError):
    """409 `GuestAgentDisabled`: the Machine has no guest agent to run commands or move files."""


class WakeTimeoutError(TimeoutError):
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

_BY_REASON: dict[str, type[ApiError]] = {
    Reason.MACHINESUSPENDED: MachineSuspendedError,
    Reason.GUESTAGENTDISABLED: GuestAgentDisabledError,
    Reason.WAKETIMEOUT: WakeTimeoutError,
}

_BY_STATUS: dict[int, type[ApiError]] = {
    400: BadRequestError,
    401: UnauthorizedError,
    403: ForbiddenError,
    404: NotFoundError,
    409: ConflictError,
    422: BadRequestError,
    504: TimeoutError,
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
