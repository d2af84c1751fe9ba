"""All-or-nothing commits of several tables at once, where the catalog can do it.

PyIceberg commits one table at a time. Two kinds of catalog can do better, and this module uses them:

* **REST catalogs** that serve ``POST /v1/{prefix}/transactions/commit`` (Iceberg REST
  specification): one request carries every table's requirements and updates, and the server applies
  all of them or none (:mod:`~iceberg_ops_provider.core.atomic.rest`). Servers do not always
  list the endpoint in ``/v1/config``, so support is learnt by trying: a 404/405/501 answer (or a
  harmless empty probe, :func:`atomic_commit_mode` with ``probe=True``) is remembered per endpoint.
* **PyIceberg's SQL catalog** (SQLite, PostgreSQL, any SQLAlchemy database): every table's new
  metadata file is written first, then one database transaction moves every table's metadata pointer
  under the same compare-and-swap PyIceberg uses for one table
  (:mod:`~iceberg_ops_provider.core.atomic.sql`).

Other catalogs (Glue, Hive, DynamoDB, ...) cannot: :func:`commit_atomically` then commits nothing,
logs so, and returns a result whose :attr:`~AtomicCommitResult.applied` is false, so the caller falls
back to one commit per table.

What a failed commit raises (PyIceberg's own exception types, which the rest of iceberg-ops handles):

* :class:`~pyiceberg.exceptions.CommitFailedException`: a requirement failed or another writer
  changed a table first; **nothing was applied**, and the new files written for it are deleted.
* :class:`~pyiceberg.exceptions.CommitStateUnknownException`: the catalog failed while committing
  (a 5xx answer, a lost answer, a database connection lost while committing); **all or none** of the
  changes were applied, never some: read the tables to find out. Nothing written for it is deleted.
* :class:`~pyiceberg.exceptions.NoSuchTableError`, :class:`~pyiceberg.exceptions.TableAlreadyExistsError`,
  :class:`~pyiceberg.exceptions.NoSuchNamespaceError`: a table to change is missing, a table to create
  exists, or its namespace is missing; nothing was applied.
* :class:`~iceberg_ops_provider.errors.CatalogUnavailableError`: the catalog could not be reached
  before anything was sent; nothing was applied.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Literal

from pyiceberg.exceptions import CommitFailedException, ValidationException

from iceberg_ops_provider.core.atomic.changes import AtomicCommitResult, CommitMode, Identifier, TableChange
from iceberg_ops_provider.errors import InvalidOperationError

if TYPE_CHECKING:
    from pyiceberg.catalog import Catalog

__all__ = ["atomic_commit_mode", "commit_atomically", "describe_commit_mode"]

log = logging.getLogger(__name__)


def _kind(catalog: Catalog) -> Literal["rest", "sql", "other"]:
    from pyiceberg.catalog.rest import RestCatalog
    from pyiceberg.catalog.sql import SqlCatalog

    if isinstance(catalog, RestCatalog):
        return "rest"
    if isinstance(catalog, SqlCatalog):
        return "sql"
    return "other"


def atomic_commit_mode(catalog: Catalog, *, probe: bool = False) -> CommitMode | None:
    """How ``catalog`` commits several tables: known at once for SQL and other catalogs, learnt for REST.

    Args:
        catalog: The catalog.
        probe: For a REST catalog whose support is not known yet, ask it with an empty
            ``transactions/commit`` request (which changes nothing) instead of answering ``None``.

    Returns:
        The mode, or ``None`` for a REST catalog not tried yet (and not probed, or whose probe
        answered neither way, such as a 5xx).
    """
    kind = _kind(catalog)
    if kind == "sql":
        return "sql-transaction"
    if kind == "other":
        return "per-table"
    from iceberg_ops_provider.core.atomic import rest

    known = rest.known_support(catalog)  # type: ignore[arg-type]
    if known is None and probe:
        known = rest.probe(catalog)  # type: ignore[arg-type]
    if known is None:
        return None
    return "rest-transaction" if known else "per-table"


def describe_commit_mode(mode: CommitMode | None) -> str:
    """One line for people: what a migration's commits amount to in ``mode``."""
    if mode == "rest-transaction":
        return "all-or-nothing (one multi-table transaction of the REST catalog)"
    if mode == "sql-transaction":
        return "all-or-nothing (one database transaction of the SQL catalog)"
    if mode == "per-table":
        return "one commit per table (the catalog has no multi-table commit)"
    return "not known yet (a REST catalog is asked on its first multi-table commit)"


def _check(changes: Sequence[TableChange]) -> None:
    seen: set[Identifier] = set()
    for change in changes:
        if not change.identifier or not all(isinstance(part, str) and part for part in change.identifier):
            raise InvalidOperationError(f"A table change needs a full table identifier, got {change.identifier!r}.")
        if change.identifier in seen:
            raise InvalidOperationError(
                f"Table {change.label()} appears twice in one atomic commit; merge its changes into one."
            )
        seen.add(change.identifier)


def _settle(
    changes: Iterable[TableChange],
    outcome: Literal["applied", "failed", "unknown"],
    result: AtomicCommitResult | None = None,
) -> None:
    """Leave each change's transaction as PyIceberg's ``commit_transaction`` would after this outcome."""
    for change in changes:
        transaction = change.transaction
        if transaction is None:
            continue
        producers = list(getattr(transaction, "_snapshot_producers", []))
        if outcome == "applied":
            for producer in producers:
                producer._cleanup_uncommitted()
            transaction._updates = ()
            transaction._requirements = ()
            metadata = result.metadata.get(change.label()) if result is not None else None
            if metadata is not None:  # the transaction's table now shows what was committed, as after commit_table
                transaction._table.metadata = metadata
                transaction._table.metadata_location = result.metadata_locations[change.label()]
        else:
            if outcome == "failed":  # nothing landed: the manifests and files written for it are garbage
                for producer in producers:
                    producer._clean_all_uncommitted()
            transaction._failed = True
        if hasattr(transaction, "_snapshot_producers"):
            transaction._snapshot_producers = []


def commit_atomically(catalog: Catalog, changes: Sequence[TableChange]) -> AtomicCommitResult:
    """Commit the changes of several tables all together or not at all.

    Args:
        catalog: The catalog holding every table.
        changes: One change per table (no table twice); tables with :attr:`TableChange.creates` are
            created (SQL catalogs only: a REST catalog's multi-table commit cannot create tables, so a
            change list with a creation is reported as not supported there, and nothing is sent).

    Returns:
        The result; ``result.applied`` is false when the catalog cannot commit these changes
        together (nothing was committed then: commit them one by one, see the log line).

    Raises:
        CommitFailedException: A requirement failed or a concurrent writer won; nothing was applied.
        CommitStateUnknownException: All or none of the changes were applied; read the tables.
        NoSuchTableError, TableAlreadyExistsError, NoSuchNamespaceError: Nothing was applied.
        CatalogUnavailableError: The catalog could not be reached; nothing was applied.
        InvalidOperationError: A table appears twice, or an identifier is malformed.
    """
    changes = list(changes)
    _check(changes)
    kind = _kind(catalog)
    if kind == "other":
        reason = f"{type(catalog).__name__} has no multi-table commit"
        log.info("%s: committing table by table instead of all at once", reason)
        return AtomicCommitResult("per-table", reason=reason)
    if not changes:  # nothing to commit: nothing to ask a REST catalog either
        return AtomicCommitResult(atomic_commit_mode(catalog) or "rest-transaction")
    try:
        if kind == "sql":
            from iceberg_ops_provider.core.atomic.sql import commit_sql

            result = commit_sql(catalog, changes)  # type: ignore[arg-type]
        else:
            from iceberg_ops_provider.core.atomic.rest import commit_rest

            result = commit_rest(catalog, changes)  # type: ignore[arg-type]
    except (CommitFailedException, ValidationException):
        _settle(changes, "failed")
        raise
    except Exception as exc:
        from pyiceberg.exceptions import CommitStateUnknownException

        _settle(changes, "unknown" if isinstance(exc, CommitStateUnknownException) else "failed")
        raise
    if result.applied:
        _settle(changes, "applied", result)
    return result
