"""`Kairon`: the one entry point.

    from kairon import Kairon

    k = Kairon()                      # arguments, else KAIRON_* variables, else the kubeconfig
    with k.sandbox.create(template="busybox") as sb:
        print(sb.run("uname -a", check=True).stdout)

`k.kube` and `k.ui` are the two clients (`Client`, `UIClient`) the spec's two-client form uses;
`k.sandbox` makes, claims, attaches to and lists sandboxes with them; `k.templates` builds the
namespace's own templates (`k.templates.build("py312", image=..., steps=[...])`).
"""

from __future__ import annotations

import builtins
import os
from types import TracebackType
from typing import Any

from ._http import DEFAULT_RETRIES
from .client import Client, UIClient
from .config import Config, resolve
from .sandbox import Sandbox
from .templates import Templates


class Sandboxes:
    """`Sandbox`'s constructors bound to a `Kairon`'s clients: `k.sandbox.create(...)` is
    `Sandbox.create(k.kube, k.ui, ...)`, and so on."""

    def __init__(self, kube: Client, ui: UIClient) -> None:
        """Binds `kube` and `ui`; `Kairon` makes this for you."""
        self.kube = kube
        self.ui = ui

    def create(self, image: str | None = None, **options: Any) -> Sandbox:
        """`Sandbox.create(kube, ui, image, template=..., **options)`: a new Machine, ready for
        commands."""
        return Sandbox.create(self.kube, self.ui, image, **options)

    def claim_from(self, pool: str, **options: Any) -> Sandbox:
        """`Sandbox.claim_from(kube, ui, pool, **options)`: a warm member of the pool."""
        return Sandbox.claim_from(self.kube, self.ui, pool, **options)

    def connect(self, name: str, *, namespace: str | None = None, ready_timeout: float | None = None) -> Sandbox:
        """`Sandbox.connect(kube, ui, name)`: attaches to an existing Machine."""
        return Sandbox.connect(self.kube, self.ui, name, namespace=namespace, ready_timeout=ready_timeout)

    def list(self, *, labels: dict[str, str] | None = None, namespace: str | None = None) -> builtins.list[Sandbox]:
        """`Sandbox.list(kube, ui, labels=...)`: the namespace's sandboxes."""
        return Sandbox.list(self.kube, self.ui, labels=labels, namespace=namespace)


class Kairon:
    """A connection to one Kairon server: `Kairon()`, or `Kairon(url, token, namespace=...)`.

    Each setting comes from the argument, else `KAIRON_URL`, `KAIRON_TOKEN`, `KAIRON_NAMESPACE`,
    `KAIRON_CA_FILE`, else the kubeconfig `kairon up` writes (`kubeconfig=`, else `$KUBECONFIG`,
    else `~/.local/state/kairon/kubeconfig`; its current context, or `context=`). `retries` bounds
    the retries of idempotent calls and of connections that could not be made. Raises
    `ConfigError` when no server URL or token is found. `config` says what was used.
    """

    def __init__(
        self,
        url: str | None = None,
        token: str | None = None,
        namespace: str | None = None,
        *,
        ca_file: str | None = None,
        kubeconfig: str | os.PathLike[str] | None = None,
        context: str | None = None,
        retries: int = DEFAULT_RETRIES,
    ) -> None:
        """Resolves the configuration and makes the clients (no request is sent yet)."""
        self.config: Config = resolve(url, token, namespace, ca_file=ca_file, kubeconfig=kubeconfig, context=context)
        c = self.config
        self.kube = Client(c.url, c.token, c.namespace, ca_file=c.ca_file, ca_data=c.ca_data, retries=retries)
        self.ui = UIClient(c.url, c.token, c.namespace, ca_file=c.ca_file, ca_data=c.ca_data, retries=retries)
        self.sandbox = Sandboxes(self.kube, self.ui)
        self.templates = Templates(self.ui)

    @property
    def url(self) -> str:
        """The server's URL."""
        return self.config.url

    @property
    def namespace(self) -> str:
        """The namespace calls use unless given another."""
        return self.config.namespace

    def close(self) -> None:
        """Closes both clients' connections (sandboxes are left as they are)."""
        self.kube.close()
        self.ui.close()

    def __enter__(self) -> Kairon:
        """The connection; leaving the block closes it."""
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        """Closes the connection."""
        self.close()

    def __repr__(self) -> str:
        return f"Kairon({self.url!r}, namespace={self.namespace!r})"
