"""Snapshots and time travel: list them, read a table as it was, roll it back.

:func:`iter_batches` reads one scan task at a time, so memory is bounded by the largest data file:
PyIceberg's ``to_arrow_batch_reader()`` prefetches every file of the scan.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING

import pyarrow as pa
from pyiceberg.expressions import BooleanExpression
from pyiceberg.io.pyarrow import ArrowScan
from pyiceberg.table import ALWAYS_TRUE
from pyiceberg.table.snapshots import ancestors_of

from iceberg_ops_provider.core.types import iceberg_to_arrow_schema
from iceberg_ops_provider.errors import IcebergOpsError, SnapshotNotFoundError

if TYPE_CHECKING:
    from pyiceberg.table import DataScan, Table
    from pyiceberg.table.snapshots import Snapshot

__all__ = [
    "SnapshotInfo",
    "iter_batches",
    "list_snapshots",
    "read_table",
    "rollback_to",
    "snapshot_as_of",
]


@dataclass(frozen=True)
class SnapshotInfo:
    """A snapshot, summarised (``parent_id`` ``None`` for the first, ``committed_at`` in UTC)."""

    snapshot_id: int
    parent_id: int | None
    committed_at: datetime
    operation: str
    summary: dict[str, str] = field(default_factory=dict)
    is_current: bool = False

    @classmethod
    def from_snapshot(cls, snapshot: Snapshot, current_id: int | None) -> SnapshotInfo:
        """Summarise a PyIceberg snapshot."""
        summary = snapshot.summary
        return cls(
            snapshot.snapshot_id,
            snapshot.parent_snapshot_id,
            datetime.fromtimestamp(snapshot.timestamp_ms / 1000, tz=UTC),
            summary.operation.value if summary else "unknown",
            dict(summary.additional_properties) if summary else {},
            snapshot.snapshot_id == current_id,
        )


def _current_id(table: Table) -> int | None:
    current = table.current_snapshot()
    return current.snapshot_id if current else None


def list_snapshots(table: Table) -> list[SnapshotInfo]:
    """Every snapshot the table's metadata still holds, oldest first."""
    current_id = _current_id(table)
    ordered = sorted(table.snapshots(), key=lambda s: (s.timestamp_ms, s.sequence_number or 0))
    return [SnapshotInfo.from_snapshot(s, current_id) for s in ordered]


def _to_ms(moment: datetime | int) -> int:
    if isinstance(moment, datetime):
        if moment.tzinfo is None:
            raise IcebergOpsError(
                f"Timestamp {moment.isoformat()} has no time zone; pass an aware datetime such as "
                "datetime(2026, 1, 1, tzinfo=timezone.utc) so the instant is unambiguous."
            )
        return int(moment.timestamp() * 1000)
    return int(moment)


def _format_moment(timestamp_ms: int) -> str:
    return datetime.fromtimestamp(timestamp_ms / 1000, tz=UTC).isoformat()


def snapshot_as_of(table: Table, moment: datetime | int) -> SnapshotInfo:
    """The snapshot that was current at ``moment`` (an aware datetime or epoch milliseconds).

    Raises:
        SnapshotNotFoundError: The table had no snapshot yet at that moment.
    """
    timestamp_ms = _to_ms(moment)
    snapshot = table.snapshot_as_of_timestamp(timestamp_ms, inclusive=True)
    if snapshot is None:
        first = min((s.timestamp_ms for s in table.snapshots()), default=None)
        since = f"its first snapshot is from {_format_moment(first)}" if first is not None else "it has no snapshots"
        raise SnapshotNotFoundError(
            f"Table {'.'.join(table.name())} had no snapshot at {_format_moment(timestamp_ms)}: {since}. "
            "Pass a later time, or a snapshot id from list_snapshots()."
        )
    return SnapshotInfo.from_snapshot(snapshot, _current_id(table))


def _resolve_snapshot_id(table: Table, snapshot_id: int | None, as_of: datetime | int | None) -> int | None:
    if snapshot_id is not None and as_of is not None:
        raise IcebergOpsError("Pass either snapshot_id or as_of, not both.")
    if as_of is not None:
        return snapshot_as_of(table, as_of).snapshot_id
    if snapshot_id is not None and table.snapshot_by_id(snapshot_id) is None:
        known = ", ".join(str(s.snapshot_id) for s in table.snapshots()[-5:]) or "none"
        raise SnapshotNotFoundError(
            f"Table {'.'.join(table.name())} has no snapshot {snapshot_id} (it may have expired). "
            f"Latest snapshot ids: {known}."
        )
    return snapshot_id


def iter_batches(
    table: Table,
    *,
    snapshot_id: int | None = None,
    as_of: datetime | int | None = None,
    row_filter: str | BooleanExpression = ALWAYS_TRUE,
    selected_fields: Sequence[str] = ("*",),
) -> Iterator[pa.RecordBatch]:
    """Stream a table's rows (without field ids) as it is now or was at a snapshot, one data file at a time.

    ``snapshot_id`` reads that snapshot, ``as_of`` the one current at that moment (an aware datetime
    or epoch ms); ``row_filter`` is an Iceberg expression or its text (``"amount > 10"``).

    Raises:
        SnapshotNotFoundError: No such snapshot, or none at ``as_of`` (raised here, before iterating).
    """
    return _stream(table, _scan(table, snapshot_id, as_of, row_filter, selected_fields))


def _scan(
    table: Table,
    snapshot_id: int | None,
    as_of: datetime | int | None,
    row_filter: str | BooleanExpression,
    selected_fields: Sequence[str],
) -> DataScan:
    resolved = _resolve_snapshot_id(table, snapshot_id, as_of)
    return table.scan(row_filter=row_filter, selected_fields=tuple(selected_fields), snapshot_id=resolved)


def _stream(table: Table, scan: DataScan) -> Iterator[pa.RecordBatch]:
    arrow_scan = ArrowScan(table.metadata, table.io, scan.projection(), scan.row_filter, scan.case_sensitive)
    target = iceberg_to_arrow_schema(scan.projection())
    for task in scan.plan_files():
        for batch in arrow_scan.to_record_batches([task]):
            yield batch if batch.schema.equals(target, check_metadata=True) else batch.cast(target)


def read_table(
    table: Table,
    *,
    snapshot_id: int | None = None,
    as_of: datetime | int | None = None,
    row_filter: str | BooleanExpression = ALWAYS_TRUE,
    selected_fields: Sequence[str] = ("*",),
) -> pa.Table:
    """Read a table (or the part a filter selects) as it is now or was at a snapshot.

    Same arguments as :func:`iter_batches`; the whole result is held in memory.
    """
    scan = _scan(table, snapshot_id, as_of, row_filter, selected_fields)
    return pa.Table.from_batches(list(_stream(table, scan)), schema=iceberg_to_arrow_schema(scan.projection()))


def rollback_to(table: Table, snapshot_id: int | None = None, *, as_of: datetime | int | None = None) -> SnapshotInfo:
    """Make an earlier snapshot, ``snapshot_id`` or the one current ``as_of``, current again; returns it.

    It must be an ancestor of the current one (*back*, not sideways); the snapshots after it stay
    until they expire, so the rollback can be undone. ``table`` is refreshed after the commit.

    Raises:
        SnapshotNotFoundError: No such snapshot, none at ``as_of``, or not an ancestor of the
            current snapshot.
    """
    if snapshot_id is None and as_of is None:
        raise IcebergOpsError("Pass the snapshot_id to roll back to, or as_of=<moment>.")
    target = _resolve_snapshot_id(table, snapshot_id, as_of)
    current = table.current_snapshot()
    if target not in {snapshot.snapshot_id for snapshot in ancestors_of(current, table.metadata)}:
        raise SnapshotNotFoundError(
            f"Snapshot {target} is not an ancestor of the current snapshot of {'.'.join(table.name())}, "
            "so rolling back to it would not undo later commits. Choose a snapshot from the current "
            "lineage (list_snapshots(), following parent_id from the current one)."
        )
    if current is not None and current.snapshot_id != target:
        table.manage_snapshots().rollback_to_snapshot(target).commit()
        table.refresh()
    return SnapshotInfo.from_snapshot(table.snapshot_by_id(target), _current_id(table))  # type: ignore[arg-type]
