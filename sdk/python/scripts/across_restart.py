"""Driven by tests/tests/sdk.rs across a restart of `kairon up` on the same address: makes a
sandbox, prints `created`, waits for a line on stdin (sent once the server is down), then works
through the restart. The SDK retries a request that never reached the server (connection
refused), and a GET also when the answer is lost; a POST that may have arrived is never sent
twice, which would show here as AlreadyExists."""

from __future__ import annotations

import os
import sys
import time

from kairon import Client, Sandbox, UIClient

url, token = os.environ["KAIRON_URL"], os.environ["KAIRON_TOKEN"]
# More retries than the default: a debug build of `kairon up` takes a few seconds to come back.
kube = Client(url, token, namespace="restart", retries=9)
ui = UIClient(url, token, namespace="restart", retries=9)
sb = Sandbox.create(kube, ui, template="busybox", name="survivor")
print("created", flush=True)
sys.stdin.readline()
down_at = time.monotonic()
# Sent while the server is down: refused connections, retried until it is back; created once.
during = Sandbox.create(kube, ui, template="busybox", name="during")
waited = time.monotonic() - down_at
assert during.run("echo made", check=True).stdout == "made\n"
# A GET of the sandbox made before the restart, and a command in it.
assert sb.info().metadata.name == "survivor"
assert sb.run("echo back", check=True).stdout == "back\n"
print(f"ok after {waited:.1f} s", flush=True)
