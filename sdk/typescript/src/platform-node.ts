/** Node's parts (see `platform.ts`): node:http(s), the environment and kubeconfig, node:fs, node:net. */

import { once } from "node:events";
import { createReadStream, createWriteStream } from "node:fs";
import { rename, unlink } from "node:fs/promises";
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
};

export const nodePlatform: Platform = {
  name: "node",
  wire: (opts) => new Transport(opts),
  config: resolveConfig,
  files,
  forward: (connect, remotePort, localPort) => PortForward.open(connect, remotePort, localPort),
};
