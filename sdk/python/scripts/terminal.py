"""Driven by tests/tests/sdk.rs against `kairon up`: a terminal from the SDK (`sb.pty`) on a
sandbox of the python template and on a VM booted from KAIRON_IMAGE (its guest agent's terminal):
`tput cols` prints 80, then 120 after `resize(120, 40)`; ^C interrupts `sleep`; the exit code
comes back; `kill()` ends the command and what it started. Prints `ok <kind>` for each."""

from __future__ import annotations

import os
import time

from kairon import Client, Sandbox, UIClient

url, token = os.environ["KAIRON_URL"], os.environ["KAIRON_TOKEN"]
kube = Client(url, token, namespace="terminals")
ui = UIClient(url, token, namespace="terminals")


# Every process's command line (no `ps` in Debian's minbase).
PROCS = "for p in /proc/[0-9]*; do tr '\\0' ' ' < $p/cmdline; echo; done 2>/dev/null"


def procs(sb: Sandbox) -> str:
    return sb.run(PROCS).stdout


def check(sb: Sandbox, kind: str) -> None:
    shown: list[bytes] = []
    with sb.pty(on_data=shown.append) as term:
        # The terminal echoes what is typed: the markers are only whole in the command's output.
        term.write("echo C$(tput cols)R$(tput lines)E\n")
        term.read_until("C80R24E")
        term.resize(120, 40)
        term.write("echo C$(tput cols)R$(tput lines)E\n")
        term.read_until("C120R40E")
        term.write("echo sleep-starts; sleep 300\n")
        term.read_until("sleep-starts\r\n")
        started = time.monotonic()
        term.write("\x03")
        term.write("echo after-$?\n")
        term.read_until("after-130")
        assert time.monotonic() - started < 10, "^C did not interrupt sleep"
        term.write("exit 3\n")
        assert term.wait(timeout=30) == 3
        assert b"C120R40E" in b"".join(shown), shown
    # kill() ends the command and its children: nothing is left running.
    term = sb.pty(command="sleep 4242 & echo started; sleep 4243; echo never")
    term.read_until("started")
    assert "sleep 4242" in procs(sb), procs(sb)
    term.kill()
    assert term.wait(timeout=30) == -9
    for _ in range(50):
        if "sleep 424" not in procs(sb):
            break
        time.sleep(0.2)
    else:
        raise AssertionError(f"{kind}: the killed terminal's commands still run: {procs(sb)}")
    print(f"ok {kind}", flush=True)


with Sandbox.create(kube, ui, template="python", ready_timeout=900) as sb:
    check(sb, "sandbox")
with Sandbox.create(kube, ui, image=os.environ["KAIRON_IMAGE"], ready_timeout=600) as vm:
    check(vm, "vm")
