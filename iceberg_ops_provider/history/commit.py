"""One commit that replaces exactly the given data files of a meta table, leaving nothing behind if it fails.

The history and event tables commit through :func:`replace_files`: new rows written once, the selected files deleted
and the new ones appended in one transaction, the new files removed on failure (docs/migrations.md, "History").
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from typing import TYPE_CHECKING

from pyiceberg.io.pyarrow import _dataframe_to_data_files

from iceberg_ops_provider.core.transactions import cached_transaction

if TYPE_CHECKING:
    import pyarrow as pa
    from pyiceberg.expressions import BooleanExpression
    from pyiceberg.manifest import DataFile
    from pyiceberg.table import Table, Transaction

__all__ = [
    "META_TABLE_PROPERTIES",
    "SNAPSHOT_ISOLATION",
    "commit_written",
    "delete_written",
    "replace_files",
    "stage_replace_files",
]

SNAPSHOT_ISOLATION = {"write.delete.isolation-level": "snapshot"}
"""The table property :func:`replace_files` relies on to keep concurrent appends."""

META_TABLE_PROPERTIES = {
    "write.metadata.delete-after-commit.enabled": "true",
    "write.metadata.previous-versions-max": "10",
    "commit.retry.num-retries": "10",
    **SNAPSHOT_ISOLATION,
}
"""The properties of the history and event tables, which :func:`replace_files` writes."""


def stage_replace_files(
    table: Table,
    delete_filter: BooleanExpression | None,
    rows: pa.Table | None,
    *,
    properties: Mapping[str, str] | None = None,
) -> tuple[Transaction, list[DataFile]]:
    """Stage what :func:`replace_files` commits, without committing it: the transaction and the files written.

    The caller commits the transaction (alone, or with other tables' changes in one multi-table
    commit) and deletes the written files if that fails.
    """
    written: list[DataFile] = []
    try:
        if rows is not None and rows.num_rows:
            written = list(_dataframe_to_data_files(table.metadata, rows, table.io))
        transaction = cached_transaction(table)  # PyIceberg's copies its metadata on every look
        if delete_filter is not None:
            transaction.delete(delete_filter, snapshot_properties=dict(properties or {}))
        if written:
            with transaction.update_snapshot(snapshot_properties=dict(properties or {})).fast_append() as append:
                for data_file in written:
                    append.append_data_file(data_file)
    except BaseException:
        delete_written(table, written)
        raise
    return transaction, written


def delete_written(table: Table, written: list[DataFile]) -> None:
    """Delete data files written for a commit that did not land (best effort)."""
    for data_file in written:
        with contextlib.suppress(Exception):
            table.io.delete(data_file.file_path)


def replace_files(
    table: Table,
    delete_filter: BooleanExpression | None,
    rows: pa.Table | None,
    *,
    properties: Mapping[str, str] | None = None,
) -> None:
    """Delete the files ``delete_filter`` selects (as read in ``table``'s current snapshot) and append ``rows``.

    Raises:
        CommitFailedException, ValidationException: The commit lost a race (the files written for it
            were deleted again); read again and retry.
    """
    transaction, written = stage_replace_files(table, delete_filter, rows, properties=properties)
    commit_written(table, transaction, written)


def commit_written(table: Table, transaction: Transaction, written: list[DataFile]) -> None:
    """Commit a transaction staged by :func:`stage_replace_files`; if it fails, delete the files written for it."""
    try:
        transaction.commit_transaction()
    except BaseException:
        delete_written(table, written)
        raise
