"""Which source files a move reads, and how they are grouped into units.

Units of about ``commit_every_bytes``, in a deterministic order: every process that plans the same move gets
the same units (the plan's fingerprint says so). An incremental run reads only what was appended since.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pyiceberg.manifest import ManifestEntryStatus
from pyiceberg.table.snapshots import Operation, ancestors_of

from iceberg_ops_provider.data_migration.results import MoveUnit
from iceberg_ops_provider.errors import MoveStateError
from iceberg_ops_provider.maintenance.files import ManifestReader
from iceberg_ops_provider.messages import Arg, message

if TYPE_CHECKING:
    from pyiceberg.expressions import BooleanExpression
    from pyiceberg.table import FileScanTask, Table
    from pyiceberg.table.snapshots import Snapshot

__all__ = ["IncrementalRange", "group_units", "incremental_range", "fingerprint", "scan_tasks", "snapshot_paths"]


def scan_tasks(
    table: Table, snapshot_id: int | None, row_filter: BooleanExpression, columns: Sequence[str] | None
) -> list[FileScanTask]:
    """The scan tasks of ``table`` at ``snapshot_id`` under ``row_filter``, ordered by file location."""
    if snapshot_id is None:
        return []
    scan = table.scan(row_filter=row_filter, snapshot_id=snapshot_id, selected_fields=tuple(columns or ("*",)))
    return sorted(scan.plan_files(), key=lambda task: task.file.file_path)


@dataclass(frozen=True)
class IncrementalRange:
    """The source files appended between two snapshots, and the snapshots skipped as not changing rows."""

    added_paths: frozenset[str]
    appends: int
    rewrites_skipped: int


def snapshot_paths(reader: ManifestReader, snapshot: Snapshot, status: ManifestEntryStatus) -> set[str]:
    """Locations of the data files ``snapshot`` itself marked ``status`` (``ADDED``, ``DELETED``)."""
    return {
        entry.data_file.file_path
        for manifest in reader.manifests(snapshot)
        if manifest.added_snapshot_id == snapshot.snapshot_id
        for entry in manifest.fetch_manifest_entry(reader.io, discard_deleted=False)
        if entry.status == status and entry.snapshot_id == snapshot.snapshot_id
    }


def incremental_range(table: Table, from_snapshot_id: int, to_snapshot_id: int, source: str) -> IncrementalRange:
    """The data files appended to ``table`` after ``from_snapshot_id`` up to ``to_snapshot_id``.

    Raises:
        MoveStateError: ``from_snapshot_id`` is not an ancestor of ``to_snapshot_id``, or a snapshot in
            between deleted or overwrote rows, or a rewrite folded appended files into others.
    """
    metadata = table.metadata
    chain: list[Snapshot] = []
    for snapshot in ancestors_of(metadata.snapshot_by_id(to_snapshot_id), metadata):  # type: ignore[arg-type]
        if snapshot.snapshot_id == from_snapshot_id:
            break
        chain.append(snapshot)
    else:
        raise MoveStateError(
            message(
                f"The incremental move's last source snapshot {from_snapshot_id} is no longer an ancestor of "
                f"{source}'s current snapshot {to_snapshot_id} (the source was rolled back, replaced, or that "
                "snapshot expired). The appended rows cannot be told apart: start a new {move_id} with "
                "{overwrite} to copy the table again.",
                move_id=Arg("move_id"),
                overwrite=Arg("mode", "overwrite"),
            )
        )
    reader = ManifestReader(table.io)
    added: set[str] = set()
    appends = rewrites = 0
    refused: list[str] = []
    for snapshot in reversed(chain):  # oldest first
        operation = snapshot.summary.operation if snapshot.summary is not None else Operation.APPEND
        if operation == Operation.APPEND:
            added |= snapshot_paths(reader, snapshot, ManifestEntryStatus.ADDED)
            appends += 1
        elif operation == Operation.REPLACE:
            rewritten = snapshot_paths(reader, snapshot, ManifestEntryStatus.DELETED)
            if rewritten & added:
                refused.append(f"{snapshot.snapshot_id} (replace: rewrote files appended since {from_snapshot_id})")
            rewrites += 1
        else:
            refused.append(f"{snapshot.snapshot_id} ({operation.value})")
    if refused:
        raise MoveStateError(
            message(
                f"{source} changed rows since the incremental move's last run at snapshot {from_snapshot_id}: "
                f"{', '.join(refused)}. An incremental move only carries appended rows, so deleting or overwriting "
                "them in the target is not something it can do. Re-copy with {overwrite} (a new {move_id}), "
                "or move from a snapshot before the change.",
                overwrite=Arg("mode", "overwrite"),
                move_id=Arg("move_id"),
            )
        )
    return IncrementalRange(frozenset(added), appends, rewrites)


def group_units(
    tasks: Sequence[FileScanTask], commit_every_bytes: int, *, move_id: str, source_snapshot_id: int | None
) -> tuple[str, tuple[MoveUnit, ...]]:
    """Group ``tasks`` (in order) into units of about ``commit_every_bytes``; returns the plan id and the units.

    A unit is closed once it holds ``commit_every_bytes`` (exceeding it by less than one file), so files
    written near half the unit size still come two to a unit and are copied in two parallel lanes. The
    grouping does not depend on the machine, and the plan id fingerprints the move, the snapshot and it.
    """
    groups: list[list[FileScanTask]] = []
    current: list[FileScanTask] = []
    size = 0
    for task in tasks:
        current.append(task)
        size += task.file.file_size_in_bytes
        if size >= commit_every_bytes:
            groups.append(current)
            current, size = [], 0
    if current:
        groups.append(current)
    plan_id = fingerprint([move_id, source_snapshot_id, [[t.file.file_path for t in g] for g in groups]])
    units = tuple(
        MoveUnit(
            move_id=move_id,
            plan_id=plan_id,
            source_snapshot_id=source_snapshot_id or 0,
            index=index,
            count=len(groups),
            files=tuple(task.file.file_path for task in group),
            bytes=sum(task.file.file_size_in_bytes for task in group),
            records=sum(task.file.record_count for task in group),
        )
        for index, group in enumerate(groups)
    )
    return plan_id, units


def fingerprint(value: Any) -> str:
    """A short stable hash of a JSON-able value: a plan, or what a move copies (filter text, columns, rename, mode)."""
    text = json.dumps(value, sort_keys=True, default=str, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:16]
