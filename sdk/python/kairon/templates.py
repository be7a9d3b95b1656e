"""A namespace's own sandbox templates: `k.templates.build("py312", image=..., steps=[...])`.

A template is an OCI image plus build steps (shell commands run as root over it, whose changes
become its top layer). Kairon builds it at once on one node, and on any other node when a
sandbox of it lands there; in its namespace it shadows a shared template of the same name, and
no other namespace sees it. A build's image is pulled under the node's egress policy (never from
a private address) and each template counts against the namespace's quota (`templates`).
"""

from __future__ import annotations

import builtins
import time
from collections.abc import Callable, Sequence

from kairon_api.api.templates import (
    kairontemplate_create,
    kairontemplate_delete,
    kairontemplate_get,
    kairontemplate_list,
)
from kairon_api.models import (
    KaironTemplate,
    KaironTemplateList,
    KaironTemplateSpec,
    KaironTemplateStatus,
    KindObjectMeta,
    TemplatePhase,
)

from .client import UIClient, _done, _ok
from .errors import KaironError, KaironTimeoutError

#: How often a build's progress is read.
POLL_SECONDS = 0.5


class TemplateBuildError(KaironError):
    """A template's build failed: `message` says which step (with its output) or why the pull
    was refused; fix the image or steps, delete the template and build it again."""

    def __init__(self, name: str, message: str) -> None:
        super().__init__(f"template {name!r} failed to build: {message}")
        self.name = name
        self.message = message


class Templates:
    """`k.templates`: build, read, list and delete the namespace's own templates."""

    def __init__(self, ui: UIClient) -> None:
        """Binds the REST client; `Kairon` makes this for you."""
        self.ui = ui

    def build(
        self,
        name: str,
        *,
        image: str,
        steps: Sequence[str] = (),
        wait: bool = True,
        timeout: float = 1800.0,
        on_progress: Callable[[str], None] | None = None,
        namespace: str | None = None,
    ) -> KaironTemplate:
        """Declares template `name` from `image` and `steps`; with `wait` (the default) returns
        once a node has built it, calling `on_progress` with each new progress line ("pulling
        ...: 3.1 of 40.2 MB", "running build step 1 of 2: pip install pandas"). Raises
        `TemplateBuildError` when the build fails, `KaironTimeoutError` after `timeout` seconds,
        `QuotaExceededError` past the namespace's `templates`."""
        body = KaironTemplate(metadata=KindObjectMeta(name=name), spec=KaironTemplateSpec(image=image, steps=list(steps)))
        made = _ok(kairontemplate_create.sync_detailed(self.ui._ns(namespace), client=self.ui.api, body=body),
                   KaironTemplate)
        return self.wait(name, timeout=timeout, on_progress=on_progress, namespace=namespace) if wait else made

    def wait(
        self,
        name: str,
        *,
        timeout: float = 1800.0,
        on_progress: Callable[[str], None] | None = None,
        namespace: str | None = None,
    ) -> KaironTemplate:
        """Returns template `name` once it is built on a node (see `build`)."""
        deadline = time.monotonic() + timeout
        said = None
        while True:
            t = self.get(name, namespace=namespace)
            status = t.status if isinstance(t.status, KaironTemplateStatus) else None
            phase = status.phase if status is not None and isinstance(status.phase, TemplatePhase) else None
            message = status.message if status is not None and isinstance(status.message, str) else None
            if phase == TemplatePhase.READY:
                return t
            if phase == TemplatePhase.FAILED:
                raise TemplateBuildError(name, message or "no reason given")
            if on_progress is not None and message and message != said:
                on_progress(message)
                said = message
            if time.monotonic() >= deadline:
                raise KaironTimeoutError(f"template {name!r} is not built after {timeout:g} s: {message or 'Pending'}")
            time.sleep(POLL_SECONDS)

    def get(self, name: str, *, namespace: str | None = None) -> KaironTemplate:
        """Template `name`, with its builds (`status.nodes`)."""
        return _ok(kairontemplate_get.sync_detailed(self.ui._ns(namespace), name, client=self.ui.api), KaironTemplate)

    def list(self, *, namespace: str | None = None) -> builtins.list[KaironTemplate]:
        """The namespace's templates."""
        resp = kairontemplate_list.sync_detailed(self.ui._ns(namespace), client=self.ui.api)
        return _ok(resp, KaironTemplateList).items

    def delete(self, name: str, *, namespace: str | None = None) -> None:
        """Deletes template `name` (its place in the quota is freed; sandboxes running from it
        keep running)."""
        _done(kairontemplate_delete.sync_detailed(self.ui._ns(namespace), name, client=self.ui.api))
