"""All-or-nothing commits of several tables at once, where the catalog can do it.

REST catalogs serving ``transactions/commit`` and PyIceberg's SQL catalog can; on others
:func:`commit_atomically` commits nothing and the caller commits table by table (docs/core.md).
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Literal

from pyiceberg.exceptions import CommitStateUnknownException

from iceberg_ops_provider.core.atomic.changes import AtomicCommitResult, CommitMode, TableChange
from iceberg_ops_provider.errors import InvalidOperationError

if TYPE_CHECKING:
    from pyiceberg.catalog import Catalog

__all__ = ["atomic_commit_mode", "commit_atomically", "describe_commit_mode"]

log = logging.getLogger(__name__)


def _kind(catalog: Catalog) -> Literal["rest", "sql", "other"]:
    from pyiceberg.catalog.rest import RestCatalog
    from pyiceberg.catalog.sql import SqlCatalog

    return "rest" if isinstance(catalog, RestCatalog) else "sql" if isinstance(catalog, SqlCatalog) else "other"


def atomic_commit_mode(catalog: Catalog, *, probe: bool = False) -> CommitMode | None:
    """How ``catalog`` commits several tables: known at once for SQL and other catalogs, learnt for REST.

    ``None`` for a REST catalog not tried yet, unless ``probe`` asks it with an empty (harmless)
    ``transactions/commit`` request, which answered one way or the other.
    """
    kind = _kind(catalog)
    if kind != "rest":
        return "sql-transaction" if kind == "sql" else "per-table"
    from iceberg_ops_provider.core.atomic import rest

    known = (rest.probe if probe else rest.known_support)(catalog)  # type: ignore[arg-type]
    return None if known is None else "rest-transaction" if known else "per-table"


def describe_commit_mode(mode: CommitMode | None) -> str:
    """One line for people: what a migration's commits amount to in ``mode``."""
    return {
        "rest-transaction": "all-or-nothing (one multi-table transaction of the REST catalog)",
        "sql-transaction": "all-or-nothing (one database transaction of the SQL catalog)",
        "per-table": "one commit per table (the catalog has no multi-table commit)",
        None: "not known yet (a REST catalog is asked on its first multi-table commit)",
    }[mode]


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
            transaction._updates = transaction._requirements = ()
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

    ``changes`` holds one change per table; tables it :attr:`~TableChange.creates` are created (SQL
    catalogs only: a REST catalog reports such a list as not supported). ``result.applied`` is false
    when the catalog cannot commit the changes together: nothing was, commit them one by one.

    Raises:
        CommitFailedException: A requirement failed or a concurrent writer won; nothing was applied.
        CommitStateUnknownException: All or none of the changes were applied; read the tables.
        NoSuchTableError, TableAlreadyExistsError, NoSuchNamespaceError: Nothing was applied.
        CatalogUnavailableError: The catalog could not be reached; nothing was applied.
        InvalidOperationError: A table appears twice.
    """
    changes = list(changes)
    twice = [label for label, count in Counter(change.label() for change in changes).items() if count > 1]
    if twice:
        raise InvalidOperationError(f"Table {twice[0]} appears twice in one atomic commit; merge its changes into one.")
    kind = _kind(catalog)
    if kind == "other":
        reason = f"{type(catalog).__name__} has no multi-table commit"
        log.info("%s: committing table by table instead of all at once", reason)
        return AtomicCommitResult("per-table", reason=reason)
    if not changes:  # nothing to commit: nothing to ask a REST catalog either
        return AtomicCommitResult(atomic_commit_mode(catalog) or "rest-transaction")
    from iceberg_ops_provider.core.atomic import rest, sql

    try:
        result = (sql.commit_sql if kind == "sql" else rest.commit_rest)(catalog, changes)  # type: ignore[arg-type]
    except Exception as exc:
        _settle(changes, "unknown" if isinstance(exc, CommitStateUnknownException) else "failed")
        raise
    if result.applied:
        _settle(changes, "applied", result)
    return result
