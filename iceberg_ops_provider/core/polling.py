"""How a check that polls a catalog treats errors: which are worth waiting through, and what to say."""

from __future__ import annotations

from typing import TYPE_CHECKING

from iceberg_ops_provider.catalogs import CatalogSpec, catalog_errors, spec_of, translate
from iceberg_ops_provider.catalogs.requests_of import one_line
from iceberg_ops_provider.errors import IcebergOpsError

if TYPE_CHECKING:
    from contextlib import AbstractContextManager

    from pyiceberg.catalog import Catalog

__all__ = ["check_errors", "describe_error", "is_transient", "timeout_message"]

_MAX_ERROR_TEXT = 500
_ANY_CATALOG = CatalogSpec(kind="pyiceberg")


def timeout_message(waiting_for: str, waited: float, last_seen: str | None, last_error: str | None = None) -> str:
    """The message of a wait that ran out: what was awaited, for how long, what was last seen."""
    seen = last_seen or "nothing (no check succeeded)"
    error = f"; last error: {last_error}" if last_error else ""
    return f"Timed out after {waited:g} s waiting for {waiting_for}; last seen: {seen}{error}."


def check_errors(catalog: Catalog) -> AbstractContextManager[None]:
    """Translate what a readiness check on ``catalog`` raises inside into iceberg-ops errors.

    As :func:`~iceberg_ops_provider.catalogs.failures` does: an unreachable, refusing or missing
    catalog database raises what opening the catalog would; a locked or busy one, or a broken
    connection, a transient :class:`~iceberg_ops_provider.errors.CatalogUnavailableError`.
    """
    return catalog_errors(spec_of(catalog))


def is_transient(exc: BaseException) -> bool:
    """Whether checking again later may succeed, so a wait should go on rather than end.

    Transient: iceberg-ops errors saying so, connection errors and timeouts, server-side catalog
    errors and rate limits, database errors of a broken connection, storage errors (a manifest an
    expiry removed). Anything else (no such table, a bad filter, bad credentials) is permanent.
    """
    from pyiceberg.exceptions import ServerError, ServiceUnavailableError, TooManyRequestsError

    if isinstance(exc, IcebergOpsError):
        return exc.transient
    if isinstance(exc, ServerError | ServiceUnavailableError | TooManyRequestsError | ConnectionError | TimeoutError):
        return True
    if (translated := translate(exc, _ANY_CATALOG)) is not None:
        return translated.transient
    return isinstance(exc, OSError) and not isinstance(exc, PermissionError)


def describe_error(exc: BaseException) -> str:
    """``Type: message`` on one line, shortened, for logs and event messages."""
    return one_line(f"{type(exc).__name__}: {exc}", _MAX_ERROR_TEXT)
