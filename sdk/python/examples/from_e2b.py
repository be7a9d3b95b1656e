"""Coming from E2B: each row of the README's table ("Coming from E2B"), the E2B call in its comment
and the Kairon one run here, against `kairon up` (KAIRON_URL, KAIRON_TOKEN, KAIRON_CA_FILE or the
kubeconfig it wrote). tests/tests/sdk.rs runs it; it prints one line per row."""

from __future__ import annotations

import queue
import time

import httpx

from kairon import Kairon, WatchEvent

k = Kairon(namespace="from-e2b")


def row(name: str) -> None:
    print(f"ok {name}", flush=True)


# Sandbox.create(template="base", timeout=300)
sb = k.sandbox.create(template="busybox", timeout=300)
row("create")
try:
    # sbx.commands.run("echo hi")
    assert sb.run("echo hi").stdout == "hi\n"
    row("commands.run")

    # sbx.commands.run("sleep 1; echo done", background=True)  →  handle.wait()
    p = sb.start("sleep 1; echo done")
    assert p.wait() == 0 and p.logs() == "done\n"
    row("commands.run(background=True)")

    # sbx.files.write / read / list / exists / get_info / rename / remove / make_dir
    sb.files.write("/work/a.txt", "hello")
    assert sb.files.read_text("/work/a.txt") == "hello"
    assert [e.name for e in sb.files.list("/work")] == ["a.txt"]
    assert sb.files.exists("/work/a.txt") and sb.files.info("/work/a.txt").size == 5
    sb.files.rename("/work/a.txt", "/work/b.txt")
    sb.files.make_dir("/work/sub")
    sb.files.remove("/work", recursive=True)
    assert not sb.files.exists("/work")
    row("files")

    # sbx.files.watch_dir("/data", on_event, recursive=True)
    sb.files.make_dir("/data")
    seen: queue.Queue[WatchEvent] = queue.Queue()
    with sb.files.watch("/data", recursive=True, on_event=seen.put):
        sb.run("echo x > /data/new.txt")
        event = seen.get(timeout=5)
        assert (event.type, event.path) == ("create", "/data/new.txt"), event
    row("files.watch_dir")

    # sbx.pty.create(PtySize(rows=24, cols=80), on_data=...)  →  send_stdin, resize, wait
    with sb.pty(80, 24) as term:
        term.write("echo S$(stty size)E; exit 0\n")
        term.read_until("S24 80E")
        assert term.wait(timeout=30) == 0
    row("pty")

    # sbx.get_metrics()
    assert sb.metrics().memory_used_bytes > 0
    row("get_metrics")

    # sbx.set_timeout(600)
    assert sb.set_timeout(600).timestamp() > time.time() + 500
    row("set_timeout")

    # sbx.get_host(8000): a server in the sandbox, reached through a preview link
    # (sb.preview_url), Kairon's authenticated proxy (sb.url) or a local port (sb.port_forward)
    sb.run("mkdir -p /www && echo served > /www/index.html", check=True)
    httpd = sb.start(["httpd", "-f", "-p", "8000", "-h", "/www"])
    with sb.port_forward(8000) as fwd:
        for _ in range(100):
            try:
                if httpx.get(f"{fwd.url}/index.html", timeout=5).text == "served\n":
                    break
            except httpx.HTTPError:
                pass
            time.sleep(0.2)
        else:
            raise AssertionError("the server in the sandbox did not answer through the forward")
    # A link any browser opens with no header, on an origin of its own (scripts/preview.py opens one).
    assert sb.preview_url(8000).startswith("https://")
    httpd.kill()
    row("get_host")

    # Sandbox.connect(sandbox_id) / Sandbox.list() / sbx.sandbox_id
    assert k.sandbox.connect(sb.name).name == sb.name
    assert sb.name in [s.name for s in k.sandbox.list()]
    row("connect, list, sandbox_id")

    # sbx.pause() / Sandbox.connect() to resume / sbx.is_running()
    sb.pause()
    assert sb.phase == "Paused"
    sb.resume()
    assert sb.phase == "Running"
    row("pause, resume, is_running")
finally:
    # sbx.kill()
    sb.close()
row("kill")

# from e2b_code_interpreter import Sandbox; sbx.run_code("x = 21"); sbx.run_code("x * 2").text
with k.sandbox.create(template="python", ready_timeout=900) as py, py.code_context("python") as ctx:
    ctx.run("x = 21")
    assert ctx.run("x * 2").text == "42"
row("run_code")

# Template.build(Template().from_image(...).run_cmd("echo built > /built.txt"), alias="from-e2b")
# (an image from a registry, e.g. image="docker.io/library/python:3.12-slim"; here the node's own busybox)
k.templates.build("from-e2b", image="builtin:busybox", steps=["echo built > /built.txt"])
with k.sandbox.create(template="from-e2b") as built:
    assert built.run("cat /built.txt").stdout == "built\n"
k.templates.delete("from-e2b")
row("Template.build")
