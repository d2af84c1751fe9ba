"""Catalog servers that misbehave on purpose, on loopback: they drip, never end, never answer, or answer something else.

:func:`raw_server` accepts connections in a thread, reads each request's head and hands the socket to
an *answer* (:func:`drip`, :func:`endless`, :func:`never`, :func:`canned`); it counts the connections
it accepted and those the client closed, so a test can tell how many requests a client made and
whether it let go. Its threads are named ``test-server-...``, to tell them from a client's.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import socket
import threading
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler
from pathlib import Path

from tests.support.servers import serve_http

__all__ = [
    "CONFIG",
    "SERVER_THREAD",
    "Answer",
    "RawServer",
    "answer_json",
    "canned",
    "client_sockets",
    "closed_port",
    "config_then",
    "drip",
    "endless",
    "half_stalled",
    "never",
    "raw_server",
]

SERVER_THREAD = "test-server"
CONFIG = json.dumps({"defaults": {}, "overrides": {}}).encode()
"""The body of a REST catalog's ``GET /v1/config`` that sets nothing."""

Answer = Callable[[socket.socket, threading.Event, bytes], None]
"""Answers one request: ``answer(connection, stop, request_head)``; returns when done (or when ``stop`` is set)."""


@dataclass
class RawServer:
    """A server's address, and what it saw: connections accepted, connections the client closed, request heads."""

    uri: str
    port: int
    accepted: int = 0
    closed_by_client: int = 0
    requests: list[bytes] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def open_connections(self) -> int:
        """Connections accepted that the client has not closed."""
        with self.lock:
            return self.accepted - self.closed_by_client


def _request(connection: socket.socket, stop: threading.Event) -> bytes:
    """One request's head (empty when the client closed the connection first)."""
    request = b""
    while b"\r\n\r\n" not in request and not stop.is_set():
        try:
            chunk = connection.recv(65536)
        except TimeoutError:
            continue
        if not chunk:
            return b""
        request += chunk
    return request


@contextlib.contextmanager
def raw_server(answer: Answer, *, keep_alive: bool = False) -> Iterator[RawServer]:
    """A server on a free loopback port answering every connection's request with ``answer``.

    ``keep_alive``: answer each further request of a connection too. After answering, the server
    waits for the client to hang up (end of stream or reset), which it counts, or for the block to end.
    """
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(64)
    listener.settimeout(0.1)
    port = listener.getsockname()[1]
    server = RawServer(f"http://127.0.0.1:{port}", port)
    stop = threading.Event()
    handlers: list[threading.Thread] = []

    def hung_up() -> None:
        with server.lock:
            server.closed_by_client += 1

    def handle(connection: socket.socket) -> None:
        connection.settimeout(0.1)
        try:
            request = _request(connection, stop)
            while request:
                with server.lock:
                    server.requests.append(request)
                answer(connection, stop, request)
                if not keep_alive:
                    break
                request = _request(connection, stop)
            if not request and not stop.is_set():
                hung_up()
                return
            while not stop.is_set():  # wait for the client to hang up
                try:
                    if connection.recv(65536) == b"":
                        hung_up()
                        return
                except TimeoutError:
                    continue
        except OSError:  # reset by the client: it hung up
            hung_up()
        finally:
            connection.close()

    def accept() -> None:
        while not stop.is_set():
            try:
                connection, _ = listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            with server.lock:
                server.accepted += 1
            handler = threading.Thread(target=handle, args=(connection,), name=f"{SERVER_THREAD}-handler", daemon=True)
            handlers.append(handler)
            handler.start()

    acceptor = threading.Thread(target=accept, name=f"{SERVER_THREAD}-accept", daemon=True)
    acceptor.start()
    try:
        yield server
    finally:
        stop.set()
        acceptor.join(5)
        listener.close()
        for handler in handlers:
            handler.join(5)


def drip(data: bytes, interval: float) -> Answer:
    """Sends ``data`` one byte every ``interval`` seconds, headers included.

    A token request (``POST /v1/oauth/tokens``) is answered at once, so the drip reaches the catalog's requests.
    """

    def answer(connection: socket.socket, stop: threading.Event, request: bytes) -> None:
        if request.startswith(b"POST /v1/oauth/tokens "):
            token = b'{"access_token": "t0k3n", "token_type": "bearer", "expires_in": 3600}'
            connection.sendall(
                b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: close\r\n"
                b"Content-Length: %d\r\n\r\n%s" % (len(token), token)
            )
            return
        for index in range(len(data)):
            if stop.wait(interval):
                return
            connection.sendall(data[index : index + 1])

    return answer


def endless(connection: socket.socket, stop: threading.Event, request: bytes) -> None:
    """A valid head announcing a gigabyte, then a body that never ends (512 bytes every 10 ms)."""
    connection.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 1000000000\r\n\r\n")
    connection.sendall(b'{"defaults": {"x": "')
    while not stop.wait(0.01):
        connection.sendall(b"y" * 512)


def never(connection: socket.socket, stop: threading.Event, request: bytes) -> None:
    """No answer at all: the request was read, and the client is left waiting."""


def canned(response: bytes) -> Answer:
    """The same whole ``response`` (status line, headers, body) to every request."""

    def answer(connection: socket.socket, stop: threading.Event, request: bytes) -> None:
        connection.sendall(response)

    return answer


def answer_json(handler: BaseHTTPRequestHandler, body: object, code: int = 200) -> None:
    """Answer the request ``handler`` holds with ``body`` as JSON (bytes as they are) and status ``code``."""
    data = body if isinstance(body, bytes) else json.dumps(body).encode()
    handler.send_response(code)
    handler.send_header("Content-Type", "application/json")
    handler.send_header("Content-Length", str(len(data)))
    handler.end_headers()
    handler.wfile.write(data)


def config_then(later: Callable[[BaseHTTPRequestHandler], None]) -> type[BaseHTTPRequestHandler]:
    """A handler serving ``GET /v1/config`` like a REST catalog and every other request with ``later(handler)``."""

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            if self.path.split("?")[0] == "/v1/config":
                answer_json(self, CONFIG)
                return
            later(self)

        do_HEAD = do_POST = do_DELETE = do_GET

        def log_message(self, format: str, *args: object) -> None:
            pass

    return Handler


@contextlib.contextmanager
def half_stalled() -> Iterator[str]:
    """The URI of a REST catalog answering ``GET /v1/config``, then stalling on every other request."""
    release = threading.Event()
    with serve_http(config_then(lambda handler: release.wait(30))) as uri:
        try:
            yield uri
        finally:
            release.set()


def closed_port() -> int:
    """A loopback port nothing listens on."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def client_sockets(port: int) -> int:
    """How many sockets this process holds connected to ``127.0.0.1:port`` (from /proc: the client's ends)."""
    inodes = set()
    for fd in Path("/proc/self/fd").iterdir():
        try:
            target = os.readlink(fd)
        except OSError:
            continue
        found = re.fullmatch(r"socket:\[(\d+)\]", target)
        if found:
            inodes.add(found.group(1))
    count = 0
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            remote_port = int(fields[2].rsplit(":", 1)[1], 16)
            if remote_port == port and fields[9] in inodes:
                count += 1
    return count
