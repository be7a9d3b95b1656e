"""The SDK tests run against a real `kairon up`: KAIRON_URL, KAIRON_TOKEN and KAIRON_CA_FILE
say which (tests/tests/sdk.rs starts one and runs these). KAIRON_TEST_TEMPLATE picks the
sandbox template (default busybox)."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from kairon import Client, Sandbox, UIClient

NS = "sdk-tests"


def _env(name: str) -> str:
    v = os.environ.get(name)
    if not v:
        raise RuntimeError(f"set {name} (tests/tests/sdk.rs starts kairon up and sets it)")
    return v


@pytest.fixture(scope="session")
def kube() -> Client:
    return Client(_env("KAIRON_URL"), _env("KAIRON_TOKEN"), namespace=NS)


@pytest.fixture(scope="session")
def ui() -> UIClient:
    return UIClient(_env("KAIRON_URL"), _env("KAIRON_TOKEN"), namespace=NS)


@pytest.fixture(scope="session")
def template() -> str:
    return os.environ.get("KAIRON_TEST_TEMPLATE", "busybox")


@pytest.fixture(scope="session")
def sandbox(kube: Client, ui: UIClient, template: str) -> Iterator[Sandbox]:
    with Sandbox.create(kube, ui, template=template, idle_timeout=600, max_lifetime=3600) as sb:
        yield sb
