"""Driven by tests/tests/sdk.rs: streams a 100 MiB file into a sandbox and back out (from a generator, to a local file), checks every byte, and prints how much
the client's peak RSS grew. Files go as they are read, never whole: it must stay under 20 MiB.
A process of its own, so nothing the test runner did before skews the peak."""

from __future__ import annotations

import hashlib
import os
import resource
import tempfile
from collections.abc import Iterator

from kairon import Client, Sandbox, UIClient

MIB = 1 << 20
SIZE_MIB = 100


def rss_kib() -> int:
    with open("/proc/self/status") as f:
        return next(int(line.split()[1]) for line in f if line.startswith("VmRSS:"))


def peak_kib() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


def blocks(sent: hashlib._Hash) -> Iterator[bytes]:
    for i in range(SIZE_MIB):
        block = (i.to_bytes(4, "big") * (MIB // 4))
        sent.update(block)
        yield block


def main() -> None:
    url, token = os.environ["KAIRON_URL"], os.environ["KAIRON_TOKEN"]
    kube, ui = Client(url, token, namespace="stream"), UIClient(url, token, namespace="stream")
    with Sandbox.create(kube, ui, template="busybox") as sb:
        measure(sb)


def measure(sb: Sandbox) -> None:
    sb.run("true", check=True)  # every import and connection made before the baseline
    base = rss_kib()

    sent = hashlib.sha256()
    sb.files.write("/tmp/stream-100m.bin", blocks(sent))
    size = int(sb.run("wc -c < /tmp/stream-100m.bin", check=True).stdout)
    assert size == SIZE_MIB * MIB, size

    got = hashlib.sha256()
    with tempfile.TemporaryDirectory() as d:
        local = os.path.join(d, "back.bin")
        n = sb.files.download("/tmp/stream-100m.bin", local)
        with open(local, "rb") as f:
            while chunk := f.read(MIB):
                got.update(chunk)
    assert n == SIZE_MIB * MIB, n
    assert got.hexdigest() == sent.hexdigest(), "the bytes that came back differ"
    sb.files.remove("/tmp/stream-100m.bin")

    grew = max(0, peak_kib() - base) / 1024
    print(f"streamed {SIZE_MIB} MiB in and out; client peak RSS grew {grew:.1f} MiB", flush=True)
    assert grew < 20, f"the client's peak RSS grew {grew:.1f} MiB: a file was held whole"


if __name__ == "__main__":
    main()
