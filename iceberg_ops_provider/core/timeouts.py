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
* :func:`check_timeout` checks a bound given as an option.

What the clients raise when the bound runs out (or the catalog refuses, or cannot be reached) is
translated by :mod:`iceberg_ops_provider.core.error_translation` (``catalog_errors``,
``catalog_error``, ``unavailable_error``) and :mod:`iceberg_ops_provider.core.auth_errors`
(``auth_error``); :func:`~iceberg_ops_provider.core.catalog_messages.catalog_endpoint` says where a
catalog lives. Those names were once imported from here, and still are, with a
:class:`DeprecationWarning` naming their module.

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
import threading
import warnings
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, TypeVar

from iceberg_ops_provider.core.catalog_messages import TIMEOUT_HINT, seconds_text, the_catalog, without_password
from iceberg_ops_provider.errors import CatalogConfigError, CatalogUnavailableError

if TYPE_CHECKING:
    from pyiceberg.catalog import Catalog

__all__ = [
    "DEFAULT_CATALOG_TIMEOUT",
    "bound_catalog_requests",
    "call_with_timeout",
    "check_timeout",
    "requests_bounded",
]

DEFAULT_CATALOG_TIMEOUT = 60.0
"""Seconds a catalog may take to answer one request (or to be built) unless configured otherwise."""

T = TypeVar("T")

_MAX_TIMEOUT = 7 * 24 * 3600


def check_timeout(value: object, option: str = "timeout") -> float:
    """``value`` as a number of seconds, refusing anything that is not a finite number above zero.

    Raises:
        CatalogConfigError: ``value`` is not a number (booleans and strings included), is zero,
            negative, NaN or more than a week; the message names ``option``.
    """
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise CatalogConfigError(
            f"Option {option!r} must be a number of seconds greater than 0 (for example 30), "
            f"got {value!r} ({type(value).__name__})."
        )
    if not 0 < value <= _MAX_TIMEOUT:  # also refuses NaN, and integers too large for a float
        raise CatalogConfigError(
            f"Option {option!r} must be a number of seconds greater than 0 and at most a week "
            f"(for example 30), got {value!r}."
        )
    return float(value)


class _BoundedRequest:
    """``Session.request`` with a default timeout; the bound can be changed in place."""

    def __init__(self, request: Callable[..., Any], seconds: float) -> None:
        self.request = request
        self.seconds = seconds

    def __call__(self, method: str, url: str, *args: Any, **kwargs: Any) -> Any:
        return self.request(method, url, *args, **_with_timeout(args, kwargs, self.seconds))


def _with_timeout(args: tuple[Any, ...], kwargs: dict[str, Any], seconds: float | None) -> dict[str, Any]:
    """``kwargs`` of a ``Session.request`` call with ``timeout=seconds`` unless the call gives its own."""
    # timeout is Session.request's seventh parameter after (method, url); PyIceberg passes keywords.
    if seconds is not None and len(args) < 7 and kwargs.get("timeout") is None:
        kwargs["timeout"] = seconds
    return kwargs


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


_THIS_THREAD = threading.local()
_WRAP_LOCK = threading.Lock()


def _bounded_in_this_thread(request: Callable[..., Any]) -> Callable[..., Any]:
    def request_with_bound(self: Any, method: str, url: str, *args: Any, **kwargs: Any) -> Any:
        seconds = getattr(_THIS_THREAD, "seconds", None)
        return request(self, method, url, *args, **_with_timeout(args, kwargs, seconds))

    request_with_bound.iceberg_ops_bound = True  # type: ignore[attr-defined]
    return request_with_bound


def requests_bounded(fn: Callable[[], T], seconds: float) -> Callable[[], T]:
    """``fn`` made to give every HTTP request it sends through ``requests`` a default timeout of ``seconds``.

    A REST catalog asks its server for its configuration (and a token) while it is built, on
    sessions it makes itself, before :func:`bound_catalog_requests` can reach them: without a bound
    a hung server holds the building thread forever. The bound applies only in the thread running
    ``fn`` and only to requests without a timeout of their own; ``requests.Session.request`` is
    wrapped once per process and passes everything else through unchanged.
    """
    import requests

    with _WRAP_LOCK:
        if not getattr(requests.Session.request, "iceberg_ops_bound", False):
            requests.Session.request = _bounded_in_this_thread(requests.Session.request)  # type: ignore[method-assign]

    def bounded() -> T:
        previous = getattr(_THIS_THREAD, "seconds", None)
        _THIS_THREAD.seconds = seconds
        try:
            return fn()
        finally:
            _THIS_THREAD.seconds = previous

    return bounded


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
    endpoint = without_password(endpoint)
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
            f"{the_catalog(endpoint)} did not answer within {seconds_text(seconds)} ({what}); {TIMEOUT_HINT}.",
            endpoint=endpoint,
            timeout=seconds,
        )
    if "error" in outcome:
        raise outcome.pop("error")
    return outcome["result"]


# The names of the error translation that this module once held, and the module that holds each now.
_MOVED = {
    "catalog_endpoint": "iceberg_ops_provider.core.catalog_messages",
    "catalog_error": "iceberg_ops_provider.core.error_translation",
    "catalog_errors": "iceberg_ops_provider.core.error_translation",
    "unavailable_error": "iceberg_ops_provider.core.error_translation",
    "auth_error": "iceberg_ops_provider.core.auth_errors",
}


def __getattr__(name: str) -> Any:
    """A name that moved to the error translation's modules, with a :class:`DeprecationWarning` naming its new path.

    Raises:
        AttributeError: ``name`` is neither in this module nor one of the names that moved out of it.
    """
    new = _MOVED.get(name)
    if new is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    warnings.warn(
        f"{__name__}.{name} has moved: import it from {new} instead",
        DeprecationWarning,
        stacklevel=2,
    )
    from iceberg_ops_provider.core import auth_errors, catalog_messages, error_translation

    modules = {module.__name__: module for module in (auth_errors, catalog_messages, error_translation)}
    return getattr(modules[new], name)
