"""Driven by tests/tests/sdk.rs against `kairon up` with its default guest network, whose node
side lives in a test bed (`allowed.test` and `refused.test` answer there, nothing leaves the
machine): a sandbox reaches the internet by default; `network="none"` reaches nothing and the
refusal shows in `events("EgressDenied")`; an allowlist admits its host and refuses another."""

from __future__ import annotations

import os
import time

from kairon import Client, Sandbox, UIClient

url, token = os.environ["KAIRON_URL"], os.environ["KAIRON_TOKEN"]
kube = Client(url, token, namespace="net")
ui = UIClient(url, token, namespace="net")
FETCH = "wget -q -O - http://{}/"


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

try:
    Sandbox.create(kube, ui, template="busybox", network="offline")
    raise AssertionError("network='offline' was taken")
except ValueError as e:
    assert "'none'" in str(e), e
print("ok", flush=True)
