"""`Sandbox.port_forward`: a local TCP port carried to a port in the guest, one WebSocket relay
(`.../portforward/{port}`) per connection, as `kaironctl port-forward` does."""

from __future__ import annotations

import logging
import socket
import threading
from types import TracebackType
from typing import TYPE_CHECKING

from .errors import KaironError

if TYPE_CHECKING:
    from websockets.sync.client import ClientConnection

    from .client import UIClient

log = logging.getLogger("kairon")

_CHUNK = 64 * 1024


class PortForward:
    """Listens on 127.0.0.1:`local_port` and carries each connection to the guest's
    `remote_port`. `url` is `http://127.0.0.1:<local_port>`. `close()` (or leaving a `with`
    block) stops listening and ends the connections."""

    def __init__(self, ui: UIClient, namespace: str, name: str, remote_port: int, local_port: int = 0) -> None:
        if not 1 <= remote_port <= 65535:
            raise ValueError(f"port {remote_port} is not from 1 to 65535")
        self._ui, self._ns, self._name, self.remote_port = ui, namespace, name, remote_port
        self._server = socket.create_server(("127.0.0.1", local_port))
        self.local_port: int = self._server.getsockname()[1]
        self._closed = threading.Event()
        self._conns: set[socket.socket] = set()
        self._lock = threading.Lock()
        threading.Thread(target=self._accept, name=f"kairon-forward-{self.local_port}", daemon=True).start()

    @property
    def url(self) -> str:
        """The forwarded port's local address as an http:// URL."""
        return f"http://127.0.0.1:{self.local_port}"

    def _accept(self) -> None:
        while not self._closed.is_set():
            try:
                conn, _ = self._server.accept()
            except OSError:
                return
            with self._lock:
                self._conns.add(conn)
            threading.Thread(target=self._carry, args=(conn,), daemon=True).start()

    def _carry(self, conn: socket.socket) -> None:
        try:
            ws = self._ui.relay(self._name, f"portforward/{self.remote_port}", namespace=self._ns)
        except KaironError as e:
            log.warning("port-forward to %s:%d: %s", self._name, self.remote_port, e)
            self._drop(conn)
            return
        with ws:
            threading.Thread(target=self._up, args=(conn, ws), daemon=True).start()
            try:
                for message in ws:
                    data = message.encode() if isinstance(message, str) else message
                    conn.sendall(data)
            except Exception as e:  # the guest or the relay ended the connection
                log.debug("port-forward %d: %s", self.remote_port, e)
            finally:
                self._drop(conn)

    @staticmethod
    def _up(conn: socket.socket, ws: ClientConnection) -> None:
        try:
            while data := conn.recv(_CHUNK):
                ws.send(data)
        except Exception as e:  # either side went away
            log.debug("port-forward: %s", e)
        finally:
            ws.close()

    def _drop(self, conn: socket.socket) -> None:
        with self._lock:
            self._conns.discard(conn)
        try:
            conn.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        conn.close()

    def close(self) -> None:
        """Stops listening and ends every carried connection."""
        self._closed.set()
        # shutdown() wakes the thread blocked in accept(); close() alone would not.
        try:
            self._server.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass
        self._server.close()
        with self._lock:
            conns = list(self._conns)
        for c in conns:
            self._drop(c)

    def __enter__(self) -> PortForward:
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self.close()
