"""REST catalogs whose every request ends by a deadline, set on the catalog's own HTTP session and nowhere else.

:func:`bound_session` gives a session sockets that check a deadline before every read and write;
:func:`deadline` bounds every request inside it by one deadline in all (docs/catalogs.md, Bounds).
"""

from __future__ import annotations

import contextlib
import io
import re
import time
import weakref
from collections.abc import Callable, Iterator
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any
from urllib.parse import urlsplit

import requests
from pyiceberg.catalog.rest import RestCatalog
from urllib3.connection import HTTPConnection, HTTPSConnection
from urllib3.connectionpool import HTTPConnectionPool, HTTPSConnectionPool

from iceberg_ops_provider.catalogs.requests_of import causes
from iceberg_ops_provider.catalogs.trust import check_configuration, origin

__all__ = [
    "MAX_ANSWER_BYTES",
    "MAX_SMALL_ANSWER_BYTES",
    "AnswerTooLarge",
    "BoundedRestCatalog",
    "DeadlineExceeded",
    "EncodingRefused",
    "RedirectRefused",
    "bound_catalog",
    "bound_of",
    "bound_session",
    "deadline",
]

MAX_ANSWER_BYTES = 512 * 1024 * 1024
"""The most one answer of a catalog may hold (headers and body), unless :func:`deadline` says less."""

MAX_SMALL_ANSWER_BYTES = 1024 * 1024
"""The most a catalog's configuration or a token may hold: a few properties (parsed, JSON grows tenfold or more)."""
_SMALL_ANSWERS = ("/v1/config", "/oauth/tokens")


class _Refused(requests.exceptions.RequestException):
    """A request the bounded transport gave up on; ``method`` and ``url`` say which."""

    def __init__(self, text: str, *, method: str, url: str, **kwargs: Any) -> None:
        self.method = method
        self.url = url
        super().__init__(text, **kwargs)


class DeadlineExceeded(_Refused, requests.exceptions.ReadTimeout):
    """A catalog request ran out of its deadline (connecting, sending or reading, in all) of ``seconds``."""

    def __init__(self, seconds: float, **kwargs: Any) -> None:
        self.seconds = seconds
        super().__init__(f"no whole answer within {seconds:g} s", **kwargs)


class AnswerTooLarge(_Refused):
    """A catalog's answer was larger than the bound; the connection was closed."""

    def __init__(self, limit: int, **kwargs: Any) -> None:
        self.limit = limit
        super().__init__(f"the answer was larger than {limit} bytes", **kwargs)


class EncodingRefused(_Refused):
    """A catalog sent a compressed answer (``encoding``, or ``other``) though asked for none; it is not decompressed."""

    def __init__(self, encoding: str, **kwargs: Any) -> None:
        self.encoding = encoding
        super().__init__(f"a compressed answer ({encoding}) though none was asked for", **kwargs)


class RedirectRefused(_Refused):
    """A catalog answered with a redirect to another origin, which is not followed."""

    def __init__(self, status: int, target: str, **kwargs: Any) -> None:
        self.status = status
        self.target = target
        super().__init__(f"redirect ({status}) to another origin, not followed", **kwargs)


@dataclass
class _Limit:
    deadline: float
    max_bytes: int
    read: int = 0

    def remaining(self) -> float:
        return self.deadline - time.monotonic()


_LIMIT: ContextVar[_Limit | None] = ContextVar("iceberg_ops_catalog_limit", default=None)
# The sockets of the session whose request runs in this context: closing the session closes them.
_SOCKETS: ContextVar[weakref.WeakSet[_BoundedSocket] | None] = ContextVar("iceberg_ops_catalog_sockets", default=None)


class _DeadlinePassed(TimeoutError):
    """Raised by a bounded socket whose deadline passed (urllib3 reports it as a read timeout)."""


class _TooLarge(Exception):
    """Raised by a bounded socket that read more than the bound (not an ``OSError``: urllib3 passes it on)."""


@contextlib.contextmanager
def deadline(seconds: float, *, max_answer_bytes: int | None = None) -> Iterator[None]:
    """Bound every catalog request inside (in this context) to end within ``seconds``, nested bounds the earlier.

    ``max_answer_bytes`` bounds each answer (default: the enclosing bound's, else :data:`MAX_ANSWER_BYTES`).
    """
    outer = _LIMIT.get()
    end = time.monotonic() + seconds
    if outer is not None:
        end = min(end, outer.deadline)
    cap = max_answer_bytes or (outer.max_bytes if outer is not None else MAX_ANSWER_BYTES)
    with _set(_LIMIT, _Limit(end, cap)):
        yield


@contextlib.contextmanager
def _set(variable: ContextVar[Any], value: Any) -> Iterator[None]:
    token = variable.set(value)
    try:
        yield
    finally:
        variable.reset(token)


class _BoundedSocket:
    """A connected socket whose every read and write waits at most until the current deadline."""

    def __init__(self, sock: Any) -> None:
        self._sock = sock
        self._timeout = sock.gettimeout()
        # As a socket's makefile() does: closing the socket waits for the answer being read to be closed
        # (http.client closes the connection of a "Connection: close" answer before reading its body).
        self._readers = 0
        self._closing = False

    def __getattr__(self, name: str) -> Any:
        return getattr(self._sock, name)

    def settimeout(self, value: float | None) -> None:
        self._timeout = value
        self._sock.settimeout(value)

    def gettimeout(self) -> float | None:
        return self._timeout

    def _waited(self, call: Callable[[], Any]) -> tuple[Any, _Limit | None]:
        """``call()`` on the socket, waiting at most until the current deadline; and that deadline's limit."""
        limit = _LIMIT.get()
        if limit is None:
            self._sock.settimeout(self._timeout)
            return call(), None
        remaining = limit.remaining()
        if remaining <= 0:
            self.shut()
            raise _DeadlinePassed("the catalog request's deadline passed")
        self._sock.settimeout(remaining if self._timeout is None else min(self._timeout, remaining))
        try:
            return call(), limit
        except TimeoutError:
            if limit.remaining() <= 0:
                self.shut()
                raise _DeadlinePassed("the catalog request's deadline passed") from None
            raise

    def recv_into(self, buffer: Any, *args: Any) -> int:
        count, limit = self._waited(lambda: self._sock.recv_into(buffer, *args))
        if limit is not None:
            limit.read += count
            if limit.read > limit.max_bytes:
                self.shut()
                raise _TooLarge(limit.max_bytes)
        return count

    def recv(self, size: int, *args: Any) -> bytes:
        view = bytearray(size)
        count = self.recv_into(view, size, *args)
        return bytes(view[:count])

    def sendall(self, data: Any, *args: Any) -> None:
        self._waited(lambda: self._sock.sendall(data, *args))

    def send(self, data: Any, *args: Any) -> int:
        return self._waited(lambda: self._sock.send(data, *args))[0]

    def makefile(self, mode: str = "r", buffering: int | None = None, **kwargs: Any) -> Any:
        if mode != "rb":
            return self._sock.makefile(mode, buffering, **kwargs)
        self._readers += 1
        return io.BufferedReader(_Reader(self), buffering if buffering and buffering > 0 else io.DEFAULT_BUFFER_SIZE)

    def reader_closed(self) -> None:
        self._readers -= 1
        if self._closing and self._readers <= 0:
            self._sock.close()

    def close(self) -> None:
        self._closing = True
        if self._readers <= 0:
            self._sock.close()

    def shut(self) -> None:
        """Close the connection now, whatever still holds the answer being read: nothing more is read of it."""
        self._sock.close()


class _Reader(io.RawIOBase):
    def __init__(self, sock: _BoundedSocket) -> None:
        self._sock = sock

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        return self._sock.recv_into(buffer)

    def close(self) -> None:
        if not self.closed:
            self._sock.reader_closed()
        super().close()


class _BoundedConnection(HTTPConnection):
    def connect(self) -> None:
        # No new connection once the deadline passed (a retry of a request that ran out), and none waiting past it.
        limit = _LIMIT.get()
        if limit is not None:
            remaining = limit.remaining()
            if remaining <= 0:
                raise _DeadlinePassed("the catalog request's deadline passed")
            self.timeout = remaining if self.timeout is None else min(self.timeout, remaining)
        super().connect()
        self.sock = _BoundedSocket(self.sock)
        sockets = _SOCKETS.get()
        if sockets is not None:
            sockets.add(self.sock)


class _BoundedHTTPSConnection(_BoundedConnection, HTTPSConnection):
    pass


_POOLS = {
    "http": type("_BoundedHTTPPool", (HTTPConnectionPool,), {"ConnectionCls": _BoundedConnection}),
    "https": type("_BoundedHTTPSPool", (HTTPSConnectionPool,), {"ConnectionCls": _BoundedHTTPSConnection}),
}


class _BoundedRequest:
    """A session's ``request``, bounded by a deadline of ``seconds`` (changed in place when bound again)."""

    def __init__(self, request: Callable[..., requests.Response], seconds: float) -> None:
        self.request = request
        self.seconds = seconds
        self.sockets: weakref.WeakSet[_BoundedSocket] = weakref.WeakSet()

    def __call__(self, method: str, url: str, *args: Any, **kwargs: Any) -> requests.Response:
        outer = _LIMIT.get()
        nearer = outer is not None and outer.remaining() < self.seconds
        # The bound that ran out, when one does: this request's own, or what was left of an enclosing one.
        bound = round(outer.remaining(), 3) if nearer and outer is not None else self.seconds
        small = urlsplit(url).path.rstrip("/").endswith(_SMALL_ANSWERS)
        cap = min(outer.max_bytes if outer is not None else MAX_ANSWER_BYTES, MAX_SMALL_ANSWER_BYTES) if small else None
        with deadline(self.seconds, max_answer_bytes=cap), _set(_SOCKETS, self.sockets):
            limit = _LIMIT.get()
            assert limit is not None
            wait = max(0.001, min(self.seconds, limit.remaining()))
            # timeout is Session.request's seventh parameter after (method, url); PyIceberg passes keywords.
            if len(args) < 7 and kwargs.get("timeout") is None:
                kwargs["timeout"] = (wait, wait)
            try:
                response = self.request(method, url, *args, **kwargs)
            except requests.RequestException as exc:
                if limit.remaining() <= 0 or any(isinstance(c, _DeadlinePassed) for c in (*causes(exc), *exc.args)):
                    raise DeadlineExceeded(bound, method=method, url=url, request=exc.request) from exc
                raise
            except _TooLarge as exc:
                raise AnswerTooLarge(limit.max_bytes, method=method, url=url) from exc
        if response.is_redirect:  # a redirect to another origin, left unfollowed by the session
            target = requests.compat.urljoin(response.url, response.headers.get("location", ""))
            if not _same_origin(response.url, target):
                response.close()
                raise RedirectRefused(
                    response.status_code, origin(target), method=method, url=url, request=response.request
                )
        return response


_ENCODING = re.compile(r"[a-z0-9-]{1,20}")


def _plain_answers_only(response: requests.Response, *args: Any, **kwargs: Any) -> None:
    """A response hook (run before the body is read): decompressing happens past the bounded socket."""
    encoding = response.headers.get("Content-Encoding", "").strip().lower()
    if encoding and encoding != "identity":
        response.close()
        request = response.request
        raise EncodingRefused(
            encoding if _ENCODING.fullmatch(encoding) else "other",
            method=request.method or "",
            url=request.url or "",
            request=request,
        )


def _same_origin(first: str, second: str) -> bool:
    return origin(first) == origin(second)


def bound_session(session: requests.Session, seconds: float) -> None:
    """Make every request of ``session`` end within ``seconds``; binding again changes the bound.

    Binding again also bounds the adapters mounted since (PyIceberg mounts SigV4's after it fetched a token).
    """
    for adapter in session.adapters.values():
        if isinstance(adapter, requests.adapters.HTTPAdapter) and not getattr(adapter, "_iceberg_ops_bound", False):
            _bound_adapter(adapter)
    current = session.__dict__.get("request")
    if isinstance(current, _BoundedRequest):
        current.seconds = seconds
        return
    bounded = _BoundedRequest(session.request, seconds)
    session.request = bounded  # type: ignore[method-assign]
    session.headers["Accept-Encoding"] = "identity"
    session.hooks["response"].append(_plain_answers_only)
    close = session.close

    def close_connections() -> None:
        close()
        for sock in list(bounded.sockets):  # those an answer in an error's traceback still holds
            sock.shut()

    session.close = close_connections  # type: ignore[method-assign]
    redirect_target = session.get_redirect_target

    def same_origin_only(response: requests.Response) -> str | None:
        target = redirect_target(response)
        if target is None or not _same_origin(response.url, requests.compat.urljoin(response.url, target)):
            return None
        return target

    session.get_redirect_target = same_origin_only  # type: ignore[method-assign]


def _bound_adapter(adapter: requests.adapters.HTTPAdapter) -> None:
    adapter._iceberg_ops_bound = True  # type: ignore[attr-defined]
    adapter.poolmanager.pool_classes_by_scheme = dict(_POOLS)
    proxy_manager_for = adapter.proxy_manager_for

    def bounded_proxy_manager(proxy: str, **kwargs: Any) -> Any:
        manager = proxy_manager_for(proxy, **kwargs)
        manager.pool_classes_by_scheme = dict(_POOLS)
        return manager

    adapter.proxy_manager_for = bounded_proxy_manager  # type: ignore[method-assign]


class BoundedRestCatalog(RestCatalog):
    """PyIceberg's REST catalog, every request of it bounded by ``timeout`` seconds, its configuration checked."""

    def __init__(self, name: str, *, timeout: float, **properties: Any) -> None:
        self._iceberg_ops_timeout = timeout
        super().__init__(name, **properties)

    def _fetch_config(self) -> None:
        given = dict(self.properties)
        super()._fetch_config()
        check_configuration(given, self.properties)

    def _create_legacy_oauth2_auth_manager(self, session: requests.Session) -> Any:
        # Called with the new session before it fetches a token through it: bound it from then on.
        bound_session(session, self._iceberg_ops_timeout)
        return super()._create_legacy_oauth2_auth_manager(session)

    def _create_session(self) -> requests.Session:
        session = super()._create_session()
        bound_session(session, self._iceberg_ops_timeout)  # and the adapters mounted after the token (SigV4)
        return session


def bound_catalog(catalog: Any, seconds: float) -> None:
    """Bound every later request of a REST catalog built elsewhere; other catalogs are left as they are."""
    session = getattr(catalog, "_session", None)
    if isinstance(catalog, RestCatalog) and isinstance(session, requests.Session):
        bound_session(session, seconds)


def bound_of(catalog: Any) -> float | None:
    """The bound on each request of a REST catalog's session, if it has one."""
    session = getattr(catalog, "_session", None)
    request = getattr(session, "__dict__", {}).get("request")
    return request.seconds if isinstance(request, _BoundedRequest) else None
