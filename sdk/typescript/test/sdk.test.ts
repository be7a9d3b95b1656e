// The SDK against a real `kairon up`: KAIRON_URL, KAIRON_TOKEN and NODE_EXTRA_CA_CERTS say which
// (tests/tests/sdk.rs starts one and runs `node --test`). KAIRON_TEST_TEMPLATE picks the
// sandbox template (default busybox).
import assert from "node:assert/strict";
import { mkdir, mkdtemp, readFile, rm, stat, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, it } from "node:test";
import {
  BadRequestError,
  Client,
  CommandError,
  ConflictError,
  PowerStateUnsupportedError,
  GuestAgentDisabledError,
  KaironTimeoutError,
  MachineSuspendedError,
  NotFoundError,
  type Output,
  PayloadTooLargeError,
  Sandbox,
  UIClient,
  UnauthorizedError,
  type WatchEvent,
} from "../src/index.js";

const env = (k: string): string => {
  const v = process.env[k];
  if (!v) throw new Error(`set ${k} (tests/tests/sdk.rs starts kairon up and sets it)`);
  return v;
};
const NS = "sdk-ts-tests";
const TEMPLATE = process.env.KAIRON_TEST_TEMPLATE ?? "busybox";
const kube = new Client(env("KAIRON_URL"), env("KAIRON_TOKEN"), { namespace: NS });
const ui = new UIClient(env("KAIRON_URL"), env("KAIRON_TOKEN"), { namespace: NS });
const rand = () => Math.random().toString(16).slice(2, 8);

describe("Sandbox", { timeout: 900_000 }, () => {
  let sb: Sandbox;
  before(async () => {
    sb = await Sandbox.create(kube, ui, { template: TEMPLATE, idleTimeout: 600, maxLifetime: 3600 });
  });
  after(async () => {
    await sb?.close();
  });

  it("runs a command and returns its output and exit code", async () => {
    const r = await sb.run("echo out; echo err >&2; exit 3");
    assert.deepEqual([r.stdout, r.stderr, r.exitCode], ["out\n", "err\n", 3]);
    assert.equal((await sb.run(["echo", "a b"])).stdout, "a b\n");
    assert.equal((await sb.run("cat", { stdin: "fed" })).stdout, "fed");
  });

  it("a run waits as long as its command may, whatever the base read timeout", async () => {
    const before = process.env.KAIRON_READ_TIMEOUT;
    process.env.KAIRON_READ_TIMEOUT = "2";
    try {
      const r = await sb.run("sleep 5; echo ok", { timeout: 10 });
      assert.deepEqual([r.stdout, r.exitCode, r.timedOut], ["ok\n", 0, false]);
      // The 2 s base read timeout is in force elsewhere: a 5 s long poll gives up.
      const p = await ui.startProcess(sb.name, ["sleep", "30"]);
      await assert.rejects(ui.waitProcess(sb.name, p.id, 5), KaironTimeoutError);
      await ui.killProcess(sb.name, p.id);
    } finally {
      if (before === undefined) delete process.env.KAIRON_READ_TIMEOUT;
      else process.env.KAIRON_READ_TIMEOUT = before;
    }
  });

  it("a sandbox ends 300 s after creation unless told, and setTimeout moves its end", async () => {
    const recordedEnd = async (s: Sandbox): Promise<Date> => {
      for (let i = 0; i < 150; i++) {
        const at = await s.expiresAt();
        if (at) return at;
        await new Promise((r) => setTimeout(r, 200));
      }
      throw new Error("no end recorded");
    };
    let started = Date.now();
    const dflt = await Sandbox.create(kube, ui, { template: TEMPLATE });
    try {
      const ends = await recordedEnd(dflt);
      assert.ok(Math.abs((ends.getTime() - started) / 1000 - 300) < 15, String(ends));
    } finally {
      await dflt.close();
    }
    const open = await Sandbox.create(kube, ui, { template: TEMPLATE, timeout: null });
    try {
      assert.equal(await open.expiresAt(), null, "timeout: null: no deadline");
      started = Date.now();
      const moved = await open.setTimeout(1200);
      assert.ok(Math.abs((moved.getTime() - started) / 1000 - 1200) < 5, String(moved));
      assert.ok(Math.abs((await recordedEnd(open)).getTime() - moved.getTime()) < 1500);
    } finally {
      await open.close();
    }
  });

  it("run with check throws CommandError carrying the output", async () => {
    await assert.rejects(sb.run("echo boom >&2; exit 7", { check: true }), (e: unknown) => {
      assert.ok(e instanceof CommandError);
      assert.equal(e.exitCode, 7);
      assert.equal(e.stderr, "boom\n");
      return true;
    });
  });

  it("writeFile and readFile round-trip bytes", async () => {
    const data = new Uint8Array(16384).map((_, i) => i % 256);
    await sb.writeFile("/tmp/blob.bin", data);
    assert.deepEqual(await sb.readFile("/tmp/blob.bin"), data);
    await sb.writeFile("/tmp/run.sh", "#!/bin/sh\necho ran\n", { mode: "755" });
    assert.equal((await sb.run("/tmp/run.sh", { check: true })).stdout, "ran\n");
    await assert.rejects(sb.readFile("/no/such/file"), (e: unknown) => {
      assert.ok(e instanceof NotFoundError);
      assert.equal(e.reason, "NotFound");
      assert.ok(e.serverMessage.length > 0);
      return true;
    });
    await assert.rejects(sb.writeFile("relative.txt", "x"), (e: unknown) => {
      assert.ok(e instanceof BadRequestError);
      assert.match(e.serverMessage, /absolute/);
      return true;
    });
  });

  it("files: writeMany, list, exists, remove, makeDir", async () => {
    const root = `/tmp/files-${rand()}`;
    const files = sb.files;
    await files.writeMany({ [`${root}/a/x.txt`]: "x", [`${root}/b/y.bin`]: new Uint8Array([0, 1]), [`${root}/top.txt`]: "top" });
    const listed = new Map((await files.list(root)).map((e) => [e.name, e]));
    assert.deepEqual([...listed.keys()].sort(), ["a", "b", "top.txt"]);
    assert.ok(listed.get("a")?.isDir && !listed.get("top.txt")?.isDir && listed.get("top.txt")?.size === 3);
    assert.equal(await files.readText(`${root}/a/x.txt`), "x");
    assert.deepEqual(await files.read(`${root}/b/y.bin`), new Uint8Array([0, 1]));
    assert.ok((await files.exists(`${root}/a/x.txt`)) && (await files.exists(`${root}/a`)) && (await files.exists("/")));
    assert.ok(!(await files.exists(`${root}/nope`)) && !(await files.exists(`${root}/no-dir/x`)));
    await files.remove(`${root}/a/x.txt`);
    assert.ok(!(await files.exists(`${root}/a/x.txt`)));
    await assert.rejects(files.remove(`${root}/a/x.txt`), NotFoundError);
    await assert.rejects(files.list(`${root}/no-dir`), NotFoundError);
    await files.makeDir(`${root}/deep/er/est`, `${root}/other`);
    assert.ok((await files.exists(`${root}/deep/er/est`)) && (await files.exists(`${root}/other`)));
    await assert.rejects(files.makeDir("relative"), TypeError);
    // A tree several levels down, info, rename, a recursive remove.
    assert.deepEqual((await files.list(root, { depth: 3 })).map((e) => e.name).sort(), [
      "a", "b", "b/y.bin", "deep", "deep/er", "deep/er/est", "other", "top.txt",
    ]);
    const info = await files.info(`${root}/top.txt`);
    assert.deepEqual([info.name, info.size, info.isDir], ["top.txt", 3, false]);
    assert.ok(info.modified && !Number.isNaN(Date.parse(info.modified)));
    await files.rename(`${root}/top.txt`, `${root}/deep/moved.txt`);
    assert.equal(await files.readText(`${root}/deep/moved.txt`), "top");
    await assert.rejects(files.remove(`${root}/deep`), ConflictError);
    await files.remove(root, { recursive: true });
    assert.ok(!(await files.exists(root)));
  });

  it("uploadDir and downloadDir carry a tree byte for byte, modes kept", async () => {
    const local = await mkdtemp(join(tmpdir(), "kairon-dir-"));
    try {
      const src = join(local, "src");
      await mkdir(join(src, "pkg", "deep"), { recursive: true });
      const blob = new Uint8Array(300_000).map((_, i) => (i * 7919) % 256);
      await writeFile(join(src, "pkg", "deep", "blob.bin"), blob);
      await writeFile(join(src, "run.sh"), "#!/bin/sh\necho ran\n", { mode: 0o755 });
      await sb.files.uploadDir(src, "/tmp/ts-tree");
      assert.equal((await sb.run("/tmp/ts-tree/run.sh", { check: true })).stdout, "ran\n");
      await sb.run("echo made-in-guest > /tmp/ts-tree/pkg/new.txt", { check: true });
      const back = join(local, "back");
      await sb.files.downloadDir("/tmp/ts-tree", back);
      assert.deepEqual(new Uint8Array(await readFile(join(back, "pkg", "deep", "blob.bin"))), blob);
      assert.equal(await readFile(join(back, "pkg", "new.txt"), "utf8"), "made-in-guest\n");
      assert.ok(((await stat(join(back, "run.sh"))).mode & 0o111) !== 0);
      assert.ok(!(await sb.files.list("/tmp")).some((e) => e.name.startsWith(".kairon-")), "no archive left behind");
      await assert.rejects(sb.files.uploadDir(src, "relative"), TypeError);
    } finally {
      await rm(local, { recursive: true, force: true });
    }
  });

  it("a file over the upload limit throws PayloadTooLargeError saying the limit", async () => {
    // tests/tests/sdk.rs runs kairon up with --max-upload-bytes 120MiB.
    const over = 120 * 1024 * 1024 + 1;
    await assert.rejects(sb.files.write("/tmp/huge.bin", new Uint8Array(over)), (e: unknown) => {
      assert.ok(e instanceof PayloadTooLargeError, String(e));
      assert.equal(e.status, 413);
      assert.match(e.serverMessage, /120 MiB/);
      return true;
    });
    // Streamed with no length: cut at the limit as it arrives, the same typed error.
    const chunks = function* () {
      for (let sent = 0; sent < over; sent += 1 << 20) yield new Uint8Array(Math.min(1 << 20, over - sent));
    };
    await assert.rejects(sb.files.write("/tmp/huge.bin", chunks()), PayloadTooLargeError);
    assert.ok(!(await sb.files.exists("/tmp/huge.bin")));
  });

  it("files stream both ways: from iterables and local files, to chunks and local files", async () => {
    const { mkdtemp, readFile, writeFile, readdir, rm } = await import("node:fs/promises");
    const { tmpdir } = await import("node:os");
    const { join } = await import("node:path");
    const dir = await mkdtemp(join(tmpdir(), "kairon-ts-"));
    try {
      const parts = async function* () {
        for (let i = 0; i < 1000; i++) yield new TextEncoder().encode(`part ${i}\n`);
      };
      const want = Array.from({ length: 1000 }, (_, i) => `part ${i}\n`).join("");
      await sb.files.write("/tmp/streamed/parts.txt", parts());
      let back = "";
      const decoder = new TextDecoder();
      for await (const c of sb.files.readStream("/tmp/streamed/parts.txt")) back += decoder.decode(c, { stream: true });
      assert.equal(back, want);
      const local = join(dir, "parts.txt");
      assert.equal(await sb.files.download("/tmp/streamed/parts.txt", local), want.length);
      assert.equal(await readFile(local, "utf8"), want);
      await writeFile(join(dir, "up.txt"), want);
      await sb.files.upload(join(dir, "up.txt"), "/tmp/streamed/uploaded.txt", { mode: "600" });
      assert.equal(await sb.files.readText("/tmp/streamed/uploaded.txt"), want);
      const modes = Object.fromEntries((await sb.files.list("/tmp/streamed")).map((e) => [e.name, e.mode]));
      assert.equal(modes["uploaded.txt"], 0o600);
      await assert.rejects(sb.files.download("/tmp/streamed/none.txt", join(dir, "none.txt")), NotFoundError);
      assert.deepEqual((await readdir(dir)).sort(), ["parts.txt", "up.txt"], "nothing half-written is left");
    } finally {
      await rm(dir, { recursive: true, force: true });
    }
  });

  it("starts a process, waits, reads its logs and kills another", async () => {
    const p = await sb.start("echo started; echo warn >&2; exit 4");
    assert.equal(await p.wait(), 4);
    assert.equal(await p.logs(), "started\n");
    assert.equal(await p.logs("stderr"), "warn\n");
    const long = await sb.start(["sleep", "300"]);
    assert.equal(await long.running(), true);
    await long.kill();
    await long.wait(60);
    assert.equal(await long.running(), false);
  });

  it("a process is iterated as it runs and re-attached by pid from another client", async () => {
    const p = await sb.start("for i in 1 2 3; do echo line$i; sleep 1; done; echo done >&2; exit 5");
    const it = p[Symbol.asyncIterator]();
    const first = await it.next();
    const started = Date.now();
    assert.deepEqual(first.value, { stream: "stdout", data: "line1\n" });
    assert.equal(p.exited, false);
    // Another client, as after a reconnect: the same sandbox by name, the process by its id.
    const kube2 = new Client(env("KAIRON_URL"), env("KAIRON_TOKEN"), { namespace: NS });
    const ui2 = new UIClient(env("KAIRON_URL"), env("KAIRON_TOKEN"), { namespace: NS });
    const again = await Sandbox.connect(kube2, ui2, sb.name);
    const attached = await again.process(p.pid);
    assert.deepEqual(attached.command, p.command);
    assert.ok((await again.processes()).some((q) => q.pid === p.pid));
    const seen: Output[] = [];
    for await (const o of attached) seen.push(o);
    assert.equal(seen.filter((o) => o.stream === "stdout").map((o) => o.data).join(""), "line1\nline2\nline3\n");
    assert.deepEqual(seen.filter((o) => o.stream === "stderr").map((o) => o.data), ["done\n"]);
    assert.equal(attached.exitCode, 5);
    assert.ok(Date.now() - started >= 1500, "the re-attached handle followed the running process");
    // The first handle goes on from where it stopped: nothing twice.
    let rest = "";
    for (let r = await it.next(); !r.done; r = await it.next()) if (r.value.stream === "stdout") rest += r.value.data;
    assert.equal(rest, "line2\nline3\n");
    assert.equal(p.exitCode, 5);
    assert.deepEqual(p.offsets, { stdout: 18, stderr: 5 });
    await assert.rejects(sb.process("0123456789ab"), NotFoundError);
  });

  it("a process reads what is written to its stdin", async () => {
    const p = await sb.start("while read l; do echo got:$l; done; echo eof", { stdin: "first\n" });
    await p.write("second\n");
    await p.write(new TextEncoder().encode("third\n"));
    await p.closeStdin();
    assert.equal(await p.wait(60), 0);
    assert.equal(await p.logs(), "got:first\ngot:second\ngot:third\neof\n");
    await assert.rejects(p.write("late\n"), (e: unknown) => {
      assert.ok(e instanceof ConflictError);
      assert.equal(e.reason, "StdinClosed");
      return true;
    });
  });

  it("portForward carries HTTP to a server in the sandbox", async () => {
    await sb.run("mkdir -p /fwd && echo hello-forward > /fwd/index.html", { check: true });
    const httpd = await sb.start(["httpd", "-f", "-p", "8088", "-h", "/fwd"]);
    try {
      const fwd = await sb.portForward(8088);
      assert.equal(fwd.url, `http://127.0.0.1:${fwd.localPort}`);
      try {
        let body = "";
        await eventually("httpd through the forward", async () => {
          try {
            body = await (await fetch(`${fwd.url}/index.html`)).text();
          } catch {
            return false;
          }
          return body === "hello-forward\n";
        }, 60_000);
        // Each connection gets its own relay.
        assert.equal(await (await fetch(`${fwd.url}/index.html`, { headers: { connection: "close" } })).text(), "hello-forward\n");
      } finally {
        await fwd.close();
      }
      await assert.rejects(fetch(`${fwd.url}/index.html`));
    } finally {
      await httpd.kill();
    }
    await assert.rejects(new Sandbox(kube, ui, "no-such-sandbox", NS).portForward(80), NotFoundError);
  });

  it("a terminal has a size, resizes, is interrupted and returns its exit code", async () => {
    const shown: Uint8Array[] = [];
    const text = (b: Uint8Array) => new TextDecoder().decode(b);
    {
      await using term = await sb.pty({ onData: (d) => shown.push(d) });
      // What is typed is echoed: a marker is whole only in the command's output.
      term.write("echo S$(stty size)E\n");
      await term.readUntil("S24 80E");
      term.resize(120, 40);
      term.write("echo S$(stty size)E T=$TERM\n");
      assert.ok(text(await term.readUntil("T=xterm-256color")).endsWith("S40 120E T=xterm-256color"));
      term.write("echo sleep-starts; sleep 300\n");
      await term.readUntil("sleep-starts\r\n");
      term.write("\x03");
      term.write("echo after-$?\n");
      await term.readUntil("after-130", 10);
      await assert.rejects(term.readUntil("never-shown", 0.5), /did not show/);
      term.write("exit 3\n");
      assert.equal(await term.wait(30), 3);
      assert.equal(term.exitCode, 3);
      assert.ok(text(term.output).includes("S40 120E"));
    }
    assert.ok(shown.map(text).join("").includes("S40 120E"));
    const own = await sb.pty({ command: ["sh", "-c", "echo $(id -u):$(pwd):$X; exit 7"], cwd: "/tmp", env: { X: "y" }, user: "1000" });
    assert.equal(await own.wait(30), 7);
    assert.ok(text(own.output).includes("1000:/tmp:y"));
    const killed = await sb.pty({ command: "sleep 5151 & echo started; sleep 5152" });
    await killed.readUntil("started");
    await killed.kill();
    assert.equal(await killed.wait(30), -9);
    await eventually("the killed terminal's commands to end", async () => !(await sb.run("ps")).stdout.includes("sleep 515"), 10_000);
    await assert.rejects(sb.pty({ cols: 0 }), RangeError);
    await assert.rejects(new Sandbox(kube, ui, "no-such-sandbox", NS).pty(), NotFoundError);
  });

  it("a recursive watch sees each change below", async () => {
    await sb.run("rm -rf /tw && mkdir -p /tw/sub", { check: true });
    const seen: WatchEvent[] = [];
    const w = await sb.files.watch("/tw", { recursive: true, onEvent: (e) => seen.push(e) });
    try {
      const expect = async (command: string, want: Partial<WatchEvent>) => {
        const started = Date.now();
        await sb.run(command, { check: true });
        await eventually(`${want.type} of ${want.path} after ${command}`, async () =>
          seen.some((e) => e.type === want.type && e.path === want.path && e.from === want.from), 2_000);
        assert.ok(Date.now() - started < 2_000);
      };
      await expect("echo one > /tw/sub/f", { type: "create", path: "/tw/sub/f" });
      await expect("echo two >> /tw/sub/f", { type: "modify", path: "/tw/sub/f" });
      await expect("mv /tw/sub/f /tw/sub/g", { type: "rename", path: "/tw/sub/g", from: "/tw/sub/f" });
      await expect("rm /tw/sub/g", { type: "remove", path: "/tw/sub/g" });
    } finally {
      await w.stop();
    }
    await assert.rejects(sb.files.watch("/no/such/dir"), NotFoundError);
  });

  it("a code context needs its interpreter in the guest", async () => {
    // Busybox has no python3: the context says so and what to use (examples/code_context.ts runs contexts).
    await assert.rejects(sb.codeContext("python"), /no python3 to run python in: use a template that has it/);
    await assert.rejects(sb.codeContext("cobol"), /use python or javascript/);
  });

  it("metrics follow a busy command", async () => {
    const busy = await sb.start("yes > /dev/null");
    try {
      const m = await sb.metrics();
      assert.ok(m.cpuPercent > 50, JSON.stringify(m));
      assert.ok(m.memoryUsedBytes > 0 && m.memoryUsedBytes < m.memoryLimitBytes, JSON.stringify(m));
    } finally {
      await busy.kill();
    }
    await busy.wait(30);
    assert.ok((await sb.metrics(1)).cpuPercent < 10);
    for await (const m of sb.metricsStream(0.2)) {
      assert.ok(m.windowMillis >= 200);
      break;
    }
    await assert.rejects(sb.metrics(0.02), BadRequestError);
  });

  it("pauses and resumes", async () => {
    await sb.run("echo before > /tmp/state", { check: true });
    await sb.pause();
    assert.equal((await sb.machine()).status?.phase, "Paused");
    await assert.rejects(sb.run("true"), (e: unknown) => {
      assert.ok(e instanceof ConflictError);
      assert.ok(e instanceof MachineSuspendedError);
      assert.equal(e.reason, "MachineSuspended");
      return true;
    });
    await sb.resume();
    assert.equal((await sb.run("cat /tmp/state", { check: true })).stdout, "before\n");
  });

  it("run streams output as it is produced, and keeps it on a timeout", async () => {
    const seen: { at: number; text: string; stream: string }[] = [];
    const r = await sb.run("echo first; sleep 2; echo second; echo oops >&2", {
      onStdout: (text) => seen.push({ at: Date.now(), text, stream: "out" }),
      onStderr: (text) => seen.push({ at: Date.now(), text, stream: "err" }),
    });
    assert.deepEqual([r.stdout, r.stderr, r.exitCode, r.timedOut], ["first\nsecond\n", "oops\n", 0, false]);
    const at = (word: string) => seen.find((s) => s.text.includes(word))?.at ?? NaN;
    assert.ok(at("second") - at("first") >= 1500, `lines came as printed: ${JSON.stringify(seen)}`);
    assert.equal(seen.filter((s) => s.stream === "err").map((s) => s.text).join(""), "oops\n");
    const t = Date.now();
    const slow = await sb.run("echo early; sleep 60", { onStdout: () => undefined, timeout: 3 });
    assert.equal(slow.timedOut, true);
    assert.equal(slow.stdout, "early\n");
    assert.ok(Date.now() - t < 30_000, "the timeout ended it");
    await assert.rejects(
      sb.run("cat", { stdin: "x", onStdout: () => undefined }),
      (e: unknown) => e instanceof TypeError && /no stdin/.test(e.message),
    );
  });

  it("labels, url, restart; hibernate and halt need a VM", async () => {
    assert.equal((await sb.labels())["kairon.zyvor.dev/sandbox"], "true");
    assert.equal((await sb.setLabels({ team: "a" })).team, "a");
    assert.equal((await sb.labels()).team, "a");
    assert.equal((await sb.setLabels({ team: null })).team, undefined);

    await sb.files.makeDir("/www");
    await sb.files.write("/www/index.html", "hello from the sandbox\n");
    await sb.start(["httpd", "-f", "-p", "8080", "-h", "/www"]);
    const url = sb.url(8080, "/index.html");
    assert.ok(url.endsWith(`/api/v1/machines/${NS}/${sb.name}/sandbox-http/8080/index.html`), url);
    let r: Response | undefined;
    for (const deadline = Date.now() + 30_000; Date.now() < deadline; await new Promise((ok) => setTimeout(ok, 300))) {
      r = await fetch(url, { headers: { Authorization: `Bearer ${env("KAIRON_TOKEN")}` } });
      if (r.status === 200) break;
    }
    assert.equal(r?.status, 200);
    assert.equal(await r?.text(), "hello from the sandbox\n");
    assert.throws(() => sb.url(0), RangeError);

    // A command as another user, buffered and streamed.
    assert.equal((await sb.run("id -u", { user: "1000" })).stdout, "1000\n");
    let seen = "";
    await sb.run("id -u", { user: "1000:1000", onStdout: (t) => (seen += t) });
    assert.equal(seen, "1000\n");
    for (const verb of [() => sb.hibernate(), () => sb.halt()]) {
      await assert.rejects(verb(), (e: unknown) => {
        assert.ok(e instanceof PowerStateUnsupportedError && e instanceof ConflictError);
        assert.equal(e.reason, "PowerStateUnsupported");
        return true;
      });
    }
    await sb.restart();
    assert.equal((await sb.run("cat /www/index.html", { check: true })).stdout, "hello from the sandbox\n");
    assert.notEqual((await sb.run("pgrep httpd")).exitCode, 0);
  });

  it("forks a copy of the filesystem", async () => {
    await sb.run("echo parent > /tmp/forked", { check: true });
    const child = await sb.fork();
    try {
      assert.equal((await child.run("cat /tmp/forked", { check: true })).stdout, "parent\n");
      await child.run("echo child > /tmp/forked", { check: true });
      assert.equal((await sb.run("cat /tmp/forked", { check: true })).stdout, "parent\n");
    } finally {
      await child.close();
    }
    await assert.rejects(child.machine(), NotFoundError);
  });

  it("extend moves the end and expiresAt follows; no deadline is a ConflictError", async () => {
    // The sandbox has a max lifetime of an hour from its creation.
    await eventually("expiresAt to be recorded", async () => (await sb.expiresAt()) !== null);
    const before = (await sb.expiresAt())!;
    const next = await sb.extend(600);
    assert.equal(next.getTime(), before.getTime() + 600_000);
    await eventually("expiresAt to follow the extension", async () => (await sb.expiresAt())?.getTime() === next.getTime());
    await assert.rejects(sb.extend(0), (e: unknown) => {
      assert.ok(e instanceof BadRequestError);
      assert.equal(e.status, 422);
      assert.match(e.serverMessage, /must be 1 to/);
      return true;
    });
    const forever = await Sandbox.create(kube, ui, { template: TEMPLATE, env: { MODE: "fast", B: "sandbox" }, timeout: null });
    try {
      // The sandbox's env reaches every command; a run's own env wins.
      assert.equal((await forever.run('echo "$MODE $B"', { env: { B: "run" }, check: true })).stdout, "fast run\n");
      assert.equal(await forever.expiresAt(), null);
      await assert.rejects(forever.extend(60), (e: unknown) => {
        assert.ok(e instanceof ConflictError);
        assert.equal(e.reason, "NoDeadline");
        assert.match(e.serverMessage, /nothing to extend/);
        return true;
      });
    } finally {
      await forever.close();
    }
  });
});

describe("errors", { timeout: 600_000 }, () => {
  it("carry the server's reason and message on both APIs", async () => {
    const missing = `missing-${rand()}`;
    await assert.rejects(ui.getMachine(missing), (e: unknown) => {
      assert.ok(e instanceof NotFoundError);
      assert.equal(e.reason, "NotFound");
      assert.match(e.serverMessage, new RegExp(missing));
      return true;
    });
    await assert.rejects(kube.getMachine(missing), (e: unknown) => {
      assert.ok(e instanceof NotFoundError);
      assert.match(e.serverMessage, new RegExp(missing));
      return true;
    });
    const bad = new UIClient(ui.url, "not-a-token", { namespace: NS });
    await assert.rejects(bad.getMachine(missing), UnauthorizedError);
  });

  it("GuestAgentDisabled arrives as a ConflictError", async () => {
    const name = `noagent-${rand()}`;
    await kube.createMachine({ metadata: { name }, spec: { sandbox: { templateName: TEMPLATE } } });
    try {
      await assert.rejects(ui.exec(name, ["true"]), (e: unknown) => {
        assert.ok(e instanceof ConflictError);
        assert.ok(e instanceof GuestAgentDisabledError);
        assert.equal(e.reason, "GuestAgentDisabled");
        assert.match(e.serverMessage, /spec\.guestAgent/);
        return true;
      });
    } finally {
      await kube.deleteMachine(name);
      await ui.waitMachine(name, { deleted: true });
    }
  });

  it("a bad lifecycle is refused with the field named", async () => {
    await assert.rejects(Sandbox.create(kube, ui, { template: TEMPLATE, idleTimeout: 5 }), (e: unknown) => {
      assert.ok(e instanceof BadRequestError);
      assert.match(e.serverMessage, /idleTimeoutSeconds/);
      return true;
    });
  });
});

const eventually = async (what: string, check: () => Promise<boolean>, timeoutMs = 180_000): Promise<void> => {
  const deadline = Date.now() + timeoutMs;
  while (!(await check())) {
    if (Date.now() >= deadline) throw new Error(`timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 200));
  }
};
const gone = (get: () => Promise<unknown>) => async (): Promise<boolean> => {
  try {
    await get();
    return false;
  } catch (e) {
    if (e instanceof NotFoundError) return true;
    throw e;
  }
};

describe("pools", { timeout: 600_000 }, () => {
  it("claimFrom takes a warm member and close releases it", async () => {
    const pool = `warm-${rand()}`;
    await kube.createPool({
      metadata: { name: pool },
      spec: {
        replicas: 1,
        warmPowerState: "Paused",
        warmupSeconds: 1,
        template: {
          metadata: { labels: { "kairon.zyvor.dev/sandbox": "true" } },
          spec: { sandbox: { templateName: TEMPLATE }, guestAgent: { console: true }, env: { T: "template", X: "template" } },
        },
      },
    });
    try {
      await eventually(`pool ${pool} to have a warm member`, async () => {
        const p = (await kube.getPool(pool)) as { status?: { warm?: number } };
        return (p.status?.warm ?? 0) >= 1;
      });
      const sb = await Sandbox.claimFrom(kube, ui, pool, { env: { X: "claim" } });
      const claim = sb.claim as string;
      try {
        assert.ok(sb.name.startsWith(`${pool}-`), sb.name);
        assert.equal((await sb.run("echo claimed", { check: true })).stdout, "claimed\n");
        // The claim's env over the template's, on a member that was already warm.
        assert.equal((await sb.run('echo "$T $X"', { check: true })).stdout, "template claim\n");
        const c = (await kube.getClaim(claim)) as { status?: { phase?: string; machineName?: string } };
        assert.deepEqual([c.status?.phase, c.status?.machineName], ["Bound", sb.name]);
      } finally {
        await sb.close();
      }
      await eventually("the claim to be gone", gone(() => kube.getClaim(claim)));
      await eventually("its member to be gone", gone(() => kube.getMachine(sb.name)));
    } finally {
      await kube.deletePool(pool);
      await eventually(`pool ${pool} and its members to be gone`, gone(() => kube.getPool(pool)));
    }
  });
});
