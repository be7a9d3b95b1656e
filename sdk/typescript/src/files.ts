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
import { nodeOnly, platform, type Streamed } from "./platform.js";
import type { Sandbox } from "./sandbox.js";

const randomHex = (): string => Array.from(crypto.getRandomValues(new Uint8Array(16)), (b) => b.toString(16).padStart(2, "0")).join("");

const dirname = (p: string): string => p.replace(/\/+$/, "").replace(/\/[^/]*$/, "") || "/";

/** One change `files.watch` saw: `type` at the absolute `path` (a rename's old path in `from`). */
export interface WatchEvent {
  /** What happened. */
  type: "create" | "modify" | "remove" | "rename";
  /** Where, absolute. */
  path: string;
  /** Whether it is a directory. */
  isDir: boolean;
  /** A rename's old path. */
  from?: string;
}

/** A watch of a directory (`sb.files.watch`): `for await (const e of w)` yields its changes as they happen, or its
 * `onEvent` gets them; `stop()` (or `await using`) ends it, as does the directory being removed. */
export class FileWatch implements AsyncIterable<WatchEvent> {
  readonly #answer: Streamed;
  readonly #events: AsyncGenerator<WatchEvent>;
  #stopped = false;
  /** Why the watch ended by itself (an error the guest reported), if it did. */
  error?: string;

  /** Reads `answer` (`UIClient.watchFiles`); `files.watch` makes this for you. */
  constructor(answer: Streamed, onEvent?: (e: WatchEvent) => void) {
    this.#answer = answer;
    const events = this.#read();
    this.#events = events;
    if (onEvent) {
      void (async () => {
        for await (const e of events) onEvent(e);
      })().catch(() => {});
    }
  }

  async *#read(): AsyncGenerator<WatchEvent> {
    const decoder = new TextDecoder();
    let buf = "";
    try {
      for await (const chunk of this.#answer.body) {
        buf += decoder.decode(chunk, { stream: true });
        let nl: number;
        while ((nl = buf.indexOf("\n")) >= 0) {
          const line = buf.slice(0, nl);
          buf = buf.slice(nl + 1);
          if (!line) continue;
          const v = JSON.parse(line) as { type: string; path?: string; isDir?: boolean; from?: string; message?: string };
          if (v.type === "error") {
            this.error = v.message;
            return;
          }
          if (v.type === "create" || v.type === "modify" || v.type === "remove" || v.type === "rename") {
            yield { type: v.type, path: v.path ?? "", isDir: v.isDir ?? false, ...(v.from ? { from: v.from } : {}) };
          }
        }
      }
    } catch (e) {
      // stop() dropped the connection under the reader: the watch is over.
      if (!this.#stopped) throw e;
    }
  }

  [Symbol.asyncIterator](): AsyncGenerator<WatchEvent> {
    return this.#events;
  }

  /** Ends the watch (the guest's watcher goes with the connection). */
  async stop(): Promise<void> {
    this.#stopped = true;
    this.#answer.cancel();
  }

  async [Symbol.asyncDispose](): Promise<void> {
    await this.stop();
  }
}

/** The files of one sandbox (`sb.files`). Every path is absolute. */
export class Files {
  /** Binds `sandbox`; `Sandbox.files` makes this for you. */
  constructor(private readonly sb: Sandbox) {}

  /**
   * Watches the directory at `path` (with `recursive`, every directory below too, made later ones included): its
   * changes as they happen, from inotify in the guest. Resolves once the watch is in place (`NotFoundError` if there
   * is no such directory).
   *
   *     await using w = await sb.files.watch("/work", { recursive: true });
   *     for await (const e of w) console.log(e.type, e.path);
   */
  async watch(path: string, opts: { recursive?: boolean; onEvent?: (e: WatchEvent) => void } = {}): Promise<FileWatch> {
    const answer = await this.sb.ui.watchFiles(this.sb.name, path, { recursive: opts.recursive, namespace: this.sb.namespace });
    return new FileWatch(answer, opts.onEvent);
  }

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

  /** Copies the local directory `src` into `path` (made if missing), as one tar archive streamed from the system's
   * `tar` and unpacked in the guest (Node). */
  async uploadDir(src: string, path: string): Promise<void> {
    const local = nodeOnly(platform().files, "files.uploadDir", "send each file with files.write(path, data)");
    if (!path.startsWith("/")) throw new TypeError(`${JSON.stringify(path)} is not an absolute path: paths in a sandbox start with /`);
    const remote = `/tmp/.kairon-upload-${randomHex()}.tar`;
    await this.write(remote, local.pack(src));
    const script = 'mkdir -p -- "$1" && tar -xf "$2" -C "$1"; rc=$?; rm -f -- "$2"; exit $rc';
    await this.sb.run(["sh", "-c", script, "sh", path, remote], { check: true });
  }

  /** Copies the guest directory `path` into the local `dest` (made if missing), as one tar archive streamed to the
   * system's `tar`, which refuses entries that would land outside `dest` (Node). */
  async downloadDir(path: string, dest: string): Promise<void> {
    const local = nodeOnly(platform().files, "files.downloadDir", "read each file with files.readStream(path)");
    if (!path.startsWith("/")) throw new TypeError(`${JSON.stringify(path)} is not an absolute path: paths in a sandbox start with /`);
    const remote = `/tmp/.kairon-download-${randomHex()}.tar`;
    await this.sb.run(["sh", "-c", `tar -cf '${remote}' -C "$1" .`, "sh", path], { check: true });
    try {
      await local.unpack(this.readStream(remote), dest);
    } finally {
      await this.remove(remote);
    }
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

  /** The entries of the directory at `path` (`NotFoundError` if there is none); with `depth` > 1 those of its
   * subdirectories too, that many levels down, each named by its path below `path` (`sub/file.txt`). Symlinks to
   * directories are not followed. */
  async list(path: string, opts: { depth?: number } = {}): Promise<FileEntry[]> {
    const depth = opts.depth ?? 1;
    if (!Number.isInteger(depth) || depth < 1) throw new RangeError(`depth=${depth}: give 1 (the directory's own entries) or more`);
    const out: FileEntry[] = [];
    for (const e of await this.sb.ui.listFiles(this.sb.name, path, this.sb.namespace)) {
      out.push(e);
      if (e.isDir && depth > 1) {
        const below = await this.list(`${path.replace(/\/+$/, "")}/${e.name}`, { depth: depth - 1 });
        out.push(...below.map((b) => ({ ...b, name: `${e.name}/${b.name}` })));
      }
    }
    return out;
  }

  /** What is at `path`, not following a symlink there: `name`, `size`, `mode`, `isDir`, `linkTarget`, `modified`
   * (RFC 3339). `NotFoundError` if nothing is. */
  async info(path: string): Promise<FileEntry> {
    return this.sb.ui.fileInfo(this.sb.name, path, this.sb.namespace);
  }

  /** Whether a file, directory or symlink is at `path` (one stat in the guest). */
  async exists(path: string): Promise<boolean> {
    try {
      await this.info(path);
      return true;
    } catch (e) {
      if (e instanceof NotFoundError) return false;
      throw e;
    }
  }

  /** Moves `src` to `dst` in the guest (a file at `dst` is replaced; a directory there must be empty). */
  async rename(src: string, dst: string): Promise<void> {
    await this.sb.ui.renameFile(this.sb.name, src, dst, this.sb.namespace);
  }

  /** Deletes the file or empty directory at `path` (`NotFoundError` if there is none); with `recursive`, a directory
   * and everything in it (otherwise a non-empty one is a `ConflictError`). */
  async remove(path: string, opts: { recursive?: boolean } = {}): Promise<void> {
    await this.sb.ui.deleteFile(this.sb.name, path, { recursive: opts.recursive, namespace: this.sb.namespace });
  }

  /** Makes each directory, with its parents (no error when it exists). */
  async makeDir(...paths: string[]): Promise<void> {
    for (const p of paths) {
      if (!p.startsWith("/")) throw new TypeError(`${JSON.stringify(p)} is not an absolute path: paths in a sandbox start with /`);
    }
    await this.sb.run(["mkdir", "-p", "--", ...paths], { check: true });
  }
}
