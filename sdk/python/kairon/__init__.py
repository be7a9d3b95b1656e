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
    KaironError,
    NotFoundError,
    ServerError,
    TimeoutError,
    UnauthorizedError,
)
from .sandbox import RunResult, Sandbox, SandboxProcess

__all__ = [
    "ApiError",
    "BadRequestError",
    "Client",
    "CommandError",
    "ConflictError",
    "ForbiddenError",
    "KaironError",
    "NotFoundError",
    "RunResult",
    "Sandbox",
    "SandboxProcess",
    "ServerError",
    "TimeoutError",
    "UIClient",
]
