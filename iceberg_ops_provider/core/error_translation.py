"""What the clients under PyIceberg raise, turned into iceberg-ops errors that say what to check.

:func:`catalog_errors` (and :func:`catalog_error`, which returns the translation instead of raising
it) translate a catalog client's exception into an error naming the endpoint:

- :class:`~iceberg_ops_provider.errors.CatalogUnavailableError` (transient, see
  :func:`unavailable_error`, which this module owns): ``requests``' timeouts and connection errors
  (refused, unknown host), Thrift transport errors of a Hive metastore, botocore's connection errors
  (Glue), a 503 answer, an object store that cannot be reached;
- :class:`~iceberg_ops_provider.errors.CatalogAuthError` (permanent, see
  :func:`~iceberg_ops_provider.core.auth_errors.auth_error`): 401/403 answers (a SigV4 signature
  mismatch, a bad or expired token), no AWS credentials anywhere, AWS errors refusing the
  credentials (Glue, the object store); the message names the options and environment variables to
  check;
- :class:`~iceberg_ops_provider.errors.CatalogConfigError` (permanent): a SQL catalog database that
  is not an SQLite database or cannot be opened, a REST ``uri`` that is no Iceberg catalog, a
  warehouse that does not exist (:mod:`iceberg_ops_provider.core.rest_errors`).

Errors of iceberg-ops itself are never translated. Where a catalog lives, for these messages, is
:func:`~iceberg_ops_provider.core.catalog_messages.catalog_endpoint`; the bounds that raise
timeouts are in :mod:`iceberg_ops_provider.core.timeouts`.
"""

from __future__ import annotations

import re
from contextlib import contextmanager
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

from iceberg_ops_provider.core.auth_errors import auth_error, storage_error
from iceberg_ops_provider.core.catalog_messages import (
    TIMEOUT_HINT,
    http_error,
    one_line,
    origin,
    request_of,
    seconds_text,
    the_catalog,
    without_password,
)
from iceberg_ops_provider.errors import CatalogConfigError, CatalogUnavailableError, IcebergOpsError

if TYPE_CHECKING:
    from collections.abc import Iterator

__all__ = ["catalog_error", "catalog_errors", "unavailable_error"]


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


def _host_port(endpoint: str) -> str:
    """``host:port`` of a URL (``thrift://metastore:9083`` gives ``metastore:9083``); empty if it has none."""
    if "://" not in endpoint:
        return ""
    try:
        return urlsplit(endpoint.split(",")[0]).netloc.rpartition("@")[2]
    except ValueError:
        return ""


def _thrift_unavailable(exc: BaseException, endpoint: str) -> CatalogUnavailableError | None:
    """A Hive metastore that cannot be reached: Thrift's transport errors (refused, unknown host, closed)."""
    try:
        from thrift.transport.TTransport import TTransportException
    except ImportError:  # the hive extra is not installed, so no Hive catalog raised this
        return None
    if not isinstance(exc, TTransportException):
        return None
    # "Could not connect to any of [('127.0.0.1', 9083)]" reads better as "... [127.0.0.1:9083]".
    reason = re.sub(r"\('([^']*)', (\d+)\)", r"\1:\2", one_line(getattr(exc, "message", None) or exc))
    cause = exc.__cause__ or exc.__context__
    if cause is not None and not isinstance(cause, TTransportException):
        reason = f"{reason}: {_reason(cause) if _reason(cause) != type(cause).__name__ else one_line(cause)}"
    endpoint = without_password(endpoint)
    where = _host_port(endpoint)
    what = "could not be reached" if exc.type == TTransportException.NOT_OPEN else "broke off the connection"
    hint = (
        f"check that the Hive metastore at {where} is running and reachable, and the catalog's uri"
        if where
        else "check that the Hive metastore is running and reachable, and the catalog's uri (thrift://HOST:PORT)"
    )
    return CatalogUnavailableError(f"{the_catalog(endpoint)} {what} (Thrift: {reason}); {hint}.", endpoint=endpoint)


def _botocore_unavailable(exc: BaseException, endpoint: str, seconds: float | None) -> CatalogUnavailableError | None:
    """An AWS endpoint (Glue) that cannot be reached or did not answer, after botocore's own retries."""
    try:
        from botocore.exceptions import ConnectionClosedError, ConnectTimeoutError, ReadTimeoutError
        from botocore.exceptions import ConnectionError as BotocoreConnectionError
    except ImportError:  # no botocore, so no AWS client raised this
        return None
    if not isinstance(exc, BotocoreConnectionError | ReadTimeoutError | ConnectionClosedError):
        return None
    url = str(getattr(exc, "kwargs", {}).get("endpoint_url", "") or "")
    endpoint = without_password(endpoint) or origin(url)
    timed_out = isinstance(exc, ConnectTimeoutError | ReadTimeoutError)
    what = "did not answer in time" if timed_out else "could not be reached"
    return CatalogUnavailableError(
        f"{the_catalog(endpoint)} {what} ({one_line(exc)}); check that it is running and reachable "
        "(for Glue: glue.endpoint and glue.region).",
        endpoint=endpoint,
        timeout=seconds if timed_out else None,
    )


def _service_unavailable(exc: BaseException, endpoint: str) -> CatalogUnavailableError | None:
    """A REST catalog that answered 503 Service Unavailable."""
    try:
        from pyiceberg.exceptions import ServiceUnavailableError
    except ImportError:  # pragma: no cover - PyIceberg is a dependency
        return None
    if not isinstance(exc, ServiceUnavailableError):
        return None
    http = http_error(exc)
    method, url = request_of(http) if http is not None else ("", "")
    endpoint = without_password(endpoint) or origin(url)
    request = f" on {method} {url}".rstrip() if url else ""
    return CatalogUnavailableError(
        f"{the_catalog(endpoint)} is unavailable (503{request}: {one_line(exc)}); try again later.",
        endpoint=endpoint,
    )


def unavailable_error(
    exc: BaseException, endpoint: str = "", seconds: float | None = None
) -> CatalogUnavailableError | None:
    """The :class:`CatalogUnavailableError` that ``exc`` amounts to, or ``None`` when it is something else.

    ``requests``' ``Timeout`` becomes "did not answer within ``seconds``"; its ``ConnectionError``
    (refused, unknown host, reset) becomes "could not be reached". A Hive metastore's Thrift
    transport errors, botocore's connection errors and timeouts (Glue), a REST catalog's 503 and an
    object store that PyArrow cannot connect to become the same. Each names the endpoint
    (``endpoint``, else what the error says: the origin of the request's URL, ``host:port``) and,
    when known, the request. The caller raises the result ``from exc``.
    """
    try:
        from requests.exceptions import ConnectionError as RequestsConnectionError
        from requests.exceptions import Timeout
    except ImportError:  # pragma: no cover - requests is a dependency of PyIceberg
        return None
    if not isinstance(exc, Timeout | RequestsConnectionError):
        found = _thrift_unavailable(exc, endpoint) or _botocore_unavailable(exc, endpoint, seconds)
        found = found or _service_unavailable(exc, endpoint)
        storage = storage_error(exc) if found is None else None
        return found or (storage if isinstance(storage, CatalogUnavailableError) else None)
    method, url = request_of(exc)
    endpoint = without_password(endpoint) or origin(url)
    request = f"{method} {url}".strip()
    if isinstance(exc, Timeout):
        within = f"within {seconds_text(seconds)}" if seconds is not None else "in time"
        detail = f" ({request})" if request else ""
        message = f"{the_catalog(endpoint)} did not answer {within}{detail}; {TIMEOUT_HINT}."
    else:
        detail = f"{request}: {_reason(exc)}" if request else _reason(exc)
        message = f"{the_catalog(endpoint)} could not be reached ({detail}); check that it is running and reachable."
    return CatalogUnavailableError(message, endpoint=endpoint, timeout=seconds if isinstance(exc, Timeout) else None)


def _sqlite_error(exc: BaseException, endpoint: str) -> CatalogConfigError | CatalogUnavailableError | None:
    """A SQL catalog whose SQLite database file is not a database, cannot be opened, or is locked."""
    try:
        from sqlalchemy.exc import DatabaseError
    except ImportError:  # no SQLAlchemy, so no SQL catalog raised this
        return None
    import sqlite3

    if not isinstance(exc, DatabaseError) or not isinstance(exc.orig, sqlite3.DatabaseError):
        return None
    reason = one_line(exc.orig)
    path = endpoint.removeprefix("sqlite:///") if endpoint.startswith("sqlite:///") else endpoint
    where = f"The catalog database {path}" if path else "The catalog's SQLite database"
    setting = (
        "db_path (--db-path, `db_path:` under `catalog:` in iceberg-ops.yaml, the db_path extra of an Airflow "
        "connection)"
    )
    if "not a database" in reason:
        return CatalogConfigError(
            f"{where} is not an SQLite database ({reason}); point {setting} at the catalog's SQLite database file, "
            "or at a path that does not exist yet to create a new catalog there."
        )
    if "database is locked" in reason or "database is busy" in reason:
        # Transient: another process holds a write transaction open longer than SQLite's busy wait.
        return CatalogUnavailableError(
            f"{where} is locked by another process ({reason}), which kept it longer than SQLite waits (5 s): "
            "another command or task writing to the catalog, or a program holding a transaction open on the "
            "file. Run it again once that process finished.",
            endpoint=endpoint,
        )
    if "unable to open database file" in reason:
        return CatalogConfigError(
            f"{where} could not be opened ({reason}); check that its folder exists and is writable, "
            f"or change {setting}."
        )
    return None


def catalog_error(exc: BaseException, endpoint: str = "", seconds: float | None = None) -> IcebergOpsError | None:
    """The iceberg-ops error that ``exc``, raised by a catalog's client, amounts to; ``None`` when it is something else.

    :func:`unavailable_error` first (transient), then
    :func:`~iceberg_ops_provider.core.auth_errors.auth_error` (permanent), then a SQLite catalog
    database that is not one (:class:`CatalogConfigError`). Errors of iceberg-ops itself are never
    translated.
    """
    if isinstance(exc, IcebergOpsError):
        return None
    from iceberg_ops_provider.core.rest_errors import missing_warehouse_error, not_a_catalog_error

    return (
        unavailable_error(exc, endpoint, seconds)
        or auth_error(exc, endpoint)
        or _sqlite_error(exc, endpoint)
        or not_a_catalog_error(exc, endpoint)
        or missing_warehouse_error(exc)
    )


@contextmanager
def catalog_errors(endpoint: str, seconds: float | None) -> Iterator[None]:
    """Translate the catalog clients' errors raised inside into iceberg-ops errors (see :func:`catalog_error`).

    Args:
        endpoint: Where the catalog lives (see
            :func:`~iceberg_ops_provider.core.catalog_messages.catalog_endpoint`); empty to use the
            request's origin.
        seconds: The bound in force, for the message.

    Raises:
        CatalogUnavailableError: The catalog (or its storage) could not be reached or did not
            answer; with the original exception as ``__cause__``.
        CatalogAuthError: It refused the credentials, or none were found.
        CatalogConfigError: Its SQLite database is not one.
        Exception: Anything else, unchanged.
    """
    try:
        yield
    except Exception as exc:
        error = catalog_error(exc, endpoint, seconds)
        if error is None:
            raise
        raise error from exc
