"""Catalog servers that misbehave on purpose, on loopback: they drip, never end, redirect, or answer something else.

Each runs in a thread of this process, counts the connections it accepted and notes when the other
side closed each one, so a test can tell how many requests a client made and whether it let go.
"""

from __future__ import annotations

import contextlib
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field

__all__ = ["HostileServer", "closed_port", "hostile_server"]

HEADERS = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 1000000\r\n\r\n"


@dataclass
class HostileServer:
    """What a hostile server saw: when each connection was accepted, and when the client closed it."""

    uri: str
    accepted: list[float] = field(default_factory=list)
    closed: list[float] = field(default_factory=list)
    requests: list[bytes] = field(default_factory=list)

    def open_connections(self) -> int:
        """Connections accepted that the client has not closed."""
        return len(self.accepted) - len(self.closed)


def _request(connection: socket.socket, stop: threading.Event) -> bytes:
    """One request's head (empty when the client closed the connection)."""
    request = b""
    with contextlib.suppress(OSError):
        while b"\r\n\r\n" not in request and not stop.is_set():
            try:
                chunk = connection.recv(65536)
            except TimeoutError:
                continue
            if not chunk:
                break
            request += chunk
    return request


def _serve(connection: socket.socket, mode: str, answer: bytes, server: HostileServer, stop: threading.Event) -> None:
    connection.settimeout(0.2)
    request = _request(connection, stop)
    server.requests.append(request)
    try:
        if mode == "drip":  # an answer, one byte at a time, slower than anyone waits
            for byte in HEADERS + b"{" * 100000:
                if stop.is_set():
                    break
                connection.sendall(bytes([byte]))
                time.sleep(0.3)
        elif mode == "endless":  # a valid head, then a body that never ends, as fast as it is read
            connection.sendall(HEADERS)
            block = b"[" * 65536
            while not stop.is_set():
                connection.sendall(block)
        else:  # the same answer to every request of the connection, until the client closes it
            while request and not stop.is_set():
                connection.sendall(answer)
                request = _request(connection, stop)
                if request:
                    server.requests.append(request)
    except OSError:  # the client closed it: what a bounded client does
        pass
    server.closed.append(time.monotonic())
    connection.close()


@contextlib.contextmanager
def hostile_server(mode: str, answer: bytes = b"") -> Iterator[HostileServer]:
    """A server on a free loopback port: ``drip``, ``endless``, or ``answer`` (``answer`` to every request).

    Every connection is served in a thread of its own; all of them stop when the block ends.
    """
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(64)
    listener.settimeout(0.1)
    server = HostileServer(f"http://127.0.0.1:{listener.getsockname()[1]}")
    stop = threading.Event()
    workers: list[threading.Thread] = []

    def accept() -> None:
        while not stop.is_set():
            try:
                connection, _ = listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            server.accepted.append(time.monotonic())
            worker = threading.Thread(target=_serve, args=(connection, mode, answer, server, stop), daemon=True)
            workers.append(worker)
            worker.start()

    acceptor = threading.Thread(target=accept, daemon=True)
    acceptor.start()
    try:
        yield server
    finally:
        stop.set()
        acceptor.join(5)
        listener.close()
        for worker in workers:
            worker.join(5)


def closed_port() -> int:
    """A loopback port nothing listens on."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]
