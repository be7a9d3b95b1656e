"""Driven by tests/tests/sdk.rs against `kairon up`: code contexts (`sb.code_context`) in a
sandbox of the python template: state kept between runs (`x = 21`, then `x * 2` is `42`), an
exception's traceback, two contexts that share nothing, a context that outlives a pause and resume
of its sandbox and is re-attached by id from another client, and a language the template lacks
refused with what to do. Prints `ok <step>` for each."""

from __future__ import annotations

import asyncio
import os

from kairon import AsyncKairon, Client, KaironError, Sandbox, UIClient

url, token = os.environ["KAIRON_URL"], os.environ["KAIRON_TOKEN"]
kube = Client(url, token, namespace="contexts")
ui = UIClient(url, token, namespace="contexts")

with Sandbox.create(kube, ui, template="python", ready_timeout=900) as sb:
    with sb.code_context("python") as ctx:
        assert ctx.run("x = 21").text is None
        got = ctx.run("print('side', flush=True)\nx * 2")
        assert (got.text, got.stdout, got.error) == ("42", "side\n", None), got
        print("ok state", flush=True)

        err = ctx.run("def half(n):\n    return n / 0\nhalf(x)").error
        assert err is not None and err.name == "ZeroDivisionError", err
        assert "line 2, in half" in err.traceback and err.traceback.startswith("Traceback"), err.traceback
        assert ctx.run("x").text == "21", "an error does not end the context"
        print("ok traceback", flush=True)

        with sb.code_context("python") as other:
            missing = other.run("x").error
            assert missing is not None and missing.name == "NameError", missing
            other.run("x = 'other'")
            assert ctx.run("x").text == "21"
        print("ok separate", flush=True)

        sb.pause()
        sb.resume()
        assert ctx.run("x + 1").text == "22"
        again = Sandbox.connect(kube, ui, sb.name).code_context(id=ctx.id)
        assert again.run("x * 3").text == "63"
        print("ok pause", flush=True)

    try:
        sb.code_context("javascript")
        raise AssertionError("a context in a language the template lacks started")
    except KaironError as e:
        assert "no node" in str(e), e
    print("ok refused", flush=True)


async def in_async() -> None:
    async with AsyncKairon(url, token, namespace="contexts") as k:
        async with await k.sandbox.create(template="python", ready_timeout=900) as sb:
            async with await sb.code_context() as ctx:
                await ctx.run("import math\nr = 3")
                assert (await ctx.run("round(math.pi * r * r, 2)")).text == "28.27"
    print("ok async", flush=True)


asyncio.run(in_async())
