import { useEffect, useRef, useState } from "preact/hooks";
import { Terminal as XTerm } from "@xterm/xterm";
import { type Machine, seg, wsUrl } from "../api";

/**
 * A shell in the Machine on the exec-stream WebSocket (opened with a single-use ticket). The
 * stream has no terminal device, so the line is edited here and sent on Enter.
 */
export function Terminal({ m }: { m: Machine }) {
  const el = useRef<HTMLDivElement>(null);
  const [state, setState] = useState("connecting…");
  useEffect(() => {
    const term = new XTerm({ convertEol: true, rows: 16, cols: 100, fontSize: 14 });
    term.open(el.current!);
    let ws: WebSocket | undefined;
    let line = "";
    let closed = false;
    const enc = new TextEncoder();
    const path = `/api/v1/machines/${seg(m.metadata.namespace ?? "")}/${seg(m.metadata.name)}/exec/stream`;
    void wsUrl(path, { command: JSON.stringify(["sh", "-i"]) })
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
  }, [m.metadata.namespace, m.metadata.name]);
  return (
    <div>
      <p role="status" data-testid="terminal-state">
        Terminal: {state}
      </p>
      <div ref={el} class="terminal" data-testid="terminal" />
    </div>
  );
}
