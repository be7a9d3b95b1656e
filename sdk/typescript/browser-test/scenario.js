// The SDK in a page, as a web app bundles it (dist/browser/kairon.js, the package's `browser`
// export): served from the Kairon server's own origin by run.mjs, it makes a sandbox and uses it
// through fetch and ticketed WebSockets. Each check throws with what went wrong; the list of checks
// passed is the answer.
import { ConfigError, Kairon, KaironError, NotFoundError, Sandbox } from "/__kairon-sdk/kairon.js";

const encode = (s) => new TextEncoder().encode(s);
const decode = (b) => new TextDecoder().decode(b);

export async function run({ token, namespace, template }) {
  const passed = [];
  const check = (cond, what) => {
    if (!cond) throw new Error(`failed: ${what}`);
    passed.push(what);
  };
  const rejects = async (promise, test, what) => {
    try {
      await promise;
    } catch (e) {
      check(test(e), `${what} (got ${e?.name}: ${e?.message})`);
      return;
    }
    check(false, `${what} (it did not throw)`);
  };

  let threw;
  try {
    new Kairon({});
  } catch (e) {
    threw = e;
  }
  check(threw instanceof ConfigError && /token/.test(threw.message), "no token: a ConfigError saying to pass one");
  const k = new Kairon({ token, namespace });
  check(k.url === location.origin, "the page's origin is the default server");

  const sb = await k.sandbox.create({ template });
  try {
    const r = await sb.run("echo hello; echo oops >&2");
    check(r.exitCode === 0 && r.stdout === "hello\n" && r.stderr === "oops\n", "run: stdout, stderr, exit code");

    const pieces = [];
    await sb.run("for i in 1 2 3; do echo line$i; sleep 0.5; done", { onStdout: (t) => pieces.push([performance.now(), t]) });
    check(pieces.map(([, t]) => t).join("") === "line1\nline2\nline3\n", "a streamed run delivers all of its output");
    check(pieces.length >= 2 && pieces.at(-1)[0] - pieces[0][0] > 600, "a streamed run delivers output as it is produced");

    const bytes = Uint8Array.from({ length: 256 }, (_, i) => i);
    await sb.files.write("/tmp/k/all-bytes", bytes);
    const back = await sb.files.read("/tmp/k/all-bytes");
    check(back.length === 256 && back.every((b, i) => b === i), "a binary file written and read back unchanged");

    async function* quarters() {
      for (let i = 0; i < 4; i++) yield new Uint8Array(256 * 1024).fill(65 + i);
    }
    await sb.files.write("/tmp/k/big", quarters());
    let size = 0;
    const firstAndLast = [];
    for await (const chunk of sb.files.readStream("/tmp/k/big")) {
      if (size === 0) firstAndLast.push(chunk[0]);
      size += chunk.byteLength;
      firstAndLast[1] = chunk[chunk.byteLength - 1];
    }
    check(size === 1 << 20 && decode(Uint8Array.from(firstAndLast)) === "AD", "1 MiB sent from chunks and read as a stream");
    check((await sb.files.list("/tmp/k")).map((e) => e.name).sort().join() === "all-bytes,big", "files.list");

    // A relay is a WebSocket: a browser opens it with a single-use ticket, not a header.
    await sb.files.write("/www/index.html", "hello from the guest\n");
    const httpd = await sb.start(["httpd", "-f", "-p", "8088", "-h", "/www"]);
    try {
      // Until httpd listens, the relay is refused (its port is closed): try again.
      let answer = "";
      let refused;
      for (let attempt = 0; attempt < 60 && !answer.includes("hello from the guest"); attempt++) {
        if (attempt) await new Promise((r) => setTimeout(r, 500));
        answer = await new Promise((resolve, reject) => {
          k.ui.relay(sb.name, "portforward/8088").then((relay) => {
            let got = "";
            const done = setTimeout(() => (relay.close(), resolve(got)), 5_000);
            relay.onMessage((d) => {
              got += decode(d);
              if (got.includes("hello from the guest")) {
                clearTimeout(done);
                relay.close();
                resolve(got);
              }
            });
            relay.onClose(() => (clearTimeout(done), resolve(got)));
            relay.send(encode("GET /index.html HTTP/1.0\r\n\r\n"));
          }, reject);
        }).catch((e) => {
          refused = e;
          return "";
        });
      }
      if (!answer && refused) throw refused;
      check(/^HTTP\/1\.[01] 200/.test(answer) && answer.includes("hello from the guest"), "HTTP through a ticketed WebSocket relay");
    } finally {
      await httpd.kill();
    }

    await rejects(sb.portForward(8088), (e) => e instanceof KaironError && /needs Node/.test(e.message) && /sb\.url/.test(e.message), "portForward says it needs Node and what to use");
    await rejects(sb.files.download("/tmp/k/big", "big"), (e) => e instanceof KaironError && /needs Node/.test(e.message), "a download to a local path says it needs Node");
    await rejects(k.ui.getMachine("no-such-machine"), (e) => e instanceof NotFoundError && e.status === 404, "a missing Machine is a NotFoundError");
    check((await k.sandbox.list()).some((s) => s.name === sb.name), "Sandbox.list finds it");
    const again = await Sandbox.connect(k.kube, k.ui, sb.name);
    check((await again.run("cat /tmp/k/all-bytes | wc -c")).stdout.trim() === "256", "Sandbox.connect attaches to it");
  } finally {
    await sb.close();
  }
  await rejects(k.ui.getMachine(sb.name), (e) => e instanceof NotFoundError, "close() deletes it");
  return passed;
}
