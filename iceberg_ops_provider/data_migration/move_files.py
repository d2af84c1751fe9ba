"""The target files a move committed, and streaming readers of both sides for verification.

While the target holds every file the move's commits added, only those files' rows are compared, so
rows other writers appended never count; after a rewrite, every target row matching the filter is.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import TYPE_CHECKING

import pyarrow as pa
from pyiceberg.expressions import AlwaysTrue
from pyiceberg.io.pyarrow import ArrowScan, _read_all_delete_files
from pyiceberg.manifest import ManifestEntryStatus
from pyiceberg.table.refs import MAIN_BRANCH
from pyiceberg.table.snapshots import Operation, ancestors_of

from iceberg_ops_provider.data_migration.planning import scan_tasks, snapshot_paths
from iceberg_ops_provider.data_migration.state import move_snapshots, state_of
from iceberg_ops_provider.data_migration.verify import Stream
from iceberg_ops_provider.maintenance.files import ManifestReader

if TYPE_CHECKING:
    from pyiceberg.expressions import BooleanExpression
    from pyiceberg.io import FileIO
    from pyiceberg.table import FileScanTask, Table
    from pyiceberg.table.metadata import TableMetadata

    from iceberg_ops_provider.data_migration.definition import MoveDefinition
    from iceberg_ops_provider.data_migration.reconcile import ColumnMapping

__all__ = ["foreign_changes", "move_data_paths", "source_batches", "target_batches"]


def move_data_paths(table: Table, move_id: str, branch: str) -> set[str]:
    """Locations of the data files the move's commits on ``branch`` added."""
    reader = ManifestReader(table.io)
    paths: set[str] = set()
    for snapshot in move_snapshots(table.metadata, move_id, branch):
        if snapshot.summary is None or snapshot.summary.operation == Operation.APPEND:
            paths |= snapshot_paths(reader, snapshot, ManifestEntryStatus.ADDED)
    return paths


def stream_tasks(
    metadata: TableMetadata,
    io: FileIO,
    tasks: Sequence[FileScanTask],
    columns: Sequence[str],
    row_filter: BooleanExpression,
) -> Iterator[pa.RecordBatch]:
    """The rows of ``tasks`` (deletes and ``row_filter`` applied) as ``columns``, one file at a time, batch by batch.

    PyIceberg's ``to_record_batches`` holds every file it reads whole and reads them all at once;
    verification reads tables of any size, so it streams instead.
    """
    scan = ArrowScan(metadata, io, metadata.schema().select(*columns), row_filter)
    for task in tasks:
        yield from scan._record_batches_from_scan_tasks_and_deletes([task], _read_all_delete_files(io, [task]))


def target_batches(
    table: Table,
    move: MoveDefinition,
    columns: Sequence[str],
    row_filter: BooleanExpression,
    moved_rows: int,
    branch: str = MAIN_BRANCH,
) -> tuple[Stream, dict[str, object]]:
    """A stream of the target rows to compare with the source, and what they are (``scope``, ``target_files``).

    ``scope`` is ``move_files`` while the target still holds every file the move's commits added, with
    the ``moved_rows`` it committed. Once a later commit rewrote some or expiry removed some of the
    move's commits, its rows cannot be told apart from others and the scope is ``table``: every target
    row matching ``row_filter``, exact only when ``foreign_changes`` is empty.
    An ``overwrite`` replaced the target's earlier rows matching the filter: those are no foreign change.
    ``branch``: where the rows are read (a move's own branch before it is published).
    """
    move_id = move.move_id
    paths = move_data_paths(table, move_id, branch)
    head = table.metadata.snapshot_by_name(branch)
    if head is None:
        return (lambda: iter(())), {"scope": "move_files", "target_files": 0}
    tasks = list(table.scan(snapshot_id=head.snapshot_id).plan_files())
    live = {task.file.file_path for task in tasks}
    mine = [task for task in tasks if task.file.file_path in paths]
    # Every commit of the move still in the history and none of its files rewritten: its rows are these files'.
    if paths and paths <= live and sum(task.file.record_count for task in mine) == moved_rows:
        return (lambda: stream_tasks(table.metadata, table.io, mine, columns, AlwaysTrue())), {
            "scope": "move_files",
            "target_files": len(mine),
        }
    matching = list(table.scan(snapshot_id=head.snapshot_id, row_filter=row_filter).plan_files())

    def stream() -> Iterator[pa.RecordBatch]:
        return stream_tasks(table.metadata, table.io, matching, columns, row_filter)

    scope: dict[str, object] = {
        "scope": "table",
        "target_files": len(matching),
        "rewritten_since_move": len(paths - live),
        "foreign_changes": foreign_changes(table.metadata, move_id, branch, move.mode == "overwrite"),
    }
    return stream, scope


def foreign_changes(metadata: TableMetadata, move_id: str, branch: str, replaces_earlier_rows: bool) -> list[str]:
    """Why rows on ``branch`` may not all be rows the move committed (empty when they can only be its rows).

    Counted as such: a commit of another writer since the move's first commit other than a
    ``replace`` (a compaction, which changes no rows); rows the target held before the move (unless
    ``replaces_earlier_rows``); or a history that no longer reaches back to the move's first commit.
    """
    head = metadata.snapshot_by_name(branch)
    if head is None:
        return []
    ancestry = list(ancestors_of(head, metadata))  # newest first
    own = [index for index, snapshot in enumerate(ancestry) if state_of(snapshot, move_id) is not None]
    if not own:
        return ["the move's commits are no longer in the target's history (expired)"]
    reasons = []
    for snapshot in ancestry[: own[-1]]:
        operation = snapshot.summary.operation if snapshot.summary is not None else Operation.APPEND
        if state_of(snapshot, move_id) is None and operation != Operation.REPLACE:
            reasons.append(f"snapshot {snapshot.snapshot_id} of another writer ({operation.value})")
    first = ancestry[own[-1]]
    state = state_of(first, move_id)
    summary = first.summary
    added = int(summary.get("added-records", "0") or 0) if summary is not None else 0
    if state is not None and summary is not None and summary.operation == Operation.APPEND and state.rows != added:
        reasons.append("the move's earliest commits are no longer in the target's history (expired)")
    elif not replaces_earlier_rows and first.parent_snapshot_id is not None:
        parent = metadata.snapshot_by_id(first.parent_snapshot_id)
        held = int(parent.summary.get("total-records", "0") or 0) if parent is not None and parent.summary else 0
        if parent is None or held:
            reasons.append(f"the target held {held:,} rows before the move" if parent else "its history expired")
    return reasons


def source_batches(
    table: Table,
    metadata: TableMetadata,
    snapshot_id: int | None,
    row_filter: BooleanExpression,
    mapping: ColumnMapping,
    compared: Sequence[str],
) -> Stream:
    """A stream of the source's rows as the move writes them: converted, named as the target's columns."""

    def stream() -> Iterator[pa.RecordBatch]:
        columns = mapping.source_columns
        tasks = scan_tasks(table, snapshot_id, row_filter, columns)
        for batch in stream_tasks(metadata, table.io, tasks, columns, row_filter):
            converted = mapping.convert(batch)
            arrays = [converted.column(mapping.file_names[name]) for name in compared]
            yield pa.RecordBatch.from_arrays(arrays, names=list(compared))

    return stream
