/**
 * `sb.files`: a sandbox's files, by absolute path.
 *
 *     await sb.files.writeMany({ "/work/app.py": "print('hi')", "/work/data.bin": new Uint8Array([0, 1]) });
 *     await sb.files.list("/work");              // [{ name: "app.py", ... }, ...]
 *     await sb.files.exists("/work/app.py");     // true
 *     await sb.files.readText("/work/app.py");   // "print('hi')"
 *     await sb.files.remove("/work/data.bin");
 *     await sb.files.upload("model.bin", "/work/model.bin");   // streamed from disk, never whole in memory
 *     await sb.files.download("/work/out.csv", "out.csv");
 *
 * A file larger than the server takes throws `PayloadTooLargeError`, whose message says the limit.
 */

import type { FileEntry } from "./client.js";
import { NotFoundError } from "./errors.js";
import { nodeOnly, platform } from "./platform.js";
import type { Sandbox } from "./sandbox.js";

const dirname = (p: string): string => p.replace(/\/+$/, "").replace(/\/[^/]*$/, "") || "/";

/** The files of one sandbox (`sb.files`). Every path is absolute. */
export class Files {
  /** Binds `sandbox`; `Sandbox.files` makes this for you. */
  constructor(private readonly sb: Sandbox) {}

  /** The bytes of the file at `path` (`NotFoundError` if there is none). */
  async read(path: string): Promise<Uint8Array> {
    return this.sb.ui.readFile(this.sb.name, path, this.sb.namespace);
  }

  /** The file at `path` in chunks as they arrive, for files too large to hold whole. */
  readStream(path: string): AsyncGenerator<Uint8Array> {
    return this.sb.ui.readFileStream(this.sb.name, path, this.sb.namespace);
  }

  /** Streams the file at `path` into the local file `dest`, written whole or not at all; the
   * bytes written. */
  async download(path: string, dest: string): Promise<number> {
    const local = nodeOnly(platform().files, "files.download", "read it with files.readStream(path)");
    return local.save(this.readStream(path), dest);
  }

  /** Streams the local file `src` to `path`, never holding it whole. */
  async upload(src: string, path: string, opts: { mode?: string } = {}): Promise<void> {
    const local = nodeOnly(platform().files, "files.upload", "send it with files.write(path, chunks)");
    await this.write(path, local.open(src), opts);
  }

  /** The file at `path`, decoded as UTF-8. */
  async readText(path: string): Promise<string> {
    return new TextDecoder().decode(await this.read(path));
  }

  /** Writes `data` to `path`, replacing what is there: text (UTF-8), bytes, or an iterable of
   * chunks (a read stream, a generator: sent as produced, never whole). `mode` is octal, e.g.
   * `755`; without it an existing file keeps its own. Missing directories are made; the
   * old file is replaced only once all of the new one arrived. */
  async write(
    path: string,
    data: Uint8Array | string | AsyncIterable<Uint8Array> | Iterable<Uint8Array>,
    opts: { mode?: string } = {},
  ): Promise<void> {
    await this.sb.ui.writeFile(this.sb.name, path, data, { ...opts, namespace: this.sb.namespace });
  }

  /** Writes each path's data, making the directories they need first. */
  async writeMany(files: Record<string, Uint8Array | string>, opts: { mode?: string } = {}): Promise<void> {
    const dirs = [...new Set(Object.keys(files).map(dirname))].filter((d) => d !== "/").sort();
    if (dirs.length > 0) await this.makeDir(...dirs);
    for (const [path, data] of Object.entries(files)) await this.write(path, data, opts);
  }

  /** The entries of the directory at `path` (`NotFoundError` if there is none). */
  async list(path: string): Promise<FileEntry[]> {
    return this.sb.ui.listFiles(this.sb.name, path, this.sb.namespace);
  }

  /** Whether a file or directory is at `path`. */
  async exists(path: string): Promise<boolean> {
    const trimmed = path.replace(/\/+$/, "");
    if (trimmed === "") return true;
    const name = trimmed.slice(trimmed.lastIndexOf("/") + 1);
    try {
      return (await this.list(dirname(trimmed))).some((e) => e.name === name);
    } catch (e) {
      if (e instanceof NotFoundError) return false;
      throw e;
    }
  }

  /** Deletes the file at `path` (`NotFoundError` if there is none). */
  async remove(path: string): Promise<void> {
    await this.sb.ui.deleteFile(this.sb.name, path, this.sb.namespace);
  }

  /** Makes each directory, with its parents (no error when it exists). */
  async makeDir(...paths: string[]): Promise<void> {
    for (const p of paths) {
      if (!p.startsWith("/")) throw new TypeError(`${JSON.stringify(p)} is not an absolute path: paths in a sandbox start with /`);
    }
    await this.sb.run(["mkdir", "-p", "--", ...paths], { check: true });
  }
}
