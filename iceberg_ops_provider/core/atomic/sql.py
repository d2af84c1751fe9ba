"""Multi-table commits on PyIceberg's SQL catalog: one database transaction moves every table's pointer.

Each row of ``iceberg_tables`` moves under PyIceberg's compare-and-swap, all in one transaction, rolled
back with the new files deleted if any row moved meanwhile (docs/core.md, All-or-nothing commits).
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
    from pyiceberg.table import Table
    from sqlalchemy.orm import Session

__all__ = ["commit_sql"]

log = logging.getLogger("iceberg_ops_provider.core.atomic.commit")


@dataclass
class _Staged:
    """One table's part of the commit: its current state (``None``: to create), its new metadata, whether it differs."""

    change: TableChange
    current: Table | None
    staged: Table  # a StagedTable when changed
    changed: bool = True


def _stage(catalog: SqlCatalog, change: TableChange, *, reload: bool) -> _Staged:
    """Check the change and compute its new metadata, unless ``reload`` on the table its transaction started from."""
    label = change.label()
    current: Table | None
    if not reload and change.transaction is not None and not change.creates:
        current = change.transaction._table
    else:
        try:
            current = catalog.load_table(change.identifier)
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
        if current is not None and not change.updates:  # only checked (a lock): no metadata to compute
            for requirement in change.requirements:
                requirement.validate(current.metadata)
            return _Staged(change, current, current, changed=False)
        staged = catalog._update_and_stage_table(current, change.identifier, change.requirements, change.updates)
    except CommitFailedException as exc:
        raise CommitFailedException(f"{label}: {exc} (multi-table commit; nothing was applied)") from exc
    return _Staged(change, current, staged, current is None or staged.metadata != current.metadata)


def _move_pointer(catalog: SqlCatalog, session: Session, item: _Staged) -> None:
    """Inside the open transaction: insert the new table's row, or compare-and-swap the existing one's."""
    from pyiceberg.catalog.sql import IcebergTables
    from sqlalchemy import insert, update
    from sqlalchemy.exc import IntegrityError

    label = item.change.label()
    namespace, name = Catalog.namespace_to_string(item.change.identifier[:-1]), item.change.identifier[-1]
    if item.current is None:
        row = catalog._create_table_row(namespace, name, item.staged.metadata_location)
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
        IcebergTables.table_namespace == namespace,
        IcebergTables.table_name == name,
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
        for key, value in values.items() if found is not None else ():
            setattr(found, key, value)
        session.flush()
    if matched != 1:
        raise CommitFailedException(
            f"Table has been updated by another process: {label} (multi-table commit; nothing was applied)"
        )


def commit_sql(catalog: SqlCatalog, changes: Sequence[TableChange]) -> AtomicCommitResult:
    """Commit ``changes`` to a SQL catalog in one database transaction (docs/core.md, All-or-nothing commits).

    Raises:
        CommitFailedException: A requirement failed, or another writer moved a table's pointer first.
        TableAlreadyExistsError, NoSuchTableError, NoSuchNamespaceError: As the names say.
        CommitStateUnknownException: The database failed while committing (a lost connection).
    """
    try:
        return _commit(catalog, changes, reload=False)
    except CommitFailedException:
        if all(change.transaction is None or change.creates for change in changes):
            raise  # every table was loaded for that attempt already
        return _commit(catalog, changes, reload=True)


def _commit(catalog: SqlCatalog, changes: Sequence[TableChange], *, reload: bool) -> AtomicCommitResult:
    from sqlalchemy.orm import Session

    items = [_stage(catalog, change, reload=reload) for change in changes]
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
            with contextlib.suppress(Exception):
                item.staged.io.delete(item.staged.metadata_location)
        raise
    for item in items:
        if item.current is not None and item.changed:
            try:  # as PyIceberg does after a commit: old metadata files beyond the table's limit go
                catalog._delete_old_metadata(item.staged.io, item.current.metadata, item.staged.metadata)
            except Exception as exc:
                log.warning(
                    "could not delete old metadata files of %s: %s: %s", item.change.label(), type(exc).__name__, exc
                )
    return AtomicCommitResult(
        "sql-transaction",
        tuple(item.change.label() for item in items),
        metadata={item.change.label(): item.staged.metadata for item in items},
        metadata_locations={  # an unchanged table exists: its file stays
            item.change.label(): item.staged.metadata_location if item.changed else item.current.metadata_location
            for item in items
        },
    )
