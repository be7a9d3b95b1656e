import { useEffect, useRef, useState } from "preact/hooks";
import { Terminal as XTerm } from "@xterm/xterm";
import { type Machine, seg, wsUrl } from "../api";

/**
 * A shell in the Machine on the exec-stream WebSocket, or its console on the console WebSocket;
 * each opened with a single-use ticket. Neither stream has a terminal device here, so the line
 * is edited in the page and sent on Enter.
 */
export function Terminal({ m, kind = "shell" }: { m: Machine; kind?: "shell" | "console" }) {
  const el = useRef<HTMLDivElement>(null);
  const [state, setState] = useState("connecting…");
  useEffect(() => {
    const term = new XTerm({ convertEol: true, rows: 16, cols: 100, fontSize: 14 });
    term.open(el.current!);
    let ws: WebSocket | undefined;
    let line = "";
    let closed = false;
    const enc = new TextEncoder();
    const base = `/api/v1/machines/${seg(m.metadata.namespace ?? "")}/${seg(m.metadata.name)}`;
    const opened =
      kind === "shell" ? wsUrl(`${base}/exec/stream`, { command: JSON.stringify(["sh", "-i"]) }) : wsUrl(`${base}/console`, {});
    void opened
      .then((url) => {
        if (closed) return;
        ws = new WebSocket(url);
        ws.binaryType = "arraybuffer";
        ws.onopen = () => {
          setState("connected");
          term.focus();
        };
        ws.onmessage = (ev) => {
          term.write(typeof ev.data === "string" ? ev.data : new Uint8Array(ev.data as ArrayBuffer));
        };
        ws.onclose = (ev) => setState(`closed${ev.reason ? `: ${ev.reason}` : ""}`);
      })
      .catch((e) => setState(`refused: ${String(e)}`));
    const sub = term.onData((data) => {
      for (const ch of data) {
        if (ch === "\r") {
          term.write("\r\n");
          ws?.send(enc.encode(`${line}\n`));
          line = "";
        } else if (ch === "\u007f") {
          if (line.length > 0) {
            line = line.slice(0, -1);
            term.write("\b \b");
          }
        } else if (ch === "\u0004") {
          ws?.send(new Uint8Array());
        } else if (ch >= " ") {
          line += ch;
          term.write(ch);
        }
      }
    });
    return () => {
      closed = true;
      sub.dispose();
      ws?.close();
      try {
        term.dispose();
      } catch {
        /* already gone */
      }
    };
  }, [m.metadata.namespace, m.metadata.name, kind]);
  return (
    <div>
      <p role="status" data-testid={kind === "shell" ? "terminal-state" : "console-state"}>
        {kind === "shell" ? "Terminal" : "Console"}: {state}
      </p>
      <div ref={el} class="terminal" data-testid={kind === "shell" ? "terminal" : "console"} />
    </div>
  );
}
