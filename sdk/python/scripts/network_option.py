"""Driven by tests/tests/sdk.rs against `kairon up` with its default guest network, whose node
side lives in a test bed (`allowed.test`, `refused.test` and a stand-in package index `pypi.test`
answer there, nothing leaves the machine): a sandbox reaches the internet by default, so `pip
download` works in the python template; `network="none"` reaches nothing and the refusal shows in
`events("EgressDenied")`; an allowlist admits its host and refuses another."""

from __future__ import annotations

import os
import time

from kairon import Client, Sandbox, UIClient

url, token = os.environ["KAIRON_URL"], os.environ["KAIRON_TOKEN"]
kube = Client(url, token, namespace="net")
ui = UIClient(url, token, namespace="net")
FETCH = "wget -q -O - http://{}/"
PIP = "pip download --no-deps six -d /tmp && ls /tmp"
INDEX = {"PIP_INDEX_URL": "http://pypi.test/simple", "PIP_TRUSTED_HOST": "pypi.test", "PIP_RETRIES": "0",
         "PIP_TIMEOUT": "5"}


def denial(sb: Sandbox, host: str) -> str:
    """The message of the EgressDenied Event about `host`, waited for."""
    for _ in range(100):
        for event in sb.events("EgressDenied"):
            if host in event.get("message", ""):
                return str(event["message"])
        time.sleep(0.2)
    raise AssertionError(f"no EgressDenied Event about {host} on {sb.name}: {sb.events()}")


with Sandbox.create(kube, ui, template="busybox") as online:
    got = online.run(FETCH.format("refused.test"))
    assert got.exit_code == 0 and got.stdout.startswith("hello from"), got

with Sandbox.create(kube, ui, template="busybox", network="none") as offline:
    assert kube.get_machine(offline.name)["spec"]["network"]["egress"] == {"mode": "None"}
    got = offline.run(FETCH.format("allowed.test"))
    assert got.exit_code != 0, got
    said = denial(offline, "allowed.test")
    assert "mode is None" in said, said

with Sandbox.create(kube, ui, template="busybox", network=["allowed.test"]) as narrow:
    got = narrow.run(FETCH.format("allowed.test"))
    assert got.exit_code == 0 and got.stdout.startswith("hello from"), got
    got = narrow.run(FETCH.format("refused.test"))
    assert got.exit_code != 0, got
    said = denial(narrow, "refused.test")
    assert "spec.network.egress.allow" in said, said

# The agent's first command: pip, from the python template (built on first use).
with Sandbox.create(kube, ui, template="python", env=INDEX, ready_timeout=900) as py:
    got = py.run(PIP, timeout=120)
    assert got.exit_code == 0 and "six-1.16.0-py2.py3-none-any.whl" in got.stdout, got
with Sandbox.create(kube, ui, template="python", env=INDEX, network="none") as py:
    got = py.run(PIP, timeout=120)
    assert got.exit_code != 0, got
    said = denial(py, "pypi.test")
    assert "mode is None" in said, said
with Sandbox.create(kube, ui, template="python", env=INDEX, network=["pypi.test"]) as py:
    got = py.run(PIP, timeout=120)
    assert got.exit_code == 0 and "six-1.16.0-py2.py3-none-any.whl" in got.stdout, got
    got = py.run("python3 -c \"import urllib.request; urllib.request.urlopen('http://refused.test/', timeout=5)\"")
    assert got.exit_code != 0, got
    said = denial(py, "refused.test")
    assert "spec.network.egress.allow" in said, said

try:
    Sandbox.create(kube, ui, template="busybox", network="offline")
    raise AssertionError("network='offline' was taken")
except ValueError as e:
    assert "'none'" in str(e), e
print("ok", flush=True)
