"""A loopback TCP forwarder that can cut every connection and refuse new ones, then come back on the same port.

No tests here: the readiness and trigger tests put it in front of the PostgreSQL server to simulate a
catalog database outage, and count the connections a waiting trigger holds.
"""

from __future__ import annotations

import contextlib
import socket
import threading


class TcpProxy:
    """Forward ``127.0.0.1:<port>`` to ``127.0.0.1:<target_port>``.

    Attributes:
        port: The port it listens on (chosen at the first :meth:`start`, kept by later ones).
        active: Connections open through it now.
    """

    def __init__(self, target_port: int) -> None:
        self.target_port = target_port
        self.port = 0
        self.active = 0
        self._listener: socket.socket | None = None
        self._sockets: list[socket.socket] = []
        self._lock = threading.Lock()

    def start(self) -> TcpProxy:
        """Listen (again) and forward every connection."""
        listener = socket.socket()
        listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        listener.bind(("127.0.0.1", self.port))
        listener.listen(64)
        self.port = listener.getsockname()[1]
        self._listener = listener
        threading.Thread(target=self._accept, args=(listener,), daemon=True).start()
        return self

    def stop(self) -> None:
        """Cut every open connection and refuse new ones."""
        if self._listener is not None:
            _close(self._listener)
            self._listener = None
        with self._lock:
            for sock in self._sockets:
                _close(sock)
            self._sockets.clear()

    def _accept(self, listener: socket.socket) -> None:
        while True:
            try:
                client, _ = listener.accept()
            except OSError:
                return
            try:
                upstream = socket.create_connection(("127.0.0.1", self.target_port))
            except OSError:
                _close(client)
                continue
            with self._lock:
                self._sockets += [client, upstream]
                self.active += 1
            threading.Thread(target=self._pipe, args=(upstream, client, False), daemon=True).start()
            threading.Thread(target=self._pipe, args=(client, upstream, True), daemon=True).start()

    def _pipe(self, source: socket.socket, sink: socket.socket, counted: bool) -> None:
        try:
            while data := source.recv(65536):
                sink.sendall(data)
        except OSError:
            pass
        finally:
            _close(source)
            _close(sink)
            if counted:
                with self._lock:
                    self.active -= 1


def _close(sock: socket.socket) -> None:
    with contextlib.suppress(OSError):
        sock.shutdown(socket.SHUT_RDWR)
    sock.close()
