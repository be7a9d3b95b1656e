// Driven by tests/tests/sdk.rs against `kairon up`: code contexts (`sb.codeContext()`) in a sandbox of the
// python template: state kept between runs (`x = 21`, then `x * 2` is `42`), an exception's traceback, two
// contexts that share nothing, a context that outlives a pause and resume of its sandbox and is re-attached by
// id from another client, and a language the template lacks refused. Prints `ok <step>` for each.
import assert from "node:assert/strict";
import { Client, KaironError, Sandbox, UIClient, checked, CodeRunError } from "../src/index.js";

const env = (k: string): string => {
  const v = process.env[k];
  if (v === undefined) throw new Error(`set ${k}`);
  return v;
};
const kube = new Client(env("KAIRON_URL"), env("KAIRON_TOKEN"), { namespace: "contexts-ts" });
const ui = new UIClient(env("KAIRON_URL"), env("KAIRON_TOKEN"), { namespace: "contexts-ts" });

{
  await using sb = await Sandbox.create(kube, ui, { template: "python", readyTimeout: 900 });
  {
    await using ctx = await sb.codeContext("python");
    assert.equal((await ctx.run("x = 21")).text, null);
    const got = await ctx.run("print('side', flush=True)\nx * 2");
    assert.deepEqual([got.text, got.stdout, got.error], ["42", "side\n", null]);
    console.log("ok state");

    const failed = await ctx.run("def half(n):\n    return n / 0\nhalf(x)");
    assert.equal(failed.error?.name, "ZeroDivisionError");
    assert.ok(failed.error.traceback.includes("line 2, in half"), failed.error.traceback);
    assert.throws(() => checked(failed), CodeRunError);
    assert.equal((await ctx.run("x")).text, "21");
    console.log("ok traceback");

    {
      await using other = await sb.codeContext("python");
      assert.equal((await other.run("x")).error?.name, "NameError");
      await other.run("x = 'other'");
      assert.equal((await ctx.run("x")).text, "21");
    }
    console.log("ok separate");

    await sb.pause();
    await sb.resume();
    assert.equal((await ctx.run("x + 1")).text, "22");
    const again = await (await Sandbox.connect(kube, ui, sb.name)).codeContext("python", { id: ctx.id });
    assert.equal((await again.run("x * 3")).text, "63");
    console.log("ok pause");
  }
  await assert.rejects(sb.codeContext("javascript"), (e: unknown) => e instanceof KaironError && /no node/.test(e.message));
  console.log("ok refused");
}
