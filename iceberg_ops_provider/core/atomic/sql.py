"""Multi-table commits on PyIceberg's SQL catalog: one database transaction moves every table's pointer.

PyIceberg's ``SqlCatalog.commit_table`` commits one table in three steps: check the requirements
against the table's current metadata, write the new metadata file, then move the table's row in
``iceberg_tables`` from the old metadata file to the new one with a compare-and-swap
(``UPDATE ... WHERE metadata_location = <old>``, which must match one row). :func:`commit_sql` does
the same for several tables, with the same requirement checks, metadata computation and file naming
(PyIceberg's own ``_update_and_stage_table``), but moves every pointer inside **one** database
transaction: if any table's row moved meanwhile (another writer committed), or a table to create
exists, the transaction is rolled back and nothing changes. The new metadata files of a failed commit
are deleted.

Rows are updated in identifier order, so two multi-table commits on PostgreSQL lock them in the same
order and cannot deadlock. A table whose change leaves its metadata as it is gets no new file, but
its row is still checked (and locked) inside the transaction, so its requirements hold at the commit.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from pyiceberg.catalog import Catalog
from pyiceberg.exceptions import (
    CommitFailedException,
    CommitStateUnknownException,
    NoSuchNamespaceError,
    NoSuchTableError,
    TableAlreadyExistsError,
)

from iceberg_ops_provider.core.atomic.changes import AtomicCommitResult, TableChange

if TYPE_CHECKING:
    from pyiceberg.catalog.sql import SqlCatalog
    from pyiceberg.table import StagedTable, Table
    from sqlalchemy.orm import Session

__all__ = ["commit_sql"]

log = logging.getLogger("iceberg_ops_provider.core.atomic.commit")


@dataclass
class _Staged:
    """One table's part of the commit: its current state (``None``: to create) and its new metadata."""

    change: TableChange
    current: Table | None
    staged: StagedTable

    @property
    def changed(self) -> bool:
        return self.current is None or self.staged.metadata != self.current.metadata

    @property
    def namespace(self) -> str:
        return Catalog.namespace_to_string(self.change.identifier[:-1])

    @property
    def name(self) -> str:
        return self.change.identifier[-1]


def _stage(catalog: SqlCatalog, change: TableChange) -> _Staged:
    """Check the change against the table's current metadata and compute its new metadata (nothing written)."""
    label = change.label()
    try:
        current: Table | None = catalog.load_table(change.identifier)
    except NoSuchTableError:
        current = None
    if change.creates:
        if current is not None:
            raise TableAlreadyExistsError(f"Table {label} already exists (multi-table commit; nothing was applied)")
        if not catalog.namespace_exists(change.identifier[:-1]):
            namespace = ".".join(change.identifier[:-1])
            raise NoSuchNamespaceError(f"Namespace {namespace} does not exist (multi-table commit; nothing applied)")
    elif current is None:
        raise NoSuchTableError(f"Table does not exist: {label} (multi-table commit; nothing was applied)")
    try:
        staged = catalog._update_and_stage_table(current, change.identifier, change.requirements, change.updates)
    except CommitFailedException as exc:
        raise CommitFailedException(f"{label}: {exc} (multi-table commit; nothing was applied)") from exc
    return _Staged(change, current, staged)


def _move_pointer(catalog: SqlCatalog, session: Session, item: _Staged) -> None:
    """Inside the open transaction: insert the new table's row, or compare-and-swap the existing one's."""
    from pyiceberg.catalog.sql import IcebergTables
    from sqlalchemy import insert, update
    from sqlalchemy.exc import IntegrityError

    label = item.change.label()
    if item.current is None:
        row = catalog._create_table_row(item.namespace, item.name, item.staged.metadata_location)
        try:
            session.execute(insert(IcebergTables).values(**row))
        except IntegrityError as exc:
            raise TableAlreadyExistsError(
                f"Table {label} already exists (multi-table commit; nothing was applied)"
            ) from exc
        return
    old = item.current.metadata_location
    match = (
        IcebergTables.catalog_name == catalog.name,
        IcebergTables.table_namespace == item.namespace,
        IcebergTables.table_name == item.name,
        IcebergTables.metadata_location == old,
    )
    if item.changed:
        values = {"metadata_location": item.staged.metadata_location, "previous_metadata_location": old}
    else:  # nothing to move: still check (and lock) the row, so the requirements hold at the commit
        values = {"metadata_location": old}
    if catalog.engine.dialect.supports_sane_rowcount:
        matched = session.execute(update(IcebergTables).where(*match).values(**values)).rowcount
    else:  # as PyIceberg does on such databases: lock the row, then change it
        found = session.query(IcebergTables).with_for_update(of=IcebergTables).filter(*match).one_or_none()
        matched = 0 if found is None else 1
        if found is not None:
            for key, value in values.items():
                setattr(found, key, value)
            session.flush()
    if matched != 1:
        raise CommitFailedException(
            f"Table has been updated by another process: {label} (multi-table commit; nothing was applied)"
        )


def _delete_quietly(item: _Staged) -> None:
    with contextlib.suppress(Exception):
        item.staged.io.delete(item.staged.metadata_location)


def commit_sql(catalog: SqlCatalog, changes: Sequence[TableChange]) -> AtomicCommitResult:
    """Commit ``changes`` to a SQL catalog in one database transaction (see the module's documentation).

    Raises:
        CommitFailedException: A requirement failed, or another writer moved a table's pointer first.
        TableAlreadyExistsError, NoSuchTableError, NoSuchNamespaceError: As the names say.
        CommitStateUnknownException: The database failed while committing (a lost connection).
    """
    from sqlalchemy.orm import Session

    items = [_stage(catalog, change) for change in changes]
    written: list[_Staged] = []
    try:
        for item in items:
            if item.changed:
                written.append(item)
                catalog._write_metadata(item.staged.metadata, item.staged.io, item.staged.metadata_location)
        with Session(catalog.engine) as session:
            for item in sorted(items, key=lambda entry: entry.change.identifier):
                _move_pointer(catalog, session, item)
            try:
                session.commit()
            except Exception as exc:
                raise CommitStateUnknownException(
                    f"The database failed while committing the multi-table commit of "
                    f"{', '.join(item.change.label() for item in items)} ({type(exc).__name__}: {exc}): all or none "
                    "of its changes were applied. Load the tables to find out."
                ) from exc
    except CommitStateUnknownException:
        raise  # the new metadata files may be referenced now: keep them
    except BaseException:
        for item in written:
            _delete_quietly(item)
        raise
    for item in items:
        if item.current is not None and item.changed:
            try:  # as PyIceberg does after a commit: old metadata files beyond the table's limit go
                catalog._delete_old_metadata(item.staged.io, item.current.metadata, item.staged.metadata)
            except Exception as exc:
                label, reason = item.change.label(), f"{type(exc).__name__}: {exc}"
                log.warning("could not delete old metadata files of %s: %s", label, reason)
    labels = tuple(item.change.label() for item in items)
    return AtomicCommitResult(
        "sql-transaction",
        labels,
        metadata={item.change.label(): item.staged.metadata for item in items},
        metadata_locations={
            item.change.label(): item.staged.metadata_location
            if item.changed
            else (item.current.metadata_location if item.current else item.staged.metadata_location)
            for item in items
        },
    )
