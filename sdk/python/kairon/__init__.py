"""Kairon Python SDK (distribution `kairon-sdk`).

    from kairon import Kairon

    k = Kairon()   # KAIRON_URL / KAIRON_TOKEN, else the kubeconfig `kairon up` wrote
    with k.sandbox.create(template="busybox") as sb:
        print(sb.run("uname -a", check=True).stdout)

For asyncio, `kairon.aio` has the same surface to await: `AsyncKairon`, `AsyncSandbox`.

`Kairon` is the entry point; `Client` is the Kubernetes-compatible API, `UIClient` the REST API
(on the client generated from `openapi/openapi.json`, package `kairon_api`), `Sandbox` a Machine
to work in. Every error is a `KaironError`; the SDK logs to `logging.getLogger("kairon")`.

`kairon.TimeoutError` is the old name of `GatewayTimeoutError`; it is not exported by
`from kairon import *`, which leaves Python's builtin `TimeoutError` alone (every SDK timeout is
also a builtin `TimeoutError`).
"""

from ._version import __version__
from .client import Client, UIClient
from .config import Config, ConfigError
from .errors import (
    ApiError,
    BadRequestError,
    CommandError,
    ConflictError,
    ForbiddenError,
    GatewayTimeoutError,
    GuestAgentDisabledError,
    PowerStateUnsupportedError,
    KaironConnectionError,
    KaironError,
    KaironTimeoutError,
    MachineSuspendedError,
    NotFoundError,
    PayloadTooLargeError,
    QuotaExceededError,
    ServerError,
    TimeoutError as TimeoutError,
    UnauthorizedError,
    WakeTimeoutError,
)
from kairon_api.models.kairon_template import KaironTemplate
from kairon_api.models.preview import Preview
from kairon_api.models.reason import Reason

from .code import CodeContext, CodeError, CodeResult, CodeRunError
from .files import Files, FileWatch, WatchEvent
from .forward import PortForward
from .pty import Pty
from .sandbox import Output, RunResult, Sandbox, SandboxProcess, machine_source, network_spec, secret_env
from .templates import TemplateBuildError, Templates
from ._kairon import Kairon, Sandboxes
from .aio import (
    AsyncCodeContext,
    AsyncFiles,
    AsyncFileWatch,
    AsyncKairon,
    AsyncPty,
    AsyncSandbox,
    AsyncSandboxes,
    AsyncSandboxProcess,
    AsyncTemplates,
)

__all__ = [
    "ApiError",
    "AsyncCodeContext",
    "AsyncFiles",
    "AsyncFileWatch",
    "AsyncKairon",
    "AsyncPty",
    "AsyncSandbox",
    "AsyncSandboxProcess",
    "AsyncSandboxes",
    "AsyncTemplates",
    "BadRequestError",
    "Client",
    "CodeContext",
    "CodeError",
    "CodeResult",
    "CodeRunError",
    "CommandError",
    "Config",
    "ConfigError",
    "ConflictError",
    "FileWatch",
    "Files",
    "ForbiddenError",
    "GatewayTimeoutError",
    "GuestAgentDisabledError",
    "PowerStateUnsupportedError",
    "Kairon",
    "KaironTemplate",
    "KaironConnectionError",
    "KaironError",
    "KaironTimeoutError",
    "MachineSuspendedError",
    "NotFoundError",
    "PayloadTooLargeError",
    "Reason",
    "Output",
    "PortForward",
    "Preview",
    "Pty",
    "RunResult",
    "Sandbox",
    "SandboxProcess",
    "Sandboxes",
    "ServerError",
    "TemplateBuildError",
    "Templates",
    "UIClient",
    "UnauthorizedError",
    "WatchEvent",
    "QuotaExceededError",
    "WakeTimeoutError",
    "__version__",
    "machine_source",
    "network_spec",
    "secret_env",
]
