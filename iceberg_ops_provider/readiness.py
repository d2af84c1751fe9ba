"""Readiness checks: has a namespace reached a migration version; how waits treat what a check raises.

What the Airflow sensors and triggers ask, answered from the catalog's metadata alone, without a lock
and without writing anything:

* :func:`namespace_version` reads a namespace's migration history (never creating the history table;
  a namespace never migrated is at base, and the result notes a namespace or a history that does not
  exist) and :func:`version_reached` compares versions numerically, as the runner orders them.
  :func:`resolve_version` turns ``head`` into the highest version of a migrations folder.
* Whether data for a partition has been committed is :mod:`iceberg_ops_provider.partition_probe`.
* Every check runs inside :func:`check_errors`, which turns what the catalog's clients raise into
  iceberg-ops errors, and :func:`is_transient` says whether a wait should go on after an error.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pyiceberg.exceptions import NoSuchNamespaceError

from iceberg_ops_provider.core.catalog import sql_database_error
from iceberg_ops_provider.core.timeouts import catalog_endpoint, catalog_errors
from iceberg_ops_provider.discovery import discover
from iceberg_ops_provider.errors import CatalogUnavailableError, IcebergOpsError
from iceberg_ops_provider.history.store import HistoryStore, default_meta_namespace
from iceberg_ops_provider.namespaces import check_namespace
from iceberg_ops_provider.planning import classify

if TYPE_CHECKING:
    from pyiceberg.catalog import Catalog

__all__ = [
    "NOTE_WARNING",
    "NamespaceVersion",
    "check_errors",
    "check_wanted_version",
    "describe_error",
    "describe_version_wait",
    "is_transient",
    "namespace_version",
    "newest_version",
    "request_bound",
    "resolve_version",
    "timeout_message",
    "version_reached",
]

_DIGITS = re.compile(r"^[0-9]+$")
_MAX_ERROR_TEXT = 500


# -- migrations ---------------------------------------------------------------------------------


def check_wanted_version(version: object) -> str:
    """``version`` when it is ``"head"`` or a version number written in digits (``"0003"``, ``"3"``).

    Raises:
        ValueError: Anything else, with what to pass instead.
    """
    if isinstance(version, int) and not isinstance(version, bool) and version >= 0:
        return str(version)
    if not isinstance(version, str) or not (version == "head" or _DIGITS.match(version)):
        raise ValueError(
            f"version must be 'head' or a migration version such as '0003', got {version!r}; "
            "a namespace 'reaches' a version once that version or a higher one is applied."
        )
    return version


def resolve_version(version: str, migrations_dir: str | Path | None, namespace: str) -> str | None:
    """The version to wait for: ``version`` itself, or for ``head`` the highest version of the files.

    Args:
        version: ``"head"`` or a version number.
        migrations_dir: The migrations folder (``migrations_dir/<namespace>/`` when it exists), as the
            runner reads it; needed for ``head`` only.
        namespace: The namespace.

    Returns:
        The version (never ``None`` for ``head``; ``None`` is kept for callers that pass a resolved base).

    Raises:
        ValueError: ``head`` without a folder, ``head`` of a folder that holds no migration (a wrong
            ``migrations_dir`` would otherwise let the wait pass at once), or a malformed version.
        MigrationDiscoveryError: The folder is missing or holds a bad migration file.
    """
    version = check_wanted_version(version)
    if version != "head":
        return version
    if migrations_dir is None or str(migrations_dir) == "":
        raise ValueError("version='head' needs migrations_dir (the folder whose newest migration is waited for).")
    newest = newest_version(migrations_dir, namespace)
    if newest is None:
        raise ValueError(
            f"version='head' of migrations_dir {str(migrations_dir)!r} for namespace {namespace!r}: the folder holds "
            "no migration file (NNNN_name.py), so there is no head to wait for; point migrations_dir at the folder "
            "the migrate task reads (it holds the migration files, or a sub-folder per namespace), or pass a version."
        )
    return newest


def newest_version(migrations_dir: str | Path, namespace: str) -> str | None:
    """The highest version among the migration files of ``namespace`` in ``migrations_dir``; ``None`` when none.

    Raises:
        MigrationDiscoveryError: The folder is missing or holds a bad migration file.
    """
    scripts = discover(migrations_dir, namespace)
    return scripts[-1].version if scripts else None


@dataclass(frozen=True)
class NamespaceVersion:
    """Where a namespace's migrations stand, read from its history.

    Attributes:
        namespace: The namespace.
        current: The highest applied version, or ``None`` at base (never migrated, or all rolled back).
        failed: Versions whose latest attempt failed (a later run retries them).
        note: At base, why there is nothing to read, when that may be a mistake: the namespace does not
            exist, or no history of it was found where it was looked for.
    """

    namespace: str
    current: str | None
    failed: tuple[str, ...] = ()
    note: str | None = None

    def describe(self) -> str:
        """One line for logs and messages: ``namespace 'sales' at 0002 (0003 failed in its last attempt)``."""
        text = f"namespace {self.namespace!r} at {self.current or 'base'}"
        if self.failed:
            text += f" ({', '.join(self.failed)} failed in its last attempt)"
        if self.note:
            text += f" ({self.note})"
        return text

    def to_json(self) -> dict[str, Any]:
        """JSON-able form (what the sensor pushes to XCom)."""
        return {"namespace": self.namespace, "version": self.current, "failed": list(self.failed)}


def namespace_version(catalog: Catalog, namespace: str, meta_namespace: str | None = None) -> NamespaceVersion:
    """The current migration version of ``namespace``: no lock taken, nothing created.

    Args:
        catalog: The catalog.
        namespace: The namespace whose migrations are asked about.
        meta_namespace: Where the history lives (default: as the runner chooses for this catalog).

    Raises:
        CatalogConfigError: A malformed namespace name.
        CatalogUnavailableError: The catalog did not answer (transient).
    """
    meta_namespace = meta_namespace or default_meta_namespace(catalog)
    check_namespace("namespace", namespace)
    check_namespace("meta_namespace", meta_namespace)
    note = None
    with check_errors(catalog):
        try:
            rows = HistoryStore(catalog, meta_namespace).rows(namespace)
        except NoSuchNamespaceError:  # no meta-namespace yet: nothing was ever migrated here
            rows = []
        if not rows:
            exists = catalog.namespace_exists(namespace)
            note = f"no migration history of it in {meta_namespace!r}" if exists else "the namespace does not exist"
    state = classify([], rows)
    return NamespaceVersion(namespace, state.current, tuple(state.failed), note if state.current is None else None)


NOTE_WARNING = "Namespace %r is at base: %s; are namespace and meta_namespace right?"
"""The warning a migration wait logs at each check while :attr:`NamespaceVersion.note` says why it is at base."""


def version_reached(current: str | None, wanted: str | None) -> bool:
    """Whether a namespace at ``current`` has reached ``wanted`` (``None``: base); versions compare as numbers."""
    if wanted is None:
        return True
    return current is not None and int(current) >= int(wanted)


def describe_version_wait(namespace: str, version: str | None) -> str:
    """What a migration wait is for, for messages."""
    return f"namespace {namespace!r} to reach migration version {version or 'base'}"


# -- waiting --------------------------------------------------------------------------------------


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

    The catalog clients' errors become what :func:`~iceberg_ops_provider.core.timeouts.catalog_errors`
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
