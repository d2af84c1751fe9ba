"""A table's snapshots in order, and how its metadata file grew, from metadata alone.

Each snapshot's row comes from its summary (what it added and removed, its totals, the writer it names) and
from the refs (the branches whose history holds it, the tags on it); the growth from the metadata log and the
size of each file it lists (only where the table keeps its metadata). No manifest list, manifest or data file is read.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

from iceberg_ops_provider.catalogs.redact import split_secrets
from iceberg_ops_provider.maintenance.activity import may_read_metadata
from iceberg_ops_provider.maintenance.files import window_map

if TYPE_CHECKING:
    from pyiceberg.table import Table

__all__ = [
    "DEFAULT_LIMIT",
    "WRITER_KEYS",
    "MetadataPoint",
    "SnapshotRow",
    "SnapshotTimeline",
    "snapshot_timeline",
]

DEFAULT_LIMIT = 200
"""Snapshots listed at most, the newest first (``snapshots`` always counts them all)."""

WRITER_KEYS = (
    "iceberg-ops.operation",
    "iceberg-ops.data-step",
    "iceberg-ops.move-id",
    "iceberg-ops.restored-by",
    "iceberg-ops.published-branch",
    "engine-name",
    "engine-version",
    "app-id",
    "spark.app.id",
    "flink.job-id",
)
"""The summary keys that say who or what wrote a snapshot, in the order shown."""

_MAX_VALUE = 200  # characters of one writer value kept

_COUNTS = {
    "added-data-files": "added_data_files",
    "deleted-data-files": "removed_data_files",
    "added-delete-files": "added_delete_files",
    "removed-delete-files": "removed_delete_files",
    "added-files-size": "added_bytes",
    "removed-files-size": "removed_bytes",
    "added-records": "added_records",
    "deleted-records": "removed_records",
    "total-data-files": "total_data_files",
    "total-files-size": "total_bytes",
    "total-records": "total_records",
}


@dataclass(frozen=True)
class SnapshotRow:
    """One snapshot: its summary's counts (``None`` where the summary leaves one out), writer and refs.

    ``branches`` are the branches whose history holds it, ``tags`` the tags pointing at it; ``written_by``
    the :data:`WRITER_KEYS` its summary has.
    """

    snapshot_id: int
    parent_id: int | None
    at: datetime
    operation: str | None
    schema_id: int | None
    added_data_files: int | None = None
    removed_data_files: int | None = None
    added_delete_files: int | None = None
    removed_delete_files: int | None = None
    added_bytes: int | None = None
    removed_bytes: int | None = None
    added_records: int | None = None
    removed_records: int | None = None
    total_data_files: int | None = None
    total_bytes: int | None = None
    total_records: int | None = None
    written_by: dict[str, str] = field(default_factory=dict)
    branches: tuple[str, ...] = ()
    tags: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        """JSON-able form."""
        return {**asdict(self), "at": self.at.isoformat(), "branches": list(self.branches), "tags": list(self.tags)}


@dataclass(frozen=True)
class MetadataPoint:
    """One metadata file of the log (the current one last): when it was written, and its size.

    ``bytes`` is ``None`` when the file is gone, or is outside the table's folders (never looked at).
    """

    at: datetime
    location: str
    bytes: int | None
    current: bool = False

    def to_json(self) -> dict[str, Any]:
        """JSON-able form."""
        return {**asdict(self), "at": self.at.isoformat()}


@dataclass(frozen=True)
class SnapshotTimeline:
    """A table's snapshots, newest first, at most ``limit``; and its metadata file's size over time, oldest first."""

    table: str
    snapshots: int
    limit: int
    rows: tuple[SnapshotRow, ...]
    growth: tuple[MetadataPoint, ...]

    def to_json(self) -> dict[str, Any]:
        """JSON-able form."""
        return {
            "table": self.table,
            "snapshots": self.snapshots,
            "limit": self.limit,
            "rows": [row.to_json() for row in self.rows],
            "growth": [point.to_json() for point in self.growth],
        }


def _int(value: str | None) -> int | None:
    try:
        return int(value) if value is not None else None
    except ValueError:
        return None


def _writers(summary: dict[str, str]) -> dict[str, str]:
    """The summary's :data:`WRITER_KEYS`, a credential in one (a URI's password, ...) as ``***``, then shortened."""
    shown, _ = split_secrets({key: str(summary[key]) for key in WRITER_KEYS if key in summary})
    return {key: str(value)[:_MAX_VALUE] for key, value in shown.items()}


def _on_branches(table: Table) -> dict[int, list[str]]:
    """Snapshot id -> the branches whose history holds it (each branch followed from its head to its root)."""
    parents = {s.snapshot_id: s.parent_snapshot_id for s in table.metadata.snapshots}
    found: dict[int, list[str]] = {}
    for name, ref in sorted(table.metadata.refs.items(), key=lambda item: (item[0] != "main", item[0])):
        if ref.snapshot_ref_type.value != "branch":
            continue
        current: int | None = ref.snapshot_id
        seen: set[int] = set()
        while current is not None and current in parents and current not in seen:
            seen.add(current)
            found.setdefault(current, []).append(name)
            current = parents[current]
    return found


def _size(table: Table, location: str) -> int | None:
    if not may_read_metadata(table, location):  # a log naming a file elsewhere: not even its size is looked at
        return None
    try:
        return len(table.io.new_input(location))
    except Exception:  # removed since (or unreadable): the point stays, without a size
        return None


def snapshot_timeline(table: Table, *, limit: int = DEFAULT_LIMIT, parallelism: int = 8) -> SnapshotTimeline:
    """The snapshot timeline and metadata growth of a loaded table (sizes of ``parallelism`` files at a time)."""
    metadata = table.metadata
    branches = _on_branches(table)
    tags: dict[int, list[str]] = {}
    for name, ref in sorted(metadata.refs.items()):
        if ref.snapshot_ref_type.value == "tag":
            tags.setdefault(ref.snapshot_id, []).append(name)
    newest = sorted(metadata.snapshots, key=lambda s: (s.timestamp_ms, s.sequence_number or 0), reverse=True)
    rows = []
    for snapshot in newest[: max(0, limit)]:
        summary: dict[str, str] = {}
        operation = None
        if snapshot.summary is not None:
            summary = dict(snapshot.summary.additional_properties)
            operation = snapshot.summary.operation.value
        rows.append(
            SnapshotRow(
                snapshot_id=snapshot.snapshot_id,
                parent_id=snapshot.parent_snapshot_id,
                at=datetime.fromtimestamp(snapshot.timestamp_ms / 1000, UTC),
                operation=operation,
                schema_id=snapshot.schema_id,
                **{name: _int(summary.get(key)) for key, name in _COUNTS.items()},
                written_by=_writers(summary),
                branches=tuple(branches.get(snapshot.snapshot_id, ())),
                tags=tuple(tags.get(snapshot.snapshot_id, ())),
            )
        )
    log = [(entry.timestamp_ms, entry.metadata_file) for entry in metadata.metadata_log]
    log.append((metadata.last_updated_ms, table.metadata_location))
    sizes = list(window_map(lambda item: _size(table, item[1]), log, workers=max(1, parallelism)))
    growth = tuple(
        MetadataPoint(datetime.fromtimestamp(at / 1000, UTC), location, size, current=n == len(log) - 1)
        for n, ((at, location), size) in enumerate(zip(log, sizes, strict=True))
    )
    return SnapshotTimeline(
        table=".".join(table.name()), snapshots=len(metadata.snapshots), limit=limit, rows=tuple(rows), growth=growth
    )
