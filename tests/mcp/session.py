"""A scripted MCP session with the `mcp` Python SDK against Kairon's /mcp, as an agent framework
would hold it: initialize, tools/list (annotations checked), then every tool an agent uses,
each result asserted. tests/tests/mcp.rs starts `kairon up`, makes the pool `mcp-pool` in
namespace `mcp` and runs this with KAIRON_URL, KAIRON_TOKEN and KAIRON_CA_FILE set; it prints
`session ok` at the end."""

from __future__ import annotations

import asyncio
import base64
import json
import os
import ssl
import time
from typing import Any

import httpx2
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

NS = "mcp"


def text_of(result: Any) -> str:
    assert not result.is_error, f"the tool failed: {result.content}"
    return "".join(c.text for c in result.content if getattr(c, "type", "") == "text")


async def call(s: ClientSession, tool: str, **args: Any) -> str:
    return text_of(await s.call_tool(tool, {"namespace": NS, **args}))


async def call_json(s: ClientSession, tool: str, **args: Any) -> Any:
    return json.loads(await call(s, tool, **args))


async def refused(s: ClientSession, tool: str, **args: Any) -> str:
    result = await s.call_tool(tool, {"namespace": NS, **args})
    assert result.is_error, f"{tool} should have failed: {result.content}"
    return "".join(c.text for c in result.content if getattr(c, "type", "") == "text")


async def session(s: ClientSession) -> None:
    init = await s.initialize()
    assert init.server_info.name, init

    # tools/list: every tool an agent needs, with annotations that say what each one does.
    tools = {t.name: t for t in (await s.list_tools()).tools}
    want = {"create_sandbox", "claim_sandbox", "run_command", "read_file", "write_file", "pause", "resume",
            "close_sandbox", "list_sandboxes", "start_process", "read_process", "kill_process", "fork_sandbox",
            "describe_claim"}
    assert want <= set(tools), f"missing tools: {want - set(tools)}"
    hints = {name: tools[name].annotations for name in want}
    for name in ("read_file", "list_sandboxes", "read_process", "describe_claim"):
        assert hints[name] is not None and hints[name].read_only_hint is True, (name, hints[name])
    for name in ("run_command", "close_sandbox", "kill_process", "write_file"):
        assert hints[name] is not None and hints[name].destructive_hint is True, (name, hints[name])
        assert hints[name].read_only_hint is False, (name, hints[name])
    for name in ("create_sandbox", "fork_sandbox", "pause"):
        assert hints[name] is not None and hints[name].destructive_hint is False, (name, hints[name])
    assert all(tools[n].input_schema.get("properties", {}).get("namespace") for n in want)

    # create: answers once the guest agent answers, so the next call runs at once.
    made = await call_json(s, "create_sandbox", template="busybox", name="agent")
    assert made == {"namespace": NS, "name": "agent", "phase": "Running"}, made
    first = await call_json(s, "run_command", name="agent", command="echo up")
    assert first["exitCode"] == 0 and first["stdout"] == "up\n", first

    listed = {x["name"]: x for x in (await call_json(s, "list_sandboxes"))["sandboxes"]}
    assert listed["agent"]["phase"] == "Running" and listed["agent"]["pool"] is None, listed
    # The pool's warm member is a sandbox of the namespace too.
    assert [x["pool"] for n, x in listed.items() if n != "agent"] == ["mcp-pool"], listed

    # Binary-safe files: bytes that are not UTF-8 go as base64 both ways.
    blob = bytes(range(256)) * 4
    wrote = await call(s, "write_file", name="agent", path="/tmp/blob.bin",
                       content=base64.b64encode(blob).decode(), encoding="base64")
    assert wrote == "wrote 1024 bytes to /tmp/blob.bin", wrote
    back = await call_json(s, "read_file", name="agent", path="/tmp/blob.bin")
    assert back["encoding"] == "base64" and base64.b64decode(back["content"]) == blob, back
    await call(s, "write_file", name="agent", path="/tmp/note.txt", content="héllo\n")
    assert await call(s, "read_file", name="agent", path="/tmp/note.txt") == "héllo\n"
    size = await call_json(s, "run_command", name="agent", command="wc -c < /tmp/blob.bin")
    assert size["stdout"].strip() == "1024", size

    # run_command: cwd, env, a timeout, and output cut to what a model can take, saying so.
    ran = await call_json(s, "run_command", name="agent", command='pwd; echo "$GREETING"', cwd="/tmp",
                          env={"GREETING": "hi there"})
    assert (ran["stdout"], ran["exitCode"]) == ("/tmp\nhi there\n", 0), ran
    started = time.monotonic()
    slow = await call_json(s, "run_command", name="agent", command="sleep 30", timeout_seconds=1)
    assert slow["timedOut"] is True and time.monotonic() - started < 20, slow
    big = await call_json(s, "run_command", name="agent", command="head -c 300000 /dev/zero | tr '\\0' a",
                          max_output_bytes=1000)
    assert big["stdout"] == "a" * 1000 and big["truncated"] is True, {k: v for k, v in big.items() if k != "stdout"}
    assert "299000 bytes of stdout" in big["note"], big["note"]
    small = await call_json(s, "run_command", name="agent", command="echo short")
    assert small["truncated"] is False and "note" not in small, small
    assert "max_output_bytes" in await refused(s, "run_command", name="agent", command="true",
                                               max_output_bytes=10_000_000)

    # Background processes: start, read while running, kill.
    proc = await call_json(s, "start_process", name="agent", command="echo begun; sleep 600")
    pid = proc["id"]
    deadline = time.monotonic() + 30
    while True:
        state = await call_json(s, "read_process", name="agent", pid=pid)
        if state["stdout"] == "begun\n" or time.monotonic() > deadline:
            break
        await asyncio.sleep(0.2)
    assert state["state"] == "running" and state["stdout"] == "begun\n", state
    assert await call(s, "kill_process", name="agent", pid=pid, signal="KILL") == f"sent KILL to process {pid}"
    deadline = time.monotonic() + 30
    while (state := await call_json(s, "read_process", name="agent", pid=pid))["state"] != "exited":
        assert time.monotonic() < deadline, state
        await asyncio.sleep(0.2)

    # Fork: a copy with the files, its own from then on.
    forked = await call_json(s, "fork_sandbox", name="agent", new_name="agent-try")
    assert forked["name"] == "agent-try" and forked["phase"] == "Running", forked
    seen = await call_json(s, "run_command", name="agent-try", command="cat /tmp/note.txt")
    assert seen["stdout"] == "héllo\n", seen

    # Pause and resume.
    assert await call(s, "pause", name="agent") == f"{NS}/agent is Paused"
    assert "Running" in await call(s, "resume", name="agent")

    for name in ("agent", "agent-try"):
        assert await call(s, "close_sandbox", name=name) == f"Machine {NS}/{name} deleted"

    # A claim: described while bound, released, and described again from the usage history.
    claimed = await call_json(s, "claim_sandbox", pool="mcp-pool", name="job")
    assert claimed["claim"] == "job" and claimed["phase"] == "Running", claimed
    worked = await call_json(s, "run_command", name=claimed["name"], command="echo work")
    assert worked["stdout"] == "work\n", worked
    bound = await call_json(s, "describe_claim", name="job")
    assert bound["phase"] == "Bound" and bound["machine"] == claimed["name"], bound
    assert await call(s, "close_sandbox", claim="job") == f"claim {NS}/job released"
    deadline = time.monotonic() + 120
    while True:
        gone = await call_json(s, "describe_claim", name="job")
        if gone.get("deleted") or time.monotonic() > deadline:
            break
        await asyncio.sleep(0.5)
    assert gone["deleted"] is True and gone["phase"] == "Released" and gone["uid"] == bound["uid"], gone
    assert gone["usage"]["activeSeconds"] >= 0 and "vcpuSeconds" in gone["usage"], gone

    # A refusal is a tool error that says why, not a protocol failure.
    assert "NotFound" in await refused(s, "run_command", name="nosuch", command="true")


async def main() -> None:
    ctx = ssl.create_default_context(cafile=os.environ["KAIRON_CA_FILE"])
    headers = {"Authorization": f"Bearer {os.environ['KAIRON_TOKEN']}"}
    async with httpx2.AsyncClient(verify=ctx, headers=headers, timeout=httpx2.Timeout(900.0)) as http:
        async with streamable_http_client(f"{os.environ['KAIRON_URL']}/mcp", http_client=http) as streams:
            read, write = streams[0], streams[1]
            async with ClientSession(read, write) as s:
                await session(s)
    print("session ok")


if __name__ == "__main__":
    asyncio.run(main())
