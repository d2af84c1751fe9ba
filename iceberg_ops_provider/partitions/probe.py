"""Has data for a partition (or matching a row filter) been committed: counted from a table's metadata alone.

:func:`partition_rows` walks the current snapshot's manifest entries, never a data file; a :class:`PartitionProbe`
counts certain ``rows`` and ``possible_rows`` (docs/sensors.md, "How the partition check works").
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from itertools import chain, islice
from typing import TYPE_CHECKING, Any

from pyiceberg.expressions import AlwaysTrue, And, BooleanExpression
from pyiceberg.manifest import DataFileContent
from pyiceberg.table.snapshots import Operation, ancestors_of

from iceberg_ops_provider.core.polling import check_errors
from iceberg_ops_provider.partitions.deletes import DeleteScope
from iceberg_ops_provider.partitions.values import file_matches, pruning_filter, table_name, wanted_values

if TYPE_CHECKING:
    from collections.abc import Callable, Iterator

    from pyiceberg.catalog import Catalog
    from pyiceberg.manifest import DataFile, ManifestEntry
    from pyiceberg.table import Table
    from pyiceberg.table.snapshots import Snapshot

__all__ = [
    "PartitionProbe",
    "SnapshotMark",
    "describe_partition_wait",
    "parse_after_snapshot",
    "partition_rows",
    "probe_partition",
    "snapshot_mark",
]


@dataclass(frozen=True)
class SnapshotMark:
    """Where "committed after a snapshot" begins, kept so that a wait survives the snapshot's expiry."""

    snapshot_id: int
    sequence_number: int
    timestamp_ms: int


def snapshot_mark(table: Table, snapshot_id: int) -> SnapshotMark:
    """The :class:`SnapshotMark` of ``snapshot_id``; of an expired one, just before its child on the current branch.

    Raises:
        ValueError: The table has no such snapshot, nor a snapshot whose parent it was.
    """
    snapshot = table.snapshot_by_id(snapshot_id)
    if snapshot is not None:
        return SnapshotMark(snapshot_id, snapshot.sequence_number or 0, snapshot.timestamp_ms)
    child = next((s for s in _ancestry(table) if s.parent_snapshot_id == snapshot_id), None)
    if child is not None:
        return SnapshotMark(snapshot_id, max((child.sequence_number or 0) - 1, 0), child.timestamp_ms - 1)
    raise ValueError(
        f"after_snapshot {snapshot_id} is not a snapshot of {table_name(table)} (expired, or of another table); "
        "pass a snapshot id the table still has, or none."
    )


def _ancestry(table: Table) -> Iterator[Snapshot]:
    """The current snapshot and its ancestors the table still has, newest first (at most 100,000: a cycle ends)."""
    return islice(ancestors_of(table.current_snapshot(), table.metadata), 100_000)


def parse_after_snapshot(value: object) -> int | None:
    """A snapshot id from a parameter: an integer, its digits as text, or ``None`` / ``""`` / ``"None"`` for none.

    ``"None"`` is accepted here because a template of an absent value renders so; the sensor refuses
    it when ``after_snapshot`` was given (see :class:`~iceberg_ops_provider.sensors.IcebergPartitionSensor`).

    Raises:
        ValueError: Anything else.
    """
    if value is None or (isinstance(value, str) and value.strip() in ("", "None")):
        return None
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    if isinstance(value, str) and re.fullmatch(r"-?[0-9]+", value.strip()):
        return int(value.strip())
    raise ValueError(f"after_snapshot must be a snapshot id (an integer), got {value!r}.")


_NEW_ROWS = "new"
_MAYBE_OLD_ROWS = "maybe old"


def _snapshots_after(table: Table, mark: SnapshotMark) -> set[int] | None:
    """For a format 1 table, the ids of the current snapshot's ancestors after the mark's; ``None`` if not reached."""
    if table.metadata.format_version >= 2:
        return None
    later: set[int] = set()
    for snapshot in _ancestry(table):
        if snapshot.snapshot_id == mark.snapshot_id:
            return later
        later.add(snapshot.snapshot_id)
    return None


def _added_after(entry: ManifestEntry, mark: SnapshotMark, table: Table, later: set[int] | None) -> str | None:
    """Whether the entry's file came after ``mark`` (``later``: format 1 snapshots after it): ``None``, new or old."""
    added_by = table.snapshot_by_id(entry.snapshot_id) if entry.snapshot_id is not None else None
    if table.metadata.format_version >= 2:
        before = entry.sequence_number is not None and entry.sequence_number <= mark.sequence_number
    elif later is not None:
        before = entry.snapshot_id not in later
    else:
        before = added_by is not None and added_by.timestamp_ms <= mark.timestamp_ms
    summary = added_by.summary if added_by is not None else None
    if before or summary is None:
        return None if before else _MAYBE_OLD_ROWS
    # A partition replaced with data written for it (Spark's INSERT OVERWRITE) holds new rows too.
    replaced = summary.additional_properties.get("replace-partitions") == "true"
    new = summary.operation == Operation.APPEND or (summary.operation == Operation.OVERWRITE and replaced)
    return _NEW_ROWS if new else _MAYBE_OLD_ROWS


@dataclass(frozen=True)
class PartitionProbe:
    """The data files a partition check found, at one snapshot (``None``: the table has none yet).

    ``rows`` is a lower bound, ``possible_rows`` an upper one (see the module); of the ``files`` that
    may hold matching rows, ``files_unproven`` the filter may match only in part and ``files_maybe_old``
    were rewritten after the mark ``after``: both count as possible only.
    """

    table: str
    snapshot_id: int | None
    rows: int
    possible_rows: int
    files: int
    files_with_deletes: int = 0
    files_unproven: int = 0
    files_maybe_old: int = 0
    after: SnapshotMark | None = None

    def enough(self, min_rows: int, count_possible_rows: bool = False) -> bool:
        """Whether ``min_rows`` is reached: by the certain rows, or the possible ones when asked to."""
        return (self.possible_rows if count_possible_rows else self.rows) >= min_rows

    def describe(self) -> str:
        """One line for logs and messages."""
        at = f"snapshot {self.snapshot_id}" if self.snapshot_id is not None else "no snapshot yet"
        where = f"{self.files} data file(s) of {self.table} at {at}"
        certain = "" if self.rows == self.possible_rows else f" certain, up to {self.possible_rows} possible,"
        text = f"{self.rows} row(s){certain} in {where}"
        reasons = []
        if self.files_with_deletes:
            reasons.append(f"{self.files_with_deletes} with delete files")
        if self.files_unproven:
            reasons.append(f"{self.files_unproven} the filter may match only in part")
        if self.files_maybe_old:
            since = f" since snapshot {self.after.snapshot_id}" if self.after is not None else ""
            reasons.append(f"{self.files_maybe_old} rewritten{since}, perhaps holding older rows")
        return text + (f" ({'; '.join(reasons)})" if reasons else "")

    def to_json(self) -> dict[str, Any]:
        """JSON-able form (what the sensor pushes to XCom)."""
        keys = ("table", "snapshot_id", "rows", "possible_rows", "files", "files_with_deletes")
        return {key: getattr(self, key) for key in keys}


def _all_rows_match(table: Table, row_filter: BooleanExpression) -> Callable[[DataFile], bool]:
    """Whether every row of a data file matches the row filter, from its partition and statistics."""
    from pyiceberg.expressions.visitors import _StrictMetricsEvaluator, residual_evaluator_of

    if isinstance(row_filter, AlwaysTrue):
        return lambda _: True
    schema = table.schema()
    residuals = {key: residual_evaluator_of(spec, row_filter, True, schema) for key, spec in table.specs().items()}
    strict = _StrictMetricsEvaluator(schema, row_filter, case_sensitive=True)

    def judge(data_file: DataFile) -> bool:
        residual = residuals.get(data_file.spec_id)
        if residual is not None and isinstance(residual.residual_for(data_file.partition), AlwaysTrue):
            return True
        return bool(strict.eval(data_file))

    return judge


def _row_filter(table: Table, where: str | None) -> BooleanExpression:
    """``where`` parsed and checked against the table's schema."""
    if where is None or not where.strip():
        return AlwaysTrue()
    from pyiceberg.expressions.parser import parse

    from iceberg_ops_provider.core.filters import bind_filter

    try:
        expression = parse(where)
    except Exception as exc:  # pyparsing's ParseException, whose own message recites the whole grammar
        raise ValueError(
            f"where={where!r} is not a PyIceberg row filter; write it like \"day = '2026-01-02' and amount > 0\" "
            "(=, !=, <, <=, >, >=, in (...), not in (...), is null, is not null, like 'a%', between ... and ..., "
            "combined with and, or, not; text in single quotes)."
        ) from exc
    try:
        return bind_filter(expression, table.schema())
    except ValueError as exc:
        raise ValueError(f"where={where!r} does not fit {table_name(table)}: {exc}") from exc


def _entries(table: Table, snapshot: Snapshot, scan_filter: BooleanExpression) -> list[ManifestEntry]:
    """The live data and delete file entries of the snapshot's manifests that ``scan_filter`` may match."""
    from pyiceberg.table import ManifestGroupPlanner

    planner = ManifestGroupPlanner(table_metadata=table.metadata, io=table.io, row_filter=scan_filter)
    return list(chain.from_iterable(planner.plan_manifest_entries(snapshot.manifests(table.io))))


def partition_rows(
    table: Table,
    partition: dict[str, Any] | None = None,
    where: str | None = None,
    after_snapshot: int | str | SnapshotMark | None = None,
) -> PartitionProbe:
    """Count the committed data for a partition and/or a row filter, from metadata only (see the module).

    ``partition`` holds values by field name of the current spec (files of an older spec without a
    field do not match); ``after_snapshot`` a snapshot id, or its :class:`SnapshotMark` (no lookup).

    Raises:
        ValueError: Unknown partition fields (the message lists the table's), values a field cannot
            take, a malformed or mismatched ``where``, or an ``after_snapshot`` the table does not have.
    """
    wanted = wanted_values(table, partition) if partition else []
    row_filter = _row_filter(table, where)
    mark = after_snapshot if isinstance(after_snapshot, SnapshotMark) else None
    if mark is None:
        after = parse_after_snapshot(after_snapshot)
        mark = snapshot_mark(table, after) if after is not None else None
    name = table_name(table)
    snapshot = table.current_snapshot()
    if snapshot is None:
        return PartitionProbe(name, None, 0, 0, 0, after=mark)
    scan_filter = And(row_filter, pruning_filter(table, wanted)) if wanted else row_filter
    deletes = DeleteScope(table.schema(), table.specs())
    data = []
    for entry in _entries(table, snapshot, scan_filter):
        if entry.data_file.content != DataFileContent.DATA:
            deletes.add(entry)
        elif file_matches(entry.data_file, table, wanted):
            data.append(entry)
    all_rows_match = _all_rows_match(table, row_filter)
    later = _snapshots_after(table, mark) if mark is not None else None
    rows = possible = files = with_deletes = unproven = maybe_old = 0
    for entry in data:
        added = _NEW_ROWS if mark is None else _added_after(entry, mark, table, later)
        if added is None:
            continue
        records = max(entry.data_file.record_count, 0)
        applied = deletes.for_data(entry)
        files += 1
        possible += records
        with_deletes += 1 if applied.files else 0
        if added == _MAYBE_OLD_ROWS:
            maybe_old += 1
        elif not all_rows_match(entry.data_file):
            unproven += 1
        elif not applied.equality:
            rows += max(records - applied.position_rows, 0)
    return PartitionProbe(name, snapshot.snapshot_id, rows, possible, files, with_deletes, unproven, maybe_old, mark)


def probe_partition(
    catalog: Catalog,
    table: str,
    partition: dict[str, Any] | None = None,
    where: str | None = None,
    after_snapshot: int | str | SnapshotMark | None = None,
) -> PartitionProbe:
    """Load ``table`` from ``catalog`` and run :func:`partition_rows` on it, catalog errors translated.

    Raises:
        NoSuchTableError: The table does not exist.
        CatalogUnavailableError: The catalog or its storage did not answer, or its database was busy (transient).
        ValueError: See :func:`partition_rows`.
    """
    with check_errors(catalog):
        return partition_rows(catalog.load_table(table), partition, where, after_snapshot)


def describe_partition_wait(
    table: str,
    partition: dict[str, Any] | None,
    where: str | None,
    min_rows: int,
    after_snapshot: int | str | SnapshotMark | None = None,
    count_possible_rows: bool = False,
) -> str:
    """What a partition wait is for, for messages."""
    parts = []
    if partition:
        parts.append("partition " + ", ".join(f"{key}={value!r}" for key, value in partition.items()))
    if where:
        parts.append(f"rows matching {where!r}")
    rows = "possible row(s)" if count_possible_rows else "row(s)"
    text = f"at least {min_rows} {rows} in {' and '.join(parts) or 'the table'} of {table}"
    after = after_snapshot.snapshot_id if isinstance(after_snapshot, SnapshotMark) else after_snapshot
    after = parse_after_snapshot(after)
    return text + (f", committed after snapshot {after}" if after is not None else "")
