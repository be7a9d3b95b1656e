"""Driven by `kairon-bench sdk` against `kairon up`: what an agent waits for, timed from Python
with the SDK as it uses it. Before each sample the pool is full (no refill running) and the last
sample's Machine is gone; then `claim_from(pool)` and its first `run`, and the five `run`s after
it (while the pool starts the member's replacement). Last, `run` on a claimed sandbox left quiet
until its pool is full again. Prints one JSON object of millisecond samples.

Usage: bench_claims.py POOL SIZE SAMPLES STEADY_RUNS (KAIRON_URL, KAIRON_TOKEN, KAIRON_CA_FILE,
KAIRON_NAMESPACE name the server)."""

from __future__ import annotations

import json
import sys
import time
from typing import Any

from kairon import Kairon

TIMEOUT = 300.0


def wait_full(k: Kairon, pool: str, size: int) -> None:
    """Until the pool holds `size` warm members."""
    deadline = time.monotonic() + TIMEOUT
    while True:
        status: dict[str, Any] = k.kube.get_pool(pool).get("status") or {}
        if int(status.get("warm", 0)) >= size:
            return
        if time.monotonic() > deadline:
            raise SystemExit(f"pool {pool} has {status.get('warm', 0)} of {size} warm members after {TIMEOUT} s")
        time.sleep(0.05)


def ms(since: float) -> float:
    return (time.perf_counter() - since) * 1000.0


def main() -> None:
    pool, size, samples, steady_runs = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
    k = Kairon()
    claim: list[float] = []
    first_run: list[float] = []
    runs_after: list[list[float]] = [[] for _ in range(5)]
    for i in range(samples):
        wait_full(k, pool, size)
        start = time.perf_counter()
        sb = k.sandbox.claim_from(pool)
        claim.append(ms(start))
        sb.run("true", check=True)
        first_run.append(ms(start))
        for after in runs_after:
            t = time.perf_counter()
            sb.run("true", check=True)
            after.append(ms(t))
        sb.close()
        k.ui.wait_machine(sb.name, deleted=True, timeout=TIMEOUT)
        if (i + 1) % 20 == 0:
            print(f"sdk: {i + 1} claims, the last's first run after {first_run[-1]:.1f} ms", file=sys.stderr)

    # A sandbox claimed, then left alone until its pool is full again: a steady `run`.
    wait_full(k, pool, size)
    sb = k.sandbox.claim_from(pool)
    sb.run("true", check=True)
    wait_full(k, pool, size)
    time.sleep(1.0)
    steady: list[float] = []
    for _ in range(steady_runs):
        t = time.perf_counter()
        sb.run("true", check=True)
        steady.append(ms(t))
    sb.close()
    print(json.dumps({"claim": claim, "first_run": first_run, "runs_after": runs_after, "steady": steady}))


if __name__ == "__main__":
    main()
