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
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Literal

from pyiceberg.exceptions import CommitFailedException, ValidationException
from pyiceberg.table import CreateTableTransaction
from pyiceberg.table.update import AssertCreate, AssertTableUUID

from iceberg_ops_provider.errors import InvalidOperationError

if TYPE_CHECKING:
    from pyiceberg.catalog import Catalog
    from pyiceberg.table import Transaction
    from pyiceberg.table.metadata import TableMetadata
    from pyiceberg.table.update import TableRequirement, TableUpdate

__all__ = [
    "AtomicCommitResult",
    "CommitMode",
    "TableChange",
    "atomic_commit_mode",
    "commit_atomically",
    "describe_commit_mode",
]

log = logging.getLogger(__name__)

CommitMode = Literal["rest-transaction", "sql-transaction", "per-table"]
"""How a catalog commits changes to several tables.

``rest-transaction``: one ``transactions/commit`` request; ``sql-transaction``: one database
transaction of a SQL catalog; ``per-table``: no multi-table commit, one commit per table.
"""

Identifier = tuple[str, ...]


@dataclass(frozen=True)
class TableChange:
    """The staged change of one table: PyIceberg's updates and the requirements they are checked against.

    Build one from a PyIceberg transaction with :meth:`of`, or give the parts. A change whose
    requirements include :class:`~pyiceberg.table.update.AssertCreate` creates the table.

    Attributes:
        identifier: The table's full identifier (namespace parts, then the name).
        updates: PyIceberg table updates, in order.
        requirements: What must hold of the table's current metadata for the updates to apply.
        transaction: The transaction the change came from, if any: after the commit it is settled as
            PyIceberg's own ``commit_transaction`` would leave it (emptied after success; files of its
            snapshot producers deleted after a failure that applied nothing; refused for reuse after
            any failure).
    """

    identifier: Identifier
    updates: tuple[TableUpdate, ...]
    requirements: tuple[TableRequirement, ...] = ()
    transaction: Transaction | None = field(default=None, compare=False, repr=False)

    @classmethod
    def of(cls, transaction: Transaction) -> TableChange:
        """The change a PyIceberg transaction (or create-table transaction) holds, with its table's UUID asserted.

        Raises:
            InvalidOperationError: The transaction already failed to commit once.
        """
        if getattr(transaction, "_failed", False):
            raise InvalidOperationError(
                f"The transaction of {'.'.join(transaction._table.name())} failed to commit and cannot be reused."
            )
        identifier = tuple(transaction._table.name())
        if isinstance(transaction, CreateTableTransaction):
            return cls(identifier, tuple(transaction._updates), (AssertCreate(),), transaction)
        requirements = tuple(transaction._requirements)
        if not any(isinstance(requirement, AssertTableUUID) for requirement in requirements):
            requirements += (AssertTableUUID(uuid=transaction.table_metadata.table_uuid),)
        return cls(identifier, tuple(transaction._updates), requirements, transaction)

    @property
    def creates(self) -> bool:
        """Whether this change creates the table (it asserts that the table does not exist)."""
        return any(isinstance(requirement, AssertCreate) for requirement in self.requirements)

    def label(self) -> str:
        """The table's dotted name."""
        return ".".join(self.identifier)


@dataclass(frozen=True)
class AtomicCommitResult:
    """What :func:`commit_atomically` did.

    Attributes:
        mode: How the catalog committed (``per-table`` when it cannot commit several tables at once:
            then nothing was committed).
        tables: The tables committed, in the order given (empty when nothing was).
        metadata: The new metadata of each committed table, where the catalog returned it (SQL
            catalogs); a REST catalog answers ``transactions/commit`` without it: load the tables.
        metadata_locations: The new metadata file of each committed table, where known.
        reason: Why nothing was committed, when :attr:`applied` is false.
    """

    mode: CommitMode
    tables: tuple[str, ...] = ()
    metadata: dict[str, TableMetadata] = field(default_factory=dict, repr=False)
    metadata_locations: dict[str, str] = field(default_factory=dict)
    reason: str = ""

    @property
    def applied(self) -> bool:
        """Whether the changes were committed (false: the catalog cannot commit them together; nothing was)."""
        return self.mode != "per-table"


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
