"""Driven by tests/tests/templates.rs against `kairon up` with build nodes: a namespace's own
template built from the Python SDK (`k.templates.build`) as an operator of that namespace, from
an image in the test registry with a build step; a failing step's build raises with the step
and its output; the namespace's quota refuses a template past `templates`; an operator of
another namespace neither lists nor reads them. Prints `ok <step>` for each."""

from __future__ import annotations

import os

from kairon import ForbiddenError, Kairon, QuotaExceededError, TemplateBuildError
from kairon_api.models import TemplatePhase

image = os.environ["TEMPLATE_IMAGE"]
k = Kairon()
progress: list[str] = []
built = k.templates.build("py-sdk", image=image, steps=["echo sdk > /sdk.txt"], on_progress=progress.append)
assert built.status and built.status.phase == TemplatePhase.READY, built
assert [t.metadata.name for t in k.templates.list()].count("py-sdk") == 1
assert k.templates.get("py-sdk").spec.steps == ["echo sdk > /sdk.txt"]
print("ok build")

try:
    k.templates.build("broken", image=image, steps=["echo the-reason >&2; exit 3"])
    raise AssertionError("a failing step fails the build")
except TemplateBuildError as e:
    assert "build step 1 of 1" in e.message and "code 3" in e.message and "the-reason" in e.message, e.message
print("ok failed")

try:
    k.templates.build("one-too-many", image=image, wait=False)
    raise AssertionError("the quota refuses a template past its limit")
except QuotaExceededError as e:
    assert "templates" in str(e), e
print("ok quota")

other = Kairon(token=os.environ["OTHER_TOKEN"])
for attempt in (lambda: other.templates.list(), lambda: other.templates.get("py-sdk")):
    try:
        attempt()
        raise AssertionError("another namespace's operator reads no templates here")
    except ForbiddenError:
        pass
k.templates.delete("broken")
print("ok isolation")
