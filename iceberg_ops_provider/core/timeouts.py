"""Bounded waits on catalogs: nothing iceberg-ops asks of a catalog may hang forever.

PyIceberg's clients mostly wait without limit: the REST catalog's ``requests.Session`` has no
timeout, and its constructor already calls ``GET /v1/config``. A catalog that accepts connections
and never answers would block a command (or an Airflow task) until someone kills it. This module
gives every catalog call a bound, :data:`DEFAULT_CATALOG_TIMEOUT` seconds unless configured, and
turns running out of it into a :class:`~iceberg_ops_provider.errors.CatalogUnavailableError` that
names the endpoint:

* :func:`bound_catalog_requests` makes every HTTP request of a REST catalog default to the bound.
* :func:`call_with_timeout` bounds a call whose transport is out of reach (building a catalog of
  any kind, which for REST already talks to the server).
* :func:`catalog_errors` (and :func:`unavailable_error`) translate ``requests``' timeouts and
  connection errors into :class:`~iceberg_ops_provider.errors.CatalogUnavailableError`.
* :func:`catalog_endpoint` says where a catalog lives, without passwords, for messages.

What each catalog kind gets:

* REST (and ``s3tables``): every request of the catalog's session gets ``timeout=<bound>``
  unless the caller passes one. The bound applies to connecting and to each wait for data, as
  ``requests`` does, not to a whole response.
* SQL (``sqlite``, ``memory``): nothing to do. SQLite is a local file; a database locked by
  another writer fails after SQLite's own busy timeout (5 s, the default of Python's ``sqlite3``).
* Glue: boto3's own defaults already bound it (60 s to connect and 60 s per read, with retries).
* Hive: building the catalog does not connect, and later Thrift calls are not bounded here.

Table data is read and written by PyIceberg's FileIO, not by the catalog client, and is left
alone: PyArrow's S3 filesystem already gives up on a connection after about 1 s and on a stalled
request after about 3 s per attempt (the AWS SDK's defaults, three attempts), so raising those to
the catalog's bound would make a stalled object store fail later, not sooner. Set
``s3.connect-timeout`` / ``s3.request-timeout`` as catalog properties to change them: tables
loaded afterwards get them in their FileIO.
"""

from __future__ import annotations

import contextvars
import math
import re
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from typing import TYPE_CHECKING, Any, TypeVar
from urllib.parse import urlsplit, urlunsplit

from iceberg_ops_provider.errors import CatalogConfigError, CatalogUnavailableError

if TYPE_CHECKING:
    from pyiceberg.catalog import Catalog

__all__ = [
    "DEFAULT_CATALOG_TIMEOUT",
    "bound_catalog_requests",
    "call_with_timeout",
    "catalog_endpoint",
    "catalog_errors",
    "check_timeout",
    "unavailable_error",
]

DEFAULT_CATALOG_TIMEOUT = 60.0
"""Seconds a catalog may take to answer one request (or to be built) unless configured otherwise."""

_HINT = (
    "check that it is running and reachable, or raise the timeout "
    "(timeout= of CatalogFactory.build / --catalog-timeout / the connection's `timeout` extra)"
)

T = TypeVar("T")


def check_timeout(value: object, option: str = "timeout") -> float:
    """``value`` as a number of seconds, refusing anything that is not a finite number above zero.

    Raises:
        CatalogConfigError: ``value`` is not a number (booleans and strings included), is zero,
            negative, infinite or NaN; the message names ``option``.
    """
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise CatalogConfigError(
            f"Option {option!r} must be a number of seconds greater than 0 (for example 30), "
            f"got {value!r} ({type(value).__name__})."
        )
    seconds = float(value)
    if not math.isfinite(seconds) or seconds <= 0:
        raise CatalogConfigError(
            f"Option {option!r} must be a number of seconds greater than 0 (for example 30), got {value!r}."
        )
    return seconds


def _seconds_text(seconds: float) -> str:
    return f"{seconds:g} s"


def _without_password(url: str) -> str:
    """``url`` without the password of its user info (``user:secret@host`` becomes ``user@host``)."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return url
    if not parts.password:
        return url
    host = parts.hostname or ""
    if ":" in host:  # an IPv6 literal
        host = f"[{host}]"
    netloc = f"{parts.username}@{host}" if parts.username else host
    if parts.port is not None:
        netloc += f":{parts.port}"
    return urlunsplit(parts._replace(netloc=netloc))


def _the_catalog(endpoint: str) -> str:
    """``The catalog at <url>``, or ``The catalog <description>`` when the endpoint is not a location."""
    if not endpoint:
        return "The catalog"
    return f"The catalog at {endpoint}" if "://" in endpoint or endpoint.startswith("/") else f"The catalog {endpoint}"


def catalog_endpoint(catalog: Catalog) -> str:
    """Where ``catalog`` lives, for messages: never a password.

    REST: its URI. SQL: the database URL with the password removed. Anything else: its ``uri``
    property when it has one (Hive), else the class and the catalog's name (``GlueCatalog 'glue'``).
    """
    properties = getattr(catalog, "properties", None) or {}
    uri = getattr(catalog, "uri", None) or properties.get("uri")
    engine = getattr(catalog, "engine", None)
    if engine is not None and getattr(engine, "url", None) is not None:
        try:
            return str(engine.url.set(password=None).render_as_string(hide_password=False))
        except Exception:
            return _without_password(str(uri or engine.url))
    if isinstance(uri, str) and uri:
        return _without_password(uri)
    return f"{type(catalog).__name__} {getattr(catalog, 'name', '')!r}"


def _request_of(exc: BaseException) -> tuple[str, str]:
    """The method and URL (no query, no password) of the request ``exc`` was raised for, when known."""
    request = getattr(exc, "request", None)
    url = str(getattr(request, "url", "") or "")
    if url:
        with suppress(ValueError):
            url = urlunsplit(urlsplit(_without_password(url))._replace(query="", fragment=""))
    return str(getattr(request, "method", "") or ""), url


def _origin(url: str) -> str:
    try:
        parts = urlsplit(url)
    except ValueError:
        return ""
    return _without_password(urlunsplit((parts.scheme, parts.netloc, "", "", ""))) if parts.netloc else ""


def _reason(exc: BaseException) -> str:
    """A short reason for a connection error: ``[Errno 111] Connection refused`` rather than urllib3's page."""
    text = str(exc)
    found = re.search(r"\[Errno -?\d+\] [^'\")]+", text)
    if found:
        return found.group(0).strip()
    for marker in ("Failed to resolve", "Name or service not known", "Connection refused", "Connection reset"):
        if marker in text:
            return marker
    return type(exc).__name__


def unavailable_error(
    exc: BaseException, endpoint: str = "", seconds: float | None = None
) -> CatalogUnavailableError | None:
    """The :class:`CatalogUnavailableError` that ``exc`` amounts to, or ``None`` when it is something else.

    ``requests``' ``Timeout`` becomes "did not answer within ``seconds``"; its ``ConnectionError``
    becomes "could not be reached". Both name the endpoint (``endpoint``, else the origin of the
    request's URL) and the request. The caller raises the result ``from exc``.
    """
    try:
        from requests.exceptions import ConnectionError as RequestsConnectionError
        from requests.exceptions import Timeout
    except ImportError:  # pragma: no cover - requests is a dependency of PyIceberg
        return None
    if not isinstance(exc, Timeout | RequestsConnectionError):
        return None
    method, url = _request_of(exc)
    endpoint = _without_password(endpoint) or _origin(url)
    request = f"{method} {url}".strip()
    if isinstance(exc, Timeout):
        within = f"within {_seconds_text(seconds)}" if seconds is not None else "in time"
        detail = f" ({request})" if request else ""
        message = f"{_the_catalog(endpoint)} did not answer {within}{detail}; {_HINT}."
    else:
        detail = f"{request}: {_reason(exc)}" if request else _reason(exc)
        message = f"{_the_catalog(endpoint)} could not be reached ({detail}); check that it is running and reachable."
    return CatalogUnavailableError(message, endpoint=endpoint, timeout=seconds if isinstance(exc, Timeout) else None)


@contextmanager
def catalog_errors(endpoint: str, seconds: float | None) -> Iterator[None]:
    """Translate ``requests``' timeouts and connection errors raised inside into :class:`CatalogUnavailableError`.

    Args:
        endpoint: Where the catalog lives (see :func:`catalog_endpoint`); empty to use the request's origin.
        seconds: The bound in force, for the message.

    Raises:
        CatalogUnavailableError: With the original exception as ``__cause__``. Anything else passes
            through unchanged.
    """
    try:
        yield
    except Exception as exc:
        error = unavailable_error(exc, endpoint, seconds)
        if error is None:
            raise
        raise error from exc


class _BoundedRequest:
    """``Session.request`` with a default timeout; the bound can be changed in place."""

    def __init__(self, request: Callable[..., Any], seconds: float) -> None:
        self.request = request
        self.seconds = seconds

    def __call__(self, method: str, url: str, *args: Any, **kwargs: Any) -> Any:
        # timeout is Session.request's seventh parameter after (method, url); PyIceberg passes keywords.
        if len(args) < 7 and kwargs.get("timeout") is None:
            kwargs["timeout"] = self.seconds
        return self.request(method, url, *args, **kwargs)


def bound_catalog_requests(catalog: Catalog, seconds: float) -> None:
    """Give every HTTP request of a REST catalog a default timeout of ``seconds``.

    Requests that pass their own ``timeout`` keep it. Calling this again changes the bound rather
    than stacking another one. Catalogs of other kinds are left as they are (see the module's
    documentation for what bounds them).

    Raises:
        CatalogConfigError: ``seconds`` is not a number above zero.
    """
    seconds = check_timeout(seconds)
    try:
        from pyiceberg.catalog.rest import RestCatalog
    except ImportError:  # pragma: no cover - the REST catalog ships with PyIceberg
        return
    if not isinstance(catalog, RestCatalog):
        return
    session = getattr(catalog, "_session", None)
    if session is None:
        return
    current = session.__dict__.get("request")
    if isinstance(current, _BoundedRequest):
        current.seconds = seconds
    else:
        session.request = _BoundedRequest(session.request, seconds)


def call_with_timeout(fn: Callable[[], T], seconds: float, *, what: str, endpoint: str) -> T:
    """Run ``fn()`` and return its result, giving up after ``seconds``.

    ``fn`` runs in a daemon thread, so a call that never returns cannot keep the process alive at
    exit; it is abandoned, not stopped (Python cannot stop a thread), and keeps whatever it holds.

    Args:
        fn: The call, without arguments (use a ``lambda`` or ``functools.partial``).
        seconds: The bound, above zero.
        what: What the call does, for the message (``"GET /v1/config while opening the catalog"``).
        endpoint: Where it goes, for the message.

    Returns:
        What ``fn`` returned.

    Raises:
        CatalogUnavailableError: ``fn`` did not finish within ``seconds``.
        Exception: Whatever ``fn`` raised, unchanged.
    """
    seconds = check_timeout(seconds)
    endpoint = _without_password(endpoint)
    outcome: dict[str, Any] = {}
    context = contextvars.copy_context()

    def run() -> None:
        try:
            outcome["result"] = context.run(fn)
        except BaseException as exc:  # handed to the caller, whatever it is
            outcome["error"] = exc

    worker = threading.Thread(target=run, name=f"iceberg-ops: {what}"[:64], daemon=True)
    worker.start()
    worker.join(seconds)
    if worker.is_alive():
        raise CatalogUnavailableError(
            f"{_the_catalog(endpoint)} did not answer within {_seconds_text(seconds)} ({what}); {_HINT}.",
            endpoint=endpoint,
            timeout=seconds,
        )
    if "error" in outcome:
        raise outcome.pop("error")
    return outcome["result"]
