/** Node's parts (see `platform.ts`): node:http(s), the environment and kubeconfig, node:fs, node:net. */

import { spawn, type ChildProcessByStdio, type ChildProcessWithoutNullStreams } from "node:child_process";
import { once } from "node:events";
import { createReadStream, createWriteStream } from "node:fs";
import { mkdir, rename, unlink } from "node:fs/promises";
import type { Readable } from "node:stream";
import { KaironError } from "./errors.js";
import * as nodePath from "node:path";
import { resolveConfig } from "./config.js";
import { PortForward } from "./forward.js";
import type { LocalFiles, Platform } from "./platform.js";
import { Transport } from "./transport.js";

const files: LocalFiles = {
  async save(chunks, dest) {
    // Beside the destination, renamed over it once complete: whole or not at all.
    const part = nodePath.join(nodePath.dirname(nodePath.resolve(dest)), `.kairon-download-${process.pid}-${Date.now()}`);
    const out = createWriteStream(part, { flags: "wx" });
    let n = 0;
    try {
      for await (const chunk of chunks) {
        n += chunk.byteLength;
        if (!out.write(chunk)) await once(out, "drain");
      }
      out.end();
      await once(out, "finish");
      await rename(part, dest);
      return n;
    } catch (e) {
      out.destroy();
      await unlink(part).catch(() => {});
      throw e;
    }
  },
  open(src) {
    return createReadStream(src, { highWaterMark: 1 << 20 });
  },
  pack(src) {
    const tar = spawn("tar", ["-cf", "-", "-C", src, "."], { stdio: ["ignore", "pipe", "pipe"] });
    return tarOutput(tar, `packing ${src}`);
  },
  async unpack(chunks, dest) {
    await mkdir(dest, { recursive: true });
    const tar = spawn("tar", ["-xf", "-", "-C", dest, "--no-same-owner"], { stdio: ["pipe", "ignore", "pipe"] });
    const said = collect(tar.stderr);
    const exited = new Promise<number | null>((resolve, reject) => {
      tar.once("error", reject);
      tar.once("close", resolve);
    });
    try {
      for await (const chunk of chunks) {
        if (!tar.stdin.write(chunk)) await once(tar.stdin, "drain");
      }
    } finally {
      tar.stdin.end();
    }
    const code = await exited;
    if (code !== 0) throw new KaironError(`unpacking into ${dest}: tar exited ${code}: ${(await said).trim()}`);
  },
};

/** Everything a stream says, as text. */
async function collect(stream: NodeJS.ReadableStream): Promise<string> {
  let text = "";
  for await (const c of stream) text += c.toString();
  return text;
}

/** A `tar -c` child's output as it comes; its failure (with what it said) ends the iteration. */
async function* tarOutput(tar: ChildProcessWithoutNullStreams | ChildProcessByStdio<null, Readable, Readable>, what: string): AsyncGenerator<Uint8Array> {
  const said = collect(tar.stderr);
  const exited = new Promise<number | null>((resolve, reject) => {
    tar.once("error", reject);
    tar.once("close", resolve);
  });
  for await (const chunk of tar.stdout) yield chunk as Uint8Array;
  const code = await exited;
  if (code !== 0) throw new KaironError(`${what}: tar exited ${code}: ${(await said).trim()}`);
}

export const nodePlatform: Platform = {
  name: "node",
  wire: (opts) => new Transport(opts),
  config: resolveConfig,
  files,
  forward: (connect, remotePort, localPort) => PortForward.open(connect, remotePort, localPort),
};
