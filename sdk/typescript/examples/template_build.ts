// Driven by tests/tests/templates.rs against `kairon up` with build nodes: a namespace's own template built
// from the TypeScript SDK (`k.templates.build`) as an operator of that namespace, from an image in the test
// registry with a build step, its progress followed; a failing step rejects with the step's output; an operator
// of another namespace neither lists nor reads it. Prints `ok <step>` for each.
import assert from "node:assert/strict";
import { ForbiddenError, Kairon, TemplateBuildError } from "../src/index.js";

const image = process.env.TEMPLATE_IMAGE;
if (image === undefined) throw new Error("set TEMPLATE_IMAGE");
const k = new Kairon();
const progress: string[] = [];
const built = await k.templates.build("ts-sdk", {
  image,
  steps: ["echo ts > /ts.txt"],
  onProgress: (line) => progress.push(line),
});
assert.equal(built.status?.phase, "Ready");
assert.ok((await k.templates.list()).some((t) => t.metadata.name === "ts-sdk"));
assert.deepEqual((await k.templates.get("ts-sdk")).spec.steps, ["echo ts > /ts.txt"]);
console.log("ok build");

await assert.rejects(
  k.templates.build("ts-broken", { image, steps: ["echo the-reason >&2; exit 4"] }),
  (e: unknown) => e instanceof TemplateBuildError && /build step 1 of 1/.test(e.reason) && /the-reason/.test(e.reason),
);
await k.templates.delete("ts-broken");
console.log("ok failed");

const other = new Kairon({ token: process.env.OTHER_TOKEN });
await assert.rejects(other.templates.list(), ForbiddenError);
await assert.rejects(other.templates.get("ts-sdk"), ForbiddenError);
console.log("ok isolation");
