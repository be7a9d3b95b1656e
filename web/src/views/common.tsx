import type { ComponentChildren } from "preact";

export function Msg({ text, kind }: { text?: string; kind: "error" | "ok" }) {
  if (!text) return null;
  return (
    <p class={kind} role={kind === "error" ? "alert" : "status"} data-testid={`msg-${kind}`}>
      {text}
    </p>
  );
}

export function Badge({ children }: { children: ComponentChildren }) {
  return <span class="badge">{children}</span>;
}

/** Saves `text` as a file the browser downloads. */
export function download(name: string, blob: Blob) {
  const url = URL.createObjectURL(blob);
  const a = document.createElement("a");
  a.href = url;
  a.download = name;
  document.body.appendChild(a);
  a.click();
  a.remove();
  setTimeout(() => URL.revokeObjectURL(url), 10_000);
}
