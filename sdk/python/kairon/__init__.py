"""Kairon Python SDK.

    from kairon import Client, UIClient, Sandbox

`Client` is the Kubernetes-compatible API, `UIClient` the REST API (on the client generated
from `openapi/openapi.json`, package `kairon_api`), `Sandbox` a Machine to work in.
"""

from .client import Client, UIClient
from .errors import (
    ApiError,
    BadRequestError,
    CommandError,
    ConflictError,
    ForbiddenError,
    GuestAgentDisabledError,
    KaironError,
    MachineSuspendedError,
    NotFoundError,
    ServerError,
    TimeoutError,
    UnauthorizedError,
    WakeTimeoutError,
)
from kairon_api.models.reason import Reason

from .sandbox import RunResult, Sandbox, SandboxProcess

__all__ = [
    "ApiError",
    "BadRequestError",
    "Client",
    "CommandError",
    "ConflictError",
    "ForbiddenError",
    "GuestAgentDisabledError",
    "KaironError",
    "MachineSuspendedError",
    "NotFoundError",
    "Reason",
    "RunResult",
    "Sandbox",
    "SandboxProcess",
    "ServerError",
    "TimeoutError",
    "UIClient",
    "UnauthorizedError",
    "WakeTimeoutError",
]
