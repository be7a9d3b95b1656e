/**
 * `sandbox.portForward(port)`: a local TCP port carried to a port in the guest, one WebSocket relay
 * (`.../portforward/{port}`) per connection, as `kaironctl port-forward` does.
 */
import { createServer, type Server, type Socket } from "node:net";
import type { LocalForward, Relay } from "./platform.js";

/** Listens on 127.0.0.1:`localPort` and carries each connection to the guest's `remotePort`; `close()` (or
 * `await using`) stops listening and ends the connections. */
export class PortForward implements LocalForward {
  readonly #server: Server;
  readonly #conns = new Set<Socket>();

  private constructor(
    server: Server,
    /** The local port listened on (127.0.0.1). */
    readonly localPort: number,
    /** The guest's port each connection is carried to. */
    readonly remotePort: number,
  ) {
    this.#server = server;
  }

  /** `http://127.0.0.1:<localPort>`. */
  get url(): string {
    return `http://127.0.0.1:${this.localPort}`;
  }

  /** Starts listening (`localPort` 0: any free port). */
  static async open(connect: () => Promise<Relay>, remotePort: number, localPort = 0): Promise<PortForward> {
    if (!Number.isInteger(remotePort) || remotePort < 1 || remotePort > 65535) {
      throw new RangeError(`port ${remotePort} is not from 1 to 65535`);
    }
    let forward: PortForward | undefined;
    const server = createServer((conn) => {
      if (forward) forward.#carry(conn, connect);
      else conn.destroy();
    });
    await new Promise<void>((resolve, reject) => {
      server.once("error", reject);
      server.listen(localPort, "127.0.0.1", () => resolve());
    });
    const address = server.address();
    const port = typeof address === "object" && address ? address.port : localPort;
    forward = new PortForward(server, port, remotePort);
    return forward;
  }

  #carry(conn: Socket, connect: () => Promise<Relay>): void {
    this.#conns.add(conn);
    conn.pause();
    const drop = () => {
      this.#conns.delete(conn);
      conn.destroy();
    };
    connect().then(
      (ws) => {
        conn.on("data", (d: Buffer) => ws.send(d));
        conn.on("end", () => ws.close());
        conn.on("error", () => ws.close());
        conn.on("close", () => ws.close());
        ws.onMessage((d) => conn.write(d));
        ws.onClose(drop);
        conn.resume();
      },
      () => drop(),
    );
  }

  /** Stops listening and ends every carried connection. */
  async close(): Promise<void> {
    for (const c of this.#conns) c.destroy();
    this.#conns.clear();
    await new Promise<void>((resolve) => this.#server.close(() => resolve()));
  }

  async [Symbol.asyncDispose](): Promise<void> {
    await this.close();
  }
}
