"""The asyncio API (`kairon.aio`) against a real `kairon up`, as the sync tests are."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator

import pytest

from kairon import AsyncKairon, AsyncSandbox, NotFoundError, Output

NS = "sdk-tests"  # conftest's: tests/tests/sdk.rs checks it is left empty


def test_the_async_api_runs_streams_and_moves_files_concurrently() -> None:
    asyncio.run(_scenario())


async def _scenario() -> None:
    async with AsyncKairon(namespace=NS) as k:
        async with await k.sandbox.create(template="busybox", labels={"suite": "aio"}) as sb:
            assert isinstance(sb, AsyncSandbox)
            assert (await sb.run("echo hi", check=True)).stdout == "hi\n"

            # Two commands that each wait for the other: they finish only if they run at once.
            a = sb.run("touch /tmp/a; until [ -e /tmp/b ]; do sleep 0.1; done; echo a", timeout=30)
            b = sb.run("touch /tmp/b; until [ -e /tmp/a ]; do sleep 0.1; done; echo b", timeout=30)
            ra, rb = await asyncio.gather(a, b)
            assert (ra.stdout, rb.stdout, ra.timed_out, rb.timed_out) == ("a\n", "b\n", False, False)

            # A background process's output as it comes; re-attached by its pid.
            p = await sb.start("for i in 1 2 3; do echo line$i; sleep 0.2; done; echo done >&2")
            seen: list[Output] = [out async for out in p]
            assert "".join(o.data for o in seen if o.stream == "stdout") == "line1\nline2\nline3\n"
            assert p.exit_code == 0 and await (await sb.process(p.pid)).logs("stderr") == "done\n"

            # Streamed callbacks run on the event loop's thread.
            loop_thread = threading.get_ident()
            threads: set[int] = set()
            pieces: list[str] = []

            def on_stdout(data: str) -> None:
                threads.add(threading.get_ident())
                pieces.append(data)

            r = await sb.run("echo one; sleep 0.3; echo two", on_stdout=on_stdout)
            assert "".join(pieces) == r.stdout == "one\ntwo\n" and threads == {loop_thread}

            # A terminal: typed into, its output handed to the loop's thread, its exit code awaited.
            shown: list[bytes] = []
            threads.clear()

            def on_data(data: bytes) -> None:
                threads.add(threading.get_ident())
                shown.append(data)

            async with await sb.pty(40, 10, on_data=on_data) as term:
                await term.write("echo S$(stty size)E; exit 5\n")
                await term.read_until("S10 40E")
                assert await term.wait(30) == 5 and term.exit_code == 5
            assert b"S10 40E" in b"".join(shown) and threads == {loop_thread}

            # Files: written from an async generator, read back as an async stream.
            async def parts() -> AsyncIterator[bytes]:
                for i in range(100):
                    await asyncio.sleep(0)
                    yield f"part {i}\n".encode()

            await sb.files.write("/tmp/aio/parts.txt", parts())
            got = b"".join([c async for c in sb.files.read_stream("/tmp/aio/parts.txt")])
            assert got == b"".join(f"part {i}\n".encode() for i in range(100))
            assert [e.name for e in await sb.files.list("/tmp/aio")] == ["parts.txt"]
            with pytest.raises(NotFoundError):
                await sb.files.read("/tmp/aio/none")

            # The same sandbox, found by label and attached to.
            listed = await k.sandbox.list(labels={"suite": "aio"})
            assert [s.name for s in listed] == [sb.name]
            again = await k.sandbox.connect(sb.name)
            assert (await again.info()).metadata.name == sb.name
            name = sb.name
        # Leaving the block deleted it.
        with pytest.raises(NotFoundError):
            await k.sandbox.connect(name)
