/**
 * `sandbox.pty()`: a command on a terminal in the sandbox or VM, over the WebSocket that `kaironctl exec -it`
 * uses (`.../exec/stream?tty=true`). Works in Node and in a browser (feed `onData` to xterm.js).
 */
import { KaironConnectionError, KaironTimeoutError } from "./errors.js";
import type { Relay } from "./platform.js";

/** What a terminal runs unless told otherwise: a login shell, bash where the image has it. */
export const LOGIN_SHELL = ["/bin/sh", "-c", "if command -v bash >/dev/null 2>&1; then exec bash -l; else exec sh -l; fi"];
/** The terminal type a program in it sees unless `env` names another (`tput` and curses programs need one). */
export const DEFAULT_TERM = "xterm-256color";
/** `wait()`'s answer after `kill()`: the command was killed (SIGKILL). */
export const KILLED = -9;
/** How much of the terminal's output `output` keeps (the most recent part). */
const KEEP_BYTES = 1 << 20;
const EXIT = /^exit (-?\d+)/;

/** What `sandbox.pty()` takes. */
export interface PtyOptions {
  /** The terminal's width (1 to 1000; default 80). */
  cols?: number;
  /** The terminal's height (1 to 1000; default 24). */
  rows?: number;
  /** Called with what the terminal shows as it comes (stdout and stderr together, with its echo). */
  onData?: (data: Uint8Array) => void;
  /** The command (default a login shell); a string goes through `/bin/sh -c`. */
  command?: string | string[];
  /** Environment variables over the Machine's (`TERM` is `xterm-256color` unless given). */
  env?: Record<string, string>;
  /** Its working directory (default the image's). */
  cwd?: string;
  /** Run it as `uid[:gid]` or a name the guest knows (default root). */
  user?: string;
}

function checkSize(cols: number, rows: number): void {
  for (const [what, v] of [["cols", cols], ["rows", rows]] as const) {
    if (!Number.isInteger(v) || v < 1 || v > 1000) throw new RangeError(`${what}=${v} is not from 1 to 1000`);
  }
}

/** The query of the terminal's WebSocket route. */
export function ptyQuery(opts: PtyOptions): string {
  const cols = opts.cols ?? 80;
  const rows = opts.rows ?? 24;
  checkSize(cols, rows);
  const command = opts.command === undefined ? LOGIN_SHELL : typeof opts.command === "string" ? ["/bin/sh", "-c", opts.command] : opts.command;
  const q = new URLSearchParams({
    command: JSON.stringify(command),
    env: JSON.stringify({ TERM: DEFAULT_TERM, ...opts.env }),
    tty: "true",
    cols: String(cols),
    rows: String(rows),
  });
  if (opts.cwd !== undefined) q.set("cwd", opts.cwd);
  if (opts.user !== undefined) q.set("user", opts.user);
  return q.toString();
}

function bytes(data: string | Uint8Array): Uint8Array {
  return typeof data === "string" ? new TextEncoder().encode(data) : data;
}

function indexOf(hay: Uint8Array, needle: Uint8Array, from: number): number {
  outer: for (let i = Math.max(from, 0); i + needle.length <= hay.length; i++) {
    for (let j = 0; j < needle.length; j++) if (hay[i + j] !== needle[j]) continue outer;
    return i;
  }
  return -1;
}

/**
 * A command on a terminal (`sandbox.pty()`). What the terminal shows goes to `onData` as it comes, and its
 * last MiB is kept in `output`. `write` types into it (`"\x03"` is ^C), `resize` changes its size (the program
 * gets SIGWINCH), `wait` resolves to the exit code, `kill` ends the command and everything it started.
 * `await using` kills a command still running at the end.
 */
export class Pty {
  readonly #relay: Relay;
  #buf = new Uint8Array(4096);
  #len = 0;
  #dropped = 0; // bytes let go from the front
  #readFrom = 0; // where the next readUntil starts, counted from the first byte ever shown
  #exit: number | undefined;
  #ended: string | undefined; // why the socket ended without an exit code
  #killed = false;
  #changed: (() => void)[] = [];
  #closed: Promise<void>;
  /** The terminal's width. */
  cols: number;
  /** The terminal's height. */
  rows: number;

  private constructor(relay: Relay, cols: number, rows: number, onData?: (data: Uint8Array) => void) {
    this.#relay = relay;
    this.cols = cols;
    this.rows = rows;
    relay.onMessage((d) => {
      this.#keep(d);
      this.#notify();
      onData?.(d);
    });
    this.#closed = new Promise((resolve) =>
      relay.onClose((reason) => {
        const m = EXIT.exec(reason);
        if (m) this.#exit = Number(m[1]);
        else if (this.#killed) this.#exit = KILLED;
        else this.#ended = reason || "the connection closed";
        this.#notify();
        resolve();
      }),
    );
  }

  /** Opens a terminal on `connect`'s relay (`sandbox.pty()` does this for you). */
  static async open(connect: (query: string) => Promise<Relay>, opts: PtyOptions = {}): Promise<Pty> {
    const query = ptyQuery(opts);
    return new Pty(await connect(query), opts.cols ?? 80, opts.rows ?? 24, opts.onData);
  }

  #keep(d: Uint8Array): void {
    if (this.#len + d.length > this.#buf.length) {
      const grown = new Uint8Array(Math.max(this.#buf.length * 2, this.#len + d.length));
      grown.set(this.#buf.subarray(0, this.#len));
      this.#buf = grown;
    }
    this.#buf.set(d, this.#len);
    this.#len += d.length;
    if (this.#len > KEEP_BYTES) {
      const cut = this.#len - KEEP_BYTES;
      this.#buf.copyWithin(0, cut, this.#len);
      this.#len -= cut;
      this.#dropped += cut;
    }
  }

  #notify(): void {
    const waiting = this.#changed;
    this.#changed = [];
    for (const w of waiting) w();
  }

  /** What the terminal showed so far (its last MiB). */
  get output(): Uint8Array {
    return this.#buf.slice(0, this.#len);
  }

  /** The command's exit code once it has exited (`-9` after `kill()`), else undefined. */
  get exitCode(): number | undefined {
    return this.#exit;
  }

  /** Types `data` into the terminal, as keys: `"ls\n"`, `"\x03"` for ^C. */
  write(data: string | Uint8Array): void {
    this.#relay.send(bytes(data));
  }

  /** Makes the terminal `cols` x `rows` (1 to 1000 each); the program is told (SIGWINCH). */
  resize(cols: number, rows: number): void {
    checkSize(cols, rows);
    this.cols = cols;
    this.rows = rows;
    this.#relay.sendText(JSON.stringify({ resize: { cols, rows } }));
  }

  /**
   * Waits until the terminal shows `marker` after what earlier calls returned, and resolves to the output up to
   * and including it. Rejects with `KaironTimeoutError` (saying what was shown) after `timeout` seconds, with
   * `KaironConnectionError` if the command ends first.
   */
  async readUntil(marker: string | Uint8Array, timeout = 30): Promise<Uint8Array> {
    const want = bytes(marker);
    const deadline = Date.now() + timeout * 1000;
    for (;;) {
      const start = Math.max(this.#readFrom - this.#dropped, 0);
      const at = indexOf(this.#buf.subarray(0, this.#len), want, start);
      const shown = () => JSON.stringify(new TextDecoder().decode(this.#buf.subarray(start, this.#len)).slice(-500));
      const text = new TextDecoder().decode(want);
      if (at >= 0) {
        const end = at + want.length;
        this.#readFrom = this.#dropped + end;
        return this.#buf.slice(start, end);
      }
      if (this.#exit !== undefined || this.#ended !== undefined) {
        throw new KaironConnectionError(`the terminal ended (${this.#ended ?? `exit ${this.#exit}`}) before showing ${JSON.stringify(text)}; it showed: ${shown()}`);
      }
      const left = deadline - Date.now();
      if (left <= 0) throw new KaironTimeoutError(`the terminal did not show ${JSON.stringify(text)} within ${timeout} s; it showed: ${shown()}`);
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, left);
        this.#changed.push(() => (clearTimeout(timer), resolve()));
      });
    }
  }

  /**
   * Waits for the command to exit and resolves to its exit code (`-9` after `kill()`). Rejects with
   * `KaironTimeoutError` if it still runs after `timeout` seconds (default no limit), `KaironConnectionError` if
   * the connection broke first.
   */
  async wait(timeout?: number): Promise<number> {
    if (timeout !== undefined) {
      let timer: ReturnType<typeof setTimeout> | undefined;
      const late = new Promise<"late">((resolve) => (timer = setTimeout(() => resolve("late"), timeout * 1000)));
      const first = await Promise.race([this.#closed, late]);
      clearTimeout(timer);
      if (first === "late") throw new KaironTimeoutError(`the terminal's command is still running after ${timeout} s`);
    } else {
      await this.#closed;
    }
    if (this.#exit !== undefined) return this.#exit;
    throw new KaironConnectionError(`the terminal's connection ended without an exit code: ${this.#ended}`);
  }

  /** Ends the command and everything it started (the server kills its process group) by closing the terminal;
   * `wait()` then resolves to `-9`. */
  async kill(): Promise<void> {
    if (this.#exit !== undefined || this.#ended !== undefined) return;
    this.#killed = true;
    this.#relay.close();
    await this.#closed;
  }

  async [Symbol.asyncDispose](): Promise<void> {
    await this.kill();
  }
}
