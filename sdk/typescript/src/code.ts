/**
 * Code contexts: `await sb.codeContext("python")`, an interpreter in the sandbox whose state outlives each
 * run (E2B's `runCode`, without Jupyter in the image).
 *
 *     await using ctx = await sb.codeContext("python");
 *     await ctx.run("x = 21");
 *     (await ctx.run("x * 2")).text; // "42"
 *
 * Each context is the guest agent's `kairon-agent context LANGUAGE` running as a background process with its
 * stdin open: several per sandbox, none sharing state; a pause freezes it with the rest of the sandbox, and
 * another client re-attaches to it by its id (`sb.codeContext("python", { id })`). Requests go in on its stdin
 * as JSON lines; answers come back on its stdout after a marker, read from the byte offset this handle reached
 * (agent/src/context.rs has the protocol, sdk/python/kairon/code.py the same client in Python).
 */
import { KaironError } from "./errors.js";
import type { SandboxProcess } from "./sandbox.js";

/** What starts a context: the agent in a sandbox's tools directory, or a VM image's /sbin. */
export const CONTEXT_SCRIPT =
  'for a in /.kairon/kairon-agent /sbin/kairon-agent; do if [ -x "$a" ]; then exec "$a" context "$@"; ' +
  "fi; done; printf '\\036kairon-context {\"ready\":false,\"error\":{\"name\":\"ContextError\",\"value\":" +
  "\"this guest has no kairon-agent to run code in\"}}\\n'; exit 127";
const MARK = "\x1ekairon-context ";

/** What a run raised: its type's `name`, its message (`value`) and its `traceback` as text. */
export interface CodeError {
  /** The error's type: `ZeroDivisionError`, `TypeError`, `TimeoutError`… */
  name: string;
  /** Its message. */
  value: string;
  /** The traceback (Python) or stack (JavaScript) down to the run's own code. */
  traceback: string;
}

/** A run's output: what it printed, the last expression's value as text (`repr` in Python, `util.inspect` in
 * JavaScript; null when there is none), and its error if it raised one. */
export interface CodeResult {
  /** What the run printed on stdout (a subprocess's output included). */
  stdout: string;
  /** What it printed on stderr. */
  stderr: string;
  /** The last expression's value as text, or null when the code ends with none (or it is None/undefined). */
  text: string | null;
  /** What it raised, or null. */
  error: CodeError | null;
}

/** A run raised in the context (from `checked(result)`); the context lives on. */
export class CodeRunError extends KaironError {
  override name = "CodeRunError";
  constructor(
    /** What the run raised. */
    readonly error: CodeError,
  ) {
    super(`${error.name}: ${error.value}\n${error.traceback}`);
  }
}

/** `result`, or a `CodeRunError` with the traceback when the run raised. */
export function checked(result: CodeResult): CodeResult {
  if (result.error) throw new CodeRunError(result.error);
  return result;
}

interface Answer {
  id?: string | null;
  ready?: boolean;
  text?: unknown;
  stdout?: unknown;
  stderr?: unknown;
  error?: { name?: unknown; value?: unknown; traceback?: unknown } | null;
}

/** One interpreter in a sandbox (see the module). `run` one piece of code at a time. */
export class CodeContext {
  private pending = "";
  constructor(
    /** Its process (the context's id is the process's). */
    readonly process: SandboxProcess,
    /** Its language: `python` or `javascript`. */
    readonly language: string,
  ) {}

  /** The context's id (re-attach with `sb.codeContext(language, { id })`). */
  get id(): string {
    return this.process.pid;
  }

  /** The next answer carrying id `want` (any, with null); stdout that is not an answer (a subprocess that wrote
   * past the capture) is kept for the run it belongs to. */
  private async answer(want: string | null): Promise<Answer> {
    const stray: string[] = [];
    for await (const out of this.process.output()) {
      if (out.stream !== "stdout") continue;
      this.pending += out.data;
      let nl: number;
      while ((nl = this.pending.indexOf("\n")) >= 0) {
        const line = this.pending.slice(0, nl);
        this.pending = this.pending.slice(nl + 1);
        if (!line.startsWith(MARK)) {
          stray.push(`${line}\n`);
          continue;
        }
        const said = JSON.parse(line.slice(MARK.length)) as Answer;
        if (said.ready === false) {
          throw new KaironError(`${this.language} context: ${String(said.error?.value ?? "it did not start")}`);
        }
        if (want === null || said.id === want) {
          if (stray.length) said.stdout = stray.join("") + String(said.stdout ?? "");
          return said;
        }
      }
    }
    throw new KaironError(`the ${this.language} context ${this.id} ended (exit code ${this.process.exitCode}): start another`);
  }

  /** Waits for the interpreter's first word: ready, or why it cannot start (a `KaironError`). */
  async waitReady(): Promise<void> {
    await this.answer(null);
  }

  /** Runs `code` in the context; a run longer than `timeout` seconds (default 300, 0 for none) is interrupted
   * and returns a timeout error. */
  async run(code: string, opts: { timeout?: number } = {}): Promise<CodeResult> {
    const ask = globalThis.crypto.randomUUID();
    await this.process.write(`${JSON.stringify({ id: ask, code, timeoutSeconds: opts.timeout ?? 300 })}\n`);
    const said = await this.answer(ask);
    const e = said.error;
    return {
      stdout: String(said.stdout ?? ""),
      stderr: String(said.stderr ?? ""),
      text: typeof said.text === "string" ? said.text : null,
      error: e ? { name: String(e.name ?? ""), value: String(e.value ?? ""), traceback: String(e.traceback ?? "") } : null,
    };
  }

  /** Ends the interpreter (its state is gone). */
  async close(): Promise<void> {
    if (!this.process.exited) await this.process.kill();
  }

  async [Symbol.asyncDispose](): Promise<void> {
    await this.close();
  }
}
