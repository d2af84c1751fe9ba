"""How a check that polls a catalog treats errors: which are worth waiting through, and what to say.

Every readiness check (a namespace's migration version, a partition's committed data) runs inside
:func:`check_errors`, which turns what the catalog's clients raise into iceberg-ops errors;
:func:`is_transient` says whether a wait should go on after an error, :func:`describe_error` and
:func:`timeout_message` word what the sensors and triggers log and raise.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

from iceberg_ops_provider.core.catalog_messages import catalog_endpoint
from iceberg_ops_provider.core.error_translation import catalog_errors
from iceberg_ops_provider.core.sql_catalog import sql_database_error
from iceberg_ops_provider.errors import CatalogUnavailableError, IcebergOpsError

if TYPE_CHECKING:
    from pyiceberg.catalog import Catalog

__all__ = ["check_errors", "describe_error", "is_transient", "request_bound", "timeout_message"]

_MAX_ERROR_TEXT = 500


def timeout_message(waiting_for: str, waited: float, last_seen: str | None, last_error: str | None = None) -> str:
    """The message of a wait that ran out: what was awaited, for how long, what was last seen."""
    seen = last_seen or "nothing (no check succeeded)"
    text = f"Timed out after {waited:g} s waiting for {waiting_for}; last seen: {seen}"
    if last_error:
        text += f"; last error: {last_error}"
    return text + "."


# What database drivers say when a catalog database is busy or its connection broke: worth another try.
_SQL_TRANSIENT = (
    "database is locked",
    "database is busy",
    "database table is locked",
    "server closed the connection",
    "terminating connection",
    "connection reset",
    "connection timed out",
    "could not receive data",
    "could not send data",
    "ssl connection has been closed",
    "ssl syscall error",
    "the connection is closed",
    "connection is lost",
    "lost connection",
    "canceling statement due to conflict with recovery",
    "too many connections",
    "remaining connection slots are reserved",
)


def request_bound(catalog: Catalog) -> float | None:
    """The per-request timeout of a REST catalog's HTTP session (see ``bound_catalog_requests``), if set."""
    session = getattr(catalog, "_session", None)
    seconds = getattr(getattr(session, "request", None), "seconds", None)
    return float(seconds) if isinstance(seconds, int | float) and not isinstance(seconds, bool) else None


def _sql_transient_error(exc: BaseException, endpoint: str) -> CatalogUnavailableError | None:
    """A database error worth another try (busy, locked, a connection that broke), as ``CatalogUnavailableError``."""
    from sqlalchemy.exc import DBAPIError
    from sqlalchemy.exc import TimeoutError as PoolTimeoutError

    if isinstance(exc, PoolTimeoutError):
        reason = describe_error(exc)
    elif isinstance(exc, DBAPIError):
        reason = " ".join(str(exc.orig if exc.orig is not None else exc).split())
        if not exc.connection_invalidated and not any(marker in reason.lower() for marker in _SQL_TRANSIENT):
            return None
    else:
        return None
    return CatalogUnavailableError(
        f"The catalog database at {endpoint} did not serve the check ({reason[:300]}); it is busy, locked by "
        "another writer, or its connection broke. The wait goes on.",
        endpoint=endpoint,
    )


@contextmanager
def check_errors(catalog: Catalog) -> Iterator[None]:
    """Translate what a readiness check on ``catalog`` raises inside into iceberg-ops errors.

    The catalog clients' errors become what :func:`~iceberg_ops_provider.core.error_translation.catalog_errors`
    makes of them (naming the endpoint and the REST request timeout); a catalog database that cannot
    be reached, refuses the login or does not exist becomes what opening the catalog would have
    raised; a database that is locked or busy, or whose connection broke, becomes a transient
    :class:`~iceberg_ops_provider.errors.CatalogUnavailableError`. Anything else passes unchanged.
    """
    endpoint = catalog_endpoint(catalog)
    seconds = request_bound(catalog)
    with catalog_errors(endpoint, seconds):
        try:
            yield
        except Exception as exc:
            error = sql_database_error(exc, endpoint, seconds)  # seconds None: no bound known
            error = error or _sql_transient_error(exc, endpoint)
            if error is None:
                raise
            raise error from exc


def is_transient(exc: BaseException) -> bool:
    """Whether checking again later may succeed, so a wait should go on rather than end.

    Transient: iceberg-ops errors saying so (a catalog that did not answer, a busy or locked catalog
    database), connection errors and timeouts, server-side catalog errors and rate limits (429),
    database errors of a broken connection, and storage errors (a manifest removed by an expiry
    between two reads). Anything else (no such table, a bad partition key or filter, bad credentials)
    is permanent.
    """
    from pyiceberg.exceptions import ServerError, ServiceUnavailableError, TooManyRequestsError

    if isinstance(exc, IcebergOpsError):
        return exc.transient
    transient = (ServerError, ServiceUnavailableError, TooManyRequestsError, ConnectionError, TimeoutError)
    if isinstance(exc, transient):
        return True
    if _sql_transient_error(exc, "") is not None:
        return True
    return isinstance(exc, OSError) and not isinstance(exc, PermissionError)


def describe_error(exc: BaseException) -> str:
    """``Type: message`` on one line, shortened, for logs and event messages."""
    text = " ".join(f"{type(exc).__name__}: {exc}".split())
    return text if len(text) <= _MAX_ERROR_TEXT else text[: _MAX_ERROR_TEXT - 3] + "..."
